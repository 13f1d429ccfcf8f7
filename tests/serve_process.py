"""``context-engine serve`` as a real child process on a free loopback port, for tests that need the server as a user
runs it (workers, the docs' curl examples, the offline OpenAPI pages).

The command runs these sources (``python -c`` on the CLI entry point with this interpreter and the caller's
environment, so ``PYTHONPATH`` and the suite's ``CE_*`` variables apply). Its output goes to a log file that a
failed start quotes. The process is started in its own session and stopped by its process group (uvicorn's workers
are its children): SIGTERM, then SIGKILL after a bounded wait.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Self

import httpx

#: The CLI entry point run with the current interpreter (the sources under test, whatever script is on PATH).
CLI = [sys.executable, "-c", "from context_engine.interfaces.cli.app import main; main()"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    """``context-engine --home HOME serve --port <free> *args`` until ``/readyz`` answers 200 (``start_timeout_s``)."""

    def __init__(
        self, home: Path, *args: str, env: dict[str, str] | None = None, start_timeout_s: float = 300.0
    ) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = home.parent / f"serve-{self.port}.log"
        self.args = args
        self.env = {**os.environ, **(env or {})}
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Self:
        cmd = [*CLI, "--home", str(self.home), "serve", "--host", "127.0.0.1", "--port", str(self.port), *self.args]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
            )
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=5).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"serve not ready after {self.start_timeout_s} s:\n{self.log()}")
            time.sleep(0.25)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def __exit__(self, *exc: object) -> None:
        self.stop()
