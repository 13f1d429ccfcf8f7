"""A 1 MB markdown document fits the default chunk limit (issue 26: "a 1 MB markdown document added in <= 15 s";
the limit bounds one request's work, docs/security.md "Cost bombs"). Chunking only: the timing is
bench/large_document.py's."""

from __future__ import annotations

import importlib.util

from context_engine.ingest.parse import MarkdownChunker, MarkdownParser
from context_engine.settings import IngestSettings
from tests.conftest import REPO, shared_data


def _bench():
    spec = importlib.util.spec_from_file_location("large_document", REPO / "bench" / "large_document.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_one_megabyte_markdown_document_fits_the_default_chunk_limit():
    shared_data("runbooks")
    text = _bench().build_document(1_000_000)
    assert 990_000 < len(text.encode("utf-8")) <= 1_000_000 and text.endswith("\n")
    settings = IngestSettings()
    parsed = MarkdownParser().parse(text, fallback_title="large")
    chunks = MarkdownChunker(settings).chunk(parsed, doc_id="ctx://resources/bench/large.md", category="resource")
    # about 2,200 chunks: over the old limit of 500, within the default
    assert 1_500 < len(chunks) <= settings.max_chunks_per_document
