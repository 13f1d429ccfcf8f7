"""Conversation ingest speed: ``add_messages`` in batches, on a fresh store and on one that already holds N memories,
then ``search_memory`` latency with and without a time filter (issue 11, "Speed").

Usage::

    python bench/memory_ingest.py [--messages 10000] [--batch 100] [--preexisting 100000] [--home DIR]
                                  [--searches 200] [--profile] [--num-threads N] [--workers N] [--skip-fresh]

What it does:

1. **Fresh**: a new home (``<home>/fresh``, removed first) with the default embedding model; ``--messages`` synthetic
   messages (seeded templates: 6 users, 4 speakers each, sessions of 40-400 turns, about 8% Chinese, with names,
   numbers and dates) are added with ``add_messages`` in batches of ``--batch``. Prints messages/s overall and the
   p50/p95/max seconds per batch, for the first and the last tenth of the batches (flat or not as the store grows).
2. **Pre-existing**: a home with ``--preexisting`` memories already stored (``<home>/pre-<N>``, kept and reused by the
   next run). They are written through the real write path (``add_messages`` in batches of 500: metadata, content,
   LanceDB, BM25, L0 cache, hint index, directory summaries), but with a *cached-vector embedder*: the same model name
   and dimension, returning a vector of a pool of 1,000 texts embedded once with the real model plus a little noise,
   so that building 100k memories does not take the ~40 min that embedding them would. Then the same ingest as (1)
   with the real model.
3. **search_memory**: ``--searches`` queries (after a warm-up) against the pre-existing store, without a filter and,
   when ``SearchMemoryRequest`` has them, with ``time_range`` (about a tenth of the timeline), ``conversation_id`` and
   ``metadata_filter``; p50/p95 ms each.
4. ``--profile``: one batch of the fresh run under cProfile, summarised per stage (validation, parsing, embedding,
   the write's transaction: content writes, SQL, listeners, directory summaries, the vector index), plus the top
   functions (cProfile inflates pure-Python work against numpy's: read the shares as an upper bound for Python). A
   batch of messages is embedded in a background thread, which cProfile does not follow: its embedding shows as
   the transaction's wait for the vectors, what the overlap with the write did not hide.

Before it times anything, each engine is warmed as ``context-engine serve`` warms it before ``/readyz`` says ready
(:func:`context_engine.warm_up.warm_up`: the model, the redactors, the vector index opened and queried once, each
account's derived indexes), so the first batch measures a write, not ``import lancedb`` (2-3 s); ``--cold`` times a
one-shot process instead, whose first batch pays for those.

Each store's run starts with a line on the file system itself: the milliseconds to create a node folder holding three
small files, as a write of a new node does. On the reference machine's ext4 (mounted with ``discard``) that is about
0.1 ms, but 2-3 ms for the next several thousand folders after a large delete (an earlier run's home removed): a run
whose line says so measures the file system, not the engine (docs/memories.md, "Ingest throughput").

The model runs with the product's thread settings (``embedding.num_threads`` and ``embedding.workers``) unless
``--num-threads`` / ``--workers`` say otherwise.

Never a test: figures depend on the machine and on what else runs on it (print the load average beside them).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from context_engine.providers.embedder import build_embedder
from context_engine.schema.context import RequestContext
from context_engine.schema.query import SearchMemoryRequest
from context_engine.service import ContextEngineService
from context_engine.settings import EmbeddingSettings, load_settings
from context_engine.warm_up import warm_up

ROOT = Path(__file__).resolve().parents[1]
T0 = datetime(2023, 1, 1, tzinfo=UTC)

NAMES = ["Caroline", "Melanie", "Jon", "Gina", "Priya", "Tomás", "Wei", "Aiko", "Omar", "Lena", "Ravi", "Sofia"]
PLACES = ["Berlin", "Lisbon", "Kyoto", "Toronto", "Nairobi", "Oslo", "Austin", "Porto", "Seoul", "Cusco"]
THINGS = [
    "a pottery class",
    "the marathon",
    "a new job at the bakery",
    "my sister's wedding",
    "the camping trip",
    "a violin recital",
    "the charity run",
    "our book club",
    "a painting workshop",
    "the adoption interview",
    "a road trip",
    "the science fair",
    "a support group meeting",
    "the LGBTQ parade",
    "a job interview",
]
PETS = ["a puppy named Biscuit", "two cats", "a parrot called Kiwi", "a rescue dog", "a goldfish"]
OPENERS = ["Hey", "Hi", "Oh", "Honestly", "Well", "So", "You know what", "Guess what", "Ha", "Wow"]
TEMPLATES = [
    "{o}, I went to {t} in {p} last {d}. It was {adj}!",
    "I've been thinking about {t} a lot lately, it means so much to me.",
    "We finally booked {n} tickets for {t} on {date}.",
    "{o}! {x} just told me they're moving to {p} in {month}.",
    "That sounds {adj}. How did {x} feel about {t}?",
    "I adopted {pet} on {date}, and the kids love it.",
    "My therapist said {t} could help, so I signed up for {n} sessions.",
    "Did you ever finish the book {x} recommended? I'm on chapter {n}.",
    "It took me {n} years to feel comfortable sharing this, but {t} helped.",
    "I'm so proud of you for {t}! When is the next one?",
    "We drove {n} km to {p} for {t}; the weather was {adj}.",
    "{o}, can you remind me what time {t} starts on {date}?",
    "Thanks for listening yesterday. Talking about {t} really helped.",
    "I paid {n} dollars for the class, but it was worth it.",
    "{x} and I are planning {t} for {month}, want to join?",
]
ZH_TEMPLATES = [
    "我上周{d_zh}去了{p}，参加了{t_zh}，感觉非常{adj_zh}。",
    "{x}说他们{month_zh}要搬到{p}去住了。",
    "我们在{n}月{n2}日订了{n3}张票，一起去看演出吧。",
    "谢谢你昨天听我说话，聊完{t_zh}以后我好多了。",
]
ADJ = ["amazing", "exhausting", "wonderful", "a bit scary", "so much fun", "really meaningful", "chaotic"]
ADJ_ZH = ["开心", "累", "有意义", "紧张", "放松"]
T_ZH = ["陶艺课", "马拉松", "读书会", "露营", "音乐会"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "weekend"]
DAYS_ZH = ["周一", "周三", "周五", "周末"]
MONTHS = ["January", "March", "May", "July", "September", "November"]
MONTHS_ZH = ["三月", "五月", "八月", "十二月"]


# ---------------------------------------------------------------------------------------------------- data
def message_text(rng: random.Random, when: datetime) -> str:
    if rng.random() < 0.08:
        return rng.choice(ZH_TEMPLATES).format(
            d_zh=rng.choice(DAYS_ZH),
            p=rng.choice(PLACES),
            t_zh=rng.choice(T_ZH),
            adj_zh=rng.choice(ADJ_ZH),
            x=rng.choice(NAMES),
            month_zh=rng.choice(MONTHS_ZH),
            n=rng.randint(1, 12),
            n2=rng.randint(1, 28),
            n3=rng.randint(2, 9),
        )
    text = rng.choice(TEMPLATES).format(
        o=rng.choice(OPENERS),
        t=rng.choice(THINGS),
        p=rng.choice(PLACES),
        d=rng.choice(DAYS),
        adj=rng.choice(ADJ),
        n=rng.randint(2, 40),
        date=when.strftime("%d %B"),
        x=rng.choice(NAMES),
        month=rng.choice(MONTHS),
        pet=rng.choice(PETS),
    )
    if rng.random() < 0.3:  # a second sentence now and then: lengths vary from ~30 to ~250 characters
        text += " " + rng.choice(TEMPLATES).format(
            o=rng.choice(OPENERS),
            t=rng.choice(THINGS),
            p=rng.choice(PLACES),
            d=rng.choice(DAYS),
            adj=rng.choice(ADJ),
            n=rng.randint(2, 40),
            date=when.strftime("%d %B"),
            x=rng.choice(NAMES),
            month=rng.choice(MONTHS),
            pet=rng.choice(PETS),
        )
    return text


class Conversations:
    """Seeded batches ``(ctx, session_id, messages)``: 6 users, sessions of 40-400 turns, 2-4 speakers each."""

    def __init__(self, seed: int, prefix: str) -> None:
        self.rng = random.Random(seed)
        self.prefix = prefix
        self.users = [
            RequestContext(account_id="default", role="user", user_space=f"u{u}", agent_space=f"a{u}") for u in range(6)
        ]
        self.clock = T0
        self.n_sessions = 0

    def batches(self, total: int, batch: int):
        made = 0
        while made < total:
            ctx = self.rng.choice(self.users)
            self.n_sessions += 1
            session = f"{self.prefix}-{self.n_sessions:05d}"
            speakers = self.rng.sample(NAMES, self.rng.randint(2, 4))
            length = min(self.rng.randint(40, 400), total - made)
            self.clock += timedelta(hours=self.rng.randint(1, 72))
            turn = 0
            while turn < length:
                n = min(batch, length - turn)
                msgs = []
                for i in range(n):
                    self.clock += timedelta(seconds=self.rng.randint(5, 300))
                    speaker = speakers[(turn + i) % len(speakers)]
                    msgs.append(
                        {
                            "role": "user" if (turn + i) % len(speakers) == 0 else "assistant",
                            "speaker": speaker,
                            "content": message_text(self.rng, self.clock),
                            "timestamp": self.clock.isoformat(),
                            "metadata": {"channel": self.rng.choice(["app", "web", "sms"])},
                        }
                    )
                yield ctx, session, msgs
                turn += n
            made += length


class CachedVectorEmbedder:
    """Same model name and dimension as the real one; each text gets a pool vector (the real model's, of one of
    ``pool`` generated texts, chosen by a hash of the text) plus noise. Only for building a large store quickly."""

    def __init__(self, real: Any, pool_texts: list[str], seed: int = 5) -> None:
        self.real = real
        self.model_name, self.dim = real.model_name, real.dim
        self.backend = getattr(real, "backend", "")
        self.pool = real.embed_documents(pool_texts).astype(np.float32)
        self.rng = np.random.default_rng(seed)

    def embed_documents(self, texts, *, progress=None):
        idx = np.asarray([hash(t) % len(self.pool) for t in texts], dtype=np.int64)
        out = self.pool[idx] + self.rng.normal(0.0, 0.02, (len(texts), self.dim)).astype(np.float32)
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        if progress:
            progress(len(texts))
        return out

    def embed_query(self, text: str):
        return self.real.embed_query(text)

    def __getattr__(self, item: str) -> Any:
        return getattr(self.real, item)


# ---------------------------------------------------------------------------------------------------- runs
def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def open_engine(home: Path, embedder: Any) -> ContextEngineService:
    settings = load_settings(home, embedding={"backend": "use-multilingual"})
    return ContextEngineService(settings, embedder=embedder)


def fs_reference(parent: Path, folders: int = 300) -> None:
    """Print the file system's own cost of a new node's folder (a folder and three small files, as ``write_levels``
    creates them), measured under ``parent`` (removed with the home)."""
    probe = parent / f".fs-probe-{os.getpid()}"
    probe.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    for i in range(folders):
        node = probe / f"n{i}"
        node.mkdir()
        for name in (".abstract.md", ".overview.md", ".content.md"):
            fd = os.open(node / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, b"x" * 200)
            os.close(fd)
    ms = (time.perf_counter() - t) / folders * 1000
    slow = "  (slow: the file system is reusing freed inodes, see the module docstring)" if ms > 0.5 else ""
    print(f"  file system: {ms:.2f} ms per new node folder of 3 files{slow}", flush=True)


def warm(engine: ContextEngineService, cold: bool) -> None:
    """Warm ``engine`` as ``serve`` does before ``/readyz`` (unless ``cold``)."""
    if cold:
        print("  cold engine (--cold): the first batch opens the vector index", flush=True)
        return
    report = warm_up(engine)
    print(f"  engine warmed as `serve` warms it in {report.seconds:.1f} s", flush=True)


def ingest(engine: ContextEngineService, conv: Conversations, total: int, batch: int, label: str) -> list[float]:
    times: list[float] = []
    first = 0  # messages of the first batch, which pays for the vector index's first open in a --cold engine
    started, cpu0 = time.perf_counter(), time.process_time()
    for ctx, session, msgs in conv.batches(total, batch):
        t = time.perf_counter()
        engine.add_messages(msgs, session, ctx)
        times.append(time.perf_counter() - t)
        first = first or len(msgs)
        if len(times) % 10 == 0:
            print(f"    {label}: {len(times)} batches, {time.perf_counter() - started:.0f} s", flush=True, end="\r")
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu0
    tenth = max(1, len(times) // 10)
    print(" " * 60, end="\r")
    print(
        f"  {label}: {total} messages in {len(times)} batches of <= {batch}: {wall:.1f} s wall, "
        f"{total / wall:.1f} messages/s ({(total - first) / (wall - times[0]):.1f} after the first batch); "
        f"per batch p50 {pct(times, 50):.2f} s, p95 {pct(times, 95):.2f} s, "
        f"max {max(times):.2f} s; first tenth p50 {pct(times[:tenth], 50):.2f} s, last tenth p50 "
        f"{pct(times[-tenth:], 50):.2f} s; {cpu:.0f} CPU-s ({total / cpu:.1f} messages per CPU-second); "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return times


def build_preexisting(home: Path, n: int, real: Any, seed: int) -> datetime:
    """Build (or reuse) the store; returns the end of its timeline (the last message's timestamp)."""
    marker = home / f"built-{n}.txt"
    if marker.exists():
        took, end = marker.read_text().strip().splitlines()
        print(f"  reusing the store at {home} ({took})")
        return datetime.fromisoformat(end)
    shutil.rmtree(home, ignore_errors=True)
    pool_rng = random.Random(seed + 1)
    pool = [message_text(pool_rng, T0 + timedelta(days=i)) for i in range(1000)]
    t = time.perf_counter()
    fake = CachedVectorEmbedder(real, pool)
    print(f"  pool of {len(pool)} texts embedded with the real model in {time.perf_counter() - t:.0f} s", flush=True)
    engine = open_engine(home, fake)
    started = time.perf_counter()
    conv = Conversations(seed, "pre")
    try:
        ingest(engine, conv, n, 500, f"pre-populate {n} (cached vectors)")
    finally:
        engine.close()
    took = time.perf_counter() - started
    note = f"{n} messages written through add_messages with cached vectors in {took:.0f} s"
    marker.write_text(f"{note}\n{conv.clock.isoformat()}\n")
    print(f"  pre-existing store of {n} memories built in {took:.0f} s", flush=True)
    return conv.clock


# (label, (file path suffix, function, caller or None) triples whose cumulative times add up; indented: inside the one
# above). A caller restricts a function's time to its calls from that function.
STAGES = [
    ("validate + session tail", [("ingest/memory.py", "_message", None), ("ingest/memory.py", "_session_tail", None)]),
    ("conversation contexts", [("ingest/conversation.py", "index_contexts", None)]),
    ("pre-checks (get_nodes)", [("ingest/pipeline.py", "_check_no_file_ancestors", None)]),
    ("prepare docs (parse, L0, redact)", [("ingest/pipeline.py", "_prepare", None)]),
    # a batch within ingest.pipeline._AHEAD_MAX_CHARS is embedded in a background thread, which cProfile does not see:
    # its cost shows as the wait for the vectors inside the transaction (the part the overlap did not hide)
    ("embedding (the messages)", [("ingest/pipeline.py", "_embed_texts", "write_documents")]),
    ("the write (one transaction)", [("ingest/pipeline.py", "_journaled", None)]),
    ("  waiting for the vectors", [("ingest/background.py", "result", None)]),
    ("  content stash + write_levels", [("local.py", "stash", None), ("local.py", "write_levels", None)]),
    ("  SQL upsert_nodes", [("metadata/node_rows.py", "upsert_nodes", None)]),
    ("  SQL put/delete_vectors", [("vector_rows.py", "put_vectors", None), ("vector_rows.py", "delete_vectors", None)]),
    ("  listeners (hint index, events)", [("ingest/pipeline.py", "_notify_written", None)]),
    ("  directory summaries", [("ingest/pipeline.py", "_prepare_directories", None)]),
    ("  directory embedding", [("ingest/pipeline.py", "_embed", "body")]),
    ("  finish (vector index, indexed)", [("ingest/journal.py", "finish", None)]),
    ("    LanceDB upsert", [("vector/lancedb_index.py", "upsert", None)]),
    ("content read_level (all)", [("content/local.py", "read_level", None)]),
]


def _stage_seconds(stats: dict, keys: list[tuple[str, str, str | None]]) -> tuple[float, int]:
    """Cumulative seconds and calls of the functions ``keys`` names (of their calls from ``caller`` when given)."""
    secs, calls = 0.0, 0
    for (f, _ln, fn), v in stats.items():
        for suffix, name, caller in keys:
            if fn != name or not f.endswith(suffix):
                continue
            if caller is None:
                secs, calls = secs + v[3], calls + v[1]
                continue
            for (_cf, _cl, cfn), c in v[4].items():  # callers: (file, line, function) -> (cc, nc, tt, ct)
                if cfn == caller:
                    secs, calls = secs + c[3], calls + c[1]
    return secs, calls


def profile_one_batch(engine: ContextEngineService, conv: Conversations, batch: int, title: str) -> None:
    gen = conv.batches(batch * 3, batch)
    for _ in range(2):  # warm the session first
        ctx, session, msgs = next(gen)
        engine.add_messages(msgs, session, ctx)
    ctx, session, msgs = next(gen)
    prof = cProfile.Profile()
    t, c = time.perf_counter(), time.process_time()
    prof.enable()
    engine.add_messages(msgs, session, ctx)
    prof.disable()
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    stats = pstats.Stats(prof).stats  # (file, line, function) -> (calls, ncalls, own s, cumulative s, callers)
    print(f"\n== profile of one batch of {len(msgs)} messages, {title}: {wall:.2f} s wall, {cpu:.2f} s CPU ==")
    top = 0.0
    for label, keys in STAGES:
        secs, calls = _stage_seconds(stats, keys)
        if not label.startswith(" ") and not label.startswith("content read_level"):
            top += secs
        print(f"  {label:<30}{secs:8.3f} s {secs / wall:6.0%}  ({calls} calls)")
    print(f"  {'other (service, result)':<30}{wall - top:8.3f} s {(wall - top) / wall:6.0%}")
    print("  top functions of ours by own time:")
    ours = [(v[2], v[3], f, ln, fn) for (f, ln, fn), v in stats.items() if "context_engine" in f]
    for own, cum, f, ln, fn in sorted(ours, reverse=True)[:8]:
        print(f"    {own:7.3f} s own {cum:7.3f} s cum  {Path(f).parent.name}/{Path(f).name}:{ln} {fn}")


def search_latency(engine: ContextEngineService, n: int, seed: int, end: datetime) -> None:
    rng = random.Random(seed)
    fields = SearchMemoryRequest.model_fields
    queries = [
        rng.choice(
            [
                f"when did {rng.choice(NAMES)} go to {rng.choice(THINGS)}",
                f"who is moving to {rng.choice(PLACES)}",
                f"how many tickets did they book for {rng.choice(THINGS)}",
                f"what pet did {rng.choice(NAMES)} adopt",
                "谁要搬家了",
            ]
        )
        for _ in range(n + 10)
    ]
    users = [f"u{u}" for u in range(6)]
    span = engine.metadata.query_files("default", uri_prefixes=["ctx://user/u0/memories/"], limit=1, offset=0)
    print(f"\n== search_memory on the pre-existing store ({span[1]} memories of user u0; 6 users) ==")
    variants: list[tuple[str, dict[str, Any]]] = [("no filter", {})]
    if "time_range" in fields:
        variants.append(("time_range (1/10 of the timeline)", {"time_range": "tenth"}))
    else:
        print("  SearchMemoryRequest has no time_range yet: time-filtered figures skipped")
    if "conversation_id" in fields:
        variants.append(("conversation_id", {"conversation_id": "pick"}))
    if "metadata_filter" in fields:
        variants.append(("metadata_filter channel=sms", {"metadata_filter": {"channel": "sms"}}))
    sessions = {
        u: [
            c.uri.rstrip("/").rsplit("/", 1)[-1]
            for c in engine.metadata.list_children("default", f"ctx://user/{u}/memories/sessions/")
            if c.is_dir
        ]
        for u in users
    }
    for label, extra in variants:
        times: list[float] = []
        for i, q in enumerate(queries):
            user = users[i % len(users)]
            ctx = RequestContext(account_id="default", role="user", user_space=user, agent_space="a0")
            kwargs = dict(extra)
            if kwargs.get("time_range") == "tenth":
                start = T0 + (end - T0) * rng.random() * 0.9
                kwargs["time_range"] = {"start": start, "end": start + (end - T0) / 10}
            if kwargs.get("conversation_id") == "pick":
                if not sessions[user]:
                    continue
                kwargs["conversation_id"] = rng.choice(sessions[user])
            t = time.perf_counter()
            engine.search_memory(SearchMemoryRequest(query=q, **kwargs), ctx)
            if i >= 10:
                times.append((time.perf_counter() - t) * 1000)
        print(
            f"  {label:<36} p50 {pct(times, 50):7.1f} ms  p95 {pct(times, 95):7.1f} ms  "
            f"({len(times)} queries, load average {os.getloadavg()[0]:.1f})",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--preexisting", type=int, default=100_000, help="memories already stored (0: skip phase 2)")
    ap.add_argument("--home", type=Path, default=ROOT / "bench" / ".cache" / "memory_ingest")
    ap.add_argument("--searches", type=int, default=200)
    ap.add_argument("--profile", action="store_true", help="profile one batch of the fresh run")
    ap.add_argument("--skip-fresh", action="store_true")
    ap.add_argument("--cold", action="store_true", help="time a cold engine (no warm-up): a one-shot process")
    product = EmbeddingSettings()
    ap.add_argument(
        "--num-threads",
        "--torch-threads",
        dest="num_threads",
        type=int,
        default=product.num_threads,
        help=f"intra-op threads of the model (embedding.num_threads; default: the product's, {product.num_threads}; "
        "0: the library's default of every core)",
    )
    workers = getattr(product, "workers", None)
    ap.add_argument(
        "--workers",
        type=int,
        default=workers,
        help=f"threads embedding one write in parallel (embedding.workers; default: the product's, {workers})",
    )
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()

    threads = {"num_threads": args.num_threads} | ({} if args.workers is None else {"workers": args.workers})
    real = build_embedder(EmbeddingSettings(backend="use-multilingual", **threads))
    t = time.perf_counter()
    real.embed_documents(["warm up"])
    print(
        f"model {real.model_name} ({real.dim} dims) warm in {time.perf_counter() - t:.1f} s; {threads}; "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; python {sys.version.split()[0]}",
        flush=True,
    )
    sample = [message_text(random.Random(3), T0) for _ in range(args.batch)]
    t = time.perf_counter()
    real.embed_documents(sample)
    secs = time.perf_counter() - t
    print(f"  embedding alone: {args.batch} messages in {secs:.2f} s = {args.batch / secs:.0f} messages/s", flush=True)

    if not args.skip_fresh:
        home = args.home / "fresh"
        shutil.rmtree(home, ignore_errors=True)
        print("\n== fresh store ==")
        engine = open_engine(home, real)
        try:
            fs_reference(home)
            warm(engine, args.cold)
            ingest(engine, Conversations(args.seed, "fresh"), args.messages, args.batch, "fresh")
            if args.profile:
                profile_one_batch(engine, Conversations(args.seed + 7, "prof"), args.batch, "fresh store")
        finally:
            engine.close()

    if args.preexisting:
        home = args.home / f"pre-{args.preexisting}"
        print(f"\n== with {args.preexisting} memories already stored ==")
        end = build_preexisting(home, args.preexisting, real, args.seed + 100)
        work = args.home / f"pre-{args.preexisting}-run"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(home, work)  # measure on a copy, so the built store is reused as is next time
        engine = open_engine(work, real)
        try:
            fs_reference(work)
            warm(engine, args.cold)
            ingest(engine, Conversations(args.seed, "run"), args.messages, args.batch, f"after {args.preexisting}")
            search_latency(engine, args.searches, args.seed, end)
            if args.profile:  # after searches, BM25 and the L0 cache are loaded, so their listeners do real work
                title = f"{args.preexisting} stored, listeners warm"
                profile_one_batch(engine, Conversations(args.seed + 9, "prof"), args.batch, title)
        finally:
            engine.close()


if __name__ == "__main__":
    main()
