"""The text check of every HTTP route (issue 14, bad input): invalid Unicode in a request is an error with a code.

A router dependency, so it runs for every route before the body is validated and before any engine call:

* the query string: percent-decoded bytes that are not UTF-8 (``%ED%A0%80``, a UTF-8-encoded lone surrogate, or
  ``%FF``); Starlette would otherwise replace them with U+FFFD and run the request on altered text;
* the JSON body: any string or object key with a lone surrogate (JSON's ``"\\ud800"`` escape).

The code follows the route, as validation errors do (:mod:`.errors`): ``422 WRT-4221`` on write and memory routes,
``400 RET-4001`` on read routes. Raw bytes that are not UTF-8 in a JSON body are answered the same way by the body-parse
handler in :mod:`.errors`.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from fastapi import Request

from context_engine.interfaces.http.errors import invalid_text_code
from context_engine.schema.text import find_invalid_text, invalid_text_error


async def reject_invalid_text(request: Request) -> None:
    """Raise ``WRT-4221``/``RET-4001`` (``details.loc`` names the field) when the request holds invalid Unicode."""
    code = invalid_text_code(request)
    bad_param = _invalid_query_param(request.scope.get("query_string", b""))
    if bad_param is not None:
        raise invalid_text_error(("query", bad_param), code)
    if request.headers.get("content-type", "").split(";")[0].strip().lower().endswith("json"):
        body = await request.body()
        if body:
            # FastAPI has parsed it already (Request caches the result); a body that does not parse is its error
            try:
                data = await request.json()
            except ValueError:
                return
            found = find_invalid_text(data, ("body",))
            if found is not None:
                raise invalid_text_error(found, code)


def _invalid_query_param(query: bytes) -> str | None:
    """The name of the first query parameter whose name or value is not UTF-8 once percent-decoded."""
    for pair in query.split(b"&"):
        if not pair:
            continue
        name, _, value = pair.partition(b"=")
        try:
            shown = unquote_to_bytes(name.replace(b"+", b" ")).decode("utf-8")
        except UnicodeDecodeError:
            return name.decode("latin-1")
        try:
            unquote_to_bytes(value.replace(b"+", b" ")).decode("utf-8")
        except UnicodeDecodeError:
            return shown
    return None

