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
    "LONG_RUN_CHARS",
    "LONG_RUN_CHARS_PER_TOKEN",
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

#: A run of word characters up to this long is a word and counts 1.3 tokens, however long: the longest English
#: words, snake_case names and a SHA-256 in hex fit. Of the 438 runbooks and sample corpus documents, one has a
#: longer run (a 73-character "xxx…" placeholder): its chunk count is unchanged, two chunk boundaries moved.
LONG_RUN_CHARS = 64
#: A longer run is no word a tokenizer knows (base64, a minified blob, random letters, a paragraph of a script
#: written without spaces) and counts one token per this many characters: a subword tokenizer cuts it into a piece
#: per 1.2 to 3 characters (the bundled USE tokenizer, measured: 1.45 on random letters, 1.8 on hex, 1.2 on base64,
#: 2.7 on snake_case test names). Counted as one word, a 1 MB run was one chunk and one 1 MB embedding input.
LONG_RUN_CHARS_PER_TOKEN = 2


def estimate_tokens(text: str) -> int:
    """Estimate how many model tokens ``text`` takes, CJK-aware.

    Each CJK ideograph, kana or hangul syllable counts 1; each run of other word characters counts 1.3 (word pieces
    per English word, rounded up over the whole text), and a run longer than :data:`LONG_RUN_CHARS` counts one token
    per :data:`LONG_RUN_CHARS_PER_TOKEN` characters instead (see there); each punctuation or symbol character counts 1
    (a BERT-style tokenizer emits one piece per punctuation mark). Whitespace is free. The estimate is additive over
    pieces cut at whitespace, and never smaller for such pieces than for their concatenation, so capping pieces caps
    their join. A cut *inside* a long run can make the pieces cheaper than the run (two 60-character halves of a
    120-character run: 2.6 against 60), so the chunker never joins such pieces again (chunker ``_hard_split``).

    Args:
        text: any text (markdown, code, plain).

    Returns:
        The estimated token count, ``>= 0``; ``0`` for empty or whitespace-only text.
    """
    if not text:
        return 0
    rest, cjk = _CJK_RE.subn(" ", text)
    words = _WORD_RE.findall(rest)
    long_runs = [len(w) for w in words if len(w) > LONG_RUN_CHARS]
    # in tenths of a token: 13 per word, 10 / LONG_RUN_CHARS_PER_TOKEN per character of a long run (rounded up)
    tenths = (len(words) - len(long_runs)) * 13 - (-sum(long_runs) * 10 // LONG_RUN_CHARS_PER_TOKEN)
    return cjk + (tenths + 9) // 10 + len(_PUNCT_RE.findall(rest))


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
