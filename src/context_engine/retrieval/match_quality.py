"""How confident a ``search_memory`` answer is: the ``match_quality`` label (``strong`` | ``weak`` | ``none``).

Every answer carries the label, and the label never removes a hit: an agent still gets the ranked hits, and learns
whether the best of them is worth acting on. Pure functions over the pipeline's final hits; no I/O, no model.

The rule (thresholds in ``retrieval.match_quality``, defaults in brackets; docs/search_memory.md gives the measured
rates and the command that reproduces them):

* **basis**: the returned file hits (directories are navigation, not answers); only when every hit is a directory,
  the directories, and then the label is at most ``weak``.
* **similarity**: the best calibrated cosine of the basis, ``clip(scale(cosine), 0, 1)`` (the embedding model's
  :class:`~context_engine.schema.similarity.SimilarityScale`, so one threshold means the same for every model).
  Meaning alone: it holds across wordings and languages.
* **missing names**: the names the query mentions (:func:`query_names`: capitalised words inside a sentence,
  ``Nate``, ``LGBTQ``, ``Lisbon``; not at a sentence start, not function words or month and weekday names) that no
  candidate of the request mentions (:func:`mentions`: whole word, case-folded, in its L0 text). A question about
  someone or something the store's best matches never name is seldom answered by them: "What is Nate's favorite
  genre of movies?" over a conversation between Tim and John finds their favourite genres, close in meaning
  (calibrated cosine 0.7), and not about Nate. Queries without capitals (Chinese, lower-case) have no names.
* **evidence** = similarity − ``missing_name_penalty`` [0.4] × the share of the query's names that are missing
  (0 when it names nothing).
* ``none`` when there is no hit or evidence < ``none_below_evidence`` [0.25]; ``strong`` when evidence ≥
  ``strong_min_evidence`` [0.5] and the first file hit's own vector score (its fused meaning + words score with the
  hybrid first round, ``FirstRound.lexical``; else its calibrated cosine) ≥ ``strong_min_vector_score`` [0.4], the
  feature that best tells whether the first hit holds the answer; ``weak`` otherwise.

Why these values: ``none_below_evidence`` is the largest round value that keeps ``none`` under 5% of the answerable
questions of every dev set (a wrong ``none`` tells an agent to give up on an answer it has), and the others the round
values that best separate the dev sets' unanswerable questions and first-hit precision at that bound.

Calibrated on the conversation dev sets by ``bench/match_quality.py`` (answerable questions in their own
conversation; unanswerable ones: the same questions in another conversation, and the agent-shaped set's
``unanswerable`` category).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from context_engine.retrieval.scoring import vector_score
from context_engine.schema.hits import NodeHit
from context_engine.schema.query import MatchQuality
from context_engine.schema.similarity import IDENTITY, SimilarityScale
from context_engine.settings import MatchQualitySettings

__all__ = ["MatchFeatures", "MatchQualityRater", "mentions", "query_names"]

_DECIMALS = 6
# A word of a cased or uncased script (no digits, no underscore), with inner apostrophes ("Nate's", "O'Neil").
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_SENTENCE_END = frozenset(".!?;:…。！？；：\n")
_LEAD_IN = " \t\r\"'“”‘’«»()[]{}*•·-–—>#"
# Capitalised, these start questions, titles or quotes; they never name what the store must hold.
_FUNCTION_WORDS = frozenset(
    """a an the and or but nor so yet if then than i me my mine we us our ours you your yours he him his she her hers
    it its they them their theirs this that these those there here in on at to of for from by with about into onto
    over under after before during since until as is are was were be been being am do does did done have has had will
    would can could should shall might must may not no yes ok okay oh hi hello hey dear please thanks also just when
    where what who whom whose which why how all any some every each other another both either neither tell show
    give find list remind let""".split()
)
_CALENDAR = frozenset(
    """january february march april may june july august september october november december monday tuesday
    wednesday thursday friday saturday sunday""".split()
)


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _starts_sentence(text: str, start: int) -> bool:
    """Whether the word at ``start`` is the first of a sentence (only lead-in characters since a sentence end)."""
    before = text[:start].rstrip(_LEAD_IN)
    return not before or before[-1] in _SENTENCE_END


def query_names(query: str) -> list[str]:
    """The names a query mentions, case-folded, in order of first appearance, without duplicates.

    A name is a word that starts with an upper-case letter, is not the first word of a sentence, and whose part
    before an apostrophe is not a function word (``What``, ``I``, ``The``) or a month or weekday name (those are in
    questions about time, while the store keeps times as metadata). ``"What is Nate's favorite genre?"`` ->
    ``["nate"]``; ``"When did Caroline go to the LGBTQ support group?"`` -> ``["caroline", "lgbtq"]``; a query
    without capitals (Chinese, lower-case) names nothing.
    """
    text = unicodedata.normalize("NFKC", query)
    names: dict[str, None] = {}
    for m in _WORD.finditer(text):
        word = m.group(0)
        if not word[0].isupper() or _starts_sentence(text, m.start()):
            continue
        base = _fold(re.split(r"['’]", word, maxsplit=1)[0])
        if len(base) < 2 or base in _FUNCTION_WORDS or base in _CALENDAR:
            continue
        names[base] = None
    return list(names)


def mentions(text: str, name: str) -> bool:
    """Whether ``text`` mentions the case-folded ``name`` as a whole word (case-folded, NFKC)."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", _fold(text)) is not None


@dataclass(frozen=True, slots=True)
class MatchFeatures:
    """What the rule reads (module docstring), for the label and the detailed trace.

    Attributes:
        similarity: the best calibrated cosine of the basis, 0..1.
        first_vector_score: the first basis hit's own vector score, 0..1 (fused with hybrid, else calibrated cosine).
        names: the names the query mentions (:func:`query_names`).
        missing_names: those no candidate mentions.
        evidence: ``similarity`` less ``missing_name_penalty`` times the share of ``names`` missing (may be
            negative).
        files: whether the basis is file hits (``False``: only directories were returned, or nothing).
        hits: the number of hits the label describes.
    """

    similarity: float
    first_vector_score: float
    names: tuple[str, ...]
    missing_names: tuple[str, ...]
    evidence: float
    files: bool
    hits: int

    def as_dict(self) -> dict[str, Any]:
        """The features as JSON-ready values (lists for the name tuples)."""
        out = asdict(self)
        out["names"], out["missing_names"] = list(self.names), list(self.missing_names)
        return out


class MatchQualityRater:
    """Labels a ``search_memory`` answer ``strong`` | ``weak`` | ``none`` (module docstring).

    Args:
        settings: the ``retrieval.match_quality`` section (thresholds).
        scale: the embedding model's similarity scale (calibrated cosine).
    """

    def __init__(self, settings: MatchQualitySettings, scale: SimilarityScale = IDENTITY) -> None:
        self._settings = settings
        self._scale = scale

    def features(self, query: str, hits: Sequence[NodeHit], candidates: Iterable[NodeHit] = ()) -> MatchFeatures:
        """The rule's inputs for one answer.

        Args:
            query: the caller's query text.
            hits: the returned hits, in rank order.
            candidates: every candidate the request ranked (the returned hits are added to them); a name counts as
                mentioned when any of them mentions it.

        Returns:
            :class:`MatchFeatures`; with no hits, zero similarity and evidence.
        """
        files = [h for h in hits if not h.is_dir]
        basis = files or list(hits)
        names = tuple(query_names(query))
        pool = [*hits, *candidates]
        missing = tuple(n for n in names if not any(mentions(h.abstract, n) for h in pool))
        if not basis:
            return MatchFeatures(0.0, 0.0, names, missing, 0.0, False, 0)
        similarity = max(vector_score(h.similarity, self._scale) for h in basis)
        penalty = self._settings.missing_name_penalty * len(missing) / len(names) if names else 0.0
        return MatchFeatures(
            similarity=round(similarity, _DECIMALS),
            first_vector_score=round(min(1.0, max(0.0, basis[0].vector_score)), _DECIMALS),
            names=names,
            missing_names=missing,
            evidence=round(similarity - penalty, _DECIMALS),
            files=bool(files),
            hits=len(hits),
        )

    def label(self, features: MatchFeatures) -> MatchQuality:
        """``none`` | ``weak`` | ``strong`` for the features (module docstring)."""
        s = self._settings
        if features.hits == 0 or features.evidence < s.none_below_evidence:
            return "none"
        if (
            features.files
            and features.evidence >= s.strong_min_evidence
            and features.first_vector_score >= s.strong_min_vector_score
        ):
            return "strong"
        return "weak"

    def rate(self, query: str, hits: Sequence[NodeHit], candidates: Iterable[NodeHit] = ()) -> MatchQuality:
        """:meth:`label` of :meth:`features`."""
        return self.label(self.features(query, hits, candidates))
