"""A content store belongs to one metadata database (issue 13, docs/deployment.md "Scale-out"): both carry the
deployment's identity, stamped on first use, and an engine whose ``metadata.url`` names another database is refused
before it writes to, or collects garbage from, that content (a wrong or missing ``metadata.url`` beside a shared
bucket made ``reindex --gc`` delete a live deployment's content)."""

from __future__ import annotations

import pytest

from context_engine.errors import ContextEngineError


def test_content_of_another_metadata_database_is_refused(make_engine, tmp_path):
    shared = f"file://{tmp_path / 'shared-content'}"
    first = make_engine(tmp_path / "a", content={"url": shared})
    first.add_text("The payment gateway times out under load.", "ctx://resources/ops/gateway.md")
    store_id = first.metadata.get_meta("store_id")
    assert store_id and first.content.read_stamp() == store_id
    first.close()

    with pytest.raises(ContextEngineError) as err:  # a fresh metadata database (e.g. metadata.url left unset)
        make_engine(tmp_path / "b", content={"url": shared})
    assert err.value.code == "CFG-4001" and "content.url" in err.value.message
    assert err.value.details["store_stamp"] == store_id

    again = make_engine(tmp_path / "a", content={"url": shared})  # its own database: accepted, content intact
    assert "times out" in again.read("ctx://resources/ops/gateway.md", "L2")


def test_gc_refuses_an_empty_metadata_database_beside_content(make_engine, tmp_path):
    from context_engine.schema.context import RequestContext

    engine = make_engine(tmp_path / "a")
    engine.add_text("Disk almost full on the build nodes.", "ctx://resources/ops/disk.md")
    engine.close()
    # the stamp is removed, as by a content store that predates it: only the gc guard stands between it and deletion
    (tmp_path / "a" / "content" / "@store-id").unlink()
    other = make_engine(tmp_path / "b", content={"url": f"file://{tmp_path / 'a' / 'content'}"})
    with pytest.raises(ContextEngineError) as err:
        other.collect_garbage(RequestContext(account_id="default", role="admin"))
    assert err.value.code == "CFG-4001" and "metadata.url" in err.value.message
    assert (tmp_path / "a" / "content" / "default").is_dir()  # nothing removed


def test_a_milvus_collection_of_another_deployment_is_refused(make_engine, tmp_path):
    import uuid

    from tests.services import require_service

    vector = {
        "backend": "milvus",
        "milvus": {
            "uri": require_service("CE_TEST_MILVUS_URI", "milvus"),
            "collection_prefix": f"own{uuid.uuid4().hex[:8]}",
        },
    }
    first = make_engine(tmp_path / "a", vector=vector)
    assert first.index.read_stamp() == first.metadata.get_meta("store_id")
    first.close()
    with pytest.raises(ContextEngineError) as err:  # another metadata database, the same collection
        make_engine(tmp_path / "b", vector=vector)
    assert err.value.code == "CFG-4001" and err.value.details["setting"] == "vector.milvus.collection_prefix"
    reopened = make_engine(tmp_path / "a", vector=vector)
    reopened.index.drop()
