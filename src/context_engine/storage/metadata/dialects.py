"""What differs between the metadata database's dialects, in one place (DESIGN §3, §13; docs/deployment.md).

SQLite (embedded, one machine) and PostgreSQL (shared by replicas) run the same SQLAlchemy code path; the few things
that differ are here, each with both branches side by side:

* engine options: SQLite's busy timeout and thread sharing; PostgreSQL's pool (``metadata.pool_size``,
  ``metadata.max_overflow``, pre-ping) and connect timeout (``metadata.connect_timeout_s``);
* transactions: SQLite's explicit ``BEGIN`` / ``BEGIN IMMEDIATE`` (:func:`install_sqlite_listeners`); a committed
  snapshot is ``BEGIN`` on SQLite and ``REPEATABLE READ`` on PostgreSQL (:func:`snapshot_options`);
* ``INSERT ... ON CONFLICT`` (:func:`upsert`, :func:`insert_ignore`): the same SQL, built by each dialect's module;
* text order: code points on both (:func:`code_point_order`), whatever the PostgreSQL database's collation;
* a JSON object's key holding a value (:func:`json_key_matches`): SQLite's ``json_each``, PostgreSQL's ``->``;
* locks between processes: SQLite holds one database-wide write lock per write transaction, so
  :func:`xact_lock` is a no-op there; PostgreSQL takes transaction-scoped advisory locks keyed by :func:`lock_key`.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, Numeric, case, event, false, func, literal, or_, select, text
from sqlalchemy.engine import URL, Connection
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

SQLITE = "sqlite"
POSTGRESQL = "postgresql"
SUPPORTED = (SQLITE, POSTGRESQL)
"""Backend names (``URL.get_backend_name()``) the metadata store runs on."""

WRITE_OPTION = "context_engine_write"
"""Execution option of a connection whose transaction will write (SQLite: ``BEGIN IMMEDIATE``)."""

SQLITE_BUSY_TIMEOUT_S = 30.0  # SQLite writers wait this long for the database's write lock


def engine_options(
    url: URL,
    *,
    pool_size: int,
    max_overflow: int,
    connect_timeout_s: float,
    statement_timeout_s: float = 0.0,
    busy_timeout_s: float = SQLITE_BUSY_TIMEOUT_S,
) -> dict[str, Any]:
    """Keyword arguments of ``create_engine`` for ``url``'s dialect.

    Args:
        url: the database URL.
        pool_size: connections kept open (PostgreSQL; SQLite's file connections are cheap and use the default pool).
        max_overflow: extra connections opened under load (PostgreSQL).
        connect_timeout_s: the timeout of one connection attempt (PostgreSQL, whole seconds, at least 2 as libpq
            counts them; SQLite opens a local file).
        statement_timeout_s: PostgreSQL's ``statement_timeout`` and ``idle_in_transaction_session_timeout`` of
            every session (0: none).
        busy_timeout_s: how long a SQLite writer waits for the database's write lock (``ingest.write_wait_s``);
            past it the store answers the retryable ``WRT-5032``.
    """
    if url.get_backend_name() == SQLITE:
        # one connection may serve several threads over its life (pool); writers wait on the busy timeout
        return {"connect_args": {"check_same_thread": False, "timeout": busy_timeout_s}}
    if url.get_backend_name() == POSTGRESQL:
        return {
            "pool_size": pool_size,
            "max_overflow": max_overflow,
            "pool_pre_ping": True,  # a connection the server dropped (restart, failover) is replaced, not served
            "connect_args": {
                "connect_timeout": max(2, math.ceil(connect_timeout_s)),
                "application_name": "context-engine",
                **(
                    {"options": f"-c statement_timeout={ms} -c idle_in_transaction_session_timeout={ms}"}
                    if (ms := round(statement_timeout_s * 1000)) > 0
                    else {}
                ),
                # a peer that vanished (host down, network cut) is noticed within about a minute, and with it the
                # session's advisory locks (writer liveness, storage/metadata/writer_locks.py) are released
                "keepalives": 1,
                "keepalives_idle": 30,
                "keepalives_interval": 10,
                "keepalives_count": 3,
            },
        }
    return {}


def install_sqlite_listeners(engine: Engine) -> None:
    """SQLite only: WAL, foreign keys, ``synchronous=NORMAL``; explicit ``BEGIN`` (``IMMEDIATE`` for writes).

    pysqlite's own transaction handling is turned off (``isolation_level = None``) so that SQLAlchemy's ``begin``
    is a real ``BEGIN``: reads get one snapshot, and writers take the lock up front and wait on the busy timeout
    instead of failing when a read lock cannot be upgraded (the SQLAlchemy-documented pysqlite recipe).
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        try:
            # WAL is a property of the file: set once. Switching needs the file to itself and SQLite answers "database
            # is locked" at once (no busy wait) while another process creates the schema: wait for it instead.
            if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                for attempt in Retrying(
                    retry=retry_if_exception(lambda e: "locked" in str(e)),
                    wait=wait_exponential(multiplier=0.05, max=1.0),
                    stop=stop_after_delay(SQLITE_BUSY_TIMEOUT_S),
                    reraise=True,
                ):
                    with attempt:
                        cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def snapshot_options(dialect: str) -> dict[str, Any]:
    """Execution options of a read that sees committed data in one snapshot. SQLite: none (the listener's explicit
    ``BEGIN`` is a snapshot in WAL mode); PostgreSQL: ``REPEATABLE READ`` (its default, ``READ COMMITTED``, takes a
    new snapshot per statement)."""
    return {} if dialect == SQLITE else {"isolation_level": "REPEATABLE READ"}


def code_point_order(dialect: str, column: Any) -> Any:
    """``column`` for an ``ORDER BY`` in code-point order (Python's ``str`` order): SQLite's default ``BINARY``
    collation compares UTF-8 bytes, which is that order; PostgreSQL sorts by the database's collation (e.g.
    ``en_US``: case and punctuation folded) unless told ``COLLATE "C"``."""
    return column.collate("C") if dialect == POSTGRESQL else column


_PLAIN_JSON_KEY = re.compile(r"[ !#-\[\]-~]+")
"""A key SQLite's JSON path ``$."key"`` says literally on every version: printable ASCII but ``"`` and ``\\``."""


def json_key_matches(dialect: str, column: Any, key: str, values: Sequence[str | bool | int | float]) -> Any:
    """Whether the JSON object in ``column`` holds, at its top-level ``key``, one of ``values``: a value of the same
    JSON type and equal (a string a string, a boolean a boolean, a number an equal number: ``1`` matches ``1.0``;
    ``"1"`` does not match ``1`` nor ``true``). A missing key, ``null``, a list or an object matches nothing.

    ``key`` is compared literally, whatever its characters (non-ASCII, ``"``, ``\\``, ``.``, ``$``). SQLite: a
    plain ASCII key is looked up by the path ``$."key"``, as before; another cannot be: SQLAlchemy's JSON serializer
    stores non-ASCII escaped (``"\\u6807"``), which SQLite 3.40's path lookup compares undecoded, and no path
    says a key with ``"``; so the object's members are walked (``json_each``, whose ``key`` is the decoded text)
    and each compared with the bound key (about 1.6 times the path's cost per row). PostgreSQL looks any key up with
    ``->`` (a bound parameter) and compares the JSON type first, so no cast fails on a value of another type
    (``CAST('abc' AS INTEGER)`` was a 500). No index covers metadata on either backend: each candidate row's
    object is read.
    """
    texts = [str(v) for v in values if not isinstance(v, bool | int | float)]
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    booleans = sorted({"true" if v else "false" for v in values if isinstance(v, bool)})
    if dialect == SQLITE:
        member: Any = None
        kind: Any
        value: Any
        if _PLAIN_JSON_KEY.fullmatch(key):
            path = f'$."{key}"'
            kind, value = func.json_type(column, path), func.json_extract(column, path)
        else:
            member = func.json_each(column).table_valued("key", "value", "type").alias("member")
            kind, value = member.c.type, member.c.value
        wanted = or_(
            false(),
            *([(kind == "text") & value.in_(texts)] if texts else []),
            *([kind.in_(("integer", "real")) & value.in_(numbers)] if numbers else []),
            *([kind.in_(booleans)] if booleans else []),
        )
        if member is None:
            return wanted
        return select(literal(1)).select_from(member).where(member.c.key == key, wanted).exists()
    element = column[key]  # PostgreSQL: json -> key (a bound parameter); ->> for its text
    kind, as_text = func.json_typeof(element), element.as_string()
    # the cast only of a number (CASE: no cast fails on text); exact decimals on both sides (0.30000000000000004)
    number = case((kind == "number", func.cast(as_text, Numeric())), else_=None)
    decimals = [Decimal(repr(v)) if isinstance(v, float) else Decimal(v) for v in numbers]
    return or_(
        false(),
        *([(kind == "string") & as_text.in_(texts)] if texts else []),
        *([number.in_([literal(d, Numeric()) for d in decimals])] if numbers else []),
        *([(kind == "boolean") & as_text.in_(booleans)] if booleans else []),
    )


def upsert(dialect: str, table: Any, keys: Sequence[str], keep: Sequence[str] = ()) -> Any:
    """``INSERT ... ON CONFLICT (keys) DO UPDATE`` of every column but ``keys`` and ``keep``."""
    stmt = _insert(dialect, table)
    fixed = set(keys) | set(keep)
    return stmt.on_conflict_do_update(
        index_elements=list(keys), set_={c.name: stmt.excluded[c.name] for c in table.c if c.name not in fixed}
    )


def insert_ignore(dialect: str, table: Any) -> Any:
    """``INSERT ... ON CONFLICT DO NOTHING``: a row another transaction may create concurrently (on PostgreSQL the
    second inserter waits for the first to commit, then does nothing)."""
    return _insert(dialect, table).on_conflict_do_nothing()


def _insert(dialect: str, table: Any) -> Any:
    if dialect == POSTGRESQL:
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert

        return postgresql_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


def lock_key(name: str) -> int:
    """A PostgreSQL advisory-lock key (signed 64 bits) for ``name``, e.g. ``writer:<token>``; distinct names collide
    with probability 2**-64. Advisory locks are per database, so two databases of one server never contend."""
    return int.from_bytes(hashlib.sha256(f"context-engine:{name}".encode()).digest()[:8], "big", signed=True)


def xact_lock(conn: Connection, name: str) -> None:
    """Inside a transaction: wait for, then hold until its end, the lock called ``name``. PostgreSQL: a transaction
    advisory lock; SQLite: nothing to do (a write transaction already holds the database's write lock)."""
    if conn.dialect.name == POSTGRESQL:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock_key(name)})
