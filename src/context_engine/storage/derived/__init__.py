"""Derived indexes: in-memory structures rebuilt from the metadata store and kept current by the one invalidation
rule (docs/derived_indexes.md). :mod:`.base` holds what they share; the level-0 matrix
(:mod:`context_engine.storage.vector.matrix`) and BM25 (:mod:`context_engine.storage.keyword.bm25_index`) are its
subclasses; their files are :mod:`context_engine.storage.derived_files`."""
