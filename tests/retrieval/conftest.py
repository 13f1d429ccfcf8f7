"""Fakes and fixtures for the retrieval unit and property tests.

``HashEmbedder`` is a deterministic bag-of-words embedder (no model): texts that share words are similar, so the
stages can be tested on real stores in milliseconds. Integration tests on the real model live in
``tests/integration/test_search_memory.py``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import Level
from context_engine.settings import load_settings

_WORD = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]")


class HashEmbedder:
    """Deterministic test embedder: each word (ASCII run or CJK character) is hashed to a signed unit direction."""

    model_name = "test/hash-embedder"
    dim = 64

    def _one(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            idx = int.from_bytes(digest[:4], "little") % self.dim
            vec[idx] += 1.0 if digest[4] & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:
            vec[0] = 1.0
            return vec
        return vec / norm

    def embed_documents(self, texts: Sequence[str], *, progress: Any = None) -> np.ndarray:
        out = np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, self.dim), dtype=np.float32)
        if progress:
            progress(len(texts))
        return out.astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)


class CountingContent:
    """Wraps a content store and records every ``read_level`` call as ``(uri, level)``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reads: list[tuple[str, Level]] = []

    def read_level(self, account_id: str, uri: str, level: Level) -> str | None:
        self.reads.append((uri, Level(level)))
        return self.inner.read_level(account_id, uri, level)

    def __getattr__(self, item: str) -> Any:
        return getattr(self.inner, item)


ADMIN = RequestContext(account_id="default", role="admin")
ALICE = RequestContext(account_id="default", role="user", user_space="alice", agent_space="helper")
BOB = RequestContext(account_id="default", role="user", user_space="bob", agent_space="other")


@pytest.fixture
def hash_engine(tmp_path: Path) -> Callable[..., Any]:
    """Factory: ``hash_engine(**settings_overrides)`` -> a service on the hashing embedder (closed at teardown)."""
    from context_engine.service import ContextEngineService

    opened: list[Any] = []

    def make(parts: dict[str, Any] | None = None, home: Path | None = None, **overrides: Any) -> Any:
        settings = load_settings(home or tmp_path / f"home{len(opened)}", **overrides)
        engine = ContextEngineService(settings, embedder=HashEmbedder(), **(parts or {}))
        opened.append(engine)
        return engine

    yield make
    for engine in opened:
        engine.close()


def seed_small_store(engine: Any) -> None:
    """A few resources, memories and skills in the default account (alice, bob, helper, other spaces)."""
    engine.add_text(
        "# Disk pressure\n\nThe node is running out of disk space.\n\n## Fix\n\nDelete old container images.\n",
        "ctx://resources/ops/storage/disk-pressure.md",
        ADMIN,
    )
    engine.add_text(
        "# Pod crash loop\n\nA container keeps crashing and restarting.\n\n## Fix\n\nCheck the logs of the pod.\n",
        "ctx://resources/ops/kubernetes/pod-crash-loop.md",
        ADMIN,
    )
    engine.add_text(
        "# Certificate expiry\n\nA TLS certificate expires soon.\n\n## Fix\n\nRenew the certificate.\n",
        "ctx://resources/ops/network/certificate-expiry.md",
        ADMIN,
    )
    engine.add_memory("Alice prefers short answers with code samples.", ALICE, category="preference")
    engine.add_memory("Alice works on the payments team in Berlin.", ALICE, category="profile")
    engine.add_memory("Bob prefers long detailed answers.", BOB, category="preference")
    engine.add_skill("restart-deployment", "Restart a deployment's pods one by one", "kubectl rollout restart", ALICE)
    engine.add_skill("rotate-keys", "Rotate the signing keys of a service", "run rotate.sh", BOB)
