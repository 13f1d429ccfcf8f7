"""Bad lines over the real stdio transport: ``context-engine mcp`` answers every request (trial finding).

The SDK's own stdio transport dropped a line its JSON parser refused (a ``\\ud800`` escape, JSON cut short), so the
client waited forever. Here raw byte lines go to a real ``context-engine mcp`` subprocess and each answer is read
with a timeout: a lone surrogate in a tool's arguments gets the tool error envelope (``RET-4001`` for read tools,
``WRT-4221`` for write tools), a line that is not JSON (or not UTF-8) ``-32700`` with id ``null``, JSON that is not
JSON-RPC ``-32600``; the session goes on, and the process exits when stdin closes. Also the unit of
:func:`parse_line`.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from context_engine.interfaces.mcp.stdio import parse_line

EXE = Path(sys.executable).with_name("context-engine")
ANSWER_S = 120.0  # the longest wait for one answer (a shared 2-core machine); no assertion depends on it


class RawStdio:
    """``context-engine --home H mcp`` in a subprocess, fed raw byte lines; answers collected by a thread."""

    def __init__(self, home: Path, env: dict[str, str] | None = None) -> None:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("CE_")}, **(env or {})}
        self.proc = subprocess.Popen(
            [str(EXE), "--home", str(home), "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.answers.put(json.loads(line))

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def answer(self, raw: bytes) -> dict[str, Any]:
        self.send(raw)
        try:
            return self.answers.get(timeout=ANSWER_S)
        except queue.Empty:
            pytest.fail(f"no answer in {ANSWER_S} s to {raw[:200]!r}")

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=ANSWER_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("the server did not exit after stdin closed")


def _call(rid: int, tool: str, arguments_json: str) -> bytes:
    # written by hand: json.dumps would escape the backslash of "\ud800" and send six plain characters
    body = (
        f'{{"jsonrpc":"2.0","id":{rid},"method":"tools/call",'
        f'"params":{{"name":"{tool}","arguments":{arguments_json}}}}}'
    )
    return body.encode("ascii")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = RawStdio(tmp_path_factory.mktemp("stdio-bad-home"))
    init = s.answer(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            }
        ).encode()
    )
    assert init["id"] == 1 and "result" in init, init
    s.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    yield s
    assert s.close() == 0


@pytest.mark.parametrize(
    ("rid", "tool", "arguments", "code", "loc"),
    [
        (11, "search_memory", r'{"query":"\ud800"}', "RET-4001", ["query"]),
        (12, "read_memory", r'{"uri":"ctx://resources/\udfff"}', "RET-4001", ["uri"]),
        (13, "add_memory", r'{"text":"a\ud800b"}', "WRT-4221", ["text"]),
    ],
)
def test_lone_surrogate_gets_the_tool_error_envelope(server, rid, tool, arguments, code, loc):
    answer = server.answer(_call(rid, tool, arguments))
    assert answer["id"] == rid
    result = answer["result"]
    assert result["isError"] is True
    envelope = result["structuredContent"]
    assert envelope["code"] == code
    assert envelope["details"] == {"loc": loc, "reason": "invalid_unicode"}
    assert json.loads(result["content"][0]["text"]) == envelope


@pytest.mark.parametrize(
    ("raw", "code", "rid"),
    [
        (b'{"jsonrpc":"2.0","id":21,"method":"tools/ca', types.PARSE_ERROR, None),  # JSON cut short
        (b"not json at all", types.PARSE_ERROR, None),
        (b'{"jsonrpc":"2.0","id":22,"method":"tools/list","params":{"x":"\xff\xfe"}}', types.PARSE_ERROR, None),
        (b"[1, 2]", types.INVALID_REQUEST, None),
        (b'{"id":23,"method":7}', types.INVALID_REQUEST, 23),
    ],
)
def test_unreadable_line_gets_a_json_rpc_error(server, raw, code, rid):
    answer = server.answer(raw)
    assert answer["jsonrpc"] == "2.0"
    assert answer["id"] == rid
    assert answer["error"]["code"] == code
    assert "result" not in answer


def test_the_session_goes_on_after_bad_lines(server):
    server.send(b"{{{")
    first = server.answers.get(timeout=ANSWER_S)
    assert first["error"]["code"] == types.PARSE_ERROR
    tools = server.answer(b'{"jsonrpc":"2.0","id":31,"method":"tools/list"}')
    assert tools["id"] == 31
    assert "search_memory" in {t["name"] for t in tools["result"]["tools"]}


def test_parse_line_passes_valid_and_surrogate_messages_on():
    message, answer = parse_line(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    assert answer is None and isinstance(message, types.JSONRPCRequest) and message.method == "ping"
    message, answer = parse_line(_call(2, "search_memory", r'{"query":"x\ud800"}'))
    assert answer is None and message.params["arguments"]["query"] == "x\ud800"
    message, answer = parse_line(b'{"jsonrpc":"2.0","id":"a","error":{"code":-1,"message":"m"}}')
    assert answer is None and isinstance(message, types.JSONRPCError)  # a client's error reply is passed on
    message, answer = parse_line(b'{"jsonrpc":"2.0","id":true,"method":7}')
    assert message is None and answer.id is None and answer.error.code == types.INVALID_REQUEST


# ---- bounds: nesting depth, line size, invalid ids (issue 27, attack pass) -------------------------------------------
BOMB = b"[" * 1100 + b"]" * 1100  # 2.2 KB: the stdlib parser's recursion took the process down (exit 1)


def _collect(server: RawStdio, n: int) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        try:
            out.append(server.answers.get(timeout=ANSWER_S))
        except queue.Empty:
            pytest.fail(f"{len(out)} answers of {n}: {out}")
    return out


def test_a_bomb_an_object_id_and_a_huge_line_are_answered_and_the_session_goes_on(server):
    lines = [
        b'{"jsonrpc":"2.0","id":41,"method":"tools/list"}',
        BOMB,
        b'{"jsonrpc":"2.0","id":42,"method":"tools/list","params":{"x":' + BOMB + b"}}",
        b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":[7],"method":"ping"}',
        b'{"jsonrpc":"2.0","id":43,"method":"tools/list","params":{"x":"' + b"a" * (2 * 1024 * 1024) + b'"}}',
        b'{"jsonrpc":"2.0","id":44,"method":"tools/list"}',
    ]
    for line in lines:  # written back to back: an answer to an earlier line must not be lost to a later one
        server.send(line)
    answers = _collect(server, len(lines))
    results = sorted(a["id"] for a in answers if "result" in a)
    errors = sorted((a["error"]["code"], a["id"]) for a in answers if "error" in a)
    assert results == [41, 44]
    assert errors == [
        (types.PARSE_ERROR, None),  # the bomb
        (types.PARSE_ERROR, None),  # the bomb inside params
        (types.INVALID_REQUEST, None),  # the object id
        (types.INVALID_REQUEST, None),  # the array id
        (types.INVALID_REQUEST, None),  # the line over mcp_stdio_max_line_bytes
    ]
    assert server.proc.poll() is None
    assert server.answer(b'{"jsonrpc":"2.0","id":45,"method":"ping"}') == {"jsonrpc": "2.0", "id": 45, "result": {}}


def test_the_bounds_are_settings(tmp_path):
    env_bounds = {"CE_HTTP__MCP_STDIO_MAX_LINE_BYTES": "2048", "CE_HTTP__MCP_STDIO_MAX_JSON_DEPTH": "4"}
    s = RawStdio(tmp_path / "home", env=env_bounds)
    try:
        deep = s.answer(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":[[[[1]]]]}}')  # depth 5
        assert (deep["id"], deep["error"]["code"]) == (None, types.PARSE_ERROR)
        assert "4" in deep["error"]["message"]
        shallow = s.answer(b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"a":[[1]]}}')  # depth 3
        assert shallow == {"jsonrpc": "2.0", "id": 2, "result": {}}
        long = s.answer(b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"a":"' + b"x" * 2048 + b'"}}')
        assert (long["id"], long["error"]["code"]) == (None, types.INVALID_REQUEST)
        assert "2048" in long["error"]["message"]
        assert s.answer(b'{"jsonrpc":"2.0","id":4,"method":"ping"}')["id"] == 4
    finally:
        assert s.close() == 0


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (BOMB, types.PARSE_ERROR),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\\ud800","y":' + BOMB + b"}}", types.PARSE_ERROR),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', types.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', types.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', types.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', types.INVALID_REQUEST),
    ],
)
def test_parse_line_answers_a_bomb_and_an_invalid_id_with_id_null(raw, code):
    message, answer = parse_line(raw)
    assert message is None and answer.id is None and answer.error.code == code


def test_parse_line_counts_depth_outside_strings_only():
    brackets_in_a_string = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":"' + b"[{" * 500 + b'\\"["}}'
    message, answer = parse_line(brackets_in_a_string)
    assert answer is None and message.params["s"].startswith("[{[{")
    message, answer = parse_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert answer is None and isinstance(message, types.JSONRPCNotification)  # a notification has no id: fine
