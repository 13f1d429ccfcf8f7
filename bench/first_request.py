"""First requests after ``/readyz`` (issue 26): seconds of the first and second ``lookup_knowledge`` and
``search_memory`` over HTTP once ``context-engine serve`` says it is ready (or over MCP stdio once ``context-engine
mcp``'s engine is ready: ``--transport stdio``), optionally against a baseline tree.

Each run, for each tree (interleaved with the baseline's runs, so a change in the machine's load hits both alike):

1. ``context-engine serve --port P`` on a free loopback port, over the tree's home, as a fresh process;
2. ``GET /readyz`` every 50 ms until it answers 200 (``ready`` or ``degraded``): ``ready`` is the seconds from the
   spawn to that answer;
3. the first ``POST /api/v1/lookup_knowledge`` and the first ``POST /api/v1/search_memory``, then a second of each
   (other queries): the seconds of each answer, measured at the client. Odd runs send the search first, even runs
   the lookup first, so that whatever the two share (the tokenizer, the vector index) is paid by each in turn: the
   ``max`` column is the worst first request;
4. the server is stopped (SIGINT) and waited for.

``--transport stdio`` does the same over MCP stdio: ``context-engine [--as A] mcp`` as a fresh process, the MCP
handshake (``initialize``, ``notifications/initialized``) as JSON lines on its stdin and stdout, then a wait for the
engine's ready log event on its stderr: ``warmed_up`` where the tree warms up over stdio (its
``interfaces/mcp/background.py`` logs it), else ``model_loaded``; ``ready`` is the seconds from the spawn to that
line. Then the same ``tools/call`` requests in the same order, timed at the client, and stdin is closed (the client
hangs up) and the exit waited for.

The homes (one per tree, built once under ``--work``): the sample corpus added to ``ctx://resources/runbooks/`` in
the ``default`` account and in a second account (``acme``), and ``--messages`` conversation messages of two users
added with ``add-messages`` (a multi-account home with memories). ``--home`` serves a copy of an existing home
instead (copied once under ``--work``, one copy per tree; e.g. the 10k-node home of ``bench/search_memory.py --sizes
10000 --build-only``), the requests made with a key created in the copy for ``--as`` (default: the anonymous
loopback admin of the ``default`` account; over stdio ``--as`` is passed to ``context-engine``, default
``default:admin``).

Usage::

    git archive HEAD src | tar -x -C /tmp/ce_base        # the tree to compare with
    python bench/first_request.py --baseline-src /tmp/ce_base/src --runs 5
    python bench/first_request.py --baseline-src /tmp/ce_base/src --runs 5 \
        --home bench/.cache/search_memory/store-10000 --as acme:admin
    python bench/first_request.py --baseline-src /tmp/ce_base/src --runs 5 --transport stdio

Prints a markdown table (min / median / max per tree, and the before/after ratio of the medians) and the load
average; never a test.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
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


def ask_in_turn(run: int, timed_call: Callable[[str, dict[str, Any]], float]) -> dict[str, float]:
    """The first, then the second ``lookup_knowledge`` and ``search_memory`` (odd runs search first): seconds each,
    as ``timed_call(name, arguments)`` measures them."""
    order = [("lookup_knowledge", LOOKUPS), ("search_memory", SEARCHES)]
    if run % 2:
        order.reverse()
    got: dict[str, float] = {}
    for nth in (0, 1):
        for name, queries in order:
            got[f"{('first', 'second')[nth]} {name}"] = timed_call(name, {"query": queries[nth], "top_k": 5})
    return got


def one_run(transport: str, src: Path, home: Path, run: int, auth: str | None) -> dict[str, float]:
    """One fresh server; ``auth``: the API key (HTTP) or the ``--as`` context (stdio)."""
    if transport == "stdio":
        return mcp_and_ask(src, home, run, auth)
    with tempfile.TemporaryFile() as log:
        return serve_and_ask(src, home, run, auth, log)


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
        got |= ask_in_turn(run, lambda name, body: timed(f"{base}/api/v1/{name}", body, headers))
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return got


def ready_event(src: Path) -> str:
    """The log event after which ``context-engine mcp``'s engine is ready: ``warmed_up`` once the tree warms up over
    stdio (issue 26), ``model_loaded`` before."""
    background = src / "context_engine" / "interfaces" / "mcp" / "background.py"
    return "warmed_up" if "warmed_up" in background.read_text() else "model_loaded"


class McpStdio:
    """``context-engine [--as A] mcp`` as a fresh process: JSON-RPC lines on its stdin and stdout; its stderr (JSON
    log lines) read on a thread, so that the pipe never fills, which sets ``ready`` at the ``event`` line (or at the
    end of stderr: the process exited)."""

    def __init__(self, src: Path, home: Path, as_: str | None, event: str) -> None:
        self.event = event
        self.log: list[str] = []
        self.ready = threading.Event()
        self.ids = itertools.count(1)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CLI, *(("--as", as_) if as_ else ()), "mcp"],
            env=env_for(src, home),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.pump = threading.Thread(target=self._pump_stderr, daemon=True)
        self.pump.start()

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            try:
                logged = json.loads(line)
            except ValueError:
                continue
            if isinstance(logged, dict) and logged.get("event") == self.event:
                self.ready.set()
        self.ready.set()

    def fail(self, what: str) -> SystemExit:
        return SystemExit(f"mcp: {what}; exit status {self.proc.poll()}; log:\n{''.join(self.log)[-3000:]}")

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and read lines until its answer (a JSON-RPC or tool error ends the bench)."""
        assert self.proc.stdout is not None
        rid = next(self.ids)
        self.send({"id": rid, "method": method, "params": params})
        while line := self.proc.stdout.readline():
            answer = json.loads(line)
            if answer.get("id") == rid:
                if "error" in answer or answer["result"].get("isError"):
                    raise self.fail(f"{method}: {line[:300]}")
                return dict(answer["result"])
        raise self.fail(f"no answer to {method}")

    def timed_call(self, name: str, arguments: dict[str, Any]) -> float:
        t = time.perf_counter()
        self.request("tools/call", {"name": name, "arguments": arguments})
        return time.perf_counter() - t

    def close(self) -> None:
        """Close stdin (the client hangs up) and wait for the exit."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.pump.join(timeout=10)


def mcp_and_ask(src: Path, home: Path, run: int, as_: str | None) -> dict[str, float]:
    """Spawn ``context-engine mcp``, do the MCP handshake, wait for the engine's ready log line, then the tool calls
    of :func:`ask_in_turn`; stdin closed at the end."""
    event = ready_event(src)
    start = time.perf_counter()
    mcp = McpStdio(src, home, as_, event)
    got: dict[str, float] = {}
    try:
        client = {"name": "first-request-bench", "version": "0"}
        mcp.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client})
        mcp.send({"method": "notifications/initialized"})
        if not mcp.ready.wait(timeout=900) or mcp.proc.poll() is not None:
            raise mcp.fail(f"no {event!r} log line")
        got["ready (spawn to engine ready)"] = time.perf_counter() - start
        got |= ask_in_turn(run, mcp.timed_call)
    finally:
        mcp.close()
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
    ap.add_argument("--transport", choices=("http", "stdio"), default="http", help="serve and HTTP, or MCP stdio")
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
            stdio = args.transport == "stdio"  # over stdio the context is --as itself: no key to create
            key = copy_home(src, args.home, homes[label], None if stdio else args.as_)
            keys[label] = args.as_ if stdio else key
            print(f"copied {args.home} to {homes[label]}", file=sys.stderr)
        else:
            secs = build_home(src, homes[label], args.corpus, args.messages)
            print(f"built {homes[label]} with the {label} tree in {secs:.1f} s", file=sys.stderr)
    results: dict[str, dict[str, list[float]]] = {label: {} for label in trees}
    for label, src in trees.items():  # untimed: bytecode and derived files written before the timed runs
        one_run(args.transport, src, homes[label], 0, keys[label])
    for run in range(args.runs):
        for label, src in trees.items():
            for name, secs in one_run(args.transport, src, homes[label], run, keys[label]).items():
                results[label].setdefault(name, []).append(secs)
        print(f"run {run + 1}/{args.runs} done (load {os.getloadavg()[0]:.2f})", file=sys.stderr)
    print_table(results, list(trees))
    transport = "HTTP"
    if args.transport == "stdio":
        transport = "MCP stdio, ready at " + ", ".join(f"{lb}: {ready_event(src)}" for lb, src in trees.items())
    print(
        f"\n{args.runs} server starts per tree ({transport}), interleaved (odd runs search first); load average "
        "(1/5/15 min) at the "
        f"start {' / '.join(f'{x:.2f}' for x in load_start)}, at the end "
        f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs; homes under {work}"
    )


if __name__ == "__main__":
    main()
