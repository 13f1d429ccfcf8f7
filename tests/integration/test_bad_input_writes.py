"""Bad input on the write path (issue 14): a file URI naming an existing directory (and the reverse) is
``WRT-4091`` with the store unchanged; a non-recursive delete removes exactly one node; blank names are refused;
invalid Unicode in CLI arguments is an envelope, not a traceback."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.cli.app import app
from context_engine.schema.context import RequestContext

ADMIN = RequestContext(account_id="acme", role="admin")


def _snapshot(engine) -> list[tuple[str, bool, str | None]]:
    """Every node of the account with its kind and content hash."""
    nodes = engine.metadata.list_all_nodes("acme")
    return [(n.uri, n.is_dir, n.content_hash) for n in nodes]


def _raises(code: ErrorCode, fn, *args, **kwargs) -> ContextEngineError:
    with pytest.raises(ContextEngineError) as caught:
        fn(*args, **kwargs)
    assert caught.value.code is code, caught.value
    return caught.value


@pytest.fixture
def engine(make_engine):
    e = make_engine()
    e.add_text("# Alpha\n\nFirst document in the folder.", "ctx://resources/dir/a.md", ADMIN)
    e.add_text("# Beta\n\nSecond document, deeper.", "ctx://resources/dir/sub/b.md", ADMIN)
    e.add_text("# Gamma\n\nA file at the top.", "ctx://resources/g.md", ADMIN)
    return e


def test_a_file_uri_naming_a_directory_is_a_conflict(engine):
    before = _snapshot(engine)
    err = _raises(ErrorCode.CONFLICT, engine.add_text, "# Replaced\n\nnew text", "ctx://resources/dir", ADMIN)
    assert err.details["existing"] == "ctx://resources/dir/"
    _raises(ErrorCode.CONFLICT, engine.add_text, "# Replaced\n\nnew text", "ctx://resources/dir/sub", ADMIN)
    assert _snapshot(engine) == before
    assert engine.read("ctx://resources/dir/sub/b.md", "L2", ADMIN).startswith("# Beta")


def test_a_directory_path_naming_a_file_is_a_conflict(engine, tmp_path):
    before = _snapshot(engine)
    _raises(ErrorCode.CONFLICT, engine.add_text, "# Inner\n\ntext", "ctx://resources/g.md/inner.md", ADMIN)
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "x.md").write_text("# X\n\nx text", encoding="utf-8")
    _raises(ErrorCode.CONFLICT, engine.add_resource, folder, "ctx://resources/g.md/", ADMIN)
    _raises(ErrorCode.CONFLICT, engine.add_resource, folder, "ctx://resources/g.md/deeper/", ADMIN)
    assert _snapshot(engine) == before


def test_a_non_recursive_delete_never_wipes_a_subtree(engine):
    before = _snapshot(engine)
    for uri in ("ctx://resources/dir", "ctx://resources/dir/", "ctx://resources/dir/sub"):
        err = _raises(ErrorCode.CONFLICT, engine.delete, uri, ADMIN)
        assert err.details["descendants"] >= 1
    assert _snapshot(engine) == before
    assert engine.read("ctx://resources/dir/a.md", "L2", ADMIN).startswith("# Alpha")
    report = engine.delete("ctx://resources/dir/a.md", ADMIN)
    assert report.uris == ["ctx://resources/dir/a.md"]
    report = engine.delete("ctx://resources/dir", ADMIN, recursive=True)
    assert set(report.uris) == {"ctx://resources/dir/", "ctx://resources/dir/sub/", "ctx://resources/dir/sub/b.md"}


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda e: e.add_skill("", "restarts a pod", "body", ADMIN), ErrorCode.REQUEST_INVALID),
        (lambda e: e.add_skill("   ", "restarts a pod", "body", ADMIN), ErrorCode.REQUEST_INVALID),
        (lambda e: e.add_skill(".md", "restarts a pod", "body", ADMIN), ErrorCode.REQUEST_INVALID),
        (lambda e: e.add_skill("restart", "restarts a pod", "body", ADMIN, category=" "), ErrorCode.URI_INVALID),
        (lambda e: e.add_memory("I like tea", ADMIN, category="  "), ErrorCode.URI_INVALID),
        (lambda e: e.add_text("# T\n\nx", "ctx://resources/ /t.md", ADMIN), ErrorCode.URI_INVALID),
        (lambda e: e.add_text("# T\n\nx", "ctx://resources/a//t.md", ADMIN), ErrorCode.URI_INVALID),
        (lambda e: e.add_text("# T\n\nx", "ctx://resources/a/ .md", ADMIN), ErrorCode.URI_INVALID),
        (lambda e: e.add_messages([{"content": "hi"}], " ", ADMIN), ErrorCode.URI_INVALID),
    ],
    ids=[
        "skill-empty",
        "skill-blank",
        "skill-only-extension",
        "skill-category",
        "memory-category",
        "segment",
        "double-slash",
        "blank-stem",
        "session",
    ],
)
def test_empty_or_blank_names_are_refused(engine, call, code):
    before = _snapshot(engine)
    _raises(code, call, engine)
    assert _snapshot(engine) == before


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["search", "disk \udcff"], "RET-4001"),
        (["ls", "ctx://resources/\udced\udca0\udc80/"], "RET-4001"),
        (["add-memory", "bad \udcff"], "WRT-4221"),
        (["add-skill", "sk\udcffill", "--description", "d", "--content", "c"], "WRT-4221"),
        (["--as", "acme:user:\udcff", "ls"], "RET-4001"),
    ],
)
def test_cli_arguments_that_are_not_utf8(tmp_path, args, code):
    # bytes that are not UTF-8 reach Python's argv as lone surrogates (surrogateescape), as written here
    result = CliRunner().invoke(app, ["--home", str(tmp_path / "home"), "--json", *args])
    assert result.exit_code == 2, result.output
    envelope = json.loads(result.stdout)
    assert envelope["code"] == code
    assert envelope["details"]["reason"] == "invalid_unicode"
    assert not (tmp_path / "home").exists()  # refused before the engine opened


@pytest.fixture
def linked_folder(tmp_path):
    """A folder with a document, a link to a file outside it, a link to a directory outside it, a dangling link and
    a link to a document inside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nroot:x:0:0:root:/root:/bin/bash", encoding="utf-8")
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("# Alpha\n\nA document inside the folder.", encoding="utf-8")
    (folder / "passwd.md").symlink_to(outside / "secret.md")
    (folder / "sub" / "etc").symlink_to(outside, target_is_directory=True)
    (folder / "gone.md").symlink_to(tmp_path / "missing.md")
    (folder / "sub" / "again.md").symlink_to(folder / "a.md")
    return folder


def test_symlinks_leaving_the_folder_are_skipped_and_reported(make_engine, linked_folder):
    engine = make_engine()
    report = engine.add_resource(linked_folder, "ctx://resources/docs/", ADMIN)
    assert sorted(report.uris) == ["ctx://resources/docs/a.md", "ctx://resources/docs/sub/again.md"]
    reasons = {s["path"]: s["reason"] for s in report.skipped_paths}
    assert set(reasons) == {"passwd.md", "sub/etc", "gone.md"}
    assert "outside the folder" in reasons["passwd.md"] and "outside the folder" in reasons["sub/etc"]
    assert report.skipped == 3
    texts = [engine.read(u, "L2", ADMIN) for u in report.uris]
    assert all("root:x:0:0" not in t for t in texts)


def test_two_files_whose_names_differ_only_in_their_unicode_form_are_not_both_written(make_engine, tmp_path):
    """Failed at 6adc204 (an attack pass): "café.md" written as NFD and as NFC map to one URI; a folder add listed it
    twice, counted two nodes and kept the text of whichever came last. The second is now skipped with its reason."""
    folder = tmp_path / "f4"
    folder.mkdir()
    nfd, nfc = "cafe\u0301.md", "caf\u00e9.md"
    (folder / nfd).write_text("# Café\n\nThe NFD version.", encoding="utf-8")
    (folder / nfc).write_text("# Café\n\nThe NFC version.", encoding="utf-8")
    if len(list(folder.iterdir())) != 2:
        pytest.skip("this file system normalises names: the two files are one")
    engine = make_engine()
    report = engine.add_resource(folder, "ctx://resources/f4/", ADMIN)
    assert report.uris == ["ctx://resources/f4/caf\u00e9.md"] and report.nodes == 1
    [skipped] = report.skipped_paths
    first = sorted([nfd, nfc])[0]
    assert skipped["path"] == sorted([nfd, nfc])[1] and f"also that of {first}" in skipped["reason"]
    kept = "NFD" if first == nfd else "NFC"
    assert f"The {kept} version." in engine.read("ctx://resources/f4/caf\u00e9.md", "L2", ADMIN)


def test_a_setting_allows_links_to_files_outside(make_engine, linked_folder):
    engine = make_engine(ingest={"follow_symlinks_outside_root": True})
    report = engine.add_resource(linked_folder, "ctx://resources/docs/", ADMIN)
    assert "ctx://resources/docs/passwd.md" in report.uris
    assert {s["path"] for s in report.skipped_paths} == {"sub/etc", "gone.md"}  # directories: never descended


def test_python_api_text_with_a_lone_surrogate_is_content_invalid(engine):
    before = _snapshot(engine)
    _raises(ErrorCode.CONTENT_INVALID, engine.add_text, "# T\n\nbad \ud800 text", "ctx://resources/s.md", ADMIN)
    _raises(ErrorCode.CONTENT_INVALID, engine.add_skill, "s", "restarts \udcff", "body", ADMIN)
    assert _snapshot(engine) == before


def test_python_api_queries_with_a_lone_surrogate_are_query_invalid(engine):
    calls = [
        lambda: engine.search_memory("disk \ud800", ADMIN),
        lambda: engine.read_memory("ctx://resources/\udcff.md", ADMIN),
        lambda: engine.lookup_knowledge("disk \ud800", ADMIN),
        lambda: engine.similar_search("disk", ADMIN, categories=["\udcff"]),
    ]
    for call in calls:
        err = _raises(ErrorCode.QUERY_INVALID, call)
        assert err.details["reason"] == "invalid_unicode"
