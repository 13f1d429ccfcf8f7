"""Agent-shaped conversations: the ``role`` field, no-answer questions, the ``acks`` perturbation, P@1/R@3, and the
generated set eval/conversations/agent_dev (its generator is deterministic and the committed files match it)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from context_engine.errors import ContextEngineError
from context_engine.eval import conversation_eval as ce
from context_engine.eval.conversation_eval import (
    ConversationEvalOptions,
    EngineConversationRetriever,
    assistant_turn_share,
    none_share,
    run_conversation_eval,
)
from context_engine.eval.conversations import ACK_TEXTS, ack_text, load_conversations
from context_engine.settings import load_settings
from tests.eval.conversation_fixture import qa_rows, turn_rows, write_conversations
from tests.eval.generators import assert_reproduces
from tests.eval.test_conversations import FakeMemoryService, _Emb

ROOT = Path(__file__).resolve().parents[2]
AGENT_DEV = ROOT / "eval" / "conversations" / "agent_dev"


def agent_rows() -> tuple[list[dict], list[dict]]:
    """A small agent-shaped set: ``solo`` (an anonymous user and the assistant, two sessions) plus the fixture's
    conversations; two no-answer questions (one by category, one by empty evidence)."""
    solo = [
        ("session_1", "9:00 am on 1 May, 2024", "user", "", "I switched to rooibos, coffee was wrecking my sleep."),
        ("session_1", "9:00 am on 1 May, 2024", "assistant", "", "Got it, thanks for sharing."),
        ("session_1", "9:00 am on 1 May, 2024", "user", "", "I work at Northwind as a data engineer."),
        ("session_1", "9:00 am on 1 May, 2024", "assistant", "assistant", "How long have you been at Northwind?"),
        ("session_2", "6:00 pm on 9 June, 2024", "user", "", "I moved to Lisbon last week."),
        ("session_2", "6:00 pm on 9 June, 2024", "assistant", "", "Noted!"),
    ]
    rows = turn_rows()
    counters: dict[str, int] = {}
    for session, when, role, speaker, text in solo:
        n = counters[session] = counters.get(session, 0) + 1
        row = {"conv_id": "solo", "dia_id": f"D{session[-1]}:{n}", "session": session, "session_date_time": when}
        rows.append({**row, "speaker": speaker, "text": text, "role": role})
    del rows[-1]["speaker"]  # an absent speaker reads as empty
    qa = qa_rows() + [
        {"conv_id": "solo", "qa_id": "solo#0", "question": "What does the user drink instead of coffee?",
         "category": 1, "category_name": "third-person", "evidence": ["D1:1"]},
        {"conv_id": "solo", "qa_id": "solo#1", "question": "Where is the user employed?",
         "category": 2, "category_name": "paraphrase", "evidence": ["D1:3"]},
        {"conv_id": "solo", "qa_id": "solo#2", "question": "What is the capital of France?",
         "category": 6, "category_name": "unanswerable", "evidence": []},
        {"conv_id": "solo", "qa_id": "solo#3", "question": "What is the user's favourite band?",
         "category": 6, "category_name": "unanswerable", "evidence": ["D1:1"]},
    ]  # fmt: skip
    return rows, qa


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    turns, qa = agent_rows()
    return write_conversations(tmp_path / "agent_conv", turns=turns, qa=qa)


class QualityMemoryService(FakeMemoryService):
    """The fake engine, plus ``match_quality``: ``"none"`` when no stored message shares a word with the query."""

    def search_memory(self, query, ctx, top_k=10):
        response = super().search_memory(query, ctx, top_k)
        found = len(response.hits) > 1  # the first hit is always the session directory
        return SimpleNamespace(**vars(response), match_quality="good" if found else "none")


# ------------------------------------------------------------------------------------------------ roles
def test_role_is_loaded_and_sent_to_add_messages_and_an_empty_speaker_is_not_sent(agent: Path, tmp_path: Path):
    c = load_conversations(agent)
    solo = c.turns["solo"]
    assert [t.role for t in solo] == ["user", "assistant"] * 3
    assert [t.speaker for t in solo] == ["", "", "", "assistant", "", ""]
    assert c.turns["alpha"][0].role == "user"  # no role field: user
    assert c.dataset.corpus["solo/D1:1"].text == "user: I switched to rooibos, coffee was wrecking my sleep."
    assert c.dataset.corpus["solo/D1:2"].text == "assistant: Got it, thanks for sharing."
    assert c.has_assistant_turns() and c.has_anonymous_turns()
    FakeMemoryService.stores, FakeMemoryService.calls = {}, []
    settings = load_settings(tmp_path / "home")
    r = EngineConversationRetriever(c, _Emb(), settings, cache_dir=tmp_path / "cache", engine_factory=FakeMemoryService)
    r.prepare()
    rows = [x for x in FakeMemoryService.stores[str(r.home)] if x["space"] == "solo"]
    assert [x["role"] for x in rows] == ["user", "assistant"] * 3
    assert "speaker" not in rows[0] and "speaker" not in rows[1] and rows[3]["speaker"] == "assistant"
    assert rows[0]["metadata"] == {"turn_id": "D1:1"} and rows[4]["timestamp"] == "2024-06-09T18:00:00"
    alpha = [x for x in FakeMemoryService.stores[str(r.home)] if x["space"] == "alpha"]
    assert alpha[0]["role"] == "user" and alpha[0]["speaker"] == "Nora"
    assert r.config["doc_input"] == ce.ENGINE_INPUT_ROLES
    r.close()
    bad = agent_rows()[0]
    bad[0] = {**bad[0], "role": "narrator"}
    with pytest.raises(ContextEngineError, match="unknown role"):
        load_conversations(write_conversations(tmp_path / "bad_role", turns=bad, qa=agent_rows()[1]))


# ------------------------------------------------------------------------------------------------ no-answer questions
def test_unanswerable_questions_are_counted_not_judged_and_read_for_match_quality(agent: Path, tmp_path: Path):
    c = load_conversations(agent)
    assert [q.qa_id for q in c.no_answer] == ["alpha#8", "solo#2", "solo#3"]
    assert all(q.evidence == () for q in c.no_answer) and c.conversation_of("solo#3") == "solo"
    assert "solo#2" not in c.dataset.queries and "solo#3" not in c.dataset.qrels and "solo#0" in c.dataset.queries
    assert c.unjudged_questions == 0
    FakeMemoryService.stores, FakeMemoryService.calls = {}, []
    settings = load_settings(tmp_path / "home")
    options = ConversationEvalOptions(methods=["search_memory", "bm25"], embedders=["fake"], cache_dir=tmp_path / "c")
    report = run_conversation_eval(
        c, settings, options, embedder_factory=lambda b: _Emb(), engine_factory=QualityMemoryService
    )
    engine = next(r for r in report.results if r.method == "search_memory")
    assert set(engine.per_query) == set(c.dataset.queries)
    summary = report.no_answer[engine.label]
    detail = report.no_answer_detail[engine.label]
    assert list(detail) == ["alpha#8", "solo#2", "solo#3"]
    # solo's two share no word with its turns: none; alpha#8 ("Theo's favourite colour") matches Theo's turns
    assert detail["solo#2"] == {"match_quality": "none", "turns": 0, "top": None}
    assert detail["alpha#8"]["match_quality"] == "good" and detail["alpha#8"]["top"].startswith("alpha/")
    assert summary["no_answer_questions"] == 3 and summary["no_answer_match_none"] == pytest.approx(2 / 3)
    assert summary["answerable_questions"] == len(c.dataset.queries)
    assert isinstance(summary["answerable_match_none"], float) and summary["match_quality"] == {"good": 1, "none": 2}
    assert report.to_json()["dataset"]["no_answer_questions"] == 3
    md = report.to_markdown()
    assert "## No-answer questions" in md and "| search_memory | fake:fake-embedder | 3 | 0.6667 |" in md
    assert report.to_json()["no_answer_per_query"][engine.label]["solo#2"]["match_quality"] == "none"
    # an engine whose responses carry no match_quality: n/a
    plain = run_conversation_eval(
        c,
        settings,
        ConversationEvalOptions(methods=["search_memory"], embedders=["fake"], cache_dir=tmp_path / "c"),
        embedder_factory=lambda b: _Emb(),
        engine_factory=FakeMemoryService,
    )
    s = plain.no_answer[plain.results[0].label]
    assert s["no_answer_match_none"] == "n/a" and s["answerable_match_none"] == "n/a"
    assert "| 3 | n/a |" in plain.to_markdown()
    assert none_share([]) is None and none_share([None, None]) == "n/a" and none_share(["none", "good"]) == 0.5


def test_p_at_1_and_r_at_3_are_reported_overall_and_per_category(agent: Path, tmp_path: Path):
    c = load_conversations(agent)
    report = run_conversation_eval(
        c, load_settings(tmp_path / "home"), ConversationEvalOptions(methods=["bm25"], cache_dir=tmp_path / "c")
    )
    bm25 = report.results[0]
    for m in ("P@1", "R@3"):
        assert 0.0 <= bm25.metrics[m] <= 1.0 and f"{m}[paraphrase]" in bm25.metrics
    for qid, values in bm25.per_query.items():
        first = bm25.run[qid][0][0] if bm25.run.get(qid) else None
        assert values["P@1"] == (1.0 if first in c.dataset.qrels[qid] else 0.0)
        assert values["R@3"] <= values["R@5"] <= values["R@10"]
    assert bm25.per_query["solo#0"]["P@1"] == 1.0  # "coffee" + "instead": the rooibos turn first
    assert report.table_header()[2:8] == ["P@1", "R@3", "R@5", "R@10", "RR@10", "nDCG@10"]
    notes = report.notes[bm25.label]["assistant_turns"]
    assert set(notes) == {"assistant_at_1", "assistant_returned"} and 0.0 <= notes["assistant_returned"] <= 1.0


# ------------------------------------------------------------------------------------------------ perturbation
def test_acks_perturbation_inserts_an_ack_after_every_turn_and_changes_the_hashes(agent: Path, tmp_path: Path):
    plain = load_conversations(agent)
    acks = load_conversations(agent, perturb="acks")
    for conv in plain.conversations:
        base, got = plain.turns[conv], acks.turns[conv]
        assert len(got) == 2 * len(base) and got[0::2] == base
        for turn, ack in zip(base, got[1::2], strict=True):
            assert (ack.dia_id, ack.role, ack.speaker) == (turn.dia_id + "#ack", "assistant", "")
            assert (ack.session, ack.session_date_time, ack.timestamp) == (
                turn.session,
                turn.session_date_time,
                turn.timestamp,
            )
            assert ack.text in ACK_TEXTS and ack.text == ack_text(turn.doc_id)
    assert len({t.text for ts in acks.turns.values() for t in ts if t.dia_id.endswith("#ack")}) > 3  # varied
    assert acks.dataset.corpus["alpha/D1:1#ack"].text.startswith("assistant: ")
    assert acks.dataset.qrels == plain.dataset.qrels and acks.dataset.queries == plain.dataset.queries
    assert acks.dataset.split == "turns+acks" and acks.dataset.key == "agent_conv/turns+acks"
    assert acks.dataset.hash != plain.dataset.hash and acks.dataset.corpus_hash != plain.dataset.corpus_hash
    assert acks.perturbation == "acks" and plain.perturbation is None
    again = load_conversations(agent, perturb="acks")
    assert again.dataset.hash == acks.dataset.hash and again.turns == acks.turns  # deterministic
    one = load_conversations(agent, conversations=["beta"], perturb="acks")
    assert one.dataset.hash != load_conversations(agent, conversations=["beta"]).dataset.hash
    assert [t.text for t in one.turns["beta"]] == [t.text for t in acks.turns["beta"]]  # same acks in a selection
    with pytest.raises(ContextEngineError, match="unknown perturbation"):
        load_conversations(agent, perturb="typos")
    # the engine's cached home is keyed by the perturbed corpus
    settings = load_settings(tmp_path / "home")
    homes = set()
    for c in (plain, acks):
        FakeMemoryService.stores, FakeMemoryService.calls = {}, []
        r = EngineConversationRetriever(
            c, _Emb(), settings, cache_dir=tmp_path / "cache", engine_factory=FakeMemoryService
        )
        r.prepare()
        homes.add(r.home)
        n_turns = sum(len(ts) for ts in c.turns.values())
        assert sum(n for _, _, n in FakeMemoryService.calls) == n_turns
        r.close()
    assert len(homes) == 2


def test_cli_perturb_acks_runs_on_a_conversation_folder_only(agent: Path, tmp_path: Path):
    from context_engine.interfaces.cli.app import app

    args = ["--home", str(tmp_path / "h"), "eval", "--dataset", str(agent), "--method", "bm25", "--perturb", "acks"]
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "out"), "--baselines", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    js = json.loads((tmp_path / "out" / "report.json").read_text())
    assert js["dataset"]["key"] == "agent_conv/turns+acks" and js["dataset"]["perturbation"] == "acks"
    assert js["dataset"]["turns"] == 2 * (36 + 6)
    assert "assistant_at_1" in js["notes"]["bm25"]["assistant_turns"]
    bad = CliRunner().invoke(
        app, ["--home", str(tmp_path / "h"), "eval", "--dataset", str(tmp_path), "--perturb", "acks"]
    )
    assert bad.exit_code != 0
    wrong = CliRunner().invoke(app, [*args[:-1], "typos", "--out", str(tmp_path / "o2")])
    assert wrong.exit_code != 0 and "perturbation" in wrong.output


def test_assistant_turn_share_counts_first_hits_and_returned_turns(agent: Path):
    c = load_conversations(agent)
    run = {q: [] for q in c.dataset.queries}
    run["solo#0"] = [("solo/D1:2", 2.0), ("solo/D1:1", 1.0)]
    run["solo#1"] = [("solo/D1:3", 2.0), ("solo/D1:4", 1.0)]
    share = assistant_turn_share(c, run)
    assert share == {"assistant_at_1": round(1 / len(c.dataset.queries), 4), "assistant_returned": 0.5}


# ------------------------------------------------------------------------------------------------ the generated set
def test_generator_is_deterministic_and_the_committed_files_match_it(tmp_path: Path):
    assert_reproduces("make_agent_dev", tmp_path)


def test_the_agent_dev_set_has_the_promised_shape():
    c = load_conversations(AGENT_DEV)
    rows = [json.loads(line) for line in (AGENT_DEV / "turns.jsonl").read_text(encoding="utf-8").splitlines()]
    assert set(rows[0]) == {"conv_id", "dia_id", "session", "session_date_time", "speaker", "text", "role"}
    assert len(c.conversations) >= 12 and len(c.questions) >= 220 and len(c.no_answer) >= 60
    assert c.unknown_evidence == 0 and c.unjudged_questions == 0
    cats = c.categories()
    assert set(cats) == {"third-person", "paraphrase", "temporal", "multi-hop", "updated"}
    assert all(q.category_name == "unanswerable" for q in c.no_answer)
    named = 0
    for conv in c.conversations:
        turns = c.turns[conv]
        assert 3 <= len(c.sessions(conv)) <= 5
        assert len({t.timestamp for t in turns}) == len(c.sessions(conv))  # one date per session
        assert [t.role for t in turns] == ["user", "assistant"] * (len(turns) // 2)  # every user turn answered
        named += bool(turns[0].speaker)
    assert 0.3 <= named / len(c.conversations) <= 0.7
    for q in c.questions:
        ev = [c.turn(f"{q.conv_id}/{e}") for e in q.evidence]
        assert all(t is not None and t.role == "user" for t in ev), q  # evidence: user turns only
        if q.category_name == "multi-hop":
            assert len({t.session for t in ev}) >= 2, q
    acks = sum(1 for ts in c.turns.values() for t in ts if t.role == "assistant" and not t.text.endswith("?"))
    assert acks > len(c.questions) / 2
    assert any(re.search(r"\bthe user\b", q.question) for q in c.questions)
    assert "What is the capital of France?" in {q.question for q in c.no_answer}
