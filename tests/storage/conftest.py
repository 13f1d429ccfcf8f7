"""Shared storage fixtures: one parametrised fixture per protocol, so every adapter runs the same conformance suite.

- Metadata stores: ``METADATA_BACKENDS`` maps a name to a context manager that, given ``tmp_path``, yields the
  database URL and an opener for it: ``sqlite`` (a file under ``tmp_path``) and ``postgres`` (a fresh database per
  test on the server of ``bash scripts/services.sh up postgres``; skipped when it is not running).
- Vector indexes: add a name to ``VECTOR_BACKENDS`` and a branch to :meth:`VectorIndexFactory.open`. ``milvus`` runs on
  the server of ``scripts/services.sh up milvus`` (skipped when it is not running), in collections of a prefix of its
  own per test, dropped at teardown.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import URL

from context_engine.settings import MilvusSettings, VectorSettings
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
from context_engine.storage.protocols import VectorIndex
from tests.postgres import fresh_postgres_database
from tests.services import require_service

# ---- metadata stores ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetadataBackend:
    """One metadata-store adapter under test.

    Attributes:
        name: the pytest id (``sqlite``, ``postgres``).
        url: the SQLAlchemy URL of its database, for tests that inspect or tamper with it directly.
        open: opens a new store on the same database (call again after ``close`` to test a reopen).
    """

    name: str
    url: str
    open: Callable[[], SqlMetadataStore]


@contextmanager
def _sqlite_backend(tmp_path: Path) -> Iterator[MetadataBackend]:
    path = tmp_path / "home" / "metadata.db"
    path.parent.mkdir(parents=True, exist_ok=True)  # tests may open the URL directly
    url = URL.create("sqlite", database=str(path.resolve())).render_as_string(hide_password=False)
    yield MetadataBackend("sqlite", url, lambda: SqlMetadataStore.sqlite(path))


@contextmanager
def _postgres_backend(tmp_path: Path) -> Iterator[MetadataBackend]:
    with fresh_postgres_database() as url:
        yield MetadataBackend("postgres", url, lambda: SqlMetadataStore(url))


METADATA_BACKENDS: dict[str, Callable[[Path], AbstractContextManager[MetadataBackend]]] = {
    "sqlite": _sqlite_backend,
    "postgres": _postgres_backend,
}


@pytest.fixture(params=sorted(METADATA_BACKENDS))
def metadata_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MetadataBackend]:
    """A fresh, empty database of each adapter; every store opened through it is closed at teardown."""
    with METADATA_BACKENDS[request.param](tmp_path) as backend:
        opened: list[SqlMetadataStore] = []

        def _open() -> SqlMetadataStore:
            store = backend.open()
            opened.append(store)
            return store

        try:
            yield MetadataBackend(backend.name, backend.url, _open)
        finally:
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


# ---- content stores -----------------------------------------------------------------------------------------------

CONTENT_BACKENDS = ("local", "s3")


@dataclass
class ContentBackend:
    """One content-store adapter under test.

    Attributes:
        name: ``local`` or ``s3`` (the S3 endpoint of ``scripts/services.sh``, a fresh key prefix per test).
        open: opens a store on the same root (call again to test a second process or a reopen).
        raw: every path (local: file under the root) or key (s3: below the prefix) the store holds, sorted, for
            tests that check nothing is left behind.
    """

    name: str
    open: Callable[[], Any]
    raw: Callable[[], list[str]]


@pytest.fixture(params=CONTENT_BACKENDS)
def content_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ContentBackend]:
    if request.param == "local":
        from context_engine.storage.content.local import LocalContentStore

        root = tmp_path / "content"
        yield ContentBackend(
            "local",
            lambda: LocalContentStore(root),
            lambda: sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()),
        )
        return
    from context_engine.settings import Settings
    from context_engine.storage.factory import open_content
    from tests.s3_store import drop_prefix, s3_content_settings, s3_keys

    content = s3_content_settings("conformance")
    settings = Settings(home=tmp_path / "home", content=content)
    yield ContentBackend("s3", lambda: open_content(settings), lambda: s3_keys(open_content(settings)))
    drop_prefix(content)


@pytest.fixture
def content_store(content_backend: ContentBackend) -> Any:
    """An open, empty content store of each adapter."""
    return content_backend.open()
