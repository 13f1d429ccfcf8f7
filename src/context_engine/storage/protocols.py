"""Store protocols (DESIGN.md §3). Adapters implement these; nothing here names a vendor type.

Every method is scoped by ``account_id`` (the tenant): an adapter never returns another account's data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from context_engine.schema.nodes import Level, NodeHead, NodeRecord, Relation, VectorFilter, VectorHit, VectorRecord
from context_engine.schema.uri import ContextURI
from context_engine.storage.changes import AccountState, IndexDelta, VectorMatrix
from context_engine.storage.journal import JournalEntry

if TYPE_CHECKING:
    from context_engine.schema.context import RequestContext
    from context_engine.schema.knowledge import ToolInvocation
    from context_engine.storage.metadata.audit import (
        HintCatchUp,
        HintChange,
        HintDoc,
        HintState,
        HintTerm,
        LedgerEntry,
    )
    from context_engine.storage.metadata.keys import ApiKeyInfo


@runtime_checkable
class ContentStore(Protocol):
    """``ContextFS``: the L0/L1/L2 text of each node. Writes are atomic per file (write, then rename)."""

    def write_levels(self, account_id: str, uri: str, levels: dict[Level, str | None]) -> None:
        """Write the given levels of one node; a ``None`` value removes that level. Creates the node if needed."""
        ...

    def read_level(self, account_id: str, uri: str, level: Level) -> str | None:
        """The text of one level, or ``None`` when the node or that level does not exist."""
        ...

    def delete(self, account_id: str, uri: str) -> None:
        """Remove a node and its whole subtree. Missing nodes are ignored."""
        ...

    def move(self, account_id: str, src_uri: str, dst_uri: str) -> None:
        """Move a node (and its subtree) to a new URI whose parent exists or is created."""
        ...

    # the write protocol's undo records (storage/journal.py): a journaled change can be rolled back after a crash
    def stash(self, journal_id: str, account_id: str, uri: str) -> None:
        """Before one node's levels are overwritten: keep their current state under ``journal_id``."""
        ...

    def delete_journaled(self, journal_id: str, account_id: str, uri: str) -> None:
        """Delete a node and its subtree so that :meth:`rollback` can bring them back until :meth:`discard`."""
        ...

    def move_journaled(self, journal_id: str, account_id: str, src_uri: str, dst_uri: str) -> None:
        """:meth:`move`, recorded so that :meth:`rollback` can move it back."""
        ...

    def rollback(self, journal_id: str) -> None:
        """Undo every journaled change of ``journal_id`` (newest first), then forget them. Idempotent."""
        ...

    def discard(self, journal_id: str) -> None:
        """Forget the undo records of ``journal_id`` (its write committed). Idempotent."""
        ...

    def journal_ids(self) -> list[str]:
        """Journal ids that still have undo records (normally none): O(leftovers)."""
        ...

    def node_uris(self, account_id: str) -> list[str]:
        """Every node of the account that has content, as URIs (directories end with ``/``): a full walk."""
        ...

    def account_ids(self) -> list[str]:
        """The accounts that have content (may include an account whose content was all removed), sorted."""
        ...

    # the deployment's identity: which metadata database this content belongs to (docs/deployment.md)
    def read_stamp(self) -> str | None:
        """The identity of the metadata database this content store was first opened with, or ``None``."""
        ...

    def write_stamp(self, store_id: str) -> None:
        """Record ``store_id`` (the metadata database's identity) as this content store's owner."""
        ...


@runtime_checkable
class NodeStore(Protocol):
    """The node tree (DESIGN.md §3): upserts, reads, listings, deletes and index status of nodes, by URI."""

    def upsert_nodes(self, nodes: Sequence[NodeRecord]) -> None: ...

    def get_node(self, account_id: str, uri: str | ContextURI) -> NodeRecord | None:
        """Lookup by URI with or without the trailing slash (a parsed URI is not parsed again)."""
        ...

    def get_nodes(self, account_id: str, uris: Iterable[str]) -> dict[str, NodeRecord]:
        """Batch lookup keyed by the canonical URI; missing URIs are absent."""
        ...

    def list_children(self, account_id: str, parent_uri: str) -> list[NodeRecord]:
        """Direct children of a directory, ordered by URI."""
        ...

    def list_subtree(self, account_id: str, uri: str) -> list[NodeRecord]:
        """The node and every descendant, ordered by URI."""
        ...

    def list_space_roots(self, account_id: str, scope: str) -> list[NodeRecord]:
        """The space roots (``ctx://<scope>/<space>/``) of ``user`` or ``agent`` in the account, ordered by URI."""
        ...

    def list_all_nodes(self, account_id: str) -> list[NodeRecord]:
        """Every node of the account, ordered by URI."""
        ...

    def delete_nodes(self, account_id: str, uris: Sequence[str]) -> None: ...

    def set_index_status(self, account_id: str, uris: Sequence[str], status: str) -> None: ...

    def pending_nodes(self, account_id: str | None = None) -> list[NodeRecord]: ...

    def count_nodes(self, account_id: str | None = None) -> dict[str, int]:
        """Counts by kind: ``nodes``, ``files``, ``directories``, ``pending``."""
        ...

    def accounts(self) -> list[str]: ...

    # memories (issue 11)
    def last_child_uri(self, account_id: str, parent_uri: str) -> str | None:
        """The greatest child URI of a directory (code-point order), or ``None``; one indexed query."""
        ...

    def count_children(self, account_id: str, parent_uri: str) -> int: ...

    def children_window(self, account_id: str, parent_uri: str, each: int) -> tuple[list[NodeRecord], int]:
        """All children when at most ``2 * each``, else the first and last ``each`` by URI; and the total."""
        ...


@runtime_checkable
class NodeLedger(Protocol):
    """What the write path keeps beside the tree: child sequence numbers, file lookups by hash and by
    narrowing, versions and relations; and the narrow node read of a search's hydration (``get_node_heads``)."""

    def get_node_heads(self, account_id: str, uris: Iterable[str]) -> dict[str, NodeHead]:
        """``NodeStore.get_nodes`` reduced to the columns a search reads (:class:`NodeHead`): its hydration."""
        ...

    def reserve_sequence(self, account_id: str, parent_uri: str, count: int, floor: int) -> int:
        """Atomically reserve ``count`` consecutive child numbers of a directory; returns the first."""
        ...

    def release_sequence(self, account_id: str, parent_uri: str, start: int, count: int) -> None:
        """Give back a failed batch's numbers when no later reservation followed."""
        ...

    def find_by_hash(
        self, account_id: str, content_hashes: Sequence[str], *, uri_prefix: str, context_type: str = "memory"
    ) -> dict[str, NodeRecord]:
        """Files under ``uri_prefix`` whose ``content_hash`` is one of ``content_hashes``, keyed by hash."""
        ...

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
        """Files under prefixes narrowed by type, ``coalesce(occurred_at, created_at)`` and metadata; paged."""
        ...

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
        """``(uri, owner_space)`` of the files ``query_files`` selects (two columns read); ``occurred_windows``:
        ``[start, end)`` ranges of ``coalesce(occurred_at, created_at)``, any of which a file must fall in."""
        ...

    def add_version(
        self,
        account_id: str,
        uri: str,
        version: int,
        text: str,
        created_at: datetime,
        replaced_at: datetime | None = None,
    ) -> None: ...

    def get_versions(self, account_id: str, uri: str) -> list[dict[str, Any]]:
        """Earlier versions of a memory, oldest first."""
        ...

    # relations
    def add_relations(self, account_id: str, relations: Sequence[Relation]) -> None: ...

    def get_relations(self, account_id: str, from_uri: str, limit: int | None = None) -> list[Relation]: ...


@runtime_checkable
class VectorRowStore(Protocol):
    """The vector rows kept for exact search and rebuilds, and the change feed of the derived indexes
    (docs/derived_indexes.md): account generations (with their tokens), ``changes_since`` and wholesale loads."""

    # vectors (exact search, reindex)
    def put_vectors(self, records: Sequence[VectorRecord], *, bulk: bool = False) -> None:
        """Insert or replace vector rows by ``id``; ``bulk``: readers reload instead of applying the rows."""
        ...

    def delete_vectors(self, ids: Sequence[str]) -> None: ...

    def vector_ids_for(self, account_id: str, uris: Sequence[str]) -> list[str]:
        """Ids of every vector row whose ``uri`` is one of ``uris``."""
        ...

    def get_vectors(self, account_id: str, uris: Sequence[str]) -> list[VectorRecord]:
        """Every vector row whose ``uri`` is one of ``uris``, ordered by ``(uri, level, chunk_index)``."""
        ...

    def iter_vectors(self, account_id: str | None = None, batch_size: int = 2048) -> Iterable[list[VectorRecord]]: ...

    def count_vectors(self, account_id: str | None = None) -> int: ...

    # the derived-index feed (storage/changes.py, docs/derived_indexes.md)
    def account_state(self, account_id: str) -> AccountState:
        """The committed account generation and its random token, read together (one primary-key read): every
        vector write or delete of the account bumps the generation and draws a new token in its transaction."""
        ...

    def account_generation(self, account_id: str) -> int:
        """The committed account generation alone (:meth:`account_state`'s number)."""
        ...

    def changes_since(
        self,
        account_id: str,
        generation: int,
        *,
        token: str | None = None,
        levels: Sequence[int] | None = None,
        max_changes: int = 50_000,
    ) -> IndexDelta:
        """The rows changed after the state ``(generation, token)`` and the state they bring to, in one snapshot;
        ``reload`` when the store's history no longer holds that state (pruned, ahead, or another token)."""
        ...

    def load_vector_matrix(
        self, account_id: str, *, levels: Sequence[int] | None = None, with_vectors: bool = True
    ) -> VectorMatrix:
        """Every committed row of the account (at ``levels``) as columns, with their generation and its token, in
        one snapshot."""
        ...

    def get_vector_texts(self, account_id: str, ids: Sequence[str]) -> dict[str, tuple[str, str, str]]:
        """``(text, breadcrumb, context)`` of the account's rows with these ids; missing ids are absent."""
        ...

    def get_vector_rows(self, account_id: str, ids: Sequence[str]) -> dict[str, VectorRecord]:
        """The account's rows with these ids; missing ids are absent."""
        ...


@runtime_checkable
class WriteJournal(Protocol):
    """The write journal and the writer locks (docs/security.md, "Crash safety and concurrent writers")."""

    # the intent journal (storage/journal.py)
    def write_turn(self, timeout_s: float) -> Any:
        """A context manager, entered outside any transaction: wait (first come, first served, at most ``timeout_s``)
        for this store's write turn and hold it for the block; ``WRT-5032`` (retryable) when it did not come."""
        ...

    def lock_writes(self) -> None:
        """Inside a write transaction: serialise it with every other journaled write."""
        ...

    def journal_open(self, account_id: str, op: str, owner: str | None, uris: Sequence[str] = ()) -> int:
        """Commit a ``prepared`` intent row (outside any transaction) and return its id."""
        ...

    def journal_commit(self, journal_id: int, uris: Sequence[str], sync_ids: Sequence[str]) -> None:
        """Inside the write's transaction: mark the row ``committed``."""
        ...

    def journal_release(self, journal_id: int) -> None: ...

    def journal_delete(self, journal_id: int) -> None: ...

    def journal_entries(self) -> list[JournalEntry]:
        """Every journal row, oldest first."""
        ...

    # writer liveness and the index sync lock (ingest/journal.py), visible to every process of the database
    def hold_writer_lock(self, token: str) -> None:
        """Hold, for this process's life, the lock showing that the writer ``token`` is alive. Idempotent."""
        ...

    def writer_alive(self, token: str) -> bool:
        """Whether the writer ``token`` holds its lock, in this process or another."""
        ...

    def release_writer_lock(self, token: str) -> None:
        """Drop the lock of ``token``. Idempotent."""
        ...

    def index_sync_lock(self, account_id: str) -> Any:
        """A context manager serialising vector-index syncs of ``account_id`` across processes."""
        ...


@runtime_checkable
class MetaStore(Protocol):
    """Small key-value settings of the database (``meta``): the model stamp, the derived files' database
    identity, hint generations."""

    # index stamp
    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def ensure_meta(self, key: str, value: str) -> str:
        """Set ``key`` to ``value`` unless it is set; returns the stored value (the first writer wins)."""
        ...


@runtime_checkable
class MetadataStore(NodeStore, NodeLedger, VectorRowStore, WriteJournal, MetaStore, Protocol):
    """Every role of the metadata store at once (what ``SqlMetadataStore`` implements): nodes, the node ledger,
    vector rows and the change feed, the write journal and writer locks, ``meta``. A collaborator that needs one
    role takes that role's protocol.

    ``transaction()`` groups writes so a failure leaves the store as it was.
    """

    def transaction(self) -> Any:
        """A context manager; writes inside it commit together or not at all."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class AuditStore(Protocol):
    """The audit trail of lookup_knowledge (tool invocations), the per-session ledger of documents already returned,
    and the rows of the hint index, in the metadata database (``storage/metadata/audit.py``).

    Attributes:
        read_only: a read-only home: invocations and ledger entries are not written; everything else reads.
    """

    read_only: bool

    def record_invocation(
        self, row: ToolInvocation, *, ledger_keys: Sequence[str] = (), ledger_ttl_s: int = 0
    ) -> dict[str, LedgerEntry]:
        """Insert one invocation and mark ``ledger_keys`` as retrieved in its session, in one transaction."""
        ...

    def record_invocations(self, rows: Sequence[ToolInvocation]) -> None:
        """Insert ``rows`` in one transaction: all of them, or none on a failure (``WRT-5001``)."""
        ...

    def get_invocation(
        self, account_id: str, invocation_id: str, *, principal: str | None = None
    ) -> ToolInvocation | None:
        """The invocation with this id in the account (made by ``principal`` unless it is ``None``), or ``None``."""
        ...

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
        """Invocations of the account, optionally of one principal, session and/or tool, in a time window."""
        ...

    def seen_documents(
        self, account_id: str, principal: str, session_id: str, doc_keys: Sequence[str], now: datetime
    ) -> dict[str, LedgerEntry]:
        """Entries of ``doc_keys`` already retrieved in the principal's session and not expired at ``now``."""
        ...

    def purge_expired(self, now: datetime) -> int:
        """Delete every ledger row expired at ``now`` (all accounts); returns how many."""
        ...

    def hint_state(self, account_id: str) -> HintState:
        """The account's hint index ``(generation, version, token)`` in one committed snapshot; ``(0, None, None)``
        before it was first built."""
        ...

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
        """Drop the hint rows of ``uris`` (or of the account with ``clear_all``), insert ``docs`` and ``terms``, bump
        the generation; returns the generations before and after and the term rows removed."""
        ...

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once the calling thread's open transaction commits (at once without one; never after a
        rollback)."""
        ...

    def load_hint_index(self, account_id: str) -> tuple[int, str | None, list[HintDoc], list[HintTerm]]:
        """``(generation, version, docs, terms)`` of the account, read in one committed snapshot."""
        ...

    def hint_token(self, account_id: str, generation: int) -> str | None:
        """The change log's token of the account's ``generation``, or ``None`` when no logged row holds it."""
        ...

    def hint_changes_since(self, account_id: str, generation: int, token: str | None, most: int) -> HintCatchUp | None:
        """The hint index's changes after ``generation`` (whose token is ``token``; at most ``most`` document
        changes), in one committed snapshot; ``None`` when its change log cannot bring that state along (a reload
        is needed)."""
        ...


@runtime_checkable
class KeyStore(Protocol):
    """The API keys of the HTTP interface, in the metadata database (``storage/metadata/keys.py``)."""

    def create(self, ctx: RequestContext, name: str = "") -> tuple[ApiKeyInfo, str]:
        """Create a key acting as ``ctx``; returns it and its token (shown once)."""
        ...

    def list(self, account_id: str | None = None, *, include_revoked: bool = False) -> list[ApiKeyInfo]:
        """Keys (of one account, or all), oldest first, then by key id."""
        ...

    def revoke(self, key_id: str) -> ApiKeyInfo:
        """Revoke a key (idempotent)."""
        ...

    def active_count(self) -> int:
        """How many keys are not revoked (all accounts)."""
        ...

    def cached(self, token: str) -> ApiKeyInfo | None:
        """The key of ``token`` if it was verified recently, else ``None`` (no database read)."""
        ...

    def authenticate(self, token: str) -> ApiKeyInfo | None:
        """The active key this token belongs to, or ``None``."""
        ...


@runtime_checkable
class VectorIndex(Protocol):
    """The vector index: cosine-similarity search with a mandatory pre-filter (DESIGN §3)."""

    name: str

    def upsert(self, records: Sequence[VectorRecord]) -> None:
        """Insert or replace records by ``id``."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Delete records by ``id``; unknown ids are ignored."""
        ...

    def search(self, vector: np.ndarray, top_k: int, flt: VectorFilter) -> list[VectorHit]:
        """The ``top_k`` records passing ``flt`` nearest to ``vector`` (L2-normalised, shape ``(dim,)``).

        Ordered by score descending, ties by ``id`` ascending. Score: cosine similarity.

        Raises:
            ContextEngineError: ``RET-5001`` (retryable) when the backend fails.
        """
        ...

    def count(self) -> int: ...

    def optimize(self) -> None:
        """Compaction and ANN-index maintenance; safe to call any time."""
        ...

    def check(self) -> None:
        """Check that the index's own files are whole (an index with none checks nothing).

        Raises:
            ContextEngineError: ``IDX-5031`` when they are damaged (missing, truncated, unreadable).
        """
        ...

    def close(self) -> None:
        """Release what the index holds (a server connection, background work); idempotent."""
        ...

    def ids(self, account_id: str) -> list[str]:
        """Every record id of ``account_id`` the index holds, sorted (``reindex --gc`` compares them with the
        metadata store's vector rows to remove the orphans).

        Raises:
            ContextEngineError: ``RET-5001`` (retryable) when the backend fails.
        """
        ...

    def drop(self) -> bool:
        """Remove what the index stores without reading it (``reindex --full`` of a damaged index, which then
        writes every account again); whether anything was removed. ``False`` from an index that stores nothing of
        its own (the matrix and exact indexes: their rows are the metadata store's), which cannot be dropped.

        A handle that holds the store open (LanceDB's table) is not used again after it: the engine's
        :class:`~context_engine.storage.vector.lazy.LazyVectorIndex` forgets it and opens a new one.

        Raises:
            ContextEngineError: ``WRT-5001`` when the store cannot be removed.
        """
        ...

    def read_stamp(self) -> str | None:
        """The identity of the deployment (metadata database) a vector store shared by deployments belongs to
        (Milvus: a property of its collection); ``None`` when not stamped yet, and always from an index that is a
        home's own (LanceDB, matrix, exact). Opens nothing a lazily opened index has not opened.

        Raises:
            ContextEngineError: ``RET-5001`` (retryable) when the backend fails.
        """
        ...

    def write_stamp(self, store_id: str) -> None:
        """Record ``store_id`` as the store's owner; a home's own index records nothing (:meth:`read_stamp`).

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when the backend fails.
        """
        ...


@runtime_checkable
class Embedder(Protocol):
    """Text to L2-normalised float32 vectors (DESIGN §14)."""

    model_name: str
    dim: int

    def embed_documents(self, texts: Sequence[str], *, progress: Any = None) -> np.ndarray:
        """Shape ``(len(texts), dim)``, float32, rows of unit L2 norm, in input order."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Shape ``(dim,)``, float32, unit L2 norm."""
        ...


def utcnow() -> datetime:
    from datetime import UTC

    return datetime.now(UTC)
