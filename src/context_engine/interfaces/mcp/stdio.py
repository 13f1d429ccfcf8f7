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
  JSON that is not a JSON-RPC message with ``-32600`` (invalid request) and its ``id`` when it has a usable one.

An answer that cannot be encoded (it would carry a lone surrogate) goes out as ``-32603`` with its id. As in the SDK,
while serving, fd 0 reads the null device and fd 1 goes to stderr, so stray prints and child processes cannot
corrupt the protocol; the wire uses private duplicates, and both descriptors are restored on exit.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, BinaryIO

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from context_engine.observability.logging import get_logger

log = get_logger("context_engine.mcp")


def _error(request_id: Any, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def _usable_id(data: Any) -> Any:
    rid = data.get("id") if isinstance(data, dict) else None
    return rid if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)) else None


def parse_line(line: bytes) -> tuple[types.JSONRPCMessage | None, types.JSONRPCError | None]:
    """One stdin line (bytes, with or without its newline) as ``(message to pass on, None)``, or as ``(None,
    JSONRPCError to answer)``: ``-32700`` (parse error, id ``None``) or ``-32600`` (invalid request)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        reason = f"Parse error: the line is not UTF-8 ({e.reason} at byte {e.start})"
        return None, _error(None, types.PARSE_ERROR, reason)
    try:
        return types.jsonrpc_message_adapter.validate_json(text, by_name=False), None
    except ValidationError:
        pass  # not JSON, not JSON-RPC, or a lone surrogate that pydantic's parser refuses: look again
    try:
        data = json.loads(text)  # keeps "\ud800" as a lone surrogate: the tools answer it with their own codes
    except ValueError as e:
        return None, _error(None, types.PARSE_ERROR, f"Parse error: {e}")
    try:
        return types.jsonrpc_message_adapter.validate_python(data, by_name=False), None
    except ValidationError:
        return None, _error(_usable_id(data), types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")


def _encode(message: types.JSONRPCMessage) -> str:
    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True)
    except ValueError:  # pydantic refuses a lone surrogate in the output: answer the request, never drop it
        rid = getattr(message, "id", None)
        log.warning("mcp_stdio_unencodable_answer", id=str(rid))
        return _error(rid, types.INTERNAL_ERROR, "Internal error: the answer holds invalid Unicode").model_dump_json(
            by_alias=True, exclude_unset=True
        )


def _claim(fd: int, mode: str, diversion: int) -> tuple[BinaryIO, int | None]:
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
async def stdio_transport() -> AsyncIterator[tuple[Any, Any]]:
    """``(read_stream, write_stream)`` over the process's stdin and stdout, for ``Server.run``."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    stdin, stdin_private = _claim(0, "rb", devnull)
    os.close(devnull)
    stdout, stdout_private = _claim(1, "wb", 2)
    wire_in = anyio.wrap_file(stdin)
    wire_out = anyio.wrap_file(stdout)
    read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_reader = create_context_streams[SessionMessage](0)

    async def reader() -> None:
        try:
            async with read_writer:
                async for line in wire_in:
                    if not line.strip():
                        continue
                    message, answer = parse_line(line)
                    if answer is not None:
                        log.warning("mcp_stdio_bad_line", code=answer.error.code, id=str(answer.id))
                        await write_stream.send(SessionMessage(answer))
                    else:
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
