"""MCP over stdio that answers every line (``context-engine mcp``).

The SDK's ``stdio_server`` (``mcp`` 2.x) parses each line with pydantic's JSON parser, which rejects a ``\\ud800``
escape (a lone surrogate), and hands the failure to the session, which only logs it: the client got no answer at
all, neither for a lone surrogate nor for a line that is not JSON. This transport has the same shape (two streams of
``SessionMessage``, one JSON message per line, UTF-8) and differs in how a line is read (:func:`parse_line`):

- a line the SDK's parser accepts is passed on as it is;
- otherwise a line that the standard library's ``json`` parses (it keeps ``\\ud800`` as a lone surrogate) and that is
  a valid JSON-RPC message is passed on too, so a ``tools/call`` with invalid Unicode in its arguments gets the tool
  error envelope (``RET-4001`` / ``WRT-4221``), as over HTTP and in process;
- a line that is not UTF-8 or not JSON is answered with the JSON-RPC error ``-32700`` (parse error, id ``null``);
  JSON that is not a JSON-RPC message with ``-32600`` (invalid request) and its ``id`` when it has a usable one; a
  request or notification whose ``id`` is present but not a string or an integer (an object, an array, a float,
  ``null``, a boolean) with ``-32600`` and id ``null`` (the SDK would take it for a notification and answer nothing);
- bounds (issue 27, attack pass; :class:`StdioLimits`, settings ``http.mcp_stdio_max_line_bytes`` and
  ``http.mcp_stdio_max_json_depth``): a line over the size bound is answered ``-32600`` (id ``null``) and its bytes
  are skipped as they are read, never held whole; JSON nested deeper than the depth bound (``[[[[...]]]]``: 1,100
  brackets made the standard parser raise ``RecursionError`` and the process exit) is answered ``-32700`` (id
  ``null``), counted on the raw text before any parser runs. The session goes on after each.

An answer that cannot be encoded (it would carry a lone surrogate) goes out as ``-32603`` with its id. As in the SDK,
while serving, fd 0 reads the null device and fd 1 goes to stderr, so stray prints and child processes cannot
corrupt the protocol; the wire uses private duplicates, and both descriptors are restored on exit.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import IO, Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from context_engine.observability.logging import get_logger

log = get_logger("context_engine.mcp")

_DRAIN_CHUNK_BYTES = 64 * 1024
#: A JSON string (escapes included) or one bracket: the depth count skips what is inside strings.
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


@dataclass(frozen=True)
class StdioLimits:
    """Bounds on one stdin line (defaults: those of :class:`~context_engine.settings.HttpSettings`).

    Attributes:
        max_line_bytes: the largest line, in bytes without its newline (the same default as an HTTP request body).
        max_json_depth: the deepest nesting of arrays and objects in a line.
    """

    max_line_bytes: int = 1024 * 1024
    max_json_depth: int = 64


def json_too_deep(text: str, max_depth: int) -> bool:
    """Whether the JSON text ``text`` nests arrays and objects deeper than ``max_depth``, brackets inside strings not
    counted. Linear in the text, no recursion; a text with at most ``max_depth`` opening brackets is not scanned."""
    if text.count("[") + text.count("{") <= max_depth:
        return False
    depth = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token == "[" or token == "{":
            depth += 1
            if depth > max_depth:
                return True
        elif token == "]" or token == "}":
            depth -= 1
    return False


def _error(request_id: Any, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def _is_id(rid: Any) -> bool:
    return isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))


def _usable_id(data: Any) -> Any:
    rid = data.get("id") if isinstance(data, dict) else None
    return rid if _is_id(rid) else None


def _invalid_id(text: str) -> types.JSONRPCError | None:
    """For a line parsed as a notification: ``-32600`` (id ``None``) when it carries an ``id`` member after all (one
    that is not a string or an integer: the request would otherwise go unanswered), else ``None``."""
    data = json.loads(text)  # depth already bounded; notifications are few and small
    if isinstance(data, dict) and "id" in data:
        return _error(None, types.INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
    return None


def parse_line(
    line: bytes, limits: StdioLimits = StdioLimits()
) -> tuple[types.JSONRPCMessage | None, types.JSONRPCError | None]:
    """One stdin line (bytes, with or without its newline) as ``(message to pass on, None)``, or as ``(None,
    JSONRPCError to answer)``: ``-32700`` (parse error, id ``None``; also JSON nested deeper than
    ``limits.max_json_depth``) or ``-32600`` (invalid request; id ``None`` when the id is not a string or an
    integer). The line's size is bounded by the reader (:func:`stdio_transport`), before this is called."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        reason = f"Parse error: the line is not UTF-8 ({e.reason} at byte {e.start})"
        return None, _error(None, types.PARSE_ERROR, reason)
    if json_too_deep(text, limits.max_json_depth):
        reason = f"Parse error: JSON nested deeper than {limits.max_json_depth} levels"
        return None, _error(None, types.PARSE_ERROR, reason)
    try:
        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError:
        pass  # not JSON, not JSON-RPC, or a lone surrogate that pydantic's parser refuses: look again
    else:
        bad_id = _invalid_id(text) if isinstance(message, types.JSONRPCNotification) else None
        return (None, bad_id) if bad_id is not None else (message, None)
    try:
        data = json.loads(text)  # keeps "\ud800" as a lone surrogate: the tools answer it with their own codes
    except ValueError as e:
        return None, _error(None, types.PARSE_ERROR, f"Parse error: {e}")
    try:
        message = types.jsonrpc_message_adapter.validate_python(data, by_name=False)
    except ValidationError:
        return None, _error(_usable_id(data), types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")
    if isinstance(message, types.JSONRPCNotification) and isinstance(data, dict) and "id" in data:
        return None, _error(None, types.INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
    return message, None


async def _read_line(wire_in: Any, max_line_bytes: int) -> tuple[bytes, int]:
    """The next line as ``(line, 0)``, ``(b"", n)`` for a line of ``n`` bytes over ``max_line_bytes`` (read and
    dropped in chunks, never held whole), or ``(b"", 0)`` at the end of input."""
    read = wire_in.wrapped.readline  # the file's own readline(size): AsyncFile.readline takes no size
    line = await anyio.to_thread.run_sync(read, max_line_bytes + 2)  # the line, "\r\n", or a byte more: too long
    complete = line.endswith(b"\n") or len(line) <= max_line_bytes  # at its newline, or at the end of input
    size = len(line.rstrip(b"\r\n"))
    if complete and size <= max_line_bytes:
        return line, 0
    while not complete:
        chunk = await anyio.to_thread.run_sync(read, _DRAIN_CHUNK_BYTES)
        size += len(chunk.rstrip(b"\r\n"))
        complete = not chunk or chunk.endswith(b"\n")
    return b"", size


def _parse_guarded(
    line: bytes, limits: StdioLimits
) -> tuple[types.JSONRPCMessage | None, types.JSONRPCError | None]:
    """:func:`parse_line`, and a parse error (id ``None``) if it fails in a way no bound foresaw: one line must never
    end the session."""
    try:
        return parse_line(line, limits)
    except Exception:  # recorded: logged with its traceback, answered -32700
        log.warning("mcp_stdio_parse_failed", exc_info=True)
        return None, _error(None, types.PARSE_ERROR, "Parse error: the line could not be read")


def _encode(message: types.JSONRPCMessage) -> str:
    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True)
    except ValueError:  # pydantic refuses a lone surrogate in the output: answer the request, never drop it
        rid = getattr(message, "id", None)
        log.warning("mcp_stdio_unencodable_answer", id=str(rid))
        return _error(rid, types.INTERNAL_ERROR, "Internal error: the answer holds invalid Unicode").model_dump_json(
            by_alias=True, exclude_unset=True
        )


def _claim(fd: int, mode: str, diversion: int) -> tuple[IO[bytes], int | None]:
    """The wire of a standard descriptor as a private duplicate, with ``fd`` pointed at ``diversion``; returns the
    file and the duplicate (``None`` when the descriptor could not be duplicated: the stream is used in place)."""
    stream = sys.stdin if fd == 0 else sys.stdout
    try:
        if stream.buffer.fileno() != fd:
            return stream.buffer, None
        private = os.dup(fd)
    except (AttributeError, OSError, ValueError):
        return stream.buffer, None
    try:
        os.dup2(diversion, fd)
    except OSError:
        os.close(private)
        return stream.buffer, None
    # closefd=False: a worker thread may still block on the descriptor after the transport exits
    return os.fdopen(private, mode, closefd=False), private


def _restore(fd: int, private: int | None) -> None:
    if private is not None:
        with suppress(OSError):
            os.dup2(private, fd)


@asynccontextmanager
async def stdio_transport(limits: StdioLimits | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """``(read_stream, write_stream)`` over the process's stdin and stdout, for ``Server.run``; every line is read
    within ``limits`` (default :class:`StdioLimits`)."""
    limits = limits or StdioLimits()
    devnull = os.open(os.devnull, os.O_RDONLY)
    stdin, stdin_private = _claim(0, "rb", devnull)
    os.close(devnull)
    stdout, stdout_private = _claim(1, "wb", 2)
    wire_in = anyio.wrap_file(stdin)
    wire_out = anyio.wrap_file(stdout)
    read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_reader = create_context_streams[SessionMessage](0)

    async def reader() -> None:
        answer: types.JSONRPCError | None
        try:
            async with read_writer:
                while True:
                    line, oversize = await _read_line(wire_in, limits.max_line_bytes)
                    if oversize:
                        reason = f"Invalid Request: a line of {oversize} bytes; the limit is {limits.max_line_bytes}"
                        message, answer = None, _error(None, types.INVALID_REQUEST, reason)
                    elif not line:
                        break  # end of input
                    elif not line.strip():
                        continue
                    else:
                        message, answer = _parse_guarded(line, limits)
                    if answer is not None:
                        log.warning("mcp_stdio_bad_line", code=answer.error.code, id=str(answer.id))
                        await write_stream.send(SessionMessage(answer))
                    elif message is not None:  # one of the two is set (parse_line)
                        await read_writer.send(SessionMessage(message))
        except anyio.ClosedResourceError:
            await anyio.lowlevel.checkpoint()

    async def writer() -> None:
        try:
            async with write_reader:
                async for session_message in write_reader:
                    await wire_out.write((_encode(session_message.message) + "\n").encode("utf-8"))
                    await wire_out.flush()
        except anyio.ClosedResourceError:
            await anyio.lowlevel.checkpoint()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            yield read_stream, write_stream
    finally:
        _restore(1, stdout_private)
        _restore(0, stdin_private)
