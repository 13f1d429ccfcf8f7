"""bench/lookup_after_writes.py runs on a small home written here and prints its three figures (a benchmark, never a
test of speed: only that it runs, writes what it says, and reports it)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from tests.conftest import REPO

pytestmark = pytest.mark.slow

RUNBOOK = """# Pod CrashLooping

## Meaning

A pod restarts again and again after a deploy (CrashLoopBackOff).

## Fix

Read the previous container's logs, roll the deploy back.
"""


@pytest.mark.parametrize(
    ("kind", "writer"), [("memory", "this-process"), ("resource", "this-process"), ("resource", "other-process")]
)
def test_the_bench_prints_warm_lookups_lookups_after_writes_and_the_writes(default_embedder, tmp_path, kind, writer):
    home = tmp_path / "home"
    engine = ContextEngineService(load_settings(home), embedder=default_embedder)  # the bench's model
    alice = RequestContext(account_id="default", role="user", user_space="alice")
    engine.add_text(RUNBOOK, "ctx://resources/runbooks/k8s/pod-crashloop.md")
    engine.add_memory("I am on call for the payments service this week.", alice)
    engine.close()
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "lookup_after_writes.py"),
            "--home",
            str(home),
            "--account",
            "default",
            "--user-space",
            "alice",
            "--lookups",
            "2",
            "--writes",
            "3",
            "--warmup",
            "1",
            "--write-kind",
            kind,
            "--writer",
            writer,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert f"caller default/alice, writes by {writer}" in out
    write = "add_memory" if kind == "memory" else re.escape("add_text (resource)")
    for line in ("lookup warm", "lookup after a write", write):
        assert re.search(rf"{line}\s+p50\s+[\d.]+\s+max\s+[\d.]+ ms", out), out
    assert "(3)" in out.split("lookup after a write")[1].splitlines()[0]
    with ContextEngineService(load_settings(home), embedder=default_embedder) as reopened:
        page = reopened.list_memories(alice)
        runs = reopened.ls("ctx://resources/bench-notes/") if kind == "resource" else []
        notes = [n for r in runs for n in reopened.ls(r.uri)]
    written = 3 if kind == "memory" else 0
    assert page.total == 1 + written and sum("Lookup bench note" in m.abstract for m in page.items) == written
    assert len(notes) == 3 - written  # the runbooks stay too, under resources/bench-notes/<run>/
