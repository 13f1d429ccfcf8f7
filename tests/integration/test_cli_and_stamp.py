"""CLI contract (every command documented, exit codes, --json envelope) and the index's model stamp."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.cli.app import app
from tests.conftest import REPO


def test_every_cli_command_is_documented_in_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    names = sorted(c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands)
    assert names, "no commands registered"
    missing = [n for n in names if not re.search(rf"context-engine[^\n]*\b{re.escape(n)}\b", readme)]
    assert missing == []


def test_model_stamp_refuses_another_model(make_engine, tmp_path, embedder):
    home = tmp_path / "stamped"
    make_engine(home=home).close()

    class OtherModel:
        model_name, dim = "another/model", 384

        def embed_documents(self, texts, progress=None):
            raise AssertionError("never called")

        def embed_query(self, text):
            raise AssertionError("never called")

    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    with pytest.raises(ContextEngineError) as exc:
        ContextEngineService(load_settings(home), embedder=OtherModel())
    assert exc.value.code is ErrorCode.INDEX_MODEL_MISMATCH
    assert "all-MiniLM-L6-v2" in exc.value.message and "another/model" in exc.value.message


@pytest.mark.parametrize(
    ("args", "code", "exit_code"),
    [
        (["add", "{src}", "ctx://resources/../x/"], "WRT-4001", 2),
        (["add", "{src}", "ctx://resources/a\x01/"], "WRT-4001", 2),
        (["add", "{missing}", "ctx://resources/"], "WRT-4041", 2),
        (["add", "{empty}", "ctx://resources/"], "WRT-4221", 2),
        (["rm", "ctx://resources/nothing.md"], "RET-4032", 3),
        (["--as", "acme:wizard", "stats"], "WRT-4002", 2),
    ],
)
def test_cli_errors_print_envelope_and_exit_code(tmp_path, monkeypatch, args, code, exit_code, embedder):
    src = tmp_path / "doc.md"
    src.write_text("# Doc\n\nSome text.\n", encoding="utf-8")
    empty = tmp_path / "empty.md"
    empty.write_bytes(b"")
    filled = [a.format(src=src, missing=tmp_path / "missing.md", empty=empty) for a in args]
    monkeypatch.setattr(
        "context_engine.providers.embedder.build_embedder", lambda settings, **kw: embedder, raising=True
    )
    monkeypatch.setattr("context_engine.service.build_embedder", lambda settings, **kw: embedder, raising=True)
    result = CliRunner().invoke(app, ["--home", str(tmp_path / "home"), "--json", *filled])
    assert result.exit_code == exit_code, result.output
    body = json.loads(result.output)
    assert body["code"] == code and body["message"]
    assert set(body) == {"code", "message", "details", "request_id"}


@pytest.mark.parametrize(
    ("toml", "env", "needle"),
    [
        ("bogus = 1\n", {}, "bogus"),
        ("[ingest]\nchunk_max_tokens = 'many'\n", {}, "ingest.chunk_max_tokens"),
        ("[ingest\n", {}, "not valid TOML"),
        ("", {"CE_INGEST__CHUNK_MAX_TOKENS": "abc"}, "ingest.chunk_max_tokens"),
    ],
)
def test_bad_configuration_is_a_clean_cfg_error(tmp_path, monkeypatch, toml, env, needle):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(toml, encoding="utf-8")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    result = CliRunner().invoke(app, ["--home", str(home), "--json", "stats"])
    assert result.exit_code == 2, result.output
    body = json.loads(result.output)
    assert body["code"] == "CFG-4001" and needle in body["message"]


def test_home_that_is_a_file_is_a_clean_error(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    result = CliRunner().invoke(app, ["--home", str(f), "--json", "stats"])
    assert result.exit_code == 2 and json.loads(result.output)["code"] == "CFG-4001"


def test_add_skill_needs_exactly_one_body_source(tmp_path):
    body = tmp_path / "b.md"
    body.write_text("steps", encoding="utf-8")
    for extra in ([], ["--content", "x", "--file", str(body)]):
        r = CliRunner().invoke(app, ["--home", str(tmp_path / "h"), "--json", "add-skill", "s", "-d", "desc", *extra])
        assert r.exit_code == 2 and json.loads(r.output)["code"] == "WRT-4002"


def test_as_errors_are_plain_text_without_markup(tmp_path):
    r = CliRunner().invoke(app, ["--home", str(tmp_path / "h"), "--as", "a:b:c:d:e", "stats"])
    assert r.exit_code == 2
    assert "a:b:c:d:e" in r.output
