"""The write path (DESIGN.md §3-4): add, delete, move, reindex.

Ordering, so that a crash loses nothing and never leaves a searchable orphan:

1. Validate, parse, chunk, summarise and embed everything in memory. Bad input fails here; nothing is written.
2. Content and metadata commit together (one metadata transaction; content files written inside it and restored if
   it rolls back). Nodes are committed with ``index_status='pending'``; the vectors are kept in the metadata store.
3. The vector index is updated (stale ids deleted, new ones upserted). Only then are the nodes marked ``indexed``.
   If the index fails, the nodes stay ``pending`` (searches skip them) and ``reindex`` repairs them.

Deletes run the other way round: index records first, then metadata and content.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.ingest.loader import SourceDoc
from context_engine.ingest.parse import MarkdownChunker, MarkdownParser, embedding_input, format_breadcrumb, parse_plain
from context_engine.ingest.summarize import ChildSummary, ExtractiveSummarizer, Summary
from context_engine.schema.nodes import Chunk, IngestReport, Level, NodeRecord, VectorRecord
from context_engine.schema.uri import ContextURI
from context_engine.settings import IngestSettings
from context_engine.storage.protocols import ContentStore, Embedder, MetadataStore, VectorIndex, utcnow

_LOG = logging.getLogger("context_engine.ingest")
Progress = Callable[[str, int, int], None]  # (stage, done, total)

# Stored children read per directory summary: the first and the last this many (MetadataStore.children_window).
_DIR_SUMMARY_WINDOW = 12


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


def vector_id(account_id: str, uri: str, level: int, chunk_index: int) -> str:
    """Deterministic record id (DESIGN §3): sha1 of ``account_id|uri|level|chunk_index``, 32 hex characters."""
    key = f"{account_id}\x1f{uri}\x1f{level}\x1f{chunk_index}".encode()
    return hashlib.sha1(key).hexdigest()[:32]


@dataclass
class _PreparedNode:
    record: NodeRecord
    levels: dict[Level, str | None]
    chunks: list[Chunk] = field(default_factory=list)
    context: str = ""  # indexed with the abstract (embedding input and BM25), never shown
    existed: bool = True  # False: no node at this URI before the write (nothing to snapshot for a rollback)


class WritePipeline:
    """Ingest and maintenance over the three stores. Stateless between calls apart from its collaborators."""

    def __init__(
        self,
        content: ContentStore,
        metadata: MetadataStore,
        index: VectorIndex,
        embedder: Embedder,
        settings: IngestSettings,
        listeners: Sequence[WriteListener] = (),
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

    # ------------------------------------------------------------------------------------------------ writes
    def write_documents(
        self,
        account_id: str,
        docs: Sequence[SourceDoc],
        *,
        progress: Progress | None = None,
        abstracts: dict[str, str] | None = None,
        in_transaction: Callable[[], None] | None = None,
    ) -> IngestReport:
        """Write ``docs`` (already validated) and rebuild their ancestors' summaries bottom-up.

        ``abstracts`` may override the extractive abstract per URI (a skill's abstract is its description).
        ``in_transaction`` runs inside the content + metadata transaction, so its metadata writes (a memory's previous
        version) commit or roll back with the documents.
        Unchanged documents (same content hash, indexed) are counted as ``unchanged`` and not rewritten.

        Raises:
            ContextEngineError: ``WRT-4091`` when a URI is already a directory (or a file sits on a path that must be
                a directory); ``WRT-5031`` embedding failed; ``WRT-5001`` storage failed. In each case nothing changed.
        """
        report = IngestReport()
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
            if old is not None and old.content_hash == doc.content_hash and old.index_status == "indexed":
                report.unchanged += 1
                continue
            todo.append(doc)
        if not todo:
            return report
        self._check_no_file_ancestors(account_id, todo)
        now = utcnow()
        prepared = [self._prepare(account_id, doc, now, (abstracts or {}).get(str(doc.uri))) for doc in todo]
        dir_uris = {str(a) for p in prepared for a in ContextURI.parse(p.record.uri).ancestors()}
        fresh = {p.record.uri: p.levels[Level.L0] or "" for p in prepared}
        dirs = self._prepare_directories(account_id, dir_uris, [p.record for p in prepared], now, fresh)
        nodes = prepared + dirs
        vectors = self._embed(account_id, nodes, progress)
        new_uris = frozenset(str(d.uri) for d in todo if str(d.uri) not in existing) | frozenset(
            n.record.uri for n in dirs if not n.existed
        )
        stale = self._commit(account_id, nodes, vectors, in_transaction, new_uris)
        report.pending = self._index_or_mark_pending(account_id, nodes, vectors, stale)
        report.nodes = len(prepared)
        report.directories = len(dirs)
        report.chunks = sum(len(p.chunks) for p in prepared)
        report.vectors = len(vectors)
        report.uris = [p.record.uri for p in prepared]
        return report

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
        chunks = self._chunker.chunk(parsed, doc_id=str(uri), category=uri.category, source=doc.source)
        summary = self._summarizer.summarize_document(parsed)
        abstract = abstract or doc.abstract
        if abstract:
            summary = Summary(abstract=abstract, overview=summary.overview)
        if doc.whole_text_l0:
            chunks = []
        record = NodeRecord(
            account_id=account_id,
            uri=str(uri),
            parent_uri=str(uri.parent) if uri.parent else None,
            owner_space=uri.owner_space,
            context_type=uri.context_type,
            category=uri.category,
            is_dir=False,
            title=doc.title or parsed.title,
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

    def _prepare_directories(
        self,
        account_id: str,
        dir_uris: set[str],
        changed: Sequence[NodeRecord],
        now,
        fresh_abstracts: dict[str, str] | None = None,
    ) -> list[_PreparedNode]:
        """Summarise ``dir_uris`` bottom-up from their children: the stored ones, overridden by ``changed``."""
        by_uri: dict[str, NodeRecord] = {r.uri: r for r in changed}
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
            unseen = [u for u in fresh if u not in children]
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

    def _embed(self, account_id: str, nodes: Sequence[_PreparedNode], progress: Progress | None) -> list[VectorRecord]:
        texts: list[str] = []
        meta: list[tuple[_PreparedNode, int, int, str, str]] = []  # node, level, chunk_index, text, breadcrumb
        for n in nodes:
            if n.record.context_type is None:
                continue  # space roots above a type root hold no content and are not searchable
            abstract = n.levels[Level.L0] or n.record.title
            texts.append(f"{n.context}\n{abstract}" if n.context else abstract)
            meta.append((n, 0, 0, abstract, ""))
            for c in n.chunks:
                texts.append(embedding_input(c))
                meta.append((n, 2, c.chunk_index, c.text, format_breadcrumb(c.breadcrumb)))
        total = len(texts)
        done = 0

        def tick(k: int) -> None:
            nonlocal done
            done += k
            if progress:
                progress("embed", done, total)

        matrix = self._embedder.embed_documents(texts, progress=tick if progress else None)
        if matrix.shape != (total, self._embedder.dim) or not np.all(np.isfinite(matrix)):
            raise ContextEngineError(ErrorCode.EMBEDDING_FAILED, "the embedder returned malformed vectors")
        out: list[VectorRecord] = []
        for (n, level, ci, text, crumb), vec in zip(meta, matrix, strict=True):
            r = n.record
            out.append(
                VectorRecord(
                    id=vector_id(account_id, r.uri, level, ci),
                    vector=vec,
                    uri=r.uri,
                    parent_uri=r.parent_uri,
                    account_id=account_id,
                    owner_space=r.owner_space,
                    context_type=r.context_type or "",
                    category=r.category or "",
                    level=level,
                    doc_id=r.uri,
                    chunk_index=ci,
                    text=text,
                    breadcrumb=crumb,
                    context=n.context if level == 0 else "",
                )
            )
        return out

    def _commit(
        self,
        account_id: str,
        nodes: Sequence[_PreparedNode],
        vectors: Sequence[VectorRecord],
        in_transaction: Callable[[], None] | None = None,
        new_uris: frozenset[str] = frozenset(),
    ) -> set[str]:
        """Content + metadata in one transaction; content restored if anything fails.

        Returns the ids of the nodes' previous vectors that the new ones do not replace (to drop from the index).
        """
        snapshots: list[tuple[str, dict[Level, str | None], bool]] = []
        stale = set(self._metadata.vector_ids_for(account_id, [n.record.uri for n in nodes]))
        try:
            with self._metadata.transaction():
                if in_transaction is not None:
                    in_transaction()
                self._metadata.upsert_nodes([n.record for n in nodes])
                self._metadata.delete_vectors(sorted(stale))
                self._metadata.put_vectors(vectors)
                for n in nodes:
                    if n.record.uri in new_uris:  # no node there before: nothing to snapshot, delete on rollback
                        old: dict[Level, str | None] = {lv: None for lv in n.levels}
                    else:
                        old = {lv: self._content.read_level(account_id, n.record.uri, lv) for lv in n.levels}
                    snapshots.append((n.record.uri, old, any(v is not None for v in old.values())))
                    self._content.write_levels(account_id, n.record.uri, n.levels)
                self._notify_written(account_id, nodes, vectors)
        except BaseException:
            # Restore every file, each on its own: one failed restore must not leave the others as written.
            for uri, old, existed in reversed(snapshots):
                try:
                    if existed:
                        self._content.write_levels(account_id, uri, old)
                    else:
                        self._content.delete(account_id, uri)
                except Exception:  # noqa: BLE001 - best effort; the original error is what the caller must see
                    _LOG.exception("content restore failed for %s", uri)
            raise
        return stale - {v.id for v in vectors}

    def _index_or_mark_pending(
        self, account_id: str, nodes: Sequence[_PreparedNode], vectors: Sequence[VectorRecord], stale: set[str]
    ) -> int:
        """Update the vector index; on failure leave the nodes ``pending`` and return how many there are."""
        uris = [n.record.uri for n in nodes]
        try:
            if stale:
                self._index.delete(sorted(stale))
            self._index.upsert(vectors)
        except ContextEngineError:
            # Nothing half-visible: withdraw whatever part of this write may have reached the index.
            try:
                self._index.delete([v.id for v in vectors])
            except ContextEngineError:
                pass  # the nodes stay pending, and searches skip pending nodes, so a leftover is never served
            return len(uris)
        self._metadata.set_index_status(account_id, uris, "indexed")
        return 0

    # ------------------------------------------------------------------------------------------------ delete
    def delete(self, account_id: str, uri: ContextURI, *, recursive: bool) -> IngestReport:
        """Delete a node (a directory only with ``recursive``), then refresh the ancestors' summaries.

        Raises:
            ContextEngineError: ``WRT-4042`` no such node; ``WRT-4091`` non-empty directory without ``recursive``;
                ``WRT-4002`` for a scope or space root.
        """
        node = self._metadata.get_node(account_id, str(uri))
        if node is None:
            raise ContextEngineError(ErrorCode.NODE_NOT_FOUND, f"no node at {uri}")
        if not uri.segments:
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, "a scope or space root cannot be deleted")
        subtree = self._metadata.list_subtree(account_id, node.uri)
        # Without recursive exactly one node goes, whatever its kind: nothing below it is ever wiped on the way.
        if len(subtree) > 1 and not recursive:
            raise ContextEngineError(
                ErrorCode.CONFLICT,
                f"{node.uri} has {len(subtree) - 1} nodes below it; delete it with --recursive",
                {"uri": node.uri, "descendants": len(subtree) - 1},
            )
        uris = [n.uri for n in subtree]
        ids = self._metadata.vector_ids_for(account_id, uris)
        self._index.delete(ids)  # index first: a crash after this leaves no searchable orphan
        with self._metadata.transaction():
            self._metadata.delete_vectors(ids)
            self._metadata.delete_nodes(account_id, uris)
            self._notify_deleted(account_id, uris)
        self._content.delete(account_id, node.uri)
        report = IngestReport(nodes=len(subtree), vectors=len(ids), uris=uris)
        self._refresh_directories(account_id, ContextURI.parse(node.uri).parent)
        return report

    def _refresh_directories(self, account_id: str, start: ContextURI | None) -> None:
        """Rebuild the summaries of ``start`` and its ancestors from the store (after a delete or move)."""
        if start is None:
            return
        dir_uris = {str(start)} | {str(a) for a in start.ancestors()}
        dirs = self._prepare_directories(account_id, dir_uris, [], utcnow())
        vectors = self._embed(account_id, dirs, None)
        stale = self._commit(account_id, dirs, vectors)
        self._index_or_mark_pending(account_id, dirs, vectors, stale)

    # ------------------------------------------------------------------------------------------------ move
    def move(self, account_id: str, src: ContextURI, dst: ContextURI) -> IngestReport:
        """Move a node and its subtree; vectors are re-keyed, not re-embedded. Summaries of both parents refresh.

        A destination that is an existing directory receives the node under its own name.

        Raises:
            ContextEngineError: ``WRT-4042`` no source; ``WRT-4091`` destination exists, lies inside the source, or
                sits below a file; ``WRT-4001`` destination outside a context-type root; ``WRT-4002`` for a root.
        """
        node = self._metadata.get_node(account_id, str(src))
        if node is None:
            raise ContextEngineError(ErrorCode.NODE_NOT_FOUND, f"no node at {src}")
        src = ContextURI.parse(node.uri)
        if not src.segments:
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, "a scope or space root cannot be moved")
        target = self._metadata.get_node(account_id, str(dst))
        if target is not None and target.is_dir:
            dst = ContextURI.parse(target.uri).child(src.name, is_dir=src.is_dir)
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

        subtree = self._metadata.list_subtree(account_id, node.uri)
        old_prefix, new_prefix = str(src), str(dst)

        def remap(u: str) -> ContextURI:
            return ContextURI.parse(new_prefix + u[len(old_prefix) :] if u != old_prefix else new_prefix)

        now = utcnow()
        moved: list[_PreparedNode] = []
        for n in subtree:
            nu = remap(n.uri)
            rec = n.model_copy(
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
            moved.append(_PreparedNode(rec, {}))
        old_vectors = self._metadata.get_vectors(account_id, [n.uri for n in subtree])
        new_vectors = []
        for v in old_vectors:
            nu = remap(v.uri)
            new_vectors.append(
                v.model_copy(
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
            )
        old_ids = [v.id for v in old_vectors]
        self._index.delete(old_ids)
        with self._metadata.transaction():
            self._metadata.delete_vectors(old_ids)
            self._metadata.delete_nodes(account_id, [n.uri for n in subtree])
            self._metadata.upsert_nodes([m.record for m in moved])
            self._metadata.put_vectors(new_vectors)
            self._notify_deleted(account_id, [n.uri for n in subtree])
            self._notify_written(account_id, moved, new_vectors)
            self._content.move(account_id, node.uri, new_prefix)
        pending = self._index_or_mark_pending(account_id, moved, new_vectors, set())
        # New parents may not exist yet: create and summarise them (and a moved directory, whose own summary names
        # it), then refresh the old side.
        dir_uris = {str(a) for a in dst.ancestors()} | ({new_prefix} if src.is_dir else set())
        dirs = self._prepare_directories(account_id, dir_uris, [moved[0].record], now)
        dvec = self._embed(account_id, dirs, None)
        stale = self._commit(account_id, dirs, dvec)
        self._index_or_mark_pending(account_id, dirs, dvec, stale)
        self._refresh_directories(account_id, src.parent)
        return IngestReport(nodes=len(subtree), vectors=len(new_vectors), pending=pending, uris=[new_prefix])

    # ------------------------------------------------------------------------------------------------ reindex
    def reindex(
        self, account_id: str | None = None, *, full: bool = False, progress: Progress | None = None
    ) -> IngestReport:
        """Push vectors kept in the metadata store into the vector index.

        Default: only ``pending`` nodes (repairs failed index writes). ``full=True``: every vector of the account
        (or of every account when ``account_id`` is ``None``), e.g. after the index directory was lost.
        """
        report = IngestReport()
        accounts = [account_id] if account_id else self._metadata.accounts()
        for acc in accounts:
            if full:
                nodes = self._metadata.list_all_nodes(acc)
            else:
                nodes = self._metadata.pending_nodes(acc)
            uris = [n.uri for n in nodes]
            for start in range(0, len(uris), 512):
                batch = uris[start : start + 512]
                vectors = self._metadata.get_vectors(acc, batch)
                self._index.upsert(vectors)
                self._metadata.set_index_status(acc, batch, "indexed")
                report.vectors += len(vectors)
                report.nodes += len(batch)
                if progress:
                    progress("reindex", report.nodes, len(uris))
        self._index.optimize()
        return report
