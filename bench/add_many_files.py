"""Adding a folder of many tiny files (issue 14: 10k files took 567 s; target <= 60 s on the reference machine).

Writes ``--files`` tiny markdown files (one short paragraph each, ``--per-dir`` to a folder) into a temporary
folder, adds the folder with ``context-engine``'s Python API on a fresh data directory (the default settings, so
the default embedding model unless ``--backend`` says otherwise), and prints the wall time, files/s and where the
time went (``--profile`` prints the top functions by cumulative time).

    python bench/add_many_files.py --files 10000
    python bench/add_many_files.py --files 1000 --compare 3   # before/after the background index open
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import subprocess
import sys
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
        "--serial-open",
        action="store_true",
        help="Open the vector index after the embedding, as before issue 14 (no background open).",
    )
    ap.add_argument(
        "--compare",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="Run ROUNDS pairs of fresh processes, alternately with and without --serial-open, and print the ratio "
        "of the median wall times (each process pays its own imports, as a CLI add does).",
    )
    args = ap.parse_args()
    if args.compare:
        compare(args)
        return
    if args.serial_open:
        from context_engine.storage.vector.lazy import LazyVectorIndex

        LazyVectorIndex.open_in_background = lambda self: None  # type: ignore[method-assign]
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
        engine.close()
    print(
        f"add of {args.files} files ({args.per_dir} per folder, {engine.embedder.model_name}): {took:.1f} s wall, "
        f"{cpu:.1f} s CPU (all threads), {args.files / took:.0f} files/s; load average {os.getloadavg()[0]:.1f}; "
        f"nodes={report.nodes} directories={report.directories} vectors={report.vectors} failed={report.failed}"
    )
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def compare(args: argparse.Namespace) -> None:
    """Alternate fresh processes with and without the background open; print each run and the median ratio."""
    base = [sys.executable, __file__, "--files", str(args.files), "--per-dir", str(args.per_dir)]
    if args.backend:
        base += ["--backend", args.backend]
    walls: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.compare):
        for serial in (True, False):
            out = subprocess.run(
                base + (["--serial-open"] if serial else []), capture_output=True, text=True, check=True
            ).stdout.strip()
            print(("before (serial open): " if serial else "after (background open): ") + out)
            walls[serial].append(float(out.split(": ", 1)[1].split(" s wall")[0]))
    before, after = statistics.median(walls[True]), statistics.median(walls[False])
    print(f"median wall: before {before:.1f} s, after {after:.1f} s, after/before {after / before:.2f}")


if __name__ == "__main__":
    main()
