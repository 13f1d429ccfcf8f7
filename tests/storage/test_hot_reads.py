"""HotRead (storage/metadata/hot_reads.py): the rows of the Core read, compiled once per dialect and IN size, and a
failing read becomes the store's retryable WRT-5001 with its connection back in the pool."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Boolean, Column, Integer, MetaData, String, Table, bindparam, create_engine, select, text
from sqlalchemy.exc import SQLAlchemyError

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.storage.metadata.hot_reads import IN_SIZES, HotRead
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
from context_engine.storage.metadata.tables import UTCDateTime

_META = MetaData()
_ITEMS = Table(
    "items",
    _META,
    Column("id", Integer, primary_key=True),
    Column("owner", String(16)),
    Column("key", String(64)),
    Column("flag", Boolean),
    Column("at", UTCDateTime()),
)


def _read() -> HotRead:
    return HotRead(
        lambda size: select(_ITEMS.c.key, _ITEMS.c.flag, _ITEMS.c.at).where(
            _ITEMS.c.owner == bindparam("owner"), _ITEMS.c.key.in_([bindparam(f"k{i}") for i in range(size)])
        )
    )


@pytest.fixture
def engine(tmp_path: Path):
    eng = create_engine(f"sqlite:///{tmp_path / 'items.db'}")
    _META.create_all(eng)
    when = datetime(2026, 12, 5, 9, 30, tzinfo=UTC)
    with eng.begin() as conn:
        conn.execute(
            _ITEMS.insert(),
            [{"owner": "a" if i % 3 else "b", "key": f"k{i:04d}", "flag": i % 2 == 0, "at": when} for i in range(1200)],
        )
    yield eng
    eng.dispose()


@pytest.mark.parametrize("count", [1, 2, 8, 9, 32, 33, 512, 513, 1100])
def test_rows_are_the_core_reads_whatever_the_number_of_keys(engine, count: int) -> None:
    keys = [f"k{i:04d}" for i in range(1, 2 * count + 1, 2)]  # past 1,200 some keys match nothing
    read = _read()
    got = read.rows(engine, {"owner": "a"}, keys)
    with engine.connect() as conn:
        core = [
            tuple(row)
            for row in conn.execute(
                select(_ITEMS.c.key, _ITEMS.c.flag, _ITEMS.c.at).where(_ITEMS.c.owner == "a", _ITEMS.c.key.in_(keys))
            )
        ]
    assert sorted(got) == sorted(core) and core
    # converted as SQLAlchemy converts them: a bool, an aware datetime (not 0/1, not text)
    assert all(type(flag) is bool and at.tzinfo is not None for _, flag, at in got)
    # one statement per IN size used: padded to the next size, chunks of the largest
    assert all(size in IN_SIZES for _, size in read._compiled)


def test_a_statement_without_an_in_list(engine) -> None:
    read = HotRead(lambda _: select(_ITEMS.c.key).where(_ITEMS.c.id == bindparam("id")))
    assert read.rows(engine, {"id": 5}) == [("k0004",)]
    assert read.rows(engine, {"id": 99_999}) == []


def test_a_failing_read_raises_and_returns_its_connection(engine) -> None:
    read = _read()
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE items"))
    before = engine.pool.checkedout()
    with pytest.raises(SQLAlchemyError, match="no such table"):
        read.rows(engine, {"owner": "a"}, ["k0001"])
    assert engine.pool.checkedout() == before


def test_the_store_answers_a_failing_hot_read_with_a_retryable_storage_error(tmp_path: Path) -> None:
    store = SqlMetadataStore.sqlite(tmp_path / "metadata.db")
    try:
        with store.engine.begin() as conn:
            conn.execute(text("DROP TABLE nodes"))
        with pytest.raises(ContextEngineError) as caught:
            store.get_node_heads("acct", ["ctx://resources/a.md"])
        assert caught.value.code is ErrorCode.STORAGE_FAILED and caught.value.retryable
    finally:
        store.close()
