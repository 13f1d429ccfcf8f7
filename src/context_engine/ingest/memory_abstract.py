"""The L0 abstract of a memory: the fact itself, not a lead cut at 80 characters (issue 11; DESIGN §1, §4).

A memory is usually one or two sentences, and the words a later question asks about can sit anywhere in it. So:

* A memory that fits ``memory.l0_max_chars`` (256, the bound of every L0: DESIGN §1) is its own abstract,
  whitespace-collapsed.
* A longer one gets an extractive abstract: its first sentence, then the sentences that carry the most *facts*
  (named entities, numbers, dates, identifiers; a cheap, language-independent proxy for what a question will name),
  greedily while they fit, re-joined in their original order. Whole sentences only; a single sentence longer than
  the budget is cut at a clause or word boundary (:func:`~context_engine.ingest.summarize.truncate_text`).

Pure functions, deterministic, no model. A message's speaker prefix (``"Caroline: ..."``) is added by the caller,
which passes the remaining budget.
"""

from __future__ import annotations

import re

from context_engine.ingest.parse import collapse_whitespace, split_sentences
from context_engine.ingest.summarize import truncate_text

__all__ = ["fact_score", "memory_abstract"]

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
)
_FACT_PATTERNS = (
    re.compile(r"\d+(?:[.,:/-]\d+)*"),  # numbers, dates, times, versions
    re.compile(rf"\b(?:{_MONTHS})\b", re.IGNORECASE),  # month and day names
    re.compile(r"(?<=[\w,;:] )[A-Z][\w'-]+"),  # capitalised words inside a sentence: names, places, products
    re.compile(r"\b[\w-]*[a-z][A-Z][\w-]*\b|\b[A-Z]{2,}[\w-]*\b"),  # identifiers: camelCase, ACRONYMS, ERR_CODES
    re.compile(r"[\u4e00-\u9fff]*[年月日号点][\u4e00-\u9fff]*"),  # Chinese dates and times (二月三日, 下午3点)
    re.compile(r"[“「《\"][^”」》\"]{1,40}[”」》\"]"),  # quoted names and titles
)


def fact_score(sentence: str) -> int:
    """How many fact-like spans (entities, numbers, dates, identifiers, quoted names) ``sentence`` holds."""
    return sum(len(p.findall(sentence)) for p in _FACT_PATTERNS)


def memory_abstract(text: str, max_chars: int) -> str:
    """The L0 of a memory whose text is ``text`` (module docstring).

    Args:
        text: the memory text (any whitespace; markdown is treated as plain text).
        max_chars: the budget in characters, ``>= 1``.

    Returns:
        ``text`` whitespace-collapsed when it fits; else whole sentences of it (the first, then the most
        fact-dense, in document order) within ``max_chars``; a lone over-long first sentence is cut at a boundary
        with ``"…"``. Never longer than ``max_chars``.
    """
    flat = collapse_whitespace(text)
    if len(flat) <= max_chars:
        return flat
    sentences = split_sentences(text)
    if not sentences:
        return truncate_text(flat, max_chars)
    first = sentences[0]
    if len(first) >= max_chars:
        return truncate_text(first, max_chars)
    chosen = {0}
    used = len(first)
    ranked = sorted(range(1, len(sentences)), key=lambda i: (-fact_score(sentences[i]), i))
    for i in ranked:
        extra = len(sentences[i]) + 1  # the joining space
        if used + extra <= max_chars:
            chosen.add(i)
            used += extra
    out = ""
    for i in sorted(chosen):  # a space between sentences, none after a Chinese full stop
        out += sentences[i] if not out or out.endswith(("。", "！", "？")) else " " + sentences[i]
    return out
