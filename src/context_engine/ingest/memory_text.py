"""The text identity of a memory (issue 11; ``add_memories`` dedup): the normalised text two memories must share to
be the same memory, its ``content_hash``, and the file-name slug of a memory's URI. Pure functions."""

from __future__ import annotations

import hashlib
import re
import unicodedata

from context_engine.ingest.dedup import is_code
from context_engine.ingest.loader import content_hash
from context_engine.redaction import slug_text

__all__ = ["memory_hash", "memory_slug", "normalise_memory_text"]


def normalise_memory_text(text: str) -> str:
    """The text two memories must share to be the same memory: NFKC (except superscripts, subscripts and
    fractions), case-folded but for codes (``dedup.is_code``: "AbX7q" / "abx7Q" are two, until 2026-12-07 one),
    whitespace-collapsed, with the punctuation that only shapes a sentence removed (stops, commas, quotes,
    brackets, Unicode category P standing alone). "Bob likes green tea" and "bob likes green tea!"
    are one memory; "-18 degrees" and "18 degrees", "C#" and "C", "50%" and "50", "10³" and "103" are not (until
    2026-12-07 every punctuation mark went and NFKC folded ``³`` to ``3``: the second fact of such a pair was
    answered ``unchanged`` and never stored, by ``add_memory`` and ``update_memory`` alike), nor are "5' wide" and
    '5" wide': a quote mark right after a number is its unit, feet or inches (:func:`_unit_mark`; until 2026-12-07
    both were removed), unless it closes a quote around the number ('"5"' is '5')."""
    if not text.isascii():  # ASCII has no compatibility forms
        text = "".join(_compatible(c) for c in unicodedata.normalize("NFC", text))
    folded = _WORD.sub(_fold_word, text)
    kept = []
    for i, c in enumerate(folded):
        if (
            unicodedata.category(c).startswith("P")
            and (c in _SENTENCE_PUNCTUATION or not _beside_alnum(folded, i))
            and not _unit_mark(folded, i)
        ):
            kept.append(" ")
        else:
            kept.append(c)
    return " ".join("".join(kept).split())


_WORD = re.compile(r"\w+")


def _fold_word(m: re.Match[str]) -> str:
    """A word case-folded, unless it is a code (``dedup.is_code``)."""
    word = m.group(0)
    return word if is_code(word) else word.casefold()


#: Punctuation that shapes a sentence and never a value: removed wherever it stands (other marks, such as ``-``,
#: ``#``, ``%``, ``/``, ``@``, are removed only where they stand alone: "a - b").
_SENTENCE_PUNCTUATION = frozenset(".,;:!?…'\"‘’“”«»‹›()[]{}¡¿。，、；：！？「」『』（）【】《》〈〉・")
#: Compatibility decompositions that change a value ("10³" is not "103", "½" not "1/2"): kept as written.
_KEEP_FORMS = ("<super>", "<sub>", "<fraction>")


def _compatible(c: str) -> str:
    """``c`` under NFKC (full-width letters and digits, ligatures), unless its compatibility form changes a value."""
    return c if unicodedata.decomposition(c).startswith(_KEEP_FORMS) else unicodedata.normalize("NFKC", c)


#: Marks that, right after a number, are its unit (feet and inches, minutes and seconds: ``5'`` / ``5"``, ``5′`` /
#: ``5″``, which NFKC writes ``5′′``), each with the marks that would have opened a quote around the number.
_UNIT_MARKS = {"'": "'‘", "’": "'‘", '"': '"“', "′": "", "″": ""}


def _unit_mark(text: str, i: int) -> bool:
    """Whether ``text[i]`` is a unit mark after a number ("5' wide", "5'' wide", "5′′"), not the end of a quote
    around it ("'5'", '"5"'): the number's digits are not preceded by a quote mark."""
    if text[i] not in _UNIT_MARKS:
        return False
    j = i - 1
    while j >= 0 and text[j] in _UNIT_MARKS:  # 5'' and 5′′: inches, seconds
        j -= 1
    if j < 0 or not text[j].isdigit():
        return False
    while j >= 0 and (text[j].isdigit() or text[j] in ".,"):
        j -= 1
    return j < 0 or text[j] not in _UNIT_MARKS[text[i]]


def _beside_alnum(text: str, i: int) -> bool:
    """Whether ``text[i]`` touches a letter or digit on either side ("-18", "C#", "a/b"; not "a - b")."""
    return (i > 0 and text[i - 1].isalnum()) or (i + 1 < len(text) and text[i + 1].isalnum())


def memory_hash(text: str) -> str:
    """The ``content_hash`` of a memory: of its normalised text, so the same fact maps to the same node."""
    return content_hash(normalise_memory_text(text), "memory")


def memory_slug(text: str, max_len: int = 48) -> str:
    """A file-name slug of ``text`` (letters, digits and CJK kept; secrets left out) plus an 8-hex hash of its
    normalised form."""
    norm = unicodedata.normalize("NFC", slug_text(text))
    words = re.findall(r"\w+", norm.lower())
    slug = "-".join(words)[:max_len].strip("-") or "memory"
    return f"{slug}-{hashlib.sha256(normalise_memory_text(text).encode()).hexdigest()[:8]}"
