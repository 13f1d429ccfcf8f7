"""Text that can be stored: the one check for invalid Unicode in caller input (issue 14, bad input).

A Python ``str`` can hold lone surrogates (``"\\ud800"``): JSON's ``\\ud800`` escape, ``surrogateescape``-decoded
command-line bytes. They cannot be encoded as UTF-8, so the metadata store, the content files and the tokenizers
would fail on them deep inside a write or a query. Every interface checks its input here first and answers with a
code: ``WRT-4221`` on writes, ``RET-4001`` on reads and queries.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from context_engine.errors import ContextEngineError, ErrorCode

_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")


class _Key(str):
    """A mapping key on the walk's stack (its location is the mapping's, plus the key shown escaped)."""


def has_invalid_unicode(text: str) -> bool:
    """True when ``text`` holds a lone surrogate (U+D800..U+DFFF), which UTF-8 cannot encode."""
    return _SURROGATE.search(text) is not None


def has_visible_text(text: str) -> bool:
    """True when ``text`` has a character a reader can see: anything but whitespace, control characters (Unicode
    category Cc) and invisible format characters (category Cf: U+200B zero width space, U+FEFF, U+2060 word joiner,
    the bidirectional marks and overrides such as U+202E...). Text without one is as empty as whitespace is."""
    return any(not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf") for c in text)


def find_invalid_text(value: Any, loc: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """Location of the first string (or mapping key) in ``value`` with invalid Unicode, ``None`` when all are valid.

    Walks strings, mappings (keys, then values), lists, tuples, sets and pydantic models (their fields), depth-first
    in order, without recursion (any depth). The location is the path of keys and indexes from ``value``, e.g.
    ``("messages", 2, "content")``; an invalid key is shown with its surrogates escaped (``k\\udc80``).
    """
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, loc)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, _Key):
            if has_invalid_unicode(item):
                return (*where, _shown(item))
        elif isinstance(item, str):
            if has_invalid_unicode(item):
                return where
        elif isinstance(item, BaseModel):  # a deprecated field repeats a field's value under its old name: skipped
            fields = type(item).model_fields
            stack.extend((getattr(item, k), (*where, k)) for k in reversed(fields) if fields[k].deprecated is None)
        elif isinstance(item, Mapping):
            entries: list[tuple[Any, tuple[str | int, ...]]] = []
            for k, v in item.items():
                if isinstance(k, str):
                    entries.append((_Key(k), where))
                entries.append((v, (*where, k if isinstance(k, str | int) else str(k))))
            stack.extend(reversed(entries))
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend((v, (*where, i)) for i, v in reversed(list(enumerate(item))))
    return None


def invalid_text_error(loc: tuple[str | int, ...], code: ErrorCode) -> ContextEngineError:
    """The error for invalid Unicode at ``loc``: ``code`` is ``WRT-4221`` for writes, ``RET-4001`` for reads."""
    where = ".".join(str(p) for p in loc) or "input"
    return ContextEngineError(
        code,
        f"{where}: invalid Unicode (a lone surrogate such as \\ud800); send well-formed UTF-8 text",
        {"loc": [str(p) for p in loc], "reason": "invalid_unicode"},
    )


def require_valid_text(value: Any, code: ErrorCode, loc: tuple[str | int, ...] = ()) -> None:
    """Raise :func:`invalid_text_error` when :func:`find_invalid_text` finds anything in ``value``.

    Raises:
        ContextEngineError: ``code`` (``WRT-4221`` or ``RET-4001``) with ``details.loc``.
    """
    found = find_invalid_text(value, loc)
    if found is not None:
        raise invalid_text_error(found, code)


QUERY_MAX_CHARS = 4096
"""The longest query any read tool accepts (characters): search_memory, lookup_knowledge, the similar route."""


def check_query_text(query: object, *, field: str = "query", max_chars: int = QUERY_MAX_CHARS) -> str:
    """The one check of a read tool's query text, whatever the entry point (Python API, HTTP, MCP, CLI) and the
    answer's form (full or compact): non-empty, no lone surrogate, at most ``max_chars`` characters, no control
    character other than tab, newline and carriage return (a NUL cannot reach the tokenizers or the logs).

    Returns:
        ``query``, unchanged.

    Raises:
        ContextEngineError: ``RET-4001`` with ``details.field`` (and ``loc``/``reason`` for invalid Unicode,
            ``max_chars``/``chars`` for an over-long query).
    """
    if not isinstance(query, str) or not query.strip():
        raise ContextEngineError(ErrorCode.QUERY_INVALID, f"{field} is empty", {"field": field})
    if has_invalid_unicode(query):
        raise invalid_text_error((field,), ErrorCode.QUERY_INVALID)
    if len(query) > max_chars:
        raise ContextEngineError(
            ErrorCode.QUERY_INVALID,
            f"{field} is longer than {max_chars} characters; send the question, alert or symptom, not a whole log",
            {"field": field, "max_chars": max_chars, "chars": len(query)},
        )
    if _CONTROL.search(query) is not None:
        raise ContextEngineError(
            ErrorCode.QUERY_INVALID, f"{field} contains control characters (such as NUL)", {"field": field}
        )
    return query


def _shown(key: str) -> str:
    """A mapping key for an error location, its surrogates escaped (the location must itself be encodable)."""
    return key.encode("utf-8", "backslashreplace").decode("utf-8")
