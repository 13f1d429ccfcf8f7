"""Read-only homes (issue 27, "Hardening from an attack pass"; docs/deployment.md, "Read-only homes").

A home whose files cannot be written (``chmod -R a-w``, a read-only mount) or that is opened with ``read_only``
serves reads (search_memory, read_memory, lookup_knowledge, ls, stats) and refuses writes with ``WRT-5001``, instead
of failing to open with ``CFG-4001``; opening and reading it writes nothing (no migration, stamp, journal repair,
derived file or audit row).

The chmod variant needs a process that file permissions bind: as root it runs in a child process without
``CAP_DAC_OVERRIDE`` (``setpriv --bounding-set``), and is skipped, saying why, where that cannot be done.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.cli.app import app
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from tests.retrieval.conftest import ADMIN, HashEmbedder, seed_small_store

REPO = Path(__file__).resolve().parents[2]
DOC = "ctx://resources/ops/storage/disk-pressure.md"

# What a reader does, in this process or in a child one: every read, then every kind of write; prints one JSON line.
_READER = """
import json, sys
from pathlib import Path
from context_engine.errors import ContextEngineError
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from tests.retrieval.conftest import ADMIN, ALICE, HashEmbedder

def run(engine):
    out = {"read_only": engine.read_only}
    out["search"] = [h.uri for h in engine.search_memory("disk space", ADMIN, top_k=5).hits]
    out["memories"] = [h.uri for h in engine.search_memory("what does alice prefer", ALICE, top_k=5).hits]
    out["read"] = engine.read("%(doc)s", "L2", ADMIN)
    found = engine.lookup_knowledge("disk space running out", ADMIN, session_id="s1")
    out["lookup"] = [b.doc_id for b in found.evidence_blocks]
    out["lookup_warnings"] = found.traces.warnings
    out["ls"] = [v.uri for v in engine.ls("ctx://resources/ops/", ADMIN)]
    stats = engine.stats(ADMIN)
    out["stats"] = {k: stats[k] for k in ("nodes", "index_status")}
    writes = {
        "add_text": lambda: engine.add_text("# New\\n\\nnew text\\n", "ctx://resources/ops/new.md", ADMIN),
        "add_memory": lambda: engine.add_memory("Alice likes tea.", ALICE, category="preference"),
        "delete": lambda: engine.delete("%(doc)s", ADMIN),
        "reindex": lambda: engine.reindex(ADMIN, full=True),
    }
    out["writes"] = {}
    for name, write in writes.items():
        try:
            write()
            out["writes"][name] = "written"
        except ContextEngineError as err:
            out["writes"][name] = [err.code.value, err.details.get("read_only")]
    return out

if __name__ == "__main__":
    engine = ContextEngineService(load_settings(Path(sys.argv[1])), embedder=HashEmbedder())
    try:
        print(json.dumps(run(engine)))
    finally:
        engine.close()
""" % {"doc": DOC}  # noqa: UP031 - a Python script as a template: its own braces rule out str.format


def _reader_module():
    namespace: dict = {"__name__": "reader"}
    exec(compile(_READER, "reader", "exec"), namespace)  # noqa: S102 - the test's own script, run in this process
    return namespace["run"]


def _snapshot(home: Path) -> dict[str, str]:
    """sha256 of every file of the home but SQLite's reader files (``-wal``, ``-shm``: created by any WAL reader
    where the folder allows, they hold no data of a database closed cleanly)."""
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.rglob("*"))
        if p.is_file() and not p.name.endswith(("-wal", "-shm"))
    }


@pytest.fixture
def home(tmp_path) -> Path:
    home = tmp_path / "home"
    engine = ContextEngineService(load_settings(home), embedder=HashEmbedder())
    try:
        seed_small_store(engine)
        engine.search_memory("disk space", ADMIN)  # derived files, as a used home has them
        engine.lookup_knowledge("disk space running out", ADMIN, session_id="s0")
    finally:
        engine.close()
    return home


def _writable_answers(home: Path) -> dict:
    copy = home.parent / "writable-copy"
    shutil.copytree(home, copy)
    engine = ContextEngineService(load_settings(copy), embedder=HashEmbedder())
    try:
        return _reader_module()(engine)
    finally:
        engine.close()


def _assert_served_read_only(got: dict, want: dict) -> None:
    assert got["read_only"] is True
    for key in ("search", "memories", "read", "lookup", "ls", "stats"):
        assert got[key] == want[key], key
    assert got["search"] and got["memories"] and got["lookup"] and "Disk pressure" in got["read"]
    assert any("read-only home" in w for w in got["lookup_warnings"])
    assert got["writes"] == {name: [ErrorCode.STORAGE_FAILED.value, True] for name in want["writes"]}
    assert set(want["writes"].values()) == {"written"}  # the same calls write on a writable home


def test_a_home_opened_read_only_serves_reads_refuses_writes_and_writes_nothing(home):
    want = _writable_answers(home)
    before = _snapshot(home)
    engine = ContextEngineService(load_settings(home, read_only=True), embedder=HashEmbedder())
    try:
        got = _reader_module()(engine)
    finally:
        engine.close()
    _assert_served_read_only(got, want)
    assert _snapshot(home) == before


def _chmod_read_only(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        mode = p.stat().st_mode
        p.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _bound_by_permissions() -> list[str]:
    """A command prefix under which file permissions bind this process's children: none for a non-root user; for
    root, ``setpriv`` dropping the capabilities that override them (skips the test where that is not possible)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv is not available: a chmod'ed home would still be writable")
    prefix = [setpriv, "--bounding-set", "-dac_override,-dac_read_search,-fowner"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"running as root and cannot drop CAP_DAC_OVERRIDE here ({probe.stderr.strip()[:200]})")
    return prefix


def test_a_home_whose_files_are_not_writable_serves_reads_refuses_writes_and_writes_nothing(home, tmp_path):
    prefix = _bound_by_permissions()
    want = _writable_answers(home)
    _chmod_read_only(home)
    before = _snapshot(home)
    script = tmp_path / "reader.py"
    script.write_text(_READER, encoding="utf-8")
    try:
        proc = subprocess.run(
            [*prefix, sys.executable, str(script), str(home)],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO)])),
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        _assert_served_read_only(got, want)
        assert _snapshot(home) == before  # no file changed, none was added (SQLite could not even add -shm)
        assert not any(p.name.endswith(("-wal", "-shm")) for p in home.iterdir())
    finally:
        for p in [home, *home.rglob("*")]:
            p.chmod(p.stat().st_mode | stat.S_IWUSR)  # let tmp_path be removed


def test_the_cli_on_a_read_only_home_searches_and_answers_writes_with_wrt_5001(home, monkeypatch):
    embedder = HashEmbedder()
    for target in ("context_engine.providers.embedder.build_embedder", "context_engine.service.build_embedder"):
        monkeypatch.setattr(target, lambda settings, **kw: embedder, raising=True)
    monkeypatch.setenv("CE_READ_ONLY", "true")
    before = _snapshot(home)
    runner = CliRunner()
    found = runner.invoke(app, ["--home", str(home), "--json", "search", "disk space"])
    assert found.exit_code == 0, found.output
    assert DOC in found.output
    stats = runner.invoke(app, ["--home", str(home), "--json", "stats"])
    assert stats.exit_code == 0 and json.loads(stats.output)["nodes"] > 0, stats.output
    refused = runner.invoke(app, ["--home", str(home), "--json", "add-memory", "Alice likes tea."])
    assert refused.exit_code == ErrorCode.STORAGE_FAILED.exit_code, refused.output
    body = json.loads(refused.output)
    assert body["code"] == "WRT-5001" and body["details"]["read_only"] is True and "read-only" in body["message"]
    assert _snapshot(home) == before


def test_a_read_only_home_without_a_metadata_database_is_a_clean_configuration_error(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ContextEngineError) as info:
        ContextEngineService(load_settings(empty, read_only=True), embedder=HashEmbedder())
    assert info.value.code is ErrorCode.CONFIG_INVALID and "read-only" in info.value.message
    assert list(empty.iterdir()) == []
