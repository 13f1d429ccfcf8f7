"""API keys in the metadata database (DESIGN.md §3, §10): stored hashed, each bound to one RequestContext.

A key is shown once, at creation: ``ce_<key_id>_<secret>``, where ``key_id`` is 16 hex characters (public: it names
the key in ``keys list`` and in logs) and ``secret`` is 32 random bytes, URL-safe base64. Only the SHA-256 of the
whole token is stored. A slow password hash (bcrypt, argon2) would add latency to every request without adding
security: the secret has 256 bits of entropy, so the stored hash cannot be brute-forced. Verification does the same
work for every token of the right form: one SHA-256, one database statement that finds a row only for the right id
and secret, and one constant-time comparison (against a dummy digest when no row matched), so an unknown key id
answers like a known one with a wrong secret.

The ``api_keys`` table hangs off the same declarative base as :mod:`.sqlalchemy_store` (portable SQL: SQLite
embedded, PostgreSQL by URL) and lives in its database, created and upgraded with the rest of the schema
(:mod:`.migrate`); this store works through the metadata store's sessions (one connection pool per database).

:meth:`ApiKeyStore.authenticate` keeps verified keys in memory for ``cache_ttl_s`` seconds so a request costs no
database read; a revocation in this process takes effect at once, one made by another process (the CLI) within
``cache_ttl_s``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict
from sqlalchemy import func, insert, select, update

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.context import RequestContext, Role
from context_engine.storage.metadata.engine import SqlDatabase
from context_engine.storage.metadata.tables import API_KEYS
from context_engine.storage.metadata.tables import ApiKeyRow as ApiKeyRow  # re-exported: the table's mapped class

TOKEN_PREFIX = "ce_"
_TOKEN_RE = re.compile(r"^ce_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
_LAST_USED_EVERY = timedelta(seconds=60)  # write last_used_at at most this often per key (no write per request)


_TABLE = API_KEYS


class ApiKeyInfo(BaseModel):
    """What ``keys list`` shows of a key: never the secret nor its hash."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key_id: str
    name: str
    account_id: str
    role: Role
    user_space: str | None = None
    agent_space: str | None = None
    created_at: datetime
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    @property
    def context(self) -> RequestContext:
        """The RequestContext every request made with this key acts as."""
        return RequestContext(
            account_id=self.account_id, role=self.role, user_space=self.user_space, agent_space=self.agent_space
        )

    @property
    def display(self) -> str:
        """The token's public part, e.g. ``ce_0123456789abcdef_…``."""
        return f"{TOKEN_PREFIX}{self.key_id}_…"


def hash_token(token: str) -> str:
    """Hex SHA-256 of a token (what is stored)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


#: What :meth:`ApiKeyStore.authenticate` compares a token's digest with when no key row matches: the digest of a
#: string that is not a token (so no token's digest equals it), of the same length as a stored one.
_DUMMY_DIGEST = hash_token("context-engine: no such API key")


class ApiKeyStore:
    """Create, list, revoke and verify API keys.

    Args:
        metadata: the open :class:`SqlDatabase` (SQLite or PostgreSQL) whose sessions are shared; its schema
            holds ``api_keys``. Build it with :func:`context_engine.storage.factory.open_api_keys`.
        cache_ttl_s: how long a verified key is trusted without a database read (0 disables the cache).

    Raises:
        ContextEngineError: ``WRT-5001`` (retryable) on a database failure, from every method.
    """

    def __init__(self, metadata: SqlDatabase, *, cache_ttl_s: float = 5.0) -> None:
        self._store = metadata
        self._ttl = cache_ttl_s
        self._cache: dict[str, tuple[float, ApiKeyInfo]] = {}
        self._active_count: tuple[float, int] | None = None
        self._lock = threading.Lock()

    # ---- management -----------------------------------------------------------------------------------------------
    def create(self, ctx: RequestContext, name: str = "") -> tuple[ApiKeyInfo, str]:
        """Create a key acting as ``ctx``.

        Returns:
            ``(info, token)``; the token is not stored and cannot be shown again.
        """
        key_id = secrets.token_hex(8)
        token = f"{TOKEN_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        now = datetime.now(UTC)
        info = ApiKeyInfo(
            key_id=key_id,
            name=name,
            account_id=ctx.account_id,
            role=ctx.role,
            user_space=ctx.user_space,
            agent_space=ctx.agent_space,
            created_at=now,
        )
        with self._store.session(write=True) as s:  # the store's session handling (SQLite: BEGIN IMMEDIATE)
            s.execute(insert(_TABLE).values(**info.model_dump(), secret_hash=hash_token(token)))
        with self._lock:
            self._active_count = None
        return info, token

    def list(self, account_id: str | None = None, *, include_revoked: bool = False) -> list[ApiKeyInfo]:
        """Keys (of one account, or all), oldest first, then by key id."""
        stmt = select(_TABLE)
        if account_id is not None:
            stmt = stmt.where(_TABLE.c.account_id == account_id)
        if not include_revoked:
            stmt = stmt.where(_TABLE.c.revoked_at.is_(None))
        with self._store.session(write=False) as s:
            rows = [_info(r._mapping) for r in s.execute(stmt)]
        return sorted(rows, key=lambda k: (k.created_at, k.key_id))

    def revoke(self, key_id: str) -> ApiKeyInfo:
        """Revoke a key (idempotent). It stops working at once in this process, within ``cache_ttl_s`` elsewhere.

        Accepts the key id or a whole token.

        Raises:
            ContextEngineError: ``WRT-4042`` when no key has this id.
        """
        match = _TOKEN_RE.match(key_id)
        kid = match.group(1) if match else key_id.strip()
        with self._store.session(write=True) as s:
            row = s.execute(select(_TABLE).where(_TABLE.c.key_id == kid)).first()
            if row is None:
                raise ContextEngineError(ErrorCode.NODE_NOT_FOUND, f"no API key with id {kid!r}", {"key_id": kid})
            if row.revoked_at is None:
                s.execute(update(_TABLE).where(_TABLE.c.key_id == kid).values(revoked_at=datetime.now(UTC)))
            row = s.execute(select(_TABLE).where(_TABLE.c.key_id == kid)).first()
        with self._lock:
            self._cache = {h: v for h, v in self._cache.items() if v[1].key_id != kid}
            self._active_count = None
        assert row is not None
        return _info(row._mapping)

    def active_count(self) -> int:
        """How many keys are not revoked (all accounts); cached like verified keys."""
        now = time.monotonic()
        with self._lock:
            if self._active_count is not None and now - self._active_count[0] < self._ttl:
                return self._active_count[1]
        with self._store.session(write=False) as s:
            stmt = select(func.count()).select_from(_TABLE).where(_TABLE.c.revoked_at.is_(None))
            count = int(s.execute(stmt).scalar() or 0)
        with self._lock:
            self._active_count = (now, count)
        return count

    # ---- verification ---------------------------------------------------------------------------------------------
    def cached(self, token: str) -> ApiKeyInfo | None:
        """The key of ``token`` if it was verified less than ``cache_ttl_s`` ago, else ``None`` (no database read)."""
        with self._lock:
            found = self._cache.get(hash_token(token))
        if found is not None and time.monotonic() - found[0] < self._ttl:
            return found[1]
        return None

    def authenticate(self, token: str) -> ApiKeyInfo | None:
        """The active key this token belongs to, or ``None`` (malformed, unknown, wrong secret or revoked)."""
        match = _TOKEN_RE.match(token)
        if match is None:
            return None
        digest = hash_token(token)
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(digest)
        if cached is not None and now - cached[0] < self._ttl:
            return cached[1]
        # The same work whatever is wrong with the token (issue 27): one statement that finds a row only for the
        # right id *and* secret, and one constant-time comparison, against a dummy digest when no row came back, so
        # an unknown id cannot be told from a known id with a wrong secret (or a revoked key) by the answer's time.
        stmt = select(_TABLE).where(_TABLE.c.key_id == match.group(1), _TABLE.c.secret_hash == digest)
        with self._store.session(write=False) as s:
            row = s.execute(stmt).first()
        matched = hmac.compare_digest(_DUMMY_DIGEST if row is None else row.secret_hash, digest)
        if not matched or row is None or row.revoked_at is not None:
            with self._lock:
                self._cache.pop(digest, None)
            return None
        info = _info(row._mapping)
        self._touch(info)
        if self._ttl > 0:
            with self._lock:
                if len(self._cache) > 10_000:  # bound memory under a flood of distinct valid keys
                    self._cache.clear()
                self._cache[digest] = (now, info)
        return info

    def _touch(self, info: ApiKeyInfo) -> None:
        """Record use, at most once a minute per key (best effort: a locked database must not fail the request)."""
        now = datetime.now(UTC)
        if info.last_used_at is not None and now - info.last_used_at < _LAST_USED_EVERY:
            return
        try:
            with self._store.session(write=True) as s:
                s.execute(update(_TABLE).where(_TABLE.c.key_id == info.key_id).values(last_used_at=now))
        except ContextEngineError:
            return  # the usage stamp is informational; authentication itself succeeded


def _info(m: object) -> ApiKeyInfo:
    row = dict(m)  # type: ignore[call-overload]
    row.pop("secret_hash", None)
    return ApiKeyInfo(**row)
