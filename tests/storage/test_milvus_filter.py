"""The VectorFilter -> Milvus expression translation (storage/vector/milvus_filter.py), without a server.

String literals are read back with Milvus Lite's own tokenizer (the reader of the server the suites run on); the
prefix range is checked against ``str.startswith`` in both code-point and UTF-8 byte order (Milvus compares bytes).
The visible set on a real server is tested in test_filter_translation.py and the vector conformance suite.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from context_engine.schema.nodes import VectorFilter
from context_engine.storage.vector.milvus_filter import milvus_expression, milvus_string, prefix_successor

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=16)


def _read_literal(literal: str) -> str:
    tokenize = pytest.importorskip("milvus_lite.search.filter.tokens").tokenize
    tokens = tokenize(literal)
    assert [t.kind.name for t in tokens] == ["STRING", "EOF"], literal
    return tokens[0].value


@pytest.mark.parametrize(
    "value",
    ["", "plain", "it's", 'say "hi"', "back\\slash", "trail\\", "new\nline", "cr\rtab\t", "a%b_c", "租户", "\x00nul"],
)
def test_literal_reads_back_as_the_value(value: str) -> None:
    assert _read_literal(milvus_string(value)) == value


@given(value=TEXT)
def test_any_text_reads_back_as_itself(value: str) -> None:
    assert _read_literal(milvus_string(value)) == value


def test_injection_stays_inside_the_literal() -> None:
    expr = milvus_expression(VectorFilter(account_id='a" or account_id != "'))
    assert expr == 'account_id == "a\\" or account_id != \\""'


@pytest.mark.parametrize(
    ("prefix", "successor"),
    [
        ("", None),
        ("ctx://a/", "ctx://a0"),
        ("ab", "ac"),
        ("a\U0010ffff", "b"),
        ("a\U0010ffff\U0010ffff", "b"),
        ("\U0010ffff", None),
        ("x\ud7ff", "x\ue000"),  # over the surrogates, which no UTF-8 string holds
    ],
)
def test_prefix_successor(prefix: str, successor: str | None) -> None:
    assert prefix_successor(prefix) == successor


@given(prefix=TEXT, rest=TEXT, other=TEXT)
def test_prefix_range_is_startswith_in_code_point_and_byte_order(prefix: str, rest: str, other: str) -> None:
    upper = prefix_successor(prefix)
    for s in (prefix + rest, other, prefix[:-1] + other):
        in_range = s >= prefix and (upper is None or s < upper)
        assert in_range == s.startswith(prefix), (prefix, s)
        b, p = s.encode(), prefix.encode()
        in_bytes = b >= p and (upper is None or b < upper.encode())
        assert in_bytes == s.startswith(prefix), (prefix, s)


def test_expression_of_every_field() -> None:
    flt = VectorFilter(
        account_id="acme",
        owner_spaces=["shared", "user:u1"],
        levels=[0, 2],
        context_types=["memory"],
        categories=[""],
        uri_prefix="ctx://user/u1/",
        parent_uris=["ctx://user/u1/memories/"],
        doc_ids=["d'1"],
    )
    assert milvus_expression(flt) == (
        'account_id == "acme" and owner_space in ["shared", "user:u1"] and context_type in ["memory"] and '
        'category in [""] and parent_uri in ["ctx://user/u1/memories/"] and doc_id in ["d\'1"] and level in [0, 2] '
        'and uri >= "ctx://user/u1/" and uri < "ctx://user/u10"'
    )
    assert milvus_expression(VectorFilter(account_id="acme", uri_prefix="")) == 'account_id == "acme"'


@pytest.mark.parametrize("field", ["owner_spaces", "levels", "context_types", "categories", "parent_uris", "doc_ids"])
def test_an_empty_list_matches_nothing(field: str) -> None:
    assert milvus_expression(VectorFilter(account_id="acme", **{field: []})) is None
