"""The row table under the in-process indexes (storage/filters.py ``RowTable``): its id index (``row_of``), its
children index and its URI prefix index against plain Python references, through appends, kills, rebuilds, hash
collisions and a snapshot / restore round trip."""

from __future__ import annotations

import numpy as np
import pytest

from context_engine.storage import filters, strings
from context_engine.storage.derived_files import PackedValues
from context_engine.storage.filters import RowFields, RowTable

ACC = "acc"
PARENTS = [None, "ctx://resources/a/", "ctx://resources/a/b/", "ctx://resources/中文/", "ctx://user/u/memories/"]


def row(i: int, version: int = 0) -> RowFields:
    parent = PARENTS[(i + version) % len(PARENTS)]
    uri = f"{parent or 'ctx://resources/'}f{i}-{version}.md"
    return RowFields(f"{i:032x}", uri, parent, "shared", "resource", "", 0, uri, 0)


class Reference:
    """The table's rows as plain Python: what the compact indexes must answer."""

    def __init__(self) -> None:
        self.rows: list[RowFields] = []
        self.alive: list[bool] = []
        self.live: dict[str, int] = {}

    def append(self, rows: list[RowFields]) -> None:
        for r in rows:
            self.kill(r.id)
            self.live[r.id] = len(self.rows)
            self.rows.append(r)
            self.alive.append(True)

    def kill(self, rid: str) -> int | None:
        i = self.live.pop(rid, None)
        if i is not None:
            self.alive[i] = False
        return i

    def live_ids(self) -> list[str]:
        return [r.id for r, a in zip(self.rows, self.alive, strict=True) if a]


def check(table: RowTable, ref: Reference) -> None:
    n = table.n
    assert n == len(ref.rows) and list(table.ids) == [r.id for r in ref.rows] == table.ids[0:n]
    assert list(table.uris) == [r.uri for r in ref.rows]
    assert list(table.row_of) == ref.live_ids() and len(table.row_of) == len(ref.live_ids())
    for r in ref.rows:
        assert table.row_of.get(r.id) == ref.live.get(r.id)
        assert (r.id in table.row_of) == (r.id in ref.live)
    assert table.row_of.get("absent") is None and "absent" not in table.row_of
    for parent in [*PARENTS, "ctx://resources/none/"]:
        expected = [i for i, r in enumerate(ref.rows) if r.parent_uri == parent]
        assert table.children.get(parent).tolist() == expected
        for held in (n, n // 2, 0):  # a reader holding an older count
            assert table.children.rows([parent], held).tolist() == [i for i in expected if i < held]
            live = [i for i in expected if i < held and ref.alive[i]]
            assert table.rows_of_parents([parent, "ctx://resources/none/"], held).tolist() == live
    both = [i for i, r in enumerate(ref.rows) if r.parent_uri in (PARENTS[1], None) and ref.alive[i]]
    assert table.rows_of_parents([PARENTS[1], None, PARENTS[1]], n).tolist() == both
    for prefix in ["ctx://resources/a/", "ctx://resources/中", "ctx://user/", "ctx://resources/f1", "zz"]:
        expected_mask = np.array([r.uri.startswith(prefix) for r in ref.rows], dtype=bool)
        assert np.array_equal(table.prefix_mask(prefix, n), expected_mask)


def run_ops(table: RowTable, ref: Reference, seed: int, steps: int, batch: int) -> None:
    rng = np.random.default_rng(seed)
    next_id = len(ref.rows)
    for step in range(steps):
        if rng.random() < 0.3 and ref.rows:  # kill some ids (and some absent ones)
            for i in rng.integers(0, next_id + 5, size=int(rng.integers(1, 20))).tolist():
                rid = f"{i:032x}"
                assert table.kill(rid) == ref.kill(rid)
        new = [row(int(i), step + 1) for i in rng.integers(0, next_id + 1, size=batch // 3)]  # re-added ids
        new += [row(next_id + k) for k in range(batch)]
        new = list({r.id: r for r in new}.values())
        next_id += batch
        ref.append(new)
        table.publish(table.append(new))


@pytest.mark.parametrize("buckets", [None, 64])
def test_row_of_children_and_prefixes_follow_appends_kills_and_rebuilds(monkeypatch, buckets) -> None:
    if buckets is not None:  # force hash collisions: a lookup verifies the id of every candidate
        monkeypatch.setattr(strings, "_hash", lambda value: hash(value) % buckets)
    table, ref = RowTable(ACC, capacity=4), Reference()
    for seed in range(12):  # > 1024 rows appended past a build: the indexes are rebuilt, some checks see a tail
        run_ops(table, ref, seed=seed, steps=1, batch=300)
        check(table, ref)
    run_ops(table, ref, seed=99, steps=3, batch=5)
    check(table, ref)


def test_every_id_colliding_still_finds_the_live_row(monkeypatch) -> None:
    monkeypatch.setattr(strings, "_hash", lambda _value: 0)
    table, ref = RowTable(ACC), Reference()
    run_ops(table, ref, seed=3, steps=6, batch=12)
    check(table, ref)
    table.row_of.settle()
    assert table.kill(ref.live_ids()[0]) == ref.kill(ref.live_ids()[0])
    check(table, ref)


@pytest.mark.parametrize("packed", [False, True])
def test_a_restored_table_answers_like_the_original_and_keeps_taking_writes(monkeypatch, packed) -> None:
    table, ref = RowTable(ACC), Reference()
    run_ops(table, ref, seed=4, steps=8, batch=200)
    meta, arrays = table.snapshot_rows(table.n, table.alive[: table.n].copy())
    assert "ids.byte_offsets" in arrays and "ids.offsets" not in arrays
    if packed:  # every vocabulary packed, as doc_id's is
        monkeypatch.setattr(filters, "PACKED_COLUMNS", filters.ENCODED_COLUMNS)
    restored = RowTable(ACC, capacity=0)
    restored.restore_rows(meta, {k: v.copy() for k, v in arrays.items()})
    assert restored.row_of.nbytes == 0 and restored.children.nbytes == 0  # built when first used
    # a packed vocabulary stays in the file's arrays until a lookup by value or a write needs it; the others are lists
    kinds = {name: type(codes.values) for name, codes in restored.codes.items()}
    assert kinds == {name: PackedValues if packed or name == "doc_id" else list for name in filters.ENCODED_COLUMNS}
    check(restored, ref)
    run_ops(restored, ref, seed=5, steps=6, batch=150)
    check(restored, ref)


def test_a_row_appended_but_not_published_is_not_live_until_published() -> None:
    table = RowTable(ACC)
    table.publish(table.append([row(0)]))
    new = table.append([row(1)])
    assert table.row_of.get(row(1).id) is None and table.children.get(row(1).parent_uri).tolist() == []
    table.row_of._built = False  # a rebuild between append and publish must keep the appended row
    table.publish(new)
    assert table.row_of.get(row(1).id) == 1 and table.kill(row(1).id) == 1
