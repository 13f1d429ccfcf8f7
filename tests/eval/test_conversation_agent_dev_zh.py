"""The Chinese agent-shaped set eval/conversations/agent_dev_zh: its generator is deterministic, the committed files
match it, ``--check`` notices a change, the set has the promised shape, and the generator's checks hold (and fail
on data that breaks them)."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from context_engine.eval.conversations import load_conversations
from tests.eval.generators import FOLDER, assert_reproduces, load_generator, run_generator

AGENT_DEV_ZH = FOLDER / "agent_dev_zh"
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture
def gen(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_generator(monkeypatch, "make_agent_dev_zh")


def _run(*args: str) -> subprocess.CompletedProcess:
    return run_generator("make_agent_dev_zh", *args)


# ------------------------------------------------------------------------------------------------ the files
def test_generator_is_deterministic_and_the_committed_files_match_it(tmp_path: Path):
    stale = tmp_path / "stale"
    shutil.copytree(assert_reproduces("make_agent_dev_zh", tmp_path), stale)
    with (stale / "qa.jsonl").open("a", encoding="utf-8") as f:
        f.write("\n")
    changed = _run("--check", "--out", str(stale))
    assert changed.returncode == 1 and "differs (qa.jsonl)" in changed.stdout
    (stale / "turns.jsonl").unlink()
    assert _run("--check", "--out", str(stale)).returncode == 1


def test_the_agent_dev_zh_set_has_the_promised_shape():
    c = load_conversations(AGENT_DEV_ZH)
    rows = [json.loads(line) for line in (AGENT_DEV_ZH / "turns.jsonl").read_text(encoding="utf-8").splitlines()]
    assert set(rows[0]) == {"conv_id", "dia_id", "session", "session_date_time", "speaker", "text", "role"}
    assert c.conversations == [f"agent-zh-{i:02d}" for i in range(1, 11)]
    assert len(c.questions) >= 150 and len(c.no_answer) >= 40
    assert c.unknown_evidence == 0 and c.unjudged_questions == 0
    cats = c.categories()
    assert set(cats) == {"third-person", "paraphrase", "temporal", "multi-hop", "updated"}
    assert all(q.category_name == "unanswerable" and q.evidence == () for q in c.no_answer)
    names = []
    for conv in c.conversations:
        turns = c.turns[conv]
        assert 3 <= len(c.sessions(conv)) <= 5
        assert len({t.timestamp for t in turns}) == len(c.sessions(conv))  # one date per session
        assert [t.role for t in turns] == ["user", "assistant"] * (len(turns) // 2)  # every user turn answered
        assert {t.speaker for t in turns if t.role == "assistant"} <= {"", "assistant"}
        assert len({t.speaker for t in turns if t.role == "user"}) == 1
        if turns[0].speaker:
            assert CJK.fullmatch(turns[0].speaker[0]), turns[0].speaker  # a Chinese name
            names.append(turns[0].speaker)
        assert all(CJK.search(t.text) for t in turns if t.role == "user"), conv
    assert len(names) == 5 and len(set(names)) == 5  # half named, each a different name
    for q in c.questions:
        ev = [c.turn(f"{q.conv_id}/{e}") for e in q.evidence]
        assert all(t is not None and t.role == "user" for t in ev), q  # evidence: user turns only
        if q.category_name == "multi-hop":
            assert len({t.session for t in ev}) >= 2, q
    assistant = [t.text for ts in c.turns.values() for t in ts if t.role == "assistant"]
    assert sum(1 for t in assistant if not t.endswith(("？", "?"))) > len(assistant) / 2
    every = [q.question for q in (*c.questions, *c.no_answer)]
    assert all(CJK.search(q) for q in every)
    assert any("用户" in q for q in every) and any(q.startswith(("他", "她")) for q in every)
    assert any(q.startswith(tuple(names)) for q in every)
    assert "法国的首都是哪里？" in {q.question for q in c.no_answer}


# ------------------------------------------------------------------------------------------------ the checks
def test_the_generator_checks_hold_on_the_committed_set(gen: ModuleType):
    counts = {"updated": 0, "unanswerable": 0}
    for conv in gen.CONVERSATIONS:
        rows, qa, where = gen.build(conv)
        user = {r["dia_id"] for r in rows if r["role"] == "user"}
        assert {d for _, d in where.values()} <= user  # every fact key names a user turn
        text = "\n".join(r["text"] for r in rows).lower()
        for (category, question, keys, extra), row in zip(conv.questions, qa, strict=True):
            assert row["question"] == question and row["evidence"] == [where[k][1] for k in keys]
            if category == "updated":
                assert max(where[k][0] for k in extra) < min(where[k][0] for k in keys), question
                counts["updated"] += 1
            elif category == "unanswerable":
                assert extra and not keys and not any(w.lower() in text for w in extra), question
                assert any(w in question for w in extra), question
                counts["unanswerable"] += 1
            elif category == "multi-hop":
                assert len({where[k][0] for k in keys}) >= 2, question
    assert counts["updated"] >= 20 and counts["unanswerable"] >= 40


def test_occurs_is_a_substring_for_chinese_and_a_whole_word_otherwise(gen: ModuleType):
    assert gen.occurs("车", "我上周提了新车") and not gen.occurs("车", "我骑电动单元")
    assert gen.occurs("ACL", "想投明年的acl。") and not gen.occurs("car", "scarf")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda g, c: g.none("林晓喜欢喝咖啡吗？", "咖啡"), "unanswerable but"),
        (lambda g, c: g.none("林晓喜欢什么颜色？", "乐队"), "none of its absent words"),
        (lambda g, c: g.q("multi-hop", "林晓的猫和组长？", "cat", "manager"), "multi-hop evidence in one session"),
        (lambda g, c: g.upd("林晓以前住在哪里？", ("city_old",), ("move",)), "not later"),
        (lambda g, c: g.q("third-person", "林晓的狗叫什么？", "dog"), "unknown key"),
        (lambda g, c: g.q("third-person", "林晓的狗叫什么？"), "no evidence"),
    ],
)
def test_the_generator_refuses_a_question_that_breaks_a_check(gen: ModuleType, change, message):
    conv = gen.CONVERSATIONS[0]
    bad = dataclasses.replace(conv, questions=(*conv.questions, change(gen, conv)))
    with pytest.raises(SystemExit, match=message):
        gen.build(bad)


def test_the_generator_refuses_bad_sessions_and_too_small_a_set(gen: ModuleType):
    conv = gen.CONVERSATIONS[0]
    swapped = dataclasses.replace(conv, sessions=(conv.sessions[1], conv.sessions[0], *conv.sessions[2:]))
    with pytest.raises(SystemExit, match="not strictly increasing"):
        gen.build(swapped)
    with pytest.raises(SystemExit, match="3..5"):
        gen.build(dataclasses.replace(conv, sessions=conv.sessions[:2]))
    with pytest.raises(SystemExit, match="too few"):
        gen.generate(gen.CONVERSATIONS[:9])
    with pytest.raises(SystemExit, match="repeated conversation id"):
        gen.generate((conv, *gen.CONVERSATIONS))
