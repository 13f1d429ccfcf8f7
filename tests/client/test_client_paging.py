"""read_memory paging through the sync and async clients against a real server (issue 29): a 45 kB document read
whole by following ``next_offset``; ``offset``/``max_chars`` are sent only when they differ from the defaults."""

from __future__ import annotations

import asyncio

import pytest

from context_engine.client import ApiError, AsyncClient, Client
from context_engine.errors import ErrorCode
from tests.client.conftest import World
from tests.http.test_read_paging import BODY

pytestmark = pytest.mark.slow

URI = "ctx://resources/paging/long-runbook.md"


@pytest.fixture(scope="module")
def long_doc(world: World) -> str:
    with Client(world.url, world.admin_key) as admin:
        admin.add_resource_text(BODY, URI)
    return URI


def test_sync_client_reads_the_whole_document(world: World, long_doc: str) -> None:
    with Client(world.url, world.alice_key) as client:
        parts, offset = [], 0
        while offset is not None:
            r = client.read_memory(long_doc, "L2", offset=offset, max_chars=8000)
            assert r.total_chars == len(BODY) and len(r.block.content_excerpt or "") <= 8000
            parts.append(r.block.content_excerpt or "")
            offset = r.next_offset
        assert "".join(parts) == BODY and len(parts) >= 6
        with pytest.raises(ApiError) as err:
            client.read_memory(long_doc, "L2", max_chars=0)
        assert err.value.code is ErrorCode.QUERY_INVALID and err.value.status_code == 400


def test_async_client_reads_the_whole_document(world: World, long_doc: str) -> None:
    async def main() -> str:
        async with AsyncClient(world.url, world.alice_key) as client:
            parts, offset = [], 0
            while offset is not None:
                r = await client.read_memory(long_doc, "L2", offset=offset)
                parts.append(r.block.content_excerpt or "")
                offset = r.next_offset
            return "".join(parts)

    assert asyncio.run(main()) == BODY
