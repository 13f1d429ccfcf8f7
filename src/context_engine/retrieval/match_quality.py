"""How confident a ``search_memory`` answer is: the ``match_quality`` label (``strong`` | ``weak`` | ``none``).

Every answer carries the label, and the label never removes a hit: an agent still gets the ranked hits, and learns
whether the best of them is worth acting on. Pure functions over the pipeline's final hits; no I/O, no model (the
pipeline embeds the speaker-neutral query below and passes its cosines in).

The rule (thresholds in ``retrieval.match_quality``, defaults in brackets; docs/search_memory.md gives the measured
rates and the command that reproduces them):

* **basis**: the returned file hits (directories are navigation, not answers) less the conversation messages that
  state nothing (:func:`answer_hits`: acknowledgements and questions back, whose cosine to a question is noise); all
  the file hits when each is such a message; only when every hit is a directory, the directories, and then the
  label is at most ``weak``.
* **similarity**: the best calibrated cosine of the basis, ``clip(scale(cosine), 0, 1)`` (the embedding model's
  :class:`~context_engine.schema.similarity.SimilarityScale`, so one threshold means the same for every model).
  Meaning alone: it holds across wordings and languages.
* **topic similarity**: when the query names a speaker of the returned conversation messages (a message's L0 is
  ``"<speaker>: <text>"``; ``Sam``, ``the user``), the best calibrated cosine of the basis to the *speaker-neutral*
  query (:func:`speaker_neutral`: each such reference in the first person, ``"How old is Sam?"`` -> ``"How old is
  I?"``, ``"the user's job"`` -> ``"my job"``; the pipeline embeds it and reads the returned hits' level-0 cosines
  to it: one query embedding, one lookup of at most ``top_k`` records); else the similarity. Why: the speaker
  prefix lifts every message of that speaker towards any question naming them, whatever the topic. On agent_dev a
  question about the user on a topic never mentioned ("How old is Sam?") reaches calibrated cosine 0.53 on
  "Sam: Hi again!", as high as answerable paraphrases; without the name it falls to 0.17, while answers keep theirs
  (median over the unanswerable questions 0.32 -> 0.15, over the answerable ones 0.53 -> 0.44).
  ``speaker_neutral_similarity`` [on] switches it.
* **missing names**: the names the query mentions (:func:`query_names`: capitalised words inside a sentence,
  ``Nate``, ``LGBTQ``, ``Lisbon``; not at a sentence start, not function words or month and weekday names) that no
  candidate of the request mentions (:func:`mentions`: whole word, case-folded, in its L0 text; Chinese: proper
  nouns by jieba's dictionary, and Latin words, :func:`_chinese_names`). A question about
  someone or something the store's best matches never name is seldom answered by them: "What is Nate's favorite
  genre of movies?" over a conversation between Tim and John finds their favourite genres, close in meaning
  (calibrated cosine 0.7), and not about Nate. Queries without capitals (lower-case) have no names.
* **evidence** = topic similarity − ``missing_name_penalty`` [0.4] × the share of the query's names that are
  missing (0 when it names nothing); a missing name that is a place or a descriptor (:func:`descriptor_names`: after
  an article, an interrogative determiner or a preposition of place, never possessive) costs
  ``missing_name_penalty_with_speaker`` [0] instead when the query also names a speaker of the returned messages
  (``Mateo``, ``the user``; :func:`speaker_neutral`) or refers to the user by the role ("the user" over Mateo's
  turns; not a pronoun, which may be anyone's: "What did Marie Curie study in Paris with her husband?"). Why: the
  question is then about someone the store holds, who may name the place in other words ("Which neighbourhood of
  the Spanish capital is Mateo based in?", answered by "Mateo: I live in Chamberí, by the way ...": evidence 0.11
  with the penalty, 0.31 without). A person the store
  never names keeps the full penalty, beside a named speaker too ("Where does the user's friend Bob rent a flat?":
  after a noun, not a determiner; "Nate's genre": possessive), and so do the questions of LoCoMo asked in another
  conversation, which name no speaker of the store.
* **own-text evidence**: when the evidence is at least ``none_below_evidence`` but below ``own_text_check_below``
  [0.4], the first ``own_text_hits`` [3] basis hits are judged by what they say: a conversation message among them
  is embedded alone (its L0, ``"<speaker>: <text>"``, without the context it was indexed with: the message it
  answers, ``ingest/conversation.py``), any other hit keeps its level-0 cosine (it was indexed as its own text);
  the own-text evidence is their best calibrated cosine to the (speaker-neutral) query less the same missing-name
  penalty. Why: a message's level-0 vector carries its context's words, which lift it towards questions about what
  the context mentions while the message itself says nothing of it (agent_dev, "What car does Priya drive?", never
  answered: evidence 0.29 from the first hits' level-0 vectors, 0.03 from their own texts, such as "Priya: My mum's
  70th birthday is on 22 April ..."). The context helps find
  an answer ("Yes!" to "Do you have a dog?"); whether the store holds one is better told by the messages' own
  words. Only the first hits count: over more of them some message matches any question a little (any other file
  hit that is no message counts whatever its rank: its level-0 vector is its own text's). The check
  costs one embedding batch of at most ``own_text_hits`` short texts, only for answers in that band whose first
  hits are messages.
* ``none`` when there is no hit, evidence < ``none_below_evidence`` [0.2], or the own-text evidence (when checked)
  < ``none_below_own_text`` [0.15]; ``strong`` when evidence ≥
  ``strong_min_evidence`` [0.4] and the first basis hit's own vector score (its fused meaning + words score with the
  hybrid first round, ``FirstRound.lexical``; else its calibrated cosine) ≥ ``strong_min_vector_score`` [0.4], the
  feature that best tells whether the first hit holds the answer; ``weak`` otherwise.

Why these values (``bench/match_quality.py``, figures in docs/search_memory.md): ``none_below_evidence`` is the
largest round value that keeps ``none`` under 5% of the answerable questions of every dev set (a wrong ``none`` tells
an agent to give up on an answer it has): at 0.2, 4.6% on agent_dev and 2.3% on locomo_dev (0.25 would give 9.2% on
agent_dev). ``missing_name_penalty`` 0.4: with less, LoCoMo questions asked in another conversation lose ``none``
(0.3: 91% instead of 97%). ``strong_min_evidence`` 0.4 and ``strong_min_vector_score`` 0.4 keep ``strong`` as
precise as before the topic similarity (share of strong answers whose first hit is an evidence turn) at about the
same share of answers; 0.5 on the lower topic evidence would make ``strong`` rarer and no more precise.
``none_below_own_text`` 0.15 is the largest value in steps of 0.025 that keeps agent_dev's answerable ``none`` under
5% (4.2%; 0.175: 6.3%); with it ``none`` on agent_dev's unanswerable questions rises from 62.9% to 88.6% (LoCoMo's
answerable ``none`` 0.9%); with the basis of :func:`answer_hits` and the ranking's first-person role (2026-12-06)
90.0% and 4.6% (LoCoMo 1.0%; docs/search_memory.md). ``missing_name_penalty_with_speaker`` 0 (0.2 gives the same
labels on the dev sets): with the full penalty there, agent_dev's answerable ``none`` was 4.2% at
``none_below_own_text`` 0.125 and 5.0% at 0.15. ``own_text_hits`` 3: the own texts of the first five or ten hits
gave 78.6% and 62.9%; ``own_text_check_below`` 0.4: the check over every evidence gave 74.3% (at 0.0875; both at
< 5% answerable ``none``). At most ``strong_min_evidence``, the check never reads a ``strong`` answer; a higher value
lets it turn one into ``none``.

Tried and not kept (no gain over the topic similarity on the dev sets, or a loss): the share of the query's content
words (stemmed, stopwords and speakers removed) that occur in any candidate, as a penalty or as a second threshold;
the margin between the first and the tenth hit; the speaker replaced by "they" or "someone" instead of "I", or with
first-person verb agreement ("How old am I?").

Calibrated on the conversation dev sets by ``bench/match_quality.py`` (answerable questions in their own
conversation; unanswerable ones: the same questions in another conversation, and the agent-shaped set's
``unanswerable`` category).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from context_engine.retrieval.query_transform import first_person
from context_engine.retrieval.scoring import vector_score
from context_engine.retrieval.speakers import (
    cjk_char,
    fold_name,
    is_cjk_name,
    message_has_content,
    references,
    refers_to_user,
    starts_sentence,
)
from context_engine.schema.conversation import message_speaker
from context_engine.schema.hits import NodeHit
from context_engine.schema.query import MatchQuality
from context_engine.schema.similarity import IDENTITY, SimilarityScale
from context_engine.settings import MatchQualitySettings
from context_engine.storage.keyword.content_words import content_tokens

__all__ = [
    "MatchFeatures",
    "MatchQualityRater",
    "answer_hits",
    "descriptor_names",
    "mentions",
    "query_names",
    "speaker_neutral",
]

_DECIMALS = 6
# A word of a cased or uncased script (no digits, no underscore), with inner apostrophes ("Nate's", "O'Neil").
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
# Capitalised, these start questions, titles or quotes; they never name what the store must hold.
_FUNCTION_WORDS = frozenset(
    """a an the and or but nor so yet if then than i me my mine we us our ours you your yours he him his she her hers
    it its they them their theirs this that these those there here in on at to of for from by with about into onto
    over under after before during since until as is are was were be been being am do does did done have has had will
    would can could should shall might must may not no yes ok okay oh hi hello hey dear please thanks also just when
    where what who whom whose which why how all any some every each other another both either neither tell show
    give find list remind let""".split()
)
# Words before a name that make it a place or a descriptor, not a person ("of London", "the Spanish capital", "Which
# Japanese script"): articles, interrogative determiners and prepositions of place (not "to", "from", "with", which
# take people as often).
_DESCRIPTOR_BEFORE = frozenset(
    """the a an which what whose this that these those some any of in at near around across inside outside""".split()
)
_CALENDAR = frozenset(
    """january february march april may june july august september october november december monday tuesday
    wednesday thursday friday saturday sunday""".split()
)


_LATIN_TOKEN = re.compile(r"[A-Za-z\u00c0-\u024f][A-Za-z\u00c0-\u024f0-9'’-]*")  # a Latin word, digits inside
# Terms of address and kinship that jieba's dictionary marks as names (老公 nr, 哥哥 ns, 师兄 nr): they name no one
_ZH_ADDRESS_TERMS = frozenset(
    """
    老公 老婆 爸爸 妈妈 哥哥 姐姐 弟弟 妹妹 爷爷 奶奶 外公 外婆 姥姥 姥爷 叔叔 阿姨 舅舅 舅妈 姑姑 婶婶 伯伯
    儿子 女儿 孙子 孙女 外孙 外孙女 宝宝 宝贝 老大 老二 老三 师兄 师姐 师弟 师妹 师傅 老师 同事 室友 老板
    先生 太太 夫人 男友 女友 男朋友 女朋友 对象 闺蜜 兄弟 姐妹
    """.split()
)


def _fold(text: str) -> str:
    """Names are compared as :func:`~context_engine.retrieval.speakers.fold_name` folds them (with or without
    accents: "Tomas" for Tomás is no missing name)."""
    return fold_name(text)


def _chinese_names(text: str) -> dict[str, bool]:
    """The names of a query holding CJK characters, case-folded, in order, each with whether it is a place.

    The words of jieba's cut that its dictionary marks as proper nouns
    (:func:`~context_engine.storage.keyword.tokenize.jieba_proper_nouns`: "日本的首都是哪里？" -> 日本, a place;
    "用户喜欢周杰伦吗？" -> 周杰伦), and the Latin words that hold a capital or a digit and do not start a sentence
    ("用户的NAS是什么型号？" -> nas, "Where did Sam buy the 抹茶 powder?" -> sam; not "app", not "What"): a Chinese
    text has no capitals to tell its names by. A name the dictionary does not hold is not found (no penalty rather
    than a wrong one)."""
    from context_engine.storage.keyword.tokenize import jieba_proper_nouns, jieba_tokenizer

    proper = jieba_proper_nouns()
    names: dict[str, bool] = {}
    for raw, start, _ in jieba_tokenizer().tokenize(text):
        word = raw.strip()
        if len(word) < 2:
            continue
        if cjk_char().match(word):
            kind = proper.get(word)
            if kind is not None and word not in _ZH_ADDRESS_TERMS:
                names.setdefault(_fold(word), kind == "place")
        elif (
            _LATIN_TOKEN.fullmatch(word)
            and any(c.isupper() or c.isdigit() for c in word)
            and not starts_sentence(text, start)
            and _fold(re.split(r"['’]", word, maxsplit=1)[0]) not in _FUNCTION_WORDS | _CALENDAR
        ):
            names.setdefault(_fold(re.split(r"['’]", word, maxsplit=1)[0]), False)
    return names


def query_names(query: str) -> list[str]:
    """The names a query mentions, case-folded, in order of first appearance, without duplicates.

    A name is a word that starts with an upper-case letter, is not the first word of a sentence, and whose part
    before an apostrophe is not a function word (``What``, ``I``, ``The``) or a month or weekday name (those are in
    questions about time, while the store keeps times as metadata). ``"What is Nate's favorite genre?"`` ->
    ``["nate"]``; ``"When did Caroline go to the LGBTQ support group?"`` -> ``["caroline", "lgbtq"]``; a query
    without capitals (lower-case) names nothing. A query holding Chinese: its proper nouns by part of speech and its
    Latin words (:func:`_chinese_names`).
    """
    text = unicodedata.normalize("NFKC", query)
    if cjk_char().search(text):
        return list(_chinese_names(text))
    names: dict[str, None] = {}
    for m in _WORD.finditer(text):
        word = m.group(0)
        if not word[0].isupper() or starts_sentence(text, m.start()):
            continue
        base = _fold(re.split(r"['’]", word, maxsplit=1)[0])
        if len(base) < 2 or base in _FUNCTION_WORDS or base in _CALENDAR:
            continue
        names[base] = None
    return list(names)


def descriptor_names(query: str) -> frozenset[str]:
    """The names of ``query`` (:func:`query_names`) that name a place or a descriptor, not a person: every
    occurrence follows an article, an interrogative determiner or a preposition of place (``_DESCRIPTOR_BEFORE``:
    "of London", "the Spanish capital", "Which Japanese script") and none is possessive. "friend Bob", "Nate's
    genre", "does Priya work", "with Bob" name people. English word order; a name of another language counts as a
    person (the full penalty). A query holding Chinese: the names jieba's dictionary marks as places (``ns``: "杭州",
    "日本")."""
    text = unicodedata.normalize("NFKC", query)
    if cjk_char().search(text):
        return frozenset(name for name, place in _chinese_names(text).items() if place)
    words = list(_WORD.finditer(text))
    verdict: dict[str, bool] = {}
    for i, m in enumerate(words):
        word = m.group(0)
        if not word[0].isupper() or starts_sentence(text, m.start()):
            continue
        parts = re.split(r"['’]", word, maxsplit=1)
        name = _fold(parts[0])
        before = _fold(words[i - 1].group(0)) if i > 0 else ""
        possessive = len(parts) > 1 or text[m.end() : m.end() + 1] in ("'", "’")  # "Nate's", "the Smiths'"
        place = not possessive and before in _DESCRIPTOR_BEFORE
        verdict[name] = verdict.get(name, True) and place
    return frozenset(n for n, place in verdict.items() if place)


def mentions(text: str, name: str) -> bool:
    """Whether ``text`` mentions the case-folded ``name`` as a whole word (case-folded, NFKC; a CJK character is no
    part of a Latin word: "我的nas是群晖" mentions nas); a name in CJK characters anywhere (those languages put no
    space between words)."""
    folded = _fold(text)
    if cjk_char().search(name):
        return name in folded
    at = folded.find(name)
    while at >= 0:
        end = at + len(name)
        if not (at and _word_char(folded[at - 1])) and not (end < len(folded) and _word_char(folded[end])):
            return True
        at = folded.find(name, at + 1)
    return False


def _word_char(c: str) -> bool:
    """A character of a Latin word (``\\w`` less CJK characters)."""
    return (c.isalnum() or c == "_") and not cjk_char().match(c)


def speaker_neutral(query: str, speakers: Iterable[str]) -> str | None:
    """``query`` with its references to ``speakers`` put in the first person, or ``None`` when it names none.

    A reference (:func:`~context_engine.retrieval.speakers.references`: a name as a whole word, capitalised in a
    query that capitalises names; a role with a determiner, "the user") becomes ``my`` when possessive, else ``I``:
    ``"How old is Sam?"`` -> ``"How old is I?"``, ``"What is the user's job?"`` -> ``"What is my job?"`` (grammar is
    not needed by an embedding model); "Where will Priya move?" names no speaker Will. A Chinese reference becomes
    ``我`` (``我的`` with its possessive ``的``): "用户的猫叫什么？" -> "我的猫叫什么？".
    """
    text = unicodedata.normalize("NFKC", query)
    found = references(text, speakers)
    if not found:
        return None
    parts, at = [], 0
    for m in found:
        end = m.end()
        beside = text[m.start() - 1 : m.start()] + text[end : end + 1]
        if is_cjk_name(m.group(2)) or cjk_char().search(beside):  # "林晓的猫叫什么？", "Sam的猫" -> "我的猫 ..."
            possessive = bool(m.group(3)) or text[end : end + 1] == "的"
            end += 1 if possessive and not m.group(3) else 0
            parts += [text[at : m.start()], "我的" if possessive else "我"]
        else:
            parts += [text[at : m.start()], "my" if m.group(3) else "I"]
        at = end
    return "".join([*parts, text[at:]])


def _own_vector_score(hit: NodeHit) -> float:
    """A hit's own vector score: before the lift of a reply to rank with its question (``retrieval/replies.py``)."""
    return hit.vector_score if hit.own_vector_score is None else hit.own_vector_score


@dataclass(frozen=True, slots=True)
class MatchFeatures:
    """What the rule reads (module docstring), for the label and the detailed trace.

    Attributes:
        similarity: the best calibrated cosine of the basis, 0..1.
        topic_similarity: the best calibrated cosine of the basis to the speaker-neutral query (``neutral_query``),
            0..1; ``similarity`` when there is none.
        first_vector_score: the first basis hit's own vector score, 0..1 (fused with hybrid, else calibrated cosine;
            a reply's own, before the lift it borrows from its question: ``NodeHit.own_vector_score``).
        names: the names the query mentions (:func:`query_names`).
        missing_names: those no candidate mentions.
        evidence: ``topic_similarity`` less the missing-name penalty (``missing_name_penalty``, or
            ``missing_name_penalty_with_speaker`` when ``speaker_named``) times the share of ``names`` missing (may
            be negative).
        files: whether the basis is file hits (``False``: only directories were returned, or nothing).
        hits: the number of hits the label describes.
        neutral_query: the query with the returned messages' speakers it names in the first person
            (:func:`speaker_neutral`), ``None`` when it names none or the check is off.
        own_text_similarity: the best calibrated cosine of the first ``own_text_hits`` basis hits' own texts to the
            (speaker-neutral) query, 0..1; ``None`` when the own-text check did not run (module docstring).
        own_text_evidence: ``own_text_similarity`` less the missing-name penalty; ``None`` when not checked.
        speaker_named: whether the query names a speaker of the basis's conversation messages
            (:func:`~context_engine.retrieval.speakers.references` finds one) or the user's role ("the user").
        place_names: the missing names that cost ``missing_name_penalty_with_speaker`` instead of
            ``missing_name_penalty``: the query names a speaker, and the name is a place or a descriptor
            (:func:`descriptor_names`).
        about_speaker: the query names a speaker of the basis's messages and asks nothing else (no content word
            once the reference is put in the first person: "What does Kim do?", "Tell me about the user"); the
            label is then ``weak`` (any of their messages is about it, and the cosines say little of it).
    """

    similarity: float
    first_vector_score: float
    names: tuple[str, ...]
    missing_names: tuple[str, ...]
    evidence: float
    files: bool
    hits: int
    topic_similarity: float = 0.0
    neutral_query: str | None = None
    own_text_similarity: float | None = None
    own_text_evidence: float | None = None
    speaker_named: bool = False
    place_names: tuple[str, ...] = ()
    about_speaker: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The features as JSON-ready values (lists for the name tuples)."""
        out = asdict(self)
        out["names"], out["missing_names"] = list(self.names), list(self.missing_names)
        out["place_names"] = list(self.place_names)
        return out


def answer_hits(hits: Sequence[NodeHit]) -> list[NodeHit]:
    """The file hits of ``hits`` that can hold an answer, in order: every file hit but the conversation messages
    that state nothing (:func:`~context_engine.retrieval.speakers.message_has_content`, questions about oneself
    counted: an acknowledgement, a question back such as "assistant: Of course, what's up?", not "Priya: Dev and I
    have our 10th wedding anniversary on 14 October, any ideas?"); all the file hits when every one of them is such a
    message.

    Why: such a message's cosine to a question is noise, and high for short texts. Once the answer's turns no longer
    carried the question's role word (``query_transform.without_speakers``: "the user" -> "I"), a question back
    stood among the first ten hits of questions the store cannot answer ("Where does the user work?", agent_dev:
    calibrated cosine 0.45 of "assistant: Of course, what's up?" to "Where does I work?", against 0.08 for the
    user's own turns), and its cosine alone made the answer ``weak``."""
    files = [h for h in hits if not h.is_dir]
    speaker_of = {h.uri: message_speaker(h.uri, h.abstract or "") for h in files}
    names = frozenset(s for s in speaker_of.values() if s)
    stating = [
        h
        for h in files
        if (s := speaker_of[h.uri]) is None or message_has_content(h.abstract or "", s, names, as_evidence=True)
    ]
    return stating or files


class MatchQualityRater:
    """Labels a ``search_memory`` answer ``strong`` | ``weak`` | ``none`` (module docstring).

    Args:
        settings: the ``retrieval.match_quality`` section (thresholds).
        scale: the embedding model's similarity scale (calibrated cosine).
    """

    def __init__(self, settings: MatchQualitySettings, scale: SimilarityScale = IDENTITY) -> None:
        self._settings = settings
        self._scale = scale

    def neutral_query(self, query: str, hits: Sequence[NodeHit]) -> str | None:
        """The speaker-neutral form of ``query`` (:func:`speaker_neutral` over the speakers of the returned
        conversation messages among ``hits``; a query naming none of them that refers to the user, "the user" or
        a third-person pronoun, ``speakers.refers_to_user``, with that reference in the first person), or ``None``:
        the query refers to none of them, or ``speaker_neutral_similarity`` is off. The pipeline embeds it and
        passes its cosines to :meth:`features`."""
        speakers = {s for h in hits if not h.is_dir and (s := message_speaker(h.uri, h.abstract or ""))}
        return self.neutral_for(query, speakers)

    def neutral_for(self, query: str, speakers: Iterable[str]) -> str | None:
        """:meth:`neutral_query` for the conversation messages of ``speakers`` (the pipeline guesses the text with
        the speakers it expects, to embed it in one batch with the query: ``retrieval/query_vectors.py``)."""
        speakers = set(speakers)
        if not self._settings.speaker_neutral_similarity or not speakers:
            return None
        neutral = speaker_neutral(query, speakers)
        if neutral is None and refers_to_user(query):
            # the user without a name ("the user" over a named user's turns, "Where does she work?"): the same
            # reference in the first person, as the ranking reads it (L0Retriever: the user's turns)
            text = speaker_neutral(query, ("user",)) or query
            neutral = first_person(text) or (text if text != query else None)
        if neutral is not None and not content_tokens(neutral):
            return None  # it asks about the person alone (about_speaker): nothing to compare without them
        return neutral

    def own_text_hits(self, features: MatchFeatures, hits: Sequence[NodeHit]) -> list[NodeHit]:
        """The file hits the own-text check reads (the first ``own_text_hits`` of ``hits``), or ``[]`` when it does
        not run: the label is already ``none``, or the evidence is at least ``own_text_check_below``, or only
        directories were returned, or none of those hits is a conversation message (every other node was indexed
        as its own text: nothing to check), or the check is off (module docstring)."""
        s = self._settings
        if (
            s.own_text_hits == 0
            or not features.files
            or not s.none_below_evidence <= features.evidence < s.own_text_check_below
        ):
            return []
        first = answer_hits(hits)[: s.own_text_hits]
        return first if self.embedded_alone(first) else []

    @staticmethod
    def embedded_alone(hits: Sequence[NodeHit]) -> list[NodeHit]:
        """Those of ``hits`` (:meth:`own_text_hits`) the own-text check embeds alone: conversation messages, which
        may have been indexed with a context; any other node's level-0 vector is its own text's already."""
        return [h for h in hits if message_speaker(h.uri, h.abstract or "") is not None]

    def features(
        self,
        query: str,
        hits: Sequence[NodeHit],
        candidates: Iterable[NodeHit] = (),
        *,
        neutral: Mapping[str, float] | None = None,
        neutral_query: str | None = None,
        own: Mapping[str, float] | None = None,
    ) -> MatchFeatures:
        """The rule's inputs for one answer.

        Args:
            query: the caller's query text.
            hits: the returned hits, in rank order.
            candidates: every candidate the request ranked (the returned hits are added to them); a name counts as
                mentioned when any of them mentions it.
            neutral: the raw cosines of the basis hits to the embedded ``neutral_query`` (:meth:`neutral_query`),
                by URI; a hit without one counts with its own similarity. ``None``: no neutral query (the topic
                similarity is the similarity).
            neutral_query: the text whose cosines ``neutral`` holds (for the trace).
            own: the raw cosines of the own-text check (:meth:`own_text_hits`) by URI: a message's own text's to
                the speaker-neutral query (else the query), any other hit's level-0 one; ``None``: not checked.
                The own-text similarity is the best of them and of the level-0 cosines of every other returned file
                hit that is not a message (indexed as its own text, whatever its rank).

        Returns:
            :class:`MatchFeatures`; with no hits, zero similarity and evidence.
        """
        files = answer_hits(hits)
        basis = files or list(hits)
        names = tuple(query_names(query))
        pool = [*hits, *candidates]
        missing = tuple(n for n in names if not any(mentions(h.abstract, n) for h in pool))
        if not basis:
            return MatchFeatures(0.0, 0.0, names, missing, 0.0, False, 0, 0.0, neutral_query)
        similarity = max(vector_score(h.similarity, self._scale) for h in basis)
        topic = similarity
        if neutral is not None:
            topic = max(vector_score(neutral.get(h.uri, h.similarity), self._scale) for h in basis)
        speakers = {s for h in basis if not h.is_dir and (s := message_speaker(h.uri, h.abstract or ""))}
        # the user's role names the user of these messages whatever their label ("the user" over Mateo's turns)
        speaker_named = bool(speakers) and bool(references(query, speakers) or references(query, ("user",)))
        in_first_person = speaker_neutral(query, speakers) or query
        in_first_person = speaker_neutral(in_first_person, ("user",)) or in_first_person
        about_speaker = speaker_named and not content_tokens(in_first_person)
        descriptors = descriptor_names(query) if speaker_named and missing else frozenset()
        places = tuple(n for n in missing if n in descriptors)
        full, reduced = self._settings.missing_name_penalty, self._settings.missing_name_penalty_with_speaker
        penalty = sum(reduced if n in places else full for n in missing) / len(names) if names else 0.0
        own_similarity = own_evidence = None
        if own:
            # every other file hit that is no message was indexed as its own text: its level-0 cosine counts too
            cosines = [*own.values()]
            cosines += [
                neutral.get(h.uri, h.similarity) if neutral is not None else h.similarity
                for h in files
                if h.uri not in own and message_speaker(h.uri, h.abstract or "") is None
            ]
            own_similarity = round(max(vector_score(c, self._scale) for c in cosines), _DECIMALS)
            own_evidence = round(own_similarity - penalty, _DECIMALS)
        return MatchFeatures(
            similarity=round(similarity, _DECIMALS),
            first_vector_score=round(min(1.0, max(0.0, _own_vector_score(basis[0]))), _DECIMALS),
            names=names,
            missing_names=missing,
            evidence=round(topic - penalty, _DECIMALS),
            files=bool(files),
            hits=len(hits),
            topic_similarity=round(topic, _DECIMALS),
            neutral_query=neutral_query if neutral is not None else None,
            own_text_similarity=own_similarity,
            own_text_evidence=own_evidence,
            speaker_named=speaker_named,
            place_names=places,
            about_speaker=about_speaker,
        )

    def label(self, features: MatchFeatures) -> MatchQuality:
        """``none`` | ``weak`` | ``strong`` for the features (module docstring)."""
        s = self._settings
        if features.about_speaker and features.files:
            return "weak"  # "What does Kim do?" over Kim's messages: some of them answer it, which the cosines miss
        if features.hits == 0 or features.evidence < s.none_below_evidence:
            return "none"
        if features.own_text_evidence is not None and features.own_text_evidence < s.none_below_own_text:
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
