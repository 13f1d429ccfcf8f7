"""The pattern pass's trigger (``redaction._TRIGGER``; for ASCII text ``_TRIGGER_ASCII`` in the lower-cased text) is a
superset of what the patterns match: skipping the pass when it finds nothing never leaves a secret the patterns would
redact."""

from __future__ import annotations

import functools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_engine.redaction import _TRIGGER, _TRIGGER_ASCII, PATTERNS, Redaction, _pattern_pass, _replace
from tests.security.secret_corpus import DOCUMENT, MEMORY, SECRETS


def _patterns_always(text: str) -> str:
    """Every pattern applied, whatever the trigger says."""
    out = Redaction(text)
    for kind, pattern, group in PATTERNS:
        out.text = pattern.sub(functools.partial(_replace, kind=kind, group=group, out=out), out.text)
    return out.text


# one short line per pattern, holding no other trigger word (a trigger branch missing is then seen)
_MINIMAL = [
    "-----BEGIN RSA PRIVATE KEY-----\nabc",
    "redis://:pw12345@host",
    "https://abcdefghij0123456789xyz@example.org",
    "AccountKey=abcdefgh12",
    "sig=abcdefgh12",
    "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "Basic dXNlcjpwYXNzd29yZA==",
    "SG.aaaaaaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbb",
    "AC" + "0123456789abcdef" * 2,
    "key-" + "a1" * 16,
    "dop_v1_" + "ab12" * 16,
    "shpat_" + "ab12" * 8,
    "GOCSPX-" + "a" * 24,
    "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.abcdefghijkl",
    "AKIA" + "A1" * 8,
    "ghp_" + "a" * 36,
    "glpat-" + "a" * 20,
    "xoxb-1234567890abc",
    "sk-" + "a" * 24,
    "rk_live_" + "a" * 24,
    "AIza" + "a" * 35,
    "npm_" + "a" * 36,
    "pypi-" + "a" * 60,
    "Bearer abcdefghijklmnop1234",
    "curl -u bob:hunter22x",
    "mysql -phunter22x",
    "docker login -p hunter22x",
    "Cookie: s=abcdefgh12",
    "<passwd>hunter2</passwd>",
    "pwd = hunter22",
    "client secret abcdefgh1234567890",
    "密码：hunter22",
]
_CASES = [line for _, line, _ in SECRETS] + [DOCUMENT, MEMORY] + _MINIMAL


def test_each_minimal_line_holds_a_secret_the_patterns_redact():
    assert [line for line in _MINIMAL if _patterns_always(line) == line] == []


@pytest.mark.parametrize("text", _CASES + [t.upper() for t in _CASES] + [t.swapcase() for t in _CASES])
def test_every_corpus_secret_in_any_case_passes_the_trigger(text):
    assert _pattern_pass(text).text == _patterns_always(text)


# letters re.IGNORECASE matches that str.lower() does not map to ASCII: "ſ" (U+017F) is an "s", "İ" (U+0130) an "i",
# "K" (U+212A, Kelvin) a "k"
@pytest.mark.parametrize(
    "text",
    [
        "paſſword = hunter22",
        "apİ key: fakeApiKey0example77",
        "api \u212aey: fakeApiKey0example77",
        "Beareſ abcdefghijklmnop1234",
        "ſecret: hunter22x",
        "tokİn and paſſwd: hunter22x",
    ],
)
def test_letters_that_only_fold_to_ascii_still_reach_the_patterns(text):
    assert _pattern_pass(text).text == _patterns_always(text)


@pytest.mark.parametrize(
    "text",
    [
        "ctx://resources/payments/api-gateway/r7047.md",
        "ctx://user/sam/memories/conversations/s1/m0004.md",
        "see https://example.org/docs/runbook#restart for the steps",
    ],
)
def test_a_uri_without_userinfo_skips_the_pattern_pass(text):
    # the URL patterns need `user:password@` or `token@`: a URI without an `@` after its scheme is no trigger, so
    # the URIs of every search answer and audit row skip the 30-pattern pass
    assert _TRIGGER.search(text) is None
    assert _TRIGGER_ASCII.search(text.lower()) is None
    assert _pattern_pass(text).text == text


def test_a_long_run_of_uris_without_whitespace_is_scanned_once():
    # the scheme branch stops at the first "/" (userinfo holds none): a branch that scanned to the end of the run for
    # each "://" in it took seconds for such a text (minified JSON of links, a document of URIs); the answer is the
    # same either way, so this guards the shape of the branch and runs in milliseconds
    text = '{"links":[' + ",".join(f'"https://example.org/p/{i}"' for i in range(20_000)) + "]}"
    assert _TRIGGER_ASCII.search(text.lower()) is None
    assert _pattern_pass(text).text == text
    assert _TRIGGER_ASCII.search("https://example.org/users/@bob") is None  # an "@" after a "/" is no userinfo
    assert _pattern_pass(text + " redis://:pw12345@host").text.endswith("redis://:[REDACTED:connection_string]@host")


@pytest.mark.parametrize(
    "text",
    ["redis://:pw12345@host", "postgres://app:Hunter22x@db:5432/app", "https://abcdefghij0123456789xyz@example.org"],
)
def test_a_uri_with_userinfo_still_triggers(text):
    assert _TRIGGER_ASCII.search(text.lower()) is not None
    assert _pattern_pass(text).text != text


def test_the_ascii_trigger_is_the_trigger_in_lower_case():
    assert re.search(r"\\[A-Z]", _TRIGGER.pattern) is None  # lower-casing changes no escape (\S, \W, \D, ...)


_FRAGMENTS = [
    "password",
    "Passwd",
    "TOKEN",
    "api key",
    "Bearer ",
    "basic ",
    "AKIA",
    "sk-",
    "ghp_",
    "://",
    "https://",
    "user:",
    "hooks.slack.com/services/",
    "@host",
    "=",
    ": ",
    "密码",
    "令牌：",
    "Cookie: a=",
    "curl -u ",
    "mysql -p",
    "login -p ",
    "<password>",
    "</",
    "SG.",
    "eyJ",
    "AccountKey=",
    "-----BEGIN PRIVATE KEY-----",
]
_PIECES = st.one_of(
    st.sampled_from(_FRAGMENTS),
    st.sampled_from(["ſ", "İ", "\u212a", "ß", "é"]),
    st.text(alphabet="abcXYZ0123456789_-/+.", min_size=1, max_size=40),
    st.sampled_from([" ", "\n", "\t", "the ", "for "]),
)


@settings(max_examples=600, deadline=None)
@given(st.lists(_PIECES, min_size=1, max_size=12).map("".join), st.sampled_from([str, str.upper, str.swapcase]))
def test_the_trigger_never_skips_a_text_the_patterns_would_change(text, case):
    text = case(text)
    assert _pattern_pass(text).text == _patterns_always(text)
