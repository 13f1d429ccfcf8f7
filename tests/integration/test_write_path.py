"""The write path on the real model and stores: bad input leaves the store as it was; interrupted writes go pending."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import Level

DOC = "# Disk Pressure\n\n## Meaning\n\nThe node is running out of disk space.\n\n## Fix\n\nDelete old images.\n"


def snapshot(engine) -> tuple:
    """Everything a user could observe of the store."""
    home = engine.settings.home_path
    files = sorted((str(p.relative_to(home)), p.read_bytes()) for p in (home / "content").rglob("*") if p.is_file())
    nodes = [(n.uri, n.index_status, n.content_hash) for n in engine.metadata.list_all_nodes("default")]
    vectors = sorted(v.id for batch in engine.metadata.iter_vectors("default") for v in batch)
    return files, nodes, vectors, engine.index.count()


@pytest.fixture
def seeded(make_engine, tmp_path):
    engine = make_engine()
    src = tmp_path / "src"
    src.mkdir()
    (src / "disk.md").write_text(DOC, encoding="utf-8")
    engine.add_resource(src, "ctx://resources/ops/")
    return engine


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / "bad" / name
    p.parent.mkdir(exist_ok=True)
    p.write_bytes(data)
    return p


@pytest.mark.parametrize(
    ("name", "data", "uri", "code"),
    [
        ("ok.md", DOC.encode(), "ctx://resources/../x/", ErrorCode.URI_INVALID),
        ("ok.md", DOC.encode(), "ctx://resources/a//b/", ErrorCode.URI_INVALID),
        ("ok.md", DOC.encode(), "ctx://resources/a\x01/", ErrorCode.URI_INVALID),
        ("ok.md", DOC.encode(), "ctx://resources/" + "x" * 1100, ErrorCode.URI_INVALID),
        ("notes.pdf", b"%PDF-1.4", "ctx://resources/ops/", ErrorCode.UNSUPPORTED_FORMAT),
        ("empty.md", b"", "ctx://resources/ops/", ErrorCode.CONTENT_INVALID),
        ("blank.md", b"  \n\n\t\n", "ctx://resources/ops/", ErrorCode.CONTENT_INVALID),
        ("binary.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "ctx://resources/ops/", ErrorCode.CONTENT_INVALID),
        ("latin1.md", "# Caf\xe9\n\nna\xefve".encode("latin-1"), "ctx://resources/ops/", ErrorCode.CONTENT_INVALID),
    ],
)
def test_bad_input_is_rejected_and_store_unchanged(seeded, tmp_path, name, data, uri, code):
    before = snapshot(seeded)
    path = write(tmp_path, name, data)
    with pytest.raises(ContextEngineError) as exc:
        seeded.add_resource(path, uri)
    assert exc.value.code is code
    assert exc.value.message  # says what to fix
    assert snapshot(seeded) == before


def test_missing_path(seeded, tmp_path):
    before = snapshot(seeded)
    with pytest.raises(ContextEngineError) as exc:
        seeded.add_resource(tmp_path / "does-not-exist.md", "ctx://resources/ops/")
    assert exc.value.code is ErrorCode.PATH_NOT_FOUND
    assert snapshot(seeded) == before


def test_file_over_size_limit(make_engine, tmp_path):
    engine = make_engine(ingest={"max_file_bytes": 100})
    before = snapshot(engine)
    path = write(tmp_path, "big.md", ("# Big\n\n" + "word " * 100).encode())
    with pytest.raises(ContextEngineError) as exc:
        engine.add_resource(path, "ctx://resources/ops/")
    assert exc.value.code is ErrorCode.PAYLOAD_TOO_LARGE
    assert exc.value.details["limit_bytes"] == 100
    assert snapshot(engine) == before


def test_directory_ingest_counts_failures_and_keeps_good_files(make_engine, tmp_path):
    engine = make_engine()
    d = tmp_path / "mixed"
    d.mkdir()
    (d / "good.md").write_text(DOC, encoding="utf-8")
    (d / "empty.md").write_bytes(b"")
    (d / "image.png").write_bytes(b"\x89PNG")
    report = engine.add_resource(d, "ctx://resources/mixed/")
    assert (report.nodes, report.failed, report.skipped) == (1, 1, 1)
    assert report.failures[0]["code"] == "WRT-4221"
    with pytest.raises(ContextEngineError) as exc:
        engine.add_resource(d, "ctx://resources/strict/", strict=True)
    assert exc.value.code is ErrorCode.CONTENT_INVALID
    assert engine.metadata.get_node("default", "ctx://resources/strict/") is None


def test_heading_with_breadcrumb_separator_is_kept_whole(make_engine, tmp_path):
    engine = make_engine()
    text = "# Support\n\n## 24/7 Support > Escalation\n\nPage the on-call engineer, then the duty manager.\n"
    path = write(tmp_path, "support.md", text.encode())
    engine.add_resource(path, "ctx://resources/ops/")
    from context_engine.ingest.parse import split_breadcrumb

    chunks = engine.metadata.get_vectors("default", ["ctx://resources/ops/support.md"])
    crumbs = [split_breadcrumb(v.breadcrumb) for v in chunks if v.level == 2]
    assert ["Support", "24/7 Support > Escalation"] in crumbs


class ExplodingIndex:
    """Wraps the real index and fails inside upsert, after part of the batch could have been written."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.fail = True

    def upsert(self, records):
        if self.fail:
            self.inner.upsert(records[: len(records) // 2])
            raise ContextEngineError(ErrorCode.STORAGE_FAILED, "simulated index failure", retryable=True)
        self.inner.upsert(records)

    def __getattr__(self, item):
        return getattr(self.inner, item)


def test_interrupted_index_write_leaves_node_pending_and_invisible(make_engine, tmp_path):
    engine = make_engine()
    boom = ExplodingIndex(engine.index)
    engine.index = engine.pipeline._index = boom
    path = write(tmp_path, "disk.md", DOC.encode())
    report = engine.add_resource(path, "ctx://resources/ops/")
    assert report.pending > 0
    node = engine.metadata.get_node("default", "ctx://resources/ops/disk.md")
    assert node.index_status == "pending"
    assert engine.search_memory("node running out of disk space").hits == []  # nothing half-visible
    assert engine.index.count() == 0
    boom.fail = False
    fixed = engine.reindex()
    assert fixed.nodes == report.pending
    assert engine.metadata.get_node("default", "ctx://resources/ops/disk.md").index_status == "indexed"
    assert engine.search_memory("node running out of disk space").hits[0].uri == "ctx://resources/ops/disk.md"


def test_reindex_reads_and_pushes_each_batch_under_the_index_sync_lock(seeded, monkeypatch):
    """``reindex`` reads a batch's vector rows after taking the index sync lock and pushes them before releasing it,
    as a write's sync does: a write of the same nodes committing meanwhile cannot have its newer rows replaced in
    the vector index by the older ones read before it."""
    metadata, index = seeded.pipeline._metadata, seeded.pipeline._index
    real_lock, real_read, real_upsert = metadata.index_sync_lock, metadata.get_vectors, index.upsert
    events: list[str] = []

    @contextlib.contextmanager
    def lock(account_id):
        with real_lock(account_id):
            events.append("lock")
            yield
            events.append("unlock")

    def read(account_id, uris):
        events.append("read")
        return real_read(account_id, uris)

    def upsert(records):
        events.append("upsert")
        return real_upsert(records)

    monkeypatch.setattr(metadata, "index_sync_lock", lock)
    monkeypatch.setattr(metadata, "get_vectors", read)
    monkeypatch.setattr(index, "upsert", upsert)
    report = seeded.reindex(full=True)
    assert report.nodes == len(seeded.metadata.list_all_nodes("default")) > 0
    assert events.count("upsert") >= 1 and events.count("read") == events.count("upsert")
    held = False
    for event in events:
        held = {"lock": True, "unlock": False}.get(event, held)
        assert held or event in ("lock", "unlock"), events


def test_embedding_failure_writes_nothing(make_engine, tmp_path):
    engine = make_engine()
    before = snapshot(engine)

    class BrokenEmbedder:
        model_name, dim = engine.embedder.model_name, engine.embedder.dim

        def embed_documents(self, texts, progress=None):
            raise ContextEngineError(ErrorCode.EMBEDDING_FAILED, "model crashed", retryable=True)

    engine.pipeline._embedder = BrokenEmbedder()
    with pytest.raises(ContextEngineError) as exc:
        engine.add_resource(write(tmp_path, "disk.md", DOC.encode()), "ctx://resources/ops/")
    assert exc.value.code is ErrorCode.EMBEDDING_FAILED and exc.value.retryable
    assert snapshot(engine) == before


def test_readd_unchanged_is_a_noop_and_changed_replaces(seeded, tmp_path):
    src = tmp_path / "src"
    before = snapshot(seeded)
    again = seeded.add_resource(src, "ctx://resources/ops/")
    assert (again.nodes, again.unchanged) == (0, 1)
    assert snapshot(seeded) == before
    (src / "disk.md").write_text(DOC.replace("Delete old images.", "Prune unused volumes."), encoding="utf-8")
    changed = seeded.add_resource(src, "ctx://resources/ops/")
    assert changed.nodes == 1
    assert "Prune unused volumes." in seeded.read("ctx://resources/ops/disk.md", Level.L2)


def test_reopen_after_close_finds_everything(make_engine, seeded):
    home = seeded.settings.home_path
    before = snapshot(seeded)
    hits = [h.uri for h in seeded.search_memory("out of disk space").hits]
    seeded.close()
    reopened = make_engine(home=home)
    assert snapshot(reopened) == before
    assert [h.uri for h in reopened.search_memory("out of disk space").hits] == hits


def test_read_levels_and_directory_l2_error(seeded):
    assert seeded.read("ctx://resources/ops/disk.md", "L0").startswith("Disk Pressure")
    assert "Meaning" in seeded.read("ctx://resources/ops/disk.md", "L1")
    assert seeded.read("ctx://resources/ops/disk.md", "L2") == DOC
    assert seeded.read("ctx://resources/ops/", "L1")
    with pytest.raises(ContextEngineError) as exc:
        seeded.read("ctx://resources/ops/", "L2")
    assert exc.value.code is ErrorCode.LEVEL_NOT_AVAILABLE
    with pytest.raises(ContextEngineError) as exc:
        seeded.read("ctx://resources/ops/nothing.md", "L1")
    assert exc.value.code is ErrorCode.URI_FORBIDDEN


def test_delete_and_move(seeded, tmp_path):
    with pytest.raises(ContextEngineError) as exc:
        seeded.delete("ctx://resources/ops/")
    assert exc.value.code is ErrorCode.CONFLICT
    seeded.move("ctx://resources/ops/disk.md", "ctx://resources/infra/disk-pressure.md")
    assert seeded.search_memory("out of disk space").hits[0].uri == "ctx://resources/infra/disk-pressure.md"
    assert seeded.read("ctx://resources/infra/disk-pressure.md", "L2") == DOC
    with pytest.raises(ContextEngineError):
        seeded.read("ctx://resources/ops/disk.md", "L2")
    seeded.delete("ctx://resources/infra/", recursive=True)
    assert all(not h.uri.startswith("ctx://resources/infra/") for h in seeded.search_memory("out of disk space").hits)
    assert seeded.metadata.get_node("default", "ctx://resources/infra/disk-pressure.md") is None


def test_memory_and_skill(make_engine):
    engine = make_engine()
    from context_engine.schema.context import RequestContext

    alice = RequestContext(account_id="default", role="user", user_space="alice", agent_space="bot")
    r = engine.add_memory("I prefer answers in Chinese with short code samples.", alice, category="preference")
    uri = r.uris[0]
    assert uri.startswith("ctx://user/alice/memories/preference/")
    s = engine.add_skill("restart-deployment", "Roll a deployment's pods one by one", "kubectl rollout restart", alice)
    assert s.uris == ["ctx://agent/bot/skills/restart-deployment.md"]
    assert engine.read(s.uris[0], "L0", alice) == "restart-deployment: Roll a deployment's pods one by one"
    bob = RequestContext(account_id="default", role="user", user_space="bob")
    with pytest.raises(ContextEngineError) as exc:
        engine.read(uri, "L1", bob)
    assert exc.value.code is ErrorCode.URI_FORBIDDEN
    assert all(h.uri != uri for h in engine.search_memory("preferred answer language", bob).hits)
    assert engine.search_memory("preferred answer language", alice).hits[0].uri == uri


def test_move_keeps_context_type_and_renames_directories(seeded):
    with pytest.raises(ContextEngineError) as exc:
        seeded.move("ctx://resources/ops/disk.md", "ctx://user/default/memories/general/disk.md")
    assert exc.value.code is ErrorCode.URI_INVALID
    seeded.move("ctx://resources/ops/", "ctx://resources/operations/")
    moved = seeded.metadata.get_node("default", "ctx://resources/operations/")
    assert moved.title == "operations"
    assert "operations" in seeded.read("ctx://resources/operations/", "L0")
    assert "ctx://resources/operations/" in [n.uri for n in seeded.ls("ctx://resources/")]
    assert seeded.metadata.get_node("default", "ctx://resources/ops/") is None


def test_a_file_moved_to_a_new_directory_uri_goes_inside_it(seeded):
    """Failed at 0178f2f (an attack pass): the trailing slash of a directory that did not exist yet was dropped, and
    the file became the extensionless ``ctx://resources/cp2``."""
    report = seeded.move("ctx://resources/ops/disk.md", "ctx://resources/cp2/")
    assert report.uris == ["ctx://resources/cp2/disk.md"]
    assert seeded.read("ctx://resources/cp2/disk.md", "L2") == DOC
    assert seeded.metadata.get_node("default", "ctx://resources/cp2/").is_dir
    assert (
        seeded.metadata.get_node("default", "ctx://resources/cp2") is None
        or seeded.metadata.get_node("default", "ctx://resources/cp2").is_dir
    )


def test_memory_abstract_is_its_lead_not_a_slug(make_engine):
    engine = make_engine()
    r = engine.add_memory("Alice's team runs on GKE in europe-west1. They deploy on Fridays.")
    assert engine.read(r.uris[0], "L0") == "Alice's team runs on GKE in europe-west1. They deploy on Fridays."
