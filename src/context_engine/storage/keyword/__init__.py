"""storage/keyword: the BM25 keyword index, a derived index kept in sync with writes like the vector index."""

from context_engine.storage.keyword.bm25_index import BM25Index, KeywordDoc, KeywordHit
from context_engine.storage.keyword.tokenize import KeywordTokenizer

__all__ = ["BM25Index", "KeywordDoc", "KeywordHit", "KeywordTokenizer"]
