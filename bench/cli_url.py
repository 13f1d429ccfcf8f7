"""The CLI as a thin client (issue 29): wall time of whole ``context-engine`` processes, min / median / max.

Builds a small home (the sample corpus and an API key), starts ``context-engine serve`` on a free loopback port and
runs, each ``--runs`` times as fresh processes:

* ``search --url``: ``context-engine --url URL search QUERY`` (CE_API_KEY), the issue's target: median <= 0.5 s;
* ``read --url``: ``context-engine --url URL read URI --level L2``;
* ``search (home)``: ``context-engine --home HOME search QUERY``, the same command opening the home and the model;
* ``import``: ``python -c "import context_engine.interfaces.cli.app, context_engine.client"`` (what a --url command
  pays before its request).

Usage::

    python bench/cli_url.py --runs 9

Prints a markdown table; never a test (timings depend on the machine's load).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "from context_engine.interfaces.cli.app import main; main()"]
QUERY = "how do I handle a node that is not ready?"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd[3:])} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ce-cli-url-"))
    env = {**os.environ, "CE_HOME": str(home), "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
    corpus = ROOT / "src" / "context_engine" / "sample_corpus"
    subprocess.run([*CLI, "add", str(corpus), "ctx://resources/runbooks/"], env=env, check=True, capture_output=True)
    created = subprocess.run(
        [*CLI, "--json", "keys", "create", "default:admin", "--name", "bench"], env=env, check=True, capture_output=True
    )
    key = json.loads(created.stdout)["api_key"]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [*CLI, "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("serve did not become ready")
            time.sleep(0.25)
        remote = {**env, "CE_URL": url, "CE_API_KEY": key}
        remote.pop("CE_HOME")
        uri = "ctx://resources/runbooks/kubernetes/NodeNotReady.md"
        cases = {
            "search --url": ([*CLI, "search", QUERY, "--top-k", "3"], remote),
            "read --url": ([*CLI, "read", uri, "--level", "L2"], remote),
            "search (home)": ([*CLI, "search", QUERY, "--top-k", "3"], env),
            "import": ([sys.executable, "-c", "import context_engine.interfaces.cli.app, context_engine.client"], env),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.runs):  # interleaved: a change in the machine's load hits every case alike
            for name, (cmd, case_env) in cases.items():
                times[name].append(timed(cmd, case_env))
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"| command ({args.runs} runs) | min s | median s | max s |")
    print("|---|---:|---:|---:|")
    for name, values in times.items():
        print(f"| {name} | {min(values):.2f} | {statistics.median(values):.2f} | {max(values):.2f} |")
    print(f"\nload average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
