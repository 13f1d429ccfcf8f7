"""``context-engine keys create|list|revoke``: the key is printed once, listed without its secret, revocable."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from context_engine.interfaces.cli.app import app
from context_engine.interfaces.cli.common import out
from context_engine.settings import load_settings
from context_engine.storage.metadata.keys import ApiKeyStore
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore


def test_keys_create_list_revoke(tmp_path):
    runner = CliRunner()
    home = str(tmp_path / "home")
    r = runner.invoke(app, ["--home", home, "--json", "keys", "create", "acme:user:alice:bot", "--name", "ci"])
    assert r.exit_code == 0, r.output
    created = json.loads(r.output)
    token = created["api_key"]
    assert token.startswith("ce_" + created["key_id"] + "_")
    assert (created["account_id"], created["role"], created["user_space"], created["agent_space"]) == (
        "acme",
        "user",
        "alice",
        "bot",
    )

    r = runner.invoke(app, ["--home", home, "--json", "keys", "list"])
    listed = json.loads(r.output)
    assert [k["key_id"] for k in listed] == [created["key_id"]]
    assert token not in r.output and "secret_hash" not in r.output

    metadata = SqlMetadataStore.sqlite(load_settings(home).home_path / "metadata.db")
    try:
        assert ApiKeyStore(metadata, cache_ttl_s=0).authenticate(token).context.user_space == "alice"
        r = runner.invoke(app, ["--home", home, "keys", "revoke", created["key_id"]])
        assert r.exit_code == 0 and "revoked" in r.output
        assert ApiKeyStore(metadata, cache_ttl_s=0).authenticate(token) is None
    finally:
        metadata.close()

    assert json.loads(runner.invoke(app, ["--home", home, "--json", "keys", "list"]).output) == []
    assert len(json.loads(runner.invoke(app, ["--home", home, "--json", "keys", "list", "--all"]).output)) == 1


def test_keys_errors_use_the_envelope(tmp_path):
    runner = CliRunner()
    home = str(tmp_path / "home")
    r = runner.invoke(app, ["--home", home, "--json", "keys", "create", "acme:wizard"])
    assert r.exit_code == 2 and json.loads(r.output)["code"] == "WRT-4002"
    r = runner.invoke(app, ["--home", home, "--json", "keys", "revoke", "0123456789abcdef"])
    assert r.exit_code == 2 and json.loads(r.output)["code"] == "WRT-4042"


@pytest.mark.parametrize("columns", [100, 80])
def test_keys_list_never_cuts_the_key_id(tmp_path, monkeypatch, columns):
    """Trial finding: at 80 or 100 columns the table cut the id (``06d070844…``), which `keys revoke` needs whole."""
    runner = CliRunner()
    home = str(tmp_path / "home")
    ids = []
    for name in ("a long descriptive name for the nightly ingestion bot", "ci"):
        r = runner.invoke(
            app, ["--home", home, "--json", "keys", "create", "acme-corp:user:alice-smith:bot", "-n", name]
        )
        ids.append(json.loads(r.output)["key_id"])
    monkeypatch.setattr(out, "width", columns)
    listed = runner.invoke(app, ["--home", home, "keys", "list"])
    assert listed.exit_code == 0, listed.output
    assert max(len(line) for line in listed.output.splitlines()) <= columns
    for key_id in ids:
        assert key_id in listed.output  # whole, on one line
        revoked = runner.invoke(app, ["--home", home, "keys", "revoke", key_id])
        assert revoked.exit_code == 0 and "revoked" in revoked.output


@pytest.mark.parametrize("argv", [["--help"], ["keys", "list", "--help"], ["rm", "--help"]])
def test_help_shows_flags_as_flags(argv):
    """Trial finding: typer's rich help printed ``--json <bool>`` and ``--help <bool>``, as if they took a value."""
    r = CliRunner().invoke(app, argv)
    assert r.exit_code == 0, r.output
    assert "<bool>" not in r.output
    flag = {"--help": "--json", "keys": "--all", "rm": "--recursive"}[argv[0]]
    line = next(ln for ln in r.output.splitlines() if f" {flag} " in ln)
    assert "<" not in line  # no value type on the flag's line
    assert "<str>" in r.output or "<path>" in r.output  # options that take a value keep their type
