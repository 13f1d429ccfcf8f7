"""The write path (DESIGN.md §3-4): add, delete, move, reindex.

Every write follows one protocol, so that after ``kill -9`` at any point the store is either before or after the
write (docs/security.md, "Crash safety and concurrent writers"; :mod:`context_engine.ingest.journal`):

1. Validate, parse, chunk, summarise and embed the written files in memory. Bad input fails here; nothing is written.
2. An intent row is committed in the metadata database's journal.
3. One metadata transaction, holding the write lock: content changes (each recorded first, so it can be undone),
   nodes (``pending``), the directory summaries of every touched directory recomputed from its committed children
   (never from a list read before the lock: concurrent writers into one directory lose nothing), vectors and the
   change log, and the intent marked ``committed``. Its commit is the moment the write happens.
4. The vector index follows the metadata rows of the touched ids, the nodes are marked ``indexed``, the undo records
   and the intent are dropped. If the index fails, the nodes stay ``pending`` (searches skip them) and the intent is
   left for ``reindex`` (or the next start) to finish.

A small write (at most ``_AHEAD_MAX_CHARS`` characters to embed, no progress callback, no cancel event: a batch of
messages or memories, a short document) overlaps steps 1 to 3 (issue 26): its texts go to the model in a background
thread as soon as they are known (a message's or a short memory's before parsing, since it is indexed whole as its
given L0; if redaction then changes an abstract, the texts are embedded again as stored), and the calling thread
parses, takes its turn and writes the content files, node rows and directory summaries, which need no vector, before
it waits for the vectors. The texts go to the embedder in one call either way, so the vectors are the same; a model
failure raises inside the transaction, which rolls back with the content changes (nothing is written), and a write
that fails before it needs its vectors waits for the model to finish first. The write lock is then held for the rest
of the embedding too, which the bound keeps short; a larger write embeds before it asks for its turn.

A crash before the commit leaves a ``prepared`` intent: its content changes are rolled back by the next writer (under
the write lock, before it changes anything) or at the next start. A crash after it leaves a ``committed`` intent,
finished at the next start or by ``reindex``. Both are found from the journal alone: O(leftovers).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.ingest.background import Background
from context_engine.ingest.embedding_inputs import (
    EmbeddingInputs,
    early_texts,
    embedding_inputs,
    vector_id,
    vector_records,
)
from context_engine.ingest.embedding_inputs import PreparedNode as _PreparedNode
from context_engine.ingest.garbage import GarbageCollector, GarbageReport
from context_engine.ingest.journal import RecoveryReport, WriteJournal
from context_engine.ingest.loader import SourceDoc
from context_engine.ingest.parse import MarkdownChunker, MarkdownParser, parse_plain
from context_engine.ingest.summarize import ChildSummary, ExtractiveSummarizer, Summary, truncate_text
from context_engine.redaction import redact_derived
from context_engine.schema.nodes import IngestReport, Level, NodeRecord, VectorRecord
from context_engine.schema.uri import ContextURI
from context_engine.settings import IngestSettings
from context_engine.storage.protocols import ContentStore, Embedder, MetadataStore, VectorIndex, utcnow

_LOG = logging.getLogger("context_engine.ingest")
Progress = Callable[[str, int, int], None]  # (stage, done, total)

# Texts embedded between two checks of a write's cancellation (about 3 s of the default model on 2 cores).
_CANCEL_BATCH = 32
# Stored children read per directory summary: the first and the last this many (MetadataStore.children_window).
_DIR_SUMMARY_WINDOW = 12
# A write whose embedding input is at most this many characters (about 1,000 messages with their context) is embedded
# in a background thread while the calling thread writes its content and node rows under the write lock, which it
# then holds for the rest of the embedding too; a larger write is embedded before it asks for its turn (module
# docstring). Vectors are the same either way: the same texts go to the embedder in one call.
_AHEAD_MAX_CHARS = 131_072


class WriteListener(Protocol):
    """Derived rows kept in the metadata database with every write and delete (the hint index).

    Called inside the write's metadata transaction, after its vectors are written, so what a listener writes to the
    metadata database commits or rolls back with the write (docs/derived_indexes.md). A listener must not raise for
    ordinary input; if it does, the write rolls back and the error propagates to the caller. In-memory indexes do not
    listen: they follow the change log of the metadata database (storage/changes.py).
    """

    def nodes_written(self, account_id: str, nodes: Sequence[NodeRecord], vectors: Sequence[VectorRecord]) -> None:
        """``nodes`` were created or replaced; ``vectors`` are all their vector rows (level 0 and level 2)."""
        ...

    def nodes_deleted(self, account_id: str, uris: Sequence[str]) -> None:
        """``uris`` no longer exist (after a delete, or the old side of a move)."""
        ...


def _same(value: np.ndarray) -> np.ndarray:
    return value


def _check_cancelled(cancel: threading.Event | None, **progress: int) -> None:
    """Raise ``WRT-4991`` when ``cancel`` is set (the write's caller went away; nothing was written yet); ``progress``
    (texts ``embedded`` of ``total``, or ``documents_prepared`` of ``documents``) goes into its details."""
    if cancel is not None and cancel.is_set():
        raise ContextEngineError(
            ErrorCode.WRITE_CANCELLED,
            "the write was cancelled before it committed (the client disconnected); nothing was written",
            dict(progress),
        )


class WritePipeline:
    """Ingest and maintenance over the three stores. Stateless between calls apart from its collaborators.

    ``journal`` is the write protocol's journal (module docstring); without one, a journal whose liveness locks live
    in a temporary folder is used (tests of the code around the pipeline).
    """

    def __init__(
        self,
        content: ContentStore,
        metadata: MetadataStore,
        index: VectorIndex,
        embedder: Embedder,
        settings: IngestSettings,
        listeners: Sequence[WriteListener] = (),
        journal: WriteJournal | None = None,
    ) -> None:
        self._listeners = list(listeners)
        self._content = content
        self._metadata = metadata
        self._index = index
        self._embedder = embedder
        self._settings = settings
        self._parser = MarkdownParser()
        self._chunker = MarkdownChunker(settings)
        self._summarizer = ExtractiveSummarizer(settings)
        if journal is None:
            journal = WriteJournal(metadata, content, index)
        self.journal = journal

    @property
    def _index(self) -> VectorIndex:
        return self.__index

    @_index.setter
    def _index(self, value: VectorIndex) -> None:
        # tests swap the index of a live pipeline: the journal, which syncs it, follows
        self.__index = value
        if getattr(self, "journal", None) is not None:
            self.journal.index = value

    # ------------------------------------------------------------------------------------------------ writes
    def write_documents(
        self,
        account_id: str,
        docs: Sequence[SourceDoc],
        *,
        progress: Progress | None = None,
        abstracts: dict[str, str] | None = None,
        in_transaction: Callable[[], None] | None = None,
        cancel: threading.Event | None = None,
        refused: list[tuple[SourceDoc, ContextEngineError]] | None = None,
    ) -> IngestReport:
        """Write ``docs`` (already validated) and rebuild their ancestors' summaries bottom-up, as one write.

        ``cancel`` (set by another thread, e.g. the HTTP route when its client disconnects) stops the write between
        embedding batches and before it takes its write turn, with ``WRT-4991``; nothing is written then.

        ``abstracts`` may override the extractive abstract per URI (a skill's abstract is its description).
        ``in_transaction`` runs inside the content + metadata transaction, so its metadata writes (a memory's previous
        version) commit or roll back with the documents. Unchanged documents (same content hash, indexed, and no newer
        ``version`` than the node's) are counted as ``unchanged`` and not rewritten.

        Raises:
            ContextEngineError: ``WRT-4091`` when a URI is already a directory (or a file sits on a path that must be a
                directory); ``WRT-5031`` embedding failed; ``WRT-5001`` storage failed; ``WRT-4132`` a document makes
                more chunks than ``ingest.max_chunks_per_document`` (checked before any embedding; with ``refused``
                given, the document is left out and put there instead); ``WRT-4991`` cancelled; ``WRT-5032`` (retryable)
                no write turn within ``ingest.write_wait_s``. In each case nothing changed.
        """
        report = IngestReport()
        todo = self._changed_documents(account_id, docs, report)
        if not todo:
            return report
        self._check_no_file_ancestors(account_id, todo)
        now = utcnow()
        overlap = cancel is None and progress is None
        # messages and short memories: what they embed is known before parsing (module docstring, step 1)
        early = early_texts(todo, abstracts or {}) if overlap else None
        ahead = self._embed_ahead(early)
        try:
            prepared: list[_PreparedNode] = []
            for doc in todo:  # parsing and chunking a large upload takes seconds too: cancellable between documents
                _check_cancelled(cancel, documents_prepared=len(prepared), documents=len(todo))
                try:
                    prepared.append(self._prepare(account_id, doc, now, (abstracts or {}).get(str(doc.uri))))
                except ContextEngineError as err:
                    if refused is None or err.code is not ErrorCode.TOO_MANY_CHUNKS:
                        raise
                    refused.append((doc, err))
            if not prepared:
                return report
            inputs = embedding_inputs(prepared)
            if ahead is not None and inputs.texts != early:  # redaction changed an abstract: embed what is stored
                ahead.wait()
                ahead = None
            if ahead is None and overlap:
                ahead = self._embed_ahead(inputs.texts)
            embedded = (
                ahead.result if ahead is not None else partial(_same, self._embed_texts(inputs.texts, progress, cancel))
            )
            _check_cancelled(cancel)
            body = self._write_body(account_id, prepared, inputs, embedded, in_transaction, report)
            report.pending = self._journaled(account_id, "write", body, cancel)
        finally:
            if ahead is not None:  # a write that failed before it needed its vectors leaves no embedding running
                ahead.wait()
        report.nodes = len(prepared)
        report.chunks = sum(len(p.chunks) for p in prepared)
        report.uris = [p.record.uri for p in prepared]
        return report

    def _changed_documents(self, account_id: str, docs: Sequence[SourceDoc], report: IngestReport) -> list[SourceDoc]:
        """The ``docs`` to write: those unchanged (same content hash, indexed, no newer version) are counted in
        ``report``; a URI that names an existing directory is ``WRT-4091``. A document that sets a newer ``version``
        than the node's (a memory's update) is written whatever its hash: its metadata, time or exact text may be
        what changed (a memory's hash is of its normalised text, ``ingest/memory_text.py``)."""
        existing = self._metadata.get_nodes(account_id, [str(d.uri) for d in docs])
        # keyed without the trailing slash: a file URI that names an existing directory finds it (and is refused)
        by_key = {ContextURI.parse(u).key: n for u, n in existing.items()}
        todo: list[SourceDoc] = []
        for doc in docs:
            old = by_key.get(doc.uri.key)
            if old is not None and old.is_dir:
                raise ContextEngineError(
                    ErrorCode.CONFLICT,
                    f"{doc.uri} names the existing directory {old.uri}; choose another file URI",
                    {"uri": str(doc.uri), "existing": old.uri},
                )
            if (
                old is not None
                and old.content_hash == doc.content_hash
                and old.index_status == "indexed"
                and doc.version <= old.version
            ):
                report.unchanged += 1
                continue
            todo.append(doc)
        return todo

    def _embed_ahead(self, texts: list[str] | None) -> Background[np.ndarray] | None:
        """``texts`` embedded in a background thread, when they are few enough (``_AHEAD_MAX_CHARS``)."""
        if texts is None or sum(map(len, texts)) > _AHEAD_MAX_CHARS:
            return None
        return Background(partial(self._embed_texts, texts, None), "ce-embed-ahead")

    def _write_body(
        self,
        account_id: str,
        prepared: list[_PreparedNode],
        inputs: EmbeddingInputs,
        embedded: Callable[[], np.ndarray],
        in_transaction: Callable[[], None] | None,
        report: IngestReport,
    ) -> Callable[[str], _Written]:
        """The transaction of :meth:`write_documents` (module docstring, step 3)."""
        dir_uris = {str(a) for p in prepared for a in ContextURI.parse(p.record.uri).ancestors()}
        fresh = {p.record.uri: p.levels[Level.L0] or "" for p in prepared}

        def body(journal_id: str) -> _Written:
            if in_transaction is not None:
                in_transaction()
            # stamped under the write lock, so `updated_at` follows the commit order of concurrent writers
            stamp = utcnow()
            for p in prepared:
                p.record = p.record.model_copy(update={"created_at": stamp, "updated_at": stamp})
            out = _Written()
            # what needs no vector first, while the model may still be embedding
            old_ids = self._write_node_rows(journal_id, account_id, prepared)
            # the summaries see every file of this write (a batch larger than the sampled window included) and the
            # committed children of every other write
            changed = [p.record for p in prepared]
            dirs = self._prepare_directories(account_id, dir_uris, changed, utcnow(), fresh) if dir_uris else []
            vectors = vector_records(account_id, inputs, embedded())  # waits for the model when it embeds ahead
            out.add(prepared, self._write_vector_rows(account_id, prepared, vectors, old_ids))
            if dirs:
                out.add(dirs, self._replace_nodes(journal_id, account_id, dirs, self._embed(account_id, dirs, None)))
            report.directories = len(dirs)
            report.vectors = len(vectors) + sum(1 for d in dirs if d.record.context_type is not None)
            return out

        return body

    def add_listener(self, listener: WriteListener) -> None:
        self._listeners.append(listener)

    def _notify_written(self, account_id: str, nodes: Sequence[_PreparedNode], vectors: Sequence[VectorRecord]) -> None:
        if self._listeners and nodes:
            records = [n.record for n in nodes]
            for listener in self._listeners:
                listener.nodes_written(account_id, records, vectors)

    def _notify_deleted(self, account_id: str, uris: Sequence[str]) -> None:
        for listener in self._listeners:
            listener.nodes_deleted(account_id, uris)

    def _check_no_file_ancestors(self, account_id: str, docs: Sequence[SourceDoc]) -> None:
        ancestors = {str(a) for d in docs for a in d.uri.ancestors()}
        for node in self._metadata.get_nodes(account_id, ancestors).values():
            if not node.is_dir:
                raise ContextEngineError(ErrorCode.CONFLICT, f"{node.uri} is a file, so it cannot hold other nodes")

    def _prepare(self, account_id: str, doc: SourceDoc, now, abstract: str | None) -> _PreparedNode:
        uri = doc.uri
        if doc.kind == "plain":
            parsed = parse_plain(doc.text, fallback_title=doc.title_hint)
        else:
            parsed = self._parser.parse(doc.text, fallback_title=doc.title_hint)
        # a document indexed whole as its L0 (a message, a short memory) keeps no chunks: none are made
        chunks = (
            []
            if doc.whole_text_l0
            else self._chunker.chunk(parsed, doc_id=str(uri), category=uri.category, source=doc.source)
        )
        if len(chunks) > self._settings.max_chunks_per_document:
            # bounded work per request: refused before anything is embedded (docs/security.md, "Cost bombs")
            raise ContextEngineError(
                ErrorCode.TOO_MANY_CHUNKS,
                f"{uri} would make {len(chunks)} chunks, over ingest.max_chunks_per_document "
                f"({self._settings.max_chunks_per_document}); split the document",
                {"uri": str(uri), "chunks": len(chunks), "limit": self._settings.max_chunks_per_document},
            )
        summary = self._summarizer.summarize_document(parsed)
        abstract = abstract or doc.abstract
        # stored derived text is redacted at write time (docs/security.md); L2 stays as written, redacted on read
        summary = self._redacted(Summary(abstract=abstract or summary.abstract, overview=summary.overview))
        record = NodeRecord(
            account_id=account_id,
            uri=str(uri),
            parent_uri=str(uri.parent) if uri.parent else None,
            owner_space=uri.owner_space,
            context_type=uri.context_type,
            category=uri.category,
            is_dir=False,
            title=redact_derived(doc.title or parsed.title, library=False),
            has_overview=bool(summary.overview),
            has_content=True,
            content_hash=doc.content_hash,
            index_status="pending",
            source=doc.source,
            created_at=now,
            updated_at=now,
            occurred_at=doc.occurred_at,
            metadata=doc.metadata or None,
            version=doc.version,
        )
        levels = {Level.L0: summary.abstract, Level.L1: summary.overview or None, Level.L2: doc.text}
        return _PreparedNode(record, levels, chunks, doc.context)

    def _redacted(self, summary: Summary, *, library: bool = True) -> Summary:
        """Secrets out of a summary before it is stored (L0 with both layers unless ``library`` is false, L1 by the
        patterns). A text that redaction made longer (a ``[REDACTED:kind]`` mark may be longer than the secret) is cut
        back to its own cap: the larger of the ingest cap and the text's length before redaction, since a caller may
        allow longer abstracts (a memory's L0 is its whole text up to ``memory.l0_max_chars``). Text without a secret
        is stored unchanged."""
        abstract = self._capped(
            summary.abstract, redact_derived(summary.abstract, library=library), self._settings.l0_max_chars
        )
        overview = self._capped(
            summary.overview, redact_derived(summary.overview, library=False), self._settings.l1_max_chars
        )
        return Summary(abstract=abstract, overview=overview)

    @staticmethod
    def _capped(original: str, redacted: str, cap: int) -> str:
        limit = max(cap, len(original))
        return truncate_text(redacted, limit) if redacted != original and len(redacted) > limit else redacted

    def _prepare_directories(
        self,
        account_id: str,
        dir_uris: set[str],
        changed: Sequence[NodeRecord],
        now,
        fresh_abstracts: dict[str, str] | None = None,
    ) -> list[_PreparedNode]:
        """Summarise ``dir_uris`` bottom-up from their children: the stored ones, overridden by ``changed`` (the
        write's own nodes, already in the metadata store under its transaction, so the children counts hold them)."""
        by_uri: dict[str, NodeRecord] = {r.uri: r for r in changed}
        written = set(by_uri)
        # the written files' fresh abstracts (their content is not committed yet, so the store has the old ones)
        abstracts: dict[str, str] = dict(fresh_abstracts or {})
        existing = self._metadata.get_nodes(account_id, dir_uris)
        out: list[_PreparedNode] = []
        # Deepest first, so a parent sees its children's fresh abstracts.
        for d in sorted(dir_uris, key=lambda u: (-u.count("/"), u)):
            duri = ContextURI.parse(d)
            # A bounded window of the stored children: a directory's summary costs the same with 20 children or
            # 20,000 (a long conversation session), so appending to it does not slow down as it grows.
            stored, total = self._metadata.children_window(account_id, d, _DIR_SUMMARY_WINDOW)
            children = {c.uri: c for c in stored}
            fresh = {u: r for u, r in by_uri.items() if r.parent_uri == d}
            # a fresh child the count may miss: a new directory of this write (the written files are counted)
            unseen = [u for u in fresh if u not in children and u not in written]
            known = self._metadata.get_nodes(account_id, unseen) if unseen and total > len(stored) else {}
            total += sum(1 for u in unseen if u not in known) if total > len(stored) else 0
            children.update(fresh)
            total = max(total, len(children))
            child_summaries = [
                ChildSummary(
                    name=ContextURI.parse(cu).name,
                    title=c.title,
                    abstract=abstracts.get(cu) or self._content.read_level(account_id, cu, Level.L0) or "",
                    is_dir=c.is_dir,
                )
                for cu, c in sorted(children.items())
            ]
            summary = self._summarizer.summarize_directory(duri.name or d, child_summaries, total=total)
            summary = self._redacted(summary, library=False)
            old = existing.get(d)
            record = NodeRecord(
                account_id=account_id,
                uri=d,
                parent_uri=str(duri.parent) if duri.parent else None,
                owner_space=duri.owner_space,
                context_type=duri.context_type,
                category=duri.category,
                is_dir=True,
                title=duri.name or d,
                has_overview=bool(summary.overview),
                has_content=False,
                content_hash=None,
                index_status="pending",
                created_at=old.created_at if old and old.created_at else now,
                updated_at=now,
            )
            by_uri[d] = record
            abstracts[d] = summary.abstract
            levels = {Level.L0: summary.abstract, Level.L1: summary.overview or None}
            out.append(_PreparedNode(record, levels, existed=old is not None))
        return out

    def _embed(
        self,
        account_id: str,
        nodes: Sequence[_PreparedNode],
        progress: Progress | None,
        cancel: threading.Event | None = None,
    ) -> list[VectorRecord]:
        inputs = embedding_inputs(nodes)
        return vector_records(account_id, inputs, self._embed_texts(inputs.texts, progress, cancel))

    def _embed_texts(
        self, texts: Sequence[str], progress: Progress | None, cancel: threading.Event | None = None
    ) -> np.ndarray:
        """The embedder's matrix of ``texts``, checked: one row per text, all finite (``WRT-5031`` otherwise)."""
        total = len(texts)
        done = 0

        def tick(k: int) -> None:
            nonlocal done
            done += k
            if progress:
                progress("embed", done, total)

        if cancel is None:
            matrix = self._embedder.embed_documents(texts, progress=tick if progress else None)
        else:
            matrix = self._embed_cancellable(texts, tick, cancel)
        if matrix.shape != (total, self._embedder.dim) or not np.all(np.isfinite(matrix)):
            raise ContextEngineError(ErrorCode.EMBEDDING_FAILED, "the embedder returned malformed vectors")
        return matrix

    def _embed_cancellable(
        self, texts: Sequence[str], tick: Callable[[int], None], cancel: threading.Event
    ) -> np.ndarray:
        """``embed_documents`` in batches of ``_CANCEL_BATCH`` texts (longest first, as the embedders sort), with
        ``cancel`` checked before each: a cancelled write stops within one batch."""
        _check_cancelled(cancel, embedded=0, total=len(texts))
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), self._embedder.dim), dtype=np.float32)
        for start in range(0, len(order), _CANCEL_BATCH):
            idx = order[start : start + _CANCEL_BATCH]
            part = self._embedder.embed_documents([texts[i] for i in idx])
            if part.shape != (len(idx), self._embedder.dim):
                raise ContextEngineError(ErrorCode.EMBEDDING_FAILED, "the embedder returned malformed vectors")
            out[idx] = part
            tick(len(idx))
            _check_cancelled(cancel, embedded=start + len(idx), total=len(texts))
        return out

    # ------------------------------------------------------------------------------------------------ the protocol
    def _journaled(
        self, account_id: str, op: str, body: Callable[[str], _Written], cancel: threading.Event | None = None
    ) -> int:
        """Run ``body`` as one journaled write (module docstring); returns how many nodes stay ``pending``.

        ``body`` runs inside the metadata transaction, holding the write lock, after crashed writers' leftovers were
        rolled back; it receives the journal id under which it must record its content changes. ``cancel`` is checked
        once the write has its turn: a client that went away while the write queued (up to ``ingest.write_wait_s``)
        gets nothing written (``WRT-4991``), as one that went away before.
        """
        journal_id = self.journal.begin(account_id, op)
        try:
            # first come, first served with every other writer of this home (threads and processes), bounded
            with self._metadata.write_turn(self._settings.write_wait_s), self._metadata.transaction():
                self._metadata.lock_writes()
                _check_cancelled(cancel)
                self.journal.recover_prepared()
                written = body(str(journal_id))
                self._metadata.journal_commit(journal_id, written.uris, sorted(written.sync_ids))
                self.journal.crash_point("before_commit")
        except BaseException:
            try:
                self.journal.abandon(journal_id)
            except Exception:  # noqa: BLE001 - the write's own error is what the caller must see; recovery retries
                _LOG.exception("could not undo the content of failed write %s; the next writer will", journal_id)
                self._release(journal_id)
            raise
        self.journal.crash_point("committed")
        return self.journal.finish(account_id, journal_id, written.uris, sorted(written.sync_ids))

    def _release(self, journal_id: int) -> None:
        """Hand a failed write whose content could not be undone (the store failed again) to whoever writes or
        recovers next: its row loses its owner, so the next write's :meth:`WriteJournal.recover_prepared` rolls its
        content back (while this process owns it, it would count as in flight until the process ends)."""
        try:
            self._metadata.journal_release(journal_id)
        except Exception:  # noqa: BLE001 - the write's own error is what the caller must see
            _LOG.exception(
                "could not release failed write %s; it is rolled back once this process has ended", journal_id
            )

    def _replace_nodes(
        self, journal_id: str, account_id: str, nodes: Sequence[_PreparedNode], vectors: Sequence[VectorRecord]
    ) -> set[str]:
        """Inside the write's transaction: write the nodes' content (recorded for undo) and metadata, and replace
        their vector rows. Returns every vector id touched (old and new)."""
        old_ids = self._write_node_rows(journal_id, account_id, nodes)
        return self._write_vector_rows(account_id, nodes, vectors, old_ids)

    def _write_node_rows(self, journal_id: str, account_id: str, nodes: Sequence[_PreparedNode]) -> set[str]:
        """The first half of :meth:`_replace_nodes`, which needs no vector: the nodes' content (recorded for undo)
        and metadata rows. Returns the ids of their vector rows before the write."""
        old_ids = set(self._metadata.vector_ids_for(account_id, [n.record.uri for n in nodes]))
        for n in nodes:
            if n.levels:
                self._content.stash(journal_id, account_id, n.record.uri)
                self._content.write_levels(account_id, n.record.uri, n.levels)
                self.journal.crash_point("content_written")
        self._metadata.upsert_nodes([n.record for n in nodes])
        return old_ids

    def _write_vector_rows(
        self, account_id: str, nodes: Sequence[_PreparedNode], vectors: Sequence[VectorRecord], old_ids: set[str]
    ) -> set[str]:
        """The second half of :meth:`_replace_nodes`: the nodes' vector rows replace ``old_ids``, and the listeners
        hear of the write. Returns every vector id touched (old and new)."""
        new_ids = {v.id for v in vectors}
        self._metadata.delete_vectors(sorted(old_ids - new_ids))
        self._metadata.put_vectors(vectors)
        self._notify_written(account_id, nodes, vectors)
        return old_ids | new_ids

    def _write_directories(
        self,
        journal_id: str,
        account_id: str,
        dir_uris: set[str],
        fresh: dict[str, str] | None = None,
        changed: Sequence[NodeRecord] = (),
    ) -> tuple[list[_PreparedNode], set[str]]:
        """Inside the write's transaction: recompute the summaries of ``dir_uris`` from their committed children
        (this write's included; ``changed``, the nodes it wrote, are always among the children a summary names),
        embed and write them. Returns the directory nodes and the vector ids touched."""
        if not dir_uris:
            return [], set()
        dirs = self._prepare_directories(account_id, dir_uris, changed, utcnow(), fresh)
        vectors = self._embed(account_id, dirs, None)
        return dirs, self._replace_nodes(journal_id, account_id, dirs, vectors)

    def check(self, *, repair: bool) -> RecoveryReport:
        """Find (and with ``repair``, repair) the leftovers of crashed writes, from the journal: O(leftovers).

        Raises:
            ContextEngineError: ``WRT-5001`` when a store fails.
        """
        return self.journal.recover(repair=repair)

    # ------------------------------------------------------------------------------------------------ delete
    def delete(self, account_id: str, uri: ContextURI, *, recursive: bool) -> IngestReport:
        """Delete a node (a directory only with ``recursive``) and refresh the ancestors' summaries, as one write.

        Raises:
            ContextEngineError: ``WRT-4042`` no such node; ``WRT-4091`` non-empty directory without ``recursive``;
                ``WRT-4002`` for a scope or space root.
        """
        if not uri.segments:
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, "a scope or space root cannot be deleted")
        if self._metadata.get_node(account_id, str(uri)) is None:  # fail fast; checked again under the write lock
            raise ContextEngineError(ErrorCode.NODE_NOT_FOUND, f"no node at {uri}")
        report = IngestReport()

        def body(journal_id: str) -> _Written:
            node = self._metadata.get_node(account_id, str(uri))  # read under the write lock: what is committed
            if node is None:
                raise ContextEngineError(ErrorCode.NODE_NOT_FOUND, f"no node at {uri}")
            subtree = self._metadata.list_subtree(account_id, node.uri)
            # Without recursive exactly one node goes, whatever its kind: nothing below it is ever wiped on the way.
            if len(subtree) > 1 and not recursive:
                raise ContextEngineError(
                    ErrorCode.CONFLICT,
                    f"{node.uri} has {len(subtree) - 1} nodes below it; set recursive to delete them too "
                    "(recursive=true over HTTP and MCP, --recursive in the CLI)",
                    {"uri": node.uri, "descendants": len(subtree) - 1},
                )
            uris = [n.uri for n in subtree]
            ids = self._metadata.vector_ids_for(account_id, uris)
            self._content.delete_journaled(journal_id, account_id, node.uri)
            self.journal.crash_point("content_deleted")
            self._metadata.delete_vectors(ids)
            self._metadata.delete_nodes(account_id, uris)
            self._notify_deleted(account_id, uris)
            parent = ContextURI.parse(node.uri).parent
            dir_uris = {str(parent)} | {str(a) for a in parent.ancestors()} if parent is not None else set()
            dirs, synced = self._write_directories(journal_id, account_id, dir_uris)
            out = _Written(sync_ids=set(ids))
            out.add(dirs, synced)
            report.nodes, report.vectors, report.uris = len(subtree), len(ids), uris
            return out

        self._journaled(account_id, "delete", body)
        return report

    # ------------------------------------------------------------------------------------------------ move
    def _move_ends(self, account_id: str, src: ContextURI, dst: ContextURI) -> tuple[ContextURI, ContextURI]:
        """The source as stored and the checked destination of a move (errors: see :meth:`move`)."""
        node = self._metadata.get_node(account_id, str(src))
        if node is None:
            raise ContextEngineError(ErrorCode.NODE_NOT_FOUND, f"no node at {src}")
        src = ContextURI.parse(node.uri)
        if not src.segments:
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, "a scope or space root cannot be moved")
        target = self._metadata.get_node(account_id, str(dst))
        if target is not None and target.is_dir:
            dst = ContextURI.parse(target.uri).child(src.name, is_dir=src.is_dir)
        elif dst.is_dir and not src.is_dir:
            # "mv doc.md ctx://resources/new/": the trailing slash names a directory, made by the move, that
            # receives the file under its own name (until 2026-12-07 the file became the extensionless "new")
            dst = dst.child(src.name)
        else:
            dst = dst.as_dir() if src.is_dir else dst.as_file()
        if self._metadata.get_node(account_id, str(dst)) is not None:
            raise ContextEngineError(ErrorCode.CONFLICT, f"{dst} already exists")
        if dst.is_within(src):
            raise ContextEngineError(ErrorCode.CONFLICT, f"cannot move {src} inside itself")
        if dst.context_type != src.context_type:
            raise ContextEngineError(
                ErrorCode.URI_INVALID,
                f"cannot move a {src.context_type} to {dst}: a move stays within its context type "
                "(resources/, memories/ or skills/)",
            )
        for a in self._metadata.get_nodes(account_id, [str(a) for a in dst.ancestors()]).values():
            if not a.is_dir:
                raise ContextEngineError(ErrorCode.CONFLICT, f"{a.uri} is a file, so it cannot hold other nodes")
        return src, dst

    def move(self, account_id: str, src: ContextURI, dst: ContextURI) -> IngestReport:
        """Move a node and its subtree as one write; vectors are re-keyed, not re-embedded. The summaries of both
        sides refresh in the same write.

        A destination that is an existing directory receives the node under its own name, and so does a directory
        URI (trailing ``/``) that does not exist yet when a file is moved (the move makes it).

        Raises:
            ContextEngineError: ``WRT-4042`` no source; ``WRT-4091`` destination exists, lies inside the source, or
                sits below a file; ``WRT-4001`` destination outside a context-type root; ``WRT-4002`` for a root.
        """
        src, dst = self._move_ends(account_id, src, dst)
        old_prefix, new_prefix = str(src), str(dst)
        report = IngestReport(uris=[new_prefix])

        def remap(u: str) -> ContextURI:
            return ContextURI.parse(new_prefix + u[len(old_prefix) :] if u != old_prefix else new_prefix)

        def body(journal_id: str) -> _Written:
            # read under the write lock: the subtree as committed, not as it was when the request came in
            subtree = self._metadata.list_subtree(account_id, old_prefix)
            if not subtree:
                raise ContextEngineError(ErrorCode.NODE_NOT_FOUND, f"no node at {src}")
            if self._metadata.get_node(account_id, new_prefix) is not None:
                raise ContextEngineError(ErrorCode.CONFLICT, f"{dst} already exists")
            now = utcnow()
            moved = [_PreparedNode(_moved_record(n, remap(n.uri), now), {}) for n in subtree]
            old_vectors = self._metadata.get_vectors(account_id, [n.uri for n in subtree])
            new_vectors = [_moved_vector(v, remap(v.uri), account_id) for v in old_vectors]
            old_ids = [v.id for v in old_vectors]
            self._content.move_journaled(journal_id, account_id, old_prefix, new_prefix)
            self.journal.crash_point("content_moved")
            self._metadata.delete_vectors(old_ids)
            self._metadata.delete_nodes(account_id, [n.uri for n in subtree])
            self._notify_deleted(account_id, [n.uri for n in subtree])
            out = _Written(sync_ids=set(old_ids))
            out.add(moved, self._replace_nodes(journal_id, account_id, moved, new_vectors))
            # New parents may not exist yet: create and summarise them (and a moved directory, whose own summary
            # names it), and refresh the old side, all from the committed children.
            dir_uris = {str(a) for a in dst.ancestors()} | ({new_prefix} if src.is_dir else set())
            if src.parent is not None:
                dir_uris |= {str(src.parent)} | {str(a) for a in src.parent.ancestors()}
            dirs, synced = self._write_directories(journal_id, account_id, dir_uris, None, [moved[0].record])
            out.add(dirs, synced)
            report.nodes, report.vectors = len(subtree), len(new_vectors)
            return out

        report.pending = self._journaled(account_id, "move", body)
        return report

    # ------------------------------------------------------------------------------------------------ reindex
    def reindex(
        self, account_id: str | None = None, *, full: bool = False, progress: Progress | None = None
    ) -> IngestReport:
        """Finish or undo what crashed writes left (the journal), then push vectors kept in the metadata store into
        the vector index.

        Default: only ``pending`` nodes (repairs failed index writes). ``full=True``: every vector of the account
        (or of every account when ``account_id`` is ``None``), e.g. after the index directory was lost; it also
        removes content folders that no node owns (left by versions before the write journal): O(store). Each batch
        of 512 nodes is read and pushed under the index sync lock, as a write's sync is.
        """
        found = self.journal.recover(repair=True)
        report = IngestReport(nodes=found.nodes_indexed, vectors=found.vectors_synced)
        accounts = [account_id] if account_id else self._metadata.accounts()
        for acc in accounts:
            if full:
                nodes = self._metadata.list_all_nodes(acc)
                self._garbage_collector().sweep(acc, GarbageReport())
            else:
                nodes = self._metadata.pending_nodes(acc)
            uris = [n.uri for n in nodes]
            for start in range(0, len(uris), 512):
                batch = uris[start : start + 512]
                # under the sync lock, read after taking it (as every write's sync): a write of these nodes running
                # beside the reindex cannot have its newer rows replaced by the older ones read here
                with self._metadata.index_sync_lock(acc):
                    vectors = self._metadata.get_vectors(acc, batch)
                    self._index.upsert(vectors)
                self._metadata.set_index_status(acc, batch, "indexed")
                report.vectors += len(vectors)
                report.nodes += len(batch)
                if progress:
                    progress("reindex", report.nodes, len(uris))
        self._index.optimize()
        return report

    def collect_garbage(self, account_id: str | None = None) -> GarbageReport:
        """``reindex --gc``: see :meth:`GarbageCollector.collect <context_engine.ingest.garbage.GarbageCollector>`."""
        return self._garbage_collector().collect(account_id)

    def _garbage_collector(self) -> GarbageCollector:
        return GarbageCollector(self._content, self._metadata, self._index, self.journal)


@dataclass
class _Written:
    """What one journaled write touched: the nodes it created or replaced, and every vector id it wrote or deleted."""

    uris: list[str] = field(default_factory=list)
    sync_ids: set[str] = field(default_factory=set)

    def add(self, nodes: Sequence[_PreparedNode], ids: set[str]) -> None:
        self.uris.extend(n.record.uri for n in nodes)
        self.sync_ids |= ids


def _moved_record(n: NodeRecord, nu: ContextURI, now) -> NodeRecord:
    return n.model_copy(
        update={
            "title": (nu.name or str(nu)) if n.is_dir else n.title,
            "uri": str(nu),
            "parent_uri": str(nu.parent) if nu.parent else None,
            "owner_space": nu.owner_space,
            "context_type": nu.context_type,
            "category": nu.category,
            "index_status": "pending",
            "updated_at": now,
        }
    )


def _moved_vector(v: VectorRecord, nu: ContextURI, account_id: str) -> VectorRecord:
    return v.model_copy(
        update={
            "id": vector_id(account_id, str(nu), v.level, v.chunk_index),
            "uri": str(nu),
            "parent_uri": str(nu.parent) if nu.parent else None,
            "owner_space": nu.owner_space,
            "context_type": nu.context_type or "",
            "category": nu.category or "",
            "doc_id": str(nu),
        }
    )
