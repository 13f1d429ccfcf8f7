"""Cold start (issue 12): wall time of whole-process runs, min / median / max, optionally against a baseline tree.

What it runs, each ``--runs`` times, as fresh processes (interleaved with the baseline's runs, so a change in the
machine's load hits both alike):

* ``help``: ``context-engine --help``;
* ``import``: ``python -c "import context_engine.interfaces.cli.app"`` (what every command pays before it runs);
* ``typer floor``: ``python -c "import typer, typer.rich_utils"``, what any typer CLI with rich help pays (the same
  for both trees: the bound under ``help``);
* ``search``: ``context-engine search QUERY`` on a small home (built once per tree with ``add`` of the sample
  corpus);
* with ``--home HOME``, ``search (home)``: ``context-engine --home HOME --as CTX search QUERY`` on an existing home,
  e.g. the 10k-node home of ``bench/search_memory.py --sizes 10000 --build-only`` (issue 12's target: < 1.5 s). One
  untimed run per tree first, so a tree that keeps derived files and a model copy in the home (``<home>/derived``,
  ``<home>/models``) is measured with them present; with ``--cold-files`` also ``search (home, no files)``: the same
  command after removing both folders (what the first search of a new home pays, files written included);
* ``mcp initialize`` / ``mcp tools/list`` / ``mcp first call``: ``context-engine mcp`` over stdio, seconds from the
  spawn to each answer (the first call is ``search_memory`` on the same home);
* with ``--stages``, one process per run that times the stages of a search in-process: importing the CLI and the
  service, opening the service (stores, vector index, hint index), loading the model, the first and second query.

Usage::

    git archive HEAD src | tar -x -C /tmp/ce_base        # the tree to compare with (read-only for git)
    python bench/cold_start.py --baseline-src /tmp/ce_base/src --stages
    python bench/cold_start.py --baseline-src /tmp/ce_base/src --runs 7 \
        --home bench/.cache/search_memory/store-10000 --as acme:admin --query "payments database latency"

The trees are put first on ``PYTHONPATH``; the interpreter is this one. Prints a markdown table; never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; sys.argv[0] = 'context-engine'; from context_engine.interfaces.cli.app import main; main()"
QUERY = "node disk almost full"

STAGES = r"""
import json, sys, time
t0 = time.perf_counter(); marks = {}
def mark(name):
    marks[name] = time.perf_counter()
import context_engine.interfaces.cli.app
mark("import cli")
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
mark("import service")
svc = ContextEngineService(load_settings())
mark("open service")
svc.embedder.warm_up()
mark("load model")
from context_engine.schema.context import DEFAULT_CONTEXT
from context_engine.schema.query import SearchMemoryRequest
svc.search_memory(SearchMemoryRequest(query=sys.argv[1]), DEFAULT_CONTEXT)
mark("first query")
svc.search_memory(SearchMemoryRequest(query=sys.argv[2]), DEFAULT_CONTEXT)
mark("second query")
svc.close()
prev, out = t0, {}
for name, t in marks.items():
    out[name] = t - prev
    prev = t
out["total"] = prev - t0
print(json.dumps(out))
"""


def env_for(src: Path, home: Path | None = None) -> dict[str, str]:
    # Bytecode caches are written and used, as in an installed package (a shell with PYTHONDONTWRITEBYTECODE=1 would
    # otherwise make every run compile ~75 modules of the tree: 0.15-0.3 s of pure measurement artefact).
    env = {k: v for k, v in os.environ.items() if not k.startswith("CE_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(src)
    if home is not None:
        env["CE_HOME"] = str(home)
    return env


def wall(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=600)
    return time.perf_counter() - t


def home_search(src: Path, home: Path, as_: str, query: str) -> float:
    """Wall seconds of one ``context-engine --home HOME --as CTX search QUERY`` process."""
    return wall([sys.executable, "-c", CLI, "--home", str(home), "--as", as_, "search", query], env_for(src))


def drop_files(home: Path) -> None:
    """Remove what a tree keeps beside the store (derived-index files, the model's ready-to-map copy)."""
    for name in ("derived", "models"):
        shutil.rmtree(home / name, ignore_errors=True)


def build_home(src: Path, home: Path, corpus: Path) -> float:
    shutil.rmtree(home, ignore_errors=True)
    cmd = [sys.executable, "-c", CLI, "add", str(corpus), "ctx://resources/runbooks/"]
    return wall(cmd, env_for(src, home))


def mcp_probe(src: Path, home: Path) -> dict[str, float]:
    """Seconds from the spawn of ``context-engine mcp`` to its initialize, tools/list and first tool-call answers."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env_for(src, home),
        text=True,
    )
    answers: queue.Queue[dict] = queue.Queue()
    threading.Thread(target=lambda: [answers.put(json.loads(line)) for line in proc.stdout], daemon=True).start()
    assert proc.stdin is not None

    def ask(request_id: int, method: str, params: dict | None = None) -> float:
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        while answers.get(timeout=600).get("id") != request_id:
            pass
        return time.perf_counter() - start

    try:
        init = ask(
            1,
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
        )
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        listed = ask(2, "tools/list")
        called = ask(3, "tools/call", {"name": "search_memory", "arguments": {"query": QUERY, "top_k": 3}})
    finally:
        proc.stdin.close()
        proc.wait(timeout=600)
    return {"mcp initialize": init, "mcp tools/list": listed, "mcp first call": called}


def stages(src: Path, home: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", STAGES, QUERY, "etcd has no leader"],
        env=env_for(src, home),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    return {f"stage: {k}": v for k, v in json.loads(out.strip().splitlines()[-1]).items()}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="whole-process runs per measurement (>= 5 for the table)")
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="the tree to measure (default: this checkout)")
    ap.add_argument("--baseline-src", type=Path, help="a tree to compare with, e.g. HEAD via git archive")
    ap.add_argument("--corpus", type=Path, default=ROOT / "src" / "context_engine" / "sample_corpus")
    ap.add_argument("--work", type=Path, help="where the homes go (default: a temporary directory)")
    ap.add_argument("--skip-search", action="store_true", help="only help and import (no home, no model)")
    ap.add_argument("--skip-mcp", action="store_true")
    ap.add_argument("--stages", action="store_true", help="also time the stages of a search in-process")
    ap.add_argument("--home", type=Path, help="an existing home to time `search (home)` on (e.g. the 10k bench home)")
    ap.add_argument("--as", dest="as_", default="acme:admin", help="--as of `search (home)`")
    ap.add_argument("--query", default="payments database latency", help="the query of `search (home)`")
    ap.add_argument(
        "--cold-files",
        action="store_true",
        help="also time `search (home)` after removing <home>/derived and <home>/models (the home is changed)",
    )
    return ap


def _measure_tree(args: argparse.Namespace, src: Path, home: Path, got: dict[str, list[float]]) -> None:
    """One run of every measurement of one tree, appended to ``got``."""
    got.setdefault("help", []).append(wall([sys.executable, "-c", CLI, "--help"], env_for(src)))
    got.setdefault("import", []).append(
        wall([sys.executable, "-c", "import context_engine.interfaces.cli.app"], env_for(src))
    )
    got.setdefault("typer floor", []).append(
        wall([sys.executable, "-c", "import typer, typer.rich_utils"], env_for(src))
    )
    if args.home is not None:
        got.setdefault("search (home)", []).append(home_search(src, args.home, args.as_, args.query))
    if args.skip_search:
        return
    got.setdefault("search", []).append(wall([sys.executable, "-c", CLI, "search", QUERY], env_for(src, home)))
    if not args.skip_mcp:
        for k, v in mcp_probe(src, home).items():
            got.setdefault(k, []).append(v)
    if args.stages:
        for k, v in stages(src, home).items():
            got.setdefault(k, []).append(v)


def _print_table(results: dict[str, dict[str, list[float]]], labels: list[str]) -> None:
    """min / median / max per measurement and tree, and the before/after ratio of the medians for two trees."""
    head = "| measurement (s) | " + " | ".join(f"{lb} min / median / max" for lb in labels)
    head += " | median before/after |" if len(labels) == 2 else " |"
    print(head)
    print("|---" * (len(labels) + 1 + (len(labels) == 2)) + "|")
    for name in results[labels[-1]]:
        cells = []
        for lb in labels:
            xs = results[lb].get(name, [])
            cells.append(f"{min(xs):.3f} / {statistics.median(xs):.3f} / {max(xs):.3f}" if xs else "-")
        row = f"| {name} | " + " | ".join(cells)
        if len(labels) == 2:
            before, after = results[labels[0]].get(name), results[labels[1]].get(name)
            row += f" | {statistics.median(before) / statistics.median(after):.2f}x" if before and after else " | -"
        print(row + " |")


def _warm_up(args: argparse.Namespace, trees: dict[str, Path]) -> None:
    """Untimed runs first, so that no tree pays for what the other wrote."""
    for src in trees.values():  # bytecode caches written for both trees
        wall([sys.executable, "-c", CLI, "--help"], env_for(src))
    if args.home is not None:
        for src in trees.values():  # whatever a tree keeps beside the store is there before the timed runs
            home_search(src, args.home, args.as_, args.query)


def main() -> None:
    args = _parser().parse_args()

    load_start = os.getloadavg()
    trees = {"after": args.src.resolve()}
    if args.baseline_src:
        trees = {"before": args.baseline_src.resolve(), **trees}
    work = args.work or Path(tempfile.mkdtemp(prefix="ce-cold-"))
    homes = {label: work / f"home-{label}" for label in trees}
    if not args.skip_search:
        for label, src in trees.items():
            seconds = build_home(src, homes[label], args.corpus)
            print(f"built {homes[label]} from {args.corpus} with the {label} tree in {seconds:.1f} s", file=sys.stderr)

    _warm_up(args, trees)

    results: dict[str, dict[str, list[float]]] = {label: {} for label in trees}
    for run in range(args.runs):
        for label, src in trees.items():
            _measure_tree(args, src, homes[label], results[label])
        if args.home is not None and args.cold_files:  # after every tree's `search (home)`: the last run writes them
            for label, src in trees.items():
                drop_files(args.home)
                results[label].setdefault("search (home, no files)", []).append(
                    home_search(src, args.home, args.as_, args.query)
                )
        print(f"run {run + 1}/{args.runs} done", file=sys.stderr)

    _print_table(results, list(trees))
    print(
        f"\n{args.runs} runs each, interleaved; load average (1/5/15 min) at the start "
        f"{' / '.join(f'{x:.2f}' for x in load_start)}, at the end {' / '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"homes under {work}"
    )


if __name__ == "__main__":
    main()
