"""storage/content."""
