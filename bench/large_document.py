"""One large markdown document through ``add_resource`` (issue 26: "a 1 MB markdown document added in <= 15 s").

Builds a document of ``--bytes`` (default 1,000,000) from the runbooks of ``../shared/data/runbooks`` (read in place,
in name order, repeated when they run out, cut at a line end), writes it to a temporary folder, opens an engine on a
fresh temporary home, warms it as ``context-engine serve`` does before ``/readyz`` (``--cold``: not), then times
``add_resource`` of that one file: chunks, wall seconds, the process's CPU seconds, chunks per second. The chunk
limit (``ingest.max_chunks_per_document``) is the product's default unless ``--max-chunks`` says otherwise; a
document over it is refused (``WRT-4132``) before anything is embedded, and the bench says so.

    python bench/large_document.py [--bytes 1000000] [--max-chunks N] [--cold] [--runs 1]

Never a test: the figures depend on the machine and what else runs on it (the load average is printed beside them).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from context_engine.errors import ContextEngineError
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.warm_up import warm_up

ROOT = Path(__file__).resolve().parents[1]
RUNBOOKS = ROOT.parent / "shared" / "data" / "runbooks"


def build_document(size: int) -> str:
    """About ``size`` bytes of UTF-8 markdown: the runbooks in name order, repeated, cut at a line end."""
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(RUNBOOKS.rglob("*.md"))]
    if not texts:
        raise SystemExit(f"no runbooks under {RUNBOOKS}")
    parts: list[str] = []
    total = 0
    while total < size:
        for text in texts:
            parts.append(text.rstrip("\n") + "\n\n")
            total += len(parts[-1].encode("utf-8"))
            if total >= size:
                break
    data = "".join(parts).encode("utf-8")[:size]
    return data[: data.rfind(b"\n") + 1].decode("utf-8", errors="ignore")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bytes", type=int, default=1_000_000)
    ap.add_argument("--max-chunks", type=int, default=None, help="ingest.max_chunks_per_document (default: product's)")
    ap.add_argument("--cold", action="store_true", help="no warm-up: a one-shot process (the model, import lancedb)")
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    text = build_document(args.bytes)
    with tempfile.TemporaryDirectory(prefix="ce-large-doc-") as tmp:
        doc = Path(tmp) / "large.md"
        doc.write_text(text, encoding="utf-8")
        lines = text.count("\n")
        print(f"document: {doc.stat().st_size:,} bytes, {lines:,} lines; {os.cpu_count()} CPUs", flush=True)
        for run in range(1, args.runs + 1):
            ingest = {} if args.max_chunks is None else {"max_chunks_per_document": args.max_chunks}
            settings = load_settings(Path(tmp) / f"home-{run}", ingest=ingest)
            engine = ContextEngineService(settings)
            try:
                if not args.cold:
                    report = warm_up(engine)
                    print(f"  engine warmed as `serve` warms it in {report.seconds:.1f} s", flush=True)
                load = os.getloadavg()[0]
                t, cpu = time.perf_counter(), time.process_time()
                try:
                    result = engine.add_resource(doc, "ctx://resources/bench/large.md")
                except ContextEngineError as err:
                    print(f"  run {run}: refused: {err}", flush=True)
                    continue
                wall, cpu = time.perf_counter() - t, time.process_time() - cpu
                print(
                    f"  run {run}: {result.chunks} chunks, {result.vectors} vectors in {wall:.1f} s wall "
                    f"({result.chunks / wall:.0f} chunks/s), {cpu:.1f} CPU-s; limit "
                    f"{settings.ingest.max_chunks_per_document} chunks; load average {load:.1f} -> "
                    f"{os.getloadavg()[0]:.1f}",
                    flush=True,
                )
            finally:
                engine.close()


if __name__ == "__main__":
    main()
