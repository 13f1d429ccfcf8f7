"""The dev sets' generators (eval/conversations/make_*.py) as the tests use them: imported as a module from their own
folder (they import ``make_agent_dev`` beside them, as when run as a script), or run as a script."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

FOLDER = Path(__file__).resolve().parents[2] / "eval" / "conversations"


def load_generator(monkeypatch: pytest.MonkeyPatch, name: str) -> ModuleType:
    """The generator ``name`` (``"make_agent_shapes"``) as a module."""
    monkeypatch.syspath_prepend(str(FOLDER))
    return importlib.import_module(name)


def run_generator(name: str, *args: str) -> subprocess.CompletedProcess:
    """``python eval/conversations/<name>.py ARGS``, output captured, never raising on a non-zero exit."""
    script = FOLDER / f"{name}.py"
    return subprocess.run(
        [sys.executable, str(script), *args], check=False, capture_output=True, text=True, timeout=120
    )


def assert_reproduces(name: str, tmp_path: Path) -> Path:
    """Run the generator ``name`` twice into ``tmp_path/a`` and ``tmp_path/b``: both runs write the same bytes, the
    committed files (``eval/conversations/<set>/``, ``<set>`` being ``name`` without ``make_``) are those bytes and
    under 1 MB, and ``--check`` passes. Returns ``tmp_path/a`` (a fresh copy for further checks)."""
    committed = FOLDER / name.removeprefix("make_")
    for out in ("a", "b"):
        run = run_generator(name, "--out", str(tmp_path / out))
        assert run.returncode == 0, run.stdout + run.stderr
    for file in ("turns.jsonl", "qa.jsonl"):
        data = (tmp_path / "a" / file).read_bytes()
        assert data == (tmp_path / "b" / file).read_bytes(), f"{file}: two runs differ"
        assert data == (committed / file).read_bytes(), f"{file}: rerun eval/conversations/{name}.py"
        assert len(data) < 1_000_000
    check = run_generator(name, "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    return tmp_path / "a"
