"""The invalid-Unicode check shared by every interface (schema/text.py)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from context_engine.errors import ErrorCode
from context_engine.schema.text import find_invalid_text, require_valid_text


class _Item(BaseModel):
    text: str
    tags: list[str] = []


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ("fine 磁盘 ✓ 😀", None),
        ("bad \ud800", ()),
        ({"a": "x", "b\udc80": 1, "c": "\ud800"}, ("b\\udc80",)),  # the first in order: a key before a later value
        ({"a": ["ok", {"z": "bad \udfff"}]}, ("a", 1, "z")),
        (_Item(text="ok", tags=["x", "\udcff"]), ("tags", 1)),
        ([{"k": 1}, ("t", "\ud83d")], (1, 1)),  # half of a surrogate pair is a lone surrogate
    ],
)
def test_find_invalid_text(value, where):
    assert find_invalid_text(value) == where


def test_any_depth_and_the_error():
    deep: object = "\ud800"
    for _ in range(2000):
        deep = [deep]
    assert find_invalid_text(deep) == (0,) * 2000
    with pytest.raises(Exception) as caught:
        require_valid_text({"messages": [{"content": "\ud800"}]}, ErrorCode.CONTENT_INVALID, ("body",))
    err = caught.value
    assert err.code is ErrorCode.CONTENT_INVALID
    assert err.details == {"loc": ["body", "messages", "0", "content"], "reason": "invalid_unicode"}
    err.message.encode("utf-8")  # the message itself is encodable
