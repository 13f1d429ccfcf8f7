"""The tenancy / scope pre-filter as a Milvus boolean expression (DESIGN §3; storage/filters.py).

The third translation of :class:`~context_engine.schema.nodes.VectorFilter`, beside LanceDB's SQL
(``lancedb_index.build_predicate``) and the in-process mask (``RowTable.mask``), held to the same visible set on random
filters by ``tests/storage/test_filter_translation.py``. Kept apart from the adapter so that it is tested without
pymilvus or a server.

String literals are double-quoted with the escapes that both Milvus's grammar (``Plan.g4``, read with Go's
``strconv.Unquote``) and Milvus Lite's tokenizer read the same way: ``\\\\``, ``\\"``, ``\\n``, ``\\r``, ``\\t``; every
other character, quotes of the other kind and control characters included, stands for itself.

``uri_prefix`` becomes a range, ``uri >= p and uri < successor(p)``, not ``uri like "p%"``: LIKE has its own
wildcards (``%``, ``_``) whose escaping Milvus servers and Milvus Lite's evaluators treat differently, while string
comparison is byte order in every one of them, which for UTF-8 is code-point order (Python's ``str`` order).
"""

from __future__ import annotations

from collections.abc import Sequence

from context_engine.schema.nodes import VectorFilter

__all__ = ["milvus_expression", "milvus_string", "prefix_successor"]

_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"})
_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)  # never in a UTF-8 string: the successor of U+D7FF is U+E000

# (Milvus field, VectorFilter attribute) of the string fields a filter narrows with a list.
_LIST_FIELDS = (
    ("owner_space", "owner_spaces"),
    ("context_type", "context_types"),
    ("category", "categories"),
    ("parent_uri", "parent_uris"),
    ("doc_id", "doc_ids"),
)


def milvus_string(value: str) -> str:
    """A double-quoted Milvus string literal of ``value`` (module docstring for the escapes)."""
    return '"' + value.translate(_ESCAPES) + '"'


def _in_list(field: str, values: Sequence[str]) -> str:
    return f"{field} in [{', '.join(milvus_string(str(v)) for v in values)}]"


def prefix_successor(prefix: str) -> str | None:
    """The least string greater than every string that starts with ``prefix``, or ``None`` when there is none (an
    empty prefix, or one of U+10FFFF only): drop trailing U+10FFFF, then step the last code point up by one."""
    stem = prefix.rstrip(chr(_MAX_CODE_POINT))
    if not stem:
        return None
    nxt = ord(stem[-1]) + 1
    if nxt in _SURROGATES:
        nxt = _SURROGATES.stop
    return stem[:-1] + chr(nxt)


def milvus_expression(flt: VectorFilter) -> str | None:
    """The Milvus ``filter`` text for ``flt``, or ``None`` when it can match nothing (an empty list).

    Fields are ANDed; ``None`` does not restrict; a list becomes ``field in [...]`` (a row whose ``parent_uri`` is
    null is in no list); the account is always restricted (``account_id == ...``, which also prunes the search to the
    account's partition, ``account_id`` being the partition key).

    Returns:
        e.g. ``account_id == "acme" and level in [0] and uri >= "ctx://a/" and uri < "ctx://a0"``.
    """
    clauses = [f"account_id == {milvus_string(flt.account_id)}"]
    for field, attribute in _LIST_FIELDS:
        values = getattr(flt, attribute)
        if values is None:
            continue
        if not values:
            return None
        clauses.append(_in_list(field, values))
    if flt.levels is not None:
        if not flt.levels:
            return None
        clauses.append(f"level in [{', '.join(str(int(v)) for v in flt.levels)}]")
    if flt.uri_prefix:  # "" is a prefix of every URI
        clauses.append(f"uri >= {milvus_string(flt.uri_prefix)}")
        upper = prefix_successor(flt.uri_prefix)
        if upper is not None:
            clauses.append(f"uri < {milvus_string(upper)}")
    return " and ".join(clauses)
