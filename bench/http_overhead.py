#!/usr/bin/env python
"""What the HTTP interface alone costs: the real app (middleware, API-key auth, validation, routing, thread pool,
JSON serialisation, uvicorn, the loopback socket) over an engine stub that answers at once with a real-sized response.

``bench/http_load.py`` measures the whole engine over HTTP; on a busy 2-core machine its engine time swamps the
interface's share. Here the engine takes ~0 ms, so the client's latency *is* what HTTP adds. The stub returns a
``search_memory`` response with 10 hits and a ``lookup_knowledge`` result with 5 evidence blocks (their JSON is as large
as real answers). Server: a uvicorn subprocess on 127.0.0.1; client: one keep-alive httpx client, concurrency 1.

    python bench/http_overhead.py [--requests 2000]

Never run as a test (STYLE.md).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import httpx

SERVER = textwrap.dedent(
    """
    import sys, uvicorn
    from datetime import datetime, UTC
    from context_engine.interfaces.http import create_app
    from context_engine.observability.logging import configure_logging
    from context_engine.observability.metrics import Metrics
    from context_engine.schema.context import RequestContext
    from context_engine.schema.hits import RetrievedBlock, SeedHit
    from context_engine.schema.knowledge import (ContextPack, EvidenceBlock, HintResult, LookupResult, LookupTraces,
                                                 RelevanceLevel)
    from context_engine.schema.query import NextActions, SearchMemoryResponse, SearchTrace, TypedQuery
    from context_engine.settings import load_settings
    from context_engine.storage.metadata.keys import ApiKeyStore
    from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore

    home, port = sys.argv[1], int(sys.argv[2])
    settings = load_settings(home)
    configure_logging(settings.logging)
    text = "Check the kubelet logs and the node conditions. " * 12
    seeds = [SeedHit(uri=f"ctx://resources/rb/doc{i}.md", score=0.5, category="rb", owner_space="shared",
                     abstract=text[:200], has_overview=True, has_content=True, match_reason="l0_vector")
             for i in range(10)]
    blocks = [RetrievedBlock(uri=s.uri, level_hit="L0", score=0.6, category="rb", owner_space="shared",
                             abstract=s.abstract, has_overview=True, has_content=True, read_recommendation="read_l1",
                             match_reason="l0_vector") for s in seeds]
    search = SearchMemoryResponse(request_id="x", typed_queries=[TypedQuery(text="q", context_type="resource")],
                                  seed_hits=seeds, hits=blocks, next_actions=NextActions(), trace=SearchTrace())
    ev = [EvidenceBlock(doc_id=f"ctx://resources/rb/doc{i}.md", title="Doc", breadcrumb="Doc > Diagnosis",
                        text=text * 2,
                        score=0.3, raw_score=0.7, rank_score=0.7, relevance_level=RelevanceLevel.HIGHLY_RELEVANT,
                        anchor_chunk_index=0, chunk_indexes=[0], matched_chunk_indexes=[0]) for i in range(5)]
    lookup = LookupResult(invocation_id="i", session_id=None, evidence_blocks=ev,
                          context_pack=ContextPack(text=text * 10, budget_tokens=2000),
                          traces=LookupTraces(request_id="x", mode="auto"), hints=HintResult(),
                          evidence_status="found")

    class Embedder:
        model_name, dim = "stub", 384
        def warm_up(self): pass

    class Index:
        name = "stub"

    class Stub:
        def __init__(self):
            self.settings, self.metrics, self.embedder, self.index = settings, Metrics(), Embedder(), Index()
            self.metadata = SqlMetadataStore.sqlite(settings.home_path / "metadata.db")
        def search_memory(self, req, ctx): return search
        def lookup_knowledge(self, req, ctx): return lookup

    stub = Stub()
    _, token = ApiKeyStore(stub.metadata).create(RequestContext(account_id="default", role="admin"), "bench")
    print(token, flush=True)
    uvicorn.run(create_app(settings, service=stub), host="127.0.0.1", port=port, log_config=None, access_log=False)
    """
)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        script = Path(tmp) / "stub_server.py"
        script.write_text(SERVER, encoding="utf-8")
        proc = subprocess.Popen(
            [sys.executable, str(script), str(Path(tmp) / "home"), str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            token = proc.stdout.readline().strip()  # type: ignore[union-attr]
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
                if time.monotonic() > deadline:
                    raise RuntimeError("stub server did not start")
            print(f"{args.requests} requests per row, concurrency 1, engine stubbed (~0 ms)")
            print(f"{'endpoint':<18} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}  response bytes")
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
                for name, path, body in (
                    ("search_memory", "/api/v1/search_memory", {"query": "node not ready", "top_k": 10}),
                    ("lookup_knowledge", "/api/v1/lookup_knowledge", {"query": "node not ready"}),
                ):
                    for _ in range(200):
                        client.post(path, json=body)
                    lat = []
                    t0 = time.perf_counter()
                    for _ in range(args.requests):
                        st = time.perf_counter()
                        r = client.post(path, json=body)
                        lat.append((time.perf_counter() - st) * 1000)
                        assert r.status_code == 200, r.text
                    wall = time.perf_counter() - t0
                    print(
                        f"{name:<18} {args.requests / wall:>8.1f} {pct(lat, 50):>8.2f} {pct(lat, 95):>8.2f} "
                        f"{pct(lat, 99):>8.2f}  {len(r.content)}"
                    )
                    print(
                        json.dumps(
                            {
                                "endpoint": name,
                                "p50_ms": pct(lat, 50),
                                "p95_ms": pct(lat, 95),
                                "mean_ms": statistics.mean(lat),
                            }
                        ),
                        file=sys.stderr,
                    )
        finally:
            proc.terminate()
            proc.wait(timeout=20)


if __name__ == "__main__":
    main()
