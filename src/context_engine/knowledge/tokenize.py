"""Tokenisation for the hint layer: English identifiers and words, Chinese words (jieba), normalised keys.

* :func:`tokenize` finds the query's tokens with their character spans: ASCII identifiers (``KubePodCrashLooping``,
  ``kube-apiserver``, ``etcd_disk_wal_fsync_duration_seconds_bucket``, ``RET-4001``) and Chinese words cut by
  jieba (precise mode) inside runs of CJK characters.
* :func:`words` splits identifiers into words at ``-_.:`` and CamelCase boundaries (``KubeAPIDown`` -> ``kube``,
  ``api``, ``down``).
* :func:`norm` is the key form used everywhere in the index: NFKC, case-folded, whitespace collapsed.

jieba's dictionary loads once per process (about 1 s), lazily on the first Chinese text, behind a lock; the
tokenizer is the one BM25 uses (``storage.keyword.tokenize.jieba_tokenizer``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from context_engine.storage.keyword.tokenize import jieba_tokenizer

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN_RE = re.compile(rf"(?P<a>[A-Za-z0-9]+(?:[._:\-][A-Za-z0-9]+)*)|(?P<c>[{_CJK}]+)")
_CJK_RE = re.compile(f"[{_CJK}]")
_PART_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SPACE_RE = re.compile(r"\s+")
_PLACEHOLDER_RE = re.compile(r"<[A-Za-z_][A-Za-z0-9_]*>|\{\{[^}]*\}\}")

_jieba = jieba_tokenizer  # one dictionary per process, shared with BM25 (storage/keyword/tokenize.py)


def warm_up() -> None:
    """Load jieba's dictionary now (for benchmarks and long-running servers)."""
    _jieba()


def has_cjk(text: str) -> bool:
    return bool(_CJK_RE.search(text))


def norm(text: str) -> str:
    """The index key form: NFKC, case-folded, whitespace runs collapsed to one space, stripped."""
    return _SPACE_RE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def strip_placeholders(text: str) -> str:
    """Remove template placeholders (``<namespace>``, ``{{ $labels.pod }}``): label names carry no content."""
    return _PLACEHOLDER_RE.sub(" ", text)


@dataclass(frozen=True, slots=True)
class Token:
    """A token of the original text: ``text`` as written, ``key`` normalised, ``[start, end)`` its span."""

    text: str
    key: str
    start: int
    end: int
    cjk: bool


def tokenize(text: str) -> list[Token]:
    """ASCII identifiers and Chinese words of ``text`` in order, with spans into ``text`` (see the module doc)."""
    out: list[Token] = []
    for m in _TOKEN_RE.finditer(text):
        if m.group("a") is not None:
            out.append(Token(m.group(), norm(m.group()), m.start(), m.end(), False))
            continue
        pos = m.start()
        for word in _jieba().cut(m.group(), HMM=True):
            out.append(Token(word, norm(word), pos, pos + len(word), True))
            pos += len(word)
    return out


def split_identifier(token: str) -> list[str]:
    """Words of an identifier, case-folded: split at ``-_.:`` and CamelCase (``etcdNoLeader`` -> etcd, no, leader)."""
    if has_cjk(token):
        return [norm(token)]
    return [p.casefold() for p in _PART_RE.findall(token)]


def singular(word: str) -> str:
    """A crude English singular for matching (``pods`` -> ``pod``); words of three letters or fewer are kept."""
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss") and word.isascii():
        return word[:-1]
    return word


def cjk_words(text: str) -> list[str]:
    """Chinese words of ``text`` by jieba (precise mode), normalised, punctuation and spaces dropped."""
    return [norm(w) for w in _jieba().cut(text, HMM=True) if _CJK_RE.search(w)]


def join_key(parts: list[str]) -> str:
    """Join normalised words into a phrase key: no space between two CJK words, one space otherwise."""
    out = ""
    for part in parts:
        if out and not (_CJK_RE.match(part[0]) and _CJK_RE.match(out[-1])):
            out += " "
        out += part
    return out
