"""Ingest throughput against the bare embedding model (foundation issue, Speed).

Ingests the 380 English runbooks (prometheus-operator + openshift) into a fresh data directory through the engine
(parse, chunk, summarise, embed, write content + metadata, index), then times the bare model on exactly the texts the
engine embedded, in the same process. Prints chunks/s and texts/s for both and the ratio (target >= 0.8).

    python bench/ingest.py [--backend lancedb|exact]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from context_engine.ingest.loader import collect, load_file
from context_engine.ingest.parse import MarkdownChunker, MarkdownParser, embedding_input
from context_engine.ingest.summarize import ExtractiveSummarizer
from context_engine.schema.context import DEFAULT_CONTEXT
from context_engine.schema.uri import ContextURI
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
RUNBOOKS = ROOT.parent / "shared" / "data" / "runbooks"
CORPORA = ("prometheus-operator", "openshift")


def texts_embedded(settings) -> tuple[list[str], int]:
    """The file-level texts the engine embeds: each file's abstract and each chunk's embedding input."""
    parser, chunker, summ = MarkdownParser(), MarkdownChunker(settings.ingest), ExtractiveSummarizer(settings.ingest)
    texts: list[str] = []
    chunks = 0
    for corpus in CORPORA:
        target = ContextURI.parse(f"ctx://resources/runbooks/{corpus}/")
        for path, uri in collect(RUNBOOKS / corpus, target, settings.ingest).files:
            doc = load_file(path, uri, settings.ingest)
            parsed = parser.parse(doc.text, fallback_title=doc.title_hint)
            texts.append(summ.summarize_document(parsed).abstract)
            cs = chunker.chunk(parsed, doc_id=str(uri), category=uri.category, source=doc.source)
            texts.extend(embedding_input(c) for c in cs)
            chunks += len(cs)
    return texts, chunks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["lancedb", "exact"], default="lancedb")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(tmp, vector={"backend": args.backend})
        engine = ContextEngineService(settings)
        engine.embedder.warm_up()
        engine.embedder.embed_documents(["warm-up"] * 64)

        texts, n_chunks = texts_embedded(settings)
        t0 = time.perf_counter()
        engine.embedder.embed_documents(texts)
        bare_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        total_chunks = total_vectors = nodes = 0
        for corpus in CORPORA:
            r = engine.add_resource(RUNBOOKS / corpus, f"ctx://resources/runbooks/{corpus}/", DEFAULT_CONTEXT)
            total_chunks += r.chunks
            total_vectors += r.vectors
            nodes += r.nodes
        engine_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        engine.embedder.embed_documents(texts)
        bare_s = (bare_s + time.perf_counter() - t0) / 2
        engine.close()

    print(f"corpus: {nodes} files, {total_chunks} chunks, {total_vectors} vectors ({args.backend})")
    print(
        f"engine ingest : {engine_s:6.1f} s  {total_chunks / engine_s:7.1f} chunks/s  "
        f"{total_vectors / engine_s:7.1f} vectors/s"
    )
    print(
        f"bare model    : {bare_s:6.1f} s  {n_chunks / bare_s:7.1f} chunks/s  {len(texts) / bare_s:7.1f} texts/s "
        f"(same {len(texts)} file texts; mean of a run before and after)"
    )
    print(
        "ratio engine/bare (vectors/s over texts/s): "
        f"{(total_vectors / engine_s) / (len(texts) / bare_s):.2f} (target >= 0.80)"
    )


if __name__ == "__main__":
    main()
