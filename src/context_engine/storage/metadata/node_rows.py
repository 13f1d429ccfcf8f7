"""The metadata store's nodes (DESIGN.md §3): the tree (upsert, reads, listings, deletes, index status), child
sequences, file lookups, versions and relations. :class:`NodeRows` is one role of
:class:`~context_engine.storage.metadata.sqlalchemy_store.SqlMetadataStore` (the
:class:`~context_engine.storage.protocols.NodeStore` and :class:`~context_engine.storage.protocols.NodeLedger`
protocols), over the shared :class:`~context_engine.storage.metadata.engine.SqlDatabase`.

Ordering is done in Python (code-point order of ``str``), never by ``ORDER BY`` on text, because a PostgreSQL
database with a locale collation sorts differently from SQLite; results are therefore identical on both.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, get_args

from sqlalchemy import (
    and_,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import IndexStatus, NodeHead, NodeRecord, Relation
from context_engine.schema.uri import ContextURI, parse_uri
from context_engine.storage.metadata import dialects
from context_engine.storage.metadata.engine import SqlDatabase
from context_engine.storage.metadata.hot_reads import HotRead
from context_engine.storage.metadata.tables import (
    IN_BATCH,
    META,
    NODES,
    RELATIONS,
    VERSIONS,
    NodeRow,
    RelationRow,
    VectorRow,
    chunks,
    node_record,
    node_values,
    slash_forms,
    stored_node_record,
)

__all__ = ["NodeRows"]

_STATUSES = frozenset(get_args(IndexStatus))
_SPACE_SCOPE_ROOTS = frozenset({"ctx://user/", "ctx://agent/"})

# Built once (building and cache-keying a statement costs as much as running it on SQLite).
_GET_NODES = select(NODES).where(
    NODES.c.account_id == bindparam("account_id"), NODES.c.uri_key.in_(bindparam("keys", expanding=True))
)
# NodeHead's columns, in its field order (rows become heads with one tuple call)
_GET_HEADS = select(*(NODES.c[name] for name in NodeHead._fields)).where(
    NODES.c.account_id == bindparam("account_id"), NODES.c.uri_key.in_(bindparam("keys", expanding=True))
)
# The same read outside a transaction, on a DBAPI connection (a search's hot path: hot_reads.py)
_HOT_HEADS = HotRead(
    lambda size: select(*(NODES.c[name] for name in NodeHead._fields)).where(
        NODES.c.account_id == bindparam("account_id"),
        NODES.c.uri_key.in_([bindparam(f"k{i}") for i in range(size)]),
    )
)


@functools.lru_cache(maxsize=16_384)
def _uri_key(uri: str) -> str:
    """``ContextURI.parse(uri).key``, memoised (a search asks for the same few hundred URIs; errors are not kept)."""
    return ContextURI.parse(uri).key


class NodeRows(SqlDatabase):
    """Nodes, sequences, versions and relations of the metadata store (module docstring)."""

    # ---- nodes ----------------------------------------------------------------------------------------------------
    def upsert_nodes(self, nodes: Sequence[NodeRecord], *, bulk: bool = False) -> None:
        """Insert or update nodes by ``(account_id, uri_key)``; the last of duplicates wins.

        The stored ``uri`` is canonical (NFC; a trailing ``/`` exactly when ``is_dir``), ``parent_uri`` the canonical
        directory form. ``created_at`` defaults to now and is kept on update; ``updated_at`` defaults to now.
        One ``INSERT ... ON CONFLICT DO UPDATE`` per 500 rows (``id`` and ``created_at`` kept on update): a write's
        batch of 100 nodes in a third of the time the ORM took (issue 26). ``bulk`` is accepted for callers that
        load a store; the statement is the same.

        Raises:
            ContextEngineError: ``WRT-4001`` for an invalid URI; ``WRT-5001`` (retryable) on a database failure.
        """
        values = list({(v["account_id"], v["uri_key"]): v for v in map(node_values, nodes)}.values())
        if not values:
            return
        with self._use(write=True) as s:
            rows = [{("metadata_json" if k == "meta_json" else k): v for k, v in row.items()} for row in values]
            for start in range(0, len(rows), IN_BATCH):
                stmt = self._upsert(NODES, ["account_id", "uri_key"], keep=("id", "created_at"))
                s.execute(stmt, rows[start : start + IN_BATCH])

    def get_node(self, account_id: str, uri: str | ContextURI) -> NodeRecord | None:
        """The node at ``uri`` (with or without the trailing slash; a parsed URI is not parsed again), or ``None``.

        Raises:
            ContextEngineError: ``WRT-4001`` for an invalid URI; ``WRT-5001`` on a database failure.
        """
        key = parse_uri(uri).key
        with self._use(write=False) as s:
            row = s.scalars(select(NodeRow).where(NodeRow.account_id == account_id, NodeRow.uri_key == key)).first()
            return None if row is None else node_record(row)

    def get_nodes(self, account_id: str, uris: Iterable[str]) -> dict[str, NodeRecord]:
        """Batch lookup keyed by the canonical stored URI; missing URIs are absent. Accepts either slash form."""
        keys = sorted({ContextURI.parse(u).key for u in uris})
        out: dict[str, NodeRecord] = {}
        with self._read() as s:
            for chunk in chunks(keys):
                # Core rows, not ORM objects, and records not validated again (stored_node_record): a search
                # hydrates ~40 nodes per request (measured: 4.8 -> 1 ms / 20; validation 0.26 ms of the rest)
                rows = s.execute(_GET_NODES, {"account_id": account_id, "keys": list(chunk)})
                out.update((row.uri, stored_node_record(row)) for row in rows)
        return out

    def get_node_heads(self, account_id: str, uris: Iterable[str]) -> dict[str, NodeHead]:
        """:meth:`get_nodes` reduced to the columns a search reads (:class:`NodeHead`, keyed by the canonical stored
        URI; either slash form accepted): one query per 500 URIs, tuples built from the rows as they come (a third
        of the CPU of ``get_nodes`` for the ~20 nodes of a search batch, issue 26); outside a transaction a
        :class:`~context_engine.storage.metadata.hot_reads.HotRead` (a quarter of the Core read's time)."""
        keys = sorted({_uri_key(u) for u in uris})
        out: dict[str, NodeHead] = {}
        make = NodeHead._make
        if not keys:
            return out
        hot = self._hot_rows(_HOT_HEADS, {"account_id": account_id}, keys)
        if hot is not None:
            return {row[0]: make(row) for row in hot}
        with self._read() as s:
            for chunk in chunks(keys):
                rows = s.execute(_GET_HEADS, {"account_id": account_id, "keys": list(chunk)})
                out.update((row[0], make(row)) for row in rows)
        return out

    def list_children(self, account_id: str, parent_uri: str) -> list[NodeRecord]:
        """Direct children of the directory ``parent_uri`` (either slash form), ordered by URI (code points)."""
        parent = str(ContextURI.parse(parent_uri).as_dir())
        with self._use(write=False) as s:
            rows = s.scalars(select(NodeRow).where(NodeRow.account_id == account_id, NodeRow.parent_uri == parent))
            return sorted((node_record(r) for r in rows), key=lambda n: n.uri)

    def list_space_roots(self, account_id: str, scope: str) -> list[NodeRecord]:
        """The space roots of ``scope`` (``user`` or ``agent``): its nodes without a parent, ordered by URI."""
        prefix = f"ctx://{scope}/"
        with self._use(write=False) as s:
            stmt = select(NodeRow).where(
                NodeRow.account_id == account_id,
                NodeRow.parent_uri.is_(None),
                NodeRow.uri_key.startswith(prefix, autoescape=True),
            )
            rows = [r for r in s.scalars(stmt) if r.uri_key.startswith(prefix)]  # LIKE ignores ASCII case
            return sorted((node_record(r) for r in rows), key=lambda n: n.uri)

    def list_subtree(self, account_id: str, uri: str) -> list[NodeRecord]:
        """The node at ``uri`` and every descendant, ordered by URI (code points).

        Descendants match on the ``uri_key`` prefix ``key + '/'`` with ``%``/``_`` escaped; the prefix is checked
        again in Python because SQLite's ``LIKE`` ignores ASCII case.
        """
        key = ContextURI.parse(uri).key
        prefix = key if key.endswith("/") else key + "/"
        with self._use(write=False) as s:
            stmt = select(NodeRow).where(
                NodeRow.account_id == account_id,
                or_(NodeRow.uri_key == key, NodeRow.uri_key.startswith(prefix, autoescape=True)),
            )
            rows = [r for r in s.scalars(stmt) if r.uri_key == key or r.uri_key.startswith(prefix)]
            return sorted((node_record(r) for r in rows), key=lambda n: n.uri)

    def list_all_nodes(self, account_id: str) -> list[NodeRecord]:
        """Every node of the account, ordered by URI (code points)."""
        with self._use(write=False) as s:
            rows = s.scalars(select(NodeRow).where(NodeRow.account_id == account_id))
            return sorted((node_record(r) for r in rows), key=lambda n: n.uri)

    def delete_nodes(self, account_id: str, uris: Sequence[str]) -> None:
        """Delete exactly these nodes (not their subtrees) and every relation from or to them. Missing are ignored."""
        keys = sorted({ContextURI.parse(u).key for u in uris})
        if not keys:
            return
        forms = sorted({form for k in keys for form in slash_forms(k)})
        with self._use(write=True) as s:
            for chunk in chunks(forms):
                s.execute(
                    delete(RELATIONS).where(
                        RelationRow.account_id == account_id,
                        or_(RelationRow.from_uri.in_(chunk), RelationRow.to_uri.in_(chunk)),
                    )
                )
            for chunk in chunks(keys):
                s.execute(delete(NODES).where(NodeRow.account_id == account_id, NodeRow.uri_key.in_(chunk)))
                s.execute(delete(VERSIONS).where(VERSIONS.c.account_id == account_id, VERSIONS.c.uri_key.in_(chunk)))

    # ---- memories (issue 11) --------------------------------------------------------------------------------------
    def last_child_uri(self, account_id: str, parent_uri: str) -> str | None:
        """The greatest child URI of a directory in code-point order (zero-padded names make it the newest), or
        ``None``; one indexed query, so appending to a long session costs the same as to a short one."""
        parent = str(ContextURI.parse(parent_uri).as_dir())
        with self._use(write=False) as s:
            stmt = select(func.max(NodeRow.uri)).where(NodeRow.account_id == account_id, NodeRow.parent_uri == parent)
            return s.execute(stmt).scalar()

    def children_window(self, account_id: str, parent_uri: str, each: int) -> tuple[list[NodeRecord], int]:
        """A bounded sample of a directory's children, for summaries that must not cost O(children): all of them
        when there are at most ``2 * each``, else the first and the last ``each`` by URI. Returns ``(sample ordered
        by URI, total number of children)``. The window is chosen by the database's ``ORDER BY`` on the URI key in
        code-point order (on PostgreSQL whatever the database's collation)."""
        parent = str(ContextURI.parse(parent_uri).as_dir())
        where = (NodeRow.account_id == account_id, NodeRow.parent_uri == parent)
        with self._use(write=False) as s:
            total = int(s.execute(select(func.count()).where(*where)).scalar() or 0)
            if total <= 2 * each:
                rows = list(s.scalars(select(NodeRow).where(*where)))
            else:
                key = dialects.code_point_order(self.dialect, NodeRow.uri_key)
                head = s.scalars(select(NodeRow).where(*where).order_by(key).limit(each))
                tail = s.scalars(select(NodeRow).where(*where).order_by(key.desc()).limit(each))
                rows = list({r.uri: r for r in [*head, *tail]}.values())
        return sorted((node_record(r) for r in rows), key=lambda n: n.uri), total

    def reserve_sequence(self, account_id: str, parent_uri: str, count: int, floor: int) -> int:
        """Reserve ``count`` consecutive sequence numbers for new children of ``parent_uri`` (a conversation session)
        and return the first. Atomic across threads and processes (one write transaction on a ``meta`` counter row),
        so concurrent writers never number two messages alike; ``floor`` is the highest number already used (a
        session written before the counter existed). A batch that fails after reserving leaves a gap."""
        key = _sequence_key(account_id, parent_uri)
        with self.transaction(), self._use(write=True) as s:
            # the row first, then its lock (PostgreSQL: FOR UPDATE; SQLite holds the write lock): a concurrent
            # reservation waits and reads the value this one leaves
            s.execute(self._insert_ignore(META).values(key=key, value="0"))
            value = s.execute(select(META.c.value).where(META.c.key == key).with_for_update()).scalar()
            current = max(int(value or 0), floor)
            s.execute(update(META).where(META.c.key == key).values(value=str(current + count)))
        return current + 1

    def release_sequence(self, account_id: str, parent_uri: str, start: int, count: int) -> None:
        """Give back numbers reserved by :meth:`reserve_sequence` for a batch that failed, when no later reservation
        followed (else the gap stays: numbers only ever grow)."""
        key = _sequence_key(account_id, parent_uri)
        with self.transaction(), self._use(write=True) as s:
            stmt = update(META).where(META.c.key == key, META.c.value == str(start + count - 1))
            s.execute(stmt.values(value=str(start - 1)))

    def count_children(self, account_id: str, parent_uri: str) -> int:
        """How many direct children a directory has (one indexed count)."""
        parent = str(ContextURI.parse(parent_uri).as_dir())
        with self._use(write=False) as s:
            stmt = select(func.count()).where(NodeRow.account_id == account_id, NodeRow.parent_uri == parent)
            return int(s.execute(stmt).scalar() or 0)

    def find_by_hash(
        self, account_id: str, content_hashes: Sequence[str], *, uri_prefix: str, context_type: str = "memory"
    ) -> dict[str, NodeRecord]:
        """Files of ``context_type`` under ``uri_prefix`` whose ``content_hash`` is one of ``content_hashes``, keyed
        by hash (the first URI in code-point order when several share one)."""
        out: dict[str, NodeRecord] = {}
        prefix = str(ContextURI.parse(uri_prefix).as_dir()).rstrip("/") + "/"
        with self._use(write=False) as s:
            for chunk in chunks(sorted(set(content_hashes))):
                stmt = select(NodeRow).where(
                    NodeRow.account_id == account_id,
                    NodeRow.content_hash.in_(chunk),
                    NodeRow.context_type == context_type,
                    NodeRow.is_dir.is_(False),
                )
                for row in sorted(s.scalars(stmt), key=lambda r: r.uri):
                    if row.content_hash is not None and row.uri.startswith(prefix) and row.content_hash not in out:
                        out[row.content_hash] = node_record(row)
        return out

    def query_files(
        self,
        account_id: str,
        *,
        uri_prefixes: Sequence[str],
        context_type: str | None = None,
        occurred_start: datetime | None = None,
        occurred_end: datetime | None = None,
        metadata_equals: dict[str, Any] | None = None,
        newest_first: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> tuple[list[NodeRecord], int]:
        """Files under any of ``uri_prefixes`` (directory URIs), narrowed by type, time and metadata; and their total.

        Time: ``occurred_start <= coalesce(occurred_at, created_at) < occurred_end`` (either bound optional).
        ``metadata_equals`` maps a key to a scalar (equality) or a list of scalars (membership) on the top-level
        key of the metadata object; every key must match. A key is compared literally, whatever its characters, and
        a value matches one of its own JSON type (``1`` matches ``1.0``, not ``"1"`` nor ``true``):
        :func:`~context_engine.storage.metadata.dialects.json_key_matches`. Order: ``(updated_at, URI)`` descending when
        ``newest_first`` (newest first, the later message of one batch first), else URI (code points).
        ``limit``/``offset`` page the ordered list.

        Returns:
            ``(page, total)``: the requested page and the number of matching files.
        """
        keys = _prefix_keys(uri_prefixes)
        if not keys:
            return [], 0
        conditions = _file_conditions(
            self.dialect, account_id, keys, None, context_type, occurred_start, occurred_end, metadata_equals
        )
        with self._use(write=False) as s:
            rows = [r for r in s.scalars(select(NodeRow).where(and_(*conditions))) if r.uri_key.startswith(tuple(keys))]
        if newest_first:  # ties (one batch shares updated_at): the later URI, i.e. the later message, first
            rows.sort(key=lambda r: (r.updated_at, r.uri), reverse=True)
        else:
            rows.sort(key=lambda r: r.uri)
        total = len(rows)
        page = rows[offset : None if limit is None else offset + limit]
        return [node_record(r) for r in page], total

    def select_file_uris(
        self,
        account_id: str,
        *,
        uri_prefixes: Sequence[str] = (),
        parent_uri: str | None = None,
        context_type: str | None = None,
        occurred_start: datetime | None = None,
        occurred_end: datetime | None = None,
        metadata_equals: dict[str, Any] | None = None,
        occurred_windows: Sequence[tuple[datetime, datetime]] = (),
    ) -> list[tuple[str, str]]:
        """``(uri, owner_space)`` of the files :meth:`query_files` would select, reading two columns only (the
        per-request memory filter of search_memory). ``parent_uri`` narrows to one directory's direct children
        through the ``(account_id, parent_uri)`` index, the cheap path for a conversation session.
        ``occurred_windows``: ``[start, end)`` ranges of ``coalesce(occurred_at, created_at)``, any of which a file
        must fall in (the dates a question names, ``retrieval/dates.py``); none: no such narrowing."""
        keys = _prefix_keys(uri_prefixes)
        conditions = _file_conditions(
            self.dialect, account_id, keys, parent_uri, context_type, occurred_start, occurred_end, metadata_equals
        )
        if occurred_windows:
            when = func.coalesce(NodeRow.occurred_at, NodeRow.created_at)
            conditions.append(or_(*(and_(when >= start, when < end) for start, end in occurred_windows)))
        stmt = select(NodeRow.uri, NodeRow.uri_key, NodeRow.owner_space).where(and_(*conditions))
        with self._use(write=False) as s:
            rows = s.execute(stmt).all()
        prefixes = tuple(keys)
        return sorted((uri, space) for uri, key, space in rows if not prefixes or key.startswith(prefixes))

    def add_version(
        self,
        account_id: str,
        uri: str,
        version: int,
        text: str,
        created_at: datetime,
        replaced_at: datetime | None = None,
    ) -> None:
        """Keep ``text`` as version ``version`` of the memory at ``uri``, written at ``created_at`` and replaced at
        ``replaced_at`` (default now: the new version's write time)."""
        key = ContextURI.parse(uri).key
        with self._use(write=True) as s:
            s.execute(
                insert(VERSIONS).values(
                    account_id=account_id,
                    uri_key=key,
                    version=version,
                    text=text,
                    created_at=created_at,
                    replaced_at=replaced_at or datetime.now(UTC),
                )
            )

    def get_versions(self, account_id: str, uri: str) -> list[dict[str, Any]]:
        """Earlier versions of a memory, oldest first: ``{version, text, created_at, replaced_at}`` each."""
        key = ContextURI.parse(uri).key
        with self._use(write=False) as s:
            stmt = select(VERSIONS).where(VERSIONS.c.account_id == account_id, VERSIONS.c.uri_key == key)
            rows = [dict(r._mapping) for r in s.execute(stmt)]
        return [
            {k: r[k] for k in ("version", "text", "created_at", "replaced_at")}
            for r in sorted(rows, key=lambda r: r["version"])
        ]

    def set_index_status(self, account_id: str, uris: Sequence[str], status: str) -> None:
        """Set ``index_status`` (``indexed`` or ``pending``) of these nodes; missing nodes are ignored.

        Raises:
            ContextEngineError: ``WRT-4002`` for an unknown status.
        """
        if status not in _STATUSES:
            raise ContextEngineError(
                ErrorCode.REQUEST_INVALID, f"index_status must be one of {sorted(_STATUSES)}, got {status!r}"
            )
        keys = sorted({ContextURI.parse(u).key for u in uris})
        with self._use(write=True) as s:
            for chunk in chunks(keys):
                s.execute(
                    update(NODES)
                    .where(NodeRow.account_id == account_id, NodeRow.uri_key.in_(chunk))
                    .values(index_status=status)
                )

    def pending_nodes(self, account_id: str | None = None) -> list[NodeRecord]:
        """Nodes with ``index_status='pending'`` (of one account, or all), ordered by ``(account_id, uri)``."""
        stmt = select(NodeRow).where(NodeRow.index_status == "pending")
        if account_id is not None:
            stmt = stmt.where(NodeRow.account_id == account_id)
        with self._use(write=False) as s:
            return sorted((node_record(r) for r in s.scalars(stmt)), key=lambda n: (n.account_id, n.uri))

    def count_nodes(self, account_id: str | None = None) -> dict[str, int]:
        """Counts of one account (or all): ``{"nodes", "files", "directories", "pending"}``."""
        stmt = select(NodeRow.is_dir, NodeRow.index_status, func.count()).group_by(NodeRow.is_dir, NodeRow.index_status)
        if account_id is not None:
            stmt = stmt.where(NodeRow.account_id == account_id)
        out = {"nodes": 0, "files": 0, "directories": 0, "pending": 0}
        with self._use(write=False) as s:
            for is_dir, status, n in s.execute(stmt):
                out["nodes"] += n
                out["directories" if is_dir else "files"] += n
                if status == "pending":
                    out["pending"] += n
        return out

    def accounts(self) -> list[str]:
        """Accounts holding at least one node or vector row, sorted."""
        with self._use(write=False) as s:
            found = set(s.scalars(select(NodeRow.account_id).distinct()))
            found.update(s.scalars(select(VectorRow.account_id).distinct()))
        return sorted(found)

    # ---- relations ------------------------------------------------------------------------------------------------
    def add_relations(self, account_id: str, relations: Sequence[Relation]) -> None:
        """Insert edges, or update the weight of an existing ``(from_uri, to_uri, relation_type)`` edge.

        URIs are validated and NFC-normalised; their slash form is kept as written.
        """
        edges: dict[tuple[str, str, str], float] = {}
        for rel in relations:
            edge = (str(ContextURI.parse(rel.from_uri)), str(ContextURI.parse(rel.to_uri)), rel.relation_type)
            edges[edge] = rel.weight
        if not edges:
            return
        with self._use(write=True) as s:
            existing: dict[tuple[str, str, str], RelationRow] = {}
            for chunk in chunks(sorted({e[0] for e in edges})):
                stmt = select(RelationRow).where(RelationRow.account_id == account_id, RelationRow.from_uri.in_(chunk))
                existing.update(((r.from_uri, r.to_uri, r.relation_type), r) for r in s.scalars(stmt))
            for (from_uri, to_uri, relation_type), weight in edges.items():
                row = existing.get((from_uri, to_uri, relation_type))
                if row is None:
                    s.add(
                        RelationRow(
                            account_id=account_id,
                            from_uri=from_uri,
                            to_uri=to_uri,
                            relation_type=relation_type,
                            weight=weight,
                        )
                    )
                else:
                    row.weight = weight

    def get_relations(self, account_id: str, from_uri: str, limit: int | None = None) -> list[Relation]:
        """Edges leaving ``from_uri`` (either slash form), by weight descending, then ``to_uri``, then type.

        ``limit=None`` returns all; ``limit <= 0`` returns none.
        """
        forms = slash_forms(ContextURI.parse(from_uri).key)
        if limit is not None and limit <= 0:
            return []
        with self._use(write=False) as s:
            stmt = select(RelationRow).where(RelationRow.account_id == account_id, RelationRow.from_uri.in_(forms))
            rels = [
                Relation(from_uri=r.from_uri, to_uri=r.to_uri, relation_type=r.relation_type, weight=r.weight)
                for r in s.scalars(stmt)
            ]
        rels.sort(key=lambda r: (-r.weight, r.to_uri, r.relation_type, r.from_uri))
        return rels if limit is None else rels[:limit]


def _prefix_keys(uri_prefixes: Sequence[str]) -> list[str]:
    """Directory URI keys ending in '/'; a scope root without a space ("ctx://user/": every user's memories, for an
    admin) is taken as a plain prefix."""
    keys = []
    for p in uri_prefixes:
        key = p if p in _SPACE_SCOPE_ROOTS else ContextURI.parse(p).key
        keys.append(key if key.endswith("/") else key + "/")
    return keys


def _file_conditions(
    dialect: str,
    account_id: str,
    keys: Sequence[str],
    parent_uri: str | None,
    context_type: str | None,
    occurred_start: datetime | None,
    occurred_end: datetime | None,
    metadata_equals: dict[str, Any] | None,
) -> list[Any]:
    """The WHERE clauses of ``query_files`` / ``select_file_uris`` (prefixes are re-checked in Python: SQLite's
    LIKE ignores ASCII case)."""
    conditions: list[Any] = [NodeRow.account_id == account_id, NodeRow.is_dir.is_(False)]
    if context_type is not None:
        conditions.append(NodeRow.context_type == context_type)
    if keys:
        conditions.append(or_(*(NodeRow.uri_key.startswith(k, autoescape=True) for k in keys)))
    if parent_uri is not None:
        conditions.append(NodeRow.parent_uri == str(ContextURI.parse(parent_uri).as_dir()))
    when = func.coalesce(NodeRow.occurred_at, NodeRow.created_at)
    if occurred_start is not None:
        conditions.append(when >= occurred_start)
    if occurred_end is not None:
        conditions.append(when < occurred_end)
    for key, wanted in (metadata_equals or {}).items():
        values = wanted if isinstance(wanted, list) else [wanted]
        conditions.append(dialects.json_key_matches(dialect, NodeRow.meta_json, key, values))
    return conditions


def _sequence_key(account_id: str, parent_uri: str) -> str:
    """The ``meta`` key of a directory's child-number counter (hashed: keys are at most 128 characters)."""
    return "seq:" + hashlib.sha1(f"{account_id}\x1f{ContextURI.parse(parent_uri).as_dir()}".encode()).hexdigest()
