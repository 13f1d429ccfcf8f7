"""``context-engine serve`` as a user runs it, in a child process on a free loopback port (issue 15):

* ``--workers 2``: two uvicorn worker processes on one port and one home. Each opens the engine and loads the model
  before it accepts a connection (``/readyz`` names the answering process). A write through one worker is seen by
  searches and reads through both (the change log, docs/derived_indexes.md), and so is a delete.
* ``/docs`` (Swagger UI) and ``/redoc`` render offline: every asset they reference is served by the server itself
  (the fastapi-offline wheel's copies) and the pages name no external URL.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from tests.serve_process import ServeProcess

pytestmark = pytest.mark.slow

NEW_URI = "ctx://resources/notes/zeppelin-mooring.md"
NEW_TEXT = (
    "# Zeppelin mooring mast\n\nThe zeppelin is tied to the mooring mast by its nose cone before the crew "
    "unloads the gondola.\n"
)
QUERY = "how is a zeppelin tied to the mooring mast"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("serve-workers") / "home"
    with ServeProcess(home, "--workers", "2") as srv:
        yield srv


def one_client_per_worker(url: str, workers: int, attempts: int = 200) -> dict[int, httpx.Client]:
    """A keep-alive client per worker process: a client holds one connection, and a connection stays with the
    worker that accepted it, so every request of that client is answered by that worker (checked by its pid)."""
    clients: dict[int, httpx.Client] = {}
    for _ in range(attempts):
        client = httpx.Client(base_url=url, timeout=60, limits=httpx.Limits(max_connections=1))
        pid = client.get("/readyz").json()["pid"]
        if pid in clients:
            client.close()
        else:
            clients[pid] = client
        if len(clients) == workers:
            break
    return clients


def search_uris(client: httpx.Client, query: str) -> list[str]:
    resp = client.post("/api/v1/search_memory", json={"query": query, "top_k": 5})
    assert resp.status_code == 200, resp.text
    return [hit["uri"] for hit in resp.json()["hits"]]


def test_two_workers_each_ready_and_each_sees_the_writes_of_the_other(server):
    clients = one_client_per_worker(server.url, workers=2)
    try:
        assert len(clients) == 2, f"connections reached only the worker(s) {sorted(clients)}"
        (pid_a, a), (pid_b, b) = clients.items()
        for pid, client in clients.items():
            ready = client.get("/readyz").json()
            assert ready["status"] == "ready" and ready["pid"] == pid and ready["embedding_model"]
            assert NEW_URI not in search_uris(client, QUERY)

        resp = a.post("/api/v1/resources/text", json={"text": NEW_TEXT, "uri": NEW_URI})
        assert resp.status_code == 200, resp.text
        assert resp.json()["nodes"] == 1
        for _ in range(3):  # several searches through each worker, each one reflects the write
            for pid, client in clients.items():
                assert search_uris(client, QUERY)[0] == NEW_URI, f"worker {pid} misses the write"
                assert client.get("/readyz").json()["pid"] == pid  # still the same worker
        read = b.post("/api/v1/read_memory", json={"uri": NEW_URI, "level": "L2"})
        assert read.status_code == 200 and "nose cone" in read.text

        deleted = b.post("/api/v1/delete", json={"uri": NEW_URI})
        assert deleted.status_code == 200, deleted.text
        for pid, client in clients.items():
            assert NEW_URI not in search_uris(client, QUERY), f"worker {pid} still returns a deleted node"
            gone = client.post("/api/v1/read_memory", json={"uri": NEW_URI, "level": "L2"})
            assert gone.status_code == 403 and gone.json()["code"] == "RET-4032"
        assert {client.get("/readyz").json()["pid"] for client in (a, b)} == {pid_a, pid_b}
        # each worker configured logging like serve: its http_ready event is a JSON line
        ready_lines = [json.loads(x) for x in server.log_path.read_text().splitlines() if '"http_ready"' in x]
        assert len(ready_lines) == 2 and all(r["level"] == "info" for r in ready_lines)
    finally:
        for client in clients.values():
            client.close()


class _Refs(HTMLParser):
    """Every ``src``/``href`` attribute of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.refs += [value for name, value in attrs if name in {"src", "href", "spec-url"} and value]


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_api_pages_render_offline_from_assets_the_server_serves(server, page):
    resp = httpx.get(server.url + page, timeout=30)
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/html")
    html = resp.text
    assert not re.search(r"(https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}", html), "an external URL in the page"
    parser = _Refs()
    parser.feed(html)
    scripts = [r for r in parser.refs if r.endswith(".js")]
    assert scripts, f"{page} references no script"
    spec = re.findall(r"url: '([^']+)'", html) + [r for r in parser.refs if r.endswith(".json")]
    assert spec == ["/openapi.json"]
    for ref in {*parser.refs, *spec}:
        url = urljoin(server.url + page, ref)
        assert urlsplit(url).netloc == f"127.0.0.1:{server.port}", url
        asset = httpx.get(url, timeout=30)
        assert asset.status_code == 200, (ref, asset.status_code)
        assert len(asset.content) > 1000, ref  # a real bundle / stylesheet / icon / schema, not an empty page
