"""deploy/compose.scale-out.yaml, deploy/nginx.conf and deploy/make-secrets.sh (issue 13, docs/deployment.md),
checked without Docker (no daemon on these machines): pinned images, one published port on loopback, secrets only
as files, and the replicas' environment plus those files are valid settings naming the three shared stores."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml
from typer.testing import CliRunner

from context_engine.interfaces.cli.app import app
from context_engine.settings import load_settings
from tests.conftest import REPO

DEPLOY = REPO / "deploy"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.scale-out.yaml").read_text(encoding="utf-8"))


def test_every_image_is_pinned_and_only_the_balancer_publishes_a_port_on_loopback(compose):
    for name, svc in compose["services"].items():
        image = svc["image"]
        assert ":" in image and not image.endswith(":latest"), name
        if name != "lb":
            assert "ports" not in svc, name
    assert compose["services"]["lb"]["ports"] == ["127.0.0.1:8420:8420"]


def test_replicas_and_migrate_share_one_configuration_without_secrets_in_the_environment(compose):
    engine, migrate = compose["services"]["context-engine"], compose["services"]["migrate"]
    assert engine["environment"] == migrate["environment"] and engine["secrets"] == migrate["secrets"]
    assert engine["deploy"]["replicas"] >= 2 and engine["command"] == ["serve"] and migrate["command"] == ["migrate"]
    assert engine["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    for svc in compose["services"].values():
        for key, value in (svc.get("environment") or {}).items():
            assert not re.search(r"PASSWORD$|SECRET_|_KEY$|TOKEN$|METADATA__URL$", key) or key.endswith("_FILE"), key
            assert "@" not in str(value), key  # no credentials inside a URL
    for secret in engine["secrets"]:
        assert secret in compose["secrets"]


def test_the_secrets_script_and_the_environment_make_valid_scale_out_settings(compose, tmp_path, monkeypatch):
    work = tmp_path / "deploy"
    shutil.copytree(DEPLOY, work, ignore=shutil.ignore_patterns("secrets"))
    subprocess.run(["bash", str(work / "make-secrets.sh")], check=True, capture_output=True)
    secrets = work / "secrets"
    for name, entry in compose["secrets"].items():
        assert (work / entry["file"]).is_file(), name
    engine = compose["services"]["context-engine"]
    for key, value in engine["environment"].items():
        monkeypatch.setenv(key, str(value))
    monkeypatch.setenv("CE_SECRETS_DIR", str(secrets))  # /run/secrets in the container
    settings = load_settings(tmp_path / "home")
    url = settings.metadata.url
    assert url is not None and url.get_secret_value().startswith("postgresql+psycopg://ce:")
    password = (secrets / "postgres_password").read_text()
    assert url.get_secret_value() == f"postgresql+psycopg://ce:{password}@postgres:5432/ce"
    assert settings.content.url == "s3://context-engine/prod"
    key = settings.content.s3_secret_access_key
    assert key is not None and key.get_secret_value() == (secrets / "ce_content__s3_secret_access_key").read_text()
    assert (settings.vector.backend, settings.vector.milvus.uri) == ("milvus", "http://milvus:19530")
    assert password not in repr(settings) and password not in settings.model_dump_json()
    again = subprocess.run(["bash", str(work / "make-secrets.sh")], capture_output=True, text=True)
    assert again.returncode == 1 and "exists" in again.stderr  # never overwrites existing secrets


def test_the_balancer_forwards_to_the_replicas_port(compose):
    conf = (DEPLOY / "nginx.conf").read_text(encoding="utf-8")
    assert re.search(r"server context-engine:8420\b", conf) and "listen 8420;" in conf
    assert "./nginx.conf:/etc/nginx/conf.d/default.conf:ro" in compose["services"]["lb"]["volumes"]


def test_the_commands_of_the_compose_file_exist():
    for argv in (["serve", "--help"], ["migrate", "--help"], ["keys", "create", "--help"]):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 0, (argv, result.output)
