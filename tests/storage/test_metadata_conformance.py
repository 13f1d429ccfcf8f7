"""Conformance suite for every :class:`MetadataStore` adapter (DESIGN.md §3; STYLE.md, Tests).

Each test runs against every backend through the parametrised ``metadata_store`` / ``metadata_backend`` fixtures
(``tests/storage/conftest.py``).
"""

from __future__ import annotations

import contextlib
import threading
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
from sqlalchemy import create_engine, text

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import NodeRecord, Relation, VectorRecord
from context_engine.schema.uri import ContextURI
from context_engine.storage.changes import AccountState
from context_engine.storage.factory import open_audit
from context_engine.storage.metadata import vector_rows
from context_engine.storage.metadata.audit import HintDoc, HintTerm
from context_engine.storage.metadata.sqlalchemy_store import SCHEMA_VERSION
from context_engine.storage.protocols import MetadataStore

from .conftest import MetadataBackend

A, B = "acc-a", "acc-b"


def node(uri: str, account_id: str = A, **fields: object) -> NodeRecord:
    """A node whose derived fields (parent, owner space, type, category, is_dir) follow from its URI."""
    parsed = ContextURI.parse(uri)
    values: dict[str, object] = {
        "account_id": account_id,
        "uri": str(parsed),
        "parent_uri": None if parsed.parent is None else str(parsed.parent),
        "owner_space": parsed.owner_space,
        "context_type": parsed.context_type,
        "category": parsed.category,
        "is_dir": parsed.is_dir,
        "title": parsed.name,
    }
    values.update(fields)
    return NodeRecord(**values)  # type: ignore[arg-type]


def vec(i: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed * 1000 + i).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def vrec(id: str, uri: str, account_id: str = A, i: int = 0, **fields: object) -> VectorRecord:
    parsed = ContextURI.parse(uri)
    values: dict[str, object] = {
        "id": id,
        "vector": vec(i),
        "uri": uri,
        "parent_uri": None if parsed.parent is None else str(parsed.parent),
        "account_id": account_id,
        "owner_space": parsed.owner_space,
        "context_type": parsed.context_type or "resource",
        "level": 0,
    }
    values.update(fields)
    return VectorRecord(**values)  # type: ignore[arg-type]


def uris(nodes: list[NodeRecord]) -> list[str]:
    return [n.uri for n in nodes]


def all_vectors(store: MetadataStore, account_id: str | None = None) -> dict[str, VectorRecord]:
    return {r.id: r for batch in store.iter_vectors(account_id) for r in batch}


def assert_same_vector_records(got: dict[str, VectorRecord], want: dict[str, VectorRecord]) -> None:
    assert sorted(got) == sorted(want)
    for key, r in want.items():
        g = got[key]
        assert g.vector.dtype == np.float32
        np.testing.assert_array_equal(g.vector, r.vector)
        assert g.model_dump(exclude={"vector"}) == r.model_dump(exclude={"vector"})


TREE = [
    "ctx://resources/",
    "ctx://resources/docs/",
    "ctx://resources/docs/b.md",
    "ctx://resources/docs/a.md",
    "ctx://resources/docs/sub/",
    "ctx://resources/docs/sub/deep.md",
    "ctx://resources/docsx/",
    "ctx://resources/docsx/c.md",
]


# ---- basics -------------------------------------------------------------------------------------------------------
def test_adapter_satisfies_protocol(metadata_store: MetadataStore) -> None:
    assert isinstance(metadata_store, MetadataStore)
    assert metadata_store.count_nodes() == {"nodes": 0, "files": 0, "directories": 0, "pending": 0}
    assert metadata_store.accounts() == []
    assert metadata_store.get_meta("missing") is None


def test_upsert_and_get_with_and_without_trailing_slash(metadata_store: MetadataStore) -> None:
    created = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    directory = node("ctx://resources/docs/", category="kubernetes", has_overview=True, created_at=created)
    leaf = node(
        "ctx://resources/docs/a.md",
        title="Pod crash loops",
        has_content=True,
        content_hash="sha256:abc",
        source="/tmp/a.md",
        created_at=created,
        updated_at=created + timedelta(hours=1),
    )
    metadata_store.upsert_nodes([directory, leaf])

    for spelling in ("ctx://resources/docs/", "ctx://resources/docs"):
        got = metadata_store.get_node(A, spelling)
        assert got is not None and got.uri == "ctx://resources/docs/" and got.is_dir
        assert got.category == "kubernetes" and got.has_overview
    for spelling in ("ctx://resources/docs/a.md", "ctx://resources/docs/a.md/"):
        got = metadata_store.get_node(A, spelling)
        assert got is not None
        assert got.model_dump() == leaf.model_dump()
    got = metadata_store.get_node(A, "ctx://resources/docs")
    assert got is not None and got.created_at == created and got.created_at.tzinfo is not None
    assert got.updated_at is not None and got.updated_at.utcoffset() == timedelta(0)
    assert metadata_store.get_node(A, "ctx://resources/nope.md") is None
    # a parsed URI (search_memory's checked target) finds the same node, in either form
    for parsed in (ContextURI.parse("ctx://resources/docs/"), ContextURI.parse("ctx://resources/docs")):
        got = metadata_store.get_node(A, parsed)
        assert got is not None and got.uri == "ctx://resources/docs/"
    assert metadata_store.get_node(A, ContextURI.parse("ctx://resources/nope.md")) is None


def test_uri_is_canonicalised_and_timestamps_are_utc(metadata_store: MetadataStore) -> None:
    plus_two = timezone(timedelta(hours=2))
    metadata_store.upsert_nodes(
        [
            # a directory written without its slash, a decomposed 'é' (NFD), a non-UTC timestamp
            node("ctx://resources/cafe\u0301", is_dir=True, parent_uri="ctx://resources", created_at=None),
            node("ctx://resources/x.md", updated_at=datetime(2024, 1, 1, 14, 0, tzinfo=plus_two)),
        ]
    )
    got = metadata_store.get_node(A, "ctx://resources/caf\u00e9")
    assert got is not None and got.uri == "ctx://resources/caf\u00e9/" and got.parent_uri == "ctx://resources/"
    assert got.created_at is not None and got.created_at.tzinfo is not None
    assert abs(got.created_at - datetime.now(UTC)) < timedelta(minutes=5)
    x = metadata_store.get_node(A, "ctx://resources/x.md")
    assert x is not None and x.updated_at == datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
    assert x.updated_at.utcoffset() == timedelta(0)
    children = uris(metadata_store.list_children(A, "ctx://resources/"))
    assert children == ["ctx://resources/caf\u00e9/", "ctx://resources/x.md"]


def test_upsert_replaces_fields_and_keeps_created_at(metadata_store: MetadataStore) -> None:
    first = datetime(2024, 1, 1, tzinfo=UTC)
    metadata_store.upsert_nodes([node("ctx://resources/a.md", title="old", created_at=first, updated_at=first)])
    later = datetime(2024, 2, 1, tzinfo=UTC)
    metadata_store.upsert_nodes(
        [node("ctx://resources/a.md", title="new", content_hash="h2", created_at=later, updated_at=later)]
    )
    got = metadata_store.get_node(A, "ctx://resources/a.md")
    assert got is not None
    assert (got.title, got.content_hash, got.created_at, got.updated_at) == ("new", "h2", first, later)
    assert metadata_store.count_nodes(A)["nodes"] == 1


def test_upsert_last_duplicate_in_one_call_wins(metadata_store: MetadataStore) -> None:
    metadata_store.upsert_nodes([node("ctx://resources/a.md", title="one"), node("ctx://resources/a.md", title="two")])
    got = metadata_store.get_node(A, "ctx://resources/a.md")
    assert got is not None and got.title == "two"
    assert metadata_store.count_nodes(A)["nodes"] == 1


def test_invalid_uri_is_rejected_and_nothing_written(metadata_store: MetadataStore) -> None:
    with pytest.raises(ContextEngineError) as info:
        bad = node("ctx://resources/b.md").model_copy(update={"uri": "ctx://x/y"})
        metadata_store.upsert_nodes([node("ctx://resources/ok.md"), bad])
    assert info.value.code is ErrorCode.URI_INVALID
    assert metadata_store.count_nodes() == {"nodes": 0, "files": 0, "directories": 0, "pending": 0}
    with pytest.raises(ContextEngineError) as info:
        metadata_store.get_node(A, "ctx://resources/a//b")
    assert info.value.code is ErrorCode.URI_INVALID


def test_get_nodes_batch(metadata_store: MetadataStore) -> None:
    metadata_store.upsert_nodes([node(u) for u in TREE])
    wanted = ["ctx://resources/docs", "ctx://resources/docs/a.md/", "ctx://resources/missing.md", "ctx://resources/"]
    got = metadata_store.get_nodes(A, wanted)
    assert sorted(got) == ["ctx://resources/", "ctx://resources/docs/", "ctx://resources/docs/a.md"]
    assert all(key == rec.uri for key, rec in got.items())
    assert metadata_store.get_nodes(A, []) == {}
    many = [f"ctx://resources/bulk/f{i:04d}.md" for i in range(1_200)]  # more than one IN batch
    metadata_store.upsert_nodes([node(u) for u in many])
    assert sorted(metadata_store.get_nodes(A, many)) == sorted(many)


def test_get_node_heads_are_get_nodes_reduced_to_the_search_columns(metadata_store: MetadataStore) -> None:
    from datetime import UTC, datetime

    from context_engine.schema.nodes import NodeHead

    when = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
    metadata_store.upsert_nodes([node(u) for u in TREE])
    metadata_store.upsert_nodes(
        [node("ctx://user/alice/memories/profile/m.md", category="profile", occurred_at=when, metadata={"k": 1})]
    )
    metadata_store.set_index_status(A, ["ctx://resources/docs/b.md"], "pending")
    wanted = [
        "ctx://resources/docs",
        "ctx://resources/docs/a.md/",
        "ctx://resources/docs/b.md",
        "ctx://resources/missing.md",
        "ctx://resources/",
        "ctx://user/alice/memories/profile/m.md",
    ]
    heads = metadata_store.get_node_heads(A, wanted)
    records = metadata_store.get_nodes(A, wanted)
    assert sorted(heads) == sorted(records) and len(heads) == 5
    for uri, head in heads.items():
        assert isinstance(head, NodeHead)
        assert head == NodeHead(*(getattr(records[uri], name) for name in NodeHead._fields))
        # the values SQLAlchemy gives (the hot read converts them with the columns' own processors): no 0/1 for
        # a boolean, no naive or textual timestamp
        assert all(type(getattr(head, f)) is bool for f in ("is_dir", "has_overview", "has_content"))
        assert head.updated_at is not None and head.updated_at.tzinfo is not None
    assert heads["ctx://resources/docs/b.md"].index_status == "pending"
    assert heads["ctx://user/alice/memories/profile/m.md"].occurred_at == when
    assert metadata_store.get_node_heads("other", wanted) == {} and metadata_store.get_node_heads(A, []) == {}
    many = [f"ctx://resources/bulk/f{i:04d}.md" for i in range(1_200)]  # more than one IN batch
    metadata_store.upsert_nodes([node(u) for u in many])
    assert sorted(metadata_store.get_node_heads(A, many)) == sorted(many)
    # inside a transaction its own uncommitted writes are seen (the session's read, not the pooled hot read)
    with metadata_store.transaction():
        metadata_store.set_index_status(A, ["ctx://resources/docs/a.md"], "pending")
        assert (
            metadata_store.get_node_heads(A, ["ctx://resources/docs/a.md"])["ctx://resources/docs/a.md"].index_status
            == "pending"
        )
    assert (
        metadata_store.get_node_heads(A, ["ctx://resources/docs/a.md"])["ctx://resources/docs/a.md"].index_status
        == "pending"
    )


def test_list_children_are_direct_and_ordered(metadata_store: MetadataStore) -> None:
    metadata_store.upsert_nodes([node(u) for u in reversed(TREE)])
    expected = ["ctx://resources/docs/a.md", "ctx://resources/docs/b.md", "ctx://resources/docs/sub/"]
    assert uris(metadata_store.list_children(A, "ctx://resources/docs/")) == expected
    assert uris(metadata_store.list_children(A, "ctx://resources/docs")) == expected
    assert uris(metadata_store.list_children(A, "ctx://resources/")) == [
        "ctx://resources/docs/",
        "ctx://resources/docsx/",
    ]
    assert metadata_store.list_children(A, "ctx://resources/docs/a.md") == []


def test_list_space_roots_per_scope(metadata_store: MetadataStore) -> None:
    spaces = ["ctx://user/bob/", "ctx://user/alice/", "ctx://agent/bot/", "ctx://resources/"]
    metadata_store.upsert_nodes([node(u) for u in [*spaces, "ctx://user/bob/memories/"]])
    metadata_store.upsert_nodes([node("ctx://user/carol/", account_id="other")])
    assert uris(metadata_store.list_space_roots(A, "user")) == ["ctx://user/alice/", "ctx://user/bob/"]
    assert uris(metadata_store.list_space_roots(A, "agent")) == ["ctx://agent/bot/"]
    assert metadata_store.list_space_roots("nobody", "user") == []


def test_list_subtree_respects_segment_boundaries(metadata_store: MetadataStore) -> None:
    metadata_store.upsert_nodes([node(u) for u in TREE])
    expected = [
        "ctx://resources/docs/",
        "ctx://resources/docs/a.md",
        "ctx://resources/docs/b.md",
        "ctx://resources/docs/sub/",
        "ctx://resources/docs/sub/deep.md",
    ]
    assert uris(metadata_store.list_subtree(A, "ctx://resources/docs/")) == expected
    assert uris(metadata_store.list_subtree(A, "ctx://resources/docs")) == expected
    assert uris(metadata_store.list_subtree(A, "ctx://resources/docs/a.md")) == ["ctx://resources/docs/a.md"]
    assert uris(metadata_store.list_subtree(A, "ctx://resources/")) == sorted(TREE)
    assert metadata_store.list_subtree(A, "ctx://resources/nothing/") == []


@pytest.mark.parametrize(
    ("root", "inside", "outside"),
    [
        ("p_", ["p_/", "p_/f.md"], ["pa/", "pa/g.md", "p__/", "p__/x.md"]),
        ("p%", ["p%/", "p%/h.md"], ["p%q/", "p%q/i.md", "pz/", "pz/j.md"]),
        ("a", ["a/", "a/k.md"], ["ab/", "ab/l.md", "A/", "A/m.md"]),
    ],
)
def test_list_subtree_treats_like_wildcards_and_case_literally(
    metadata_store: MetadataStore, root: str, inside: list[str], outside: list[str]
) -> None:
    base = "ctx://resources/"
    metadata_store.upsert_nodes([node(base + u) for u in inside + outside])
    assert uris(metadata_store.list_subtree(A, base + root)) == sorted(base + u for u in inside)
    assert uris(metadata_store.list_subtree(A, base + root + "/")) == sorted(base + u for u in inside)


def test_list_all_nodes(metadata_store: MetadataStore) -> None:
    metadata_store.upsert_nodes([node(u) for u in reversed(TREE)] + [node("ctx://user/u1/memories/x.md")])
    metadata_store.upsert_nodes([node("ctx://resources/docs/", account_id=B)])
    assert uris(metadata_store.list_all_nodes(A)) == sorted([*TREE, "ctx://user/u1/memories/x.md"])
    assert uris(metadata_store.list_all_nodes(B)) == ["ctx://resources/docs/"]
    assert metadata_store.list_all_nodes("nobody") == []


# ---- deletes and relations ----------------------------------------------------------------------------------------
def test_delete_nodes_removes_exactly_them_and_their_relations(metadata_store: MetadataStore) -> None:
    metadata_store.upsert_nodes([node(u) for u in TREE])
    metadata_store.add_relations(
        A,
        [
            Relation(from_uri="ctx://resources/docs/a.md", to_uri="ctx://resources/docsx/c.md", relation_type="see"),
            Relation(from_uri="ctx://resources/docsx/c.md", to_uri="ctx://resources/docs/a.md", relation_type="see"),
            Relation(from_uri="ctx://resources/docsx/c.md", to_uri="ctx://resources/docs", relation_type="in"),
            Relation(from_uri="ctx://resources/docsx/c.md", to_uri="ctx://resources/docs/b.md", relation_type="see"),
        ],
    )
    metadata_store.delete_nodes(A, ["ctx://resources/docs/a.md", "ctx://resources/docs/", "ctx://resources/gone.md"])
    assert metadata_store.get_node(A, "ctx://resources/docs/a.md") is None
    assert metadata_store.get_node(A, "ctx://resources/docs/") is None
    assert metadata_store.get_node(A, "ctx://resources/docs/b.md") is not None  # not recursive
    assert metadata_store.get_relations(A, "ctx://resources/docs/a.md") == []
    assert [(r.to_uri, r.relation_type) for r in metadata_store.get_relations(A, "ctx://resources/docsx/c.md")] == [
        ("ctx://resources/docs/b.md", "see")
    ]
    metadata_store.delete_nodes(A, [])


def test_relations_upsert_order_and_limit(metadata_store: MetadataStore) -> None:
    src = "ctx://resources/docs/"
    metadata_store.add_relations(
        A,
        [
            Relation(from_uri=src, to_uri="ctx://resources/z.md", relation_type="see", weight=0.5),
            Relation(from_uri=src, to_uri="ctx://resources/b.md", relation_type="see", weight=0.9),
            Relation(from_uri=src, to_uri="ctx://resources/a.md", relation_type="see", weight=0.5),
            Relation(from_uri=src, to_uri="ctx://resources/a.md", relation_type="cites", weight=0.5),
        ],
    )
    heavier = Relation(from_uri=src, to_uri="ctx://resources/z.md", relation_type="see", weight=1.0)
    metadata_store.add_relations(A, [heavier])
    got = metadata_store.get_relations(A, "ctx://resources/docs")
    assert [(r.to_uri, r.relation_type, r.weight) for r in got] == [
        ("ctx://resources/z.md", "see", 1.0),
        ("ctx://resources/b.md", "see", 0.9),
        ("ctx://resources/a.md", "cites", 0.5),
        ("ctx://resources/a.md", "see", 0.5),
    ]
    assert all(r.from_uri == src for r in got)
    assert [r.to_uri for r in metadata_store.get_relations(A, src, limit=2)] == [
        "ctx://resources/z.md",
        "ctx://resources/b.md",
    ]
    assert metadata_store.get_relations(A, src, limit=0) == []
    assert len(metadata_store.get_relations(A, src, limit=100)) == 4
    assert metadata_store.get_relations(A, "ctx://resources/z.md") == []


# ---- index status and counts --------------------------------------------------------------------------------------
def test_pending_status_and_counts(metadata_store: MetadataStore) -> None:
    metadata_store.upsert_nodes([node(u) for u in TREE])
    metadata_store.upsert_nodes([node("ctx://resources/docs/", account_id=B, index_status="pending")])
    assert metadata_store.pending_nodes(A) == []
    some = ["ctx://resources/docsx/c.md", "ctx://resources/docs", "ctx://resources/x"]  # x does not exist
    metadata_store.set_index_status(A, some, "pending")
    assert uris(metadata_store.pending_nodes(A)) == ["ctx://resources/docs/", "ctx://resources/docsx/c.md"]
    assert [(n.account_id, n.uri) for n in metadata_store.pending_nodes()] == [
        (A, "ctx://resources/docs/"),
        (A, "ctx://resources/docsx/c.md"),
        (B, "ctx://resources/docs/"),
    ]
    assert metadata_store.count_nodes(A) == {"nodes": 8, "files": 4, "directories": 4, "pending": 2}
    assert metadata_store.count_nodes(B) == {"nodes": 1, "files": 0, "directories": 1, "pending": 1}
    assert metadata_store.count_nodes() == {"nodes": 9, "files": 4, "directories": 5, "pending": 3}
    metadata_store.set_index_status(A, ["ctx://resources/docs/"], "indexed")
    assert uris(metadata_store.pending_nodes(A)) == ["ctx://resources/docsx/c.md"]
    with pytest.raises(ContextEngineError) as info:
        metadata_store.set_index_status(A, ["ctx://resources/docs/"], "done")
    assert info.value.code is ErrorCode.REQUEST_INVALID


def test_accounts(metadata_store: MetadataStore) -> None:
    metadata_store.upsert_nodes([node("ctx://resources/a.md", account_id=B), node("ctx://resources/a.md")])
    metadata_store.put_vectors([vrec("v", "ctx://resources/v.md", account_id="acc-c")])
    assert metadata_store.accounts() == [A, B, "acc-c"]


# ---- vectors ------------------------------------------------------------------------------------------------------
def test_vectors_put_replace_delete_iter(metadata_store: MetadataStore) -> None:
    records = [
        vrec(f"v{i}", f"ctx://resources/docs/f{i % 3}.md", i=i, level=2, doc_id=f"d{i % 3}", chunk_index=i, text=str(i))
        for i in range(5)
    ]
    records.append(vrec("dir", "ctx://resources/docs/", i=9, parent_uri="ctx://resources/", breadcrumb="A > B"))
    metadata_store.put_vectors(records)
    want = {r.id: r for r in records}
    assert_same_vector_records(all_vectors(metadata_store), want)
    assert [len(b) for b in metadata_store.iter_vectors(A, batch_size=2)] == [2, 2, 2]
    assert [len(b) for b in metadata_store.iter_vectors(A, batch_size=4)] == [4, 2]

    replaced = vrec("v1", "ctx://resources/other.md", i=42, text="new", category="c")
    metadata_store.put_vectors([replaced])
    want["v1"] = replaced
    assert_same_vector_records(all_vectors(metadata_store, A), want)

    found = metadata_store.vector_ids_for(A, ["ctx://resources/docs/f0.md", "ctx://resources/docs"])
    assert found == ["dir", "v0", "v3"]
    got = metadata_store.get_vectors(A, ["ctx://resources/docs/f0.md", "ctx://resources/docs/f2.md/"])
    assert [r.id for r in got] == ["v0", "v3", "v2"]  # by (uri, level, chunk_index)

    metadata_store.delete_vectors(["v0", "v3", "unknown"])
    del want["v0"], want["v3"]
    assert_same_vector_records(all_vectors(metadata_store), want)
    metadata_store.delete_vectors([])
    assert metadata_store.vector_ids_for(A, ["ctx://resources/docs/f0.md"]) == []


def test_vectors_with_bad_shape_are_rejected(metadata_store: MetadataStore) -> None:
    for bad in (np.full(8, np.nan, np.float32), np.ones((2, 4), np.float32), np.zeros(0, np.float32)):
        with pytest.raises(ContextEngineError) as info:
            batch = [vrec("ok", "ctx://resources/a.md"), vrec("bad", "ctx://resources/b.md", vector=bad)]
            metadata_store.put_vectors(batch)
        assert info.value.code is ErrorCode.REQUEST_INVALID
    assert all_vectors(metadata_store) == {}


def test_account_generation_increases_with_vector_writes_of_that_account(metadata_store: MetadataStore) -> None:
    assert metadata_store.account_generation(A) == 0
    metadata_store.upsert_nodes([node("ctx://resources/a.md")])
    metadata_store.set_meta("k", "v")
    assert metadata_store.account_generation(A) == 0
    metadata_store.put_vectors([vrec("a", "ctx://resources/a.md")])
    g1 = metadata_store.account_generation(A)
    assert g1 > 0
    metadata_store.put_vectors([vrec("a", "ctx://resources/a.md", i=3)])
    g2 = metadata_store.account_generation(A)
    assert g2 > g1
    metadata_store.delete_vectors(["missing"])  # deletes nothing: no bump
    assert metadata_store.account_generation(A) == g2
    metadata_store.put_vectors([vrec("b", "ctx://resources/b.md", account_id="acc-b")])
    assert metadata_store.account_generation(A) == g2  # another account's write
    metadata_store.delete_vectors(["a"])
    assert metadata_store.account_generation(A) > g2


def test_changes_since_gives_the_changed_rows_and_the_deleted_ids(metadata_store: MetadataStore) -> None:
    metadata_store.put_vectors([vrec("a", "ctx://resources/a.md"), vrec("b", "ctx://resources/b.md", i=2)])
    g1, t1 = metadata_store.account_state(A)
    assert metadata_store.changes_since(A, g1, token=t1).empty
    with metadata_store.transaction():
        metadata_store.delete_vectors(["a"])
        metadata_store.put_vectors([vrec("c", "ctx://resources/c.md", i=3), vrec("b", "ctx://resources/b.md", i=4)])
    delta = metadata_store.changes_since(A, g1, token=t1)
    assert delta.generation == metadata_store.account_generation(A) > g1 and not delta.reload
    assert delta.token == metadata_store.account_state(A).token != t1
    assert [r.id for r in delta.upserted] == ["b", "c"] and delta.removed == ["a"]
    assert delta.upserted[0].vector.tolist() == vrec("b", "ctx://resources/b.md", i=4).vector.tolist()
    everything = metadata_store.changes_since(A, 0)
    assert [r.id for r in everything.upserted] == ["b", "c"] and everything.removed == ["a"]
    assert [r.id for r in metadata_store.changes_since(A, 0, levels=[2]).upserted] == []
    assert metadata_store.changes_since(A, 0, max_changes=2).reload  # three ids changed
    assert metadata_store.changes_since(A, delta.generation + 5).reload  # ahead of the database
    assert metadata_store.changes_since("acc-none", 0).empty


def test_load_vector_matrix_is_at_the_account_generation(metadata_store: MetadataStore) -> None:
    metadata_store.put_vectors([vrec("a", "ctx://resources/a.md"), vrec("z", "ctx://resources/z.md", level=2)])
    m = metadata_store.load_vector_matrix(A)
    assert m.generation == metadata_store.account_generation(A) and m.ids == ["a", "z"]
    only0 = metadata_store.load_vector_matrix(A, levels=[0], with_vectors=False)
    assert only0.ids == ["a"] and only0.vectors.shape == (1, 0)
    rows = metadata_store.get_vector_rows(A, ["z", "missing"])
    assert list(rows) == ["z"] and rows["z"].level == 2
    assert metadata_store.get_vector_rows("acc-b", ["z"]) == {}
    assert metadata_store.get_vector_texts(A, ["z", "a", "missing"]) == {"z": ("", "", ""), "a": ("", "", "")}
    assert metadata_store.get_vector_texts("acc-b", ["z"]) == {}


# ---- generation tokens: a state of an account is its generation and that generation's token ---------------------
def _rewind(url: str, to: AccountState, lost_ids: list[str]) -> None:
    """What a failover to a replica that missed the last commits (or a restored backup) leaves: account ``A`` back
    at ``to``, the rows and log entries written after it gone."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text("DELETE FROM index_changes WHERE account_id = :a AND generation > :g"),
                {"a": A, "g": to.generation},
            )
            conn.execute(
                text("UPDATE index_generations SET generation = :g, token = :t WHERE account_id = :a"),
                {"a": A, "g": to.generation, "t": to.token},
            )
            for rid in lost_ids:
                conn.execute(text("DELETE FROM vectors WHERE id = :id"), {"id": rid})
    finally:
        engine.dispose()


def test_account_state_names_every_generation_with_a_new_token(metadata_store: MetadataStore) -> None:
    assert metadata_store.account_state(A) == AccountState(0, None)
    metadata_store.put_vectors([vrec("a", "ctx://resources/a.md")])
    s1 = metadata_store.account_state(A)
    assert s1.generation == metadata_store.account_generation(A) > 0
    assert isinstance(s1.token, str) and len(s1.token) == 32
    with pytest.raises(RuntimeError, match="boom"), metadata_store.transaction():
        metadata_store.put_vectors([vrec("b", "ctx://resources/b.md")])
        raise RuntimeError("boom")
    assert metadata_store.account_state(A) == s1  # a rolled-back write leaves no trace
    metadata_store.delete_vectors(["a"])
    s2 = metadata_store.account_state(A)
    assert s2.generation > s1.generation and s2.token not in (None, s1.token)
    empty = metadata_store.load_vector_matrix(A)
    assert (empty.ids, empty.generation, empty.token) == ([], *s2)
    metadata_store.put_vectors([vrec("c", "ctx://resources/c.md"), vrec("d", "ctx://resources/d.md", level=2)])
    m = metadata_store.load_vector_matrix(A, levels=[0], with_vectors=False)
    assert (m.ids, (m.generation, m.token)) == (["c"], metadata_store.account_state(A))
    assert metadata_store.account_state(B) == AccountState(0, None)  # another account's writes


def test_changes_since_starts_only_from_a_state_the_history_holds(metadata_backend: MetadataBackend) -> None:
    """A database rewound (a failover, a restored backup) that writes carry back to a reader's generation, or past
    it, holds another state under that number: the reader reloads instead of catching up on top of rows the
    database no longer has."""
    store = metadata_backend.open()
    store.put_vectors([vrec("a", "ctx://resources/a.md")])
    kept = store.account_state(A)
    store.put_vectors([vrec("lost", "ctx://resources/lost.md")])
    lost = store.account_state(A)  # what a reader holds when the database is rewound
    _rewind(metadata_backend.url, kept, ["lost"])
    assert store.account_state(A) == kept
    assert store.changes_since(A, lost.generation, token=lost.token).reload  # ahead of the database
    store.put_vectors([vrec("new", "ctx://resources/new.md")])
    again = store.account_state(A)
    assert again.generation == lost.generation and again.token != lost.token
    assert store.changes_since(A, lost.generation, token=lost.token).reload  # the same number, another state
    delta = store.changes_since(A, kept.generation, token=kept.token)  # before the rewind: in both histories
    assert not delta.reload and [r.id for r in delta.upserted] == ["new"] and (delta.generation, delta.token) == again
    store.put_vectors([vrec("newer", "ctx://resources/newer.md")])
    assert store.changes_since(A, lost.generation, token=lost.token).reload  # past it: the log names another token
    assert store.changes_since(A, lost.generation).reload  # a state without a token is not this history's either
    assert [r.id for r in store.changes_since(A, again.generation, token=again.token).upserted] == ["newer"]


def test_states_written_before_tokens_still_catch_up(metadata_backend: MetadataBackend) -> None:
    """Rows of a database upgraded to revision 0005 keep NULL tokens, and derived state written before it holds
    none: ``None`` matches NULL, so an upgrade reloads nothing."""
    store = metadata_backend.open()
    store.put_vectors([vrec("a", "ctx://resources/a.md")])
    store.put_vectors([vrec("b", "ctx://resources/b.md")])
    g = store.account_generation(A)
    engine = create_engine(metadata_backend.url)
    try:
        with engine.begin() as conn:  # what the migration leaves of rows written before it
            conn.execute(text("UPDATE index_generations SET token = NULL, log_floor_token = NULL"))
            conn.execute(text("UPDATE index_changes SET token = NULL"))
    finally:
        engine.dispose()
    assert store.account_state(A) == AccountState(g, None) and store.load_vector_matrix(A).token is None
    assert store.changes_since(A, g).empty
    assert [r.id for r in store.changes_since(A, g - 1).upserted] == ["b"]
    store.put_vectors([vrec("c", "ctx://resources/c.md")])
    delta = store.changes_since(A, g)
    assert not delta.reload and [r.id for r in delta.upserted] == ["c"]
    assert (delta.generation, delta.token) == store.account_state(A) and delta.token is not None
    assert store.changes_since(A, g, token="0" * 32).reload


def test_the_log_floor_keeps_its_token_when_the_log_is_pruned(
    metadata_store: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_rows, "LOG_RETAIN", 3)
    monkeypatch.setattr(vector_rows, "_PRUNE_EVERY", 2)
    states = []
    for i in range(8):
        metadata_store.put_vectors([vrec(f"v{i}", f"ctx://resources/v{i}.md")])
        states.append(metadata_store.account_state(A))
    assert [s.generation for s in states] == list(range(1, 9))  # pruned at 4, 6 and 8: the floor is 8 - 3 = 5
    floor = states[4]
    delta = metadata_store.changes_since(A, floor.generation, token=floor.token)
    assert not delta.reload and [r.id for r in delta.upserted] == ["v5", "v6", "v7"]
    assert metadata_store.changes_since(A, floor.generation).reload
    assert metadata_store.changes_since(A, floor.generation, token=states[5].token).reload
    assert metadata_store.changes_since(A, 4, token=states[3].token).reload  # pruned


def test_meta_set_get_replace(metadata_store: MetadataStore) -> None:
    metadata_store.set_meta("embedding_model", "all-MiniLM-L6-v2")
    metadata_store.set_meta("embedding_dim", "384")
    metadata_store.set_meta("embedding_dim", "768")
    assert metadata_store.get_meta("embedding_model") == "all-MiniLM-L6-v2"
    assert metadata_store.get_meta("embedding_dim") == "768"


# ---- transactions -------------------------------------------------------------------------------------------------
def _snapshot(store: MetadataStore) -> tuple[object, ...]:
    return (
        [n.model_dump() for n in store.list_all_nodes(A)],
        [r.model_dump() for r in store.get_relations(A, "ctx://resources/docs/a.md")],
        {k: (v.model_dump(exclude={"vector"}), v.vector.tolist()) for k, v in all_vectors(store).items()},
        store.get_meta("stamp"),
        store.account_generation(A),
        store.count_nodes(),
    )


def test_transaction_rolls_back_everything_on_exception(metadata_store: MetadataStore) -> None:
    metadata_store.upsert_nodes([node(u) for u in TREE])
    metadata_store.add_relations(
        A, [Relation(from_uri="ctx://resources/docs/a.md", to_uri="ctx://resources/docs/b.md", relation_type="see")]
    )
    metadata_store.put_vectors([vrec("v1", "ctx://resources/docs/a.md"), vrec("v2", "ctx://resources/docs/b.md", i=2)])
    metadata_store.set_meta("stamp", "model-a")
    before = _snapshot(metadata_store)

    with pytest.raises(RuntimeError, match="boom"), metadata_store.transaction():
        metadata_store.upsert_nodes([node("ctx://resources/new.md"), node("ctx://resources/docs/a.md", title="new")])
        metadata_store.delete_nodes(A, ["ctx://resources/docs/b.md"])
        metadata_store.set_index_status(A, ["ctx://resources/docsx/c.md"], "pending")
        metadata_store.add_relations(
            A, [Relation(from_uri="ctx://resources/docs/a.md", to_uri="ctx://resources/new.md", relation_type="x")]
        )
        metadata_store.put_vectors([vrec("v1", "ctx://resources/docs/a.md", i=7), vrec("v3", "ctx://resources/new.md")])
        metadata_store.delete_vectors(["v2"])
        metadata_store.set_meta("stamp", "model-b")
        # reads inside the transaction see its own writes
        assert metadata_store.get_node(A, "ctx://resources/new.md") is not None
        assert metadata_store.get_node(A, "ctx://resources/docs/b.md") is None
        assert metadata_store.get_meta("stamp") == "model-b"
        assert sorted(all_vectors(metadata_store)) == ["v1", "v3"]
        raise RuntimeError("boom")

    assert _snapshot(metadata_store) == before


def test_transaction_commits_together_and_nested_blocks_join(metadata_store: MetadataStore) -> None:
    with metadata_store.transaction():
        metadata_store.upsert_nodes([node("ctx://resources/a.md")])
        with metadata_store.transaction():
            metadata_store.put_vectors([vrec("a", "ctx://resources/a.md")])
        metadata_store.set_meta("stamp", "m")
    assert metadata_store.get_node(A, "ctx://resources/a.md") is not None
    assert sorted(all_vectors(metadata_store)) == ["a"]
    assert metadata_store.get_meta("stamp") == "m"

    with pytest.raises(ValueError), metadata_store.transaction():
        metadata_store.upsert_nodes([node("ctx://resources/b.md")])
        with metadata_store.transaction():  # an exception in an inner block rolls back the outer one
            metadata_store.set_meta("stamp", "n")
            raise ValueError("inner")
    assert metadata_store.get_node(A, "ctx://resources/b.md") is None
    assert metadata_store.get_meta("stamp") == "m"


def test_uncommitted_writes_are_invisible_to_other_threads(metadata_store: MetadataStore) -> None:
    seen: dict[str, object] = {}

    def look(label: str) -> None:
        seen[label] = (
            metadata_store.get_node(A, "ctx://resources/a.md") is not None,
            metadata_store.get_meta("stamp"),
            sorted(all_vectors(metadata_store)),
        )

    generation = metadata_store.account_generation(A)
    with metadata_store.transaction():
        metadata_store.upsert_nodes([node("ctx://resources/a.md")])
        metadata_store.set_meta("stamp", "m")
        metadata_store.put_vectors([vrec("a", "ctx://resources/a.md")])
        reader = threading.Thread(target=look, args=("during",))
        reader.start()
        reader.join()
        assert metadata_store.account_generation(A) == generation  # committed value only
    reader = threading.Thread(target=look, args=("after",))
    reader.start()
    reader.join()
    assert seen == {"during": (False, None, []), "after": (True, "m", ["a"])}
    assert metadata_store.account_generation(A) > generation


def test_concurrent_writers_from_threads(metadata_store: MetadataStore) -> None:
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        try:
            for i in range(20):
                with metadata_store.transaction():
                    metadata_store.upsert_nodes([node(f"ctx://resources/t{t}/f{i}.md")])
                    metadata_store.put_vectors([vrec(f"t{t}-{i}", f"ctx://resources/t{t}/f{i}.md", i=i)])
        except BaseException as err:  # noqa: BLE001 - collected and asserted below
            errors.append(err)

    g0 = metadata_store.account_generation(A)
    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert metadata_store.count_nodes(A)["files"] == 80
    assert len(all_vectors(metadata_store)) == 80
    assert metadata_store.account_generation(A) == g0 + 80  # no lost increments
    assert len(metadata_store.changes_since(A, g0).upserted) == 80


# ---- tenancy ------------------------------------------------------------------------------------------------------
def test_account_isolation_across_every_method(metadata_store: MetadataStore) -> None:
    shared = ["ctx://resources/", "ctx://resources/docs/", "ctx://resources/docs/a.md"]
    metadata_store.upsert_nodes([node(u, account_id=A, title="A") for u in shared])
    metadata_store.upsert_nodes([node(u, account_id=B, title="B", index_status="pending") for u in shared])
    metadata_store.upsert_nodes([node("ctx://resources/docs/only-b.md", account_id=B, title="B")])
    rel = Relation(from_uri="ctx://resources/docs/a.md", to_uri="ctx://resources/docs/", relation_type="in")
    metadata_store.add_relations(B, [rel])
    metadata_store.put_vectors([vrec("b1", "ctx://resources/docs/a.md", account_id=B)])

    def only_a(nodes: list[NodeRecord]) -> bool:
        return all(n.account_id == A and n.title == "A" for n in nodes)

    a_doc = metadata_store.get_node(A, "ctx://resources/docs/a.md")
    assert a_doc is not None and only_a([a_doc])
    assert metadata_store.get_node(A, "ctx://resources/docs/only-b.md") is None
    assert only_a(list(metadata_store.get_nodes(A, shared + ["ctx://resources/docs/only-b.md"]).values()))
    assert uris(metadata_store.list_children(A, "ctx://resources/docs/")) == ["ctx://resources/docs/a.md"]
    assert only_a(metadata_store.list_subtree(A, "ctx://resources/"))
    assert uris(metadata_store.list_subtree(A, "ctx://resources/")) == shared
    assert only_a(metadata_store.list_all_nodes(A))
    assert metadata_store.pending_nodes(A) == []
    assert metadata_store.count_nodes(A) == {"nodes": 3, "files": 1, "directories": 2, "pending": 0}
    assert metadata_store.get_relations(A, "ctx://resources/docs/a.md") == []
    assert metadata_store.vector_ids_for(A, ["ctx://resources/docs/a.md"]) == []
    assert metadata_store.get_vectors(A, ["ctx://resources/docs/a.md"]) == []
    assert list(metadata_store.iter_vectors(A)) == []

    # writes through account A never touch account B
    metadata_store.set_index_status(A, shared, "pending")
    metadata_store.delete_nodes(A, shared)
    assert metadata_store.list_all_nodes(A) == []
    assert len(metadata_store.list_all_nodes(B)) == 4
    assert metadata_store.get_relations(B, "ctx://resources/docs/a.md") == [rel]
    assert metadata_store.count_nodes(B)["pending"] == 3


# ---- persistence and schema ---------------------------------------------------------------------------------------
def test_reopen_after_close_finds_everything(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    store.upsert_nodes([node(u) for u in TREE])
    see = Relation(from_uri="ctx://resources/docs/a.md", to_uri="ctx://resources/docs/b.md", relation_type="see")
    store.add_relations(A, [see])
    store.put_vectors([vrec("v1", "ctx://resources/docs/a.md", text="hello")])
    store.set_meta("stamp", "model-a")
    store.set_index_status(A, ["ctx://resources/docs/b.md"], "pending")
    before = _snapshot(store)
    store.close()
    store.close()  # idempotent
    with pytest.raises(ContextEngineError) as info:
        store.get_node(A, "ctx://resources/docs/")
    assert info.value.code is ErrorCode.STORAGE_FAILED

    again = metadata_backend.open()
    assert _snapshot(again) == before
    assert uris(again.pending_nodes(A)) == ["ctx://resources/docs/b.md"]


def test_newer_schema_version_is_refused(metadata_backend: MetadataBackend) -> None:
    metadata_backend.open().close()
    engine = create_engine(metadata_backend.url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE schema_version SET version = version + 1"))
    finally:
        engine.dispose()
    with pytest.raises(ContextEngineError) as info:
        metadata_backend.open()
    assert info.value.code is ErrorCode.CONFIG_INVALID
    assert info.value.details["found"] == SCHEMA_VERSION + 1 and info.value.details["supported"] == SCHEMA_VERSION


# ---- memories (issue 11): lifecycle columns, queries, versions, schema upgrade -------------------------------------
def _memory(
    uri: str,
    *,
    occurred: datetime | None = None,
    meta: dict | None = None,
    digest: str | None = None,
    updated: datetime | None = None,
) -> NodeRecord:
    parent = uri.rsplit("/", 1)[0] + "/"
    return NodeRecord(
        account_id=A,
        uri=uri,
        parent_uri=parent,
        owner_space="user:bob",
        context_type="memory",
        is_dir=False,
        occurred_at=occurred,
        metadata=meta,
        content_hash=digest,
        updated_at=updated,
    )


def test_memory_fields_round_trip_and_queries(metadata_store: MetadataStore) -> None:
    store = metadata_store
    t0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    s1 = "ctx://user/bob/memories/sessions/s1/"
    store.upsert_nodes(
        [
            _memory(
                s1 + "000001.md",
                occurred=t0,
                meta={"speaker": "Caroline", "turn": 1},
                digest="h1",
                updated=t0 + timedelta(days=2),
            ),
            _memory(
                s1 + "000002.md",
                occurred=t0 + timedelta(days=1),
                meta={"speaker": "Melanie", "ok": True},
                digest="h2",
                updated=t0 + timedelta(days=3),
            ),
            _memory("ctx://user/bob/memories/general/tea.md", meta=None, digest="h3", updated=t0 + timedelta(days=1)),
        ]
    )
    got = store.get_node(A, s1 + "000001.md")
    assert got is not None and got.occurred_at == t0 and got.metadata == {"speaker": "Caroline", "turn": 1}
    assert got.version == 1
    assert store.last_child_uri(A, s1) == s1 + "000002.md" and store.count_children(A, s1) == 2
    assert store.last_child_uri(B, s1) is None
    root = ["ctx://user/bob/memories/"]
    in_window, total = store.query_files(
        A, uri_prefixes=root, occurred_start=t0 + timedelta(hours=1), occurred_end=t0 + timedelta(days=2)
    )
    assert [n.uri for n in in_window] == [s1 + "000002.md"] and total == 1
    # the dates a question names: any of several windows; a file without occurred_at counts by its created_at
    day = timedelta(days=1)
    windows = [(t0 - day, t0 + timedelta(hours=1)), (t0 + 10 * day, t0 + 11 * day)]
    assert store.select_file_uris(A, uri_prefixes=root, context_type="memory", occurred_windows=windows) == [
        (s1 + "000001.md", "user:bob")
    ]
    both = [(t0, t0 + 2 * day)]
    assert [u for u, _ in store.select_file_uris(A, uri_prefixes=root, occurred_windows=both)] == [
        s1 + "000001.md",
        s1 + "000002.md",
    ]
    assert store.select_file_uris(A, uri_prefixes=root, occurred_windows=[(t0 + 5 * day, t0 + 6 * day)]) == []
    by_speaker, _ = store.query_files(A, uri_prefixes=root, metadata_equals={"speaker": ["Caroline", "Nobody"]})
    assert [n.uri for n in by_speaker] == [s1 + "000001.md"]
    assert [n.uri for n in store.query_files(A, uri_prefixes=root, metadata_equals={"turn": 1})[0]] == [
        s1 + "000001.md"
    ]
    assert [n.uri for n in store.query_files(A, uri_prefixes=root, metadata_equals={"ok": True})[0]] == [
        s1 + "000002.md"
    ]
    newest, total = store.query_files(A, uri_prefixes=root, newest_first=True, limit=2)
    assert [n.uri for n in newest] == [s1 + "000002.md", s1 + "000001.md"] and total == 3
    assert store.query_files(B, uri_prefixes=root)[1] == 0
    found = store.find_by_hash(A, ["h3", "nope"], uri_prefix="ctx://user/bob/memories/")
    assert list(found) == ["h3"] and found["h3"].uri.endswith("tea.md")
    assert store.find_by_hash(A, ["h3"], uri_prefix="ctx://user/alice/memories/") == {}


#: Keys a memory's metadata may have (printable, 1..64 characters) that SQLite's JSON path did not say (attack
#: pass: a filter on them matched nothing): non-ASCII (stored escaped), a quote, a backslash; and the path's own
#: syntax (".", "$", "[0]", "'"), which must be taken literally. "\\u6807\\u7b7e" is the escaped text of "标签".
ODD_KEYS = [
    "标签",
    "Getränk",
    "ключ",
    "🍵",
    'say "hi"',
    "a\\b",
    "\\",
    "\\u6807\\u7b7e",
    "a.b",
    "$",
    "$.a",
    "a[0]",
    "it's",
    " ",
]


def test_metadata_equals_takes_any_key_literally(metadata_store: MetadataStore) -> None:
    store = metadata_store
    base, root = "ctx://user/bob/memories/general/", ["ctx://user/bob/memories/"]
    store.upsert_nodes(
        [_memory(f"{base}k{i}.md", meta={key: "v", "tag": "t"}, digest=f"k{i}") for i, key in enumerate(ODD_KEYS)]
        + [_memory(f"{base}nested.md", meta={"a": {"b": "v"}, "tag": "t"}, digest="nested")]  # not "a.b"
    )
    for i, key in enumerate(ODD_KEYS):
        for wanted in ("v", ["nope", "v"]):
            found, total = store.query_files(A, uri_prefixes=root, metadata_equals={key: wanted})
            assert ([n.uri for n in found], total) == ([f"{base}k{i}.md"], 1), key
        assert store.select_file_uris(A, uri_prefixes=root, metadata_equals={key: "v", "tag": "t"}) == [
            (f"{base}k{i}.md", "user:bob")
        ], key
        assert store.query_files(A, uri_prefixes=root, metadata_equals={key: "other"})[1] == 0, key
        assert store.query_files(B, uri_prefixes=root, metadata_equals={key: "v"})[1] == 0, key
    assert store.query_files(A, uri_prefixes=root, metadata_equals={"tag": "t"})[1] == len(ODD_KEYS) + 1


def test_metadata_equals_compares_values_of_the_same_json_type(metadata_store: MetadataStore) -> None:
    """A value matches one of its own JSON type: on PostgreSQL a number or boolean filter over a key some memory
    holds as text failed in a cast (a 500); on SQLite ``1`` matched ``"1"`` and ``true``, ``0`` matched ``"abc"``."""
    store = metadata_store
    base, root = "ctx://user/bob/memories/general/", ["ctx://user/bob/memories/"]
    held = {
        "text1": "1",
        "int1": 1,
        "float1": 1.0,
        "true": True,
        "false": False,
        "text_true": "true",
        "zero": 0,
        "abc": "abc",
        "list": [1],
        "object": {"n": 1},
        "null": None,
        "int64": 2**63 - 1,
        "fraction": 0.30000000000000004,
    }
    store.upsert_nodes([_memory(f"{base}{name}.md", meta={"n": v}, digest=name) for name, v in held.items()])
    for wanted, expected in (
        (1, {"int1", "float1"}),
        (1.0, {"int1", "float1"}),
        ("1", {"text1"}),
        (True, {"true"}),
        (False, {"false"}),
        (0, {"zero"}),
        ("true", {"text_true"}),
        ("abc", {"abc"}),
        (2**63 - 1, {"int64"}),
        (2**63 - 2, set()),
        (0.30000000000000004, {"fraction"}),
        (0.3, set()),
        ("[1]", set()),
        (["1", True, 0], {"text1", "true", "zero"}),
    ):
        found, _ = store.query_files(A, uri_prefixes=root, metadata_equals={"n": wanted})
        assert {n.uri.removeprefix(base).removesuffix(".md") for n in found} == expected, wanted


def test_children_window_is_bounded(metadata_store: MetadataStore) -> None:
    store = metadata_store
    s1 = "ctx://user/bob/memories/sessions/long/"
    store.upsert_nodes([_memory(f"{s1}{i:06d}.md") for i in range(1, 31)])
    sample, total = store.children_window(A, s1, 4)
    assert total == 30
    assert [n.uri.rsplit("/", 1)[1] for n in sample] == [
        "000001.md",
        "000002.md",
        "000003.md",
        "000004.md",
        "000027.md",
        "000028.md",
        "000029.md",
        "000030.md",
    ]
    small, total = store.children_window(A, s1, 20)
    assert total == 30 and len(small) == 30


def test_versions_are_kept_and_deleted_with_the_node(metadata_store: MetadataStore) -> None:
    store = metadata_store
    uri = "ctx://user/bob/memories/general/tea.md"
    store.upsert_nodes([_memory(uri, digest="h")])
    t = datetime(2024, 1, 1, tzinfo=UTC)
    with store.transaction():
        store.add_version(A, uri, 1, "Bob likes green tea", t)
    versions = store.get_versions(A, uri)
    assert [(v["version"], v["text"], v["created_at"]) for v in versions] == [(1, "Bob likes green tea", t)]
    assert store.get_versions(B, uri) == []
    store.delete_nodes(A, [uri])
    assert store.get_versions(A, uri) == []


def test_schema_version_1_database_is_upgraded_in_place(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    store.upsert_nodes([_memory("ctx://user/bob/memories/general/old.md", digest="h")])
    store.close()
    engine = create_engine(metadata_backend.url)
    try:  # make it look like a version-1 database: no memory columns, no versions table
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE node_versions"))
            for table, column in (
                ("nodes", "occurred_at"),
                ("nodes", "metadata_json"),
                ("nodes", "version"),
                ("vectors", "context"),
            ):
                conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
            conn.execute(text("UPDATE schema_version SET version = 1"))
    finally:
        engine.dispose()
    again = metadata_backend.open()
    node = again.get_node(A, "ctx://user/bob/memories/general/old.md")
    assert node is not None and node.version == 1 and node.metadata is None and node.occurred_at is None
    again.add_version(A, node.uri, 1, "old text", datetime(2024, 1, 1, tzinfo=UTC))
    assert [v["text"] for v in again.get_versions(A, node.uri)] == ["old text"]
    engine = create_engine(metadata_backend.url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT version FROM schema_version")).scalar() == SCHEMA_VERSION
    finally:
        engine.dispose()
    again.close()


def test_a_bulk_write_makes_readers_behind_it_reload(metadata_store: MetadataStore) -> None:
    metadata_store.put_vectors([vrec("a", "ctx://resources/a.md")])
    g1, t1 = metadata_store.account_state(A)
    metadata_store.put_vectors([vrec("b", "ctx://resources/b.md"), vrec("c", "ctx://resources/c.md")], bulk=True)
    g2, t2 = metadata_store.account_state(A)
    assert g2 > g1 and t2 is not None
    assert metadata_store.changes_since(A, g1, token=t1).reload and metadata_store.changes_since(A, 0).reload
    assert metadata_store.changes_since(A, g2, token=t2).empty
    metadata_store.put_vectors([vrec("d", "ctx://resources/d.md")])
    # a reader at the floor (it loaded the bulk write) catches up: the floor keeps its generation's token
    delta = metadata_store.changes_since(A, g2, token=t2)
    assert not delta.reload and [r.id for r in delta.upserted] == ["d"]
    assert metadata_store.changes_since(A, g2, token="0" * 32).reload  # another history's state at that number
    assert metadata_store.changes_since(A, g2).reload
    assert metadata_store.load_vector_matrix(A).ids == ["a", "b", "c", "d"]


def test_bulk_upsert_nodes_equals_the_row_by_row_path(metadata_store: MetadataStore) -> None:
    def view(account_id: str) -> list[dict[str, object]]:
        return [
            n.model_dump(exclude={"account_id", "created_at", "updated_at"})
            for n in metadata_store.list_all_nodes(account_id)
        ]

    metadata_store.upsert_nodes([node(u, account_id="orm") for u in TREE])
    metadata_store.upsert_nodes([node(TREE[2], account_id="orm", title="renamed")])
    metadata_store.upsert_nodes([node(u, account_id="bulk") for u in TREE[:3]], bulk=True)
    before = metadata_store.get_node("bulk", TREE[2])
    metadata_store.upsert_nodes([node(u, account_id="bulk") for u in TREE], bulk=True)  # 3 updated, 5 inserted
    metadata_store.upsert_nodes([node(TREE[2], account_id="bulk", title="renamed")], bulk=True)
    assert view("bulk") == view("orm") and len(view("bulk")) == len(TREE)
    after = metadata_store.get_node("bulk", TREE[2])
    assert before is not None and after is not None
    assert after.title == "renamed" and after.created_at == before.created_at  # created_at kept on update


def test_after_commit_runs_once_the_transaction_commits_and_never_after_a_rollback(
    metadata_store: MetadataStore, caplog: pytest.LogCaptureFixture
) -> None:
    """For caches of what a write commits (the hint index, knowledge/hint_index.py): a callback registered inside a
    transaction runs after its commit, in order, nested blocks included; outside one at once; after a rollback never.
    A failing callback is logged and the others still run: the write is committed."""
    audit = open_audit(metadata_store)
    ran: list[str] = []
    audit.after_commit(lambda: ran.append("outside"))
    assert ran == ["outside"]
    with metadata_store.transaction():
        audit.after_commit(lambda: ran.append("first"))
        with metadata_store.transaction():
            audit.after_commit(lambda: ran.append("nested"))
        assert ran == ["outside"]
    assert ran == ["outside", "first", "nested"]
    with pytest.raises(RuntimeError), metadata_store.transaction():
        audit.after_commit(lambda: ran.append("rolled back"))
        raise RuntimeError("boom")

    def broken() -> None:
        raise ValueError("a cache's bug")

    with metadata_store.transaction():
        audit.after_commit(broken)
        audit.after_commit(lambda: ran.append("after the broken one"))
    assert ran == ["outside", "first", "nested", "after the broken one"]
    assert "a callback after a committed transaction failed" in caplog.text


def test_replacing_hint_rows_says_the_generations_and_the_terms_it_removed(metadata_store: MetadataStore) -> None:
    audit = open_audit(metadata_store)
    uri, other = "ctx://resources/runbooks/a.md", "ctx://resources/runbooks/b.md"

    def doc(u: str, title: str) -> HintDoc:
        return HintDoc(u, "ctx://resources/runbooks/", "", "resource", title, "kubernetes", (title.lower(),))

    first = audit.replace_hint_docs(A, [], [doc(uri, "Crash"), doc(other, "Disk")], [HintTerm(uri, "crash", "title")])
    assert (first.previous_generation, first.generation, first.removed_terms) == (0, 1, ())
    second = audit.replace_hint_docs(A, [other], [doc(uri, "Storm")], [HintTerm(uri, "storm", "title")])
    assert (second.previous_generation, second.generation) == (1, 2)
    assert second.removed_terms == (HintTerm(uri, "crash", "title"),)  # the replaced document's; b had none
    with pytest.raises(RuntimeError), metadata_store.transaction():
        inside = audit.replace_hint_docs(A, [uri], [], [])
        assert (inside.previous_generation, inside.generation) == (2, 3)  # as the transaction sees it
        raise RuntimeError("rolled back")
    generation, _, docs, terms = audit.load_hint_index(A)
    assert generation == 2 and [d.title for d in docs] == ["Storm"] and terms == [HintTerm(uri, "storm", "title")]


def test_the_hint_change_log_says_what_changed_since_a_generation(
    metadata_store: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26: a process whose compiled hint index is behind reads the changes since its generation (the changed
    documents' term rows then and their rows now) instead of reloading the account; the log says when it cannot."""
    from context_engine.storage.metadata import audit as audit_module

    audit = open_audit(metadata_store)
    a, b, c = (f"ctx://resources/runbooks/{n}.md" for n in "abc")

    def doc(u: str, title: str) -> HintDoc:
        return HintDoc(u, "ctx://resources/runbooks/", "", "resource", title, None, (title.lower(),))

    def since(generation: int, most: int = 100) -> audit_module.HintCatchUp | None:
        return audit.hint_changes_since(A, generation, audit.hint_token(A, generation), most)

    first = audit.replace_hint_docs(A, [], [doc(a, "Crash"), doc(b, "Disk")], [HintTerm(a, "crash", "title")])  # 1
    audit.replace_hint_docs(A, [], [doc(a, "Storm")], [HintTerm(a, "storm", "title"), HintTerm(a, "x", "code")])  # 2
    audit.replace_hint_docs(A, [b], [doc(c, "Fsync")], [HintTerm(c, "fsync", "metric")])  # 3: b dropped, c new
    fourth = audit.replace_hint_docs(A, [a], [], [])  # 4: a dropped
    assert first.previous_token is None and first.token == audit.hint_token(A, 1) and len(first.token or "") == 32
    assert fourth.previous_token == audit.hint_token(A, 3) != fourth.token == audit.hint_token(A, 4)
    since1 = since(1)
    assert since1 is not None and (since1.generation, since1.uris, since1.token) == (4, (a, b, c), fourth.token)
    # the rows each document had at generation 1 (a: its first change's), and its rows now
    assert since1.removed_terms == (HintTerm(a, "crash", "title"),)
    assert [d.uri for d in since1.docs] == [c] and since1.terms == (HintTerm(c, "fsync", "metric"),)
    since3 = since(3)
    assert since3 is not None and since3.uris == (a,) and since3.docs == () and since3.terms == ()
    assert set(since3.removed_terms) == {HintTerm(a, "storm", "title"), HintTerm(a, "x", "code")}
    assert since(4) == audit_module.HintCatchUp(4, None, (), (), (), (), fourth.token)
    assert audit.hint_changes_since(A, 0, None, 100) is not None  # the log reaches back to the first write
    assert since(1, most=3) is None  # more than `most` document changes: reload
    assert since(1, most=2) is None  # more generations than `most`: not even read
    assert audit.hint_changes_since(A, 5, None, 100) is None  # ahead of the store (a replaced database): reload
    # another history that reached generation 3 (a restored database): its token differs, reload
    assert audit.hint_changes_since(A, 3, "0" * 32, 100) is None and audit.hint_changes_since(A, 3, None, 100) is None
    with pytest.raises(RuntimeError), metadata_store.transaction():
        audit.replace_hint_docs(A, [c], [], [])
        raise RuntimeError("rolled back: logs nothing")
    assert since(3) == since3
    audit.replace_hint_docs(A, [], [doc(a, "Crash")], [], version="v2", clear_all=True)  # 5: a rebuild
    assert since(4) is None and since(1) is None and audit.hint_token(A, 4) is None  # the older rows went
    audit.replace_hint_docs(A, [c], [], [])  # 6
    after = since(5)
    assert after is not None and (after.generation, after.version, after.uris) == (6, "v2", (c,))
    monkeypatch.setattr(audit_module, "HINT_LOG_RETAIN", 2)
    monkeypatch.setattr(audit_module, "_HINT_PRUNE_EVERY", 1)
    for _ in range(3):
        audit.replace_hint_docs(A, [b], [], [])  # 7, 8, 9: the log keeps generations 8 and 9
    assert since(6) is None  # pruned: reload
    kept = since(8)
    assert kept is not None and (kept.generation, kept.uris) == (9, (b,))
    assert since(7) is None  # its own row was pruned: its token cannot be checked
    assert audit.hint_changes_since("other", 0, None, 100) == audit_module.HintCatchUp(0, None, (), (), (), (), None)


def test_a_failed_hint_update_inside_a_write_undoes_only_its_own_rows(metadata_store: MetadataStore) -> None:
    """A helper's review: on PostgreSQL a failed statement aborts the whole transaction, and the hint index's update
    fails inside the write's transaction whose listener catches the error and goes on. Its COMMIT then rolled the
    write back without an error: the node written before the failure was gone. The update now runs in a savepoint:
    the write commits, only the hint rows are left out (and the index is rebuilt at the next lookup)."""
    audit = open_audit(metadata_store)
    uri = "ctx://resources/runbooks/a.md"
    doc = HintDoc(uri, "ctx://resources/runbooks/", "", "resource", "A", None, ("a",))
    with metadata_store.transaction():
        metadata_store.upsert_nodes([node("ctx://resources/runbooks/b.md")])
        with pytest.raises(ContextEngineError) as info:
            audit.replace_hint_docs(A, [], [doc, doc], [])  # the same document twice: a unique key violation
        assert info.value.code is ErrorCode.STORAGE_FAILED
        metadata_store.upsert_nodes([node("ctx://resources/runbooks/c.md")])  # the transaction is still usable
    assert metadata_store.get_node(A, "ctx://resources/runbooks/b.md") is not None
    assert metadata_store.get_node(A, "ctx://resources/runbooks/c.md") is not None
    assert audit.hint_state(A)[0] == 0 and audit.load_hint_index(A)[2] == []  # the failed update left nothing


def test_a_caught_failure_inside_a_transaction_never_commits_silently(metadata_store: MetadataStore) -> None:
    """A statement that fails inside a transaction (outside a savepoint), its error caught by the caller: PostgreSQL
    has aborted the transaction, and its COMMIT would roll everything back without a word. The commit raises
    ``WRT-5001`` instead and nothing is written. SQLite goes on without the failed statement and commits the rest."""
    postgres = getattr(metadata_store, "dialect", "") == "postgresql"
    expected = pytest.raises(ContextEngineError) if postgres else contextlib.nullcontext()
    with expected as info, metadata_store.transaction():
        metadata_store.upsert_nodes([node("ctx://resources/runbooks/b.md")])
        with pytest.raises(ContextEngineError), metadata_store.session(write=True) as s:  # type: ignore[attr-defined]
            s.execute(text("SELECT * FROM no_such_table"))
    written = metadata_store.get_node(A, "ctx://resources/runbooks/b.md") is not None
    assert written is not postgres
    if postgres:
        assert info.value.code is ErrorCode.STORAGE_FAILED and info.value.retryable
        assert "aborted" in info.value.message


def test_the_generations_a_hint_change_reports_are_those_its_rows_belong_to(
    metadata_store: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL reads committed data statement by statement: another writer (a rebuild in another process takes no
    write turn) may commit a change while this one runs. The generation is bumped first, so the change reports the
    generation just before its own, not one read before the other writer committed (a helper's review forced the
    race with the generation read first: a cache labelled current, one change short). SQLite's writers never
    overlap (``BEGIN IMMEDIATE``)."""
    from context_engine.storage.metadata import audit as audit_module

    if getattr(metadata_store, "dialect", "") != "postgresql":
        pytest.skip("SQLite serialises write transactions")
    audit = open_audit(metadata_store)
    uri, other = "ctx://resources/runbooks/a.md", "ctx://resources/runbooks/b.md"

    def doc(u: str) -> HintDoc:
        return HintDoc(u, "ctx://resources/runbooks/", "", "resource", u, None, ())

    audit.replace_hint_docs(A, [], [doc(uri)], [HintTerm(uri, "a", "title")])  # generation 1
    real = audit_module._bump
    fired: list[bool] = []

    def another_writer_first(session, dialect, key):  # type: ignore[no-untyped-def]
        if not fired:
            fired.append(True)
            writer = threading.Thread(target=lambda: audit.replace_hint_docs(A, [], [doc(other)], []))
            writer.start()
            writer.join(30)  # commits generation 2 on its own connection
        real(session, dialect, key)

    monkeypatch.setattr(audit_module, "_bump", another_writer_first)
    change = audit.replace_hint_docs(A, [uri], [], [])
    assert (change.previous_generation, change.generation) == (2, 3)
    assert change.removed_terms == (HintTerm(uri, "a", "title"),)
