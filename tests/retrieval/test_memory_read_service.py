"""MemoryReadService: the L1/L2 contract, ACL before storage, one 403 for forbidden and missing, redaction,
excerpts, one-hop relations without invisible targets (DESIGN §6, seed 000 §10)."""

from __future__ import annotations

from typing import Any

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.retrieval.memory_read_service import MemoryReadService, page
from context_engine.retrieval.redaction import Redactor
from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import Relation
from context_engine.settings import ReadSettings, RedactionSettings
from tests.retrieval.conftest import ADMIN, ALICE, BOB, CountingContent, seed_small_store

DISK = "ctx://resources/ops/storage/disk-pressure.md"
SECRET_DOC = (
    "# Database access\n\nHow the payments service reaches its database.\n\n## Connection\n\n"
    "Use postgres://payments:Sup3rS3cret@db.internal:5432/payments for the primary.\n"
    "api_key: AKIAIOSFODNN7EXAMPLE\npassword = hunter2hunter2\n"
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0123456789abcdef\n-----END RSA PRIVATE KEY-----\n"
)


class CountingMetadata:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, item: str) -> Any:
        attr = getattr(self.inner, item)
        if callable(attr):

            def wrapped(*a: Any, **kw: Any) -> Any:
                self.calls.append(item)
                return attr(*a, **kw)

            return wrapped
        return attr


@pytest.fixture
def engine(hash_engine):
    e = hash_engine()
    seed_small_store(e)
    e.add_text(SECRET_DOC, "ctx://resources/ops/db/access.md", ADMIN)
    return e


def alice_memory(engine) -> str:
    return next(n.uri for n in engine.metadata.list_all_nodes("default") if "alice-prefers" in n.uri)


def test_l1_returns_the_overview_and_recommends_l2(engine):
    block = engine.reader.read(DISK, "L1", ctx=ALICE)
    assert block.level_hit == "L1" and block.uri == DISK
    assert block.overview and "Fix" in block.overview
    assert block.content_excerpt is None
    assert block.abstract.startswith("Disk pressure")
    assert block.read_recommendation == "read_l2" and block.match_reason == "explicit_read"
    assert (block.category, block.owner_space, block.has_overview, block.has_content) == ("ops", "shared", True, True)


def test_l2_returns_the_content_and_directories_have_none(engine):
    block = engine.reader.read(DISK, "L2", ctx=ALICE)
    assert block.level_hit == "L2" and "Delete old container images." in block.content_excerpt
    assert block.overview is None and block.read_recommendation == "none"
    assert engine.reader.read("ctx://resources/ops/storage", "L1", ctx=ALICE).overview  # directory without '/'
    with pytest.raises(ContextEngineError) as exc:
        engine.reader.read("ctx://resources/ops/storage/", "L2", ctx=ALICE)
    assert exc.value.code is ErrorCode.LEVEL_NOT_AVAILABLE


def test_l2_secrets_are_redacted(engine):
    text = engine.reader.read("ctx://resources/ops/db/access.md", "L2", ctx=ADMIN).content_excerpt
    for secret in ("Sup3rS3cret", "AKIAIOSFODNN7EXAMPLE", "hunter2hunter2", "MIIEowIBAAKCAQEA0123456789abcdef"):
        assert secret not in text
    assert "postgres://payments:[REDACTED:connection_string]@db.internal" in text
    assert "How the payments service reaches its database." in text  # the rest is kept


def test_long_content_is_read_a_page_at_a_time(engine):
    body = "# Long\n\n" + "\n".join(f"Line {i} of a long runbook about disks." for i in range(400))
    engine.add_text(body, "ctx://resources/ops/long.md", ADMIN)
    reader = MemoryReadService(engine.content, engine.metadata, engine.redactor, ReadSettings(l2_excerpt_max_chars=300))
    first = reader.read_page("ctx://resources/ops/long.md", "L2", ctx=ADMIN)
    assert len(first.block.content_excerpt) <= 300 and first.block.content_excerpt.startswith("# Long")
    assert first.total_chars == len(body) and first.next_offset == len(first.block.content_excerpt)
    pages, offset = [], 0
    while offset is not None:
        p = reader.read_page("ctx://resources/ops/long.md", "L2", ctx=ADMIN, offset=offset, max_chars=100)
        pages.append(p.block.content_excerpt)
        offset = p.next_offset
    assert "".join(pages) == body and all(len(p) <= 100 for p in pages)


@pytest.mark.parametrize("max_chars", [1, 7, 50, 1000])
def test_pages_join_to_the_text_and_cut_at_lines(max_chars):
    text = "".join(f"line {i} " + "x" * (i % 37) + "\n" for i in range(300)) + "no newline at the end"
    parts, offset = [], 0
    while offset is not None:
        part, offset = page(text, sum(map(len, parts)), max_chars)
        assert 1 <= len(part) <= max_chars
        if offset is not None and max_chars >= 100:
            assert part.endswith("\n")  # a line break within reach ends the page
        parts.append(part)
    assert "".join(parts) == text


def test_excerpt_never_shows_a_private_key_cut_in_half(engine):
    key = "-----BEGIN PRIVATE KEY-----\n" + "\n".join("A" * 60 for _ in range(30)) + "\n-----END PRIVATE KEY-----\n"
    engine.add_text("# Key\n\n" + "x\n" * 100 + key, "ctx://resources/ops/key.md", ADMIN)
    reader = MemoryReadService(engine.content, engine.metadata, engine.redactor, ReadSettings(l2_excerpt_max_chars=400))
    text = reader.read("ctx://resources/ops/key.md", "L2", ctx=ADMIN).content_excerpt
    assert "AAAAAAAAAA" not in text


def test_forbidden_and_missing_give_the_same_403_without_touching_storage(engine):
    content, metadata = CountingContent(engine.content), CountingMetadata(engine.metadata)
    reader = MemoryReadService(content, metadata, Redactor(RedactionSettings()), ReadSettings())
    secret_uri = alice_memory(engine)
    with pytest.raises(ContextEngineError) as forbidden:
        reader.read(secret_uri, "L2", ctx=BOB)
    assert content.reads == [] and metadata.calls == []  # refused from the context alone
    missing_uri = "ctx://resources/ops/nothing-here.md"
    with pytest.raises(ContextEngineError) as missing:
        reader.read(missing_uri, "L2", ctx=BOB)
    assert content.reads == []
    f, m = forbidden.value.envelope("r"), missing.value.envelope("r")
    assert f["code"] == m["code"] == "RET-4032"
    assert forbidden.value.code.http_status == 403
    assert {**f, "details": {}} == {**m, "details": {}}
    assert f["details"] == {"uri": secret_uri} and m["details"] == {"uri": missing_uri}
    # another account cannot tell either: its admin gets one answer for alice's URI and for one that exists nowhere
    # (its own account's, where neither is: 404 since issue 29)
    stranger = RequestContext(account_id="other", role="admin")
    answers = []
    for uri in (secret_uri, "ctx://user/alice/memories/preference/never-written.md"):
        with pytest.raises(ContextEngineError) as other:
            reader.read(uri, "L1", ctx=stranger)
        answers.append({**other.value.envelope("r"), "details": {}})
    assert answers[0] == answers[1]
    for bad in ("not a uri", "ctx://resources/../etc/passwd"):  # malformed: RET-4001 from the text alone
        calls = len(metadata.calls)
        with pytest.raises(ContextEngineError) as invalid:
            reader.read(bad, "L1", ctx=BOB)
        assert invalid.value.code is ErrorCode.QUERY_INVALID and invalid.value.details == {"field": "uri"}
        assert len(metadata.calls) == calls and content.reads == []
    with pytest.raises(ContextEngineError) as none:
        reader.read(DISK, "L1", ctx=None)
    assert none.value.code is ErrorCode.URI_FORBIDDEN


def test_a_missing_memory_in_the_callers_own_space_is_404(engine):
    """Issue 29: bob's own space is his to list, so saying that nothing is there leaks nothing; alice's memory,
    existing or not, stays the one 403 for him."""
    reader = MemoryReadService(engine.content, engine.metadata, Redactor(RedactionSettings()), ReadSettings())
    own_missing = "ctx://user/bob/memories/preference/nothing-here.md"
    with pytest.raises(ContextEngineError) as missing:
        reader.read(own_missing, "L2", ctx=BOB)
    assert missing.value.code is ErrorCode.TARGET_NOT_FOUND and missing.value.code.http_status == 404
    assert missing.value.details == {"uri": own_missing}
    for uri in (alice_memory(engine), "ctx://user/alice/memories/preference/nothing-here.md"):
        with pytest.raises(ContextEngineError) as other:
            reader.read(uri, "L2", ctx=BOB)
        assert other.value.code is ErrorCode.URI_FORBIDDEN


def test_relations_drop_invisible_and_missing_targets(engine):
    alice_mem, bob_mem = (
        alice_memory(engine),
        next(n.uri for n in engine.metadata.list_all_nodes("default") if "bob-prefers" in n.uri),
    )
    engine.metadata.add_relations(
        "default",
        [
            Relation(
                from_uri=DISK,
                to_uri="ctx://resources/ops/kubernetes/pod-crash-loop.md",
                relation_type="see_also",
                weight=0.9,
            ),
            Relation(from_uri=DISK, to_uri=bob_mem, relation_type="mentioned_by", weight=0.8),
            Relation(from_uri=DISK, to_uri=alice_mem, relation_type="mentioned_by", weight=0.7),
            Relation(from_uri=DISK, to_uri="ctx://resources/ops/gone.md", relation_type="see_also", weight=0.6),
        ],
    )
    block = engine.reader.read(DISK, "L2", expand_relations=True, max_relations=10, ctx=ALICE)
    assert [(r.to_uri, r.relation_type) for r in block.relations] == [
        ("ctx://resources/ops/kubernetes/pod-crash-loop.md", "see_also"),
        (alice_mem, "mentioned_by"),
    ]
    assert [r.to_uri for r in engine.reader.read(DISK, "L1", True, 1, ctx=ALICE).relations] == [
        "ctx://resources/ops/kubernetes/pod-crash-loop.md"
    ]
    assert engine.reader.read(DISK, "L1", expand_relations=False, max_relations=5, ctx=ALICE).relations == []
    bob_view = engine.reader.read(DISK, "L1", expand_relations=True, max_relations=10, ctx=BOB).relations
    assert [r.to_uri for r in bob_view] == ["ctx://resources/ops/kubernetes/pod-crash-loop.md", bob_mem]
    with pytest.raises(ContextEngineError) as exc:
        engine.reader.read(DISK, "L1", True, 10_000, ctx=ALICE)
    assert exc.value.code is ErrorCode.QUERY_INVALID


def test_read_batch_is_all_or_nothing_and_keeps_order(engine):
    uris = ["ctx://resources/ops/network/certificate-expiry.md", DISK]
    blocks = engine.reader.read_batch(uris, "L1", ctx=BOB)
    assert [b.uri for b in blocks] == uris and all(b.overview for b in blocks)
    with pytest.raises(ContextEngineError) as exc:
        engine.reader.read_batch([DISK, alice_memory(engine)], "L1", ctx=BOB)
    assert exc.value.code is ErrorCode.URI_FORBIDDEN
    with pytest.raises(ContextEngineError) as exc:
        engine.reader.read_batch([DISK] * 51, "L1", ctx=BOB)
    assert exc.value.code is ErrorCode.QUERY_INVALID


def test_reads_are_counted_by_level(engine):
    engine.reader.read(DISK, "L1", ctx=ALICE)
    engine.reader.read(DISK, "L2", ctx=ALICE)
    engine.reader.read(DISK, "L2", ctx=ALICE)
    value = engine.metrics.registry.get_sample_value
    assert value("ce_retrieval_read_total", {"level": "L1"}) == 1
    assert value("ce_retrieval_read_total", {"level": "L2"}) == 2
