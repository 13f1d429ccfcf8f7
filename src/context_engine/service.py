"""``ContextEngineService``: the engine's one facade (DESIGN.md §2, §10); ``engine_factory.build_engine`` opens it.

It opens the stores and the embedder, and wires the rest from engine_parts.py; its methods check the request once
(rights, read-only home, text) and delegate to the write path, the pipelines, browse and similar_search.

Every tenant-bound method acts for the caller its ``ctx`` names. A call without one acts for the engine's
``default_context``, bound when the engine is opened: :data:`DEFAULT_CONTEXT` (the admin of account ``default``) for
the embedded Python API (``ContextEngineService(settings)``, ``ContextEngine.open(...)``), none for an engine opened
by :func:`context_engine.engine_factory.build_engine` for the CLI, HTTP, MCP and the eval, where a call without ``ctx``
is refused (``AUTH-4011``) instead of acting as an admin.
"""

from __future__ import annotations

import gc
import threading
import time
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Self

from context_engine.engine_parts import build_knowledge, build_memory_events, build_retrieval, calibrate, open_index
from context_engine.engine_parts import recover_writes as recover_writes_at_start
from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.ingest.journal import RecoveryReport, WriteJournal
from context_engine.ingest.loader import SourceDoc
from context_engine.ingest.memory import MemoryWriter
from context_engine.ingest.pipeline import GarbageReport, Progress, WritePipeline
from context_engine.ingest.requests import directory_conflicts, load_resources, skill_doc, text_doc
from context_engine.knowledge.compact import compact_lookup
from context_engine.knowledge.lookup import lookup_request
from context_engine.knowledge.search_audit import SearchAudit
from context_engine.knowledge.similar_search import SIMILAR_MAX_QUERY_CHARS as SIMILAR_MAX_QUERY_CHARS
from context_engine.knowledge.similar_search import SimilarSearch
from context_engine.observability.metrics import Metrics
from context_engine.providers.embedder import build_embedder
from context_engine.retrieval.browse import NodeBrowser
from context_engine.retrieval.compact import compact_search
from context_engine.retrieval.search_memory import new_request_id
from context_engine.schema.compact import LookupCompact, SearchMemoryCompact
from context_engine.schema.context import DEFAULT_CONTEXT, RequestContext
from context_engine.schema.knowledge import (
    EvidenceVerification,
    LookupRequest,
    LookupResult,
    SemanticMode,
    SessionTraceSummary,
    ToolInvocation,
)
from context_engine.schema.nodes import SKIPPED_FILES_LISTED, IngestReport, Level, NodeRecord
from context_engine.schema.query import (
    ReadMemoryRequest,
    ReadMemoryResponse,
    SearchMemoryRequest,
    SearchMemoryResponse,
)
from context_engine.schema.renames import renamed_argument
from context_engine.schema.text import require_valid_text
from context_engine.schema.uri import ContextURI, parse_uri
from context_engine.schema.views import NodeView, SimilarSearchResult
from context_engine.service_memory import MemoryMethods
from context_engine.settings import Settings, load_settings
from context_engine.storage.derived.child import ChildProcessBuilder
from context_engine.storage.derived_files import DerivedFiles
from context_engine.storage.factory import home_read_only, open_content, open_metadata
from context_engine.storage.health import (
    account_stats,
    derived_files_health,
    drop_unusable_derived_files,
    engine_problems,
    index_health,
    prepare_full_rebuild,
)
from context_engine.storage.keyword.bm25_index import BM25Index
from context_engine.storage.protocols import ContentStore, Embedder, MetadataStore, VectorIndex
from context_engine.storage.stamps import check_model_stamp, check_store_owner


class ContextEngineService(MemoryMethods):
    """Owns the stores, the embedder and the pipelines; every public method is tenant-bound by ``ctx``.

    ``default_context`` is the caller of a method called without ``ctx``: :data:`DEFAULT_CONTEXT` (the admin of
    account ``default``) unless told, the embedded use of one process on its own home; ``None`` (what
    :func:`~context_engine.engine_factory.build_engine` passes) makes ``ctx`` required, a call without it raising
    ``AUTH-4011``.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        content: ContentStore | None = None,
        metadata: MetadataStore | None = None,
        index: VectorIndex | None = None,
        embedder: Embedder | None = None,
        recover_writes: bool = True,
        default_context: RequestContext | None = DEFAULT_CONTEXT,
    ) -> None:
        self.settings = settings
        self.default_context = default_context
        #: whether :func:`context_engine.warm_up.warm_up` froze the objects alive (``gc.freeze``); :meth:`close` thaws
        self.gc_frozen = False
        home = settings.home_path
        # A read-only home (settings.read_only, or a home this process cannot write) serves reads: the open below
        # writes nothing (no migration, no stamp, no journal repair, no derived file), and writes fail with WRT-5001.
        self.read_only = home_read_only(settings)
        try:
            home.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID, f"cannot use {home} as the data directory: {err.strerror}"
            ) from err
        self.embedder = embedder or build_embedder(settings.embedding, home=home)
        # the model's relevance scale (every threshold is set on it) and the keyword section with its fusion weight
        self.similarity_scale, self.keyword_settings = calibrate(self.embedder, settings)
        self.metrics = Metrics()  # before the stores: their failure and retry hooks count into it
        # the metadata database first: when it cannot be reached (CFG-4001), nothing else has been created
        self.metadata = metadata or open_metadata(
            settings,
            on_failure=partial(self.metrics.count_storage_failure, "metadata"),
            read_only=self.read_only,
        )
        try:
            self.content = content or open_content(
                settings, on_failure=partial(self.metrics.count_storage_failure, "content")
            )
            check_model_stamp(self.metadata, self.embedder, read_only=self.read_only)
            self.index = index or open_index(self)
            check_store_owner(self.metadata, self.content, self.index, read_only=self.read_only)
        except BaseException:  # e.g. S3 or Milvus unreachable (CFG-4001): release what was opened, then report it
            if metadata is None:
                self.metadata.close()
            raise
        self.journal = WriteJournal(self.metadata, self.content, self.index, crash_at=settings.ingest.crash_at)
        self.pipeline = WritePipeline(
            self.content, self.metadata, self.index, self.embedder, settings.ingest, journal=self.journal
        )
        self.memory_writer = MemoryWriter(
            self.pipeline, self.metadata, self.content, self.index, self.embedder, settings.memory, settings.ingest
        )
        # Derived indexes kept as files (docs/derived_indexes.md): a new process opens them instead of reloading.
        self.derived_files = (
            DerivedFiles(home / "derived", self.metadata, read_only=self.read_only)
            if settings.retrieval.derived_files
            else None
        )
        # A large account's wholesale load runs in a child process that writes its file, so this one never holds
        # the load's garbage (docs/derived_indexes.md). Not for a read-only home (no file is written), nor for a
        # metadata store given here (the child opens the one the settings name).
        build_rows = settings.retrieval.derived_build_process_rows
        self.derived_builder = (
            ChildProcessBuilder(settings, build_rows)
            if self.derived_files is not None and not self.read_only and metadata is None and build_rows > 0
            else None
        )
        # BM25 over the same records (DESIGN §14): opened from its file or loaded on its first search, then kept
        # current from the change log.
        self.keyword_index = BM25Index(
            settings.keyword, source=self.metadata, files=self.derived_files, builder=self.derived_builder
        )
        # the read side (engine_parts.py): lookup_knowledge's layer first, search_memory's calls are recorded by it
        self.audit, self.hint_index, self.knowledge, search_audit = build_knowledge(self)
        self.search_audit: SearchAudit | None = search_audit  # search_memory's rows (None: not recorded)
        (
            self.l0_matrix,
            self.l0_source,
            self.redactor,
            self.reader,
            self.search_pipeline,
            self.read_pipeline,
        ) = build_retrieval(self)
        self.memory_events = build_memory_events(self)  # ADD/UPDATE/DELETE, recorded inside each write's transaction
        if recover_writes:  # the startup check (off only for `reindex --check`, which reports what it would do)
            recover_writes_at_start(self.journal, read_only=self.read_only)

    # ------------------------------------------------------------------------------------------------ set-up
    @classmethod
    def open(cls, path_or_settings: str | Path | Settings | None = None, **kwargs: Any) -> ContextEngineService:
        """Open (or create) an engine at a data directory or from ``Settings``; ``None`` uses the defaults."""
        if isinstance(path_or_settings, Settings):
            return cls(path_or_settings, **kwargs)
        return cls(load_settings(path_or_settings), **kwargs)

    def close(self) -> None:
        """Release the stores. The engine can be reopened on the same directory."""
        if self.derived_builder is not None:
            self.derived_builder.close()  # stops the children still building a file
        self.search_pipeline.close()
        self.knowledge.recorder.close()  # writes the audit rows still queued (search_memory's)
        self.knowledge.search.close()  # the BM25 worker threads of hybrid lookups
        self.l0_source.close()
        self.l0_matrix.close()  # waits for derived files being written (they read the metadata store's identity)
        self.keyword_index.close()
        self.journal.close()
        self.index.close()  # Milvus: its connection; the embedded indexes hold nothing to release
        self.metadata.close()
        if self.gc_frozen:  # warm_up froze what was alive, this engine's structures among them: let them go
            self.gc_frozen = False
            gc.unfreeze()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _caller(self, ctx: RequestContext | None) -> RequestContext:
        """The caller of a tenant-bound call: ``ctx``, or the engine's ``default_context`` when the call names none.

        Raises:
            ContextEngineError: ``AUTH-4011`` when neither is set (an engine opened by ``build_engine`` for an
                interface: each call must name its caller, it never acts as an admin by default).
        """
        if ctx is not None:
            return ctx
        if self.default_context is None:
            raise ContextEngineError(
                ErrorCode.UNAUTHENTICATED,
                "no caller: this engine has no default context (opened by build_engine for an interface), so every "
                "call must pass ctx=RequestContext(...)",
                {"field": "ctx"},
            )
        return self.default_context

    # ------------------------------------------------------------------------------------------------ writes
    def _require_writable(self) -> None:
        """Refuse a write on a read-only home before it touches anything.

        Raises:
            ContextEngineError: ``WRT-5001`` (not retryable: the home stays read-only until it is opened writable).
        """
        if self.read_only:
            raise ContextEngineError(
                ErrorCode.STORAGE_FAILED,
                f"the data directory {self.settings.home_path} is read-only (read_only is set, or this process may "
                "not write it): it serves searches and reads; writes need a writable home",
                {"read_only": True, "home": str(self.settings.home_path)},
            )

    def _writable(self, uri: str | ContextURI, ctx: RequestContext) -> ContextURI:
        self._require_writable()
        u = parse_uri(uri)
        if not ctx.can_write_uri(u):
            raise ContextEngineError(ErrorCode.URI_FORBIDDEN, "not allowed to write there", {"uri": str(u)})
        if u.context_type is None and u.segments:
            raise ContextEngineError(
                ErrorCode.URI_INVALID,
                f"{u} is outside a context-type root: use ctx://resources/..., ctx://user/<space>/memories/... "
                "or ctx://agent/<space>/skills/...",
            )
        return u

    def add_resource(
        self,
        path: str | Path,
        target_uri: str = "ctx://resources/",
        ctx: RequestContext | None = None,
        *,
        strict: bool = False,
        progress: Progress | None = None,
        follow_symlinks: bool | None = None,
        cancel: threading.Event | None = None,
    ) -> IngestReport:
        """Add a file or a directory of ``.md``/``.markdown``/``.txt`` files below ``target_uri`` (DESIGN §4).

        A single file that fails validation raises; in a directory, files that fail are counted in ``failed`` (with
        the code and reason in ``failures``: invalid, too large, a URI naming an existing directory ``WRT-4091``, more
        chunks than ``ingest.max_chunks_per_document`` ``WRT-4132``) and the others are written, unless ``strict``
        makes any failure raise first. Entries not read (other types, entries that are not regular files, names that
        are no valid URI segment, symbolic links leading outside the folder unless ``follow_symlinks``, default
        ``ingest.follow_symlinks_outside_root``) are counted in ``skipped`` and listed in ``skipped_paths``. Paths are
        relative to the folder, bytes of a name that are not UTF-8 shown as ``\\xNN`` (``loader.shown_path``).
        Nothing is written before every file has been validated, parsed and embedded. ``cancel``, once set (by the
        HTTP route when its client disconnects), stops the write between embedding batches (``WRT-4991``).

        Raises:
            ContextEngineError: ``WRT-4001`` invalid URI, ``WRT-4041`` missing path, ``WRT-4151`` unsupported type,
                ``WRT-4131`` too large, ``WRT-4132`` more chunks than ``ingest.max_chunks_per_document``, ``WRT-4221``
                empty/binary/invalid UTF-8, ``RET-4032`` not writable, ``WRT-4991`` cancelled, ``WRT-5032`` no write
                turn within ``ingest.write_wait_s`` (retryable).
        """
        ctx = self._caller(ctx)
        target = self._writable(target_uri, ctx)
        if target.context_type != "resource":
            raise ContextEngineError(ErrorCode.URI_INVALID, "resources go under ctx://resources/")
        found = load_resources(
            Path(path).expanduser(), target, self.settings.ingest, strict=strict, follow_symlinks=follow_symlinks
        )
        # a folder add that is not strict: a file whose URI names a directory or that makes too many chunks is one
        # more failure (listed), not the failure of the whole add; the write still checks both (it raises)
        refused: list[tuple[SourceDoc, ContextEngineError]] | None = None if found.all_or_nothing else []
        if refused is not None and found.docs:
            existing = self.metadata.get_nodes(ctx.account_id, [str(d.uri) for d in found.docs])
            found.refuse(directory_conflicts(found.docs, existing))
        report = (
            self.pipeline.write_documents(ctx.account_id, found.docs, progress=progress, cancel=cancel, refused=refused)
            if found.docs
            else IngestReport()
        )
        found.refuse(refused or [])
        report.skipped = len(found.skipped)
        report.skipped_paths = [{"path": rel, "reason": why} for rel, why in found.skipped[:SKIPPED_FILES_LISTED]]
        report.failed = len(found.failures)
        report.failures = found.failures
        return report

    def add_text(
        self,
        text: str,
        uri: str | ContextURI,
        ctx: RequestContext | None = None,
        *,
        kind: str = "markdown",
        title_hint: str | None = None,
        cancel: threading.Event | None = None,
    ) -> IngestReport:
        """Add one document given as text at ``uri`` (any context type).

        ``title_hint`` is the title used when the text has no H1 (default: the file name without extension).
        ``cancel`` as in :meth:`add_resource`.
        """
        ctx = self._caller(ctx)
        u = self._writable(uri, ctx)
        if u.is_dir:
            raise ContextEngineError(ErrorCode.URI_INVALID, f"{u} names a directory; give a file URI")
        doc = text_doc(u, text, kind, title_hint, self.settings.ingest)
        return self.pipeline.write_documents(ctx.account_id, [doc], cancel=cancel)

    def add_skill(
        self,
        name: str,
        description: str,
        content: str,
        ctx: RequestContext | None = None,
        *,
        category: str | None = None,
    ) -> IngestReport:
        """Store a skill at ``ctx://agent/<agent_space>/skills/[<category>/]<name>.md``; L0 is ``name: description``.

        Raises:
            ContextEngineError: ``WRT-4002`` no agent space, empty or blank name or description; ``WRT-4001`` bad
                name or category (e.g. containing ``/``).
        """
        ctx = self._caller(ctx)
        space = ctx.agent_space or ("default" if ctx.is_admin else None)
        if space is None:
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, "the request context has no agent_space")
        if not name.strip() or name.strip() == ".md":
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, "a skill needs a name", {"field": "name"})
        if not description.strip():
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, "a skill needs a description")
        base = ContextURI.parse(f"ctx://agent/{space}/skills/")
        if category:
            base = base.child(category, is_dir=True)
        target = self._writable(base.child(name if name.endswith(".md") else f"{name}.md"), ctx)
        doc, abstract = skill_doc(target, name, description, content, self.settings.ingest)
        return self.pipeline.write_documents(ctx.account_id, [doc], abstracts={str(target): abstract})

    def delete(self, uri: str, ctx: RequestContext | None = None, *, recursive: bool = False) -> IngestReport:
        """Delete a node (a non-empty directory only with ``recursive``). Index records go first (DESIGN §3).

        Raises:
            ContextEngineError: ``RET-4032`` invisible or missing (same body); ``WRT-4091`` non-empty directory.
        """
        ctx = self._caller(ctx)
        u = self._writable(uri, ctx)
        self._visible_node(u, ctx)
        return self.pipeline.delete(ctx.account_id, u, recursive=recursive)

    def move(self, src: str, dst: str, ctx: RequestContext | None = None) -> IngestReport:
        """Move a node and its subtree to ``dst`` (or into ``dst`` when it is an existing directory)."""
        ctx = self._caller(ctx)
        s = self._writable(src, ctx)
        d = self._writable(dst, ctx)
        self._visible_node(s, ctx)
        return self.pipeline.move(ctx.account_id, s, d)

    def reindex(
        self, ctx: RequestContext | None = None, *, full: bool = False, progress: Progress | None = None
    ) -> IngestReport:
        """Finish or undo interrupted writes (the journal), then push pending (or, with ``full``, all) vectors of the
        caller's account into the vector index.

        With ``full``, a vector index found damaged (:meth:`index_health`: files missing, truncated or not readable)
        is dropped without being opened and rebuilt from the metadata database, for every account (the table is
        shared); so is one found empty while the metadata database holds vectors (its folder was deleted). Derived
        files that would not be used (damaged, another format) are removed: the next search writes them anew.
        """
        ctx = self._caller(ctx)
        self._require_writable()
        account: str | None = ctx.account_id
        if full and prepare_full_rebuild(self.index, self.index_health()):
            account = None  # a damaged index was dropped, or a missing one: every account (the table is shared)
        report = self.pipeline.reindex(account, full=full, progress=progress)
        if full and self.derived_files is not None:
            drop_unusable_derived_files(self.derived_files, [account] if account else self.metadata.accounts())
        return report

    def index_health(self) -> dict[str, Any]:
        """Whether the vector index can serve: ``{"status", "records", "problem"}``.

        ``status`` is ``ok``; ``damaged`` (its files are missing, truncated or unreadable: ``IDX-5031``, and
        ``records`` is ``None`` rather than the stale count its manifest still claims); ``missing`` (it holds no
        record while the metadata database holds vectors: its folder was deleted and recreated empty); or
        ``unavailable`` (another failure, e.g. a vector server that does not answer). ``problem`` says what and how to
        fix it. Opens the index if it was not yet (LanceDB: reads one int32 column of every data file).
        """
        return index_health(self.index, self.metadata)

    def derived_files_health(self, account_id: str) -> dict[str, str]:
        """Per kind (``l0``, ``bm25``), the state of the account's derived file: ``absent``, ``ok``, or why it is not
        used (damaged: it does not parse or fails its CRC-32; another format or database). Such a file is a cache:
        the account's next search ignores it, loads from the metadata database and writes it anew. Reads the files."""
        return derived_files_health(self.derived_files, account_id)

    def health(self) -> list[str]:
        """What degrades this engine now (``/readyz``), each a sentence saying how to fix it; ``[]`` when nothing
        does: the vector index (:meth:`index_health`) and the derived files this process found unusable and has not
        replaced yet."""
        return engine_problems(self.index_health(), self.derived_files)

    def check_writes(self, ctx: RequestContext | None = None, *, repair: bool = False) -> RecoveryReport:
        """``reindex --check``: the leftovers of interrupted writes (every account's; the journal is per home),
        repaired with ``repair``. O(leftovers).

        Raises:
            ContextEngineError: ``RET-4032`` for a caller that is not an admin; ``WRT-5001`` when a store fails.
        """
        ctx = self._caller(ctx)
        if not ctx.is_admin:
            raise ContextEngineError(ErrorCode.URI_FORBIDDEN, "checking the write journal needs the admin role")
        if repair:
            self._require_writable()
        return self.pipeline.check(repair=repair)

    def collect_garbage(self, ctx: RequestContext | None = None) -> GarbageReport:
        """``reindex --gc``: remove the content objects and vector-index rows that no node owns, in every account
        (after recovering the write journal). O(store).

        Raises:
            ContextEngineError: ``RET-4032`` for a caller that is not an admin; ``WRT-5001`` when a store fails.
        """
        ctx = self._caller(ctx)
        if not ctx.is_admin:
            raise ContextEngineError(ErrorCode.URI_FORBIDDEN, "collecting garbage needs the admin role")
        self._require_writable()
        return self.pipeline.collect_garbage()

    # ------------------------------------------------------------------------------------------------ reads
    def _browser(self) -> NodeBrowser:
        """The browse reads over the engine's current stores (retrieval/browse.py), built per call: cheap, and a store
        swapped on a live engine (tests) is the one read."""
        return NodeBrowser(self.metadata, self.content, self.redactor)

    def _visible_node(self, uri: ContextURI, ctx: RequestContext) -> NodeRecord:
        """The node at ``uri`` if the caller may see it; the same ``RET-4032`` otherwise (no existence leak)."""
        return self._browser().visible_node(uri, ctx)

    def stat(self, uri: str, ctx: RequestContext | None = None) -> NodeRecord:
        """One node's metadata row (times, category, owner space, version, metadata), after the same ACL check as a
        read. No content is read.

        Raises:
            ContextEngineError: ``RET-4032`` invisible or missing (one body for both); ``RET-4001`` malformed URI.
        """
        ctx = self._caller(ctx)
        return self._browser().stat(uri, ctx)

    def ls(self, uri: str = "ctx://resources/", ctx: RequestContext | None = None) -> list[NodeView]:
        """Children of a directory with their abstracts, ordered by URI. An absent scope root lists as empty;
        ``ctx://user/`` and ``ctx://agent/`` list the space roots the caller sees."""
        ctx = self._caller(ctx)
        return self._browser().ls(uri, ctx)

    def tree(
        self, uri: str = "ctx://resources/", ctx: RequestContext | None = None, *, max_depth: int = 3
    ) -> NodeView | None:
        """The subtree at ``uri`` down to ``max_depth`` levels, each node with its abstract. ``ctx://user/`` and
        ``ctx://agent/`` give a directory view of the scope (no abstract) over the space roots the caller sees;
        ``None`` when it sees none."""
        ctx = self._caller(ctx)
        return self._browser().tree(uri, ctx, max_depth=max_depth)

    def read(self, uri: str, level: Level | str = Level.L1, ctx: RequestContext | None = None) -> str:
        """The text of one level of a node. ACL is checked before any content is touched.

        Raises:
            ContextEngineError: ``RET-4032`` invisible or missing; ``RET-4004`` L2 of a directory (directories have
                only L0 and L1) or a level the node lacks.
        """
        ctx = self._caller(ctx)
        return self._browser().read(uri, level, ctx)

    def similar_search(
        self,
        query: str,
        ctx: RequestContext | None = None,
        *,
        top_k: int = 10,
        level: int = 2,
        mode: SemanticMode | None = None,
        context_types: list[str] | None = None,
        categories: list[str] | None = None,
        target_uri: str | None = None,
    ) -> SimilarSearchResult:
        """Raw semantic search, one result per document: no planner, no hint layer, no session dedup, no audit row.

        Backs ``POST /api/search/similar`` (live evaluation, seed 001 §9). ``level=2`` searches L2 chunks (the
        corpus of lookup_knowledge; ``context_types`` defaults to ``knowledge.context_types``), ``level=0`` the
        nodes' abstracts (the corpus of search_memory's first round). The semantic layer's modes apply (``auto``:
        the configured index, exact search on error). Chunks are over-fetched and collapsed to their best chunk per
        document; pending, deleted and invisible nodes are never returned. Returned texts are redacted as every
        text that leaves the engine (docs/security.md).

        Raises:
            ContextEngineError: ``RET-4001`` empty query, a query over ``SIMILAR_MAX_QUERY_CHARS`` (4096) characters
                or a level other than 0 or 2, ``RET-4002`` top_k outside
                1..1000, ``RET-4031`` target not visible, ``RET-4001`` malformed target URI (``ctx://``: no
                target, everything the caller sees). A failing vector search
                is not an error: the result is empty, ``retryable`` and carries a ``RET-5001`` warning.
        """
        ctx = self._caller(ctx)
        return SimilarSearch(
            self.settings.knowledge, self.knowledge.search, self.embedder, self.metadata, self.redactor
        ).search(
            query,
            ctx,
            top_k=top_k,
            level=level,
            mode=mode,
            context_types=context_types,
            categories=categories,
            target_uri=target_uri,
        )

    # ------------------------------------------------------------------------------------------------ lookup_knowledge
    def lookup_knowledge(
        self,
        query: str | LookupRequest,
        ctx: RequestContext | None = None,
        *,
        session_id: str | None = None,
        top_k: int | None = None,
        mode: SemanticMode | None = None,
        min_similarity: float | None = None,
        target_uri: str | None = None,
        context_token_budget: int | None = None,
    ) -> LookupResult:
        """Find the runbook sections for an alert or symptom, say how sure, dedup per session, audit (DESIGN §7).

        Either pass a :class:`LookupRequest` or the query and keyword options (``None`` takes the configured
        default). Evidence blocks are ordered by ``rank_score`` (similarity plus the hint boost) descending; each
        carries ``score`` (distance-like), ``raw_score`` (cosine similarity) and a relevance level. One
        ``tool_invocation`` row is written per call (``result.invocation_id``). Always the full result, whatever the
        request's ``response_format``: :meth:`lookup_knowledge_compact` answers the compact form.

        Raises:
            ContextEngineError: ``RET-4001`` empty query or bad session id, ``RET-4002`` top_k outside 1..50,
                ``RET-4003`` invalid min_similarity, ``RET-4031`` target not visible. A failing vector search is not
                an error: the result is empty with ``evidence_status='search_failed'`` and a ``RET-5001`` warning.
        """
        ctx = self._caller(ctx)
        request = (
            query
            if isinstance(query, LookupRequest)
            else lookup_request(
                query,
                session_id=session_id,
                top_k=top_k,
                mode=mode,
                min_similarity=min_similarity,
                target_uri=target_uri,
                context_token_budget=context_token_budget,
            )
        )
        require_valid_text(request, ErrorCode.QUERY_INVALID)  # a lone surrogate: RET-4001, not a crash deep inside
        result = self.knowledge.lookup(request, ctx)
        if self.read_only:
            result.traces.warnings.append(
                "read-only home: this call was not recorded (no audit row, no session dedup ledger)"
            )
        return result

    def lookup_knowledge_compact(
        self, query: str | LookupRequest, ctx: RequestContext | None = None, **fields: Any
    ) -> LookupCompact:
        """lookup_knowledge answered in the compact form (issue 15, :class:`LookupCompact`): the same call, audit
        row and evidence as :meth:`lookup_knowledge`, with only what an agent acts on; ``include_debug`` (a
        request field or keyword) adds the pack, traces and hints. Raises what :meth:`lookup_knowledge` raises."""
        ctx = self._caller(ctx)
        include_debug = query.include_debug if isinstance(query, LookupRequest) else fields.pop("include_debug", False)
        return compact_lookup(self.lookup_knowledge(query, ctx, **fields), include_debug=bool(include_debug))

    def list_invocations(
        self,
        ctx: RequestContext | None = None,
        *,
        session_id: str | None = None,
        tool_name: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[ToolInvocation]:
        """``tool_invocation`` rows the caller made (an admin: every row of its account), newest first, by session,
        tool and time (``since <= created_at < until``), paged by ``limit``/``offset`` (DESIGN §9)."""
        ctx = self._caller(ctx)
        return self.knowledge.recorder.list_invocations(
            ctx, session_id=session_id, tool_name=tool_name, since=since, until=until, limit=limit, offset=offset
        )

    def get_invocation(self, invocation_id: str, ctx: RequestContext | None = None) -> ToolInvocation:
        """One ``tool_invocation`` row the caller made (an admin: any row of its account).

        Raises:
            ContextEngineError: ``RET-4041`` when there is none in the caller's scope; another user's or account's
                invocation gets exactly the body of a missing one.
        """
        ctx = self._caller(ctx)
        found = self.knowledge.recorder.get(invocation_id, ctx)
        if found is None:
            raise ContextEngineError(
                ErrorCode.TARGET_NOT_FOUND,
                "no such invocation for this caller",
                {"invocation_id": invocation_id},
            )
        return found

    def session_trace_summary(self, session_id: str, ctx: RequestContext | None = None) -> SessionTraceSummary:
        """A per-session summary of the caller's tool calls (an admin: every caller's calls with this session id):
        counts, documents, dedups, fallbacks, one line per call; empty for a session the caller never used."""
        ctx = self._caller(ctx)
        return self.knowledge.recorder.session_summary(session_id, ctx)

    def verify_evidence(
        self, invocation_id: str, excerpt: str, ctx: RequestContext | None = None
    ) -> EvidenceVerification:
        """Whether ``excerpt`` is backed by an evidence ref recorded for the invocation (exact substring, or after
        whitespace normalisation); an invocation of another account or user is reported as not found."""
        ctx = self._caller(ctx)
        return self.knowledge.recorder.verify_evidence(invocation_id, excerpt, ctx)

    def search_memory(
        self, request: SearchMemoryRequest | str, ctx: RequestContext | None = None, **fields: Any
    ) -> SearchMemoryResponse:
        """search_memory (DESIGN §5, seed 000 §4.1.1): L0-first retrieval; never reads L1/L2.

        ``request`` is a :class:`SearchMemoryRequest` or the query text with the other request fields as keyword
        arguments (``top_k=5``, ``target_uri=...``). Tenancy comes from ``ctx`` only.

        Raises:
            ContextEngineError: ``RET-4001``/``RET-4002``/``RET-4003`` invalid request, ``RET-4031`` target not
                visible, or a ``user_space`` other than a non-admin caller's own (``request.user_space`` narrows an
                admin to one user: :meth:`RequestContext.for_user`). Degradations (``RET-4041``, ``RET-4221``,
                ``RET-5001``..``RET-5004``) are not raised: they
                are in ``response.trace.warnings`` (``RET-5001`` also sets ``response.retryable``).

        Always the full response, whatever the request's ``response_format``: :meth:`search_memory_compact`
        answers the compact form. ``session_id=`` is the deprecated name of ``conversation_id=`` (issue 29): it warns
        (``DeprecationWarning``) and is used as ``conversation_id``; both with different values is ``RET-4001``.
        """
        ctx = self._caller(ctx)
        if isinstance(request, str):
            request = SearchMemoryRequest(query=request, **_search_fields("search_memory", fields))
        # every text field's encoding, checked once here (a lone surrogate: RET-4001), before anything is recorded (a
        # text that cannot be encoded cannot be stored in the audit row either); the pipeline checks the query's own
        # rules (empty, length, control characters)
        require_valid_text(request, ErrorCode.QUERY_INVALID)
        audit = self.search_audit
        if audit is None:  # a bench's `--audit off`
            return self.search_pipeline.run(request, ctx.for_user(request.user_space))
        # one tool_invocation row per call, answered or refused (knowledge/search_audit.py), written here, around the
        # pipeline's run, so that the request goes down the layers and never back up (issue 28); a non-admin naming
        # another user's space (RET-4031) is refused inside it, so that refusal leaves its row too
        started, created_at = time.perf_counter(), datetime.now(UTC)
        scoped, request_id = ctx, None
        try:
            scoped = ctx.for_user(request.user_space)
            request_id = new_request_id()
            response = self.search_pipeline.run(request, scoped, request_id=request_id)
        except ContextEngineError as err:
            request_id = request_id or new_request_id()
            elapsed = (time.perf_counter() - started) * 1000.0
            audit.record(request, scoped, request_id=request_id, created_at=created_at, duration_ms=elapsed, error=err)
            raise
        elapsed = (time.perf_counter() - started) * 1000.0
        audit.record(
            request, scoped, request_id=request_id, created_at=created_at, duration_ms=elapsed, response=response
        )
        return response

    def search_memory_compact(
        self, request: SearchMemoryRequest | str, ctx: RequestContext | None = None, **fields: Any
    ) -> SearchMemoryCompact:
        """search_memory answered in the compact form (issue 15, :class:`SearchMemoryCompact`): per hit the URI,
        level, score, L0 text (at most ``retrieval.compact_abstract_max_chars``) and read recommendation;
        ``include_debug`` adds the typed queries, seed hits, next actions and trace. Same arguments and errors as
        :meth:`search_memory`."""
        ctx = self._caller(ctx)
        if isinstance(request, str):
            request = SearchMemoryRequest(query=request, **_search_fields("search_memory_compact", fields))
        return compact_search(
            self.search_memory(request, ctx),  # the one path: the same checks and codes as the full answer
            include_debug=request.include_debug,
            abstract_max_chars=self.settings.retrieval.compact_abstract_max_chars,
        )

    def read_memory(
        self, request: ReadMemoryRequest | str, ctx: RequestContext | None = None, **fields: Any
    ) -> ReadMemoryResponse:
        """read_memory (DESIGN §6, seed 000 §4.1.2): an explicit L1/L2 read of one URI, secrets redacted.

        ``request`` is a :class:`ReadMemoryRequest` or the URI with the other fields as keyword arguments.

        Raises:
            ContextEngineError: ``RET-4032`` (403) for an invisible or missing URI, with one and the same body;
                ``RET-4004`` for a level the node lacks (L2 of a directory); ``RET-4001`` for bad parameters.
        """
        ctx = self._caller(ctx)
        if isinstance(request, str):
            request = ReadMemoryRequest(uri=request, **fields)
        require_valid_text(request, ErrorCode.QUERY_INVALID)
        return self.read_pipeline.run(request, ctx)

    def stats(self, ctx: RequestContext | None = None) -> dict[str, Any]:
        """Counts of the caller's account only (nodes, files, directories, pending, ``index_records``: its vector
        records; its derived files), and the deployment's index state (``index_status``, ``index_problem``:
        :meth:`index_health`) and model: :func:`~context_engine.storage.health.account_stats`."""
        ctx = self._caller(ctx)
        return account_stats(
            self.metadata, self.index, self.embedder, self.derived_files, self.settings.home_path, ctx.account_id
        )


def _search_fields(where: str, fields: dict[str, Any]) -> dict[str, Any]:
    """search_memory's keyword fields with ``session_id`` (deprecated, issue 29) given as ``conversation_id``: a
    ``DeprecationWarning`` at the caller's line; ``RET-4001`` when both are given and differ."""
    if fields.get("session_id") is None:
        return fields
    out = dict(fields)
    old = out.pop("session_id")
    new = out.get("conversation_id")
    code = ErrorCode.QUERY_INVALID
    out["conversation_id"] = renamed_argument(where, "conversation_id", new, "session_id", old, code=code, stacklevel=4)
    return out


ContextEngine = ContextEngineService
