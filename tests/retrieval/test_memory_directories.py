"""Directory nodes do not crowd out memories for a memory-intent query (retrieval/scoring.py, merge step 5), through
the pipeline on the hashing embedder: a directory whose abstract matches best ("Directory health: 3 items: ...")
ranks below every memory file hit when the planner prefers memories or only memories are candidates, and still comes
back when the memories leave room."""

from __future__ import annotations

import pytest

from tests.retrieval.conftest import ADMIN, ALICE

HEALTH = (
    "Blood test results were normal in June.",
    "Dentist appointment booked for July.",
    "Started physiotherapy for the knee.",
)


@pytest.fixture
def engine(hash_engine):
    e = hash_engine()
    for text in HEALTH:
        e.add_memory(text, ALICE, category="health")
    doc = "# Health checks\n\nHow to run health checks on services.\n"
    e.add_text(doc, "ctx://resources/ops/health-checks.md", ADMIN)
    return e


def _dirs_below_memories(uris: list[str]) -> bool:
    """Every directory comes after every memory file."""
    memories = [i for i, u in enumerate(uris) if "/memories/" in u and not u.endswith("/")]
    dirs = [i for i, u in enumerate(uris) if u.endswith("/")]
    return not memories or not dirs or max(memories) < min(dirs)


def test_a_plain_query_ranks_a_matching_directory_among_files(engine):
    uris = [h.uri for h in engine.search_memory("health", ALICE, top_k=3).hits]
    assert uris[0] == "ctx://user/alice/memories/health/"  # no memory intent: the score decides


def test_memory_intent_puts_memory_files_first(engine):
    r = engine.search_memory("remember my health", ALICE, top_k=3)
    uris = [h.uri for h in r.hits]
    assert "memory" in {tq.context_type for tq in r.typed_queries}
    assert all(not u.endswith("/") for u in uris)
    assert sum(u.startswith("ctx://user/alice/memories/health/") for u in uris) >= 2
    roomy = [h.uri for h in engine.search_memory("remember my health", ALICE, top_k=20).hits]
    assert "ctx://user/alice/memories/health/" in roomy and _dirs_below_memories(roomy)  # not hidden


def test_a_memory_only_search_puts_files_first(engine):
    r = engine.search_memory("health", ALICE, top_k=3, planner_hints={"intent": "memory"})
    assert [h.uri.endswith("/") for h in r.hits] == [False, False, False]
    roomy = engine.search_memory("health", ALICE, top_k=10, planner_hints={"intent": "memory"})
    assert any(h.uri.endswith("/") for h in roomy.hits) and _dirs_below_memories([h.uri for h in roomy.hits])
