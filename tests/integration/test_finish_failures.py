"""A write that committed but whose undo records could not be dropped (the object store stopped right after the
commit) is not reported as failed: it is released to recovery and finished by the next write (issue 13 attack pass:
before, the caller got WRT-5001 for a committed write, and its nodes stayed pending while the replica lived)."""

from __future__ import annotations

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.storage.content.local import LocalContentStore


class _DiscardFailsOnce(LocalContentStore):
    """The real local store whose next ``discard`` fails as a stopped object store does (injected fault)."""

    fail_next = False

    def discard(self, journal_id: str) -> None:
        if self.fail_next:
            self.fail_next = False
            raise ContextEngineError(ErrorCode.STORAGE_FAILED, "content store delete failed", retryable=True)
        super().discard(journal_id)


def test_a_committed_write_whose_records_cannot_be_dropped_is_finished_by_the_next_write(make_engine, tmp_path):
    content = _DiscardFailsOnce(tmp_path / "content")
    engine = make_engine(parts={"content": content})
    content.fail_next = True
    report = engine.add_text("Kafka consumer lag grows on partition 7.", "ctx://resources/ops/kafka.md")
    # committed, not yet indexed: no error for a committed write
    assert report.nodes == 1 and report.pending >= 1 and report.failed == 0
    (entry,) = engine.metadata.journal_entries()
    assert entry.state == "committed" and entry.owner is None  # released: any process may finish it
    assert content.journal_ids() == [str(entry.id)]

    engine.add_text("Redis evicts keys under memory pressure.", "ctx://resources/ops/redis.md")
    assert engine.metadata.journal_entries() == [] and content.journal_ids() == []
    node = engine.metadata.get_node("default", "ctx://resources/ops/kafka.md")
    assert node is not None and node.index_status == "indexed"
    assert engine.search_memory("consumer lag on a kafka partition", top_k=3).hits[0].uri.endswith("kafka.md")
