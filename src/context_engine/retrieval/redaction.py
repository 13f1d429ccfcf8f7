"""Secret redaction moved to :mod:`context_engine.redaction` (issue 14: every layer calls it, ingest and logging
included); this name is kept for existing imports."""

from context_engine.redaction import PATTERNS, Redaction, Redactor

__all__ = ["PATTERNS", "Redaction", "Redactor"]
