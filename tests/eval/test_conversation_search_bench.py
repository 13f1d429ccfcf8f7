"""bench/conversation_search.py runs on a conversation set written by us and prints its figures (a benchmark, never
a test of speed: only that it runs and what it reports is there)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def test_the_bench_prints_each_pass_and_the_query_embeddings(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "conversation_search.py"),
            "--dataset",
            str(REPO / "eval" / "conversations" / "agent_shapes"),
            "--passes",
            "1",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--home",
            str(tmp_path / "home"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    assert "== agent_shapes: 181 questions, 7 conversations, 172 turns ==" in out
    assert re.search(r"first pass\s+p50\s+[\d.]+\s+p95\s+[\d.]+", out)
    assert re.search(r"pass 1\s+p50\s+[\d.]+", out)
    # every search embeds at least its query; the guesses batch them: fewer calls than texts
    texts, calls = map(float, re.search(r"embedded a search ([\d.]+) in ([\d.]+) calls", out).groups())
    assert texts >= 1.0 and 1.0 <= calls < texts
