"""Crash safety on the S3 content store (issue 13; docs/security.md, docs/deployment.md "S3 content store"): a real
writer process with ``content.url = s3://...`` killed with SIGKILL at the protocol points where S3 differs from a
file system (a move and a delete are many calls, not one rename) leaves, after the next process's startup check, the
store exactly before or after the write, content, metadata and vectors in agreement (tests/integration/
test_crash_safety.py does the same on the local store, at random points). Skips when seaweedfs is not running."""

from __future__ import annotations

import json

import pytest

from tests.integration.store_checks import assert_store_consistent, file_texts
from tests.integration.test_crash_safety import ADMIN, BASE, ROOT, _doc, _open, _run_writer
from tests.s3_store import drop_prefix, s3_content_settings

pytestmark = pytest.mark.slow

CASES = [
    ("move_dir", "content_moved", {"op": "move", "src": f"{ROOT}b/", "dst": f"{ROOT}d9/"}),
    ("move_dir", "committed", {"op": "move", "src": f"{ROOT}b/", "dst": f"{ROOT}d9/"}),
    ("delete_dir", "content_deleted", {"op": "delete", "uri": f"{ROOT}b/", "recursive": True}),
    ("readd", "content_written:2", {"op": "readd", "uri": f"{ROOT}a/doc0.md", "text": _doc("ibis", sections=2)}),
    ("add_dir", "before_commit", {"op": "add", "uri": f"{ROOT}c9/new.md", "text": _doc("wombat")}),
]


def _after(op: dict) -> dict[str, str]:
    after = dict(BASE)
    if op["op"] in ("add", "readd"):
        after[op["uri"]] = op["text"]
    elif op["op"] == "delete":
        after = {u: t for u, t in after.items() if not u.startswith(op["uri"])}
    else:
        after = {(op["dst"] + u[len(op["src"]) :] if u.startswith(op["src"]) else u): t for u, t in after.items()}
    return after


@pytest.mark.parametrize(("kind", "point", "op"), CASES, ids=[f"{k}-{p}" for k, p, _ in CASES])
def test_a_writer_killed_mid_write_on_s3_leaves_the_store_before_or_after(kind, point, op, tmp_path, default_embedder):
    content = s3_content_settings("crash")
    home = tmp_path / "home"
    home.mkdir()
    # the writer process reads its settings from the home, as a replica would from its configuration
    lines = ["[content]"] + [f"{k} = {json.dumps(v)}" for k, v in content.items()]
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    try:
        with _open(home, default_embedder) as engine:
            for uri, text in BASE.items():
                engine.add_text(text, uri, ADMIN)
        done = _run_writer(home, dict(op, point=point))
        after = _after(op)
        with _open(home, default_embedder) as engine:  # its startup check undoes or finishes the killed write
            state = file_texts(engine)
            assert state in (BASE, after), f"{kind} at {point}: neither before nor after"
            assert state == (after if done or point == "committed" else BASE)
            assert_store_consistent(engine, home)
            engine.add_text(_doc("okapi"), f"{ROOT}a/after.md", ADMIN)
            assert_store_consistent(engine, home)
    finally:
        drop_prefix(content)
