"""The conversation-shapes probe set eval/conversations/agent_shapes: its generator is deterministic, the committed
files match it, and the set has the promised shape (seven shapes, each question named and with a pronoun, evidence
on user or tool turns that exist, unanswerable questions without evidence, the OpenAI shape's system and tool
turns)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from context_engine.eval.conversation_eval import _message
from context_engine.eval.conversations import load_conversations
from context_engine.schema.conversation import corrects_earlier, reports_action
from context_engine.schema.memory import Message
from tests.eval.generators import FOLDER, assert_reproduces, load_generator, run_generator

SHAPES = FOLDER / "agent_shapes"
NAMES = {
    "echo": "Ines",
    "dense": "Rafael",
    "openai": "Aroha",
    "updates": "Oskar",
    "bursts": "Noor",
    "corrections": "Tomas",
    "requests": "Lena",
}


@pytest.fixture
def gen(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_generator(monkeypatch, "make_agent_shapes")


def _run(*args: str) -> subprocess.CompletedProcess:
    return run_generator("make_agent_shapes", *args)


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (SHAPES / name).read_text(encoding="utf-8").splitlines()]


def test_generator_is_deterministic_and_the_committed_files_match_it(tmp_path: Path):
    assert_reproduces("make_agent_shapes", tmp_path)


def test_the_agent_shapes_set_has_the_promised_shape():
    c = load_conversations(SHAPES)
    turns, qa = _rows("turns.jsonl"), _rows("qa.jsonl")
    assert set(turns[0]) == {"conv_id", "dia_id", "session", "session_date_time", "speaker", "text", "role"}
    assert c.conversations == list(NAMES)
    assert [len(c.turns[k]) for k in NAMES] == [24, 16, 25, 26, 28, 32, 21]
    assert [len(c.sessions(k)) for k in NAMES] == [3, 2, 2, 3, 3, 3, 3]
    assert len(turns) == 172 and len(qa) == 181
    assert c.categories() == {"named": 80, "pronoun": 80}
    assert len(c.no_answer) == 21 and c.unknown_evidence == 0 and c.unjudged_questions == 0
    for conv in NAMES:
        ts = c.turns[conv]
        assert len({t.timestamp for t in ts}) == len(c.sessions(conv))  # one date per session
        assert [t.timestamp for t in ts] == sorted(t.timestamp for t in ts)
        assert all(t.timestamp.hour == 18 and t.timestamp.minute == 0 for t in ts)
        assert {t.speaker for t in ts if t.role == "user"} == {NAMES[conv]}
        assert {t.speaker for t in ts if t.role in ("assistant", "system")} == {""}
        assert [t.dia_id for t in ts] == [f"D{s}:{n}" for s, (_, st) in enumerate(c.sessions(conv), 1) for n in
                                          range(1, len(st) + 1)]  # fmt: skip


def test_every_question_has_its_pair_and_evidence_on_a_user_or_tool_turn():
    c = load_conversations(SHAPES)
    qa = _rows("qa.jsonl")
    known = {(r["conv_id"], r["dia_id"]): r["role"] for r in _rows("turns.jsonl")}
    by_conv: dict[str, list[dict]] = {}
    for r in qa:
        assert r["shape"] == r["conv_id"] and r["qa_id"].startswith(r["conv_id"] + "#")
        assert r["category"] == {"named": 1, "pronoun": 2, "unanswerable": 6}[r["category_name"]]
        by_conv.setdefault(r["conv_id"], []).append(r)
        if r["category_name"] == "unanswerable":
            assert r["evidence"] == []
            continue
        assert r["evidence"], r
        for e in r["evidence"]:
            assert (r["conv_id"], e) in known, r  # every evidence id exists
            # never a system turn; an assistant's only where it did what the user asked
            assert known[r["conv_id"], e] in (("assistant",) if r["conv_id"] == "requests" else ("user", "tool")), r
        if known[r["conv_id"], r["evidence"][0]] == "tool":
            assert r["conv_id"] == "openai", r
    for conv, rows in by_conv.items():
        answerable = [r for r in rows if r["category_name"] != "unanswerable"]
        assert len([r for r in rows if r["category_name"] == "unanswerable"]) == 3
        pairs = list(zip(answerable[::2], answerable[1::2], strict=True))
        for named, pronoun in pairs:  # each question twice, named first, with the same evidence
            assert (named["category_name"], pronoun["category_name"]) == ("named", "pronoun")
            assert named["evidence"] == pronoun["evidence"] and named["question"] != pronoun["question"]
            assert NAMES[conv] not in pronoun["question"], pronoun
        assert sum(NAMES[conv] in n["question"] for n, _ in pairs) >= len(pairs) - 3, conv
    assert {q.qa_id for q in c.no_answer} == {r["qa_id"] for r in qa if r["category_name"] == "unanswerable"}
    assert any(r["evidence"] == ["D1:4"] and r["conv_id"] == "openai" for r in qa)  # a tool result as evidence


def test_the_openai_shape_keeps_system_and_tool_turns_and_calls_as_the_engine_renders_them():
    c = load_conversations(SHAPES)
    ts = c.turns["openai"]
    assert [t.dia_id for t in ts if t.role == "system"] == ["D1:1", "D2:1"]
    tools = [t for t in ts if t.role == "tool"]
    assert [t.speaker for t in tools] == [
        "restaurant_search",
        "book_table",
        "get_weather",
        "calendar_create",
        "reminder_create",
    ]
    assert all(json.loads(t.text) for t in tools)
    calls = [t for t in ts if t.role == "assistant" and t.text.split("(")[0] in {x.speaker for x in tools}]
    assert len(calls) == 5
    book = next(t for t in calls if t.text.startswith("book_table("))
    arguments = '{"restaurant": "Kiln & Clover", "time": "19:00", "date": "2024-05-10", "party_size": 3}'
    openai = {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {
        "name": "book_table", "arguments": arguments}}]}  # fmt: skip
    assert book.text == Message.model_validate(openai).content == f"book_table({arguments})"
    for t in ts:  # what the evaluation sends add_messages keeps each role, and validates
        message = Message.model_validate(_message(t))
        assert (message.role, message.content, message.speaker or "") == (t.role, t.text, t.speaker)
    assert all(t.role in ("user", "assistant") for k in NAMES if k != "openai" for t in c.turns[k])


def test_the_bursts_shape_sends_several_user_messages_in_a_row():
    ts = load_conversations(SHAPES).turns["bursts"]
    roles = [t.role for t in ts]
    in_a_row = sum(a == b == "user" for a, b in zip(roles, roles[1:], strict=False))
    assert in_a_row == 12  # what the burst rule of ingest/conversation.py reads: a message going on from the last
    assert [t.text for t in ts[:3]] == [
        "Quick update on my mum.",
        "She had a fall at home last week and broke her hip.",
        "The surgeons at Ninewells replaced it on Tuesday.",
    ]


def test_the_generator_refuses_evidence_on_an_assistant_turn(gen: ModuleType):
    conv = dict(gen.OPENAI, questions=[("Which restaurant did Aroha book?", [5], "Which restaurant did she book?")])
    with pytest.raises(SystemExit, match="not all user or tool"):
        gen.build(conv)
    with pytest.raises(SystemExit, match="repeated conversation id"):
        gen.generate((gen.ECHO, gen.ECHO))


def test_the_corrections_shape_corrects_seven_statements_in_words_the_rule_reads():
    ts = load_conversations(SHAPES).turns["corrections"]
    corrections = [t.dia_id for t in ts if t.role == "user" and corrects_earlier(t.text)]
    # in the next message, past the assistant's reply, and a session later (schema/conversation.py)
    assert corrections == ["D1:3", "D1:9", "D2:1", "D2:5", "D3:1", "D3:7", "D3:9"]
    asked = {e for r in _rows("qa.jsonl") if r["conv_id"] == "corrections" for e in r["evidence"]}
    assert set(corrections) <= asked  # every correction is what a question asks for


def test_the_requests_shape_asks_the_assistant_and_its_replies_report_what_it_did():
    ts = load_conversations(SHAPES).turns["requests"]
    reports = [t.dia_id for t in ts if t.role == "assistant" and reports_action(t.text)]
    asked = {e for r in _rows("qa.jsonl") if r["conv_id"] == "requests" for e in r["evidence"]}
    # every evidence turn but one is a report the rule reads; "Your dentist appointment ... is now on Friday" is not
    assert asked - set(reports) == {"D3:4"} and len(reports) == 7
    assert all(t.role == "user" for t in ts if t.dia_id in {"D1:1", "D2:1", "D3:1"})  # the requests
