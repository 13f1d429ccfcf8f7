#!/usr/bin/env python
"""HTTP load benchmark: ``context-engine serve`` on loopback vs the same calls in process (interfaces issue, Speed).

Data: the 380 English runbooks (prometheus-operator + openshift) under ``ctx://resources/runbooks/`` and a synthetic
memory tree of ``--memories`` nodes (default 10,000) under ``ctx://user/bench/memories/<category>/<topic>/``, in
account ``default``, built once in ``--home`` (kept between runs).

Measures, for ``search_memory`` and ``lookup_knowledge`` (unique session per call, so nothing is deduped):

* concurrency 1, paired: the same request alternately in process (the service methods called directly) and over
  HTTP (a real ``context-engine serve`` subprocess on 127.0.0.1, with an API key, a keep-alive client), one at a
  time, after a warm-up of both. Pairing makes both series see the same background load, so their difference is
  the cost of the interface even on a shared machine;
* concurrency 8 and 32 (``--concurrency``): over HTTP only, an asyncio client (httpx), ``--requests`` per level.

Prints requests/s, p50 and p95 per endpoint and concurrency, and the HTTP overhead at concurrency 1 (target <= 5 ms
on p95) two ways: the difference of the paired series' p95, and per request the client's latency minus the engine
time the server reports in ``Server-Timing`` (routing, auth, validation, JSON, the socket and the client). The
client shares the machine with the server (2 cores here), so figures at concurrency 8 and 32 are bounded by CPU, not
by the interface. Never run as a test (STYLE.md).

    python bench/http_load.py [--home /tmp/ce-http-bench] [--requests 200] [--concurrency 1,8,32] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
RUNBOOKS = REPO.parent / "shared" / "data" / "runbooks"
CORPORA = ("prometheus-operator", "openshift")
MARKER = "http-bench-ready.json"

CATEGORIES = ("preference", "profile", "event", "project", "contact", "habit", "tooling", "incident")
TOPICS = (
    "kubernetes",
    "databases",
    "networking",
    "storage",
    "security",
    "frontend",
    "billing",
    "oncall",
    "travel",
    "reading",
    "music",
    "food",
    "fitness",
    "hiring",
    "release",
    "design",
    "docs",
    "testing",
    "observability",
    "cost",
    "vendors",
    "meetings",
    "mentoring",
    "budget",
    "roadmap",
)
SUBJECTS = ("I", "My team", "The on-call engineer", "Our manager", "The customer", "My colleague Lee")
VERBS = (
    "prefers",
    "dislikes",
    "always uses",
    "asked about",
    "decided to adopt",
    "reported trouble with",
    "wants a summary of",
    "keeps notes on",
    "reviewed",
    "postponed",
)
OBJECTS = (
    "blue-green deployments",
    "PostgreSQL read replicas",
    "short status updates",
    "Grafana dashboards",
    "weekly retrospectives",
    "TLS certificate rotation",
    "spot instances",
    "feature flags",
    "structured logging",
    "the quarterly budget",
    "Terraform modules",
    "pair programming",
    "incident timelines",
    "dark mode",
    "Chinese documentation",
    "canary releases",
    "SLO burn alerts",
)
MEMORY_QUERIES = (
    "what do I prefer for deployments",
    "my preferences about dashboards",
    "who am I and what is my background",
    "remember what the customer reported",
    "my habits for status updates",
    "what did the team decide about releases",
    "preference for logging style",
    "recall the incident timeline notes",
    "what tooling do I use",
    "我的偏好是什么",
    "回顾一下我关于预算的记忆",
    "my background in databases",
)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


# ---- data ----------------------------------------------------------------------------------------------------------
def prepare(home: Path, memories: int) -> None:
    """Ingest the runbooks and the memory tree once; an API key is written next to the data."""
    from context_engine.ingest.loader import SourceDoc, content_hash
    from context_engine.schema.context import RequestContext
    from context_engine.schema.uri import ContextURI
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings
    from context_engine.storage.metadata.keys import ApiKeyStore

    if (home / MARKER).is_file():
        return
    admin = RequestContext(account_id="default", role="admin")
    t0 = time.perf_counter()
    with ContextEngineService(load_settings(home)) as svc:
        for corpus in CORPORA:
            rep = svc.add_resource(RUNBOOKS / corpus, f"ctx://resources/runbooks/{corpus}/", admin)
            print(f"runbooks/{corpus}: {rep.nodes} nodes, {rep.chunks} chunks", file=sys.stderr)
        rng = random.Random(7)
        docs = []
        for i in range(memories):
            cat, topic = CATEGORIES[i % len(CATEGORIES)], TOPICS[(i // len(CATEGORIES)) % len(TOPICS)]
            text = (
                f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} in the {topic} work "
                f"(note {i}). {rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}."
            )
            uri = ContextURI.parse(f"ctx://user/bench/memories/{cat}/{topic}/note-{i:05d}.md")
            docs.append(SourceDoc(uri, text, "plain", "bench", content_hash(text, "plain"), f"note-{i:05d}"))
        for start in range(0, len(docs), 1000):
            svc.pipeline.write_documents("default", docs[start : start + 1000])
            print(f"memories: {min(start + 1000, len(docs))}/{len(docs)}", file=sys.stderr)
        _, token = ApiKeyStore(svc.metadata).create(admin, "http-bench")
    (home / MARKER).write_text(json.dumps({"api_key": token, "memories": memories}), encoding="utf-8")
    print(f"prepared in {time.perf_counter() - t0:.0f} s", file=sys.stderr)


def queries() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Request bodies: search_memory (memory questions, and runbook questions as documentation lookups) and
    lookup_knowledge (the runbook alert summaries)."""
    rows = [json.loads(line) for line in (RUNBOOKS / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    alerts = [r["text"] for r in rows][:104]
    search = [{"query": q, "top_k": 10} for q in MEMORY_QUERIES] + [
        {"query": f"runbook doc: {a}", "top_k": 10} for a in alerts[:40]
    ]
    lookup = [{"query": a} for a in alerts]
    return search, lookup


# ---- concurrency 1, paired: in process vs HTTP ------------------------------------------------------------------
def stats(lat: list[float], wall: float) -> dict[str, float]:
    return {"rps": len(lat) / wall, "p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95), "mean_ms": statistics.mean(lat)}


def paired(home: Path, url: str, key: str, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Alternate in-process and HTTP calls of the same requests; returns ``(in_process, http)`` figures."""
    from context_engine.schema.context import RequestContext
    from context_engine.schema.knowledge import LookupRequest
    from context_engine.schema.query import SearchMemoryRequest
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings

    ctx = RequestContext(account_id="default", role="admin")
    search, lookup = queries()
    local: dict[str, Any] = {}
    remote: dict[str, Any] = {}
    with (
        ContextEngineService(load_settings(home)) as svc,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as client,
    ):
        svc.embedder.warm_up()

        engine_ms: list[float] = []

        def http(path: str, body: dict[str, Any]) -> None:
            r = client.post(path, json=body)
            if r.status_code != 200:
                raise RuntimeError(f"{path}: {r.status_code} {r.text[:200]}")
            timing = dict(
                part.strip().split(";dur=") for part in r.headers.get("server-timing", "").split(",") if ";dur=" in part
            )
            engine_ms.append(float(timing["engine"]))

        def lookup_body(i: int) -> dict[str, Any]:
            return {**lookup[i % len(lookup)], "session_id": f"b-{uuid.uuid4().hex}"}

        calls = {
            "search_memory": (
                lambda i: svc.search_memory(SearchMemoryRequest(**search[i % len(search)]), ctx),
                lambda i: http("/api/v1/search_memory", search[i % len(search)]),
            ),
            "lookup_knowledge": (
                lambda i: svc.lookup_knowledge(LookupRequest(**lookup_body(i)), ctx),
                lambda i: http("/api/v1/lookup_knowledge", lookup_body(i)),
            ),
        }
        for name, (inproc, over_http) in calls.items():
            for i in range(50):  # warm-up of both: caches, the in-memory L0 matrix, connections
                inproc(i)
                over_http(i)
            time.sleep(2)  # let background loads (the L0 matrix) finish before timing
            lat_local: list[float] = []
            lat_http: list[float] = []
            engine_ms.clear()
            wall_local = wall_http = 0.0
            for i in range(n):
                for fn, lat in ((inproc, lat_local), (over_http, lat_http)):
                    s = time.perf_counter()
                    fn(i)
                    elapsed = time.perf_counter() - s
                    lat.append(elapsed * 1000)
                    if lat is lat_local:
                        wall_local += elapsed
                    else:
                        wall_http += elapsed
            local[name] = stats(lat_local, wall_local)
            remote[name] = stats(lat_http, wall_http)
            # per request: what the client waited minus what the engine took inside the server (Server-Timing)
            added = [c - e for c, e in zip(lat_http, engine_ms, strict=True)]
            remote[name]["added_p50_ms"], remote[name]["added_p95_ms"] = pct(added, 50), pct(added, 95)
            remote[name]["added_max_ms"] = max(added)
    return local, remote


# ---- over HTTP -------------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def drive(
    url: str, key: str, path: str, bodies: list[dict[str, Any]], n: int, conc: int, session_ids: bool
) -> dict[str, float]:
    limits = httpx.Limits(max_connections=conc, max_keepalive_connections=conc)
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {key}"}, limits=limits, timeout=120
    ) as client:

        async def one(i: int) -> float:
            body = dict(bodies[i % len(bodies)])
            if session_ids:
                body["session_id"] = f"b-{uuid.uuid4().hex}"
            s = time.perf_counter()
            r = await client.post(path, json=body)
            elapsed = (time.perf_counter() - s) * 1000
            if r.status_code != 200:
                raise RuntimeError(f"{path}: {r.status_code} {r.text[:200]}")
            return elapsed

        for i in range(min(20, n)):  # warm-up: connections, thread pool
            await one(i)
        counter = iter(range(n))
        lat: list[float] = []

        async def worker() -> None:
            for i in counter:
                lat.append(await one(i))

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(conc)))
        wall = time.perf_counter() - t0
    return {"rps": n / wall, "p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95), "mean_ms": statistics.mean(lat)}


def over_http(home: Path, key: str, n: int, levels: list[int], log: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Start ``serve``; the paired concurrency-1 figures, then HTTP at the other levels: ``(in_process, http)``."""
    port = free_port()
    exe = Path(sys.executable).with_name("context-engine")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with log.open("w") as err:
        proc = subprocess.Popen(
            [str(exe), "--home", str(home), "serve", "--port", str(port)], stdout=err, stderr=err, env=env
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve did not become ready; see {log}")
            time.sleep(0.5)
        search, lookup = queries()
        local, at_one = paired(home, url, key, n)
        out: dict[str, dict[int, dict[str, float]]] = {"search_memory": {}, "lookup_knowledge": {}}
        for conc in levels:
            if conc == 1:
                out["search_memory"][1] = at_one["search_memory"]
                out["lookup_knowledge"][1] = at_one["lookup_knowledge"]
                continue
            out["search_memory"][conc] = asyncio.run(drive(url, key, "/api/v1/search_memory", search, n, conc, False))
            out["lookup_knowledge"][conc] = asyncio.run(
                drive(url, key, "/api/v1/lookup_knowledge", lookup, n, conc, True)
            )
        return local, out
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=Path("/tmp/ce-http-bench"))
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=200, help="Measured requests per endpoint and level.")
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--json", type=Path, default=None, help="Also write the figures as JSON here.")
    args = ap.parse_args()
    args.home.mkdir(parents=True, exist_ok=True)
    prepare(args.home, args.memories)
    key = json.loads((args.home / MARKER).read_text(encoding="utf-8"))["api_key"]
    levels = [int(x) for x in args.concurrency.split(",")]

    local, remote = over_http(args.home, key, args.requests, levels, args.home / "serve.log")

    print(
        f"\n{args.requests} requests per row; data: 380 runbooks + {args.memories} memory nodes; {os.cpu_count()} CPUs"
    )
    print(f"{'endpoint':<18} {'where':<12} {'conc':>4} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8}  (c=1: paired)")
    for name in ("search_memory", "lookup_knowledge"):
        r = local[name]
        print(f"{name:<18} {'in-process':<12} {1:>4} {r['rps']:>8.1f} {r['p50_ms']:>8.2f} {r['p95_ms']:>8.2f}")
        for conc, r in remote[name].items():
            print(f"{name:<18} {'http':<12} {conc:>4} {r['rps']:>8.1f} {r['p50_ms']:>8.2f} {r['p95_ms']:>8.2f}")
    print("\nHTTP overhead at concurrency 1 (target: <= 5 ms added to p95):")
    for name in ("search_memory", "lookup_knowledge"):
        if 1 in remote[name]:
            r1 = remote[name][1]
            d95 = r1["p95_ms"] - local[name]["p95_ms"]
            d50 = r1["p50_ms"] - local[name]["p50_ms"]
            print(
                f"  {name:<18} paired series: p95 {d95:+.2f} ms, p50 {d50:+.2f} ms | per request (client - engine "
                f"Server-Timing): p50 {r1['added_p50_ms']:.2f} ms, p95 {r1['added_p95_ms']:.2f} ms, "
                f"max {r1['added_max_ms']:.2f} ms"
            )
    if args.json:
        args.json.write_text(json.dumps({"in_process": local, "http": remote}, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
