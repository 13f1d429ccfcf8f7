"""First requests after ``/readyz`` (issue 26): seconds of the first and second ``lookup_knowledge`` and
``search_memory`` over HTTP once ``context-engine serve`` says it is ready, optionally against a baseline tree.

Each run, for each tree (interleaved with the baseline's runs, so a change in the machine's load hits both alike):

1. ``context-engine serve --port P`` on a free loopback port, over the tree's home, as a fresh process;
2. ``GET /readyz`` every 50 ms until it answers 200 (``ready`` or ``degraded``): ``ready`` is the seconds from the
   spawn to that answer;
3. the first ``POST /api/v1/lookup_knowledge`` and the first ``POST /api/v1/search_memory``, then a second of each
   (other queries): the seconds of each answer, measured at the client. Odd runs send the search first, even runs
   the lookup first, so that whatever the two share (the tokenizer, the vector index) is paid by each in turn: the
   ``max`` column is the worst first request;
4. the server is stopped (SIGINT) and waited for.

The homes (one per tree, built once under ``--work``): the sample corpus added to ``ctx://resources/runbooks/`` in
the ``default`` account and in a second account (``acme``), and ``--messages`` conversation messages of two users
added with ``add-messages`` (a multi-account home with memories). ``--home`` serves a copy of an existing home
instead (copied once under ``--work``, one copy per tree; e.g. the 10k-node home of ``bench/search_memory.py --sizes
10000 --build-only``), the requests made with a key created in the copy for ``--as`` (default: the anonymous
loopback admin of the ``default`` account).

Usage::

    git archive HEAD src | tar -x -C /tmp/ce_base        # the tree to compare with
    python bench/first_request.py --baseline-src /tmp/ce_base/src --runs 5
    python bench/first_request.py --baseline-src /tmp/ce_base/src --runs 5 \
        --home bench/.cache/search_memory/store-10000 --as acme:admin

Prints a markdown table (min / median / max per tree, and the before/after ratio of the medians) and the load
average; never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; sys.argv[0] = 'context-engine'; from context_engine.interfaces.cli.app import main; main()"
LOOKUPS = ("etcd cluster has no leader", "node disk almost full")
SEARCHES = ("which database does Alice prefer", "when is the team offsite")
MESSAGES = [
    ("user", "alice", "I moved the payments database to PostgreSQL 16 last week."),
    ("assistant", "bot", "Noted: payments runs on PostgreSQL 16 now."),
    ("user", "alice", "The team offsite is in Lisbon on 12 May."),
    ("assistant", "bot", "I will remind you about the Lisbon offsite."),
    ("user", "bob", "Our etcd cluster lost quorum twice this month."),
    ("assistant", "bot", "Two etcd quorum losses this month: worth a postmortem."),
]


def env_for(src: Path, home: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CE_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(src)
    if home is not None:
        env["CE_HOME"] = str(home)
    return env


def cli(src: Path, home: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-c", CLI, *args],
        env=env_for(src, home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=True,
        timeout=900,
    )


def build_home(src: Path, home: Path, corpus: Path, messages: int) -> float:
    """The sample corpus in two accounts and ``messages`` messages of two users (alice, bob) in ``default``."""
    t = time.perf_counter()
    shutil.rmtree(home, ignore_errors=True)
    cli(src, home, "add", str(corpus), "ctx://resources/runbooks/")
    cli(src, home, "--as", "acme:admin", "add", str(corpus), "ctx://resources/runbooks/")
    for user in ("alice", "bob"):
        lines = []
        for i in range(messages // 2):
            role, speaker, text = MESSAGES[i % len(MESSAGES)]
            lines.append(json.dumps({"role": role, "speaker": speaker, "content": f"{text} (#{i})"}))
        jsonl = home.parent / f"{home.name}-{user}.jsonl"
        jsonl.write_text("\n".join(lines) + "\n")
        as_user = ("--as", f"default:user:{user}:agent-{user}", "add-messages", str(jsonl))
        try:
            cli(src, home, *as_user, "--conversation", "s1")
        except subprocess.CalledProcessError as err:  # a tree from before the option's rename
            if b"--conversation" not in err.stderr:
                raise
            cli(src, home, *as_user, "--session", "s1")
    return time.perf_counter() - t


def copy_home(src: Path, home: Path, copy: Path, as_: str | None) -> str | None:
    """Copy ``home`` to ``copy`` (once) and create an API key for ``as_`` there; returns the key."""
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(home, copy)
    if as_ is None:
        return None
    out = subprocess.run(
        [sys.executable, "-c", CLI, "--json", "keys", "create", as_],
        env=env_for(src, copy),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    return str(json.loads(out)["api_key"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def call(url: str, body: dict | None, headers: dict[str, str], timeout: float = 600) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def timed(url: str, body: dict, headers: dict[str, str]) -> float:
    t = time.perf_counter()
    status, payload = call(url, body, headers)
    took = time.perf_counter() - t
    if status != 200:
        raise SystemExit(f"{url}: HTTP {status}: {payload[:300]!r}")
    return took


def one_run(src: Path, home: Path, run: int, api_key: str | None) -> dict[str, float]:
    with tempfile.TemporaryFile() as log:
        return serve_and_ask(src, home, run, api_key, log)


def serve_and_ask(src: Path, home: Path, run: int, api_key: str | None, log: Any) -> dict[str, float]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "serve", "--port", str(port)],
        env=env_for(src, home),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    got: dict[str, float] = {}
    try:
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise SystemExit(f"serve exited with {proc.returncode}:\n{log.read().decode()[-3000:]}")
            try:
                status, _ = call(f"{base}/readyz", None, {}, timeout=600)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                status = 0
            if status == 200:
                break
            time.sleep(0.05)
        got["ready (spawn to /readyz 200)"] = time.perf_counter() - start
        lookup = (f"{base}/api/v1/lookup_knowledge", "lookup_knowledge", LOOKUPS)
        search = (f"{base}/api/v1/search_memory", "search_memory", SEARCHES)
        order = (search, lookup) if run % 2 else (lookup, search)
        for nth in (0, 1):
            for url, name, queries in order:
                body = {"query": queries[nth], "top_k": 5}
                got[f"{('first', 'second')[nth]} {name}"] = timed(url, body, headers)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return got


def print_table(results: dict[str, dict[str, list[float]]], labels: list[str]) -> None:
    head = "| seconds | " + " | ".join(f"{lb} min / median / max" for lb in labels)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="server starts per tree")
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="the tree to measure (default: this checkout)")
    ap.add_argument("--baseline-src", type=Path, help="a tree to compare with, e.g. HEAD via git archive")
    ap.add_argument("--corpus", type=Path, default=ROOT / "src" / "context_engine" / "sample_corpus")
    ap.add_argument("--messages", type=int, default=40, help="conversation messages in the built homes")
    ap.add_argument("--work", type=Path, help="where the homes go (default: a temporary directory)")
    ap.add_argument("--home", type=Path, help="serve a copy of this existing home instead of building homes")
    ap.add_argument("--as", dest="as_", help="with --home: the context of the requests (account:role:user:agent)")
    args = ap.parse_args()

    load_start = os.getloadavg()
    trees = {"after": args.src.resolve()}
    if args.baseline_src:
        trees = {"before": args.baseline_src.resolve(), **trees}
    work = args.work or Path(tempfile.mkdtemp(prefix="ce-first-"))
    homes = {label: work / f"home-{label}" for label in trees}
    keys: dict[str, str | None] = {label: None for label in trees}
    for label, src in trees.items():
        if args.home is not None:
            keys[label] = copy_home(src, args.home, homes[label], args.as_)
            print(f"copied {args.home} to {homes[label]}", file=sys.stderr)
        else:
            secs = build_home(src, homes[label], args.corpus, args.messages)
            print(f"built {homes[label]} with the {label} tree in {secs:.1f} s", file=sys.stderr)
    results: dict[str, dict[str, list[float]]] = {label: {} for label in trees}
    for label, src in trees.items():  # untimed: bytecode and derived files written before the timed runs
        one_run(src, homes[label], 0, keys[label])
    for run in range(args.runs):
        for label, src in trees.items():
            for name, secs in one_run(src, homes[label], run, keys[label]).items():
                results[label].setdefault(name, []).append(secs)
        print(f"run {run + 1}/{args.runs} done (load {os.getloadavg()[0]:.2f})", file=sys.stderr)
    print_table(results, list(trees))
    print(
        f"\n{args.runs} server starts per tree, interleaved (odd runs search first); load average (1/5/15 min) at the "
        f"start {' / '.join(f'{x:.2f}' for x in load_start)}, at the end "
        f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs; homes under {work}"
    )


if __name__ == "__main__":
    main()
