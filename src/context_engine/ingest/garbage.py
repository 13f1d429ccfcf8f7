"""``reindex --gc`` (DESIGN.md §3): remove the content and the vector-index rows that no node owns.

:class:`GarbageCollector` sweeps the three stores of a :class:`~context_engine.ingest.pipeline.WritePipeline`, which
calls it from ``collect_garbage``. Split out of that module (issue 28: no module over 800 lines), which re-exports
:class:`GarbageReport`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.ingest.journal import WriteJournal
from context_engine.schema.nodes import Level
from context_engine.storage.protocols import ContentStore, MetadataStore, VectorIndex

__all__ = ["GarbageCollector", "GarbageReport"]

_LOG = logging.getLogger("context_engine.ingest")


@dataclass
class GarbageReport:
    """What ``reindex --gc`` removed.

    Attributes:
        accounts: accounts swept.
        content_nodes: nodes whose content (level objects or files) no node owned, removed.
        vector_rows: vector-index rows no metadata row owned, removed.
    """

    accounts: int = 0
    content_nodes: int = 0
    vector_rows: int = 0


class GarbageCollector:
    """One sweep over a write pipeline's stores; ``journal`` is its write journal (recovered first, used to sync)."""

    def __init__(
        self, content: ContentStore, metadata: MetadataStore, index: VectorIndex, journal: WriteJournal
    ) -> None:
        self._content = content
        self._metadata = metadata
        self._vectors = index
        self.journal = journal

    def collect(self, account_id: str | None = None) -> GarbageReport:
        """``reindex --gc``: remove the content and the vector-index rows that no node owns, on any content store.

        Orphans are what a write left that neither its commit nor its undo records account for (a write whose
        content could not be undone and whose row was lost, content written by versions before the write journal,
        a metadata database restored from an older backup). First the journal is recovered (so the content of a
        crashed write is rolled back, not taken for an orphan), then each account is swept under the write lock.
        O(store): every content object and every vector row of the accounts is listed.

        Args:
            account_id: one account, or ``None`` for every account the metadata or the content store knows.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when a store fails; what was removed before stays removed.
        """
        self.journal.recover(repair=True)
        if account_id is not None:
            accounts = [account_id]
        else:
            accounts = sorted(set(self._metadata.accounts()) | set(self._content.account_ids()))
        if accounts and not self._metadata.accounts():
            # every node would look orphaned: the metadata database is empty or not this deployment's (a wrong or
            # missing metadata.url beside shared content and vector stores); refuse rather than delete it all
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID,
                "reindex --gc: the metadata database holds no nodes but the content store holds accounts "
                f"{', '.join(accounts[:5])}: check metadata.url (nothing was removed)",
                {"accounts": accounts[:20]},
            )
        report = GarbageReport()
        for acc in accounts:
            self.sweep(acc, report)
        return report

    def sweep(self, account_id: str, report: GarbageReport) -> None:
        """Remove one account's orphaned content and vector rows, counting them into ``report``."""
        report.accounts += 1
        report.content_nodes += self._remove_orphan_content(account_id)
        report.vector_rows += self._remove_orphan_vectors(account_id)

    def _remove_orphan_content(self, account_id: str) -> int:
        """Remove the content of nodes the metadata does not know, under the write lock (so no write in flight is
        mistaken for an orphan). A folder that still holds live descendants loses only its own level files.

        The crashed writes' content changes are rolled back first, inside the same lock: a moved subtree's new place
        has no node until the move commits, and must be moved back, not removed."""
        removed = 0
        with self._metadata.transaction():
            self._metadata.lock_writes()
            self.journal.recover_prepared()
            on_disk = self._content.node_uris(account_id)
            known = self._metadata.get_nodes(account_id, on_disk)
            for uri in on_disk:
                if uri in known:
                    continue
                live = any(k.startswith(uri) for k in known) if uri.endswith("/") else False
                if live:
                    self._content.write_levels(account_id, uri, {lv: None for lv in Level})
                else:
                    self._content.delete(account_id, uri)
                removed += 1
        if removed:
            _LOG.warning("removed the content of %d nodes unknown to the metadata (account %s)", removed, account_id)
        return removed

    def _remove_orphan_vectors(self, account_id: str) -> int:
        """Delete from the vector index the rows the metadata store does not hold (left by versions before the
        write journal). Rows written meanwhile are in the metadata store first, so they are never taken for orphans."""
        held = self._vectors.ids(account_id)  # the matrix and exact indexes hold the metadata's rows: no orphans
        if not held:
            return 0
        kept = {i for batch in self._metadata.iter_vectors(account_id) for i in (v.id for v in batch)}
        orphans = [i for i in held if i not in kept]
        if orphans:
            self.journal.sync(account_id, orphans)  # under the sync lock, from the metadata rows: absent -> deleted
            _LOG.warning("removed %d vector-index rows unknown to the metadata (account %s)", len(orphans), account_id)
        return len(orphans)
