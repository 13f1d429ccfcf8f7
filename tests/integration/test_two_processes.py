"""Two OS processes on one home (issue 12 acceptance): process B adds, moves and deletes; process A's very next
search_memory, lookup_knowledge and BM25 search reflect each change, with no sleep and no reload — every derived
structure (level-0 matrix, BM25 partitions, hint index, exact index) follows the account generation and the change
log in the metadata database (docs/derived_indexes.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import VectorFilter
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings

REPO = Path(__file__).resolve().parents[2]
ADMIN = RequestContext(account_id="default", role="admin")
ALICE = RequestContext(account_id="default", role="user", user_space="alice", agent_space="helper")

BASE = "# Disk pressure\n\nThe node is running out of disk space.\n\n## Fix\n\nDelete old container images.\n"
NEW = (
    "# QuokkaQueueStalled\n\nThe quokka ingestion queue stopped draining: consumers are wedged.\n\n"
    "## Mitigation\n\nRestart the quokka consumers and purge the poison messages.\n"
)
NEW_URI = "ctx://resources/runbooks/quokka-queue-stalled.md"
MOVED_URI = "ctx://resources/runbooks/archive/quokka-queue-stalled.md"
QUERY = "quokka ingestion queue stopped draining"


class Writer:
    """Process B: a subprocess with its own service on the same home."""

    def __init__(self, home: Path) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO)]))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.writer_process", str(home)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
        )
        assert json.loads(self._line()) == {"ready": True}

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"writer process exited with {self.proc.poll()}"
        return line

    def __call__(self, **cmd: Any) -> list[str]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self._line())
        assert answer["ok"]
        return answer["uris"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture
def two(tmp_path: Path, embedder: Any) -> Iterator[tuple[ContextEngineService, Writer]]:
    home = tmp_path / "home"
    settings = load_settings(home, retrieval={"seed": {"hybrid": True}}, knowledge={"hybrid": True})
    engine = ContextEngineService(settings, embedder=embedder)
    engine.add_text(BASE, "ctx://resources/runbooks/disk-pressure.md", ADMIN)
    writer = Writer(home)
    try:
        yield engine, writer
    finally:
        writer.close()
        engine.close()


def memory_uris(engine: ContextEngineService, query: str, ctx: RequestContext = ADMIN) -> list[str]:
    r = engine.search_memory(query, ctx, score_threshold=0.0)
    return [h.uri for h in r.hits] + [s.uri for s in r.seed_hits]


def knowledge_docs(engine: ContextEngineService, query: str) -> list[str]:
    return [b.doc_id for b in engine.lookup_knowledge(query, ADMIN).evidence_blocks]


def bm25_uris(engine: ContextEngineService, query: str) -> set[str]:
    return {h.uri for h in engine.keyword_index.search(query, 20, VectorFilter(account_id="default", levels=[2]))}


def hinted(engine: ContextEngineService, query: str) -> set[str]:
    return {m.uri for m in engine.hint_index.analyze_query(query, ADMIN).matches}


def exact_uris(engine: ContextEngineService, query: str) -> set[str]:
    exact = engine.knowledge.search.fallback
    vec = engine.embedder.embed_query(query)
    return {h.uri for h in exact.search(vec, 20, VectorFilter(account_id="default"))}


def test_every_derived_structure_follows_another_process_at_once(two: tuple[ContextEngineService, Writer]) -> None:
    engine, write = two
    # warm every structure in A before B writes, so each must catch up rather than load
    assert "ctx://resources/runbooks/disk-pressure.md" in memory_uris(engine, "disk space")
    assert knowledge_docs(engine, "node running out of disk space")
    assert bm25_uris(engine, "disk") == {"ctx://resources/runbooks/disk-pressure.md"}
    exact_uris(engine, "disk")
    loads = engine.l0_matrix.loads

    write(op="add_text", text=NEW, uri=NEW_URI)
    assert NEW_URI in memory_uris(engine, QUERY)
    assert knowledge_docs(engine, QUERY)[0] == NEW_URI
    assert NEW_URI in bm25_uris(engine, "quokka")
    assert NEW_URI in hinted(engine, "QuokkaQueueStalled alert fired")
    assert NEW_URI in exact_uris(engine, QUERY)

    write(op="move", src=NEW_URI, dst=MOVED_URI)
    for found in (memory_uris(engine, QUERY), knowledge_docs(engine, QUERY)):
        assert MOVED_URI in found and NEW_URI not in found
    assert MOVED_URI in bm25_uris(engine, "quokka") and NEW_URI not in bm25_uris(engine, "quokka")
    assert hinted(engine, "QuokkaQueueStalled alert fired") & {MOVED_URI, NEW_URI} == {MOVED_URI}
    assert MOVED_URI in exact_uris(engine, QUERY) and NEW_URI not in exact_uris(engine, QUERY)

    write(op="delete", uri=MOVED_URI)
    assert not {NEW_URI, MOVED_URI} & set(memory_uris(engine, QUERY))
    assert not {NEW_URI, MOVED_URI} & set(knowledge_docs(engine, QUERY))
    assert not {NEW_URI, MOVED_URI} & bm25_uris(engine, "quokka")
    assert not {NEW_URI, MOVED_URI} & hinted(engine, "QuokkaQueueStalled alert fired")
    assert not {NEW_URI, MOVED_URI} & exact_uris(engine, QUERY)

    # memories of a user, written by B, found by A in that user's scope only
    alice = {"account_id": "default", "role": "user", "user_space": "alice", "agent_space": "helper"}
    uri = write(op="add_memory", text="Alice keeps her quokka photos on the NAS in the attic.", ctx=alice)[0]
    assert uri in memory_uris(engine, "where are the quokka photos", ALICE)
    bob = RequestContext(account_id="default", role="user", user_space="bob", agent_space="other")
    assert uri not in memory_uris(engine, "where are the quokka photos", bob)

    # all of it applied from the change log: the level-0 matrix was never reloaded
    assert engine.l0_matrix.loads == loads
