"""QueryVectors: each query text of a request embedded once, likely texts in one batch (retrieval/query_vectors.py).

The embedder here is the bag-of-words ``HashEmbedder`` behind a counting wrapper: what is tested is the code around
the model (how often it is called, with what); the real model's batches are compared with its single calls in
``tests/integration/test_query_vectors.py``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.retrieval.query_vectors import QueryVectors, TextVectors, embed_queries
from context_engine.retrieval.search_memory import _acronym

from .conftest import ALICE, HashEmbedder


class Counting(HashEmbedder):
    """Records each call: ``("one", text)`` or ``("batch", texts)``; ``fail_batches`` makes every batch fail."""

    def __init__(self, fail_batches: bool = False) -> None:
        self.calls: list[tuple[str, object]] = []
        self.fail_batches = fail_batches

    def embed_query(self, text: str) -> np.ndarray:
        self.calls.append(("one", text))
        return super().embed_query(text)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(("batch", list(texts)))
        if self.fail_batches:  # any exception: an embedder of the caller's own may raise its own types
            raise RuntimeError("model down")
        return np.stack([super(Counting, self).embed_query(t) for t in texts])


def test_a_text_is_embedded_once_and_likely_texts_in_one_batch():
    emb = Counting()
    vectors = QueryVectors(emb)
    vectors.prefetch(["Where is Sam employed?", "Where is employed?", "Where is employed?", "Where is I employed?"])
    assert emb.calls == [("batch", ["Where is Sam employed?", "Where is employed?", "Where is I employed?"])]
    first = vectors.embed_query("Where is employed?")
    vectors.prefetch(["Where is Sam employed?", "Where is I employed?"])  # all known: no call
    assert len(emb.calls) == 1
    assert np.array_equal(first, HashEmbedder().embed_query("Where is employed?"))
    vectors.embed_query("How old is Sam?")  # not guessed: embedded alone when needed, then kept
    vectors.embed_query("How old is Sam?")
    assert emb.calls[1:] == [("one", "How old is Sam?")]
    assert (vectors.embedded, vectors.batches) == (4, 2)


def test_a_failed_batch_leaves_each_text_to_its_own_call():
    emb = Counting(fail_batches=True)
    vectors = QueryVectors(emb)
    vectors.prefetch(["Where is Sam employed?", "Where is employed?"])  # fails quietly
    assert vectors.embedded == 0
    vector = vectors.embed_query("Where is Sam employed?")
    assert emb.calls[-1] == ("one", "Where is Sam employed?")
    assert np.array_equal(vector, HashEmbedder().embed_query("Where is Sam employed?"))


def test_a_failed_single_call_raises_as_the_embedder_does():
    class Broken(HashEmbedder):
        def embed_query(self, text: str) -> np.ndarray:
            raise ContextEngineError(ErrorCode.EMBEDDING_FAILED, "model failed", retryable=True)

    with pytest.raises(ContextEngineError) as err:
        QueryVectors(Broken()).embed_query("anything")
    assert err.value.code is ErrorCode.EMBEDDING_FAILED


def test_an_embedder_without_batches_gets_no_guess_and_each_needed_text_once():
    class Singles(HashEmbedder):  # embed_query only, as an embedder of a caller's own may be
        def __init__(self) -> None:
            self.calls: list[str] = []

        def embed_query(self, text: str) -> np.ndarray:
            self.calls.append(text)
            return super().embed_query(text)

    emb = Singles()
    assert embed_queries(emb, ["a cat", "a dog"]) is None
    vectors = QueryVectors(emb)
    vectors.prefetch(["a cat", "a dog", "a bird"])  # no batch method: nothing embedded ahead
    assert emb.calls == []
    vectors.embed_query("a dog")
    vectors.embed_query("a dog")
    assert emb.calls == ["a dog"] and (vectors.embedded, vectors.batches) == (1, 1)


def test_a_batch_of_the_wrong_shape_is_dropped():
    class Short(Counting):
        def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
            self.calls.append(("batch", list(texts)))
            return np.stack([HashEmbedder.embed_query(self, t) for t in texts[:-1]])  # one row short

    emb = Short()
    vectors = QueryVectors(emb)
    vectors.prefetch(["Where is Sam employed?", "Where is employed?"])
    assert vectors.embedded == 0
    assert np.array_equal(vectors.embed_query("Where is employed?"), HashEmbedder().embed_query("Where is employed?"))
    assert emb.calls[-1] == ("one", "Where is employed?")


class CountingDocuments(HashEmbedder):
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed_documents(self, texts: Sequence[str], *, progress: object = None) -> np.ndarray:
        self.calls.append(list(texts))
        return super().embed_documents(texts)


def test_hit_texts_are_embedded_once_across_requests_within_the_cache_size():
    emb = CountingDocuments()
    vectors = TextVectors(maxsize=2)
    first = vectors.embed(emb, ["Sam: I work at Northwind.", "Sam: Hi again!"])
    assert emb.calls == [["Sam: I work at Northwind.", "Sam: Hi again!"]]
    again = vectors.embed(emb, ["Sam: Hi again!", "Sam: I work at Northwind.", "Sam: Hi again!"])  # a later request
    assert len(emb.calls) == 1
    assert np.array_equal(again, first[[1, 0, 1]])
    vectors.embed(emb, ["Sam: The cat hides under the sofa."])  # the least recently used text ("Hi again!") is dropped
    vectors.embed(emb, ["Sam: I work at Northwind.", "Sam: Hi again!"])
    assert emb.calls[1:] == [["Sam: The cat hides under the sofa."], ["Sam: Hi again!"]]
    assert len(vectors) == 2
    assert vectors.embed(emb, []).shape == (0, emb.dim)


def test_another_model_never_gets_a_kept_vector():
    class Other(CountingDocuments):
        model_name = "test/another-model"

    first, other = CountingDocuments(), Other()
    vectors = TextVectors()
    vectors.embed(first, ["Sam: I work at Northwind."])
    vectors.embed(other, ["Sam: I work at Northwind."])
    assert other.calls == [["Sam: I work at Northwind."]]


def test_a_failed_embedding_keeps_nothing():
    class Broken(HashEmbedder):
        def embed_documents(self, texts: Sequence[str], *, progress: object = None) -> np.ndarray:
            raise ContextEngineError(ErrorCode.EMBEDDING_FAILED, "model failed", retryable=True)

    vectors = TextVectors()
    with pytest.raises(ContextEngineError):
        vectors.embed(Broken(), ["Sam: Hi again!"])
    assert len(vectors) == 0


# ---- the pipeline's guesses ------------------------------------------------------------------------------------------
def test_the_guess_names_people_and_the_user_not_acronyms(hash_engine):
    pipeline = hash_engine().search_pipeline
    assert pipeline._likely_texts("Where is Sam employed?", "Where is Sam employed?") == [
        "Where is Sam employed?",
        "Where is employed?",
        "Where is I employed?",
    ]
    assert pipeline._likely_texts("What subject did the user teach?", "What subject did the user teach?") == [
        "What subject did the user teach?",
        "What subject did I teach?",
        "What subject did I teach?",  # a repeat QueryVectors embeds once
    ]
    # terms: no guess, the query alone (an acronym is not taken for a speaker)
    assert pipeline._likely_texts("checkout queue CPU throttling", "checkout queue CPU throttling") == [
        "checkout queue CPU throttling"
    ]
    assert _acronym("checkout queue CPU throttling", "cpu") and not _acronym("Where is Sam employed?", "sam")
    assert not _acronym("Is the C++ build (c++) slow?", "c++")  # special characters are escaped, "c++" is lowercase


class BatchesDown(HashEmbedder):
    """Every embedding fails, batches and single calls: the model is down."""

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        raise ContextEngineError(ErrorCode.EMBEDDING_FAILED, "model failed", retryable=True)

    def embed_query(self, text: str) -> np.ndarray:
        raise ContextEngineError(ErrorCode.EMBEDDING_FAILED, "model failed", retryable=True)


def test_a_query_that_cannot_be_embedded_is_a_retryable_answer_without_hits(hash_engine):
    engine = hash_engine()
    engine.add_memory("Sam works at Northwind as a data engineer.", ALICE)
    engine.search_pipeline._embedder = BatchesDown()  # the store was written; the model goes down afterwards
    r = engine.search_memory("Where is Sam employed?", ALICE)
    assert r.hits == [] and r.retryable and r.match_quality == "none"
    assert any(w.startswith(ErrorCode.VECTOR_SEARCH_FAILED.value) for w in r.trace.warnings)
