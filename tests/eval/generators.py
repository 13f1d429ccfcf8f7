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
