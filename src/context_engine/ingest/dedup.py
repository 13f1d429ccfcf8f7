"""The specifics of a memory: the tokens that make two similar sentences two different facts (issue 11; dedup).

``add_memories`` drops a new memory as a near-duplicate when the cosine of the abstracts passes
``memory.near_duplicate_similarity`` (0.92). An embedding barely moves when one identifier, number or name changes:
with the default model "The parts were bundled under XJ-4477 last week" and "... XJ-4488 ..." score 0.94, so the
second fact was lost. The cosine says "the same kind of sentence"; :func:`same_specifics` says "about the same
things", and a near-duplicate needs both.

What counts as a distinguishing token (compared after NFKC and case-folding, as a set):

* anything with a digit: numbers (``1,000``, ``1.000`` and ``1000`` are one number; ``3,5`` and ``3.5`` one decimal;
  ``120.00`` is ``120``; ``12th`` is ``12``), with a currency sign or a percent (``$120``, ``15%``), times, dates,
  versions, IP addresses and identifiers (``10:30``, ``2024-05-12``, ``v2.3.1``, ``192.168.0.12``, ``INC-12``,
  ``db-prod-3``, ``7pm``);
* English number words, as digits (``four`` is ``4``; ``one`` is not counted: it is also a pronoun);
* identifiers without digits: internal ``- _ . / : @ + #`` (``db-prod``, ``foo@bar.com``, ``config.yaml``), URLs,
  mixed case (``iPhone``, ``GitHub``) and acronyms (``AWS``);
* month and weekday names (``may`` and ``march`` only capitalised: they are also a verb);
* capitalised words, i.e. names (``Alice``, ``Lisbon``), except a short list of function words (``I``, ``The``,
  ``In`` ...). A capitalised word that starts a sentence is only a name if neither text uses it in lower case: so
  "Bob likes green tea" / "Alice likes green tea" differ, while "The user prefers dark mode" / "User prefers ..."
  and "Really, Bob likes tea" / "Bob really likes tea" do not;
* in CJK text (no case, no spaces): the digits and Latin identifiers inside it (``我的航班是CA1234``) and runs of CJK
  numerals (``周三`` / ``周四``; a lone ``一`` is not counted: it is in too many common words);
* the polarity: the number of negations (``not``, ``never``, ``no``, ``n't``, ``nothing``, ``without`` ...; ``不``,
  ``没``, ``未``, ``别``) must be equal: "I am allergic to shellfish" / "I am not allergic to shellfish" (cosine
  0.96) are two facts, "I don't drink coffee any more" / "I no longer drink coffee" one (an attack pass found the
  first pair dropped as a near-duplicate under the default policy ``skip``).

Rewordings keep their specifics ("I moved to Lisbon in March" / "In March I moved to Lisbon": ``{lisbon, march}``
both), so they are still near-duplicates. The rule errs towards "different": "7pm" / "7 pm" or a dropped hyphenated
word make two texts different, and the cost is a redundant memory, never a lost one. Pure functions, no model.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = ["Specifics", "distinguishing_tokens", "same_specifics", "specifics"]

# Han, kana, Hangul, CJK symbols: no case and no spaces, so never part of a Latin token.
_CJK = "\u2e80-\u2fdf\u3000-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff"
_ALNUM = rf"[^\W_{_CJK}]"  # a letter or digit of a cased (or uncased, non-CJK) script
_WORD = rf"{_ALNUM}+(?:'{_ALNUM}+)*"
_TOKEN = re.compile(
    rf"""
    (?P<url>\b[a-z][a-z0-9+.-]*://[^\s<>"'{_CJK}]+)
  | (?P<cur>[$€£¥₹₩])?
    (?P<sign>(?<!{_ALNUM})[-+](?=\d))?
    (?P<word>{_WORD}(?:(?:[-_./:@+#]|(?<=\d),(?=\d)){_WORD})*)
    (?P<pct>%)?
    """,
    re.VERBOSE | re.IGNORECASE,
)
_NEGATION = re.compile(
    r"\b(?:not|no|never|nothing|none|nobody|nowhere|neither|nor|cannot|without)\b|n't\b", re.IGNORECASE
)
# 不喝, 没有, 未曾, 别: a 不 inside a word (不错) only errs towards "different"
_CJK_NEGATION = re.compile(r"[不没未别]")
_CJK_NUMERALS = re.compile(r"[〇零一二三四五六七八九十百千万萬亿億两兩]+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_ORDINAL = re.compile(r"(\d+)(?:st|nd|rd|th)", re.IGNORECASE)
_CONNECTORS = frozenset("-_./:@+#")
_URL_TAIL = ".,;:!?)]}>'\""
_LEAD_IN = " \t\r\n\"'“‘«([{*•·-–—>#"  # what may stand between a sentence end and its first word
_SENTENCE_END = frozenset(".!?:;…。！？\n")
_LOOKBACK = 32  # characters looked back for a sentence end

_NUMBER_WORDS = {
    w: str(n)
    for n, w in enumerate(
        "zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
    if w != "_"
} | {w: str(10 * n) for n, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), start=3)}
_SCALE_WORDS = frozenset({"hundred", "thousand", "million", "billion", "trillion", "dozen"})
_CALENDAR = frozenset(
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)
_CALENDAR_VERBS = frozenset({"may", "march"})  # a month only when capitalised
# Capitalised, these start sentences or titles; they are never what tells two facts apart.
_FUNCTION_WORDS = frozenset(
    """a an the and or but nor so yet if then than i me my mine we us our ours you your yours he him his she her hers
    it its they them their theirs this that these those there here in on at to of for from by with about into onto
    over under after before during since until as is are was were be been being am do does did have has had will
    would can could should shall might must not no yes ok okay oh hi hello hey dear please thanks also just when
    where what which who whom whose why how all some any each every both either neither other another such""".split()
)


@dataclass(frozen=True, slots=True)
class Specifics:
    """The distinguishing tokens of one text, case-folded.

    Attributes:
        definite: numbers, identifiers, URLs, calendar names, acronyms, capitalised words inside a sentence.
        tentative: capitalised words that start a sentence (a name, or just the first word).
        common: words written in lower case (and capitalised function words): what resolves ``tentative``.
    """

    definite: frozenset[str]
    tentative: frozenset[str]
    common: frozenset[str]
    #: How many negations the text holds ("not", "never", "n't", "no", 不, 没 ...): "I am allergic to shellfish" and
    #: "I am not allergic to shellfish" score 0.96 and carry the same words; only the polarity tells them apart.
    negations: int = 0

    def resolved(self, other: Specifics) -> frozenset[str]:
        """The tokens that count when this text is compared with ``other``: ``definite`` plus the sentence-initial
        capitalised words that neither text uses in lower case."""
        lower = self.common | other.common
        return self.definite | {w for w in self.tentative if w not in lower}

    def same_as(self, other: Specifics) -> bool:
        """True when both texts carry the same specifics and as many negations (module docstring)."""
        return self.negations == other.negations and self.resolved(other) == other.resolved(self)


def specifics(text: str) -> Specifics:
    """The :class:`Specifics` of ``text`` (any length and language; NFKC-normalised first)."""
    text = unicodedata.normalize("NFKC", text).replace("’", "'").replace("‘", "'").replace("\u2212", "-")
    definite: set[str] = set()
    tentative: set[str] = set()
    common: set[str] = set()
    for m in _TOKEN.finditer(text):
        if m.group("url"):
            definite.add(m.group("url").rstrip(_URL_TAIL).casefold())
            continue
        word = m.group("word")
        if any(c.isdigit() for c in word):
            definite.add(_numeric(word, m.group("cur") or "", m.group("sign") or "", m.group("pct") or ""))
        else:
            _classify_word(word, _starts_sentence(text, m.start("word")), definite, tentative, common)
    for run in _CJK_NUMERALS.findall(text):
        if run != "一":
            definite.add(run)
    negations = len(_NEGATION.findall(text)) + len(_CJK_NEGATION.findall(text))
    return Specifics(frozenset(definite), frozenset(tentative), frozenset(common), negations)


def distinguishing_tokens(text: str) -> frozenset[str]:
    """The specifics of ``text`` on its own, e.g. ``"Bob met Alice at 10:30 on 12 May"`` ->
    ``{"bob", "alice", "10:30", "12", "may"}``."""
    own = specifics(text)
    return own.resolved(own)


def same_specifics(a: str, b: str) -> bool:
    """True only when ``a`` and ``b`` carry the same distinguishing tokens (module docstring).

    ``"... under XJ-4477 last week"`` / ``"... under XJ-4488 last week"`` -> False; ``"Bob likes green tea"`` /
    ``"Bob really likes green tea"`` -> True; ``"Bob likes green tea"`` / ``"Alice likes green tea"`` -> False.
    """
    return specifics(a).same_as(specifics(b))


def _numeric(word: str, currency: str, sign: str, percent: str) -> str:
    """A token with a digit: a normalised number (with its currency sign, sign and percent), else the identifier."""
    ordinal = _ORDINAL.fullmatch(word)
    if ordinal:
        word = ordinal.group(1)
    if _NUMBER.fullmatch(word):
        number = _normalise_number(word)
        if number is not None:
            return f"{currency}{sign}{number}{percent}"
    return f"{currency}{sign}{word}{percent}".casefold()


def _normalise_number(s: str) -> str | None:
    """``1,000`` / ``1.000`` -> ``1000``, ``1,000.50`` / ``1.000,50`` -> ``1000.5``, ``3,5`` -> ``3.5``; None when
    the separators make no number (``1.2.3``: a version)."""
    groups = re.split(r"[.,]", s)
    seps = re.findall(r"[.,]", s)
    if not seps:
        return s
    if len(set(seps)) == 1 and all(len(g) == 3 for g in groups[1:]):
        return "".join(groups)  # thousands separators only
    if len(seps) > 1 and not (seps[-1] != seps[0] and len(set(seps[:-1])) == 1):
        return None
    if any(len(g) != 3 for g in groups[1:-1]):
        return None
    whole, fraction = "".join(groups[:-1]), groups[-1].rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


def _classify_word(word: str, initial: bool, definite: set[str], tentative: set[str], common: set[str]) -> None:
    """File a token without digits under ``definite``, ``tentative`` or ``common`` (case-folded)."""
    if any(c in _CONNECTORS for c in word):
        definite.add(word.casefold())
        return
    base = word[:-2] if word.lower().endswith("'s") else word
    folded = base.casefold()
    letters = [c for c in base if c.isalpha()]
    if folded in _NUMBER_WORDS:
        definite.add(_NUMBER_WORDS[folded])
    elif folded in _SCALE_WORDS or (folded in _CALENDAR and (base[0].isupper() or folded not in _CALENDAR_VERBS)):
        definite.add(folded)
    elif not base[0].isupper():
        if any(c.isupper() for c in letters):
            definite.add(folded)  # iPhone, macOS
        else:
            common.add(folded)
    elif folded in _FUNCTION_WORDS:
        common.add(folded)
    elif len(letters) > 1 and (all(c.isupper() for c in letters) or any(c.isupper() for c in letters[1:])):
        definite.add(folded)  # AWS, GitHub
    elif initial:
        tentative.add(folded)
    else:
        definite.add(folded)


def _starts_sentence(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens the text, a sentence, a clause after ``:``/``;``, a line or a quote."""
    before = text[max(0, start - _LOOKBACK) : start]  # bounded: linear in the text, whatever its length
    head = before.rstrip(_LEAD_IN)
    return not head or head[-1] in _SENTENCE_END or "\n" in before[len(head) :]
