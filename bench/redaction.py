"""Secret redaction (issue 14): what it costs and how often it touches ordinary operations text.

Over the runbook sets of ``../shared/data/runbooks`` (or ``--root``), each file is parsed and summarised as ingest
does, then timed through the write-time calls (L0 with both layers, L1 and the title by the patterns, as
``ingest.pipeline`` does) and the read-time call on L2 (both layers, as read_memory L2 and lookup evidence do).
Printed per set: files, the summed milliseconds of each call, and how many files each call changed, i.e. how much
ordinary runbook text looks like a secret to the redactor (a false positive unless the runbook does hold one), with
the kinds found. Never a test.

Usage::

    python bench/redaction.py                   # every set
    python bench/redaction.py --limit 50        # the first 50 files of each set
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from context_engine.ingest.parse import MarkdownParser
from context_engine.ingest.summarize import ExtractiveSummarizer
from context_engine.redaction import Redactor, redact_derived
from context_engine.settings import IngestSettings, RedactionSettings

SETS = ("prometheus-operator", "openshift", "kubesphere-zh")


def main() -> None:
    here = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=here.parent / "shared" / "data" / "runbooks")
    ap.add_argument("--limit", type=int, default=0, help="files per set (0: all)")
    args = ap.parse_args()
    parser, summarizer = MarkdownParser(), ExtractiveSummarizer(IngestSettings())
    reader = Redactor(RedactionSettings())
    print("| set | files | L0 write ms | L1 write ms | L2 read ms | L0 changed | L1 changed | L2 changed | L2 kinds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in SETS:
        files = sorted(p for p in (args.root / name).rglob("*.md") if p.is_file())
        if args.limit:
            files = files[: args.limit]
        if not files:
            continue
        ms = Counter()
        changed = Counter()
        kinds: Counter[str] = Counter()
        for path in files:
            text = path.read_text(encoding="utf-8")
            summary = summarizer.summarize_document(parser.parse(text, fallback_title=path.stem))
            t = time.perf_counter()
            l0 = redact_derived(summary.abstract)
            ms["l0"] += time.perf_counter() - t
            t = time.perf_counter()
            l1 = redact_derived(summary.overview, library=False)
            ms["l1"] += time.perf_counter() - t
            t = time.perf_counter()
            l2 = reader.redact(text + "\n")  # a fresh string each run: the memo of repeated texts is not measured
            ms["l2"] += time.perf_counter() - t
            changed["l0"] += l0 != summary.abstract
            changed["l1"] += l1 != summary.overview
            changed["l2"] += l2.count > 0
            kinds.update(l2.kinds)
        top = ", ".join(f"{k} {n}" for k, n in kinds.most_common(4))
        print(
            f"| {name} | {len(files)} | {ms['l0'] * 1e3:.0f} | {ms['l1'] * 1e3:.0f} | {ms['l2'] * 1e3:.0f} | "
            f"{changed['l0']} | {changed['l1']} | {changed['l2']} | {top} |"
        )


if __name__ == "__main__":
    main()
