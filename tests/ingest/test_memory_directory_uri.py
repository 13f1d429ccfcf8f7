"""A memory is a file: a directory URI (trailing ``/``) as the place of one memory is ``400 WRT-4001``
(ingest/requests.py ``check_memory_file_uri``, called by ``memory_doc``). Before, ``add_memory(uri=".../x/")``
answered ``.../x/``, stored the file ``.../x``, and a later write to ``.../x/child.md`` was a 409."""

from __future__ import annotations

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.ingest.requests import check_memory_file_uri
from context_engine.schema.context import RequestContext
from context_engine.schema.uri import ContextURI

ALICE = RequestContext(account_id="default", role="user", user_space="alice")


@pytest.mark.parametrize("uri", ["ctx://user/alice/memories/x/", "ctx://user/alice/memories/", "ctx://user/alice/"])
def test_a_directory_uri_is_refused_with_the_bad_uri_code(uri):
    with pytest.raises(ContextEngineError) as caught:
        check_memory_file_uri(ContextURI.parse(uri))
    err = caught.value
    assert err.code is ErrorCode.URI_INVALID and err.code.value == "WRT-4001" and err.code.http_status == 400
    assert err.details == {"uri": uri, "field": "uri"}
    assert f"{uri}note.md" in err.message


@pytest.mark.parametrize("uri", ["ctx://user/alice/memories/x", "ctx://user/alice/memories/x/child.md"])
def test_a_file_uri_passes(uri):
    assert check_memory_file_uri(ContextURI.parse(uri)) is None


@pytest.fixture
def engine(tmp_path):
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings
    from tests.retrieval.conftest import HashEmbedder

    e = ContextEngineService(load_settings(tmp_path / "home"), embedder=HashEmbedder())
    yield e
    e.close()


def test_add_memory_at_a_directory_uri_is_refused_and_the_directory_stays_usable(engine):
    with pytest.raises(ContextEngineError) as caught:
        engine.add_memory("Alice's notes.", ALICE, uri="ctx://user/alice/memories/x/")
    assert caught.value.code is ErrorCode.URI_INVALID
    assert engine.list_memories(ALICE).total == 0
    report = engine.add_memory("A child note.", ALICE, uri="ctx://user/alice/memories/x/child.md")
    assert report.uris == ["ctx://user/alice/memories/x/child.md"]
