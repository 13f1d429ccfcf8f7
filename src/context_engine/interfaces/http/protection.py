"""Browser-facing protections of the HTTP server (issue 27; docs/security.md): the Host allow-list, the Origin check
and the security headers, as plain ASGI middleware in front of every route (the API, the console, the API pages,
``/metrics``, the probes and the MCP endpoint alike).

* **Host** (DNS rebinding): a page on ``attacker.example`` whose name is rebound to ``127.0.0.1`` reaches a loopback
  server from the victim's browser with ``Host: attacker.example``. Only these Host values are answered: the
  loopback names (``localhost``, ``127.0.0.0/8``, ``[::1]``, any port), the bind address (``http.host``, unless it
  is ``0.0.0.0`` or ``::``) and the patterns of ``http.allowed_hosts``. Anything else, a missing Host included,
  gets ``421`` ``API-4211`` before any route runs.
* **Origin** (a cross-site page posting to the server): a request whose ``Origin`` names a host outside the same
  list (``null`` included) gets ``403`` ``API-4031``. Clients that are not browsers send no Origin.
* ``http.allowed_hosts = ["*"]`` turns both checks off (a proxy in front checks Host and Origin).
* **Headers**: every response gets ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY`` and
  ``Referrer-Policy: no-referrer``; an HTML response gets a ``Content-Security-Policy``: the console's allows only
  the server's own script, style, fetches and forms (no inline script or style; ``data:`` images for the charts),
  the API pages' (Swagger UI, ReDoc: FastAPI's inline bootstrap script and ReDoc's generated styles) allows inline
  script and style but nothing from another origin.

Before this module the MCP SDK checked Host and Origin on ``/mcp`` alone, and only on a loopback bind.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.interfaces.http.auth import is_loopback_host
from context_engine.interfaces.http.errors import envelope_response
from context_engine.settings import HttpSettings

#: The console's policy (and that of any other HTML the server renders): its markup has no inline script, style or
#: event handler (tests/http/test_hardening.py checks the templates); its charts are ``data:`` SVG images.
CONSOLE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: The API pages (``/docs``, ``/redoc``): FastAPI writes Swagger UI's bootstrap as an inline script and ReDoc injects
#: its styles; the pages carry no caller data, and nothing loads from another origin.
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; font-src 'self'; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)
_ALWAYS = ((b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"), (b"referrer-policy", b"no-referrer"))
_DEFAULT_PORTS = {"http": 80, "https": 443}


def split_host(value: str) -> tuple[str, int | None] | None:
    """``(name, port)`` of a Host header value (``name[:port]`` or ``[v6][:port]``), the name in lower case without a
    trailing dot; ``None`` when it is not of that form."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        name, rest = value[: end + 1], value[end + 1 :]
        try:
            ipaddress.IPv6Address(name[1:-1])
        except ValueError:
            return None
    else:
        name, sep, port = value.partition(":")
        rest = sep + port
        if name.endswith(".") and not name.endswith(".."):
            name = name[:-1]
        labels = name.split(".")
        if not name or not all(label and all(c.isalnum() or c in "-_" for c in label) for label in labels):
            return None
        if not name.isascii():
            return None
    if not rest:
        return name, None
    if not rest.startswith(":") or not rest[1:].isdigit() or len(rest) > 6 or not 0 < int(rest[1:]) <= 65_535:
        return None
    return name, int(rest[1:])


@dataclass(frozen=True)
class HostAllowList:
    """The Host values a server answers (see the module docstring). Build it with :meth:`from_settings`."""

    patterns: tuple[str, ...]
    any_host: bool = False

    @classmethod
    def from_settings(cls, http: HttpSettings) -> HostAllowList:
        """Loopback names, the bind address (unless a wildcard) and ``http.allowed_hosts`` (already normalised)."""
        patterns = list(http.allowed_hosts)
        bind = http.host.strip().lower()
        try:
            address = ipaddress.ip_address(bind.strip("[]"))
        except ValueError:
            address = None
        if address is None or not address.is_unspecified:
            patterns.append(f"[{address}]" if address is not None and address.version == 6 else bind)
        return cls(tuple(patterns), any_host="*" in patterns)

    def allows(self, name: str, port: int | None) -> bool:
        """Whether the host ``name`` (as :func:`split_host` gives it) on ``port`` is one this server answers."""
        if self.any_host or is_loopback_host(name):
            return True
        return any(_matches(pattern, name, port) for pattern in self.patterns)

    def allows_host_header(self, value: str | None) -> bool:
        parsed = split_host(value) if value else None
        return parsed is not None and self.allows(*parsed)

    def allows_origin(self, origin: str) -> bool:
        """An ``Origin`` header: ``scheme://host[:port]`` with an allowed host (its scheme's port when none)."""
        if self.any_host:
            return True
        try:
            parts = urlsplit(origin.strip())
        except ValueError:
            return False
        if parts.scheme not in _DEFAULT_PORTS or parts.path or parts.query or parts.fragment:
            return False
        parsed = split_host(parts.netloc)
        if parsed is None:
            return False
        name, port = parsed
        return self.allows(name, port if port is not None else _DEFAULT_PORTS[parts.scheme])


def _matches(pattern: str, name: str, port: int | None) -> bool:
    parsed = split_host(pattern.removeprefix("*."))
    if parsed is None:
        return False
    pattern_name, pattern_port = parsed
    if pattern_port is not None and pattern_port != port:
        return False
    if pattern.startswith("*."):
        return name.endswith("." + pattern_name)
    return name == pattern_name


class HostGuardMiddleware:
    """Refuses requests whose Host (``421 API-4211``) or Origin (``403 API-4031``) is not allowed.

    Runs inside :class:`~.middleware.RequestMiddleware`, so a refusal has the request id and is logged and counted.

    Args:
        app: the wrapped ASGI app.
        hosts: what is allowed.
    """

    def __init__(self, app: ASGIApp, *, hosts: HostAllowList) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.hosts.any_host:
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        host, origin = headers.get("host"), headers.get("origin")
        err = None
        if not self.hosts.allows_host_header(host):
            shown = (host or "")[:255]
            err = ContextEngineError(
                ErrorCode.HOST_NOT_ALLOWED,
                f"this server does not answer for Host {shown!r}; if that name is this server, add it to "
                "http.allowed_hosts (CE_HTTP__ALLOWED_HOSTS)",
                {"host": shown},
            )
        elif origin is not None and not self.hosts.allows_origin(origin):
            shown = origin[:255]
            err = ContextEngineError(
                ErrorCode.ORIGIN_NOT_ALLOWED,
                f"requests from the origin {shown!r} are not accepted; if it is a page of this server, add its host "
                "to http.allowed_hosts (CE_HTTP__ALLOWED_HOSTS)",
                {"origin": shown},
            )
        if err is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            request_id = (scope.get("state") or {}).get("request_id")
            await envelope_response(err, request_id)(scope, receive, send)


class SecurityHeadersMiddleware:
    """Adds the security headers of the module docstring to every HTTP response (the outermost layer, so error
    answers of the other middleware get them too).

    Args:
        app: the wrapped ASGI app.
        docs_paths: paths of the API pages, which get :data:`DOCS_CSP` instead of :data:`CONSOLE_CSP`.
    """

    def __init__(self, app: ASGIApp, *, docs_paths: Iterable[str] = ()) -> None:
        self.app = app
        self.docs_paths = tuple(p for p in docs_paths if p)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        docs = any(path == p or path.startswith(p + "/") for p in self.docs_paths)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = list(message.get("headers", []))
                present = {k.lower() for k, _ in raw}
                raw += [(k, v) for k, v in _ALWAYS if k not in present]
                content_type = next((v for k, v in raw if k.lower() == b"content-type"), b"")
                if content_type.lower().startswith(b"text/html") and b"content-security-policy" not in present:
                    raw.append((b"content-security-policy", (DOCS_CSP if docs else CONSOLE_CSP).encode("ascii")))
                message = {**message, "headers": raw}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _headers(scope: Scope) -> dict[str, str]:
    """The request headers, names in lower case; a repeated Host makes the value unusable (refused)."""
    out: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        name = key.decode("latin-1").lower()
        if name == "host" and name in out:
            out[name] = ""
            continue
        out[name] = value.decode("latin-1")
    return out
