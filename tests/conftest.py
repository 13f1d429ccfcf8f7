"""Shared fixtures: the real embedding model (loaded once per session) and engines on temporary directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings as _hyp_settings

from context_engine.providers.embedder import SentenceTransformerEmbedder
from context_engine.settings import EmbeddingSettings, load_settings

# The suite's engines run on all-MiniLM-L6-v2 (the session ``embedder`` fixture): the expectations of the mechanics
# tests were written on it, and a CLI, server or MCP process opened on a fixture's home must use the model that built
# it (the index stamp refuses another). The default model (use-multilingual) is tested explicitly in
# tests/integration/test_default_model.py and tests/eval/test_ci_slice.py.
os.environ.setdefault("CE_EMBEDDING__BACKEND", "sentence-transformers")

REPO = Path(__file__).resolve().parents[1]


def pytest_addoption(parser):
    # tests/integration/test_crash_safety.py: writer processes killed per run (CI: 10; on demand: --crash-runs 100)
    parser.addoption("--crash-runs", type=int, default=10, help="SIGKILL runs of the crash-safety test")
SHARED_DATA = REPO.parent / "shared" / "data"


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data; skips the test (saying why) where the shared data is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not available at {path}")
    return path


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    emb = SentenceTransformerEmbedder(EmbeddingSettings())
    emb.warm_up()
    return emb


@pytest.fixture(scope="session")
def default_embedder():
    """The default embedding model (use-multilingual), loaded once: for tests of what a user of the defaults sees
    (the suite's ``embedder`` is MiniLM)."""
    from context_engine.providers.embedder import build_embedder
    from context_engine.settings import EmbeddingSettings

    emb = build_embedder(EmbeddingSettings(backend="use-multilingual"))
    emb.warm_up()
    return emb


@pytest.fixture
def make_engine(tmp_path, embedder):
    """Factory: ``make_engine(**settings_overrides)`` opens a ContextEngineService on a fresh directory."""
    from context_engine.service import ContextEngineService

    opened = []

    def make(home: Path | None = None, parts: dict | None = None, **overrides):
        settings = load_settings(home or tmp_path / "home", **overrides)
        engine = ContextEngineService(settings, embedder=embedder, **(parts or {}))
        opened.append(engine)
        return engine

    yield make
    for e in opened:
        e.close()


# Hypothesis runs derandomized by default so CI is deterministic; HYPOTHESIS_PROFILE=explore searches afresh.
_hyp_settings.register_profile("ci", derandomize=True, print_blob=True)
_hyp_settings.register_profile("explore", derandomize=False, print_blob=True)
_hyp_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
