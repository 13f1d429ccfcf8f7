"""Derived files across OS processes (issue 12, docs/derived_indexes.md "Files"): a second process opens the level-0
matrix and BM25 from ``<home>/derived`` and answers exactly like the process that wrote them, with no wholesale load;
a write by another process in between is caught up from the change log; and a process killed with SIGKILL while it
writes those files leaves the previous files valid."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from context_engine.schema.nodes import VectorFilter
from context_engine.settings import load_settings
from context_engine.storage.derived_files import DerivedFiles
from context_engine.storage.keyword import BM25Index
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
from context_engine.storage.vector.matrix import MatrixVectorIndex
from tests.retrieval.conftest import ADMIN, HashEmbedder, seed_small_store

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO)]))
QUERIES = ["disk space running out", "container keeps crashing", "quokka ledger reconciliation", "alice memory"]

# One search process: opens the engine on the home, answers the queries, prints the answers and the counters.
_SEARCH = """
import json, sys
from pathlib import Path
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import VectorFilter
from context_engine.schema.query import SearchMemoryRequest
from tests.retrieval.conftest import HashEmbedder

engine = ContextEngineService(load_settings(Path(sys.argv[1])), embedder=HashEmbedder())
admin = RequestContext(account_id="default", role="admin")
answers = []
for q in json.loads(sys.argv[2]):
    r = engine.search_memory(SearchMemoryRequest(query=q, top_k=5), admin)
    answers.append([(h.uri, round(h.score, 6)) for h in r.hits])
    kw = engine.keyword_index.search(q, 5, VectorFilter(account_id="default"))
    answers.append([(h.id, round(h.score, 6)) for h in kw])
m, k = engine.l0_matrix, engine.keyword_index
engine.close()
heavy = ["scipy", "bm25s", "markdown_it", "yaml", "jieba", "lancedb", "torch", "fastapi", "mcp"]
print(json.dumps({"answers": answers, "l0": [m.loads, m.file_loads, m.rows_applied],
                  "bm25": [k.loads, k.file_loads, k.docs_indexed], "imported": [h for h in heavy if h in sys.modules]}))
"""


def search_process(home: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _SEARCH, str(home), json.dumps(QUERIES)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=ENV,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_opens_the_files_and_a_foreign_write_is_caught_up(tmp_path):
    from context_engine.service import ContextEngineService

    home = tmp_path / "home"
    engine = ContextEngineService(load_settings(home), embedder=HashEmbedder())
    seed_small_store(engine)
    engine.close()

    first = search_process(home)  # no files yet: wholesale loads, then the files are written
    assert first["l0"][:2] == [1, 0] and first["bm25"][:2] == [1, 0]
    assert sorted(p.name for p in (home / "derived").iterdir()) == ["bm25", "l0"]

    second = search_process(home)
    assert second["answers"] == first["answers"]
    assert second["l0"] == [0, 1, 0] and second["bm25"] == [0, 1, 0]  # opened from the files, nothing reloaded
    assert second["imported"] == []  # a search process imports no parser, no CJK dictionary, no other index

    writer = ContextEngineService(load_settings(home), embedder=HashEmbedder())  # a write after the files
    writer.add_text(
        "# Quokka ledger\n\nThe quokka ledger reconciliation job failed.\n", "ctx://resources/ops/quokka.md", ADMIN
    )
    writer.delete("ctx://resources/ops/storage/disk-pressure.md", ADMIN)
    writer.close()
    third = search_process(home)
    assert third["l0"][:2] == [0, 1] and 0 < third["l0"][2] <= 6  # caught up row by row from the change log
    assert third["bm25"][:2] == [0, 1] and 0 < third["bm25"][2] <= 6
    quokka = third["answers"][QUERIES.index("quokka ledger reconciliation") * 2]
    assert quokka[0][0] == "ctx://resources/ops/quokka.md"
    assert all(u != "ctx://resources/ops/storage/disk-pressure.md" for ans in third["answers"][::2] for u, _ in ans)

    # the same answers as a process that reads everything from the metadata store
    import shutil

    shutil.rmtree(home / "derived")
    assert search_process(home)["answers"] == third["answers"]


# A saver: writes rows, then the level-0 and BM25 files, forever. With PAUSE set, it stops between the fsync of the
# temporary file and the rename (os.replace), says so, and waits: the parent kills it exactly there.
_SAVER = """
import os, sys, time
import numpy as np
from pathlib import Path
from context_engine.schema.nodes import VectorRecord
from context_engine.storage.derived_files import DerivedFiles
from context_engine.storage.keyword import BM25Index
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
from context_engine.storage.vector.matrix import MatrixVectorIndex

home, pause = Path(sys.argv[1]), sys.argv[2] == "pause"
store = SqlMetadataStore.sqlite(home / "metadata.db")
files = DerivedFiles(home / "derived", store)
l0 = MatrixVectorIndex(store, levels=(0,), files=files)
bm25 = BM25Index(source=store, files=files)
real_replace = os.replace

def replace(src, dst):
    if pause:
        print("renaming", flush=True)
        time.sleep(60)
    real_replace(src, dst)

os.replace = replace
rng = np.random.default_rng(int(sys.argv[3]))
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
batch = 0
while True:
    vectors = rng.standard_normal((1000, 128)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.put_vectors([
        VectorRecord(id=f"b{batch}-{i}", vector=vectors[i], uri=f"ctx://resources/k/b{batch}-{i}.md",
                     parent_uri="ctx://resources/k/", account_id="acc", owner_space="shared",
                     context_type="resource", level=0, doc_id=f"ctx://resources/k/b{batch}-{i}.md",
                     text=" ".join(rng.choice(words, 12)), breadcrumb="K")
        for i in range(1000)
    ])
    l0.view("acc")
    bm25.search("alpha", 1, __import__("context_engine.schema.nodes", fromlist=["VectorFilter"]).VectorFilter(
        account_id="acc"))
    generation = store.account_generation("acc")
    print("saving", generation, flush=True)
    l0.save("acc")
    bm25.save_files("acc")
    print("saved", generation, flush=True)
    batch += 1
"""


def _run_saver(home: Path, mode: str, seed: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _SAVER, str(home), mode, str(seed)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=ENV,
    )


def _reference(home: Path) -> tuple[list, list]:
    """Answers read from the store alone (no files)."""
    import numpy as np

    store = SqlMetadataStore.sqlite(home / "metadata.db")
    try:
        q = np.random.default_rng(7).standard_normal(128).astype(np.float32)
        q /= np.linalg.norm(q)
        flt = VectorFilter(account_id="acc")
        dense = [(h.id, h.score) for h in MatrixVectorIndex(store, levels=(0,)).search(q, 20, flt)]
        sparse = [(h.id, h.score) for h in BM25Index(source=store).search("gamma delta", 20, flt)]
        return dense, sparse
    finally:
        store.close()


def _from_files(home: Path) -> tuple[tuple[list, list], tuple[int, int], tuple[int, int], list[int]]:
    """Answers through indexes opened from the files, their (loads, file_loads), and the files' generations."""
    import numpy as np

    store = SqlMetadataStore.sqlite(home / "metadata.db")
    try:
        files = DerivedFiles(home / "derived", store)
        l0 = MatrixVectorIndex(store, levels=(0,), files=files)
        bm25 = BM25Index(source=store, files=files)
        generations = [
            snap.generation
            for snap in (files.load("l0", "acc", l0._params()), files.load("bm25", "acc", bm25._params()))
            if snap is not None
        ]
        q = np.random.default_rng(7).standard_normal(128).astype(np.float32)
        q /= np.linalg.norm(q)
        flt = VectorFilter(account_id="acc")
        dense = [(h.id, h.score) for h in l0.search(q, 20, flt)]
        sparse = [(h.id, h.score) for h in bm25.search("gamma delta", 20, flt)]
        l0.close()
        bm25.close()
        return (dense, sparse), (l0.loads, l0.file_loads), (bm25.loads, bm25.file_loads), generations
    finally:
        store.close()


def test_sigkill_between_the_temporary_file_and_the_rename_leaves_the_previous_files(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proc = _run_saver(home, "run", 1)
    assert proc.stdout is not None
    saved: list[int] = []
    while len(saved) < 2:
        words = proc.stdout.readline().split()
        assert words, f"saver exited with {proc.poll()}"
        if words[0] == "saved":
            saved.append(int(words[1]))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)

    paused = _run_saver(home, "pause", 2)  # opens the files, writes more rows, and stops before its first rename
    assert paused.stdout is not None
    line = paused.stdout.readline()
    while line and not line.startswith("renaming"):
        line = paused.stdout.readline()
    assert line.startswith("renaming"), f"saver exited with {paused.poll()}"
    leftovers = list((home / "derived").glob("*/*.tmp.*"))
    assert leftovers  # the new file is written and fsync'd, not yet renamed
    paused.send_signal(signal.SIGKILL)
    paused.wait(timeout=30)

    answers, l0_counts, bm25_counts, generations = _from_files(home)
    assert generations and set(generations) <= set(saved)  # the previous files, whole
    assert l0_counts == (0, 1) and bm25_counts == (0, 1)  # used, then caught up from the change log
    assert answers == _reference(home)

    store = SqlMetadataStore.sqlite(home / "metadata.db")  # the next save sweeps the dead writer's temporary file
    try:
        l0 = MatrixVectorIndex(store, levels=(0,), files=DerivedFiles(home / "derived", store))
        l0.view("acc")
        assert l0.save("acc")
    finally:
        store.close()
    assert not list((home / "derived").glob("*/*.tmp.*"))


@pytest.mark.parametrize("seed", [3, 4, 5, 6])
def test_sigkill_at_a_random_point_of_a_save_leaves_usable_files(tmp_path, seed):
    import time

    home = tmp_path / "home"
    home.mkdir()
    proc = _run_saver(home, "run", seed)
    assert proc.stdout is not None
    rng = random.Random(seed)
    durations: list[float] = []
    started = 0.0
    while True:
        words = proc.stdout.readline().split()
        assert words, f"saver exited with {proc.poll()}"
        if words[0] == "saving":
            started = time.monotonic()
            if len(durations) >= 2:
                break
        else:
            durations.append(time.monotonic() - started)
    # a point inside this save, as long as the previous ones took (both files: the level-0 matrix, then BM25)
    time.sleep(rng.uniform(0.0, max(durations)))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)

    answers, l0_counts, bm25_counts, generations = _from_files(home)
    assert generations  # a file of an earlier (or this) save, whole
    assert l0_counts == (0, 1) and bm25_counts == (0, 1)
    assert answers == _reference(home)
