"""Bad input over the real server (issue 14): invalid Unicode in every string field that the published OpenAPI
schema lists, a Content-Length that does not match the body, and the envelope of every such error.

The walk reads the app's own schema, so a route or field added later is covered without editing this test.
"""

from __future__ import annotations

import json
import socket
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from context_engine.interfaces.http import create_app
from tests.http.helpers import LiveServer

SURROGATE = "\ud800"  # a lone surrogate: JSON can carry it (as the escape \ud800), UTF-8 cannot
BAD_QUERY_BYTES = "%ED%A0%80"  # U+D800 encoded as if it were UTF-8: not valid UTF-8
WRITE_TAGS = {"write", "memories"}
SAMPLE_VALUES = {
    "query": "disk pressure on a node",
    "uri": "ctx://resources/kubernetes/",
    "target_uri": "ctx://resources/",
    "path": "ops",
    "src": "ctx://resources/kubernetes/",
    "dst": "ctx://resources/k8s/",
    "text": "# Note\n\nA short note.",
    "content": "A short note.",
    "name": "restart-pod",
    "description": "Restart a pod",
    "session_id": "s-1",
    "conversation_id": "c-1",
    "invocation_id": "0" * 32,
    "excerpt": "disk",
    "category": "preference",
}


@pytest.fixture(scope="module")
def live(service, tenants):
    # short body timeouts, so the Content-Length tests wait seconds, not the defaults (10 s idle, 60 s whole body)
    http = service.settings.http.model_copy(update={"body_idle_timeout_s": 1.0, "body_timeout_s": 3.0})
    with LiveServer(create_app(service.settings.model_copy(update={"http": http}), service=service)) as server:
        yield server


@pytest.fixture(scope="module")
def spec(live):
    return httpx.get(f"{live.url}/openapi.json", timeout=30).json()


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = spec["components"]["schemas"][name]
    return schema


def _variants(spec: dict[str, Any], schema: dict[str, Any]) -> list[dict[str, Any]]:
    schema = _resolve(spec, schema)
    alts = schema.get("anyOf") or schema.get("oneOf")
    if alts:
        return [v for a in alts for v in _variants(spec, a) if v.get("type") != "null"]
    kinds = schema.get("type")
    if isinstance(kinds, list):  # {"type": ["string", "null"]}: a nullable field of the MCP tools' lean schemas
        return [{**schema, "type": k} for k in kinds if k != "null"]
    return [schema]


def _sample(spec: dict[str, Any], schema: dict[str, Any], name: str = "") -> Any:
    """A valid-looking value for ``schema`` (required fields only for objects)."""
    s = _variants(spec, schema)[0]
    if "enum" in s:
        return s["enum"][0]
    if "const" in s:
        return s["const"]
    kind = s.get("type")
    if kind == "string":
        return SAMPLE_VALUES.get(name, "x")
    if kind in ("integer", "number"):
        return s.get("minimum", 1) if s.get("minimum", 1) > 0 else 1
    if kind == "boolean":
        return False
    if kind == "array":
        return [_sample(spec, s.get("items", {}), name)]
    if kind == "object" or "properties" in s:
        props = s.get("properties", {})
        return {k: _sample(spec, props[k], k) for k in s.get("required", [])}
    return "x"


def _string_paths(spec: dict[str, Any], schema: dict[str, Any], path: tuple = (), depth: int = 0) -> list[tuple]:
    """Every path to a string in ``schema`` (optional fields too); free-form objects get a value and a key path."""
    if depth > 6:
        return []
    out: list[tuple] = []
    for s in _variants(spec, schema):
        kind = s.get("type")
        if kind == "string" and path not in out:
            out.append(path)
        elif kind == "array":
            out += [p for p in _string_paths(spec, s.get("items", {}), (*path, 0), depth + 1) if p not in out]
        elif kind == "object" or "properties" in s:
            props = s.get("properties", {})
            for k, sub in props.items():
                out += [p for p in _string_paths(spec, sub, (*path, k), depth + 1) if p not in out]
            if not props or s.get("additionalProperties") not in (None, False):
                out += [p for p in ((*path, "k"), (*path, ("key",))) if p not in out]
    return out


def _with_surrogate(spec: dict[str, Any], schema: dict[str, Any], path: tuple) -> Any:
    """A valid body with the string at ``path`` replaced by a lone surrogate (``("key",)`` as the last element:
    a surrogate in an object key)."""
    body = _sample(spec, schema)
    node, s = body, _variants(spec, schema)[0]
    for i, step in enumerate(path):
        last = i == len(path) - 1
        if isinstance(step, tuple):  # a surrogate object key
            node["k" + SURROGATE] = "v"
            return body
        if last:
            node[step] = SURROGATE
            return body
        child = s["items"] if isinstance(step, int) else s.get("properties", {}).get(step, {})
        sub = _variants(spec, child)
        if isinstance(step, int):
            if not node:
                node.append(_sample(spec, child))
        elif step not in node or not isinstance(node[step], dict | list):
            node[step] = _sample(spec, child, str(step))
            if isinstance(node[step], str):  # e.g. Timestamp = str | int | float: a string leaf after all
                node[step] = SURROGATE
                return body
        node, s = node[step], sub[0]
        if isinstance(node, list) and not node:
            node.append(_sample(spec, s.get("items", {})))
    return body


def _cases(spec: dict[str, Any]) -> list[tuple[str, str, str, Any, str]]:
    """(method, path, where, payload, expected code) for every string input of every operation."""
    cases = []
    for route, ops in spec["paths"].items():
        for method, op in ops.items():
            code = "WRT-4221" if WRITE_TAGS & set(op.get("tags", [])) else "RET-4001"
            for p in op.get("parameters", []):
                if p["in"] == "query" and any(v.get("type") == "string" for v in _variants(spec, p["schema"])):
                    cases.append((method, route, f"query {p['name']}", {p["name"]: None}, code))
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                for path in _string_paths(spec, body["schema"]):
                    payload = _with_surrogate(spec, body["schema"], path)
                    cases.append((method, route, "body " + ".".join(map(str, path)), payload, code))
    return cases


def _status(code: str) -> int:
    """The HTTP status of an error code: its three digits after the dash (WRT-4221 -> 422, RET-4001 -> 400)."""
    return int(code.split("-")[1][:3])


def _node_uris(service) -> list[str]:
    return sorted(n.uri for acc in service.metadata.accounts() for n in service.metadata.list_all_nodes(acc))


def test_invalid_unicode_in_every_string_field_is_a_400_with_a_code(live, spec, service, tenants):
    cases = _cases(spec)
    fields = {(m, r, w) for m, r, w, _, _ in cases}
    assert len(fields) >= 31, f"the walk found only {len(fields)} string inputs"
    before = _node_uris(service)
    failures = []
    with httpx.Client(base_url=live.url, headers=tenants.admin, timeout=60) as http:
        for method, route, where, payload, code in cases:
            if where.startswith("query"):
                name = next(iter(payload))
                resp = http.request(method, f"{route}?{quote(name)}={BAD_QUERY_BYTES}")
            else:
                raw = json.dumps(payload)  # ensure_ascii: the surrogate goes as the escape \ud800
                assert "\\ud800" in raw
                resp = http.request(method, route, content=raw, headers={"Content-Type": "application/json"})
            body = resp.json()
            ok = (
                resp.status_code == _status(code)
                and body.get("code") == code
                and set(body) == {"code", "message", "details", "request_id"}
                and body["request_id"] == resp.headers.get("x-request-id")
                and body["details"].get("reason") == "invalid_unicode"
            )
            if not ok:
                failures.append((method, route, where, resp.status_code, body.get("code")))
    assert failures == []
    assert _node_uris(service) == before  # no write happened


def test_the_error_names_the_field(live, tenants):
    body = {"conversation_id": "s", "messages": [{"content": "fine"}, {"content": "bad " + SURROGATE}]}
    resp = httpx.post(
        f"{live.url}/api/v1/memories/messages",
        content=json.dumps(body),
        headers={**tenants.admin, "Content-Type": "application/json"},
        timeout=30,
    )
    assert resp.status_code == 422
    assert resp.json()["code"] == "WRT-4221"
    assert resp.json()["details"]["loc"] == ["body", "messages", "1", "content"]


@pytest.mark.parametrize(
    ("route", "code"), [("/api/v1/search_memory", "RET-4001"), ("/api/v1/resources/text", "WRT-4221")]
)
def test_raw_bytes_that_are_not_utf8_in_a_json_body(live, tenants, route, code):
    raw = b'{"query": "disk \xff", "text": "x \xff", "uri": "ctx://resources/x.md"}'
    resp = httpx.post(
        f"{live.url}{route}", content=raw, headers={**tenants.admin, "Content-Type": "application/json"}, timeout=30
    )
    assert resp.status_code == _status(code)
    assert resp.json()["code"] == code


def test_valid_non_ascii_text_still_passes(live, tenants):
    resp = httpx.post(
        f"{live.url}/api/v1/search_memory",
        json={"query": "磁盘 pressure ✓ 😀", "top_k": 2},
        headers=tenants.admin,
        timeout=60,
    )
    assert resp.status_code == 200, resp.text
    resp = httpx.get(f"{live.url}/api/v1/ls", params={"uri": "ctx://resources/é/"}, headers=tenants.admin, timeout=30)
    assert resp.status_code == 403  # a valid but missing URI: the ordinary not-visible answer, not invalid Unicode
    assert resp.json()["code"] == "RET-4032"


# ---- Content-Length that does not match the body ------------------------------------------------------------------
def _raw_exchange(live, request: bytes, timeout_s: float = 10.0, *, until_close: bool = False) -> bytes:
    """Send ``request`` on a fresh socket and read one complete response (or, ``until_close``, everything until the
    server closes); fail when ``timeout_s`` passes without that."""
    with socket.create_connection(("127.0.0.1", live.port), timeout=timeout_s) as sock:
        sock.sendall(request)
        chunks = []
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                chunks.append(data)
                if not until_close and _complete(b"".join(chunks)):
                    break
        except TimeoutError:
            pytest.fail(f"the server sent no complete answer within {timeout_s} s: {b''.join(chunks)[:200]!r}")
    return b"".join(chunks)


def _complete(response: bytes) -> bool:
    head, _, body = response.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return False


def _status_and_body(response: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


def _post(tenants, body: bytes, declared: int) -> bytes:
    auth = tenants.admin["Authorization"].encode()
    return (
        b"POST /api/v1/search_memory HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + b"Authorization: "
        + auth
        + b"\r\nContent-Length: "
        + str(declared).encode()
        + b"\r\n\r\n"
        + body
    )


def test_content_length_over_the_body_is_a_400_without_hanging(live, tenants):
    body = b'{"query": "disk pressure"}'
    status, envelope = _status_and_body(_raw_exchange(live, _post(tenants, body, len(body) + 50)))
    assert status == 400
    assert envelope["code"] == "RET-4001"
    assert set(envelope) == {"code", "message", "details", "request_id"}


def test_a_body_trickled_in_is_cut_off_at_the_whole_body_deadline(live, tenants):
    """Slowloris: one byte every 0.4 s never trips the 1 s idle timeout, but the body is not complete 3 s after it
    started (``http.body_timeout_s``): 400 and a close, long before the ~50 s the trickle would take."""
    body = b'{"query": "disk pressure"}' + b" " * 100
    head = _post(tenants, b"", len(body))
    with socket.create_connection(("127.0.0.1", live.port), timeout=10) as sock:
        sock.sendall(head)
        answer = b""
        for i in range(len(body)):
            try:
                sock.sendall(body[i : i + 1])
            except OSError:  # the server closed: it has answered
                break
            sock.settimeout(0.4)
            try:
                answer += sock.recv(65536)
            except TimeoutError:
                continue
            if answer:
                break
        sock.settimeout(10)
        while not _complete(answer):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    status, envelope = _status_and_body(answer)  # without the deadline the body would complete: a 200
    assert status == 400 and envelope["code"] == "RET-4001"
    assert "not complete within 3 s" in envelope["message"]


def test_content_length_under_the_body_is_a_400_and_a_close(live, tenants):
    """The first Content-Length bytes are the request (here cut inside the JSON: its 400 envelope, when the server
    gets to answer it); the rest cannot be a next request, so the HTTP server answers 400 and closes."""
    body = b'{"query": "disk pressure"}'
    response = _raw_exchange(live, _post(tenants, body, len(body) - 5), until_close=True)
    statuses = [int(line.split(b" ", 2)[1]) for line in response.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]
    assert statuses and set(statuses) == {400}
    if b'"code"' in response:
        envelope = json.loads(
            response[response.index(b"{") : response.index(b"}", response.index(b'"request_id"')) + 1]
        )
        assert envelope["code"] == "RET-4001"


def test_folder_with_links_leading_outside_is_added_and_the_links_skipped(
    live, service, tenants, upload_root, tmp_path
):
    """Trial finding: a folder below the allowed roots that holds links out of it (``hosts.md -> a file outside``,
    ``etclink -> a directory outside``) is added; the links are skipped and reported, as by the CLI. A path that
    itself is a link leading outside the roots stays refused."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "hosts.md").write_text("# Hosts\n\n127.0.0.1 secret-host-entry\n", encoding="utf-8")
    folder = upload_root / "linked-folder"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\n\nA document inside the allowed root.\n", encoding="utf-8")
    (folder / "hosts.md").symlink_to(outside / "hosts.md")
    (folder / "etclink").symlink_to(outside, target_is_directory=True)
    (upload_root / "outlink").symlink_to(outside, target_is_directory=True)

    r = httpx.post(
        f"{live.url}/api/v1/resources",
        json={"path": str(folder), "target_uri": "ctx://resources/http-linked/"},
        headers=tenants.admin,
        timeout=120,
    )
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["uris"] == ["ctx://resources/http-linked/notes.md"]
    reasons = {s["path"]: s["reason"] for s in report["skipped_paths"]}
    assert set(reasons) == {"hosts.md", "etclink"}
    assert "file outside the folder" in reasons["hosts.md"]
    assert "directory outside the folder" in reasons["etclink"]
    assert report["skipped"] == 2
    stored = sorted(n.uri for n in service.metadata.list_all_nodes("acme") if "/http-linked/" in n.uri)
    assert stored == ["ctx://resources/http-linked/", "ctx://resources/http-linked/notes.md"]

    for path in (str(upload_root / "outlink"), str(folder / "hosts.md")):
        refused = httpx.post(
            f"{live.url}/api/v1/resources",
            json={"path": path, "target_uri": "ctx://resources/x/"},
            headers=tenants.admin,
        )
        assert refused.status_code == 404, refused.text
        assert refused.json()["code"] == "WRT-4041"
