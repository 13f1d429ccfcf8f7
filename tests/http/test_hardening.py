"""Hardening from an attack pass (issue 27): the Host allow-list on every route (DNS rebinding), the Origin check,
and the security headers of HTML (and JSON) responses. The constant-time key check is tested in
tests/security/test_key_verification.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from context_engine.interfaces.http import create_app
from context_engine.service import ContextEngineService
from context_engine.settings import HttpSettings, load_settings
from tests.http.helpers import LOOPBACK_URL

LOOPBACK = LOOPBACK_URL
CONSOLE = Path(__file__).resolve().parents[2] / "src" / "context_engine" / "interfaces" / "http" / "console"
MCP_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def keyless(tmp_path_factory, embedder):
    """A keyless engine on a loopback bind: anonymous loopback access is on (the DNS-rebinding target)."""
    svc = ContextEngineService(load_settings(tmp_path_factory.mktemp("keyless-home")), embedder=embedder)
    with TestClient(create_app(service=svc), base_url=LOOPBACK, client=("127.0.0.1", 40001)) as c:
        yield c
    svc.close()


def _app_with(service, **http):
    """The same engine behind an app whose ``http`` section has ``http`` changed."""
    settings = service.settings.model_copy(update={"http": service.settings.http.model_copy(update=http)})
    return create_app(settings, service=service)


# ---- 1. Host allow-list (DNS rebinding) ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/api/v1/search_memory", {"query": "x"}),
        ("POST", "/api/v1/memories", {"text": "planted by a rebinding page"}),
        ("GET", "/api/v1/ls", None),
        ("GET", "/console/fragments/whoami", None),
        ("GET", "/console/browse", None),
        ("GET", "/docs", None),
        ("GET", "/openapi.json", None),
        ("GET", "/healthz", None),
        ("GET", "/metrics", None),
    ],
)
def test_keyless_loopback_refuses_a_foreign_host_on_every_route(keyless, method, path, body):
    headers = {"Host": "attacker.example"}
    r = keyless.request(method, path, json=body, headers=headers)
    assert r.status_code == 421, (path, r.status_code, r.text[:200])
    assert r.json()["code"] == "API-4211"
    assert "attacker.example" in r.json()["message"] and r.json()["request_id"]
    assert r.headers["x-content-type-options"] == "nosniff"


def test_a_rebinding_write_stores_nothing(keyless):
    r = keyless.post("/api/v1/memories", json={"text": "rebinding canary 7f3a"}, headers={"Host": "evil.test:8420"})
    assert r.status_code == 421
    listed = keyless.get("/api/v1/memories").json()
    assert "rebinding canary 7f3a" not in str(listed)


def test_mcp_refuses_a_foreign_host_with_the_envelope(keyless):
    r = keyless.post("/mcp", json=MCP_INIT, headers={**MCP_HEADERS, "Host": "attacker.example:8420"})
    assert r.status_code == 421 and r.json()["code"] == "API-4211"
    ok = keyless.post("/mcp", json=MCP_INIT, headers=MCP_HEADERS)
    assert ok.status_code == 200, ok.text


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:9", "localhost", "LOCALHOST:8420", "[::1]", "[::1]:8420"])
def test_loopback_names_with_any_port_are_allowed(keyless, host):
    r = keyless.post("/api/v1/search_memory", json={"query": "x"}, headers={"Host": host})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("host", ["", "localhost.attacker.example", "127.0.0.1.nip.io", "[::1", "a b"])
def test_lookalike_and_malformed_hosts_are_refused(keyless, host):
    r = keyless.get("/healthz", headers={"Host": host})
    assert r.status_code == 421 and r.json()["code"] == "API-4211"


def test_keyed_mode_checks_the_host_too(service, tenants):
    with TestClient(_app_with(service), base_url=LOOPBACK, client=("10.1.2.3", 1)) as c:
        assert c.get("/api/v1/ls", headers=tenants.admin).status_code == 200
        r = c.get("/api/v1/ls", headers={**tenants.admin, "Host": "attacker.example"})
        assert r.status_code == 421 and r.json()["code"] == "API-4211"


def test_configured_hosts_are_allowed(service, tenants):
    app = _app_with(service, host="0.0.0.0", allowed_hosts=("ce.example.com", "*.corp.example", "api.example:9443"))
    with TestClient(app, base_url="http://ce.example.com", client=("10.1.2.3", 1)) as c:
        def status(host: str) -> int:
            return c.get("/api/v1/ls", headers={**tenants.admin, "Host": host}).status_code

        assert status("ce.example.com") == 200
        assert status("CE.example.com:8420") == 200  # any port when the entry names none
        assert status("ce.example.com.") == 200  # the absolute form of the same name
        assert status("search.corp.example") == 200 and status("a.b.corp.example:80") == 200
        assert status("corp.example") == 421  # "*." matches below the domain only
        assert status("api.example:9443") == 200 and status("api.example:9444") == 421
        assert status("127.0.0.1:8420") == 200  # loopback names stay allowed on a public bind
        assert status("other.example") == 421


def test_a_concrete_bind_address_is_allowed(service, tenants):
    with TestClient(_app_with(service, host="10.0.0.5"), base_url="http://10.0.0.5:8420", client=("10.0.0.9", 1)) as c:
        assert c.get("/api/v1/ls", headers=tenants.admin).status_code == 200
        assert c.get("/api/v1/ls", headers={**tenants.admin, "Host": "10.0.0.6:8420"}).status_code == 421


def test_star_turns_the_host_check_off(service, tenants):
    with TestClient(_app_with(service, allowed_hosts=("*",)), base_url="http://anything.example") as c:
        assert c.get("/api/v1/ls", headers=tenants.admin).status_code == 200


@pytest.mark.parametrize(
    "entry", ["", "http://ce.example.com", "ce.example.com/path", "*ce.example.com", "a b", "x:99999", "x:0", "a..b"]
)
def test_malformed_allowed_hosts_are_refused_at_start(entry):
    with pytest.raises(ValidationError):
        HttpSettings(allowed_hosts=(entry,))


def test_allowed_hosts_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("CE_HTTP__ALLOWED_HOSTS", '["CE.Example.com", "*.corp.example"]')
    assert load_settings(tmp_path / "home").http.allowed_hosts == ("ce.example.com", "*.corp.example")


# ---- Origin (a cross-site page posting to the loopback server) -------------------------------------------------------
def test_a_foreign_origin_is_refused(keyless):
    r = keyless.post("/api/v1/memories", json={"text": "csrf"}, headers={"Origin": "https://attacker.example"})
    assert r.status_code == 403 and r.json()["code"] == "API-4031"
    r = keyless.post("/mcp", json=MCP_INIT, headers={**MCP_HEADERS, "Origin": "null"})
    assert r.status_code == 403 and r.json()["code"] == "API-4031"


def test_a_loopback_origin_is_allowed(keyless):
    for origin in ("http://127.0.0.1:8420", "http://localhost:6274"):
        r = keyless.post("/api/v1/search_memory", json={"query": "x"}, headers={"Origin": origin})
        assert r.status_code == 200, (origin, r.text)


# ---- 2. Security headers -------------------------------------------------------------------------------------------
def _csp(response) -> dict[str, str]:
    policy = response.headers["content-security-policy"]
    return {d.split()[0]: " ".join(d.split()[1:]) for d in (p.strip() for p in policy.split(";")) if d}


@pytest.mark.parametrize(
    "path",
    ["/console/browse", "/console/login", "/console/search", "/console/fragments/whoami", "/console/fragments/roots"],
)
def test_console_html_has_a_strict_policy(keyless, path):
    r = keyless.get(path)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), r.text[:200]
    csp = _csp(r)
    assert csp["default-src"] == "'self'"
    assert csp["script-src"] == "'self'" and csp["style-src"] == "'self'"  # no inline script or style
    assert csp["frame-ancestors"] == "'none'" and csp["object-src"] == "'none'" and csp["base-uri"] == "'none'"
    assert csp["form-action"] == "'self'"
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"


def test_api_docs_pages_have_a_policy(keyless):
    for path in ("/docs", "/redoc"):
        r = keyless.get(path)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        csp = _csp(r)
        assert csp["default-src"] == "'self'" and csp["frame-ancestors"] == "'none'" and csp["object-src"] == "'none'"
        assert r.headers["x-frame-options"] == "DENY" and r.headers["referrer-policy"] == "no-referrer"


def test_json_and_errors_are_nosniff(keyless):
    for r in (keyless.post("/api/v1/search_memory", json={"query": "x"}), keyless.get("/no/such/route")):
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"


def test_console_markup_needs_no_inline_script_or_style():
    """The console policy allows no inline script or style: the templates and the script must not rely on any."""
    inline = re.compile(
        r"<script(?![^>]*\bsrc=)[^>]*>|<style\b|\sstyle=|\son[a-z]+=|javascript:", re.IGNORECASE
    )
    found = []
    for path in sorted((CONSOLE / "templates").rglob("*.html")):
        found += [f"{path.name}: {m.group(0)}" for m in inline.finditer(path.read_text(encoding="utf-8"))]
    js = (CONSOLE / "static" / "console.js").read_text(encoding="utf-8")
    found += [f"console.js: {m}" for m in re.findall(r"\beval\(|new Function\(|setAttribute\(\"style\"|\.cssText", js)]
    assert found == []


def test_serve_workers_get_the_allowed_hosts(monkeypatch, tmp_path):
    """``serve --allow-host`` reaches the worker processes of ``serve --workers N`` through their environment."""
    from context_engine.interfaces.cli.server_commands import settings_environment

    settings = load_settings(tmp_path / "home", http={"allowed_hosts": ("ce.example.com", "*.corp.example")})
    for name, value in settings_environment(settings, {"allowed_hosts": settings.http.allowed_hosts}).items():
        monkeypatch.setenv(name, value)
    assert load_settings().http.allowed_hosts == ("ce.example.com", "*.corp.example")
