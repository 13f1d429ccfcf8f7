"""Content store adapters (ContextFS)."""

from context_engine.storage.content.local import LocalContentStore

__all__ = ["LocalContentStore"]
