"""The metadata store's vector rows and the change feed of the derived indexes (DESIGN.md §3, §13;
docs/derived_indexes.md): every vector write or delete bumps the account generation and logs the ids it touched, in
the caller's transaction, under a fresh random token (:class:`~context_engine.storage.changes.AccountState`);
readers catch up with :meth:`VectorRows.changes_since` or reload with :meth:`VectorRows.load_vector_matrix`.
:class:`VectorRows` is one role of :class:`~context_engine.storage.metadata.sqlalchemy_store.SqlMetadataStore`
(the :class:`~context_engine.storage.protocols.VectorRowStore` protocol).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from sqlalchemy import (
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

if TYPE_CHECKING:
    from sqlalchemy.engine import CursorResult

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import VectorRecord
from context_engine.schema.uri import ContextURI
from context_engine.storage.changes import AccountState, IndexDelta, VectorMatrix
from context_engine.storage.metadata import dialects
from context_engine.storage.metadata.engine import SqlDatabase
from context_engine.storage.metadata.hot_reads import HotRead
from context_engine.storage.metadata.tables import (
    CHANGES,
    GENERATIONS,
    IN_BATCH,
    VECTORS,
    chunks,
    slash_forms,
    vector_record,
    vector_values,
)

__all__ = ["LOG_RETAIN", "VectorRows"]

LOG_RETAIN = 20_000
"""Account generations the change log keeps; a reader further behind reloads the account wholesale."""
_PRUNE_EVERY = 1_000  # prune the log of an account every this many generations

# Built once; lookups by vector id go by primary key alone (see changes_since); callers check the account.
_GET_GENERATION = select(GENERATIONS.c.generation, GENERATIONS.c.token).where(
    GENERATIONS.c.account_id == bindparam("account_id")
)
_HOT_GENERATION = HotRead(lambda _: _GET_GENERATION)  # read twice by every search (hot_reads.py)
_GET_VECTOR_TEXTS = select(
    VECTORS.c.id, VECTORS.c.account_id, VECTORS.c.text, VECTORS.c.breadcrumb, VECTORS.c.context
).where(VECTORS.c.id.in_(bindparam("ids", expanding=True)))


class VectorRows(SqlDatabase):
    """Vector rows, account generations and the change log (module docstring)."""

    # ---- vectors --------------------------------------------------------------------------------------------------
    def put_vectors(self, records: Sequence[VectorRecord], *, bulk: bool = False) -> None:
        """Insert or replace vector rows by ``id`` (the last of duplicate ids wins).

        Bumps the generation of each account written and logs the ids (one change-log row per id), in the same
        transaction (the caller's, or its own). ``bulk=True`` (loading a store) logs no ids and moves the log floor
        to the new generation instead: every reader behind it reloads the account wholesale, which is cheaper than
        applying a bulk load row by row.

        Raises:
            ContextEngineError: ``WRT-4002`` for a vector that is not a finite, non-empty 1-D array;
                ``WRT-5001`` (retryable) on a database failure.
        """
        rows = {r.id: vector_values(r) for r in records}
        if not rows:
            return
        with self._use(write=True) as s:
            values = list(rows.values())
            # INSERT ... ON CONFLICT DO UPDATE: on PostgreSQL a concurrent writer of the same id waits for this one
            # and then replaces the row (a delete and an insert would fail on the primary key instead)
            for start in range(0, len(values), IN_BATCH):
                s.execute(self._upsert(VECTORS, ["id"]), values[start : start + IN_BATCH])
            by_account: dict[str, list[str]] = {}
            for rid, value in rows.items():
                by_account.setdefault(value["account_id"], []).append(rid)
            for account_id, ids in sorted(by_account.items()):
                self._log_changes(s, account_id, [] if bulk else ids, reload=bulk)

    def delete_vectors(self, ids: Sequence[str]) -> None:
        """Delete vector rows by ``id``; unknown ids are ignored. Logs the deleted ids (see :meth:`put_vectors`)."""
        unique = sorted(set(ids))
        if not unique:
            return
        with self._use(write=True) as s:
            by_account: dict[str, list[str]] = {}
            for chunk in chunks(unique):
                for rid, account_id in s.execute(
                    select(VECTORS.c.id, VECTORS.c.account_id).where(VECTORS.c.id.in_(chunk))
                ):
                    by_account.setdefault(account_id, []).append(rid)
                s.execute(delete(VECTORS).where(VECTORS.c.id.in_(chunk)))
            for account_id, found in sorted(by_account.items()):
                self._log_changes(s, account_id, found)

    def _log_changes(self, s: Session, account_id: str, ids: Sequence[str], *, reload: bool = False) -> int:
        """Bump the account generation under a fresh random token and log ``ids`` at the new value with that token;
        prune the log now and then. ``reload``: move the log floor to the new generation (readers behind it reload).

        The floor keeps its token (``log_floor_token``) since its log rows are gone: a reader exactly at the floor
        (a process that loaded the account after a bulk load) still catches up rather than reloading."""
        token = secrets.token_hex(16)
        bump = (
            update(GENERATIONS)
            .where(GENERATIONS.c.account_id == account_id)
            .values(generation=GENERATIONS.c.generation + 1, token=token)
        )
        bumped = cast("CursorResult[Any]", s.execute(bump)).rowcount  # a DML statement's result is a CursorResult
        if not bumped:
            s.execute(self._insert_ignore(GENERATIONS).values(account_id=account_id, generation=0, log_floor=0))
            s.execute(bump)
        generation, floor = s.execute(
            select(GENERATIONS.c.generation, GENERATIONS.c.log_floor).where(GENERATIONS.c.account_id == account_id)
        ).one()
        rows = [{"account_id": account_id, "generation": generation, "vector_id": rid, "token": token} for rid in ids]
        for start in range(0, len(rows), IN_BATCH):
            s.execute(insert(CHANGES), rows[start : start + IN_BATCH])
        mine = GENERATIONS.c.account_id == account_id
        if reload:
            s.execute(delete(CHANGES).where(CHANGES.c.account_id == account_id))
            s.execute(update(GENERATIONS).where(mine).values(log_floor=generation, log_floor_token=token))
        elif generation % _PRUNE_EVERY == 0 and generation - LOG_RETAIN > floor:
            new_floor = generation - LOG_RETAIN
            floor_token = _token_at(s, account_id, new_floor)  # before its rows go
            s.execute(delete(CHANGES).where(CHANGES.c.account_id == account_id, CHANGES.c.generation <= new_floor))
            s.execute(update(GENERATIONS).where(mine).values(log_floor=new_floor, log_floor_token=floor_token))
        return int(generation)

    def vector_ids_for(self, account_id: str, uris: Sequence[str]) -> list[str]:
        """Ids (sorted) of the account's vector rows whose ``uri`` is one of ``uris`` (either slash form)."""
        forms = sorted({form for u in uris for form in slash_forms(ContextURI.parse(u).key)})
        out: list[str] = []
        with self._use(write=False) as s:
            for chunk in chunks(forms):
                stmt = select(VECTORS.c.id).where(VECTORS.c.account_id == account_id, VECTORS.c.uri.in_(chunk))
                out.extend(s.scalars(stmt))
        return sorted(out)

    def get_vectors(self, account_id: str, uris: Sequence[str]) -> list[VectorRecord]:
        """The account's vector rows whose ``uri`` is one of ``uris`` (either slash form).

        Ordered by ``(uri, level, chunk_index, id)``; ``vector`` is float32 of shape ``(dim,)``.
        """
        forms = sorted({form for u in uris for form in slash_forms(ContextURI.parse(u).key)})
        out: list[VectorRecord] = []
        with self._use(write=False) as s:
            for chunk in chunks(forms):
                stmt = select(VECTORS).where(VECTORS.c.account_id == account_id, VECTORS.c.uri.in_(chunk))
                out.extend(vector_record(r._mapping) for r in s.execute(stmt))
        return sorted(out, key=lambda r: (r.uri, r.level, r.chunk_index, r.id))

    def iter_vectors(self, account_id: str | None = None, batch_size: int = 2048) -> Iterator[list[VectorRecord]]:
        """Every vector row (of one account, or all) in batches of at most ``batch_size``, keyset-paged by ``id``.

        Each batch is read in its own short session (or in this thread's open transaction), so rows written while
        iterating may or may not appear. ``VectorRecord.vector`` is a float32 array of shape ``(dim,)``.

        Raises:
            ValueError: when ``batch_size < 1``.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        last: str | None = None
        while True:
            stmt = select(VECTORS).order_by(VECTORS.c.id).limit(batch_size)
            if account_id is not None:
                stmt = stmt.where(VECTORS.c.account_id == account_id)
            if last is not None:
                stmt = stmt.where(VECTORS.c.id > last)
            with self._use(write=False) as s:
                rows = s.execute(stmt).all()
            if not rows:
                return
            yield [vector_record(r._mapping) for r in rows]
            if len(rows) < batch_size:
                return
            last = rows[-1].id

    def count_vectors(self, account_id: str | None = None) -> int:
        """Number of vector rows (of one account, or all); an extension used by ``ExactVectorIndex.count``."""
        stmt = select(func.count()).select_from(VECTORS)
        if account_id is not None:
            stmt = stmt.where(VECTORS.c.account_id == account_id)
        with self._use(write=False) as s:
            return int(s.execute(stmt).scalar_one())

    def account_state(self, account_id: str) -> AccountState:
        """The committed account generation and its token (:class:`AccountState`; ``(0, None)`` before the account's
        first vector write), read together: one primary-key read.

        The generation increases with every committed :meth:`put_vectors` and effective :meth:`delete_vectors` of the
        account, also those of other processes, and never reflects uncommitted writes; every bump draws a new random
        token, so a state is never named twice, also when a restored database reaches a number again
        (docs/derived_indexes.md).

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) on a database failure.
        """
        # committed data only, also inside a transaction: the hot read's pooled connection, never the session
        self._check_open()
        try:
            rows = _HOT_GENERATION.rows(self._engine, {"account_id": account_id})
        except SQLAlchemyError as err:
            raise self._storage_error(err, "read") from err
        return AccountState(int(rows[0][0] or 0), rows[0][1]) if rows else AccountState(0, None)

    def account_generation(self, account_id: str) -> int:
        """The committed account generation (0 before the account's first vector write): :meth:`account_state`'s
        number alone (the same one primary-key read). A value is never reused after a rollback, but a restored
        database may reach it again by another history: readers of derived state compare :meth:`account_state`.
        """
        return self.account_state(account_id).generation

    def changes_since(
        self,
        account_id: str,
        generation: int,
        *,
        token: str | None = None,
        levels: Sequence[int] | None = None,
        max_changes: int = 50_000,
    ) -> IndexDelta:
        """What changed in the account after the state ``(generation, token)``: the current rows of the changed ids
        (at ``levels``, every level when ``None``) and the ids deleted, read in one snapshot with the generation and
        token they bring to.

        Cost: one indexed range read of the change log and one primary-key read per changed id, so O(changes); one
        more indexed read (one row) checks the token of ``generation``. ``reload`` is set (and nothing else) when
        the log was pruned past ``generation``, when ``generation`` is ahead of the database (it was replaced), when
        the store's ``generation`` has another token than ``token`` (its history was rewound: a restored backup, a
        failover to a replica that missed the last commits), or when more than ``max_changes`` ids changed.
        ``token=None`` names a state written before tokens (schema revision ``0005``): it matches a generation whose
        token is NULL, or that has no logged row.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) on a database failure.
        """
        with self._committed_read() as s:
            g = GENERATIONS.c
            found = s.execute(
                select(g.generation, g.token, g.log_floor, g.log_floor_token).where(g.account_id == account_id)
            ).first()
            current, current_token, floor, floor_token = (
                (int(found[0]), found[1], int(found[2]), found[3]) if found is not None else (0, None, 0, None)
            )
            if generation == current:
                return IndexDelta(current, token=current_token, reload=token != current_token)
            if generation > current or generation < floor:
                return IndexDelta(current, reload=True, token=current_token)
            held = floor_token if generation == floor else _token_at(s, account_id, generation)
            if held != token:  # another history reached this number: what the reader holds is not in this one
                return IndexDelta(current, reload=True, token=current_token)
            cap = max_changes * 4  # log rows read at most (an id may be logged by several generations)
            logged = list(
                s.scalars(
                    select(CHANGES.c.vector_id)
                    .where(
                        CHANGES.c.account_id == account_id,
                        CHANGES.c.generation > generation,
                        CHANGES.c.generation <= current,
                    )
                    .limit(cap + 1)
                )
            )
            changed = sorted(set(logged))
            if len(logged) > cap or len(changed) > max_changes:
                return IndexDelta(current, reload=True, token=current_token)
            upserted: list[VectorRecord] = []
            present: set[str] = set()
            for chunk in chunks(changed):
                # by primary key alone: with the account in the WHERE clause SQLite picks the account index and
                # scans the account's rows (measured: 0.8 ms per row at 20k rows); the account is checked below
                for row in s.execute(select(VECTORS).where(VECTORS.c.id.in_(chunk))):
                    if row.account_id != account_id:
                        continue
                    present.add(row.id)
                    if levels is None or row.level in levels:
                        upserted.append(vector_record(row._mapping))
        upserted.sort(key=lambda r: r.id)
        return IndexDelta(current, upserted, [i for i in changed if i not in present], token=current_token)

    def get_vector_rows(self, account_id: str, ids: Sequence[str]) -> dict[str, VectorRecord]:
        """The account's vector rows with these ids (missing ids are absent); one primary-key read per 500 ids."""
        out: dict[str, VectorRecord] = {}
        with self._read() as s:
            for chunk in chunks(sorted(set(ids))):  # by primary key alone (see changes_since)
                stmt = select(VECTORS).where(VECTORS.c.id.in_(chunk))
                out.update((r.id, vector_record(r._mapping)) for r in s.execute(stmt) if r.account_id == account_id)
        return out

    def get_vector_texts(self, account_id: str, ids: Sequence[str]) -> dict[str, tuple[str, str, str]]:
        """``(text, breadcrumb, context)`` of the account's rows with these ids (missing ids are absent): what a
        keyword hit shows, without reading vectors (one primary-key read per 500 ids)."""
        out: dict[str, tuple[str, str, str]] = {}
        with self._read() as s:
            for chunk in chunks(sorted(set(ids))):  # by primary key alone (see changes_since)
                for rid, acc, text, breadcrumb, context in s.execute(_GET_VECTOR_TEXTS, {"ids": list(chunk)}):
                    if acc == account_id:
                        out[rid] = (text, breadcrumb, context or "")
        return out

    def load_vector_matrix(
        self, account_id: str, *, levels: Sequence[int] | None = None, with_vectors: bool = True
    ) -> VectorMatrix:
        """The committed vector rows of one account (at ``levels``, every level when ``None``) as column arrays,
        sorted by ``id`` (code points), with the account generation they are exactly at and its token (one
        snapshot).

        ``with_vectors=False`` skips the vector column (``vectors`` has shape ``(n, 0)``): what BM25 reads.

        Raises:
            ContextEngineError: ``IDX-4091`` when the account's rows have different dimensions;
                ``WRT-5001`` (retryable) on a database failure.
        """
        columns = [c for c in VECTORS.c if c.name != "account_id" and (with_vectors or c.name != "vector")]
        with self._committed_read() as s:
            found = s.execute(
                select(GENERATIONS.c.generation, GENERATIONS.c.token).where(GENERATIONS.c.account_id == account_id)
            ).first()
            stmt = select(*columns).where(VECTORS.c.account_id == account_id)
            if levels is not None:
                stmt = stmt.where(VECTORS.c.level.in_(sorted(set(levels))))
            rows = s.execute(stmt.order_by(dialects.code_point_order(self.dialect, VECTORS.c.id))).all()
        generation, token = (int(found[0] or 0), found[1]) if found is not None else (0, None)
        if not rows:
            return VectorMatrix.empty(generation, token)
        cols = dict(zip([c.name for c in columns], zip(*rows, strict=True), strict=True))
        ids = list(cols.pop("id"))
        if not with_vectors:
            matrix = np.zeros((len(ids), 0), dtype=np.float32)
            return VectorMatrix.from_columns(
                generation, ids=ids, matrix=matrix, token=token, **{k: list(v) for k, v in cols.items()}
            )
        blobs: tuple[bytes, ...] = cols.pop("vector")
        sizes = {len(b) for b in blobs}
        if len(sizes) != 1 or 0 in sizes or next(iter(sizes)) % 4:
            raise ContextEngineError(
                ErrorCode.INDEX_MODEL_MISMATCH,
                "stored vectors of this account have different dimensions; run `context-engine reindex`",
                {"byte_sizes": sorted(sizes)[:8]},
            )
        matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(rows), -1)
        columns_of = {k: list(v) for k, v in cols.items()}
        return VectorMatrix.from_columns(generation, ids=ids, matrix=matrix, token=token, **columns_of)


def _token_at(s: Session, account_id: str, generation: int) -> str | None:
    """The change log's token of ``generation`` (every row of a generation holds the same one; one indexed read of
    one row), or ``None`` when no row of it is logged or it was logged before tokens."""
    where = (CHANGES.c.account_id == account_id, CHANGES.c.generation == generation)
    return s.execute(select(CHANGES.c.token).where(*where).limit(1)).scalar()
