"""search_memory latency on conversation questions (docs/search_memory.md, "What a search embeds").

    python bench/conversation_search.py --dataset eval/conversations/agent_dev [--dataset ...] [--passes 4]
        [--top-k 10] [--cache-dir DIR]

The 100k/1M bench (``bench/search_memory.py``) asks short term queries of stores without conversations; agents ask
questions in the third person about what a user said ("What company does Sam work for?"), which take the
speaker-names second search, the speaker-neutral query of ``match_quality`` and its own-text check. Here every
conversation of a dataset (a folder with ``turns.jsonl`` and ``qa.jsonl``) is written with ``add_messages`` into its
own user space by the conversational evaluation's machinery (``EngineConversationRetriever``; the ingest cached under
``<cache>/conversations/``, shared with ``context-engine eval``), and every question (answerable or not) goes
through ``search_memory`` in one process, one thread, ``top_k`` 10, the defaults otherwise:

* a first pass over the questions, the engine freshly opened (its caches empty: the vectors of hit texts embedded
  alone, ``retrieval/query_vectors.py``), then ``--passes`` more;
* per pass, p50 / p95 / mean of the wall time of each ``search_memory`` call (the first 20 questions of the first
  pass left out of its figures: the model's and the indexes' first use);
* from one more pass with the detailed trace: the query texts a search embedded and in how many calls (the trace's
  ``query_embeddings`` event), and the share of searches that ran the speaker-names second search.

Nothing is asserted: this prints figures. Compare two versions of the code in one session, alternating runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from match_quality import prepared  # bench/: run as a script, its folder is on sys.path

from context_engine.eval.conversation_eval import context_of
from context_engine.service import ContextEngineService
from context_engine.settings import Settings, load_settings


def _figures(ms: list[float]) -> str:
    ordered = sorted(ms)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"p50 {statistics.median(ms):6.1f}  p95 {p95:6.1f}  mean {statistics.mean(ms):6.1f} ms"


def run_dataset(folder: Path, settings: Settings, *, passes: int, top_k: int, cache_dir: Path) -> None:
    """Ingest (or reuse) one dataset and print its figures (module docstring)."""
    conv, engine, written = prepared(folder, settings, cache_dir)  # bench/match_quality.py's
    engine.close()
    service = ContextEngineService(load_settings(engine.home), embedder=written.embedder)  # fresh: empty caches
    try:
        questions = [(q.question, q.conv_id) for q in [*conv.questions, *conv.no_answer]]
        turns = sum(len(t) for t in conv.turns.values())
        print(f"\n== {folder.name}: {len(questions)} questions, {len(conv.turns)} conversations, {turns} turns ==")
        for p in range(passes + 1):
            ms: list[float] = []
            for query, conv_id in questions:
                started = time.perf_counter()
                service.search_memory(query, context_of(conv_id), top_k=top_k)
                ms.append((time.perf_counter() - started) * 1e3)
            name = "first pass" if p == 0 else f"pass {p}"
            print(f"  {name:<10}  {_figures(ms[20:] if p == 0 else ms)}")
        texts, calls, second = [], [], 0
        for query, conv_id in questions:
            r = service.search_memory(
                query, context_of(conv_id), top_k=top_k, include_debug=True, trace_level="detailed"
            )
            events: list[dict[str, Any]] = (r.thinking_trace or {}).get("events", [])
            for e in events:
                if e.get("event") == "query_embeddings":
                    texts.append(e["texts"])
                    calls.append(e["batches"])
            second += any(e.get("transform") == "speaker_names" for e in events)
        if texts:
            print(
                f"  query texts embedded a search {statistics.mean(texts):.2f} in {statistics.mean(calls):.2f} calls;"
                f" speaker-names second search in {second / len(questions):.0%} of searches"
            )
    finally:
        service.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", type=Path, action="append", required=True, help="A conversation folder (repeat).")
    ap.add_argument("--passes", type=int, default=4, help="Passes after the first (default 4).")
    ap.add_argument("--top-k", type=int, default=10, help="Hits per question (1..50).")
    ap.add_argument("--home", type=Path, default=None, help="Engine home for settings (default: CE_HOME).")
    ap.add_argument("--cache-dir", type=Path, default=None, help="Cached ingests (default: eval.cache_dir).")
    args = ap.parse_args()
    settings = load_settings(args.home)
    cache = args.cache_dir or settings.eval.cache_dir or settings.home_path / "eval-cache"
    print(f"search_memory on conversation questions: model {settings.embedding.backend}", file=sys.stderr)
    for folder in args.dataset:
        run_dataset(folder.expanduser(), settings, passes=args.passes, top_k=args.top_k, cache_dir=cache)


if __name__ == "__main__":
    main()
