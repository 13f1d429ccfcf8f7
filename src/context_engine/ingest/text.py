"""Text measures for parsing and chunking: token estimate, language and sentence boundaries (DESIGN.md §4).

Token counts here are estimates (:func:`estimate_tokens`), not a model tokenizer: cheap, deterministic and
CJK-aware, which is what chunk caps and context packing need. Split out of :mod:`context_engine.ingest.parse`, which
re-exports these names.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = [
    "CJK_CHARS",
    "Language",
    "collapse_whitespace",
    "detect_language",
    "estimate_tokens",
    "is_cjk",
    "sentence_boundaries",
    "split_sentences",
]

Language = Literal["zh", "en"]

# --------------------------------------------------------------------------------------------------------------
# Token estimate and language
# --------------------------------------------------------------------------------------------------------------

# Ideographs (CJK unified + extension A + compatibility + supplementary planes), kana, bopomofo and hangul.
CJK_CHARS = (
    "\u1100-\u11ff\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
)
_CJK_RE = re.compile(f"[{CJK_CHARS}]")
_WORD_RE = re.compile(r"\w+")
_PUNCT_RE = re.compile(r"[^\w\s]")
_LATIN_WORD_RE = re.compile(r"[A-Za-z\u00c0-\u024f]+")

#: Share of CJK "units" (ideographs vs. Latin words) from which a text counts as Chinese. Chinese runbooks are full
#: of English alert names, commands and identifiers, so the bar is well below one half; measured on the runbook
#: corpora, Chinese prose scores >= 0.6 and English prose 0.0.
ZH_MIN_RATIO = 0.3


def estimate_tokens(text: str) -> int:
    """Estimate how many model tokens ``text`` takes, CJK-aware.

    Each CJK ideograph, kana or hangul syllable counts 1; each run of other word characters counts 1.3 (word pieces
    per English word, rounded up over the whole text); each punctuation or symbol character counts 1 (a BERT-style
    tokenizer emits one piece per punctuation mark). Whitespace is free. The estimate is additive over pieces cut at
    whitespace, and never smaller for pieces than for their concatenation, so capping pieces caps their join.

    Args:
        text: any text (markdown, code, plain).

    Returns:
        The estimated token count, ``>= 0``; ``0`` for empty or whitespace-only text.
    """
    if not text:
        return 0
    rest, cjk = _CJK_RE.subn(" ", text)
    words = len(_WORD_RE.findall(rest))
    punct = len(_PUNCT_RE.findall(rest))
    return cjk + (words * 13 + 9) // 10 + punct


def detect_language(text: str) -> Language:
    """Classify text as Chinese (``"zh"``, any CJK script) or English (``"en"``, everything else).

    Heuristic: the share of CJK characters among CJK characters plus Latin words; ``"zh"`` from
    :data:`ZH_MIN_RATIO`. Pass prose (not code) for a stable answer.

    Args:
        text: the text to classify.

    Returns:
        ``"zh"`` or ``"en"``; ``"en"`` for text without letters.
    """
    cjk = len(_CJK_RE.findall(text))
    if cjk == 0:
        return "en"
    words = len(_LATIN_WORD_RE.findall(text))
    return "zh" if cjk >= ZH_MIN_RATIO * (cjk + words) else "en"


def is_cjk(ch: str) -> bool:
    """Whether ``ch`` is a CJK ideograph, kana, bopomofo or hangul character."""
    return bool(_CJK_RE.match(ch))


_CJK_NEWLINE_RE = re.compile(f"(?<=[{CJK_CHARS}\u3000-\u303f\uff00-\uffef])[ \t]*\n[ \t]*(?=[{CJK_CHARS}])")
_SPACES_RE = re.compile(r"\s+")


def collapse_whitespace(text: str) -> str:
    """Collapse whitespace runs to one space and drop line breaks between CJK characters (no spaces in Chinese)."""
    return _SPACES_RE.sub(" ", _CJK_NEWLINE_RE.sub("", text)).strip()


# --------------------------------------------------------------------------------------------------------------
# Sentences
# --------------------------------------------------------------------------------------------------------------

# A sentence ends after 。！？ (no space needed), or after . ! ? followed by whitespace. Closing quotes and brackets
# stay with their sentence.
_SENTENCE_END_RE = re.compile(r"[。！？]+[”’」』）)\"']*[ \t]*|[.!?]+[”’\"')\]]*(?=\s|$)")
_ABBREVIATIONS = ("e.g", "i.e", "cf", "vs", "fig", "approx", "mr", "mrs", "ms", "dr")
_LIST_ITEM_START_RE = re.compile(r"\n(?=[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]|[ \t]*\n)")


def sentence_boundaries(text: str, *, newlines: Literal["none", "items", "all"]) -> list[int]:
    """Offsets where a new sentence starts in ``text`` (plain or markdown), for cutting it without losing a byte.

    Sentence ends are as in :func:`split_sentences`; the whitespace after a sentence stays with it. ``newlines``
    adds cuts at every line break (``"all"``), only before list items and blank lines (``"items"``, for markdown
    lists), or none (``"none"``, for wrapped markdown paragraphs).

    Args:
        text: the text to cut.
        newlines: which line breaks are boundaries.

    Returns:
        Ascending offsets, each strictly between 0 and ``len(text)``.
    """
    cuts: set[int] = set()
    n = len(text)
    for m in _SENTENCE_END_RE.finditer(text):
        end = m.end()
        if m.group()[0] == ".":
            nxt = end
            while nxt < n and text[nxt].isspace():
                nxt += 1
            if nxt < n and text[nxt].islower():
                continue  # "the app. then ..." or "e.g. foo": not a sentence end
            before = text[max(0, m.start() - 7) : m.start()].casefold()
            if any(
                before.endswith(a) and (len(before) == len(a) or not before[-len(a) - 1].isalnum())
                for a in _ABBREVIATIONS
            ):
                continue
        while end < n and text[end].isspace():
            end += 1
        if 0 < end < n:
            cuts.add(end)
    if newlines == "all":
        cuts.update(m.end() for m in re.finditer(r"\n+", text) if m.end() < n)
    elif newlines == "items":
        cuts.update(m.start() + 1 for m in _LIST_ITEM_START_RE.finditer(text))
    return sorted(c for c in cuts if 0 < c < n)


def split_sentences(text: str) -> list[str]:
    """Split plain text into sentences, English and Chinese.

    Boundaries: after ``。！？`` (with any closing quote), after ``. ! ?`` followed by whitespace (but not before a
    lowercase letter, and not after ``e.g.``/``i.e.``-style abbreviations), and at every line break (list items and
    plain-text lines are separate units).

    Args:
        text: plain text (no markdown syntax needed).

    Returns:
        Sentences in document order, whitespace-collapsed, none empty.
    """
    out: list[str] = []
    start = 0
    for cut in [*sentence_boundaries(text, newlines="all"), len(text)]:
        piece = collapse_whitespace(text[start:cut])
        if piece:
            out.append(piece)
        start = cut
    return out
