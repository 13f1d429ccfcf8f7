"""BM25 partitions kept as files (issue 12, docs/derived_indexes.md "Files"): a second index opens them instead of
tokenising the account, returns identical hits, catches up foreign writes from the change log, and rebuilds when the
file was written with another tokenizer."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from context_engine.schema.nodes import VectorFilter, VectorRecord
from context_engine.settings import KeywordSettings
from context_engine.storage.derived_files import DerivedFiles
from context_engine.storage.keyword import BM25Index
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore

ACC = "acc"
WORDS = ["pod", "node", "disk", "crash", "etcd", "leader", "cert", "quota", "kernel", "proxy", "ingress", "cache"]
WORDS += ["磁盘", "节点", "重启"]


def record(rid: str, text: str, *, level: int = 2, space: str = "shared", folder: str = "ops") -> VectorRecord:
    uri = f"ctx://resources/{folder}/{rid}.md"
    v = np.zeros(4, dtype=np.float32)
    v[len(rid) % 4] = 1.0
    return VectorRecord(
        id=rid,
        vector=v,
        uri=uri,
        parent_uri=f"ctx://resources/{folder}/",
        account_id=ACC,
        owner_space=space,
        context_type="resource",
        level=level,
        doc_id=uri,
        text=text,
        breadcrumb=f"{folder.title()} > {rid}",
        context="",
    )


def corpus(n: int, seed: int, prefix: str = "d") -> list[VectorRecord]:
    rng = random.Random(seed)
    return [
        record(
            f"{prefix}{i:04d}",
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9))),
            level=(0, 2)[i % 2],
            space=("shared", "user:bob")[i % 3 == 0],
            folder=("ops", "db")[i % 5 == 0],
        )
        for i in range(n)
    ]


QUERIES = ["etcd leader", "disk crash node", "cert quota", "磁盘 重启", "proxy cache kernel pod"]
FILTERS = [
    VectorFilter(account_id=ACC),
    VectorFilter(account_id=ACC, levels=[0]),
    VectorFilter(account_id=ACC, levels=[2], owner_spaces=["user:bob"]),
    VectorFilter(account_id=ACC, parent_uris=["ctx://resources/db/"]),
    VectorFilter(account_id=ACC, uri_prefix="ctx://resources/ops/d00"),
]


def hits(index: BM25Index) -> list[list[tuple[str, float, float, str, str]]]:
    out = []
    for q in QUERIES:
        for flt_hits in index.search_many(q, 8, FILTERS):
            out.append([(h.id, h.score, h.coverage, h.text, h.breadcrumb) for h in flt_hits])
    return out


@pytest.fixture
def store(tmp_path: Path):
    s = SqlMetadataStore.sqlite(tmp_path / "metadata.db")
    yield s
    s.close()


def bm25(store: SqlMetadataStore, root: Path | None, **settings: object) -> BM25Index:
    files = DerivedFiles(root, store) if root is not None else None
    return BM25Index(KeywordSettings(**settings), source=store, files=files)


def test_a_second_index_opens_from_the_file_with_identical_hits(store, tmp_path):
    store.put_vectors(corpus(400, seed=1))
    store.delete_vectors([f"d{i:04d}" for i in range(0, 400, 9)])
    first = bm25(store, tmp_path / "derived")
    expected = hits(first)
    first.close()
    assert first.loads == 1

    second = bm25(store, tmp_path / "derived")
    assert hits(second) == expected
    assert (second.loads, second.file_loads, second.docs_indexed) == (0, 1, 0)  # nothing tokenised


def test_a_file_written_with_tail_segments_and_tombstones_reads_back_the_same(store, tmp_path):
    store.put_vectors(corpus(300, seed=2))
    first = bm25(store, tmp_path / "derived")
    first.search("etcd", 5, VectorFilter(account_id=ACC))
    first.close()
    store.put_vectors(corpus(40, seed=3, prefix="t"))  # appended to the tail segment, no merge yet
    store.delete_vectors(["d0001", "d0002", "t0003"])
    expected = hits(first)
    assert first.save_files() == 1  # the file now holds a main segment built from the live rows
    second = bm25(store, tmp_path / "derived")
    assert hits(second) == expected
    assert (second.loads, second.file_loads, second.docs_indexed) == (0, 1, 0)


def test_foreign_writes_after_the_save_are_caught_up(store, tmp_path):
    store.put_vectors(corpus(200, seed=4))
    first = bm25(store, tmp_path / "derived")
    first.search("etcd", 5, VectorFilter(account_id=ACC))
    first.close()
    other = SqlMetadataStore.sqlite(tmp_path / "metadata.db")  # another process writes after the file was saved
    try:
        other.put_vectors([record("new1", "etcd leader election quokka"), record("d0004", "quokka disk")])
        other.delete_vectors(["d0005", "d0006"])
    finally:
        other.close()
    second = bm25(store, tmp_path / "derived")
    got = hits(second)
    assert (second.loads, second.file_loads, second.docs_indexed) == (0, 1, 2)  # only the two written records
    assert got == hits(bm25(store, None))
    assert [h.id for h in second.search("quokka", 5, VectorFilter(account_id=ACC))] == ["d0004", "new1"]


def test_a_file_of_another_tokenizer_is_rebuilt(store, tmp_path):
    store.put_vectors(corpus(100, seed=5))
    first = bm25(store, tmp_path / "derived")
    first.search("etcd", 5, VectorFilter(account_id=ACC))
    first.close()
    unstemmed = bm25(store, tmp_path / "derived", stem=False)
    assert hits(unstemmed) == hits(bm25(store, None, stem=False))
    unstemmed.close()
    assert (unstemmed.loads, unstemmed.file_loads) == (1, 0)


def test_catching_up_many_records_writes_the_file_again(store, tmp_path):
    store.put_vectors(corpus(50, seed=6))
    index = bm25(store, tmp_path / "derived")
    flt = VectorFilter(account_id=ACC)
    index.search("etcd", 5, flt)
    index.close()
    files = index._files
    assert files is not None and files.saves == 1
    store.put_vectors(corpus(1100, seed=7, prefix="m"))  # past max(1024, rows / 10)
    index.search("etcd", 5, flt)
    index.close()
    assert files.saves == 2
    again = bm25(store, tmp_path / "derived")
    again.search("etcd", 5, flt)
    assert (again.loads, again.file_loads, again.docs_indexed) == (0, 1, 0)
