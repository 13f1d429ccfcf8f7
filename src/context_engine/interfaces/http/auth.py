"""Authentication: an API key (``Authorization: Bearer <key>``) maps to the RequestContext it was created for.

The RequestContext comes only from the key, never from the request body (DESIGN §1). Keys are stored hashed
(:mod:`context_engine.storage.metadata.keys`) and managed with ``context-engine keys create|list|revoke``.

Anonymous access (the embedded single-user default: account ``default_account``, role ``admin``) is possible only
when the server is bound to a loopback address *and* the client connects from one, and then only as
``http.anonymous_loopback`` allows: ``auto`` while no active key exists, ``always``, or ``never``. A request that
carries a key is always authenticated by it, anonymous mode or not. No key and no anonymous access -> ``401``
``AUTH-4011``; a malformed, unknown or revoked key -> the same ``401``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import anyio.to_thread
from starlette.requests import HTTPConnection

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.context import RequestContext
from context_engine.settings import HttpSettings
from context_engine.storage.metadata.keys import ApiKeyInfo
from context_engine.storage.protocols import KeyStore


def is_loopback_host(host: str | None) -> bool:
    """Whether ``host`` (an address or ``localhost``) is a loopback address (127.0.0.0/8, ::1)."""
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: its RequestContext, how it was authenticated and which key (if any)."""

    ctx: RequestContext
    auth: str  # "api_key" or "anonymous_loopback"
    key_id: str | None = None


class Authenticator:
    """Turns a connection's ``Authorization`` header into a :class:`Principal` (see the module docstring).

    Args:
        keys: the API-key store.
        settings: the ``http`` section (bind host and anonymous policy).
        anonymous: the RequestContext of anonymous loopback requests.
    """

    def __init__(self, keys: KeyStore, settings: HttpSettings, anonymous: RequestContext) -> None:
        self.keys = keys
        self.settings = settings
        self.anonymous = anonymous
        self.bind_loopback = is_loopback_host(settings.host)

    def anonymous_policy(self) -> str:
        """What start-up says about anonymous access: ``off``, ``on`` or ``on while no API key exists``."""
        if not self.bind_loopback or self.settings.anonymous_loopback == "never":
            return "off"
        return "on" if self.settings.anonymous_loopback == "always" else "on while no API key exists"

    async def anonymous_allowed(self, client_host: str | None) -> bool:
        if self.anonymous_policy() == "off" or not is_loopback_host(client_host):
            return False
        if self.settings.anonymous_loopback == "always":
            return True
        return await anyio.to_thread.run_sync(self.keys.active_count) == 0

    async def authenticate(self, conn: HTTPConnection) -> Principal:
        """The principal of this connection; also stored in ``scope["state"]`` for the access log.

        Raises:
            ContextEngineError: ``AUTH-4011`` (401) without a usable key where anonymous access is not allowed.
        """
        header = conn.headers.get("authorization")
        principal: Principal
        if header is not None:
            scheme, _, token = header.strip().partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise ContextEngineError(
                    ErrorCode.UNAUTHENTICATED, "the Authorization header must be 'Bearer <API key>'"
                )
            info: ApiKeyInfo | None = self.keys.cached(token.strip())
            if info is None:
                info = await anyio.to_thread.run_sync(self.keys.authenticate, token.strip())
            if info is None:
                raise ContextEngineError(ErrorCode.UNAUTHENTICATED, "invalid or revoked API key")
            principal = Principal(info.context, "api_key", info.key_id)
        elif await self.anonymous_allowed(conn.client.host if conn.client else None):
            principal = Principal(self.anonymous, "anonymous_loopback")
        else:
            raise ContextEngineError(
                ErrorCode.UNAUTHENTICATED,
                # worded so that the redaction patterns leave it whole ("API key: send ..." read as a credential)
                "no API key given; send the header 'Authorization: Bearer <key>' "
                "(create one with `context-engine keys create`)",
            )
        state = conn.scope.setdefault("state", {})
        state["ctx"], state["auth"], state["key_id"] = principal.ctx, principal.auth, principal.key_id
        return principal
