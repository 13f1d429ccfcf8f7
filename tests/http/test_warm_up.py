"""The startup warm-up (issue 26, context_engine/warm_up.py): what the first lookup_knowledge and search_memory need is
loaded before the app is ready, for every account of a multi-account home; a failing step does not stop the start;
the budget and the account limit bound it. Behaviour only (what is held), never timing."""

from __future__ import annotations

import gc

import pytest
from fastapi.testclient import TestClient

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.http import create_app
from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.storage.keyword import tokenize as keyword_tokenize
from context_engine.storage.metadata.keys import ApiKeyStore
from context_engine.storage.vector.lazy import LazyVectorIndex
from context_engine.warm_up import warm_up
from tests.http.helpers import LOOPBACK_URL, bearer

ACCOUNTS = ("acme", "globex")
DOC = "# Disk Pressure\n\n## Meaning\n\nThe node {n} is running out of disk space.\n\n## Fix\n\nDelete old images.\n"


@pytest.fixture(scope="module")
def keyed_home(tmp_path_factory, embedder):
    """A home with a runbook and a memory in each of two accounts, and an API key of acme's admin (closed: each test
    opens it afresh)."""
    path = tmp_path_factory.mktemp("warm-home")
    docs = tmp_path_factory.mktemp("warm-docs")
    svc = ContextEngineService(load_settings(path), embedder=embedder)
    try:
        for n, account in enumerate(ACCOUNTS):
            (docs / f"disk-{account}.md").write_text(DOC.format(n=n), encoding="utf-8")
            admin = RequestContext(account_id=account, role="admin")
            svc.add_resource(docs / f"disk-{account}.md", f"ctx://resources/ops/{account}/", admin)
            user = RequestContext(account_id=account, role="user", user_space="u1", agent_space="a1")
            svc.add_memory(f"I keep the {account} backups in the Lisbon bucket.", user, category="preference")
        _, key = ApiKeyStore(svc.metadata).create(RequestContext(account_id="acme", role="admin"), "admin")
    finally:
        svc.close()
    return path, bearer(key)


@pytest.fixture(scope="module")
def home(keyed_home):
    return keyed_home[0]


def open_engine(home, embedder, **overrides) -> ContextEngineService:
    return ContextEngineService(load_settings(home, **overrides), embedder=embedder)


def test_lifespan_warms_every_account_before_ready(keyed_home, embedder, monkeypatch):
    home, admin = keyed_home
    svc = open_engine(home, embedder)
    try:
        assert isinstance(svc.index, LazyVectorIndex) and not svc.index.opened  # opening an engine stays cheap
        assert not any(svc.keyword_index.held(a) or svc.l0_matrix.held(a) for a in ACCOUNTS)
        import context_engine.warm_up as warm_module

        real, seen = warm_module.warm_up, {}

        def watched(service, **kwargs):
            try:  # what /readyz (and every route) asks first: refused while the warm-up runs
                app.state.engine.ready()
            except ContextEngineError as err:
                seen["during"] = err.code
            report = real(service, **kwargs)
            seen["after"] = [(a, svc.keyword_index.held(a), svc.l0_matrix.held(a)) for a in ACCOUNTS]
            views = [svc.l0_matrix.view(a) for a in ACCOUNTS]
            seen["keys"] = [seg.uris._ends is not None for v in views if v for seg, _ in v.segments.values()]
            return report

        monkeypatch.setattr(warm_module, "warm_up", watched)
        app = create_app(service=svc)
        with TestClient(app, base_url=LOOPBACK_URL, client=("127.0.0.1", 40002)) as client:
            assert seen["during"] == ErrorCode.NOT_READY
            assert seen["after"] == [(a, True, True) for a in ACCOUNTS]  # loaded before the app said ready
            assert seen["keys"] and all(seen["keys"])  # the URI lookups' keys too (PackedStrings.prepare_lookups)
            report = app.state.engine.warm_up
            assert report.accounts == list(ACCOUNTS) and report.not_warmed == []
            steps = {"model", "tokenizer", "hint rules", "redaction", "vector index", "accounts", "gc freeze"}
            assert steps <= set(report.steps)
            assert svc.gc_frozen and gc.get_freeze_count() > 0  # what was loaded is out of the collector's walks
            assert svc.index.opened  # LanceDB opened (and queried) before the first request
            assert keyword_tokenize._jieba_tokenizer is not None  # the hint layer's and Chinese queries' dictionary
            assert keyword_tokenize._proper_nouns  # the names of a Chinese question (match_quality)
            hint_loads = []
            load_hint_index = svc.audit.load_hint_index
            monkeypatch.setattr(svc.audit, "load_hint_index", lambda *a: hint_loads.append(a) or load_hint_index(*a))
            ready = client.get("/readyz")
            assert ready.status_code == 200 and ready.json()["status"] == "ready"
            loads = (svc.keyword_index.loads, svc.keyword_index.file_loads, svc.l0_matrix.loads)
            answer = client.post("/api/v1/search_memory", json={"query": "where are the backups"}, headers=admin)
            assert answer.status_code == 200 and answer.json()["hits"]
            query = {"query": "node running out of disk space"}
            answer = client.post("/api/v1/lookup_knowledge", json=query, headers=admin)
            assert answer.status_code == 200 and answer.json()["evidence_blocks"]
            # the first requests loaded nothing: every structure they use was held
            assert (svc.keyword_index.loads, svc.keyword_index.file_loads, svc.l0_matrix.loads) == loads
            assert hint_loads == []
    finally:
        svc.close()
    assert not svc.gc_frozen and gc.get_freeze_count() == 0  # closing the engine thawed them


def test_a_failing_step_is_reported_and_the_server_starts(keyed_home, embedder, monkeypatch):
    home, admin = keyed_home
    svc = open_engine(home, embedder)
    try:

        def broken(account_id):
            raise ContextEngineError(ErrorCode.STORAGE_FAILED, "disk gone", retryable=True)

        monkeypatch.setattr(svc.keyword_index, "warm", broken)
        app = create_app(service=svc)
        with TestClient(app, base_url=LOOPBACK_URL, client=("127.0.0.1", 40003)) as client:
            report = app.state.engine.warm_up
            assert report.accounts == []  # each account's BM25 failed: reported, the other parts still loaded
            assert report.not_warmed == ["BM25 of one account: WRT-5001: disk gone"] * len(ACCOUNTS)
            assert all(svc.l0_matrix.held(a) for a in ACCOUNTS)
            assert client.get("/readyz").status_code == 200
            monkeypatch.undo()  # the request meets the store as it is now, and loads the account itself
            query = {"query": "node running out of disk space"}
            answer = client.post("/api/v1/lookup_knowledge", json=query, headers=admin)
            assert answer.status_code == 200 and answer.json()["evidence_blocks"]
            assert svc.keyword_index.held("acme") and not svc.keyword_index.held("globex")
    finally:
        svc.close()


def test_budget_and_account_limit_bound_the_warm_up(home, embedder):
    svc = open_engine(home, embedder)
    try:
        report = warm_up(svc, budget_s=0)
        assert report.accounts == [] and report.not_warmed == ["2 accounts after the 0 s budget"]
        assert not any(svc.keyword_index.held(a) for a in ACCOUNTS)
        assert svc.index.opened  # the process-wide parts are warmed whatever the budget
        report = warm_up(svc, max_accounts=1)
        assert report.accounts == ["acme"] and report.not_warmed == ["1 accounts past the first 1"]
        assert svc.keyword_index.held("acme") and not svc.keyword_index.held("globex")
    finally:
        svc.close()


@pytest.mark.parametrize("overrides", [{"vector": {"backend": "exact"}}, {"retrieval": {"l0_source": "index"}}])
def test_other_backends_and_sources(home, embedder, overrides):
    """The exact vector index (no lazy open) and the index-only level-0 source (no matrix to load): nothing fails, and
    what each uses is warmed."""
    svc = open_engine(home, embedder, **overrides)
    try:
        report = warm_up(svc)
        assert report.accounts == list(ACCOUNTS) and report.not_warmed == []
        assert all(svc.keyword_index.held(a) for a in ACCOUNTS)
        uses_matrix = svc.settings.retrieval.l0_source != "index"
        assert all(svc.l0_matrix.held(a) == uses_matrix for a in ACCOUNTS)
    finally:
        svc.close()


def test_a_home_without_derived_files_is_served_from_the_files_its_warm_up_writes(home, embedder, tmp_path):
    """A fresh home's first start loads every account wholesale; the warm-up waits for their files and the accounts
    read back from them (DerivedIndex._remap), so the first requests hold what a restarted server holds."""
    import shutil

    fresh = tmp_path / "fresh"
    shutil.copytree(home, fresh)
    shutil.rmtree(fresh / "derived", ignore_errors=True)
    svc = open_engine(fresh, embedder)
    try:
        report = warm_up(svc)
        assert report.accounts == list(ACCOUNTS) and report.not_warmed == []
        assert "derived files" in report.steps
        assert svc.l0_matrix.loads == len(ACCOUNTS) and svc.l0_matrix.remaps == len(ACCOUNTS)
        assert svc.keyword_index.loads == len(ACCOUNTS) and svc.keyword_index.remaps == len(ACCOUNTS)
        views = [svc.l0_matrix.view(a) for a in ACCOUNTS]
        assert all(seg.uris._ends is not None for v in views if v for seg, _ in v.segments.values())
        user = RequestContext(account_id="acme", role="user", user_space="u1", agent_space="a1")
        hits = svc.search_memory("where are the backups", user).hits
        assert hits and "Lisbon" in hits[0].abstract
        assert (svc.l0_matrix.loads, svc.keyword_index.loads) == (len(ACCOUNTS), len(ACCOUNTS))  # nothing reloaded
    finally:
        svc.close()


def test_each_wholesale_load_waits_for_the_file_the_previous_one_writes(home, embedder, tmp_path, monkeypatch):
    """On a fresh home a load starts only once the previous load's derived file is written and read back
    (warm_up._settle): loads never overlap another's save, which fragments the heap. The saves are slowed, so that
    a load that did not wait would find the previous account not yet read back."""
    import shutil
    import time

    fresh = tmp_path / "fresh"
    shutil.copytree(home, fresh)
    shutil.rmtree(fresh / "derived", ignore_errors=True)
    svc = open_engine(fresh, embedder)
    seen: list[tuple[str, str, int, int]] = []
    try:
        for index in (svc.keyword_index, svc.l0_matrix):
            save = index.save_file

            def slow_save(account, _save=save):
                time.sleep(0.3)
                return _save(account)

            monkeypatch.setattr(index, "save_file", slow_save)
        for name, index in (("BM25", svc.keyword_index), ("level-0", svc.l0_source)):
            warm = index.warm

            def recorded(account, _warm=warm, _name=name):
                seen.append((_name, account, svc.keyword_index.remaps, svc.l0_matrix.remaps))
                return _warm(account)

            monkeypatch.setattr(index, "warm", recorded)
        report = warm_up(svc)
        assert report.accounts == list(ACCOUNTS) and report.not_warmed == []
        # (load, account, BM25 accounts read back, level-0 accounts read back) when each load started
        assert seen == [
            ("BM25", "acme", 0, 0),
            ("level-0", "acme", 1, 0),
            ("BM25", "globex", 1, 1),
            ("level-0", "globex", 2, 1),
        ]
        assert (svc.keyword_index.remaps, svc.l0_matrix.remaps) == (2, 2)
    finally:
        svc.close()
