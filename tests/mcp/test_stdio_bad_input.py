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

    def __init__(self, home: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CE_")}
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
    body = f'{{"jsonrpc":"2.0","id":{rid},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments_json}}}}}'
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
