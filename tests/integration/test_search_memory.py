"""search_memory / read_memory end to end on the real model and stores (seed 000 §10 integration and acceptance,
plus regressions from known peer failures)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import Level
from context_engine.schema.query import SearchMemoryRequest
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from tests.retrieval.conftest import CountingContent

pytestmark = pytest.mark.slow

ADMIN = RequestContext(account_id="default", role="admin")
ALICE = RequestContext(account_id="default", role="user", user_space="alice", agent_space="helper")
BOB = RequestContext(account_id="default", role="user", user_space="bob")
CRASH = "ctx://resources/runbooks/kubernetes/PodRestartingRepeatedly.md"
ZEBRA = "ctx://resources/misc/zebra-migration.md"


def build(engine: ContextEngineService) -> None:
    corpus = Path(str(resources.files("context_engine") / "sample_corpus"))
    report = engine.add_resource(corpus, "ctx://resources/runbooks/", ADMIN)
    assert report.nodes == 8 and report.failed == 0
    engine.add_text(
        "# Zebra migration\n\nEvery year herds of zebras cross the Serengeti following the rains.\n",
        ZEBRA,
        ADMIN,
    )
    engine.add_text("# Office plants\n\nWater the ficus on Mondays.\n", "ctx://resources/misc/plants.md", ADMIN)
    engine.add_memory("I prefer answers in Chinese with short code samples.", ALICE, category="preference")
    engine.add_memory("I work on the payments team in Berlin.", ALICE, category="profile")
    engine.add_memory("Bob prefers very long and detailed explanations.", BOB, category="preference")
    engine.add_skill(
        "restart-deployment",
        "Restart a Kubernetes deployment's pods one by one",
        "## Steps\n\n1. kubectl rollout restart deployment/NAME\n2. kubectl rollout status deployment/NAME\n",
        ALICE,
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory, embedder):
    """One engine (in-memory level-0 source, counting content store) shared by the read-only tests."""
    from context_engine.storage.content.local import LocalContentStore

    home = tmp_path_factory.mktemp("search-memory")
    counting = CountingContent(LocalContentStore(home / "content"))
    engine = ContextEngineService(
        load_settings(home, retrieval={"l0_source": "memory"}), embedder=embedder, content=counting
    )
    build(engine)
    yield engine
    engine.close()


def test_search_returns_only_l0_hits_and_next_actions(world):
    r = world.search_memory("Pod is crash looping", ALICE)
    assert r.hits and r.hits[0].uri == CRASH
    assert all(h.level_hit == "L0" and h.overview is None and h.content_excerpt is None for h in r.hits)
    assert all(h.abstract for h in r.hits) and all(0.0 <= h.score <= 1.0 for h in r.hits)
    l1 = [h.uri for h in r.hits if h.read_recommendation == "read_l1"]
    l2 = [h.uri for h in r.hits if h.read_recommendation == "read_l2"]
    assert r.next_actions.recommended_read_l1_uris == l1
    assert r.next_actions.recommended_read_l2_uris == l2
    assert l1 or l2
    assert all(h.has_overview for h in r.hits if h.uri in l1)
    # seed 000 §3.2: seed hits carry exactly the minimal field set
    assert r.seed_hits and set(r.seed_hits[0].model_dump()) == {
        "uri",
        "score",
        "category",
        "owner_space",
        "abstract",
        "has_overview",
        "has_content",
        "match_reason",
    }


def test_first_round_does_no_l2_io(world):
    world.content.reads.clear()
    for query in ("Pod is crash looping", "我的回答偏好", "how to restart a deployment", "certificate expires soon"):
        for ctx in (ALICE, BOB, ADMIN):
            world.search_memory(SearchMemoryRequest(query=query, include_debug=True, trace_level="detailed"), ctx)
    assert [r for r in world.content.reads if r[1] is Level.L2] == []
    assert world.content.reads == []  # nor L0/L1: abstracts come from the level-0 vector records


def test_l1_then_l2_explicit_drill_down(world):
    hit = next(h for h in world.search_memory("Pod is crash looping", ALICE).hits if h.uri == CRASH)
    assert hit.read_recommendation in ("read_l1", "read_l2")
    l1 = world.read_memory(hit.uri, ALICE, level="L1")
    assert l1.block.level_hit == "L1" and "Meaning" in l1.block.overview and l1.block.content_excerpt is None
    assert l1.block.read_recommendation == "read_l2"
    assert l1.trace.read_ms >= 0 and l1.trace.relations_ms == 0
    l2 = world.read_memory(hit.uri, ALICE, level="L2")
    assert l2.block.level_hit == "L2" and l2.block.overview is None
    assert l2.block.content_excerpt == world.content.inner.read_level("default", CRASH, Level.L2)
    assert l2.request_id != l1.request_id


def test_vector_failure_gives_empty_hits_retryable_warning(world, monkeypatch):
    class DownIndex:
        name = "down"

        def search(self, *args, **kwargs):
            raise ContextEngineError(ErrorCode.VECTOR_SEARCH_FAILED, "vector service unavailable", retryable=True)

    monkeypatch.setattr(world.l0_source, "index", DownIndex())
    monkeypatch.setattr(
        world.l0_source, "_settings", world.settings.retrieval.model_copy(update={"l0_source": "index"})
    )
    r = world.search_memory("Pod is crash looping", ALICE)
    assert r.hits == [] and r.seed_hits == [] and r.retryable
    assert any(w.startswith("RET-5001:") for w in r.trace.warnings)
    assert len(r.typed_queries) == 3  # the plan is still reported


def test_no_session_gives_three_typed_queries(world):
    r = world.search_memory("Pod is crash looping", ALICE)
    assert [t.context_type for t in r.typed_queries] == ["memory", "skill", "resource"]
    assert r.trace.warnings[0].startswith("RET-4221:")
    session = {"messages": [{"role": "user", "content": "which runbook covers pods that keep restarting?"}]}
    r = world.search_memory("Pod is crash looping", ALICE, session_archive=session)
    # the session's intent ranks resource first; memory and skill are still searched
    assert [t.context_type for t in r.typed_queries] == ["resource", "memory", "skill"] and r.trace.warnings == []
    assert r.hits[0].uri == CRASH
    assert "intent" in r.hits[0].match_reason


def test_include_debug_detailed_gives_the_full_thinking_trace(world):
    r = world.search_memory(
        "Pod is crash looping",
        ALICE,
        include_debug=True,
        trace_level="detailed",
        planner_hints={"exclude_terms": ["node"]},
    )
    tt = r.thinking_trace
    assert set(tt["stages"]) == {"planner", "seed", "hierarchical", "recheck", "assemble"}
    assert [t["context_type"] for t in tt["stages"]["planner"]["typed_queries"]] == ["memory", "skill", "resource"]
    assert tt["stages"]["planner"]["intent"] == "fallback"
    assert set(tt["stages"]["seed"]) == {"memory", "skill", "resource"}
    assert tt["stages"]["recheck"]["in"] >= tt["stages"]["recheck"]["out"]
    scores = tt["stages"]["assemble"]["scores"]
    assert {"uri", "source", "similarity", "vector", "hierarchy", "category", "target", "final"} <= set(scores[0])
    assert any(e["event"] == "drop" and e["exclude_reason"] == "excluded_term:node" for e in tt["events"])
    assert any(e["event"] == "warning" and e["code"] == "RET-4221" for e in tt["events"])
    assert r.trace.event_count == len(tt["events"])
    assert world.search_memory("Pod is crash looping", ALICE, include_debug=True).thinking_trace is None


def test_memory_and_skill_queries_in_both_languages(world):
    r = world.search_memory("What are my preferences for answers?", ALICE)
    assert [t.context_type for t in r.typed_queries] == ["memory", "skill", "resource"]  # memory ranked first
    assert "ctx://user/alice/memories/preference/" in r.hits[0].uri
    assert all(not h.uri.startswith("ctx://user/bob/") for h in r.hits + r.seed_hits)
    r = world.search_memory("how to restart a deployment", ALICE)
    assert r.hits[0].uri == "ctx://agent/helper/skills/restart-deployment.md"
    r = world.search_memory("容器频繁重启", ALICE, target_uri="ctx://resources/runbooks/kubernetes/")
    assert r.hits[0].uri == "ctx://resources/runbooks/kubernetes/容器频繁重启.md"


def test_target_uri_tenancy(world):
    with pytest.raises(ContextEngineError) as exc:
        world.search_memory("preferences", ALICE, target_uri="ctx://user/bob/memories/")
    assert exc.value.code is ErrorCode.TARGET_FORBIDDEN and exc.value.code.http_status == 403
    r = world.search_memory("preferences", ALICE, target_uri="ctx://user/alice/memories/nothing/")
    assert any(w.startswith("RET-4041:") for w in r.trace.warnings)
    r = world.search_memory("preferences", ALICE, target_uri="ctx://user/alice/memories/preference/")
    assert r.hits and all(h.uri.startswith("ctx://user/alice/memories/preference/") for h in r.hits)


def test_read_403_has_no_existence_leak(world):
    alice_pref = world.search_memory("What are my preferences for answers?", ALICE).hits[0].uri
    bodies = []
    for uri in (alice_pref, "ctx://user/alice/memories/preference/never.md"):
        with pytest.raises(ContextEngineError) as exc:
            world.read_memory(uri, BOB, level="L2")
        assert exc.value.code is ErrorCode.URI_FORBIDDEN
        body = exc.value.envelope()
        body["details"]["uri"] = "<uri>"
        bodies.append(body)
    assert bodies[0] == bodies[1]


# ------------------------------------------------------------------------------------------ regressions
def test_leaf_matching_only_its_own_text_is_found(world):
    # misc/ holds an unrelated sibling, so the directory's summary does not point at zebras
    r = world.search_memory("zebras crossing the Serengeti", ALICE)
    assert r.hits[0].uri == ZEBRA
    r = world.search_memory("Water the ficus", ADMIN, top_k=3)
    assert r.hits[0].uri == "ctx://resources/misc/plants.md"


def test_same_query_five_times_gives_identical_results(world):
    runs = [world.search_memory("Pod is crash looping", ALICE) for _ in range(5)]
    first = runs[0]
    for r in runs[1:]:
        assert [h.model_dump() for h in r.hits] == [h.model_dump() for h in first.hits]
        assert [s.model_dump() for s in r.seed_hits] == [s.model_dump() for s in first.seed_hits]
        assert r.typed_queries == first.typed_queries and r.next_actions == first.next_actions


def test_index_and_memory_sources_rank_alike(world, monkeypatch):
    memory = world.search_memory("certificate expires soon", ADMIN)
    monkeypatch.setattr(
        world.l0_source, "_settings", world.settings.retrieval.model_copy(update={"l0_source": "index"})
    )
    index = world.search_memory("certificate expires soon", ADMIN)
    assert [h.uri for h in index.hits] == [h.uri for h in memory.hits]
    assert all(abs(a.score - b.score) < 1e-4 for a, b in zip(index.hits, memory.hits, strict=True))


@pytest.mark.parametrize("source", ["memory", "index", "auto"])
def test_deleted_node_is_never_returned_again(make_engine, source):
    engine = make_engine(retrieval={"l0_source": source, "memory_warm_after_searches": 0})
    engine.add_text(
        "# Zebra migration\n\nEvery year herds of zebras cross the Serengeti following the rains.\n", ZEBRA, ADMIN
    )
    engine.add_text("# Office plants\n\nWater the ficus on Mondays.\n", "ctx://resources/misc/plants.md", ADMIN)
    query = "zebras crossing the Serengeti"
    assert engine.search_memory(query, ADMIN).hits[0].uri == ZEBRA
    engine.delete(ZEBRA, ADMIN)
    for _ in range(5):
        r = engine.search_memory(query, ADMIN, score_threshold=0.0, top_k=50)
        assert ZEBRA not in [h.uri for h in r.hits] + [s.uri for s in r.seed_hits]
    with pytest.raises(ContextEngineError) as exc:
        engine.read_memory(ZEBRA, ADMIN)
    assert exc.value.code is ErrorCode.URI_FORBIDDEN


def test_directory_named_like_an_internal_file_is_never_indexed(make_engine, tmp_path):
    engine = make_engine()
    src = tmp_path / "src"
    for reserved in (".abstract.md", ".overview.md", ".content.md", ".node"):
        (src / reserved).mkdir(parents=True)
        (src / reserved / "evil.md").write_text("# Evil\n\nPurple elephants dance at midnight.\n", encoding="utf-8")
    (src / "ok" / ".content.md").mkdir(parents=True)
    (src / "ok" / ".content.md" / "nested.md").write_text("# Nested\n\nPurple elephants again.\n", encoding="utf-8")
    (src / "ok" / "real.md").write_text("# Real\n\nA real runbook about disks.\n", encoding="utf-8")
    report = engine.add_resource(src, "ctx://resources/in/", ADMIN)
    assert report.nodes == 1 and report.uris == ["ctx://resources/in/ok/real.md"]
    uris = [n.uri for n in engine.metadata.list_all_nodes("default")]
    assert not any(seg in u for u in uris for seg in (".abstract.md", ".overview.md", ".content.md", ".node"))
    r = engine.search_memory("purple elephants dance at midnight", ADMIN, score_threshold=0.0, top_k=50)
    assert all("evil" not in h.uri and "nested" not in h.uri for h in r.hits)
    assert engine.content.read_level("default", "ctx://resources/in/ok/real.md", Level.L2).startswith("# Real")
    # a reserved name as a target or a single file's URI is refused outright
    (tmp_path / "single.md").write_text("# Single\n\ntext\n", encoding="utf-8")
    for target in ("ctx://resources/.content.md/", "ctx://resources/in/.abstract.md"):
        with pytest.raises(ContextEngineError) as exc:
            engine.add_resource(tmp_path / "single.md", target, ADMIN)
        assert exc.value.code is ErrorCode.URI_INVALID


# ------------------------------------------------------------------------------------------ CLI
def test_cli_search_and_read_act_as_a_context(world, embedder, monkeypatch):
    from context_engine.interfaces.cli.app import app

    monkeypatch.setattr("context_engine.service.build_embedder", lambda *a, **k: embedder)  # one model per session
    home = str(world.settings.home_path)  # the CLI opens its own engine on the same directory (read-only here)
    runner = CliRunner()
    r = runner.invoke(app, ["--home", home, "--as", "default:user:alice:helper", "search", "Pod is crash looping"])
    assert r.exit_code == 0, r.output
    for column in ("uri", "level", "score", "read"):  # short headers: the table fits 100 columns (issue 15)
        assert column in r.output
    assert "PodRestartingRepeatedly.md" in r.output
    r = runner.invoke(
        app, ["--home", home, "--as", "default:user:alice", "--json", "search", "my preferences", "-k", "3"]
    )
    hits = json.loads(r.output)
    assert r.exit_code == 0 and isinstance(hits, list) and hits[0]["uri"].startswith("ctx://user/alice/memories/")
    r = runner.invoke(app, ["--home", home, "--as", "default:user:bob", "--json", "search", "my preferences", "--full"])
    full = json.loads(r.output)
    assert set(full) >= {"request_id", "typed_queries", "seed_hits", "hits", "next_actions", "trace"}
    assert all(not h["uri"].startswith("ctx://user/alice/") for h in full["hits"])
    alice_uri = hits[0]["uri"]
    r = runner.invoke(app, ["--home", home, "--as", "default:user:bob", "--json", "read", alice_uri, "--level", "L2"])
    assert r.exit_code == 3 and json.loads(r.output)["code"] == "RET-4032"
    r = runner.invoke(app, ["--home", home, "--as", "default:user:alice", "--json", "read", alice_uri, "--level", "L1"])
    assert r.exit_code == 0 and json.loads(r.output)["text"]
    r = runner.invoke(app, ["--home", home, "--json", "read", CRASH, "--level", "L2"])
    assert r.exit_code == 0 and "kubectl" in json.loads(r.output)["text"]
    r = runner.invoke(app, ["--home", home, "read", CRASH, "--level", "L0"])
    assert r.exit_code == 0 and "PodRestartingRepeatedly" in r.output
    r = runner.invoke(app, ["--home", home, "--json", "read", "ctx://resources/runbooks/", "--level", "L2"])
    assert r.exit_code == 2 and json.loads(r.output)["code"] == "RET-4004"
    r = runner.invoke(app, ["--home", home, "--json", "search", "x", "-k", "99"])
    assert r.exit_code == 2 and json.loads(r.output)["code"] == "RET-4002"
