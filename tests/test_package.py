"""The package's public names (issue 28): ``from context_engine import ContextEngine`` and the rest of ``__all__``,
imported on first access so that ``import context_engine`` stays light (issue 12, cold start)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import context_engine


def test_every_public_name_is_importable_from_the_package() -> None:
    from context_engine import ContextEngine
    from context_engine.service import ContextEngineService

    assert ContextEngine is ContextEngineService
    for name in context_engine.__all__:
        assert getattr(context_engine, name) is not None, name
    assert set(context_engine.__all__) <= set(dir(context_engine))


def test_importing_the_package_does_not_import_the_engine() -> None:
    code = (
        "import sys, context_engine\n"
        "print('context_engine.service' in sys.modules)\n"
        "from context_engine import ContextEngine\n"
        "print('context_engine.service' in sys.modules, ContextEngine.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == ["False", "True ContextEngineService"]


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchName"):
        getattr(context_engine, "NoSuchName")  # noqa: B009 - the lookup of a missing name is the test
