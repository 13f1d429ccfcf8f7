"""A Milvus Lite server of a test's own (the milvus-lite wheel's gRPC server on 127.0.0.1), for the fault tests that
kill and restart it; the conformance suites use the shared one of ``scripts/services.sh up milvus``."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MilvusLiteServer:
    """``python -m milvus_lite server`` on ``data_dir`` and ``port``; :meth:`kill` and :meth:`start` again."""

    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> MilvusLiteServer:
        """Start it and wait until it answers a pymilvus call."""
        from pymilvus import MilvusClient

        log = open(self.data_dir.parent / f"milvus-{self.port}.log", "ab")  # noqa: SIM115 - the child holds it
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(self.data_dir)]
            + ["--host", "127.0.0.1", "--port", str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                client = MilvusClient(uri=self.uri, timeout=2, dedicated=True)
                client.list_collections()
                client.close()
                return self
            except Exception:  # noqa: BLE001 - not listening yet
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError(f"milvus-lite did not start on port {self.port}") from None
                time.sleep(0.3)

    def kill(self) -> None:
        """SIGKILL (a crash): nothing flushed, nothing closed."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait(30)
        self._proc = None


@pytest.fixture
def milvus_lite_server(tmp_path: Path):
    """A started private server, killed at teardown (skips when the milvus-lite wheel is not installed)."""
    pytest.importorskip("milvus_lite", reason="milvus-lite is a test dependency (pip install -e .[test])")
    server = MilvusLiteServer(tmp_path / "milvus-data").start()
    yield server
    server.kill()
