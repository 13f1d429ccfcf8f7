"""Text with nothing to see, and text that could drive a terminal (attack pass F9).

Content made only of whitespace and invisible format characters (U+200B, U+FEFF, U+202E, U+2060...) is refused on
every memory write as whitespace-only content is, ``WRT-4221`` (ingest/loader.py ``decode_text``, the one check of
the write paths; schema/text.py ``has_visible_text``), and nothing is written. A control character stored in a
memory or a document (ESC, a C1 CSI) is shown escaped by the CLI's human-readable output (``\\x1b``), never sent to
the operator's terminal (interfaces/cli/common.py ``shown``); ``--json`` and the stored text are unchanged.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.cli.app import app
from context_engine.interfaces.cli.common import shown
from context_engine.schema.text import has_visible_text
from tests.retrieval.conftest import ADMIN, ALICE, HashEmbedder

INVISIBLE = [
    "\u200b",
    "\u200b\u200b",
    "\ufeff\ufeff",  # the first is a BOM, dropped; the second is not
    "\u202e",
    " \u200b\n\t\u2060 ",
    "\u2066\u2069\u200e",
    "\u00ad",
    "\x1b",
]
ALICE_AS = "default:user:alice:helper"


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        ("a", True),
        ("\u200bTea at noon", True),
        ("磁盘", True),
        ("\x1b[31m", True),  # "[31m" can be seen
        ("", False),
        (" \t\n\u3000", False),
        *((t, False) for t in INVISIBLE),
    ],
)
def test_has_visible_text(text, visible):
    assert has_visible_text(text) is visible


@pytest.fixture
def engine(tmp_path):
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    e = ContextEngineService(load_settings(tmp_path / "api-home"), embedder=HashEmbedder())
    e.add_memory("Alice drinks green tea at noon.", ALICE)
    yield e
    e.close()


def _nodes(engine) -> int:
    return engine.stats(ADMIN)["nodes"]


@pytest.mark.parametrize("text", INVISIBLE, ids=[f"{t!r}" for t in INVISIBLE])
def test_invisible_only_content_is_refused_on_every_write_and_writes_nothing(engine, text):
    uri = engine.list_memories(ALICE).items[0].uri
    before = _nodes(engine)
    writes = [
        lambda: engine.add_memory(text, ALICE),
        lambda: engine.add_memories([{"text": "Alice walks to work."}, {"text": text}], ALICE),
        lambda: engine.add_messages([{"role": "user", "content": "hi"}, {"role": "user", "content": text}], "c", ALICE),
        lambda: engine.update_memory(uri, text, ALICE),
        lambda: engine.add_text(text, "ctx://resources/blank.md", ADMIN),
    ]
    for write in writes:
        with pytest.raises(ContextEngineError) as caught:
            write()
        assert caught.value.code is ErrorCode.CONTENT_INVALID
        assert "no visible character" in caught.value.message or "is empty" in caught.value.message
    assert _nodes(engine) == before
    assert engine.get_memory(uri, ALICE).version == 1


def test_the_message_says_the_text_has_no_visible_character(engine):
    with pytest.raises(ContextEngineError) as caught:
        engine.add_messages([{"role": "user", "content": "\u200b\u200b"}], "c", ALICE)
    assert "no visible character" in caught.value.message and caught.value.details["index"] == 0
    with pytest.raises(ContextEngineError) as caught:
        engine.add_memory("   ", ALICE)
    assert caught.value.code is ErrorCode.CONTENT_INVALID and "is empty" in caught.value.message  # as before


def test_visible_text_beside_invisible_characters_is_stored(engine):
    uri = engine.add_memory("\u200bAlice swims on Fridays.", ALICE).uris[0]
    assert "Alice swims on Fridays." in engine.get_memory(uri, ALICE).text


def test_an_invisible_content_is_no_text_beside_a_refusal_or_other_parts(engine):
    uris = engine.add_messages(
        [
            {"role": "assistant", "content": "\u200b", "refusal": "I cannot book that."},
            {"role": "user", "content": [{"type": "text", "text": "\u200b"}, {"type": "text", "text": "Thanks."}]},
        ],
        "c2",
        ALICE,
    ).uris
    assert [engine.get_memory(u, ALICE).text for u in uris] == ["I cannot book that.", "Thanks."]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\x1b[31mred\x1b[0m", "a\\x1b[31mred\\x1b[0m"),
        ("\x9b2J \x07 \x7f \x00", "\\x9b2J \\x07 \\x7f \\x00"),
        ("lone\rcarriage", "lone\\x0dcarriage"),
        ("lines\nand\ttabs\r\n", "lines\nand\ttabs\r\n"),
        ("磁盘 ✓ \u200b [bold]", "磁盘 ✓ \u200b [bold]"),
    ],
)
def test_shown_escapes_control_characters_but_newline_and_tab(text, expected):
    assert shown(text) == expected


ESC_TEXT = "Alert \x1b[31mred\x1b[0m \x1b]0;owned\x07 and \x9b2J done."


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home holding a memory, a message and a document with escape sequences in their text and metadata; the
    CLI opens it with the hashing embedder."""
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    monkeypatch.setattr("context_engine.service.build_embedder", lambda *a, **k: HashEmbedder())
    path = tmp_path / "home"
    e = ContextEngineService(load_settings(path), embedder=HashEmbedder())
    memory = e.add_memory(ESC_TEXT, ALICE, metadata={"tag": "\x1b[5mblink\x9b"}).uris[0]
    e.add_messages([{"role": "user", "content": ESC_TEXT}], "esc", ALICE)
    e.add_text(f"# Escapes\n\n{ESC_TEXT}\n", "ctx://resources/esc.md", ADMIN)
    e.close()
    return str(path), memory


def _cli(home: str, *args: str):
    return CliRunner().invoke(app, ["--home", home, *args])


def _no_raw_controls(output: str) -> None:
    for raw in ("\x1b[31m", "\x1b]0;", "\x07", "\x9b", "\x1b[5m"):
        assert raw not in output, repr(output)


def test_the_cli_shows_stored_escape_sequences_escaped(home):
    path, memory = home
    commands = [
        (["--as", ALICE_AS, "get-memory", memory], True),
        (["--as", ALICE_AS, "read", memory, "--level", "L2"], True),
        (["read", "ctx://resources/esc.md", "--level", "L2"], True),
        (["--as", ALICE_AS, "memories"], False),
        (["--as", ALICE_AS, "ls", "ctx://user/alice/memories/general/"], False),
        (["tree", "ctx://resources/", "--files"], False),
    ]
    for args, whole in commands:
        r = _cli(path, *args)
        assert r.exit_code == 0, r.output
        _no_raw_controls(r.output)
        assert "\\x1b" in r.output, (args, r.output)
        if whole:
            assert "Alert \\x1b[31mred\\x1b[0m \\x1b]0;owned\\x07 and \\x9b2J done." in r.output
    # the metadata line is JSON text: C0 as JSON writes it, C1 (which JSON leaves as is) escaped
    assert '"tag": "\\u001b[5mblink\\x9b"' in _cli(path, "--as", ALICE_AS, "get-memory", memory).output


def test_json_output_and_the_stored_text_are_unchanged(home):
    path, memory = home
    r = _cli(path, "--json", "--as", ALICE_AS, "get-memory", memory)
    assert r.exit_code == 0, r.output
    assert "\\u001b[31m" in r.output  # JSON's own escape
    detail = json.loads(r.output)
    assert detail["text"] == ESC_TEXT and detail["metadata"]["tag"] == "\x1b[5mblink\x9b"


def test_an_error_quoting_its_input_is_shown_escaped(home):
    path, _ = home
    r = _cli(path, "--as", ALICE_AS, "get-memory", "ctx://user/alice/memories/\x1b[31mx.md")
    assert r.exit_code != 0
    _no_raw_controls(r.output)
