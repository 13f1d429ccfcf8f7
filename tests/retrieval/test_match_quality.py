"""The match_quality rule (retrieval/match_quality.py): names in a query, the evidence, the three labels and their
thresholds; through the pipeline, the label is in every answer and never removes a hit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_engine.retrieval.match_quality import MatchQualityRater, mentions, query_names
from context_engine.schema.hits import NodeHit
from context_engine.schema.similarity import SimilarityScale
from context_engine.settings import MatchQualitySettings
from tests.retrieval.conftest import ALICE, seed_small_store

RATER = MatchQualityRater(MatchQualitySettings())


def hit(uri: str, similarity: float, vector: float | None = None, abstract: str = "", **kw) -> NodeHit:
    base = {"owner_space": "user:alice", "context_type": "memory", "is_dir": uri.endswith("/")}
    base.update(kw)
    return NodeHit(
        uri=uri,
        similarity=similarity,
        vector_score=similarity if vector is None else vector,
        abstract=abstract,
        **base,
    )


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("What is Nate's favorite genre of movies?", ["nate"]),
        ("When did Caroline go to the LGBTQ support group?", ["caroline", "lgbtq"]),
        ("What is the capital of France?", ["france"]),
        ("Nate's favourite genre?", []),  # the first word of a sentence is not taken for a name
        ("What did John attend in March 2023? And on Monday?", ["john"]),  # months, weekdays, sentence starts
        ("What does the user drink instead of coffee?", []),
        ("用户喜欢喝什么茶？", []),  # no case: no names
        ("Is I or The or What a name?", []),  # capitalised function words are not
        ("Did Anna meet Anna's sister?", ["anna"]),
    ],
)
def test_query_names(query, names):
    assert query_names(query) == names


def test_mentions_is_a_whole_word_case_folded():
    assert mentions("Nate: I love action movies", "nate")
    assert mentions("Maria's dogs", "maria")
    assert not mentions("Natalie likes films", "nate")
    assert not mentions("", "nate")


def test_no_hits_is_none():
    assert RATER.rate("anything", []) == "none"
    features = RATER.features("What is Nate's job?", [])
    assert features.hits == 0 and features.evidence == 0.0 and features.missing_names == ("nate",)


def test_thresholds_of_the_three_labels():
    s = MatchQualitySettings()
    low = [hit("ctx://user/alice/memories/a.md", s.none_below_evidence - 0.01, 0.9)]
    mid = [hit("ctx://user/alice/memories/a.md", s.strong_min_evidence - 0.01, 0.9)]
    words_weak = [hit("ctx://user/alice/memories/a.md", 0.9, s.strong_min_vector_score - 0.01)]
    both = [hit("ctx://user/alice/memories/a.md", s.strong_min_evidence, s.strong_min_vector_score)]
    assert RATER.rate("q", low) == "none"
    assert RATER.rate("q", mid) == "weak"
    assert RATER.rate("q", words_weak) == "weak"  # close in meaning, but the first hit's own match is weak
    assert RATER.rate("q", both) == "strong"


def test_similarity_is_the_best_file_hit_and_the_first_file_hit_decides_strong():
    hits = [
        hit("ctx://user/alice/memories/a.md", 0.30, 0.45),
        hit("ctx://user/alice/memories/b.md", 0.80, 0.20),
    ]
    f = RATER.features("q", hits)
    assert f.similarity == pytest.approx(0.80) and f.first_vector_score == pytest.approx(0.45)
    assert RATER.label(f) == "strong"
    swapped = RATER.features("q", list(reversed(hits)))
    assert swapped.first_vector_score == pytest.approx(0.20) and RATER.label(swapped) == "weak"


def test_directories_are_navigation_not_answers():
    directory = hit("ctx://user/alice/memories/health/", 0.95, 0.95)
    file = hit("ctx://user/alice/memories/health/a.md", 0.10, 0.10)
    assert RATER.features("q", [directory, file]).similarity == pytest.approx(0.10)  # the file decides
    assert RATER.rate("q", [directory, file]) == "none"
    only_dirs = RATER.features("q", [directory])
    assert not only_dirs.files and RATER.label(only_dirs) == "weak"  # at most weak when only directories came back


def test_a_missing_name_lowers_the_evidence_in_proportion():
    s = MatchQualitySettings()
    tim = [hit("ctx://user/alice/memories/a.md", 0.7, 0.5, "Tim: my favourite genre is fantasy")]
    about_nate = RATER.features("What is Nate's favorite genre?", tim)
    assert about_nate.missing_names == ("nate",)
    assert about_nate.evidence == pytest.approx(0.7 - s.missing_name_penalty)
    two = RATER.features("Did Nate and Tim like fantasy?", tim)
    assert two.missing_names == ("nate",) and two.evidence == pytest.approx(0.7 - s.missing_name_penalty / 2)
    assert RATER.features("What is Tim's favorite genre?", tim).evidence == pytest.approx(0.7)


def test_a_name_mentioned_by_any_candidate_is_not_missing():
    returned = [hit("ctx://user/alice/memories/a.md", 0.6, 0.5, "my favourite genre is fantasy")]
    candidate = hit("ctx://user/alice/memories/b.md", 0.1, 0.1, "Nate: hi there")
    assert RATER.features("What is Nate's favorite genre?", returned, [candidate]).missing_names == ()


def test_the_penalty_can_be_switched_off_and_the_scale_applies():
    off = MatchQualityRater(MatchQualitySettings(missing_name_penalty=0.0))
    hits = [hit("ctx://user/alice/memories/a.md", 0.7, 0.5, "Tim: fantasy")]
    assert off.features("What is Nate's genre?", hits).evidence == pytest.approx(0.7)
    scaled = MatchQualityRater(MatchQualitySettings(), SimilarityScale(0.5, 0.9))
    assert scaled.features("q", [hit("ctx://user/alice/memories/a.md", 0.7, 0.5)]).similarity == pytest.approx(0.5)
    assert scaled.features("q", [hit("ctx://user/alice/memories/a.md", 0.2, 0.5)]).similarity == 0.0


@given(
    sims=st.lists(st.floats(-1, 1), min_size=1, max_size=8),
    vectors=st.lists(st.floats(0, 1), min_size=8, max_size=8),
    extra=st.floats(0, 1),
)
@settings(max_examples=200, derandomize=True)
def test_a_better_match_never_lowers_the_label(sims, vectors, extra):
    """Monotone: raising a hit's similarity (or adding a hit) never moves the label towards ``none``."""
    order = {"none": 0, "weak": 1, "strong": 2}
    hits = [hit(f"ctx://user/alice/memories/{i}.md", s, vectors[i]) for i, s in enumerate(sims)]
    before = RATER.rate("q", hits)
    raised = [hits[0].model_copy(update={"similarity": min(1.0, hits[0].similarity + extra)}), *hits[1:]]
    assert order[RATER.rate("q", raised)] >= order[before]
    more = [*hits, hit("ctx://user/alice/memories/extra.md", 1.0, 0.0)]
    assert order[RATER.rate("q", more)] >= order[before] or before == "strong"  # strong reads the first hit too


# ---- through the pipeline (hashing embedder) -------------------------------------------------------------------------
def test_every_answer_carries_the_label_and_the_trace_shows_its_features(hash_engine):
    engine = hash_engine()
    seed_small_store(engine)
    r = engine.search_memory("Alice prefers short answers", ALICE, include_debug=True, trace_level="detailed")
    assert r.match_quality in ("strong", "weak")
    detail = r.thinking_trace["stages"]["assemble"]["match_quality"]
    assert detail["label"] == r.match_quality and detail["hits"] == len(r.hits)
    assert {"similarity", "evidence", "first_vector_score", "names", "missing_names", "files"} <= set(detail)
    off_topic = engine.search_memory("zebra quantum xylophone", ALICE)
    assert off_topic.match_quality == "none" and off_topic.hits  # labelled, never emptied
    counted = engine.metrics.registry.get_sample_value(
        "ce_retrieval_search_memory_match_quality_total", {"quality": "none"}
    )
    assert counted and counted >= 1


def test_the_label_never_removes_a_hit(hash_engine):
    """The same request answers the same hits whatever the thresholds say: the label only labels."""
    strict = hash_engine(retrieval={"match_quality": {"none_below_evidence": 1.0}})
    lenient = hash_engine(retrieval={"match_quality": {"none_below_evidence": 0.0, "strong_min_evidence": 0.0,
                                                      "strong_min_vector_score": 0.0}})
    for e in (strict, lenient):
        seed_small_store(e)
    a = strict.search_memory("Alice prefers short answers", ALICE)
    b = lenient.search_memory("Alice prefers short answers", ALICE)
    assert a.match_quality == "none" and b.match_quality == "strong"
    assert [(h.uri, h.score) for h in a.hits] == [(h.uri, h.score) for h in b.hits] and a.hits


def test_degraded_search_says_none(hash_engine, monkeypatch):
    from context_engine.errors import ContextEngineError, ErrorCode

    engine = hash_engine()
    seed_small_store(engine)

    def down(*_args, **_kwargs):
        raise ContextEngineError(ErrorCode.VECTOR_SEARCH_FAILED, "index is down", retryable=True)

    monkeypatch.setattr(engine.search_pipeline.source, "scorer", down)
    r = engine.search_memory("Alice prefers short answers", ALICE)
    assert r.retryable and r.hits == [] and r.match_quality == "none"
