"""RetrievalAssembler: L0 blocks, read recommendations, next actions; it has no way to read L1/L2."""

from __future__ import annotations

import inspect

import pytest

from context_engine.retrieval import assembler as assembler_module
from context_engine.retrieval.assembler import RetrievalAssembler
from context_engine.retrieval.redaction import Redactor
from context_engine.schema.context import RequestContext
from context_engine.schema.hits import NodeHit
from context_engine.schema.query import TypedQuery
from context_engine.settings import AssemblySettings, RedactionSettings

CTX = RequestContext(account_id="acme", role="admin")
TQ = TypedQuery(text="q", context_type="resource")


def hit(uri: str, score: float, *, is_dir=False, overview=True, content=True, **kw) -> NodeHit:
    return NodeHit(
        uri=uri,
        owner_space="shared",
        context_type="resource",
        category="ops",
        abstract=f"abstract of {uri}",
        is_dir=is_dir,
        has_overview=overview,
        has_content=content and not is_dir,
        score=score,
        vector_score=score,
        match_reason="l0_vector",
        **kw,
    )


@pytest.mark.parametrize(
    ("h", "expected"),
    [
        (hit("ctx://resources/ops/", 0.1, is_dir=True), "read_l1"),  # a directory with an overview
        (hit("ctx://resources/empty/", 0.9, is_dir=True, overview=False), "none"),
        (hit("ctx://resources/a.md", 0.8), "read_l2"),  # strong leaf with content
        (hit("ctx://resources/a.md", 0.4), "read_l1"),  # mid score, has an overview
        (hit("ctx://resources/a.md", 0.8, content=False), "read_l1"),
        (hit("ctx://resources/a.md", 0.4, overview=False), "none"),
        (hit("ctx://resources/a.md", 0.1), "none"),  # weak
    ],
)
def test_read_recommendation_rule(h, expected):
    assert RetrievalAssembler(AssemblySettings(read_l1_min_score=0.3, read_l2_min_score=0.5)).recommend(h) == expected


def test_blocks_are_l0_only_and_next_actions_follow_recommendations():
    asm = RetrievalAssembler(AssemblySettings(read_l1_min_score=0.3, read_l2_min_score=0.5))
    hits = [
        hit("ctx://resources/a.md", 0.9),
        hit("ctx://resources/ops/", 0.6, is_dir=True),
        hit("ctx://resources/b.md", 0.35),
        hit("ctx://resources/c.md", 0.1),
    ]
    blocks = asm.assemble(TQ, hits, CTX)
    assert [b.uri for b in blocks] == [h.uri for h in hits]
    for b, h in zip(blocks, hits, strict=True):
        assert b.level_hit == "L0" and b.overview is None and b.content_excerpt is None and b.relations == []
        assert b.abstract == h.abstract and b.score == h.score
        assert b.match_reason.startswith("l0_vector [resource]")
    actions = asm.next_actions(blocks)
    assert actions.recommended_read_l2_uris == ["ctx://resources/a.md"]
    assert actions.recommended_read_l1_uris == ["ctx://resources/ops/", "ctx://resources/b.md"]


def test_assembler_has_no_reader_or_store_collaborator():
    params = set(inspect.signature(RetrievalAssembler.__init__).parameters) - {"self"}
    assert params == {"settings", "redactor"}
    imported = vars(assembler_module)
    assert not {"MemoryReadService", "ContentStore", "MetadataStore"} & set(imported)
    assert "read_level" not in inspect.getsource(assembler_module)


def test_abstract_secrets_are_redacted():
    asm = RetrievalAssembler(AssemblySettings(), Redactor(RedactionSettings()))
    (block,) = asm.assemble(
        TQ, [hit("ctx://resources/a.md", 0.5).model_copy(update={"abstract": "db password=hunter2xx"})], CTX
    )
    assert "hunter2xx" not in block.abstract and "[REDACTED" in block.abstract
