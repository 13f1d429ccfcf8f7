"""The main job on the bundled sample corpus (issue 15): one process per step and query vs one process for it all.

Each variant runs ``scripts/main_job.sh``'s steps on its own fresh home (the default model), each process timed
from spawn to exit:

* ``per query``: ``add``, ``tree``, then ``search QUERY --top-k 3`` once per line of
  ``scripts/main_job_queries.txt`` (one process each, as the main job did before ``--queries``), then ``lookup``;
* ``--queries``: the same, with every query in one ``search --queries FILE --top-k 3`` process;
* ``one process``: every step in one ``batch -`` process (the main job today).

The variants alternate over ``--runs`` rounds (so a change in the machine's load hits both alike); the table gives
the median seconds of the search part and of the whole job.

Usage::

    python bench/main_job.py --runs 2

Prints a markdown table; never a test.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "src" / "context_engine" / "sample_corpus"
QUERIES = ROOT / "scripts" / "main_job_queries.txt"
TARGET = "ctx://resources/sample/"
CLI = "import sys; sys.argv[0] = 'context-engine'; from context_engine.interfaces.cli.app import main; main()"
LOOKUP = ["lookup", "etcd 集群没有主节点，怎么处理", "--session", "main-job", "--top-k", "3", "--budget", "400"]


def run(home: Path, *args: str) -> float:
    """Seconds from spawn to exit of one ``context-engine`` process (it must succeed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CE_")}
    env.update(CE_HOME=str(home), PYTHONPATH=str(ROOT / "src"))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", CLI, *args], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def job(variant: str) -> tuple[float | None, float]:
    """``(search seconds, whole job seconds)`` of one main job on a fresh home (no search figure for ``batch``)."""
    queries = [q.strip() for q in QUERIES.read_text(encoding="utf-8").splitlines() if q.strip()]
    with tempfile.TemporaryDirectory(prefix="ce-main-job-") as tmp:
        home = Path(tmp) / "home"
        if variant == "one process":
            steps = Path(tmp) / "steps.txt"
            steps.write_text(
                "\n".join(
                    [
                        shlex.join(["add", str(SAMPLE), TARGET]),
                        "tree ctx://resources/ --depth 3",
                        shlex.join(["search", "--queries", str(QUERIES), "--top-k", "3"]),
                        shlex.join(LOOKUP),
                    ]
                ),
                encoding="utf-8",
            )
            return None, run(home, "batch", str(steps))
        total = run(home, "add", str(SAMPLE), TARGET) + run(home, "tree", "ctx://resources/", "--depth", "3")
        if variant == "--queries":
            search = run(home, "search", "--queries", str(QUERIES), "--top-k", "3")
        else:
            search = sum(run(home, "search", q, "--top-k", "3") for q in queries)
        total += search + run(home, *LOOKUP)
    return search, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="rounds of both variants")
    args = parser.parse_args()
    results: dict[str, list[tuple[float | None, float]]] = {"per query": [], "--queries": [], "one process": []}
    for _ in range(args.runs):
        for variant, rows in results.items():
            rows.append(job(variant))
    n = sum(1 for q in QUERIES.read_text(encoding="utf-8").splitlines() if q.strip())
    print(f"sample corpus, {n} queries, median of {args.runs} run(s), seconds\n")
    print("| variant | processes | search s | whole job s |")
    print("|---|---:|---:|---:|")
    processes = {"per query": n + 3, "--queries": 4, "one process": 1}
    for name, rows in results.items():
        searches = [r[0] for r in rows if r[0] is not None]
        search = f"{statistics.median(searches):.1f}" if searches else "-"
        print(f"| {name} | {processes[name]} | {search} | {statistics.median(r[1] for r in rows):.1f} |")
    per, one = (statistics.median(r[1] for r in results[k]) for k in ("per query", "one process"))
    print(f"\nwhole job: one process takes {one / per:.2f} of the per-query time")


if __name__ == "__main__":
    main()
