"""Adding a folder of many tiny files (issue 14: 10k files took 567 s; target <= 60 s on the reference machine).

Writes ``--files`` tiny markdown files (one short paragraph each, ``--per-dir`` to a folder) into a temporary
folder, adds the folder with ``context-engine``'s Python API on a fresh data directory (the default settings, so
the default embedding model unless ``--backend`` says otherwise), and prints the wall time, files/s and where the
time went (``--profile`` prints the top functions by cumulative time). Then it adds a sample of the same files one
write each, the way a loop of single-file adds does, and prints the ratio of the per-file times.

    python bench/add_many_files.py --files 1000
    python bench/add_many_files.py --files 10000 --profile
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import tempfile
import time
from pathlib import Path

from context_engine.schema.context import DEFAULT_CONTEXT
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings

WORDS = (
    "disk pressure node kubelet eviction image garbage collection threshold volume mount pod restart backoff "
    "certificate expiry rotation dns resolution latency timeout queue consumer lag replica leader election"
).split()


def write_files(folder: Path, n: int, per_dir: int) -> None:
    """``n`` tiny markdown files, ``per_dir`` per sub-folder; deterministic text, all different."""
    for i in range(n):
        sub = folder / f"d{i // per_dir:04d}"
        if i % per_dir == 0:
            sub.mkdir(parents=True)
        words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(12))
        (sub / f"note-{i:06d}.md").write_text(f"# Note {i}\n\n{words} (item {i}).\n", encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000, help="How many files (default 1000).")
    ap.add_argument("--per-dir", type=int, default=100, help="Files per sub-folder (default 100).")
    ap.add_argument("--backend", default=None, help="embedding.backend (default: the settings' default).")
    ap.add_argument("--profile", action="store_true", help="Print the top 25 functions by cumulative time.")
    ap.add_argument(
        "--one-by-one",
        type=int,
        default=200,
        metavar="K",
        help="Then add K of the files one write each (a loop of single-file adds) in the same engine, and print the "
        "per-file time of both ways and their ratio (default 200; 0: skip).",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "many"
        write_files(folder, args.files, args.per_dir)
        overrides = {"embedding": {"backend": args.backend}} if args.backend else {}
        engine = ContextEngineService(load_settings(Path(tmp) / "home", **overrides))
        engine.embedder.warm_up()
        profiler = cProfile.Profile() if args.profile else None
        t0, c0 = time.perf_counter(), time.process_time()
        if profiler:
            profiler.enable()
        report = engine.add_resource(folder, "ctx://resources/many/", DEFAULT_CONTEXT)
        if profiler:
            profiler.disable()
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(
            f"add of {args.files} files ({args.per_dir} per folder, {engine.embedder.model_name}): {took:.1f} s "
            f"wall, {cpu:.1f} s CPU (all threads), {args.files / took:.0f} files/s; load average "
            f"{os.getloadavg()[0]:.1f}; nodes={report.nodes} directories={report.directories} "
            f"vectors={report.vectors} failed={report.failed}"
        )
        if args.one_by_one:
            files = sorted(folder.rglob("*.md"))[: args.one_by_one]
            t1 = time.perf_counter()
            for f in files:
                engine.add_resource(f, f"ctx://resources/one-by-one/{f.parent.name}/", DEFAULT_CONTEXT)
            each_s = (time.perf_counter() - t1) / len(files)
            batched_s = took / args.files
            print(
                f"one write per file ({len(files)} files, same engine): {each_s * 1000:.1f} ms/file "
                f"(x{args.files} = {each_s * args.files:.0f} s) vs {batched_s * 1000:.1f} ms/file in one add: "
                f"{each_s / batched_s:.1f}x"
            )
        engine.close()
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
