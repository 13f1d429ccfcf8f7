"""Renamed fields and arguments (issue 29, "one word per concept"): the new name is the one documented, the old one is
still accepted everywhere and documented as deprecated (docs/clients.md, "Deprecated, still accepted").

The conversation that ``add_messages`` stores was called a *session* (``session_id``), the word ``lookup_knowledge``
uses for its diagnosis session (seed 001, DESIGN §7: ``session_id`` keeps that name there). It is now
``conversation_id`` on every conversation call; ``session_id`` is its deprecated name (:data:`CONVERSATION`). The
storage keeps its layout: a message's URI stays ``.../memories/sessions/<conversation_id>/<seq>.md`` and its stored
metadata key stays ``session_id`` (existing homes are read as they are).

Three mechanisms, one rule (the old name maps to the new one; both given with different values is an error):

* :func:`renamed_argument`: a Python keyword argument of a method (``ContextEngine.add_messages(...,
  session_id=...)``): a :class:`DeprecationWarning` at the caller's line, then mapped;
* :class:`RenamedFields`: a pydantic model (request or answer) that declares both fields. The old key is accepted
  and mapped when the model is validated (HTTP bodies and query parameters, MCP arguments, a client decoding an older
  server's answer, a model built in Python), without a warning: the same validation serves the server, whose log is
  no place for a client's deprecation. Its old field is then filled from the new one, so reading it still works,
  and pydantic warns on that read (the field is declared ``deprecated``, which JSON Schema and OpenAPI show);
* the CLI keeps the old option names, hidden from ``--help``; using one prints a note on stderr
  (``interfaces/cli/common.renamed_option``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, model_validator
from pydantic_core import PydanticCustomError

from context_engine.errors import ContextEngineError, ErrorCode

__all__ = ["CONVERSATION", "RenamedFields", "rename_keys", "renamed_argument"]

CONVERSATION: Mapping[str, str] = {"session_id": "conversation_id"}
"""Old name -> new name of the conversation of ``add_messages``, ``list_memories`` and ``search_memory``."""


def _conflict_message(new: str, old: str, new_value: Any, old_value: Any) -> str:
    return (
        f"{new}={new_value!r} and {old}={old_value!r} differ: {old} is the deprecated name of {new}; "
        f"give {new} only"
    )


def renamed_argument(
    where: str,
    new_name: str,
    new_value: Any,
    old_name: str,
    old_value: Any,
    *,
    code: ErrorCode = ErrorCode.REQUEST_INVALID,
    stacklevel: int = 3,
    warn: bool = True,
) -> Any:
    """The value of a renamed keyword argument: ``new_value``, or ``old_value`` when only the old name was given
    (with a :class:`DeprecationWarning` pointing ``stacklevel`` frames up: 3 is the caller of the method that calls
    this; none with ``warn=False``, for a caller that says it its own way, the CLI). ``None`` means "not given".

    Raises:
        ContextEngineError: ``code`` when both are given with different values.
    """
    if old_value is None:
        return new_value
    if warn:
        warnings.warn(
            f"{where}({old_name}=...) is deprecated; use {new_name}= (the same value)", DeprecationWarning, stacklevel
        )
    if new_value is not None and new_value != old_value:
        raise ContextEngineError(
            code,
            f"{where}: {_conflict_message(new_name, old_name, new_value, old_value)}",
            {"fields": [new_name, old_name]},
        )
    return old_value


def rename_keys(data: Any, renamed: Mapping[str, str]) -> Any:
    """``data`` (a mapping of field values) with each old key's value under its new key (old keys removed).

    Raises:
        PydanticCustomError: ``renamed_field_conflict`` when an old and its new key hold different values (a
            validation error of the model that calls this, with the engine's code on each interface).
    """
    if not isinstance(data, Mapping) or not any(old in data for old in renamed):
        return data
    out = dict(data)
    for old, new in renamed.items():
        if old not in out:
            continue
        old_value = out.pop(old)
        if old_value is None:
            continue
        new_value = out.get(new)
        if new_value is not None and new_value != old_value:
            raise PydanticCustomError(
                "renamed_field_conflict",
                "{message}",
                {"message": _conflict_message(new, old, new_value, old_value), "fields": [new, old]},
            )
        out[new] = old_value
    return out


class RenamedFields(BaseModel):
    """A model with renamed fields: ``renamed`` maps each old field name to its new one. Both are declared by the
    subclass, the old one with ``deprecated=...`` (and ``exclude=True`` on a request, so that its dumps carry only the
    new name). See the module docstring."""

    renamed: ClassVar[Mapping[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _old_names_in(cls, data: Any) -> Any:
        return rename_keys(data, cls.renamed)

    @model_validator(mode="after")
    def _old_names_out(self) -> Self:
        # the old field holds the new one's value, without being "set" (a request's dumps with exclude_unset, and
        # the client's body, carry the new name only)
        for old, new in self.renamed.items():
            self.__dict__[old] = self.__dict__[new]
        return self
