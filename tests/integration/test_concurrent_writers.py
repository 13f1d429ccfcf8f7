"""Concurrent writers (issue 14): 4 OS processes each add 50 documents into one directory at the same time, each
through its own service on the same home (the default embedding model, the LanceDB index). Nothing is lost: every
document is a node, indexed, found by BM25 and search_memory, counted in the directory's summary, and the directory's
L0/L1 equal a fresh recompute from its committed children (a summary is never built from a stale list of them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import Level, VectorFilter
from context_engine.schema.query import SearchMemoryRequest
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from tests.integration.store_checks import assert_store_consistent

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ADMIN = RequestContext(account_id="default", role="admin")
DIR = "ctx://resources/shared/"
WRITERS, WRITES = 4, 50

_WRITER = """
import sys
from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService

home, writer, writes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ctx = RequestContext(account_id="default", role="admin")
with ContextEngineService.open(home) as engine:
    print("ready", flush=True)
    sys.stdin.readline()  # every writer starts at once
    for i in range(writes):
        word = f"w{writer}x{i}token"
        text = f"# Note {writer}-{i}\\n\\nThe note {word} of writer {writer}.\\n"
        engine.add_text(text, f"{sys.argv[4]}n{writer}-{i:03d}.md", ctx)
    counter = engine.metrics.vector_commit_retries.collect()[0]
    print("done", int(sum(s.value for s in counter.samples if s.name.endswith("_total"))), flush=True)
"""


def test_four_processes_writing_into_one_directory_lose_nothing(tmp_path, default_embedder):
    home = tmp_path / "home"
    settings = load_settings(home, embedding={"backend": "use-multilingual"})
    ContextEngineService(settings, embedder=default_embedder).close()  # create the home (and its model stamp)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO)]),
        CE_EMBEDDING__BACKEND="use-multilingual",
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(home), str(w), str(WRITES), DIR],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
        )
        for w in range(WRITERS)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    retries = 0
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0 and out.startswith("done"), err[-3000:]
        retries += int(out.split()[1])
    print(f"vector-index commit retries across the writers: {retries}")

    expected = {f"{DIR}n{w}-{i:03d}.md": f"w{w}x{i}token" for w in range(WRITERS) for i in range(WRITES)}
    with ContextEngineService(settings, embedder=default_embedder) as engine:
        children = engine.metadata.list_children("default", DIR)
        assert sorted(c.uri for c in children) == sorted(expected)
        assert_store_consistent(engine, home)  # includes: the directory's L0/L1 equal a fresh recompute
        overview = engine.content.read_level("default", DIR, Level.L1) or ""
        assert f"{WRITERS * WRITES} items" in overview
        flt = VectorFilter(account_id="default", levels=[0])
        for uri, word in sorted(expected.items()):
            assert [h.uri for h in engine.keyword_index.search(word, 1, flt)] == [uri], word
        for uri, word in sorted(expected.items()):
            hits = engine.search_memory(SearchMemoryRequest(query=f"note {word}", top_k=5), ADMIN).hits
            assert uri in [h.uri for h in hits], word
