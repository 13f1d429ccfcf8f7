import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.uri import ContextURI, validate_segment


@pytest.mark.parametrize(
    ("raw", "canonical", "ctype", "category", "owner", "is_dir"),
    [
        ("ctx://resources/", "ctx://resources/", "resource", None, "shared", True),
        ("ctx://resources", "ctx://resources/", "resource", None, "shared", True),
        ("ctx://resources/k8s/pod.md", "ctx://resources/k8s/pod.md", "resource", "k8s", "shared", False),
        ("ctx://resources/k8s/", "ctx://resources/k8s/", "resource", "k8s", "shared", True),
        ("ctx://resources/top.md", "ctx://resources/top.md", "resource", None, "shared", False),
        ("ctx://user/alice/memories/preference/x.md", None, "memory", "preference", "user:alice", False),
        ("ctx://agent/bot/skills/kubectl/logs.md", None, "skill", "kubectl", "agent:bot", False),
        ("ctx://agent/bot/memories/event/e1", None, "memory", "event", "agent:bot", False),
        ("ctx://user/alice/", "ctx://user/alice/", None, None, "user:alice", True),
        ("ctx://user/alice/notes/x", None, None, None, "user:alice", False),
        ("ctx://resources/文档/说明.md", None, "resource", "文档", "shared", False),
    ],
)
def test_parse_derives_type_category_owner(raw, canonical, ctype, category, owner, is_dir):
    u = ContextURI.parse(raw)
    assert str(u) == (canonical or raw)
    assert u.context_type == ctype
    assert u.category == category
    assert u.owner_space == owner
    assert u.is_dir is is_dir


def test_nfc_normalisation_makes_equal_uris():
    decomposed = "ctx://resources/cafe\u0301.md"
    composed = "ctx://resources/caf\u00e9.md"
    assert str(ContextURI.parse(decomposed)) == composed


def test_parent_child_and_key():
    u = ContextURI.parse("ctx://resources/a/b/c.md")
    assert str(u.parent) == "ctx://resources/a/b/"
    assert [str(a) for a in u.ancestors()] == ["ctx://resources/a/b/", "ctx://resources/a/", "ctx://resources/"]
    d = ContextURI.parse("ctx://resources/a/")
    assert str(d.child("x.md")) == "ctx://resources/a/x.md"
    assert d.key == "ctx://resources/a"
    assert ContextURI.parse("ctx://resources/a/b/c.md").is_within(d)
    assert not ContextURI.parse("ctx://resources/ab/c.md").is_within(d)
    with pytest.raises(ContextEngineError):
        u.child("nope")


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("ctx://resources/../etc", "'..'"),
        ("ctx://resources/./a", "'.'"),
        ("ctx://resources/a//b", "empty"),
        ("ctx://resources/a\\b", "'\\\\'"),
        ("ctx://resources/a\x07b", "control character"),
        ("ctx://resources/a\u200bb", "control character"),
        ("ctx://resources/a:b", "':'"),
        ("ctx://resources/" + "a" * 1100, "1024 bytes"),
        ("ctx://resources/" + "b" * 300, "255 bytes"),
        ("http://resources/a", "must start with"),
        ("ctx://people/a", "unknown scope"),
        ("ctx://user/", "needs a space"),
        ("ctx://resources/dir/.abstract.md", "reserved"),
        ("", "must start with"),
    ],
)
def test_invalid_uris_raise_with_reason(raw, why):
    with pytest.raises(ContextEngineError) as exc:
        ContextURI.parse(raw)
    assert exc.value.code is ErrorCode.URI_INVALID
    assert why in exc.value.message


def test_cjk_uri_within_byte_limit_is_accepted():
    # 300 CJK characters are 900 bytes: accepted; 400 would be 1,200 bytes: rejected.
    seg = "文" * 80
    ok = ContextURI.parse(f"ctx://resources/{seg}/{seg}/{seg}.md")
    assert ok.segments[0] == seg
    with pytest.raises(ContextEngineError):
        ContextURI.parse("ctx://resources/" + "/".join(["文" * 80] * 5))


def _reference_refusal(segment: str) -> str | None:
    """What the per-character rule refuses in a segment (the first separator or Cc/Cf/Zl/Zp character), as the
    message names it; ``None`` when nothing."""
    for ch in unicodedata.normalize("NFC", segment):
        if ch in "/\\:":
            return f"character {ch!r} is not allowed inside a segment"
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            return f"control character U+{ord(ch):04X} is not allowed"
    return None


@pytest.mark.parametrize("bad", ["\x00", "\x1f", "\x7f", "\t", "/", "\\", ":", "\u200b", "\u2028", "\u2029", "\x85"])
@pytest.mark.parametrize("around", [("notes", ".md"), ("笔记", ".md"), ("", "x")])
def test_a_refused_character_is_named_in_ascii_and_other_segments(bad, around):
    segment = around[0] + bad + around[1]
    with pytest.raises(ContextEngineError) as err:
        validate_segment(segment)
    assert err.value.code is ErrorCode.URI_INVALID
    assert _reference_refusal(segment) in err.value.message


def _reference_outcome(segment: str) -> str:
    """validate_segment as a plain per-character rule (blank, '.', '..', reserved, then the first refused character,
    a lone surrogate, the length): the NFC segment, or the reason it is refused."""
    seg = unicodedata.normalize("NFC", segment)
    stem = seg.rsplit(".", 1)[0]
    if seg == "" or not seg.strip() or (stem and not stem.strip()) or seg in (".", ".."):
        return "refused before the characters"
    if seg in {".abstract.md", ".overview.md", ".content.md", ".node"}:
        return "refused before the characters"
    refusal = _reference_refusal(seg)
    if refusal is not None:
        return refusal
    if any("\ud800" <= ch <= "\udfff" for ch in seg):
        return "contains a lone surrogate"
    if len(seg.encode("utf-8", "surrogatepass")) > 255:
        return "segment longer than 255 bytes"
    return seg


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=12) | st.text(min_size=1, max_size=12))
def test_segment_validation_refuses_what_the_per_character_rule_refuses(segment):
    # the ASCII fast path (one regex search) and the general loop give the plain rule's answer, message included
    expected = _reference_outcome(segment)
    try:
        got = validate_segment(segment)
    except ContextEngineError as err:
        assert expected != unicodedata.normalize("NFC", segment)
        if expected != "refused before the characters":
            assert expected in err.message
    else:
        assert got == expected
