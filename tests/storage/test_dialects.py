"""The dialect differences of the metadata store, side by side (storage/metadata/dialects.py)."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import JSON, column, select, table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url

from context_engine.schema.nodes import VectorRecord
from context_engine.storage.metadata import dialects
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore

_T = table("t", column("id"), column("v"))
_J = table("j", column("id"), column("v", JSON))


def test_code_point_order_is_collate_c_on_postgresql_only() -> None:
    pg = select(_T.c.id).order_by(dialects.code_point_order("postgresql", _T.c.id))
    lite = select(_T.c.id).order_by(dialects.code_point_order("sqlite", _T.c.id))
    assert str(pg.compile(dialect=postgresql.dialect())).endswith('ORDER BY t.id COLLATE "C"')
    assert str(lite.compile(dialect=sqlite.dialect())).endswith("ORDER BY t.id")


def test_json_key_matches_walks_the_object_on_sqlite_only_for_a_key_no_path_says() -> None:
    """SQLite: a printable-ASCII key without ``"`` or ``\\`` keeps the path lookup (one bound ``$."key"``); any other
    key is compared with ``json_each``'s decoded key. PostgreSQL binds every key and casts only a JSON number."""

    def sql(dialect_name: str, key: str, values: list) -> tuple[str, dict]:
        dialect = postgresql.dialect() if dialect_name == "postgresql" else sqlite.dialect()
        stmt = select(_J.c.id).where(dialects.json_key_matches(dialect_name, _J.c.v, key, values))
        compiled = stmt.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
        return str(compiled), compiled.params

    for key in ("speaker", "a.b", "$", "it's", "a[0]"):
        text, params = sql("sqlite", key, ["x"])
        assert "json_each" not in text and f'$."{key}"' in params.values(), key
    for key in ("标签", 'say "hi"', "a\\b", "é"):
        text, params = sql("sqlite", key, ["x"])
        assert "json_each(j.v)" in text and key in params.values() and not any("$" in str(p) for p in params.values())
    text, params = sql("postgresql", 'say "hi"', ["x", 1, True])
    assert text.count("CAST(CAST") == 1 and "CASE WHEN" in text and 'say "hi"' in params.values()


def test_upsert_and_insert_ignore_are_the_same_sql_on_both() -> None:
    for name, dialect in (("postgresql", postgresql.dialect()), ("sqlite", sqlite.dialect())):
        up = str(dialects.upsert(name, _T, ["id"]).compile(dialect=dialect))
        assert "ON CONFLICT (id) DO UPDATE SET v = excluded.v" in up, name
        assert str(dialects.insert_ignore(name, _T).compile(dialect=dialect)).endswith("ON CONFLICT DO NOTHING")


def test_engine_options_per_dialect() -> None:
    pg = dialects.engine_options(
        make_url("postgresql+psycopg://u@h/d"), pool_size=7, max_overflow=3, connect_timeout_s=0.5
    )
    assert (pg["pool_size"], pg["max_overflow"], pg["pool_pre_ping"]) == (7, 3, True)
    assert pg["connect_args"]["connect_timeout"] == 2  # libpq's minimum, in whole seconds
    lite = dialects.engine_options(make_url("sqlite:///x.db"), pool_size=7, max_overflow=3, connect_timeout_s=9)
    assert lite == {"connect_args": {"check_same_thread": False, "timeout": dialects.SQLITE_BUSY_TIMEOUT_S}}
    assert dialects.snapshot_options("postgresql") == {"isolation_level": "REPEATABLE READ"}
    assert dialects.snapshot_options("sqlite") == {}


def test_lock_keys_are_stable_signed_64_bit_and_distinct() -> None:
    keys = {dialects.lock_key(f"writer:{i}") for i in range(1000)}
    assert len(keys) == 1000 and all(-(2**63) <= k < 2**63 for k in keys)
    assert dialects.lock_key("migrate") == dialects.lock_key("migrate")


def test_an_unsupported_dialect_is_a_config_error() -> None:
    from context_engine.errors import ContextEngineError, ErrorCode

    with pytest.raises(ContextEngineError) as info:
        SqlMetadataStore("mysql+pymysql://u:Secret-Passw0rd@127.0.0.1/x")
    assert info.value.code is ErrorCode.CONFIG_INVALID and "metadata.url" in info.value.message
    assert "Secret-Passw0rd" not in str(info.value) and "u:***@127.0.0.1" in info.value.message


def test_vector_rows_come_back_in_code_point_order(metadata_store: SqlMetadataStore) -> None:
    ids = ["b", "B", "a", "_z", "Z", "é", "a-b", "a_b", "aB"]
    metadata_store.put_vectors(
        [
            VectorRecord(
                id=i,
                vector=np.ones(2, dtype=np.float32),
                uri=f"ctx://resources/{n}.md",
                parent_uri="ctx://resources/",
                account_id="acc",
                owner_space="shared",
                context_type="resource",
                level=0,
            )
            for n, i in enumerate(ids)
        ]
    )
    assert metadata_store.load_vector_matrix("acc").ids == sorted(ids)
