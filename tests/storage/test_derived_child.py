"""A large account's first derived file built in a child process (storage/derived/child.py, docs/derived_indexes.md
"Built in a child process"): the parent opens the file the child wrote and answers exactly as a load in its own
process would; writes made meanwhile are caught up; a failed child leaves the load to the parent."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from context_engine.schema.context import RequestContext
from context_engine.schema.query import SearchMemoryRequest
from context_engine.storage.derived.child import ChildProcessBuilder

CTX = RequestContext(account_id="acc", role="user", user_space="sam", agent_space="helper")
FACTS = [
    "I work at Northwind as a data engineer.",
    "My cat is called Miso.",
    "I switched from coffee to rooibos tea.",
    "I'm racing the 10k in May instead of the half marathon.",
    "I live in Marchmont with two flatmates.",
]
QUERIES = ["Where does Sam work?", "What does Sam drink instead of coffee?", "Which race is Sam running in May?"]


@pytest.fixture
def home(make_engine, tmp_path: Path) -> Path:
    """A home holding FACTS, with no derived file (a fresh home's first start)."""
    path = tmp_path / "store"
    engine = make_engine(path)
    engine.add_memories([{"text": f} for f in FACTS], CTX)
    engine.close()
    shutil.rmtree(path / "derived", ignore_errors=True)
    return path


def answers(engine) -> list[list[tuple[str, float]]]:
    out = []
    for q in QUERIES:
        response = engine.search_memory(SearchMemoryRequest(query=q, top_k=5), CTX)
        out.append([(h.uri, h.score) for h in response.hits])
    return out


def opened(make_engine, home: Path, rows: int):
    return make_engine(home, retrieval={"derived_build_process_rows": rows, "l0_source": "memory"})


def test_a_large_accounts_first_load_is_built_in_a_child_and_answers_as_a_load_here(make_engine, home):
    here = opened(make_engine, home, 0)
    expected = answers(here)
    assert here.derived_builder is None and (here.keyword_index.built_elsewhere, here.l0_matrix.built_elsewhere) == (
        0,
        0,
    )
    here.close()
    shutil.rmtree(home / "derived")

    engine = opened(make_engine, home, 1)
    assert answers(engine) == expected
    builder = engine.derived_builder
    assert isinstance(builder, ChildProcessBuilder) and (builder.builds, builder.failures) == (2, 0)
    state = engine.metadata.account_state(CTX.account_id)
    for index in (engine.keyword_index, engine.l0_matrix):
        assert (index.loads, index.built_elsewhere, index.remaps) == (1, 1, 0)
        # the child's file carries the generation's token, and the account opened from it holds the store's state
        held = index._accounts[CTX.account_id]
        assert (held.generation, held.token) == state and state.token is not None
    assert sorted(p.parent.name for p in (home / "derived").rglob("*.safetensors")) == ["bm25", "l0"]


def test_a_home_given_as_a_relative_path_is_built_in_the_child(make_engine, home, monkeypatch):
    """Failed at 9c3bd9e: the child runs in the data home, and a home given relative to the caller's directory
    (``--home ./store``) was resolved again from there, so the child opened (and created) an empty database under
    the home, failed with WRT-5001 ("no such table") and left every large account's first load to the parent
    (found by ``bench/lookup_after_writes.py --home bench/.cache/...`` on the 1M home). The home is now made absolute
    when the settings are loaded."""
    monkeypatch.chdir(home.parent)
    engine = opened(make_engine, Path(home.name), 1)
    assert engine.settings.home == home.resolve()
    assert len(answers(engine)[0]) > 0
    builder = engine.derived_builder
    assert isinstance(builder, ChildProcessBuilder) and (builder.builds, builder.failures) == (2, 0)
    assert not (home / home.name).exists()  # no second home made inside the first


def test_an_account_under_the_threshold_is_loaded_here(make_engine, home):
    engine = opened(make_engine, home, len(FACTS) + 100)  # more vector rows than the account has
    answers(engine)
    assert engine.derived_builder is not None and engine.derived_builder.builds == 0
    assert (engine.keyword_index.loads, engine.keyword_index.built_elsewhere) == (1, 0)
    assert (engine.l0_matrix.loads, engine.l0_matrix.built_elsewhere) == (1, 0)


def test_writes_committed_while_the_child_builds_are_caught_up(make_engine, home, monkeypatch):
    """Another process's write lands after the child read the account: the parent opens the file one generation
    behind and applies the change log before it holds the account (no search runs: the load alone is checked)."""
    engine = opened(make_engine, home, 1)
    builder = engine.derived_builder
    assert builder is not None
    build = builder.build
    writer = make_engine(home, retrieval={"derived_build_process_rows": 0})
    written: list[int] = []

    def build_then_write(kind: str, account_id: str) -> bool:
        done = build(kind, account_id)
        writer.add_memory(f"My dentist appointment is on 14 March ({kind}).", CTX)
        written.append(engine.metadata.account_generation(CTX.account_id))
        return done

    monkeypatch.setattr(builder, "build", build_then_write)
    assert engine.keyword_index.warm(CTX.account_id)
    assert engine.l0_matrix.view(CTX.account_id) is not None
    assert builder.builds == 2 and len(written) == 2
    for index, generation in ((engine.keyword_index, written[0]), (engine.l0_matrix, written[1])):
        held = index._accounts[CTX.account_id]
        assert (index.loads, index.built_elsewhere, index.file_loads) == (1, 1, 0)
        # the file is at the generation before the write; what is held is at the one after it, applied from the log
        assert held.generation == generation and held.unsaved >= 1
    response = engine.search_memory(SearchMemoryRequest(query="When is Sam's dentist appointment?", top_k=3), CTX)
    assert "dentist" in response.hits[0].abstract


def test_a_child_that_fails_leaves_the_load_to_this_process(make_engine, home, caplog):
    here = opened(make_engine, home, 0)
    expected = answers(here)
    here.close()
    shutil.rmtree(home / "derived")

    engine = opened(make_engine, home, 1)
    assert engine.derived_builder is not None
    engine.derived_builder.timeout_s = 0.001  # stopped before it could build anything
    with caplog.at_level(logging.WARNING, logger="context_engine.storage.derived.child"):
        assert answers(engine) == expected
    assert (engine.derived_builder.builds, engine.derived_builder.failures) == (0, 2)
    for index in (engine.keyword_index, engine.l0_matrix):
        assert (index.loads, index.built_elsewhere) == (1, 0)
    assert "not built in a child process (still building after 0.001 s, stopped); loading it here" in caplog.text


def test_a_child_reports_why_it_did_not_build(make_engine, home, caplog):
    engine = opened(make_engine, home, 1)
    builder = engine.derived_builder
    assert builder is not None
    with caplog.at_level(logging.WARNING, logger="context_engine.storage.derived.child"):
        assert builder.build("postings", CTX.account_id) is False
    assert "exit status 2: ValueError: unknown derived file kind 'postings' (expected one of bm25, l0)" in caplog.text
    assert builder.failures == 1


def test_a_read_only_home_builds_no_file_elsewhere(make_engine, home):
    engine = make_engine(home, read_only=True, retrieval={"derived_build_process_rows": 1})
    assert engine.derived_builder is None and engine.keyword_index._builder is None


def test_an_engine_given_its_metadata_store_builds_no_file_elsewhere(make_engine, home):
    """The child opens the metadata store the settings name; one handed to the engine may be another."""
    from context_engine.settings import load_settings
    from context_engine.storage.factory import open_metadata

    store = open_metadata(load_settings(home))
    try:
        engine = make_engine(home, parts={"metadata": store}, retrieval={"derived_build_process_rows": 1})
        assert engine.derived_builder is None
        answers(engine)
        assert (engine.l0_matrix.loads, engine.l0_matrix.built_elsewhere) == (1, 0)
    finally:
        store.close()


def test_failures_in_a_row_turn_the_builder_off(make_engine, home, caplog):
    from context_engine.storage.derived.child import MAX_FAILURES

    engine = opened(make_engine, home, 1)
    builder = engine.derived_builder
    assert builder is not None
    with caplog.at_level(logging.WARNING, logger="context_engine.storage.derived.child"):
        for _ in range(MAX_FAILURES):
            assert builder.build("postings", CTX.account_id) is False
    assert builder.min_rows == 0 and builder.failures == MAX_FAILURES
    assert f"{MAX_FAILURES} child builds failed in a row: large accounts now load in this process" in caplog.text
    answers(engine)
    assert (engine.l0_matrix.loads, engine.l0_matrix.built_elsewhere, builder.builds) == (1, 0, 0)


def test_closing_the_engine_stops_a_child_still_building(make_engine, home, monkeypatch):
    import subprocess
    import threading
    import time

    engine = opened(make_engine, home, 1)
    builder = engine.derived_builder
    assert builder is not None
    started = threading.Event()
    popen = subprocess.Popen

    def slow_child(args, **kw):  # a child that would take a minute: python sleeps before it reads its request
        child = popen([args[0], "-c", "import time; time.sleep(60)"], **kw)
        started.set()
        return child

    monkeypatch.setattr(subprocess, "Popen", slow_child)
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(builder.build("l0", CTX.account_id)))
    thread.start()
    assert started.wait(30)
    t = time.perf_counter()
    builder.close()
    thread.join(30)
    assert result == [False] and time.perf_counter() - t < 30 and not builder._running
    assert builder.build("l0", CTX.account_id) is False  # no child starts once closed


def test_a_capped_level0_matrix_loads_here(make_engine, home):
    """An account that may be over ``retrieval.memory_max_rows`` (more vector rows than the limit, every level
    counted) is left to the load here, which finds it over (its rows are all level 0) and records it; at the limit
    the child builds it."""
    probe = make_engine(home, retrieval={"derived_build_process_rows": 0})
    rows = probe.metadata.count_vectors(CTX.account_id)
    probe.close()
    for limit, held, built_elsewhere in ((rows - 1, False, 0), (rows, True, 1)):
        shutil.rmtree(home / "derived", ignore_errors=True)
        retrieval = {"derived_build_process_rows": 1, "l0_source": "memory", "memory_max_rows": limit}
        engine = make_engine(home, retrieval=retrieval)
        assert (engine.l0_matrix.view(CTX.account_id) is not None) is held
        assert engine.l0_matrix.built_elsewhere == built_elsewhere and engine.derived_builder is not None
        assert engine.derived_builder.builds == built_elsewhere
        engine.close()
