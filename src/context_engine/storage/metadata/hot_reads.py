"""Prepared hot reads: the few statements a search runs on every request, executed on a pooled DBAPI connection
(issue 26).

A search reads the account generation twice and the heads of its candidate nodes once or twice a request. Through
SQLAlchemy's Core each of these costs 60-270 us on SQLite, most of it the execution context (parameter processing,
events, result wrapping) around a statement that SQLite itself answers in a few microseconds: 13% of a search's time
at 100k nodes (``bench/search_memory.py``, py-spy). A :class:`HotRead` compiles its statement once per dialect
(SQLAlchemy still writes the SQL and converts the values, through the columns' own result processors, so a row is
exactly what Core would return) and runs it on a connection checked out of the engine's pool, which keeps the
pool's connect-time settings (busy timeout, statement timeout) and its reset on return.

An ``IN`` list is compiled for a few sizes (:data:`IN_SIZES`) and padded with its last key (a repeated key matches
the same rows), so a statement is compiled at most once per size and dialect.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Select

__all__ = ["IN_SIZES", "HotRead"]

#: The ``IN`` list sizes a hot read is compiled for; longer lists are read in chunks of the largest.
IN_SIZES = (1, 8, 32, 128, 512)


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    positional: tuple[str, ...] | None  # parameter names in order (qmark/format dialects); None for named styles
    active: tuple[tuple[int, Callable[[Any], Any]], ...]  # (column, result processor) of the columns that have one


def _converted(row: Sequence[Any], active: tuple[tuple[int, Callable[[Any], Any]], ...]) -> tuple[Any, ...]:
    """``row`` with each column of ``active`` converted by its processor (``None`` stays ``None``): only those
    columns are visited (a node head has 5 of 11), about half the cost of a pass over every column."""
    values = list(row)
    for i, process in active:
        value = values[i]
        if value is not None:
            values[i] = process(value)
    return tuple(values)


class HotRead:
    """One read statement, compiled per dialect and ``IN`` size, run on a pooled DBAPI connection.

    Args:
        build: the statement for an ``IN`` list of ``size`` keys, whose parameters are named ``k0`` .. ``k{size-1}``
            besides the fixed ones (``build(0)`` for a statement without a list).

    Thread-safe.
    """

    def __init__(self, build: Callable[[int], Select[Any]]) -> None:
        self._build = build
        self._compiled: dict[tuple[str, int], _Compiled] = {}
        self._lock = threading.Lock()

    def _prepare(self, dialect: Dialect, size: int) -> _Compiled:
        key = (dialect.name, size)
        found = self._compiled.get(key)
        if found is None:
            with self._lock:
                found = self._compiled.get(key)
                if found is None:
                    stmt = self._build(size)
                    compiled = stmt.compile(dialect=dialect)
                    order = compiled.positiontup
                    processors = tuple(
                        column.type.dialect_impl(dialect).result_processor(dialect, None)
                        for column in stmt.selected_columns
                    )
                    active = tuple((i, p) for i, p in enumerate(processors) if p is not None)
                    found = self._compiled[key] = _Compiled(
                        compiled.string, tuple(order) if dialect.positional and order is not None else None, active
                    )
        return found

    def rows(self, engine: Engine, params: dict[str, Any], keys: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        """The rows of the statement for ``params`` (and, for a statement with an ``IN`` list, ``keys``: read in
        chunks of at most ``IN_SIZES[-1]``), each value converted as SQLAlchemy converts it.

        Raises:
            sqlalchemy.exc.SQLAlchemyError: when the pool or the database fails (the caller translates it).
        """
        dialect = engine.dialect
        if keys is None:
            batches: list[tuple[int, dict[str, Any]]] = [(0, params)]
        else:
            batches = []
            top = IN_SIZES[-1]
            for start in range(0, len(keys), top):
                chunk = list(keys[start : start + top])
                size = next(s for s in IN_SIZES if s >= len(chunk))
                chunk += [chunk[-1]] * (size - len(chunk))
                batches.append((size, {**params, **{f"k{i}": k for i, k in enumerate(chunk)}}))
        out: list[tuple[Any, ...]] = []
        connection = engine.raw_connection()
        try:
            cursor = connection.cursor()
            try:
                for size, values in batches:
                    prepared = self._prepare(dialect, size)
                    args: Any = values if prepared.positional is None else [values[n] for n in prepared.positional]
                    try:
                        cursor.execute(prepared.sql, args)
                        fetched = cursor.fetchall()
                    except dialect.loaded_dbapi.Error as err:
                        if dialect.is_disconnect(err, connection.dbapi_connection, cursor):
                            connection.invalidate(err)
                        raise DBAPIError.instance(
                            prepared.sql, args, err, dialect.loaded_dbapi.Error, dialect=dialect
                        ) from err
                    active = prepared.active
                    if active:
                        out.extend(_converted(row, active) for row in fetched)
                    else:
                        out.extend(tuple(row) for row in fetched)
            finally:
                cursor.close()
        finally:
            connection.close()  # back to the pool, which resets it (rollback)
        return out
