"""storage/vector."""
