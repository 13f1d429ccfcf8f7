"""Milvus adapter specifics (storage/vector/milvus_index.py) beyond the shared vector conformance suite: the
collection per model and dimension, the start-up and mid-request failures (a private Milvus Lite server killed with
SIGKILL), transient errors retried and counted, credentials never shown, and the VARCHAR limits.

Tests that use the shared server skip when ``scripts/services.sh up milvus`` has not run; the fault tests start a
server of their own from the milvus-lite wheel.
"""

from __future__ import annotations

import uuid

import grpc
import numpy as np
import pymilvus
import pytest
from pydantic import SecretStr

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import VectorFilter
from context_engine.settings import MilvusSettings, load_settings
from context_engine.storage.factory import open_vector_index
from context_engine.storage.vector.milvus_index import MilvusVectorIndex, collection_name, milvus_address
from tests.milvus_lite_server import free_port, milvus_lite_server  # noqa: F401 - fixture
from tests.services import require_service
from tests.storage.conftest import drop_milvus_collections
from tests.storage.test_vector_conformance import rec, unit

DIM = 8
TOKEN = "root:S3cret-Token-7f"


@pytest.fixture
def shared_uri():
    """The shared test server's address and a collection prefix of this test's own (dropped at teardown)."""
    uri = require_service("CE_TEST_MILVUS_URI", "milvus")
    prefix = f"t{uuid.uuid4().hex[:16]}"
    yield uri, prefix
    drop_milvus_collections(uri, f"{prefix}_")


# ---------------------------------------------------------------------------------------------------- naming


def test_collection_name_per_model_and_dimension() -> None:
    s = MilvusSettings(collection_prefix="ce")
    assert (
        collection_name(s, "sentence-transformers/all-MiniLM-L6-v2", 384)
        == "ce_sentence_transformers_all_minilm_l6_v2_384"
    )
    assert collection_name(s, "", 512) == "ce_512"
    long = collection_name(s, "m" * 400, 1024)
    assert len(long) <= 255 and long.startswith("ce_mmm") and long.endswith("_1024")


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("http://127.0.0.1:19530", "http://127.0.0.1:19530"),
        ("https://user:pw@milvus.example:443/x?token=abc", "https://milvus.example:443/x"),
        ("http://[::1]:19530", "http://[::1]:19530"),
    ],
)
def test_address_never_shows_credentials(uri: str, shown: str) -> None:
    assert milvus_address(uri) == shown


# ---------------------------------------------------------------------------------------------------- start-up


def test_unreachable_milvus_at_start_is_cfg_4001_without_the_token(tmp_path, monkeypatch) -> None:
    port = free_port()  # nothing listens there
    monkeypatch.setenv("CE_VECTOR__MILVUS__TOKEN", TOKEN)  # where a deployment keeps it
    settings = load_settings(
        tmp_path / "home",
        vector={"backend": "milvus", "milvus": {"uri": f"http://admin:pw-in-url@127.0.0.1:{port}", "timeout_s": 2}},
    )
    assert settings.vector.milvus.token is not None and settings.vector.milvus.token.get_secret_value() == TOKEN
    with pytest.raises(ContextEngineError) as info:
        open_vector_index(settings, None, DIM, model_name="m")  # type: ignore[arg-type]
    err = info.value
    assert err.code is ErrorCode.CONFIG_INVALID and not err.retryable
    assert "vector.milvus.uri" in err.message and f"http://127.0.0.1:{port}" in err.message
    assert err.details["setting"] == "vector.milvus.uri"
    shown = f"{err.message} {err.details} {err!r} {err.__cause__!r}"
    assert "S3cret" not in shown and "pw-in-url" not in shown
    assert err.__cause__ is None and err.__suppress_context__  # the vendor exception is not printed with it


def test_open_creates_a_loaded_collection_and_reopens_it(shared_uri) -> None:
    uri, prefix = shared_uri
    settings = MilvusSettings(uri=uri, collection_prefix=prefix, timeout_s=60)
    index = MilvusVectorIndex(settings, DIM, "model-a")
    described = index._client.describe_collection(index.collection)
    fields = {f["name"]: f for f in described["fields"]}
    assert fields["account_id"].get("is_partition_key") is True
    assert fields["parent_uri"].get("nullable") is True and fields["vector"]["params"]["dim"] == DIM
    assert described["consistency_level_name"] == "Strong"
    (idx,) = index._client.list_indexes(index.collection)
    assert index._client.describe_index(index.collection, idx)["index_type"] == "FLAT"
    index.upsert([rec("a", unit(np.random.default_rng(1), 1, DIM)[0])])
    index.close()
    again = MilvusVectorIndex(settings, DIM, "model-a")
    assert again.count() == 1 and again.collection == index.collection
    other = MilvusVectorIndex(settings, DIM * 2, "model-a")  # another dimension: another collection, the first kept
    assert other.collection != again.collection and other.count() == 0 and again.count() == 1
    assert "S3cret" not in repr(again)
    for handle in (again, other):
        handle.close()


def test_a_collection_of_another_dimension_is_a_model_mismatch(shared_uri) -> None:
    uri, prefix = shared_uri
    settings = MilvusSettings(uri=uri, collection_prefix=prefix, timeout_s=60)
    client = pymilvus.MilvusClient(uri=uri)
    name = collection_name(settings, "m", DIM)
    client.create_collection(name, dimension=DIM + 1, id_type="string", max_length=64)  # someone else's schema
    client.close()
    with pytest.raises(ContextEngineError) as info:
        MilvusVectorIndex(settings, DIM, "m")
    assert info.value.code is ErrorCode.INDEX_MODEL_MISMATCH
    assert f"{DIM + 1}-dimensional" in info.value.message and str(DIM) in info.value.message


# ---------------------------------------------------------------------------------------------------- limits


def test_batches_flushes_long_texts_and_oversized_keys(shared_uri, monkeypatch) -> None:
    uri, prefix = shared_uri
    index = MilvusVectorIndex(MilvusSettings(uri=uri, collection_prefix=prefix, timeout_s=60), DIM, "m")
    flushes: list[str] = []
    real_flush = index._client.flush
    monkeypatch.setattr(index._client, "flush", lambda name, **kw: flushes.append(name) or real_flush(name, **kw))
    vectors = unit(np.random.default_rng(2), 10_500, DIM)
    long_text = "日本語" * 30_000  # 270,000 bytes: cut to Milvus's 65,535 at a character boundary
    records = [rec(f"b{i:05d}", v, text=long_text if i == 7 else f"t{i}") for i, v in enumerate(vectors)]
    index.upsert(records)  # six batches, and one flush after the first 10,000 rows
    assert index.count() == 10_500 and flushes == [index.collection]
    (hit,) = index.search(vectors[7], 1, VectorFilter(account_id="acc-a"))
    assert hit.id == "b00007" and long_text.startswith(hit.text) and 65_533 <= len(hit.text.encode()) <= 65_535
    with pytest.raises(ContextEngineError) as info:
        index.upsert([rec("huge", vectors[0], uri="ctx://resources/" + "x" * 70_000)])
    assert info.value.code is ErrorCode.REQUEST_INVALID and info.value.details == {"field": "uri"}
    with pytest.raises(ContextEngineError) as info:
        index.upsert([rec("nan", np.full(DIM, np.nan, np.float32))])
    assert info.value.code is ErrorCode.REQUEST_INVALID
    with pytest.raises(ContextEngineError) as info:
        index.upsert([rec("short", np.ones(DIM - 1, np.float32))])
    assert info.value.code is ErrorCode.INDEX_MODEL_MISMATCH
    assert index.count() == 10_500
    assert index.ids("acc-a") == sorted(r.id for r in records) and index.ids("acc-b") == []
    index.close()


# ---------------------------------------------------------------------------------------------------- faults


def test_transient_errors_are_retried_and_counted(shared_uri, monkeypatch) -> None:
    uri, prefix = shared_uri
    seen: list[str] = []
    index = MilvusVectorIndex(
        MilvusSettings(uri=uri, collection_prefix=prefix, timeout_s=60), DIM, "m", on_retry=seen.append
    )
    v = unit(np.random.default_rng(3), 1, DIM)[0]
    index.upsert([rec("a", v)])
    real = index._client.search
    failures = [pymilvus.MilvusException(code=grpc.StatusCode.UNAVAILABLE, message="connection reset")]

    def flaky(*args, **kwargs):
        if failures:
            raise failures.pop()
        return real(*args, **kwargs)

    monkeypatch.setattr(index._client, "search", flaky)
    assert [h.id for h in index.search(v, 1, VectorFilter(account_id="acc-a"))] == ["a"]
    assert index.retries == 1 and seen == ["search"]

    # A non-transient error (a bad request) is not retried: RET-5001 at once.
    failures.append(pymilvus.MilvusException(code=1100, message="invalid parameter"))
    with pytest.raises(ContextEngineError) as info:
        index.search(v, 1, VectorFilter(account_id="acc-a"))
    assert info.value.code is ErrorCode.VECTOR_SEARCH_FAILED and info.value.retryable
    assert index.retries == 1
    index.close()


def test_milvus_killed_mid_request_gives_retryable_storage_codes(milvus_lite_server) -> None:  # noqa: F811
    settings = MilvusSettings(uri=milvus_lite_server.uri, token=SecretStr(TOKEN), timeout_s=2)
    index = MilvusVectorIndex(settings, DIM, "m")
    v = unit(np.random.default_rng(4), 2, DIM)
    index.upsert([rec("a", v[0])])
    milvus_lite_server.kill()
    flt = VectorFilter(account_id="acc-a")
    calls = {
        "search": (lambda: index.search(v[0], 3, flt), ErrorCode.VECTOR_SEARCH_FAILED),
        "count": (index.count, ErrorCode.VECTOR_SEARCH_FAILED),
        "upsert": (lambda: index.upsert([rec("b", v[1])]), ErrorCode.STORAGE_FAILED),
        "delete": (lambda: index.delete(["a"]), ErrorCode.STORAGE_FAILED),
    }
    for name, (call, code) in calls.items():
        with pytest.raises(ContextEngineError) as info:
            call()
        assert info.value.code is code and info.value.retryable, name
        assert milvus_lite_server.uri in info.value.message and "S3cret" not in str(info.value), name

    milvus_lite_server.start()  # the same data and port: the row written before the crash is there, and work resumes
    assert index.count() == 1 and [h.id for h in index.search(v[0], 3, flt)] == ["a"]
    index.close()
