"""The conversational evaluation (eval/conversations.py, eval/conversation_eval.py) on a synthetic conversation set
written by us (tests/eval/conversation_fixture.py), and on one real LoCoMo conversation when ../shared is present."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest
from typer.testing import CliRunner

from context_engine.errors import ContextEngineError
from context_engine.eval import conversation_eval as ce
from context_engine.eval.conversation_eval import (
    ConversationEvalOptions,
    EngineConversationRetriever,
    run_conversation_eval,
    user_space_of,
)
from context_engine.eval.conversations import is_conversation_folder, load_conversations, parse_session_time
from context_engine.settings import load_settings
from tests.conftest import shared_data
from tests.eval.conversation_fixture import qa_rows, turn_rows, write_conversations


@pytest.fixture
def convs(tmp_path: Path) -> Path:
    return write_conversations(tmp_path / "tiny_conv")


# ------------------------------------------------------------------------------------------------ loader
def test_loader_counts_turns_sessions_questions_and_maps_evidence_to_turn_ids(convs: Path):
    c = load_conversations(convs)
    assert is_conversation_folder(convs) and not is_conversation_folder(convs / "turns.jsonl")
    assert c.conversations == ["alpha", "beta"]
    assert [len(c.turns["alpha"]), len(c.turns["beta"])] == [30, 6]
    assert [(s, len(t)) for s, t in c.sessions("alpha")] == [("session_1", 11), ("session_2", 10), ("session_3", 9)]
    # 10 questions: one without evidence is a no-answer question (not judged), one unknown evidence id (D9:99) is
    # dropped
    assert len(c.questions) == 9 and c.unjudged_questions == 0 and c.unknown_evidence == 1
    assert [q.qa_id for q in c.no_answer] == ["alpha#8"] and c.conversation_of("alpha#8") == "alpha"
    ds = c.dataset
    assert (ds.name, ds.split, ds.key, ds.slug) == ("tiny_conv", "turns", "tiny_conv/turns", "tiny_conv-turns")
    assert len(ds.corpus) == 36 and "alpha#8" not in ds.queries
    assert ds.qrels["alpha#3"] == {"alpha/D2:7": 1, "alpha/D2:9": 1, "alpha/D3:4": 1}
    assert ds.qrels["alpha#6"] == {"alpha/D1:9": 1}
    assert ds.corpus["alpha/D1:11"].text == "Nora: I drink a lot of jasmine tea to stay awake."
    assert ds.tags["beta#0"] == ["single-hop", "conv:beta"]
    assert c.conversation_of("beta#0") == "beta"
    assert c.categories() == {"adversarial": 1, "multi-hop": 1, "open-domain": 1, "single-hop": 5, "temporal": 1}
    first = c.turns["alpha"][0]
    assert first.timestamp == datetime(2024, 3, 3, 10, 5) and first.session_date_time == "10:05 am on 3 March, 2024"
    assert c.turns["alpha"][-1].timestamp == datetime(2024, 6, 2, 8, 15)
    assert len(ds.hash) == 64 and ds.hash != ds.corpus_hash


def test_scoped_view_holds_one_conversation_and_selection_changes_the_key_and_hash(convs: Path):
    c = load_conversations(convs)
    beta = c.scoped("beta")
    assert set(beta.corpus) == {f"beta/D1:{i}" for i in range(1, 7)} and list(beta.queries) == ["beta#0"]
    assert beta.name == "tiny_conv-beta" and beta.corpus_hash != c.scoped("alpha").corpus_hash
    only = load_conversations(convs, conversations=["beta"])
    assert only.conversations == ["beta"] and list(only.dataset.queries) == ["beta#0"]
    assert only.dataset.key == "tiny_conv/turns:beta" and only.dataset.hash != c.dataset.hash
    assert len(load_conversations(convs, limit_queries=3).dataset.queries) == 3
    with pytest.raises(ContextEngineError) as err:
        load_conversations(convs, conversations=["gamma"])
    assert err.value.code == "WRT-4041"


def test_session_times_parse_in_locomo_and_iso_form_and_bad_input_is_rejected(tmp_path: Path):
    assert parse_session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56)
    assert parse_session_time("12:09 am on 13 September, 2023") == datetime(2023, 9, 13, 0, 9)
    assert parse_session_time("2023-05-08T13:56:00") == datetime(2023, 5, 8, 13, 56)
    assert parse_session_time("") is None and parse_session_time(None) is None
    rows = turn_rows()
    rows[3] = {**rows[3], "session_date_time": "sometime in spring"}
    with pytest.raises(ContextEngineError) as err:
        load_conversations(write_conversations(tmp_path / "bad_time", turns=rows))
    assert err.value.code == "WRT-4221" and "turn 4" in err.value.message
    dup = turn_rows()
    dup.append(dup[0])
    with pytest.raises(ContextEngineError, match="repeats 'alpha/D1:1'"):
        load_conversations(write_conversations(tmp_path / "dup", turns=dup))
    no_text = turn_rows()
    del no_text[0]["text"]
    with pytest.raises(ContextEngineError, match="lacks"):
        load_conversations(write_conversations(tmp_path / "no_text", turns=no_text))
    with pytest.raises(ContextEngineError) as err:
        load_conversations(tmp_path / "nowhere")
    assert err.value.code == "WRT-4041"
    assert qa_rows()[0]["evidence"] == ["D1:1"]


def test_user_space_is_a_safe_segment_and_distinct_per_conversation():
    assert user_space_of("conv-26") == "conv-26"
    odd = user_space_of("conv 26/b")
    assert re.fullmatch(r"conv-26-b-[0-9a-f]{8}", odd) and odd != user_space_of("conv 26:b")


# ------------------------------------------------------------------------------------------------ engine plumbing
class FakeMemoryService:
    """add_messages / search_memory with the contract's shapes; word overlap as the 'retrieval'; state per home."""

    stores: ClassVar[dict[str, list[dict]]] = {}
    calls: ClassVar[list[tuple[str, str, int]]] = []

    def __init__(self, settings):
        self.home = str(settings.home)
        self.rows = FakeMemoryService.stores.setdefault(self.home, [])

    def add_messages(self, messages, session_id, ctx):
        FakeMemoryService.calls.append((ctx.user_space, session_id, len(messages)))
        uris = []
        for m in messages:
            seq = sum(1 for r in self.rows if r["space"] == ctx.user_space and r["session"] == session_id) + 1
            uri = f"ctx://user/{ctx.user_space}/memories/sessions/{session_id}/{seq:06d}.md"
            self.rows.append({"space": ctx.user_space, "session": session_id, "uri": uri, **m})
            uris.append(uri)
        return SimpleNamespace(uris=uris)

    def search_memory(self, query, ctx, top_k=10):
        words = set(re.findall(r"\w+", query.lower())) - {"what", "is", "the", "of", "did", "does", "to", "a"}
        scored = []
        for r in self.rows:
            if r["space"] == ctx.user_space:
                overlap = len(words & set(re.findall(r"\w+", r["content"].lower())))
                if overlap:
                    scored.append((overlap, r["uri"]))
        scored.sort(key=lambda x: (-x[0], x[1]))
        hits = [SimpleNamespace(uri=f"ctx://user/{ctx.user_space}/memories/sessions/")]  # a directory: skipped
        hits += [SimpleNamespace(uri=u) for _, u in scored[: top_k - 1]]
        return SimpleNamespace(hits=hits, trace=SimpleNamespace(warnings=["RET-4221: unclassified"]))

    def close(self):
        pass


class _Emb:
    dim = 8
    model_name = "fake/fake-embedder"
    backend = "fake"


def test_engine_retriever_writes_each_session_in_batches_maps_uris_and_reuses_its_cache(
    convs: Path, tmp_path: Path, monkeypatch
):
    FakeMemoryService.stores, FakeMemoryService.calls = {}, []
    monkeypatch.setattr(ce, "MAX_BATCH", 4)
    c = load_conversations(convs)
    settings = load_settings(tmp_path / "home")
    r = EngineConversationRetriever(c, _Emb(), settings, cache_dir=tmp_path / "cache", engine_factory=FakeMemoryService)
    r.prepare()
    # session_1 of alpha (11 turns) in batches of 4, 4, 3; every call under the conversation's own user space
    assert FakeMemoryService.calls[:3] == [
        ("alpha", "session_1", 4),
        ("alpha", "session_1", 4),
        ("alpha", "session_1", 3),
    ]
    assert sum(n for _, _, n in FakeMemoryService.calls) == 36 and FakeMemoryService.calls[-1][:2] == (
        "beta",
        "session_1",
    )
    rows = FakeMemoryService.stores[str(r.home)]
    first = rows[0]
    assert first["role"] == "user" and first["speaker"] == "Nora" and first["metadata"] == {"turn_id": "D1:1"}
    assert first["timestamp"] == "2024-03-03T10:05:00" and first["content"].startswith("Hi Theo!")
    assert not r.cached and r.collapsed == 0
    hits = r.search("alpha#0", "What is the name of Nora's whippet?", 10)
    assert hits[0][0] == "alpha/D1:1" and all(d.startswith("alpha/") for d, _ in hits)
    assert r.search("beta#0", "Where is Ines moving for her research job?", 10)[0][0] == "beta/D1:3"
    assert r.warnings == {"RET-4221": 2}
    marker = json.loads((r.home / "ingested.json").read_text())
    assert marker["uris"]["alpha/D3:9"] == "ctx://user/alpha/memories/sessions/session_3/000009.md"
    r.close()
    n_calls = len(FakeMemoryService.calls)
    again = EngineConversationRetriever(
        c, _Emb(), settings, cache_dir=tmp_path / "cache", engine_factory=FakeMemoryService
    )
    again.prepare()
    assert again.cached and len(FakeMemoryService.calls) == n_calls and again.home == r.home
    # another ingest-shaping setting keys another home
    other = load_settings(tmp_path / "home", ingest={"l0_max_chars": 150})
    assert EngineConversationRetriever(c, _Emb(), other, cache_dir=tmp_path / "cache").ingest_key() != r.ingest_key()


def test_run_reports_overall_and_per_category_metrics_and_checks_baselines(convs: Path, tmp_path: Path):
    FakeMemoryService.stores, FakeMemoryService.calls = {}, []
    c = load_conversations(convs)
    settings = load_settings(tmp_path / "home")
    options = ConversationEvalOptions(methods=["search_memory", "bm25"], embedders=["fake"], cache_dir=tmp_path / "c")
    kwargs = {
        "embedder_factory": lambda b: _Emb(),
        "engine_factory": FakeMemoryService,
        "baselines_dir": tmp_path / "b",
    }
    report = run_conversation_eval(c, settings, options, update_baselines=True, **kwargs)
    assert [r.method for r in report.results] == ["bm25", "search_memory"]
    for r in report.results:
        assert set(r.per_query) == set(c.dataset.queries) and r.config["top_k"] == 10
        for m in ce.CONVERSATION_MEASURES:
            assert 0.0 <= r.metrics[m] <= 1.0
            # the overall mean is the question-weighted mean of the categories
            weighted = sum(n * r.metrics[f"{m}[{cat}]"] for cat, n in c.categories().items()) / len(c.questions)
            assert r.metrics[m] == pytest.approx(weighted)
        assert r.per_query["alpha#1"]["RR@10"] == 1.0 and r.per_query["alpha#2"]["RR@10"] == 1.0  # found first
        assert r.metrics["R@10[temporal]"] == 1.0
    bm25 = report.results[0]
    assert bm25.config["doc_input"] == ce.TURN_INPUT and bm25.config["scope"] == "one index per conversation"
    assert all(d.startswith("beta/") for d, _ in bm25.run["beta#0"])
    md = report.to_markdown()
    assert "## Per category" in md and "| temporal | 1 | bm25 |" in md and "R@5 | R@10 | RR@10 | nDCG@10" in md
    js = report.to_json()
    assert js["dataset"]["turns"] == 36 and js["dataset"]["conversations"] == 2
    assert js["per_category"]["bm25"]["single-hop"]["R@10"] == bm25.metrics["R@10[single-hop]"]
    assert js["notes"]["search_memory [fake:fake-embedder]"]["turns_sharing_a_uri"] == 0
    base = json.loads((tmp_path / "b" / "tiny_conv-turns.json").read_text())
    assert {r["method"] for r in base["runs"]} == {"bm25", "search_memory"}
    assert "R@10[multi-hop]" in base["runs"][0]["metrics"]
    again = run_conversation_eval(c, settings, options, **kwargs)
    assert again.checks and all(ch.status == "OK" for ch in again.checks)
    with pytest.raises(ContextEngineError, match="unknown method"):
        run_conversation_eval(c, settings, ConversationEvalOptions(methods=["rrf"]))


def test_cli_detects_a_conversation_folder_and_writes_the_report(convs: Path, tmp_path: Path):
    from context_engine.interfaces.cli.app import app

    args = ["--home", str(tmp_path / "h"), "eval", "--dataset", str(convs), "--method", "bm25"]
    args += ["--out", str(tmp_path / "out"), "--baselines", str(tmp_path / "base")]
    res = CliRunner().invoke(app, [*args, "--update-baselines"])
    assert res.exit_code == 0, res.output
    assert "R@10" in res.output and "| single-hop | 5 | bm25 |" in res.output
    js = json.loads((tmp_path / "out" / "report.json").read_text())
    assert js["measures"] == ["P@1", "R@3", "R@5", "R@10", "RR@10", "nDCG@10"] and js["dataset"]["queries"] == 9
    assert "alpha#1 Q0 alpha/D2:1 1 " in (tmp_path / "out" / "runs" / "bm25.trec").read_text()
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0 and "| OK |" in res.output
    bad = CliRunner().invoke(app, [*args, "--split", "test"])
    assert bad.exit_code != 0 and "conversation" in bad.output


# ------------------------------------------------------------------------------------------------ the real engine
@pytest.mark.slow
def test_end_to_end_through_add_messages_and_search_memory(convs: Path, tmp_path: Path, embedder):
    c = load_conversations(convs)
    settings = load_settings(tmp_path / "home")
    options = ConversationEvalOptions(cache_dir=tmp_path / "cache", embedders=["sentence-transformers"])
    report = run_conversation_eval(c, settings, options, embedder_factory=lambda b: embedder)
    by_method = {r.method: r for r in report.results}
    assert set(by_method) == {"search_memory", "bm25", "dense"}
    engine = by_method["search_memory"]
    for r in report.results:
        assert all(0.0 <= r.metrics[m] <= 1.0 for m in ce.CONVERSATION_MEASURES)
        # each question sees only its own conversation
        assert all(d.startswith(c.conversation_of(q) + "/") for q, hits in r.run.items() for d, _ in hits)
    # the whippet's name: the obvious question; Nora's later "I will visit with Biscuit if they let whippets on
    # trains" (D3:7) names the whippet too and may come first since a message's own words weigh twice in BM25
    assert "alpha/D1:1" in [d for d, _ in engine.run["alpha#0"][:2]]
    assert engine.per_query["beta#0"]["R@10"] == 1.0
    assert engine.metrics["R@10"] >= 0.5
    assert report.notes[engine.label]["ingest_cached"] is False
    again = run_conversation_eval(
        c,
        settings,
        ConversationEvalOptions(methods=["search_memory"], cache_dir=tmp_path / "cache"),
        embedder_factory=lambda b: embedder,
    )
    assert again.notes[again.results[0].label]["ingest_cached"] is True
    assert again.results[0].metrics == engine.metrics


@pytest.mark.slow
def test_one_real_locomo_conversation(tmp_path: Path, embedder):
    """conv-30 (the smallest: 369 turns, 19 sessions) written through add_messages; its first 20 questions through
    search_memory and BM25 (dense is left out to keep this near a minute)."""
    c = load_conversations(shared_data("locomo_dev"), conversations=["conv-30"], limit_queries=20)
    assert len(c.turns["conv-30"]) == 369 and len(c.sessions("conv-30")) == 19 and len(c.questions) == 20
    assert c.dataset.key == "locomo_dev/turns:conv-30~q20" and c.turns["conv-30"][0].timestamp is not None
    settings = load_settings(tmp_path / "home")
    options = ConversationEvalOptions(
        methods=["search_memory", "bm25"], cache_dir=tmp_path / "cache", embedders=["sentence-transformers"]
    )
    report = run_conversation_eval(c, settings, options, embedder_factory=lambda b: embedder)
    by_method = {r.method: r for r in report.results}
    marker = json.loads(next((tmp_path / "cache" / "conversations").glob("*/ingested.json")).read_text())
    assert marker["turns"] == 369
    assert all(u.startswith("ctx://user/conv-30/memories/sessions/session_") for u in marker["uris"].values())
    for r in by_method.values():
        assert len(r.per_query) == 20 and 0.0 < r.metrics["R@10"] <= 1.0 and r.metrics["R@5"] <= r.metrics["R@10"]
        assert all(d.startswith("conv-30/D") for hits in r.run.values() for d, _ in hits)
