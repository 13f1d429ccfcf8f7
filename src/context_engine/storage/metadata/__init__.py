"""storage/metadata."""
