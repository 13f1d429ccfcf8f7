"""read_memory pages L2 (issue 29): ``offset`` and ``max_chars`` in, ``next_offset`` (null at the end) and
``total_chars`` out, the same on the Python API, HTTP and MCP. A 45 kB document is read whole by following
``next_offset`` (it used to stop at 12,000 characters with no way to read the rest); bad paging values are
``RET-4001`` everywhere; a secret straddling a page boundary is redacted whole."""

from __future__ import annotations

import anyio
import pytest

from context_engine.errors import ContextEngineError
from context_engine.interfaces.mcp.server import build_mcp_server
from context_engine.schema.query import ReadMemoryRequest
from tests.http.conftest import ACME_ADMIN

URI = "ctx://resources/paging/long-runbook.md"
BODY = "# Long runbook\n\n" + "".join(
    f"## Step {i}\n\nCheck the disk usage of node-{i:04d} with df -h and prune images older than {i} days.\n\n"
    for i in range(470)
)
CEILING = 12_000  # retrieval.read.l2_excerpt_max_chars


@pytest.fixture(scope="module")
def long_doc(service):
    assert 44_000 < len(BODY) < 50_000  # a 45 kB document
    service.add_text(BODY, URI, ACME_ADMIN)
    return URI


def _follow(read_page) -> tuple[str, list[int]]:
    """Concatenate the pages of ``read_page(offset) -> (text, next_offset, total_chars)`` until next_offset is
    null; returns the text and the offsets asked."""
    offset, parts, offsets = 0, [], []
    for _ in range(100):
        text, nxt, total = read_page(offset)
        assert total == len(BODY)
        offsets.append(offset)
        parts.append(text)
        if nxt is None:
            return "".join(parts), offsets
        assert nxt > offset
        offset = nxt
    raise AssertionError("next_offset never became null")


def test_python_reads_the_whole_document_by_following_next_offset(service, long_doc):
    first = service.read_memory(long_doc, ACME_ADMIN, level="L2")
    assert first.offset == 0 and first.total_chars == len(BODY)
    assert first.next_offset is not None and len(first.block.content_excerpt) <= CEILING
    assert first.block.content_excerpt.endswith("\n")  # cut at a line boundary

    def page(offset):
        r = service.read_memory(ReadMemoryRequest(uri=long_doc, level="L2", offset=offset), ACME_ADMIN)
        return r.block.content_excerpt, r.next_offset, r.total_chars

    text, offsets = _follow(page)
    assert text == BODY and len(offsets) == 4


def test_http_reads_the_whole_document_with_a_smaller_page(client, tenants, long_doc):
    def page(offset):
        body = {"uri": long_doc, "level": "L2", "offset": offset, "max_chars": 5000}
        r = client.post("/api/v1/read_memory", json=body, headers=tenants.admin)
        assert r.status_code == 200, r.text
        data = r.json()
        assert data["offset"] == offset and len(data["block"]["content_excerpt"]) <= 5000
        return data["block"]["content_excerpt"], data["next_offset"], data["total_chars"]

    text, offsets = _follow(page)
    assert text == BODY and len(offsets) >= 10


def test_mcp_reads_the_whole_document(service, long_doc):
    server = build_mcp_server(lambda: service, lambda _r: ACME_ADMIN)

    def page(offset):
        result = anyio.run(server.call_tool, "read_memory", {"uri": long_doc, "level": "L2", "offset": offset})
        assert not result.is_error, result
        data = result.structured_content
        return data["block"]["content_excerpt"], data["next_offset"], data["total_chars"]

    text, _ = _follow(page)
    assert text == BODY


def test_l1_and_short_documents_have_no_next_page(service, client, tenants, long_doc):
    l1 = service.read_memory(long_doc, ACME_ADMIN, level="L1")
    assert l1.next_offset is None and l1.total_chars is None and l1.block.overview
    short = "ctx://resources/paging/short.md"
    service.add_text("# Short\n\nOne line.\n", short, ACME_ADMIN)
    r = client.post("/api/v1/read_memory", json={"uri": short, "level": "L2"}, headers=tenants.admin).json()
    assert r["next_offset"] is None and r["total_chars"] == len("# Short\n\nOne line.\n")
    assert r["block"]["content_excerpt"] == "# Short\n\nOne line.\n"  # no marker appended: pages join exactly


@pytest.mark.parametrize(
    "fields",
    [
        {"offset": -1},
        {"max_chars": 0},
        {"max_chars": CEILING + 1},
        {"offset": len(BODY) + 1},
        {"level": "L1", "offset": 5},
    ],
)
def test_bad_paging_values_are_ret_4001_everywhere(service, client, tenants, long_doc, fields):
    args = {"uri": long_doc, "level": "L2", **fields}
    with pytest.raises(ContextEngineError) as err:
        service.read_memory(ReadMemoryRequest(**args), ACME_ADMIN)
    assert err.value.code.value == "RET-4001"
    r = client.post("/api/v1/read_memory", json=args, headers=tenants.admin)
    assert r.status_code == 400 and r.json()["code"] == "RET-4001"
    server = build_mcp_server(lambda: service, lambda _r: ACME_ADMIN)
    result = anyio.run(server.call_tool, "read_memory", args)
    assert result.is_error and result.structured_content["code"] == "RET-4001"


def test_a_secret_across_a_page_boundary_is_redacted_whole(service):
    key = "-----BEGIN PRIVATE KEY-----\n" + "\n".join("A" * 60 for _ in range(40)) + "\n-----END PRIVATE KEY-----\n"
    uri = "ctx://resources/paging/key.md"
    service.add_text("# Key\n\n" + "filler line\n" * 50 + key + "after the key\n", uri, ACME_ADMIN)
    offset, pages = 0, []
    while offset is not None:
        r = service.read_memory(ReadMemoryRequest(uri=uri, level="L2", offset=offset, max_chars=300), ACME_ADMIN)
        pages.append(r.block.content_excerpt)
        offset = r.next_offset
    assert len(pages) > 2 and not any("AAAAAAAAAA" in p for p in pages)
    assert "".join(pages).endswith("after the key\n")
