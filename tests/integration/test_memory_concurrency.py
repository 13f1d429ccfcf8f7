"""Concurrent add_messages into one session lose nothing (issue 11; found by a fresh-clone trial: four parallel
writers all took 000001.md and three messages vanished). Sequence numbers are reserved atomically in the metadata
database, so this holds across threads and across processes on one home."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from context_engine.schema.context import RequestContext

pytestmark = pytest.mark.slow

ALICE = RequestContext(account_id="default", role="user", user_space="alice", agent_space="h")


def test_parallel_writers_to_one_session_keep_every_message(make_engine):
    engine = make_engine()
    engine.add_messages([{"content": "the session starts"}], "race", ALICE)

    def write(n: int) -> list[str]:
        uris: list[str] = []
        for i in range(3):
            batch = [{"content": f"writer {n} says {i}"}, {"content": f"writer {n} adds {i}"}]
            uris += engine.add_messages(batch, "race", ALICE).uris
        return uris

    with ThreadPoolExecutor(max_workers=4) as pool:
        written = [u for uris in pool.map(write, range(4)) for u in uris]
    assert len(written) == len(set(written)) == 24  # no two messages share a URI
    page = engine.list_memories(ALICE, conversation_id="race", limit=200)
    assert page.total == 25
    texts = {engine.get_memory(u, ALICE).text for u in written}
    assert texts == {f"writer {n} {verb} {i}" for n in range(4) for i in range(3) for verb in ("says", "adds")}
