"""The main job's questions on the bundled sample corpus, and memories found at the defaults, on the real default
model (use-multilingual) through the service and the CLI (issue 11; DESIGN §5). Runs without ../shared."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_engine.providers.embedder import build_embedder
from context_engine.schema.context import RequestContext
from context_engine.settings import EmbeddingSettings, load_settings

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
QUERIES = REPO / "scripts" / "main_job_queries.txt"
SAMPLE = "ctx://resources/sample/"
ADMIN = RequestContext(account_id="default", role="admin")
BOB = RequestContext.parse("default:user:bob:agentx")
GREEN_TEA = "Bob likes green tea"

#: A right answer per main-job question (either runbook of a pair that describes the same alert is right).
EXPECTED = {
    "Pod is crash looping": {"kubernetes/PodRestartingRepeatedly.md", "kubernetes/容器频繁重启.md"},
    "etcd 集群没有主节点": {"etcd/EtcdNoLeader.md"},
    "disk is almost full": {"kubernetes/NodeDiskAlmostFull.md"},
    "证书快要过期了": {"networking/CertificateExpiringSoon.md"},
    "how do I handle a node that is not ready?": {"kubernetes/NodeNotReady.md"},
}

#: Third-person paraphrases of the question whose answer is GREEN_TEA (none of them shares a content word with it
#: except "bob"; three do not name bob at all).
PARAPHRASES = [
    "what does the user like to drink",
    "what drink does bob enjoy",
    "which beverage is the user fond of",
    "what does bob like to drink",
    "does the user have a favourite drink",
    "bob's preferred beverage",
]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from context_engine.service import ContextEngineService

    home = tmp_path_factory.mktemp("main-job")
    settings = load_settings(home, embedding={"backend": "use-multilingual"})
    e = ContextEngineService(settings, embedder=build_embedder(EmbeddingSettings()))
    e.add_resource(Path(str(resources.files("context_engine") / "sample_corpus")), SAMPLE, ADMIN)
    for text in (
        GREEN_TEA,
        "Bob works night shifts as a nurse in Leeds",
        "Bob's sister moved to Madrid last spring",
        "Bob plays tennis every Sunday morning",
        "Bob is allergic to peanuts",
    ):
        e.add_memory(text, BOB)
    yield e, home
    e.close()


def main_job_queries() -> list[str]:
    return [line.strip() for line in QUERIES.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_expectations_cover_exactly_the_main_job_queries():
    assert main_job_queries() == list(EXPECTED)


@pytest.mark.parametrize("query", list(EXPECTED))
def test_each_main_job_query_gets_a_right_answer_first(engine, query):
    e, _ = engine
    r = e.search_memory(query, ADMIN, top_k=3)
    assert len(r.hits) == 3  # the defaults never hide candidates
    assert r.hits[0].uri.removeprefix(SAMPLE) in EXPECTED[query]


def test_a_how_do_i_question_is_answered_by_a_resource(engine):
    e, _ = engine
    r = e.search_memory("how do I handle a node that is not ready?", ADMIN, top_k=3)
    assert [tq.context_type for tq in r.typed_queries] == ["skill", "memory", "resource"]
    assert r.trace.warnings == []
    assert r.hits[0].uri == SAMPLE + "kubernetes/NodeNotReady.md"


@pytest.mark.parametrize("query", PARAPHRASES)
def test_bob_finds_his_memory_first_at_the_defaults(engine, query):
    e, _ = engine
    r = e.search_memory(query, BOB, top_k=5)
    assert len(r.hits) == 5
    assert r.hits[0].abstract.startswith(GREEN_TEA), [(h.uri, h.score) for h in r.hits]


def test_cli_runs_every_query_of_a_file_in_one_process(engine, tmp_path, monkeypatch):
    import context_engine.service as service_module
    from context_engine.interfaces.cli.app import app

    e, _ = engine
    original = service_module.ContextEngineService
    opened: list[int] = []

    def counting(settings, **kw):
        opened.append(1)
        return original(settings, embedder=e.embedder, **kw)  # the module's model, loaded once

    monkeypatch.setattr(service_module, "ContextEngineService", counting)
    runner = CliRunner()
    home = str(tmp_path / "cli")
    sample = str(resources.files("context_engine") / "sample_corpus")
    assert runner.invoke(app, ["--home", home, "add", sample, SAMPLE]).exit_code == 0
    opened.clear()
    r = runner.invoke(app, ["--home", home, "search", "--queries", str(QUERIES), "-k", "3"])
    assert r.exit_code == 0, r.output
    assert opened == [1]  # one engine for every query
    blocks = r.output.split("search: ")[1:]
    assert [b.splitlines()[0] for b in blocks] == list(EXPECTED)
    for block, query in zip(blocks, EXPECTED, strict=True):
        first = next(line for line in block.splitlines() if line.startswith("│ 1 "))
        assert any(SAMPLE + uri in first for uri in EXPECTED[query]), first
    assert runner.invoke(app, ["--home", home, "search"]).exit_code != 0  # neither a QUERY nor --queries
