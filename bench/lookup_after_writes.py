#!/usr/bin/env python
"""lookup_knowledge right after memory writes, against lookup_knowledge warm (docs/lookup_knowledge.md, "Hint layer").

An agent writes memories while it looks things up: each memory write used to move the hint index's generation, and
the next lookup reloaded and compiled the account's whole hint index (1.6-2.7 s on the 100k bench home, against
80-110 ms warm, until 2026-12-07). This opens an engine on ``--home`` (default: the 100k home of
``bench/search_memory.py``, built by ``python bench/search_memory.py --sizes 100000 --build-only``), warms it with
``--warmup`` lookups, then prints, in milliseconds:

* ``lookup warm``: ``--lookups`` lookups one after another;
* ``lookup after a write``: ``--writes`` rounds of one write and then one lookup. ``--write-kind memory`` (the
  default): one ``add_memory`` (a new text each time, ``policy="keep"``); ``--write-kind resource``: one ``add_text``
  of a short runbook (a new alert name each time) under ``ctx://resources/bench-notes/``, which the hint index holds,
  so the lookup after it reads the index patched by the write (knowledge/hint_snapshot.py, ``HintSnapshot.patched``;
  a reload and compile of the account's whole index until 2026-12-07);
* ``add_memory`` / ``add_text``: those writes.

``--writer other-process`` makes each write in a second process on the same home (this script, started once with
``--child-writer``, told over a pipe when to write), as a CLI command or another ``serve`` worker would: the lookup
process then brings its index along from the hint change log (``KnowledgeIndexService._caught_up``; a reload and
compile of the account's whole index until 2026-12-07), not from its own write.

The caller is the first ``user`` of the home's ``callers.json`` (the bench homes), else ``--account`` /
``--user-space``. The queries are the bench's own (``bench/search_memory.py`` ``make_queries``), every lookup in a
new session (nothing deduplicated). The writes stay in the home. Nothing is asserted: this prints figures.

    python bench/lookup_after_writes.py [--home DIR] [--lookups 10] [--writes 10] [--write-kind memory|resource]
        [--writer this-process|other-process] [--account A --user-space U]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from search_memory import default_embedder, make_queries  # bench/: run as a script, its folder is on sys.path

from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_HOME = ROOT / "bench" / ".cache" / "search_memory" / "store-100000"


def caller(home: Path, account: str, user_space: str) -> RequestContext:
    """The first ``user`` caller of a bench home (its ``callers.json``), else ``account`` / ``user_space``."""
    listed = home / "callers.json"
    if listed.exists():
        for a, role, user, agent in json.loads(listed.read_text(encoding="utf-8")):
            if role == "user":
                return RequestContext(account_id=a, role=role, user_space=user, agent_space=agent)
    return RequestContext(account_id=account, role="user", user_space=user_space)


def figures(ms: list[float]) -> str:
    """``p50 / max`` of ``ms`` and how many."""
    return f"p50 {statistics.median(ms):8.1f}  max {max(ms):8.1f} ms  ({len(ms)})"


def write(engine: ContextEngineService, ctx: RequestContext, kind: str, run: str, i: int) -> float:
    """One write of ``kind`` (the ``i``-th of ``run``); its milliseconds."""
    started = time.perf_counter()
    if kind == "memory":
        engine.add_memory(f"Lookup bench note {run}-{i}: the on-call handover is at {i % 24}:00.", ctx, policy="keep")
    else:
        alert = f"BenchNoteAlert{run}N{i}"
        text = f"# {alert}\n\n## Meaning\n\nThe on-call handover {i} is late (`{alert}`).\n"
        admin = RequestContext(account_id=ctx.account_id, role="admin")  # shared resources: an admin writes
        engine.add_text(text, f"ctx://resources/bench-notes/{run}/{alert}.md", admin)
    return (time.perf_counter() - started) * 1e3


def child_writer(home: Path, ctx: RequestContext, kind: str, run: str) -> int:
    """``--child-writer``: open an engine on ``home``, say ``ready``, then write once per line read (the line is
    the write's number) and answer with its milliseconds, until stdin closes."""
    with ContextEngineService(load_settings(home), embedder=default_embedder()) as engine:
        print("ready", flush=True)
        for line in sys.stdin:
            print(f"{write(engine, ctx, kind, run, int(line)):.3f}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, default=DEFAULT_HOME, help="An engine home (default: the 100k bench home).")
    ap.add_argument("--lookups", type=int, default=10, help="Warm lookups measured.")
    ap.add_argument("--writes", type=int, default=10, help="Rounds of one add_memory, then one lookup.")
    ap.add_argument("--warmup", type=int, default=3, help="Lookups before measuring.")
    ap.add_argument("--write-kind", choices=("memory", "resource"), default="memory", help="What each write adds.")
    ap.add_argument(
        "--writer",
        choices=("this-process", "other-process"),
        default="this-process",
        help="Which process writes: the one that looks up, or a second one on the same home.",
    )
    ap.add_argument("--child-writer", metavar="RUN", help=argparse.SUPPRESS)  # the second process (--writer)
    ap.add_argument("--account", default="default", help="Caller's account when the home has no callers.json.")
    ap.add_argument("--user-space", default="bench", help="Caller's user space when the home has no callers.json.")
    args = ap.parse_args(argv)
    if not args.home.is_dir():
        print(f"no engine home at {args.home}: build one with `python bench/search_memory.py --sizes 100000 "
              "--build-only`, or pass --home", file=sys.stderr)  # fmt: skip
        return 2
    ctx = caller(args.home, args.account, args.user_space)
    if args.child_writer:
        return child_writer(args.home, ctx, args.write_kind, args.child_writer)
    queries = make_queries(args.warmup + args.lookups + args.writes)
    run = uuid.uuid4().hex[:8]  # new texts every run: a re-run must not find them "unchanged"
    child: subprocess.Popen[str] | None = None
    if args.writer == "other-process":
        command = [sys.executable, __file__, "--home", str(args.home), "--write-kind", args.write_kind]
        command += ["--account", args.account, "--user-space", args.user_space, "--child-writer", run]
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdin is not None
        if child.stdout.readline().strip() != "ready":
            print("the writing process did not start", file=sys.stderr)
            return 1
    engine = ContextEngineService(load_settings(args.home), embedder=default_embedder())
    try:

        def lookup(query: str) -> float:
            started = time.perf_counter()
            engine.lookup_knowledge(query, ctx, session_id=f"bench-{uuid.uuid4().hex}")
            return (time.perf_counter() - started) * 1e3

        for query in queries[: args.warmup]:
            lookup(query)
        warm = [lookup(q) for q in queries[args.warmup : args.warmup + args.lookups]]
        after: list[float] = []
        writes: list[float] = []
        for i, query in enumerate(queries[args.warmup + args.lookups :]):
            if child is None:
                writes.append(write(engine, ctx, args.write_kind, run, i))
            else:
                assert child.stdin is not None and child.stdout is not None
                child.stdin.write(f"{i}\n")
                child.stdin.flush()
                writes.append(float(child.stdout.readline()))
            after.append(lookup(query))
    finally:
        engine.close()
        if child is not None:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(60)
    print(f"home {args.home}, caller {ctx.account_id}/{ctx.user_space}, writes by {args.writer}")
    print(f"  lookup warm             {figures(warm)}")
    print(f"  lookup after a write    {figures(after)}")
    label = "add_memory" if args.write_kind == "memory" else "add_text (resource)"
    print(f"  {label:24s}{figures(writes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
