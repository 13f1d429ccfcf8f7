"""Session dedup of lookup_knowledge: ``RetrievedDocTracker`` (DESIGN.md §7.5; seed 001 §8).

``principal + session_id + doc_key``: a document already returned in this diagnosis session (and not expired) comes
back as ``DEDUPED`` with a ``dedup_reason`` instead of its text, so the same runbook never enters the agent's
context twice, and the agent learns that this direction was already looked at. The ledger is per session only, never
a global cache, and entries expire after ``dedup_ttl_s``. A session belongs to the principal
(``role:user_space:agent_space``) that uses it: another user of the account who sends the same session id has a
session of its own and learns nothing of what the first one saw. It lives in the metadata database
(``retrieved_docs``), so every replica of a stateless service shares it (DESIGN §13). ``doc_key`` is the document
URI within the account.

Reads happen before the result is built; the new marks are written in the same transaction as the invocation row
(:meth:`ToolInvocationRecorder.record`), so a document counts as retrieved exactly when an audit row says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from context_engine.storage.metadata.audit import LedgerEntry
from context_engine.storage.protocols import AuditStore


class RetrievedDocTracker:
    """Which documents a session already received.

    Args:
        store: the ledger's table.
        ttl_s: seconds an entry stays valid.
    """

    #: Calls between two purges of expired ledger rows (per process).
    PURGE_EVERY = 500

    def __init__(self, store: AuditStore, ttl_s: int) -> None:
        self._store = store
        self.ttl_s = ttl_s
        self._calls = 0

    @staticmethod
    def doc_key(doc_id: str) -> str:
        """The ledger key of a document: its URI (accounts are separated by the ledger's own column)."""
        return doc_id

    def already_retrieved(
        self, account_id: str, principal: str, session_id: str | None, doc_ids: Sequence[str], now: datetime
    ) -> dict[str, LedgerEntry]:
        """Entries (by doc id) of ``doc_ids`` the principal's session already received, not expired at ``now``.

        ``session_id=None`` (no session) never dedups.
        """
        if session_id is None or not doc_ids:
            return {}
        keys = {self.doc_key(d): d for d in doc_ids}
        found = self._store.seen_documents(account_id, principal, session_id, list(keys), now)
        return {keys[k]: entry for k, entry in found.items()}

    def dedup_reason(self, session_id: str, entry: LedgerEntry) -> str:
        """The human-readable reason recorded for a withheld document."""
        return (
            f"already returned in session {session_id} by invocation {entry.invocation_id} at "
            f"{entry.retrieved_at.isoformat(timespec='seconds')}; not repeated until "
            f"{entry.expires_at.isoformat(timespec='seconds')}"
        )

    def purge_expired(self, now: datetime) -> int:
        """Delete expired ledger rows (all accounts); returns how many."""
        return self._store.purge_expired(now)

    def maybe_purge(self, now: datetime) -> int:
        """Purge expired rows once every :attr:`PURGE_EVERY` calls, so the ledger does not grow without bound."""
        self._calls += 1
        if self._calls % self.PURGE_EVERY:
            return 0
        return self.purge_expired(now)
