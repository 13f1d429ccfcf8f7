"""Crash safety (issue 14, docs/security.md): a writer killed with SIGKILL at a random point of an add, a re-add, a
delete or a move leaves, after the startup check of the next process, a store that is exactly before or exactly
after the write, with content, metadata and vectors in agreement, every committed node searchable and no deleted one
returned.

Each run copies a seeded base home, starts a real writer process (the default embedding model, the LanceDB index)
and kills it: at a named point of the write protocol (``ingest.crash_at``, the writer kills itself) or after a
random delay (the parent kills it, wherever it is). ``--crash-runs N`` sets the number of runs (10 by default, in CI;
the on-demand mode is ``--crash-runs 100``).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import VectorFilter
from context_engine.schema.query import SearchMemoryRequest
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from tests.integration.store_checks import assert_store_consistent, file_texts

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ADMIN = RequestContext(account_id="default", role="admin")
ROOT = "ctx://resources/crash/"
# Protocol points (ingest/journal.py, ingest/pipeline.py) every write reaches, those of some writes only, and
# "timer": the parent kills the writer after a random delay, wherever it is.
POINTS = (
    "intent_committed",
    "content_written",
    "content_written:2",
    "before_commit",
    "committed",
    "index_synced",
    "records_discarded",
    "timer",
)
OP_POINTS = {
    "readd": ("index_deleted",),  # fewer chunks: rows deleted from the index
    "delete_file": ("content_deleted", "index_deleted"),
    "delete_dir": ("content_deleted", "index_deleted"),
    "move_file": ("content_moved", "index_deleted"),
    "move_dir": ("content_moved", "index_deleted"),
}
_BODY = (
    "The {word} runbook keeps the steps for one incident. Check the dashboards, page the owner, write the timeline. "
    "Nothing else in this corpus uses the word {word}.\n"
)


def _doc(word: str, sections: int = 1) -> str:
    parts = [f"# Runbook {word}\n\n" + _BODY.format(word=word)]
    for k in range(1, sections):
        parts.append(f"## Part {k} of {word}\n\n" + _BODY.format(word=word) * 3)
    return "\n".join(parts)


BASE = {
    f"{ROOT}a/doc0.md": _doc("zebrafinch", sections=6),  # several chunks: a re-add with fewer deletes rows
    f"{ROOT}a/doc1.md": _doc("quokka"),
    f"{ROOT}a/doc2.md": _doc("axolotl"),
    f"{ROOT}b/doc3.md": _doc("narwhal"),
    f"{ROOT}b/doc4.md": _doc("pangolin"),
    f"{ROOT}doc5.md": _doc("capybara"),
}


def _operations(run: int) -> dict:
    """The write of run ``run`` and the files it leaves: ``(op, after)``."""
    rng = random.Random(1400 + run)
    kind = rng.choice(["add", "add_dir", "readd", "delete_file", "delete_dir", "move_file", "move_dir"])
    after = dict(BASE)
    if kind in ("add", "add_dir"):
        uri = f"{ROOT}a/new{run}.md" if kind == "add" else f"{ROOT}c{run}/new{run}.md"
        after[uri] = _doc(f"wombat{run}")
        op = {"op": "add", "uri": uri, "text": after[uri]}
    elif kind == "readd":
        uri = f"{ROOT}a/doc0.md"
        after[uri] = _doc(f"ibis{run}", sections=2)
        op = {"op": "readd", "uri": uri, "text": after[uri]}
    elif kind == "delete_file":
        del after[f"{ROOT}doc5.md"]
        op = {"op": "delete", "uri": f"{ROOT}doc5.md"}
    elif kind == "delete_dir":
        for uri in [u for u in after if u.startswith(f"{ROOT}b/")]:
            del after[uri]
        op = {"op": "delete", "uri": f"{ROOT}b/", "recursive": True}
    elif kind == "move_file":
        after[f"{ROOT}b/moved{run}.md"] = after.pop(f"{ROOT}a/doc1.md")
        op = {"op": "move", "src": f"{ROOT}a/doc1.md", "dst": f"{ROOT}b/moved{run}.md"}
    else:
        for uri in [u for u in after if u.startswith(f"{ROOT}b/")]:
            after[uri.replace(f"{ROOT}b/", f"{ROOT}d{run}/")] = after.pop(uri)
        op = {"op": "move", "src": f"{ROOT}b/", "dst": f"{ROOT}d{run}/"}
    op["kind"] = kind
    op["point"] = rng.choice(POINTS + OP_POINTS.get(kind, ()) * 2)
    op["delay_s"] = rng.uniform(0.0, 2.0)  # the kill lands before, during or after the commit
    return {"op": op, "after": after}


def _open(home: Path, embedder) -> ContextEngineService:
    return ContextEngineService(load_settings(home, embedding={"backend": "use-multilingual"}), embedder=embedder)


@pytest.fixture(scope="module")
def base_home(tmp_path_factory, default_embedder) -> Path:
    home = tmp_path_factory.mktemp("crash-base") / "home"
    with _open(home, default_embedder) as engine:
        for uri, text in BASE.items():
            engine.add_text(text, uri, ADMIN)
    return home


def _run_writer(home: Path, op: dict) -> bool:
    """Run the writer until it dies or finishes; returns whether it reported the write done."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO)]),
        CE_EMBEDDING__BACKEND="use-multilingual",
    )
    env.pop("CE_INGEST__CRASH_AT", None)
    if op["point"] != "timer":
        env["CE_INGEST__CRASH_AT"] = op["point"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.crash_writer", str(home), json.dumps(op)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert proc.stdout is not None and proc.stdin is not None
    ready = proc.stdout.readline()
    assert ready.strip() == '{"ready": true}', proc.stderr.read() if proc.stderr else ready
    proc.stdin.write("go\n")
    proc.stdin.flush()
    if op["point"] == "timer":
        time.sleep(op["delay_s"])
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    done = '{"done": true}' in out
    assert done or proc.returncode == -signal.SIGKILL, f"writer failed (rc {proc.returncode}): {err[-2000:]}"
    return done


def pytest_generate_tests(metafunc):
    if "run" in metafunc.fixturenames:
        runs = metafunc.config.getoption("--crash-runs")
        metafunc.parametrize("run", range(runs), ids=[f"run{i}" for i in range(runs)])


def test_sigkill_at_a_random_point_leaves_the_store_before_or_after_the_write(
    run, base_home, default_embedder, tmp_path
):
    plan = _operations(run)
    op, after = plan["op"], plan["after"]
    home = tmp_path / "home"
    shutil.copytree(base_home, home)
    done = _run_writer(home, op)

    with _open(home, default_embedder) as engine:  # its startup check undoes or finishes the killed write
        state = file_texts(engine)
        assert state in (BASE, after), f"{op['kind']} at {op['point']}: neither before nor after"
        if done:
            assert state == after
        outcome = "after" if state == after else "before"
        print(json.dumps({"run": run, "kind": op["kind"], "point": op["point"], "killed": not done, "state": outcome}))
        assert_store_consistent(engine, home)
        # every committed file is found by its word (BM25 and search_memory); no deleted or moved-away URI comes back
        flt = VectorFilter(account_id="default", levels=[0, 2])
        gone = (set(BASE) | set(after)) - set(state)
        for uri, text in state.items():
            word = text.split()[2]
            keyword_hits = {h.uri for h in engine.keyword_index.search(word, 5, flt)}
            assert uri in keyword_hits and not gone & keyword_hits, (uri, word)
            hits = engine.search_memory(SearchMemoryRequest(query=f"{word} runbook", top_k=5), ADMIN).hits
            assert uri in [h.uri for h in hits], (uri, word)
            assert not gone & {h.uri for h in hits}
        for uri in gone:
            word = (BASE.get(uri) or after[uri]).split()[2]
            if all(word != t.split()[2] for t in state.values()):  # a moved file keeps its word under its new URI
                assert engine.keyword_index.search(word, 5, flt) == []
        # the store accepts the next write as usual
        engine.add_text(_doc("okapi"), f"{ROOT}a/after.md", ADMIN)
        assert_store_consistent(engine, home)
