"""RequestContext and the visibility rule (DESIGN.md §1)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.uri import ContextURI, validate_segment

Role = Literal["user", "agent", "admin"]
_ACCOUNT_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class RequestContext(BaseModel):
    """Who is asking: built by the server from credentials, never from a request body.

    Visibility: ``shared``, ``user:<user_space>`` and ``agent:<agent_space>`` inside ``account_id``; an ``admin``
    sees every space of its account. Nothing ever crosses accounts.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    account_id: str
    role: Role = "user"
    user_space: str | None = None
    agent_space: str | None = None

    @field_validator("account_id")
    @classmethod
    def _check_account(cls, v: str) -> str:
        if not _ACCOUNT_RE.match(v) or v in (".", ".."):
            raise ValueError("account_id must be 1-64 characters of letters, digits, '_', '-', '.'")
        return v

    @field_validator("user_space", "agent_space")
    @classmethod
    def _check_space(cls, v: str | None) -> str | None:
        return None if v in (None, "") else validate_segment(v)

    @classmethod
    def parse(cls, spec: str, label: str = "--as") -> RequestContext:
        """Parse ``account:role:user_space:agent_space`` (the CLI's ``--as`` and ``keys create``); empty trailing
        parts are ``None``. ``label`` names the option or argument in the error message.

        Raises:
            ContextEngineError: ``WRT-4002`` when the spec is malformed (too many parts, an unknown role, an
                account or space name that is not allowed).
        """
        parts = spec.split(":")
        if not 1 <= len(parts) <= 4:
            raise ContextEngineError(
                ErrorCode.REQUEST_INVALID, f"{label} expects account:role:user_space:agent_space, got {spec!r}"
            )
        parts += [""] * (4 - len(parts))
        try:
            return cls.model_validate(  # the role is text here, checked against the allowed roles by validation
                {
                    "account_id": parts[0],
                    "role": parts[1] or "user",
                    "user_space": parts[2] or None,
                    "agent_space": parts[3] or None,
                }
            )
        except ValidationError as err:
            why = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors(include_url=False))
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, f"invalid {label} {spec!r}: {why}") from None
        except ContextEngineError as err:  # a space that is not a URI segment
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, f"invalid {label} {spec!r}: {err.message}") from None

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def principal(self) -> str:
        """``role:user_space:agent_space`` (empty parts for ``None``): who owns audit rows and lookup sessions.

        A segment never holds ``:``, so the form is unambiguous. Tool invocations and session dedup state belong to
        the principal that made them; an admin reads every principal's rows of its account (docs/security.md).
        """
        return principal_of(self.role, self.user_space, self.agent_space)

    def visible_owner_spaces(self) -> list[str] | None:
        """Owner spaces this caller sees, in a fixed order; ``None`` means every space of the account (admin)."""
        if self.is_admin:
            return None
        spaces = ["shared"]
        if self.user_space:
            spaces.append(f"user:{self.user_space}")
        if self.agent_space:
            spaces.append(f"agent:{self.agent_space}")
        return spaces

    def can_see(self, owner_space: str) -> bool:
        """Whether a node owned by ``owner_space`` (in this account) is visible to the caller."""
        spaces = self.visible_owner_spaces()
        return spaces is None or owner_space in spaces

    def can_see_uri(self, uri: ContextURI) -> bool:
        return self.can_see(uri.owner_space)

    def can_write_uri(self, uri: ContextURI) -> bool:
        """Writes: admins anywhere in the account; others only into their own user/agent space.

        Shared resources are written by admins only (the embedded default runs as admin).
        """
        if self.is_admin:
            return True
        return uri.scope != "resources" and self.can_see(uri.owner_space)

    def for_user(self, user_space: str | None, invalid_code: ErrorCode = ErrorCode.QUERY_INVALID) -> RequestContext:
        """This context narrowed to one user's space for a read (issue 29: a backend serving many users with one
        admin key): ``None`` keeps it as it is; an ``admin`` becomes that user (role ``user``, no agent space: it
        sees the shared resources and that user's space only); any other caller may only name its own user space,
        which changes nothing. A narrowing never widens.

        Raises:
            ContextEngineError: ``RET-4031`` (403) when a non-admin names another user space (or has none);
                ``invalid_code`` (``RET-4001`` for the read tools, ``WRT-4001`` for the memory routes) for a name
                that is not a valid space.
        """
        if user_space is None:
            return self
        try:
            space = validate_segment(user_space)
        except ContextEngineError as err:
            raise ContextEngineError(invalid_code, f"user_space: {err.message}", {"field": "user_space"}) from None
        if self.is_admin:
            return RequestContext(account_id=self.account_id, role="user", user_space=space)
        if space != self.user_space:
            raise ContextEngineError(
                ErrorCode.TARGET_FORBIDDEN,
                "user_space narrows an admin key to one user; this key may only name its own user space",
                {"field": "user_space"},
            )
        return self


def principal_of(role: str, user_space: str | None, agent_space: str | None) -> str:
    """The :attr:`RequestContext.principal` of a caller given by its parts (e.g. a stored ``caller`` record)."""
    return f"{role}:{user_space or ''}:{agent_space or ''}"


DEFAULT_CONTEXT = RequestContext(account_id="default", role="admin")
