"""What the sync and the async client share: building a request from an :class:`~.endpoints.Endpoint` (:func:`call`,
a :class:`Call` ready to send), decoding the answer into the route's model, mapping error envelopes to
:class:`ApiError`, and the retry policy. The methods themselves are written once, in :mod:`context_engine.client.base`.

Retries (tenacity, bounded by ``retries``): only failures where the server did not act on the request, so writes are
safe to repeat: a connection that could not be opened (``API-5021``), ``503 API-5031`` (the engine is starting or
stopping) and ``503 WRT-5032`` (a write that did not get its turn among the home's writers: nothing was written).
Everything else is raised at once.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python
from tenacity import retry_if_exception, stop_after_attempt, wait_exponential_jitter

from context_engine.client.endpoints import ENDPOINTS, Endpoint
from context_engine.errors import ContextEngineError, ErrorCode

M = TypeVar("M", bound=BaseModel)

DEFAULT_BASE_URL = "http://127.0.0.1:8420"


class ApiError(ContextEngineError):
    """An error answered by the server (its envelope ``{code, message, details, request_id}``) or met on the way.

    Attributes:
        code, message, details, retryable: as in :class:`ContextEngineError`; ``code`` is the server's code.
        status_code: the HTTP status, ``None`` when no answer came (``API-5021``) or the request was refused locally.
        request_id: the server's request id (also in its log), when it answered with an envelope.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        retryable: bool = False,
        status_code: int | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(code, message, details, retryable=retryable)
        self.status_code = status_code
        self.request_id = request_id


_CONVERSATION = {"session_id": "conversation_id"}  # schema/renames.py CONVERSATION

#: Client method -> its deprecated request field names -> their new names (issue 29; docs/clients.md, "Deprecated,
#: still accepted"). ``add_messages`` takes its conversation as an argument (:func:`messages_first`).
RENAMED_FIELDS: dict[str, dict[str, str]] = {
    "search_memory": _CONVERSATION,
    "search_memory_compact": _CONVERSATION,
    "list_memories": _CONVERSATION,
}


def build_payload(name: str, data: dict[str, Any] | BaseModel, stacklevel: int = 5) -> BaseModel | None:
    """The request model of client method ``name`` from keyword arguments (or a ready model), validated locally.

    The method's fixed fields (``Endpoint.fixed``) are set here. A deprecated field name (:data:`RENAMED_FIELDS`,
    e.g. ``session_id`` for ``conversation_id``) raises a ``DeprecationWarning`` at the line ``stacklevel`` frames up
    (5: the caller of the client method, through :func:`call`, the method's body and its face); the request model
    maps it.

    Raises:
        ApiError: the route's validation code (``RET-4001`` or ``WRT-4002``) when a field is unknown or mistyped,
            or a fixed field has another value (``response_format="compact"`` given to ``search_memory``); range
            checks with codes of their own (``top_k`` -> ``RET-4002``...) are left to the server.
    """
    endpoint = ENDPOINTS[name]
    if endpoint.request is None:
        return None
    if isinstance(data, BaseModel):  # a ready model: the fields its caller set, validated again as the route's
        data = {k: getattr(data, k) for k in data.model_fields_set}
    else:
        for old, new in RENAMED_FIELDS.get(name, {}).items():  # the model maps it (two different values: refused)
            if data.get(old) is not None:
                warnings.warn(
                    f"{name}({old}=...) is deprecated; use {new}= (the same value)", DeprecationWarning, stacklevel
                )
    for key, value in endpoint.fixed.items():
        if key in data and data[key] != value:
            raise ApiError(
                endpoint.invalid_code,
                f"invalid request: {name} sends {key}={value!r} (got {data[key]!r})",
                {"errors": [{"loc": [key], "msg": f"{name} sends {value!r}", "type": "fixed_field"}]},
            )
    data = {**data, **endpoint.fixed}
    try:
        return endpoint.request.model_validate(data)
    except ValidationError as err:
        errors: list[dict[str, Any]] = [
            {"loc": [str(x) for x in e["loc"]], "msg": e["msg"], "type": e["type"]} for e in err.errors()
        ]
        where = ", ".join(".".join(e["loc"]) + ": " + e["msg"] for e in errors[:3])
        raise ApiError(endpoint.invalid_code, f"invalid request: {where}", {"errors": errors}) from err


def messages_first(messages: Any, conversation_id: Any, session_id: Any = None) -> dict[str, Any]:
    """The body of ``add_messages`` from its arguments, in the Python API's order ``(messages, conversation_id)``
    (issue 29: one argument order and one word everywhere).

    Deprecated, still accepted, each with a ``DeprecationWarning`` at the caller's line (3 frames up, through the
    method's body and its face): ``session_id=``, the first name of ``conversation_id``; the client's first order,
    ``(conversation_id, messages)``, recognised by types (a string first, a list or tuple second).

    Raises:
        ApiError: ``WRT-4002`` when the conversation is missing, or ``conversation_id`` and ``session_id`` differ.
    """
    if session_id is not None:
        warnings.warn(
            "add_messages(session_id=...) is deprecated; use conversation_id= (the same value)",
            DeprecationWarning,
            stacklevel=4,
        )
        if conversation_id is not None and conversation_id != session_id:
            raise ApiError(
                ErrorCode.REQUEST_INVALID,
                "invalid request: conversation_id and session_id differ: session_id is the deprecated name of "
                "conversation_id; give conversation_id only",
                {"errors": [{"loc": [], "msg": "two values for one field", "type": "renamed_field_conflict"}]},
            )
        conversation_id = session_id
    if isinstance(messages, str) and isinstance(conversation_id, list | tuple):
        warnings.warn(
            "add_messages(conversation_id, messages) is deprecated; call add_messages(messages, conversation_id), "
            "the order of the Python API",
            DeprecationWarning,
            stacklevel=4,
        )
        messages, conversation_id = conversation_id, messages
    if conversation_id is None:
        raise ApiError(
            ErrorCode.REQUEST_INVALID, "add_messages needs a conversation_id", {"field": "conversation_id"}
        )
    return {"conversation_id": conversation_id, "messages": messages}


def request_args(endpoint: Endpoint, payload: BaseModel | None) -> dict[str, Any]:
    """``httpx`` arguments of one call: the JSON body (fields the caller set; the server applies its defaults to the
    rest) or the path parameters (percent-encoded) and query parameters (``None`` values left out)."""
    args: dict[str, Any] = {"method": endpoint.method, "url": endpoint.path}
    if payload is None:
        return args
    if endpoint.method == "GET":
        params = payload.model_dump(mode="json", exclude_none=True)
        in_path = {k: quote(str(params.pop(k)), safe="") for k in endpoint.path_params}
        args["url"] = endpoint.path.format(**in_path)
        args["params"] = {k: v for k, v in params.items() if v != []}
    else:
        body = payload.model_dump(mode="json", exclude_unset=True)
        # a set field the model leaves out of its dumps (LookupRequest.response_format, kept out of the audit row)
        # is still part of the request
        for key in payload.model_fields_set - body.keys():
            body[key] = to_jsonable_python(getattr(payload, key))
        args["json"] = body
    return args


@dataclass(frozen=True)
class Call(Generic[M]):
    """One call of a client method, checked and ready to send: its route, the ``httpx`` arguments and the model of
    the answer, ``M``. What a method's body (:mod:`context_engine.client.base`) hands to its face's ``_send``, which
    sends it (repeated as :func:`retry_policy` says) and reads the answer with :meth:`answer`."""

    endpoint: Endpoint
    args: dict[str, Any]
    model: type[M]

    def answer(self, response: httpx.Response) -> M:
        """The answer as the route's model, or the error it carries (:func:`decode`)."""
        return decode(self.endpoint, response, self.model)

    def no_answer(self, err: httpx.HTTPError) -> ApiError:
        """The error of a request that got no answer (:func:`transport_error`)."""
        return transport_error(self.endpoint, err)


def call(name: str, data: dict[str, Any] | BaseModel | None = None) -> Call[Any]:
    """The call of client method ``name`` (an :data:`~.endpoints.ENDPOINTS` key) with these request fields: validated
    locally (:func:`build_payload`), its model imported on first use. Typed ``Call[Any]``: the method that calls it
    names the answer's model (``-> Call[SearchMemoryResponse]``), which ``tests/client/test_openapi_drift.py`` checks
    against the table.

    Raises:
        ApiError: the route's validation code, before anything is sent (:func:`build_payload`).
    """
    endpoint = ENDPOINTS[name]
    return Call(endpoint, request_args(endpoint, build_payload(name, data or {})), endpoint.response)


def decode(endpoint: Endpoint, response: httpx.Response, model: type[M]) -> M:
    """The 2xx body as ``model``; any other status as :class:`ApiError` with the envelope's code.

    Raises:
        ApiError: the envelope's code (``retryable`` for ``API-5031``, ``WRT-5032``); ``API-5021`` when the body is
            not an envelope (a proxy's error page) or a 2xx body does not match the route's model.
    """
    if response.is_success:
        try:
            return model.model_validate_json(response.content)
        except ValidationError as err:
            raise ApiError(
                ErrorCode.UNREACHABLE,
                f"the answer of {endpoint.method} {endpoint.path} does not match {model.__name__} "
                "(client and server versions differ?)",
                {"errors": [{"loc": [str(x) for x in e["loc"]], "msg": e["msg"]} for e in err.errors()[:10]]},
                status_code=response.status_code,
            ) from err
    try:
        body = response.json()
        raw_code, message = str(body["code"]), str(body["message"])
        details, request_id = dict(body.get("details") or {}), body.get("request_id")
    except (ValueError, KeyError, TypeError):
        raise ApiError(
            ErrorCode.UNREACHABLE,
            f"{endpoint.method} {endpoint.path} answered {response.status_code} without an error envelope",
            {"status_code": response.status_code},
            status_code=response.status_code,
        ) from None
    try:
        code = ErrorCode(raw_code)
    except ValueError:  # a code this client does not know (a newer server): keep it in details
        code = ErrorCode.INTERNAL if response.status_code >= 500 else ErrorCode.REQUEST_INVALID
        details = {**details, "server_code": raw_code}
    raise ApiError(
        code,
        message,
        details,
        retryable=code in (ErrorCode.NOT_READY, ErrorCode.WRITE_BUSY),
        status_code=response.status_code,
        request_id=request_id,
    )


def transport_error(endpoint: Endpoint, err: httpx.HTTPError) -> ApiError:
    """``API-5021`` for a request that got no answer; retryable only when the connection was never opened (the
    server cannot have acted on it)."""
    not_sent = isinstance(err, (httpx.ConnectError, httpx.ConnectTimeout))
    return ApiError(
        ErrorCode.UNREACHABLE,
        f"{endpoint.method} {endpoint.path}: no answer from the server ({type(err).__name__}: {err})",
        {"error": type(err).__name__},
        retryable=not_sent,
    )


def retry_policy(retries: int, backoff_s: float) -> dict[str, Any]:
    """tenacity arguments: at most ``retries`` repeats of a retryable :class:`ApiError`, exponential backoff with
    jitter starting at ``backoff_s`` (capped at 30 x that), the last error re-raised."""
    return {
        "retry": retry_if_exception(lambda e: isinstance(e, ApiError) and e.retryable),
        "stop": stop_after_attempt(retries + 1),
        "wait": wait_exponential_jitter(multiplier=backoff_s, max=backoff_s * 30, jitter=backoff_s),
        "reraise": True,
    }


def client_headers(api_key: str | None) -> dict[str, str]:
    """``Authorization: Bearer <key>`` when a key is given (the server's auth scheme; without one only anonymous
    loopback access works)."""
    headers = {"Accept": "application/json", "User-Agent": "context-engine-client"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def check_settings(retries: int, timeout_s: float, backoff_s: float) -> None:
    """Refuse out-of-range client settings (``CFG-4001``)."""
    if not 0 <= retries <= 10:
        raise ContextEngineError(ErrorCode.CONFIG_INVALID, "retries must be in 0..10", {"retries": retries})
    if not 0 < timeout_s <= 3600:
        raise ContextEngineError(ErrorCode.CONFIG_INVALID, "timeout_s must be in (0, 3600]", {"timeout_s": timeout_s})
    if not 0 <= backoff_s <= 10:
        raise ContextEngineError(ErrorCode.CONFIG_INVALID, "backoff_s must be in 0..10", {"backoff_s": backoff_s})
