"""lookup_knowledge's tables in the metadata database (DESIGN.md §3, §7, §9, §13).

Three kinds of rows, all scoped by ``account_id``, all portable SQL (SQLite embedded, PostgreSQL by URL):

* ``tool_invocations``: one audit row per tool call (seed 001 §7), with ``retrieval_details`` as JSON and the
  ``principal`` (``role:user_space:agent_space``) that made it: reads filter on it unless the caller is an admin.
* ``retrieved_docs``: the per-session ledger of
  :class:`~context_engine.knowledge.retrieved_doc_tracker.RetrievedDocTracker` (``session_id + doc_key`` with an expiry
  time), kept in the database so replicas share it (DESIGN §13).
* ``knowledge_hint_docs`` / ``knowledge_hint_terms``: the hint layer's keyword index, derived at ingest; a per-account
  generation counter in ``meta`` (``hint_generation:<account>``) is bumped in the same transaction as every change so
  every process knows when its in-memory copy is stale.

The tables hang off the same declarative base as :mod:`.sqlalchemy_store` and live in its database: this store
works through the metadata store's sessions (same connection pool, same transactions, same SQLite locking), so an
invocation row and its ledger marks commit together. They are created and upgraded with the rest of the schema
(:mod:`.migrate`; schema version 4, issue 14, added ``principal`` to both tables).

Concurrent calls (threads, or replicas on PostgreSQL) marking the same document in one session: exactly one of them
marks it first; the others find it marked (``INSERT ... ON CONFLICT DO NOTHING``, then a read of what they lost).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple
from typing import cast as type_cast  # `cast` here is SQL CAST

from sqlalchemy import (
    BigInteger,
    String,
    cast,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.orm import Session

from context_engine.schema.context import principal_of
from context_engine.schema.knowledge import ToolInvocation
from context_engine.schema.query import utc_bound
from context_engine.storage.metadata import dialects
from context_engine.storage.metadata.engine import SqlDatabase
from context_engine.storage.metadata.tables import (
    HINT_CHANGES,
    HINT_DOCS,
    HINT_TERMS,
    IN_BATCH,
    META,
    RETRIEVED_DOCS,
    TOOL_INVOCATIONS,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import CursorResult

_HINT_GENERATION = "hint_generation:{account}"
_HINT_VERSION = "hint_version:{account}"
#: The hint change log keeps an account's last this many generations; a process further behind reloads the account.
HINT_LOG_RETAIN = 10_000
_HINT_PRUNE_EVERY = 100  # generations between two prunings of an account's log


# ---- plain records ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class HintDoc:
    """A document of the hint index."""

    uri: str
    parent_uri: str | None
    owner_space: str
    context_type: str
    title: str
    domain: str | None
    title_words: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HintTerm:
    """One keyword of a document: ``term`` is normalised (NFKC, case-folded); ``kind`` says where it came from."""

    uri: str
    term: str
    kind: str


#: A hint term is stored cut to this many characters (the column's size).
HINT_TERM_MAX_CHARS = 512


@dataclass(frozen=True, slots=True)
class HintChange:
    """What :meth:`SqlAuditStore.replace_hint_docs` did, as its transaction sees it: the account's hint generation
    before and after, and the term rows it removed (those of the replaced and dropped documents; empty with
    ``clear_all``). A process whose compiled index is at ``previous_generation`` can apply the change to it instead of
    reloading the account (``knowledge/hint_index.py``), once the transaction has committed."""

    previous_generation: int
    generation: int
    removed_terms: tuple[HintTerm, ...] = ()
    #: The change log's token of each generation (``knowledge_hint_changes``): a cached index at
    #: ``previous_generation`` is the state this change started from only when it holds ``previous_token`` too (a
    #: restored database may reach the same number by another history). ``None``: no logged row for it.
    previous_token: str | None = None
    token: str | None = None


class HintState(NamedTuple):
    """An account's hint index as the store holds it (:meth:`SqlAuditStore.hint_state`), read in one committed
    snapshot: the generation, the extractor version it was built with, and the change log's token of the generation
    (``None`` before the first build, or when no logged row holds it: written before the log). The generation and
    token together name one state: a restored database may reach the same number by another history."""

    generation: int
    version: str | None
    token: str | None = None


@dataclass(frozen=True, slots=True)
class HintCatchUp:
    """What changed in an account's hint index since a generation (:meth:`SqlAuditStore.hint_changes_since`), read
    in one committed snapshot: the generation (and its token) and version it brings a compiled index to, the documents
    changed
    (``uris``: replaced, added or dropped), the term rows those documents had at the starting generation
    (``removed_terms``), and their rows now (``docs``, ``terms``; a dropped document has none)."""

    generation: int
    version: str | None
    uris: tuple[str, ...]
    removed_terms: tuple[HintTerm, ...]
    docs: tuple[HintDoc, ...]
    terms: tuple[HintTerm, ...]
    token: str | None = None  # the log's token of ``generation``


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """A document already returned in a session: by which invocation and when."""

    doc_key: str
    invocation_id: str
    retrieved_at: datetime
    expires_at: datetime


# ---- the store ----------------------------------------------------------------------------------------------------
class SqlAuditStore:
    """Invocations, the session ledger and the hint index, in the metadata store's database.

    Args:
        metadata: the open :class:`SqlDatabase` (SQLite or PostgreSQL) whose sessions and transactions are
            shared (a call inside ``metadata.transaction()`` joins it); its schema holds these tables. Build it with
            :func:`context_engine.storage.factory.open_audit`.

    Raises:
        ContextEngineError: ``WRT-5001`` (retryable) on a database failure, from every method.
    """

    def __init__(self, metadata: SqlDatabase) -> None:
        self._store = metadata
        self._dialect = metadata.dialect
        #: A read-only home: invocations and ledger entries are not written (:meth:`record_invocation`,
        #: :meth:`record_invocations`, :meth:`purge_expired` do nothing); everything else reads.
        self.read_only = False

    @contextmanager
    def _use(self, *, write: bool, isolated: bool = False) -> Iterator[Session]:
        with self._store.session(write=write, isolated=isolated) as s:
            yield s

    # ---- tool invocations -----------------------------------------------------------------------------------------
    def record_invocation(
        self,
        row: ToolInvocation,
        *,
        ledger_keys: Sequence[str] = (),
        ledger_ttl_s: int = 0,
    ) -> dict[str, LedgerEntry]:
        """Insert one invocation and mark ``ledger_keys`` as retrieved in its session, in one transaction.

        A key already marked (and not expired) keeps its first invocation; an expired mark is renewed.

        Returns:
            The ledger entries that already existed (not expired) for ``ledger_keys`` at commit time: documents
            another call of the same session marked first.
        """
        if self.read_only:
            return {}
        values = _values(row)
        principal = values["principal"]
        existing: dict[str, LedgerEntry] = {}
        with self._use(write=True) as s:
            s.execute(insert(TOOL_INVOCATIONS), [values])
            if ledger_keys and row.session_id is not None:
                existing = self._mark(
                    s,
                    row.account_id,
                    principal,
                    row.session_id,
                    ledger_keys,
                    row.invocation_id,
                    row.created_at,
                    ledger_ttl_s,
                )
        return existing

    def record_invocations(self, rows: Sequence[ToolInvocation]) -> None:
        """Insert ``rows`` in one transaction (one statement, executed for every row): all of them or, on a
        failure, none (``WRT-5001``). Nothing on a read-only home. Group commit for the background writer of
        :class:`~context_engine.knowledge.tool_invocation_recorder.ToolInvocationRecorder`: a row costs ~0.45 ms
        inserted alone and ~0.24 ms in a batch of eight (SQLite, 6.5 kB search_memory rows, bench home)."""
        if self.read_only or not rows:
            return
        with self._use(write=True) as s:
            s.execute(insert(TOOL_INVOCATIONS), [_values(row) for row in rows])

    def _mark(
        self,
        s: Session,
        account_id: str,
        principal: str,
        session_id: str,
        keys: Sequence[str],
        invocation_id: str,
        now: datetime,
        ttl_s: int,
    ) -> dict[str, LedgerEntry]:
        table = RETRIEVED_DOCS
        rows = self._ledger_rows(s, account_id, principal, session_id, keys)
        expires = now + timedelta(seconds=ttl_s)
        live: dict[str, LedgerEntry] = {}
        fresh: list[dict[str, Any]] = []
        lost: list[str] = []  # marked (or renewed) by a concurrent call between our read and our write
        for key in dict.fromkeys(keys):
            found = rows.get(key)
            if found is None:
                fresh.append(
                    {
                        "account_id": account_id,
                        "principal": principal,
                        "session_id": session_id,
                        "doc_key": key,
                        "invocation_id": invocation_id,
                        "retrieved_at": now,
                        "expires_at": expires,
                    }
                )
            elif found.expires_at <= now:
                renew = (
                    update(table)
                    .where(
                        table.c.account_id == account_id,
                        table.c.principal == principal,
                        table.c.session_id == session_id,
                        table.c.doc_key == key,
                        table.c.expires_at <= now,
                    )
                    .values(invocation_id=invocation_id, retrieved_at=now, expires_at=expires)
                )
                # a DML statement's result is a CursorResult (typed as the plain Result)
                renewed = type_cast("CursorResult[Any]", s.execute(renew)).rowcount
                if not renewed:
                    lost.append(key)
            else:
                live[key] = found
        for start in range(0, len(fresh), IN_BATCH):
            batch = fresh[start : start + IN_BATCH]
            stmt = dialects.insert_ignore(self._dialect, table).values(batch).returning(table.c.doc_key)
            inserted = set(s.scalars(stmt))
            lost.extend(row["doc_key"] for row in batch if row["doc_key"] not in inserted)
        if lost:  # READ COMMITTED (PostgreSQL) / the write lock (SQLite): the winner's row is visible now
            live.update(self._ledger_rows(s, account_id, principal, session_id, lost))
        return live

    def _ledger_rows(
        self, s: Session, account_id: str, principal: str, session_id: str, keys: Sequence[str]
    ) -> dict[str, LedgerEntry]:
        table = RETRIEVED_DOCS
        out: dict[str, LedgerEntry] = {}
        unique = sorted(set(keys))
        for start in range(0, len(unique), IN_BATCH):
            chunk = unique[start : start + IN_BATCH]
            stmt = select(table.c.doc_key, table.c.invocation_id, table.c.retrieved_at, table.c.expires_at).where(
                table.c.account_id == account_id,
                table.c.principal == principal,
                table.c.session_id == session_id,
                table.c.doc_key.in_(chunk),
            )
            for key, inv, at, exp in s.execute(stmt):
                out[key] = LedgerEntry(key, inv, _utc(at), _utc(exp))
        return out

    def get_invocation(
        self, account_id: str, invocation_id: str, *, principal: str | None = None
    ) -> ToolInvocation | None:
        """The invocation with this id in the account (made by ``principal`` unless it is ``None``), or ``None``
        (also for another account's or another principal's id)."""
        table = TOOL_INVOCATIONS
        stmt = select(table).where(table.c.account_id == account_id, table.c.invocation_id == invocation_id)
        if principal is not None:
            stmt = stmt.where(table.c.principal == principal)
        with self._use(write=False) as s:
            row = s.execute(stmt).first()
        return None if row is None else _invocation(row._mapping)

    def list_invocations(
        self,
        account_id: str,
        *,
        principal: str | None = None,
        session_id: str | None = None,
        tool_name: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
        offset: int = 0,
        newest_first: bool = True,
    ) -> list[ToolInvocation]:
        """Invocations of the account, optionally of one principal, session and/or tool, with
        ``since <= created_at < until``.

        Ordered by ``(created_at, seq)``, newest first unless ``newest_first`` is false; ``limit``/``offset`` page.

        Raises:
            ContextEngineError: ``RET-4001`` (``details.field``) for a ``since`` or ``until`` that cannot be represented
                in UTC (``9999-12-31T23:59:59-14:00``), checked before the database is asked.
        """
        since, until = utc_bound(since, "since"), utc_bound(until, "until")
        table = TOOL_INVOCATIONS
        stmt = select(table).where(table.c.account_id == account_id)
        if principal is not None:
            stmt = stmt.where(table.c.principal == principal)
        if session_id is not None:
            stmt = stmt.where(table.c.session_id == session_id)
        if tool_name is not None:
            stmt = stmt.where(table.c.tool_name == tool_name)
        if since is not None:
            stmt = stmt.where(table.c.created_at >= since)
        if until is not None:
            stmt = stmt.where(table.c.created_at < until)
        order = (table.c.created_at.desc(), table.c.seq.desc()) if newest_first else (table.c.created_at, table.c.seq)
        stmt = stmt.order_by(*order).limit(max(0, limit)).offset(max(0, offset))
        with self._use(write=False) as s:
            return [_invocation(r._mapping) for r in s.execute(stmt)]

    # ---- session ledger -------------------------------------------------------------------------------------------
    def seen_documents(
        self, account_id: str, principal: str, session_id: str, doc_keys: Sequence[str], now: datetime
    ) -> dict[str, LedgerEntry]:
        """Entries of ``doc_keys`` already retrieved in the principal's session and not expired at ``now``."""
        if not doc_keys:
            return {}
        with self._use(write=False) as s:
            rows = self._ledger_rows(s, account_id, principal, session_id, doc_keys)
        return {k: e for k, e in rows.items() if e.expires_at > now}

    def purge_expired(self, now: datetime) -> int:
        """Delete every ledger row expired at ``now`` (all accounts); returns how many (none for a read-only home)."""
        if self.read_only:
            return 0
        table = RETRIEVED_DOCS
        with self._use(write=True) as s:
            deleted = type_cast("CursorResult[Any]", s.execute(delete(table).where(table.c.expires_at <= now)))
            return deleted.rowcount or 0

    # ---- hint index -----------------------------------------------------------------------------------------------
    def hint_state(self, account_id: str) -> HintState:
        """The account's hint index state (:class:`HintState`: generation, version, token), in one committed
        snapshot; ``(0, None, None)`` before it was first built. Cost: the meta read and one indexed read of the change
        log (a lookup's per-request check that its compiled index is current, ``knowledge/hint_index.py``)."""
        gen_key, ver_key = _HINT_GENERATION.format(account=account_id), _HINT_VERSION.format(account=account_id)
        with self._store.snapshot() as s:
            rows = dict(s.execute(select(META.c.key, META.c.value).where(META.c.key.in_([gen_key, ver_key]))).all())
            generation = int(rows.get(gen_key, 0))
            token = _token_at(s, account_id, generation) if generation else None
        return HintState(generation, rows.get(ver_key), token)

    def replace_hint_docs(
        self,
        account_id: str,
        uris: Sequence[str],
        docs: Sequence[HintDoc],
        terms: Sequence[HintTerm],
        *,
        version: str | None = None,
        clear_all: bool = False,
    ) -> HintChange:
        """Drop the hint rows of ``uris`` (or of the whole account with ``clear_all``), insert ``docs`` and ``terms``,
        set the version when given, and bump the account's hint generation, in one transaction (the caller's, when
        one is open: then the change counts once it commits, :meth:`after_commit`). The change log
        (``knowledge_hint_changes``) gets a row per document of ``uris`` and ``docs`` with the term rows it had, or
        one row without a URI for ``clear_all`` (the account's older rows go: a process behind it reloads).

        Returns:
            The generations before and after, and the term rows removed (none with ``clear_all``).
        """
        docs_t, terms_t = HINT_DOCS, HINT_TERMS
        drop = sorted(set(uris) | {d.uri for d in docs})
        gen_key = _HINT_GENERATION.format(account=account_id)
        removed: list[HintTerm] = []
        # isolated: inside a write's transaction a failure here must undo only these rows (the listener catches it
        # and the write goes on), never abort the write's transaction (PostgreSQL)
        with self._use(write=True, isolated=True) as s:
            # The bump first: its row lock orders this change after every other committed one (PostgreSQL reads
            # committed data statement by statement, and a rebuild in another process takes no write turn), so the
            # rows read next are those of generation - 1 exactly. Read before the bump, the previous generation
            # could be older than the rows (a helper's review forced it: a cache labelled current, one change short).
            _bump(s, self._dialect, gen_key)
            generation = int(s.execute(select(META.c.value).where(META.c.key == gen_key)).scalar() or 0)
            previous_token = _token_at(s, account_id, generation - 1)
            token = uuid.uuid4().hex
            if clear_all:
                s.execute(delete(docs_t).where(docs_t.c.account_id == account_id))
                s.execute(delete(terms_t).where(terms_t.c.account_id == account_id))
            else:
                for start in range(0, len(drop), IN_BATCH):
                    chunk = drop[start : start + IN_BATCH]
                    where = (terms_t.c.account_id == account_id, terms_t.c.uri.in_(chunk))
                    removed += (
                        HintTerm(r.uri, r.term, r.kind)
                        for r in s.execute(select(terms_t.c.uri, terms_t.c.term, terms_t.c.kind).where(*where))
                    )
                    s.execute(delete(docs_t).where(docs_t.c.account_id == account_id, docs_t.c.uri.in_(chunk)))
                    s.execute(delete(terms_t).where(*where))
            doc_values = [
                {
                    "account_id": account_id,
                    "uri": d.uri,
                    "parent_uri": d.parent_uri,
                    "owner_space": d.owner_space,
                    "context_type": d.context_type,
                    "title": d.title,
                    "domain": d.domain,
                    "title_words": list(d.title_words),
                }
                for d in docs
            ]
            term_values = [
                {"account_id": account_id, "uri": t.uri, "term": t.term[:HINT_TERM_MAX_CHARS], "kind": t.kind}
                for t in terms
            ]
            _log_hint_change(s, account_id, generation, token, None if clear_all else drop, removed)
            for start in range(0, len(doc_values), IN_BATCH):
                s.execute(insert(docs_t), doc_values[start : start + IN_BATCH])
            for start in range(0, len(term_values), IN_BATCH):
                s.execute(insert(terms_t), term_values[start : start + IN_BATCH])
            if version is not None:
                s.execute(
                    dialects.upsert(self._dialect, META, ["key"]).values(
                        key=_HINT_VERSION.format(account=account_id), value=version
                    )
                )
        return HintChange(generation - 1, generation, tuple(removed), previous_token, token)

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once the calling thread's open transaction commits, or at once without one; never after a
        rollback (:meth:`SqlDatabase.after_commit <context_engine.storage.metadata.engine.SqlDatabase.after_commit>`).
        """
        self._store.after_commit(fn)

    def hint_token(self, account_id: str, generation: int) -> str | None:
        """The change log's token of the account's ``generation`` (what names that state of the account with the
        number; :class:`HintChange`), or ``None`` when no logged row holds it (pruned, or written before the log)."""
        with self._store.snapshot() as s:
            return _token_at(s, account_id, generation)

    def hint_changes_since(self, account_id: str, generation: int, token: str | None, most: int) -> HintCatchUp | None:
        """The changes of the account's hint index after ``generation``, for a compiled index at that generation and
        its ``token`` (:meth:`hint_token`) to catch up with (``knowledge/hint_index.py``), in one committed
        snapshot.

        Cost: one indexed range read of the change log and one read of the changed documents' rows: O(changes),
        not O(account).

        Returns:
            The :class:`HintCatchUp`; ``None`` when the log cannot bring ``generation`` along: it does not reach
            back that far (:data:`HINT_LOG_RETAIN`, or written before the log existed), the account was rebuilt
            since, more than ``most`` document changes are logged since, ``generation`` is ahead of the store, or
            the store's ``generation`` has another token (its history was rewound: a restore, a failover).
        """
        docs_t, terms_t, log_t = HINT_DOCS, HINT_TERMS, HINT_CHANGES
        gen_key, ver_key = _HINT_GENERATION.format(account=account_id), _HINT_VERSION.format(account=account_id)
        with self._store.snapshot() as s:
            meta = dict(s.execute(select(META.c.key, META.c.value).where(META.c.key.in_([gen_key, ver_key]))).all())
            current = int(meta.get(gen_key, 0))
            # every committed generation logs at least one row: more generations than `most` are more changes too
            if current < generation or current - generation > most:
                return None
            if generation > 0 and (token is None or _token_at(s, account_id, generation) != token):
                return None
            rows = s.execute(
                select(log_t.c.generation, log_t.c.uri, log_t.c.removed_terms, log_t.c.token)
                .where(log_t.c.account_id == account_id, log_t.c.generation > generation)
                .order_by(log_t.c.generation, log_t.c.id)
                .limit(most + 1)
            ).all()
            # A gap in the generations means the log was pruned or predates them.
            if len(rows) > most or {r.generation for r in rows} != set(range(generation + 1, current + 1)):
                return None
            before: dict[str, list[list[str]]] = {}
            for r in rows:
                if r.uri is None:  # a rebuild replaced the whole account
                    return None
                before.setdefault(r.uri, r.removed_terms or [])  # the first change after `generation`: its rows then
            changed = sorted(before)
            docs: list[HintDoc] = []
            terms: list[HintTerm] = []
            for start in range(0, len(changed), IN_BATCH):
                chunk = changed[start : start + IN_BATCH]
                docs += (
                    HintDoc(r.uri, r.parent_uri, r.owner_space, r.context_type, r.title, r.domain, tuple(r.title_words))
                    for r in s.execute(select(docs_t).where(docs_t.c.account_id == account_id, docs_t.c.uri.in_(chunk)))
                )
                terms += (
                    HintTerm(r.uri, r.term, r.kind)
                    for r in s.execute(
                        select(terms_t.c.uri, terms_t.c.term, terms_t.c.kind).where(
                            terms_t.c.account_id == account_id, terms_t.c.uri.in_(chunk)
                        )
                    )
                )
        removed = tuple(HintTerm(uri, term, kind) for uri in changed for term, kind in before[uri])
        last = rows[-1].token if rows else token
        return HintCatchUp(current, meta.get(ver_key), tuple(changed), removed, tuple(docs), tuple(terms), last)

    def load_hint_index(self, account_id: str) -> tuple[int, str | None, list[HintDoc], list[HintTerm]]:
        """``(generation, version, docs, terms)`` of the account, read in one committed snapshot."""
        docs_t, terms_t = HINT_DOCS, HINT_TERMS
        gen_key, ver_key = _HINT_GENERATION.format(account=account_id), _HINT_VERSION.format(account=account_id)
        with self._store.snapshot() as s:
            meta = dict(s.execute(select(META.c.key, META.c.value).where(META.c.key.in_([gen_key, ver_key]))).all())
            docs = [
                HintDoc(r.uri, r.parent_uri, r.owner_space, r.context_type, r.title, r.domain, tuple(r.title_words))
                for r in s.execute(select(docs_t).where(docs_t.c.account_id == account_id))
            ]
            # Each row brings its own strings; a term row shares its document's URI and one object per distinct
            # term and kind, so the list holds little more than the rows themselves (a 1M-node account: ~2M rows).
            uris = {d.uri: d.uri for d in docs}
            shared: dict[str, str] = {}
            terms = [
                HintTerm(uris.get(r.uri, r.uri), shared.setdefault(r.term, r.term), shared.setdefault(r.kind, r.kind))
                for r in s.execute(
                    select(terms_t.c.uri, terms_t.c.term, terms_t.c.kind).where(terms_t.c.account_id == account_id)
                )
            ]
        return int(meta.get(gen_key, 0)), meta.get(ver_key), docs, terms


# ---- helpers ------------------------------------------------------------------------------------------------------
def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _values(row: ToolInvocation) -> dict[str, Any]:
    """The ``tool_invocations`` columns of ``row`` (its fields as JSON values, the datetime kept, the principal)."""
    values = row.model_dump(mode="json")
    values["created_at"] = row.created_at
    values["principal"] = _caller_principal(row.caller)
    return values


def _caller_principal(caller: dict[str, Any]) -> str:
    return principal_of(str(caller.get("role", "")), caller.get("user_space"), caller.get("agent_space"))


def _invocation(row: Any) -> ToolInvocation:
    values = {k: row[k] for k in ToolInvocation.model_fields if k in row}
    values["created_at"] = _utc(row["created_at"])
    return ToolInvocation.model_validate(values)


def _token_at(s: Session, account_id: str, generation: int) -> str | None:
    """The change log's token of ``generation`` (every row of a generation holds the same one), or ``None``."""
    log_t = HINT_CHANGES
    where = (log_t.c.account_id == account_id, log_t.c.generation == generation)
    return s.execute(select(log_t.c.token).where(*where).limit(1)).scalar()


def _log_hint_change(
    s: Session,
    account_id: str,
    generation: int,
    token: str,
    uris: Sequence[str] | None,
    removed: Sequence[HintTerm],
) -> None:
    """Log the documents ``uris`` changed at ``generation`` (under ``token``) with the term rows they had
    (``removed``); ``None``: the whole account was replaced, and its older rows go. Prunes the account's log every
    ``_HINT_PRUNE_EVERY`` generations down to the last :data:`HINT_LOG_RETAIN`."""
    log_t = HINT_CHANGES
    if uris is None:
        s.execute(delete(log_t).where(log_t.c.account_id == account_id))
        values = {"account_id": account_id, "generation": generation, "uri": None, "removed_terms": None}
        s.execute(insert(log_t).values(**values, token=token))
        return
    before: dict[str, list[list[str]]] = {u: [] for u in uris}
    for t in removed:
        before.setdefault(t.uri, []).append([t.term, t.kind])
    rows = [
        {"account_id": account_id, "generation": generation, "uri": u, "removed_terms": terms, "token": token}
        for u, terms in before.items()
    ]
    for start in range(0, len(rows), IN_BATCH):
        s.execute(insert(log_t), rows[start : start + IN_BATCH])
    if generation % _HINT_PRUNE_EVERY == 0 and generation > HINT_LOG_RETAIN:
        old = (log_t.c.account_id == account_id, log_t.c.generation <= generation - HINT_LOG_RETAIN)
        s.execute(delete(log_t).where(*old))


def _bump(s: Session, dialect: str, key: str) -> None:
    """Add 1 to the counter in ``meta`` under ``key`` (created at 0 first, atomic against a concurrent creator)."""
    s.execute(dialects.insert_ignore(dialect, META).values(key=key, value="0"))
    s.execute(update(META).where(META.c.key == key).values(value=cast(cast(META.c.value, BigInteger) + 1, String)))
