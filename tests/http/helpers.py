"""Test helpers for the HTTP and MCP interfaces: a real uvicorn server on a free loopback port, in a thread."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any, Self

import uvicorn

SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "src" / "context_engine" / "sample_corpus"
#: The base URL of in-process test clients (``TestClient(app, base_url=LOOPBACK_URL)``): they send the Host a loopback
#: client sends. Starlette's default, ``testserver``, is no name this server answers (http.allowed_hosts,
#: docs/security.md), and it is allowed nowhere, neither in the code nor in the tests' settings.
LOOPBACK_URL = "http://127.0.0.1:8420"


class LiveServer:
    """uvicorn serving ``app`` on ``127.0.0.1:<free port>`` in a daemon thread (bounded start and stop)."""

    def __init__(self, app: Any) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=5)
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=15)
        self._sock.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
