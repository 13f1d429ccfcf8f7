"""A folder add reports every entry it does not write (an attack pass, three faults; README "A directory add").

* A file whose name is not UTF-8 is skipped with a reason that names it, its path shown with ``\\xNN`` escapes: the
  report stays valid text (the CLI's ``--json`` printed the raw byte, the HTTP answer was a 500 after the write).
* A file over ``ingest.max_chunks_per_document`` (``WRT-4132``) or whose URI names an existing directory
  (``WRT-4091``) is one more failure of a non-strict add, listed with its code; the others are written. ``--strict``
  still fails the whole add with that code, and nothing is written.
* A FIFO or a device is skipped as "not a regular file" and never opened (opening a FIFO blocks).

The HTTP routes: tests/http/test_folder_adds.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.cli.app import app
from context_engine.schema.context import RequestContext

ADMIN = RequestContext(account_id="default", role="admin")
OK = "# Ok\n\nA document that is written.\n"


def long_doc(sections: int = 12) -> str:
    """A markdown document of about ``sections`` chunks (over a limit of 5)."""
    return "# Long runbook\n\n" + "".join(
        f"## Step {i}\n\nCheck the pod events of replica {i} and the kubelet log on its node before restarting it.\n\n"
        for i in range(2 * sections)
    )


def not_utf8_name(folder: Path) -> str:
    """Write ``n<0xFF>.md`` in ``folder``: its name as Python sees it (a lone surrogate for the byte)."""
    with open(os.fsencode(folder) + b"/n\xff.md", "wb") as f:
        f.write(b"# x\n\ny\n")
    return "n\udcff.md"


def stored(engine, below: str) -> list[str]:
    return sorted(n.uri for n in engine.metadata.list_all_nodes("default") if n.uri.startswith(below))


def test_a_file_name_that_is_not_utf8_is_skipped_with_an_escaped_path_naming_it(make_engine, tmp_path):
    folder = tmp_path / "fz"
    folder.mkdir()
    (folder / "ok.md").write_text(OK, encoding="utf-8")
    not_utf8_name(folder)
    report = make_engine().add_resource(folder, "ctx://resources/fz2/", ADMIN)
    assert report.uris == ["ctx://resources/fz2/ok.md"]
    assert (report.skipped, report.failed) == (1, 0)
    [skip] = report.skipped_paths
    assert skip["path"] == "n\\xff.md"
    assert "'n\\xff.md'" in skip["reason"] and "not valid UTF-8" in skip["reason"]
    assert "ctx://resources/fz2/" not in skip["reason"]  # it names the file, not the folder's URI
    json.dumps(report.model_dump(), ensure_ascii=False).encode("utf-8")  # valid text: no lone surrogate


def test_fifos_and_devices_are_skipped_as_not_regular_files_and_never_opened(make_engine, tmp_path):
    folder = tmp_path / "special"
    folder.mkdir()
    (folder / "ok.md").write_text(OK, encoding="utf-8")
    os.mkfifo(folder / "pipe.md")  # opening it for reading would block until a writer comes: the add would hang
    expected = {"pipe.md": "a FIFO"}
    try:
        os.mknod(folder / "null.md", 0o644 | 0o020000, os.makedev(1, 3))  # a character device (/dev/null's numbers)
        expected["null.md"] = "a character device"
    except (PermissionError, OSError):
        pass  # no right to make devices here: the FIFO alone
    report = make_engine().add_resource(folder, "ctx://resources/special/", ADMIN)
    assert report.uris == ["ctx://resources/special/ok.md"]
    assert (report.nodes, report.skipped, report.failed) == (1, len(expected), 0)
    reasons = {s["path"]: s["reason"] for s in report.skipped_paths}
    assert set(reasons) == set(expected)
    for name, kind in expected.items():
        assert reasons[name] == f"not a regular file ({kind}); not read"


@pytest.fixture
def clash_engine(make_engine):
    """An engine with a chunk limit of 5 whose ``ctx://resources/fz/clash.md/`` is a directory."""
    engine = make_engine(ingest={"max_chunks_per_document": 5})
    engine.add_text("# Inner\n\nBelow a directory named like a file.", "ctx://resources/fz/clash.md/in.md", ADMIN)
    return engine


@pytest.fixture
def mixed_folder(tmp_path) -> Path:
    """``a.md`` (good), ``big.md`` (over 5 chunks), ``clash.md`` (names a directory below ctx://resources/fz/),
    ``empty.md`` (WRT-4221)."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "a.md").write_text(OK, encoding="utf-8")
    (folder / "big.md").write_text(long_doc(), encoding="utf-8")
    (folder / "clash.md").write_text("# Clash\n\nIts URI names an existing directory.\n", encoding="utf-8")
    (folder / "empty.md").write_bytes(b"")
    return folder


def test_a_non_strict_folder_add_lists_chunk_and_directory_failures_and_writes_the_rest(clash_engine, mixed_folder):
    before = stored(clash_engine, "ctx://resources/fz/")
    report = clash_engine.add_resource(mixed_folder, "ctx://resources/fz/", ADMIN)
    assert report.uris == ["ctx://resources/fz/a.md"] and report.nodes == 1
    codes = {f["path"]: f["code"] for f in report.failures}
    assert codes == {"big.md": "WRT-4132", "clash.md": "WRT-4091", "empty.md": "WRT-4221"}
    assert report.failed == 3 and [f["path"] for f in report.failures] == ["big.md", "clash.md", "empty.md"]
    errors = {f["path"]: f["error"] for f in report.failures}
    assert "ctx://resources/fz/big.md would make" in errors["big.md"]
    assert "names the existing directory ctx://resources/fz/clash.md/" in errors["clash.md"]
    assert stored(clash_engine, "ctx://resources/fz/") == sorted([*before, "ctx://resources/fz/a.md"])

    # strict: the whole add fails with the first file's code, and nothing is written
    (mixed_folder / "empty.md").unlink()
    for target in ("ctx://resources/strict/", "ctx://resources/fz/"):
        snapshot = stored(clash_engine, "ctx://resources/")
        with pytest.raises(ContextEngineError) as err:
            clash_engine.add_resource(mixed_folder, target, ADMIN, strict=True)
        assert err.value.code in (ErrorCode.TOO_MANY_CHUNKS, ErrorCode.CONFLICT)
        assert stored(clash_engine, "ctx://resources/") == snapshot
    (mixed_folder / "big.md").unlink()
    with pytest.raises(ContextEngineError) as err:
        clash_engine.add_resource(mixed_folder, "ctx://resources/fz/", ADMIN, strict=True)
    assert err.value.code is ErrorCode.CONFLICT


def test_a_folder_whose_files_all_fail_that_way_writes_nothing(clash_engine, tmp_path):
    folder = tmp_path / "only-bad"
    folder.mkdir()
    (folder / "big.md").write_text(long_doc(), encoding="utf-8")
    (folder / "clash.md").write_text("# Clash\n\nIts URI names an existing directory.\n", encoding="utf-8")
    before = stored(clash_engine, "ctx://resources/")
    report = clash_engine.add_resource(folder, "ctx://resources/fz/", ADMIN)
    assert (report.nodes, report.failed, report.uris) == (0, 2, [])
    assert stored(clash_engine, "ctx://resources/") == before


# ---- the CLI ---------------------------------------------------------------------------------------------------------
@pytest.fixture
def cli_home(tmp_path, embedder, monkeypatch):
    monkeypatch.setattr("context_engine.service.build_embedder", lambda *a, **k: embedder)  # the suite's model
    monkeypatch.setenv("CE_INGEST__MAX_CHUNKS_PER_DOCUMENT", "5")
    return str(tmp_path / "home")


def test_cli_add_json_is_valid_utf8_with_a_name_that_is_not(cli_home, tmp_path):
    folder = tmp_path / "fz"
    folder.mkdir()
    (folder / "ok.md").write_text(OK, encoding="utf-8")
    not_utf8_name(folder)
    result = CliRunner().invoke(app, ["--home", cli_home, "--json", "add", str(folder), "ctx://resources/fz2/"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout_bytes.decode("utf-8"))  # strict UTF-8: a raw 0xFF byte fails here
    assert report["uris"] == ["ctx://resources/fz2/ok.md"]
    assert [s["path"] for s in report["skipped_paths"]] == ["n\\xff.md"]


def test_cli_add_lists_a_file_over_the_chunk_limit_and_strict_fails_the_whole_add(cli_home, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text(OK, encoding="utf-8")
    (folder / "big.md").write_text(long_doc(), encoding="utf-8")
    runner = CliRunner()
    strict = runner.invoke(app, ["--home", cli_home, "--json", "add", "--strict", str(folder), "ctx://resources/s/"])
    assert strict.exit_code == 2 and json.loads(strict.stdout)["code"] == "WRT-4132", strict.output
    result = runner.invoke(app, ["--home", cli_home, "--json", "add", str(folder), "ctx://resources/d/"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["uris"] == ["ctx://resources/d/a.md"]
    assert [(f["path"], f["code"]) for f in report["failures"]] == [("big.md", "WRT-4132")]
    listed = json.loads(runner.invoke(app, ["--home", cli_home, "--json", "ls", "ctx://resources/"]).stdout)
    assert [n["uri"] for n in listed] == ["ctx://resources/d/"]  # the strict add wrote nothing
