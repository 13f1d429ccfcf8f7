"""search_memory (and lookup_knowledge) latency, memory and cold start on stores of 10k to 1M nodes (DESIGN §12).

Usage::

    python bench/search_memory.py [--sizes 10000 100000 1000000] [--queries 500] [--hybrid on off]
                                  [--sources memory index] [--no-vector-index] [--build-only]
                                  [--backend lancedb milvus] [--milvus-uri http://127.0.0.1:PORT]
                                  [--workdir bench/.cache/search_memory] [--repetitions 3] [--audit on|off]
                                  [--pause-ms 20] [--search-only]

What it builds, per size (cached under ``--workdir``, which is gitignored, and reused by the next run):

* Three accounts (50% / 30% / 20% of the nodes), each with shared resources (runbook-like abstracts under
  ``ctx://resources/<service>/<component>/``), memories of 12-400 users (``ctx://user/<u>/memories/<category>/``) and
  skills of 3-40 agents (``ctx://agent/<a>/skills/<family>/``), with their directories. About 8% of the texts are
  Chinese.
* Texts come from templates; a pool of ``--pool`` distinct file texts plus every directory text is embedded once with
  the default model (use-multilingual, 512 dimensions) and cached on disk (``emb/``). Each file takes a pool text and
  the pool vector with a little noise (so the copies of a text do not tie exactly).
* The bulk-load path: rows are written through the stores' batch APIs in large transactions, not through the write
  pipeline (no per-node directory refresh): ``MetadataStore.upsert_nodes`` / ``put_vectors(bulk=True)`` (no change
  log: readers reload) and, unless ``--no-vector-index``, ``VectorIndex.upsert`` + ``optimize()`` (LanceDB, ANN index
  from 100k rows). One level-0 row per node and one level-2 chunk row per file. Content files only for a 500-file
  sample (read_memory figures).
* ``--backend milvus`` (issue 13): the home's vector rows are also bulk-upserted into a Milvus collection
  (``vector.milvus``, prefix ``bench<size>``) on the server at ``--milvus-uri`` (default: ``CE_TEST_MILVUS_URI``, or
  ``.services/milvus.env`` from ``bash scripts/services.sh up milvus``), kept in step with the metadata store on reuse
  (rows the measurements wrote are added, the load time is printed). Each backend is measured in its own child
  process, one after the other, on the same home (the metadata store, BM25 and level-0 matrix are the same).

What it measures, per size, in a fresh child process (so its RSS is a serving process's, not the builder's): time to
open the home and answer the first search_memory (model load, level-0 matrix and BM25 loads included); ``--queries``
generated queries (English and Chinese; ~40% name no intent and plan three typed queries) from random callers after
a warm-up, in-process, one thread, with the real embedder: p50/p95 per stage (planner, embed, seed_search,
hierarchical, recheck, assemble) and in total; beside it, query by query, the numpy exact floor (a plain float32
top-10 over the caller account's level-0 rows, the same vectors, with and without embedding the query) and the ratio
of search_memory to it; the total per caller kind (account and role: an admin's search spans every owner space of
its account); the thread CPU of each search (``total CPU``: what the request's own thread spent, which a
loaded machine's waits do not inflate); with ``--repetitions N`` every query runs N times and each figure is its
minimum over them (each pass's p50 / p95 is printed too: a first pass slower than the others is cold cost);
``--audit off`` measures without the ``tool_invocation`` row (written after the answer by a background thread);
``--pause-ms`` idles before each search (a server between requests, where such background work is done);
``--floor after`` runs a pass's searches back to back and the floor after them (interleaved, the default, the
floor's own work leaves the audit writer time that a client sending requests back to back does not);
``--serve-warm-up`` warms the engine as ``serve`` does before ``/readyz`` first (the loads and the ``gc.freeze`` of
:mod:`context_engine.warm_up`); ``--search-only`` stops there. Then RSS after the warm searches
(with its anonymous and file-backed parts, and the peak since the floor's data was loaded; the floor's own
float32 rows left out of all three, and the free memory their load leaves handed back before the engine loads
anything: :func:`floor_matrices`); lookup_knowledge p50/p95 (with a vector index) and per stage (from its traces);
write latency of add_memory (1 memory) and add_memories (100) through the real pipeline; and recall@10 of the
level-0 matrix as served (compressed segments rescored) against an uncompressed float32 matrix.

Never run as a test; figures depend on the machine and its load (run it on a quiet machine).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from context_engine.observability import trace as trace_module
from context_engine.retrieval import search_memory as search_module
from context_engine.schema.context import RequestContext
from context_engine.schema.nodes import Level, NodeRecord, VectorRecord
from context_engine.schema.query import SearchMemoryRequest
from context_engine.schema.uri import ContextURI
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.warm_up import warm_up

ROOT = Path(__file__).resolve().parents[1]

STORE_VERSION = "4"
BUILD_BATCH = 50_000  # files whose records are built and written at a time (bounds the builder's memory)
ACCOUNTS = (("acme", 0.5), ("globex", 0.3), ("initech", 0.2))
SERVICES = [
    "payments",
    "checkout",
    "auth",
    "search",
    "billing",
    "inventory",
    "notifications",
    "gateway",
    "ledger",
    "catalog",
    "orders",
    "shipping",
    "analytics",
    "profile",
    "media",
]
SERVICES_ZH = [
    "支付",
    "结算",
    "认证",
    "搜索",
    "计费",
    "库存",
    "通知",
    "网关",
    "账本",
    "商品",
    "订单",
    "物流",
    "分析",
    "用户",
    "媒体",
]
COMPONENTS = [
    "database",
    "cache",
    "queue",
    "api",
    "worker",
    "scheduler",
    "load balancer",
    "storage volume",
    "certificate",
    "dns",
    "pod",
    "node",
    "cron job",
    "replica set",
    "ingress",
]
COMPONENTS_ZH = [
    "数据库",
    "缓存",
    "消息队列",
    "接口",
    "工作进程",
    "调度器",
    "负载均衡",
    "存储卷",
    "证书",
    "域名解析",
    "容器组",
    "节点",
    "定时任务",
    "副本集",
    "入口",
]
SYMPTOMS = [
    "high latency",
    "an error rate above five percent",
    "out of memory kills",
    "a disk that is almost full",
    "an exhausted connection pool",
    "crash looping containers",
    "a certificate about to expire",
    "replication lag",
    "CPU throttling",
    "too many open files",
    "slow queries",
    "a growing message backlog",
    "5xx responses",
    "pods stuck in pending",
    "lost heartbeats",
]
SYMPTOMS_ZH = [
    "延迟升高",
    "错误率超过百分之五",
    "内存溢出被杀",
    "磁盘快满了",
    "连接池耗尽",
    "容器频繁重启",
    "证书即将过期",
    "复制延迟",
    "CPU 被限流",
    "打开文件过多",
    "慢查询",
    "消息积压",
    "大量 5xx",
    "容器组一直挂起",
    "心跳丢失",
]
ACTIONS = [
    "restart the worker",
    "scale out the deployment",
    "rotate the credentials",
    "raise the memory limit",
    "flush the cache",
    "fail over to the replica",
    "renew the certificate",
    "drain the node",
    "compact the table",
    "roll back the last release",
]
STYLES = ["concise", "detailed", "bullet-point", "code-first", "formal", "friendly", "step-by-step", "short"]
LANGS = ["in English", "in Chinese", "with examples", "without jargon", "with links to runbooks", "with diagrams"]
CITIES = ["Berlin", "Shanghai", "Austin", "Dublin", "Singapore", "Toronto", "Paris", "Tokyo"]
ROLES = ["site reliability engineer", "backend developer", "data engineer", "team lead", "product manager"]
EVENTS = ["handled an outage", "shipped a migration", "ran a load test", "reviewed the on-call runbook", "rotated keys"]
TECH = ["PostgreSQL 17", "Kafka", "Redis Cluster", "Kubernetes 1.33", "gRPC", "S3", "ClickHouse"]
MEMORY_CATEGORIES = ["preference", "profile", "event", "project"]
SKILL_FAMILIES = ["kubectl", "database", "network", "release", "security"]


def camel(*words: str) -> str:
    return "".join(w[:1].upper() + w[1:] for part in words for w in part.replace("-", " ").split())


# ----------------------------------------------------------------------------------------------- text pool
def resource_text(rng: random.Random) -> tuple[str, str, str]:
    """(service, component, abstract) of a runbook-like document."""
    s, c, y = rng.randrange(len(SERVICES)), rng.randrange(len(COMPONENTS)), rng.randrange(len(SYMPTOMS))
    if rng.random() < 0.08:
        text = (
            f"{SERVICES_ZH[s]}{COMPONENTS_ZH[c]}{SYMPTOMS_ZH[y]}："
            f"{SERVICES_ZH[s]}服务的{COMPONENTS_ZH[c]}出现{SYMPTOMS_ZH[y]}，按手册排查。"
        )
    else:
        title = camel(SERVICES[s], COMPONENTS[c], SYMPTOMS[y].split()[-1])
        text = (
            f"{title}: the {COMPONENTS[c]} of the {SERVICES[s]} service shows {SYMPTOMS[y]}; "
            f"{rng.choice(ACTIONS)} to mitigate (variant {rng.randrange(1000)})."
        )
    return SERVICES[s], COMPONENTS[c].replace(" ", "-"), text


def memory_text(rng: random.Random, category: str) -> str:
    name = rng.choice(["I", "The user"])
    if category == "preference":
        if rng.random() < 0.1:
            style = rng.choice(["简洁", "详细", "带代码示例", "分步骤"])
            return f"我喜欢{style}的回答，{rng.choice(['用中文', '用英文', '附上链接'])}。"
        return f"{name} prefers {rng.choice(STYLES)} answers {rng.choice(LANGS)} about {rng.choice(SERVICES)}."
    if category == "profile":
        return f"{name} works on the {rng.choice(SERVICES)} team in {rng.choice(CITIES)} as a {rng.choice(ROLES)}."
    if category == "event":
        who = name.lower() if name == "The user" else name
        return f"On day {rng.randrange(1, 366)} {who} {rng.choice(EVENTS)} for {rng.choice(SERVICES)}."
    return (
        f"{name} is migrating the {rng.choice(SERVICES)} {rng.choice(COMPONENTS)} to {rng.choice(TECH)} this quarter."
    )


def skill_text(rng: random.Random, family: str) -> str:
    action = rng.choice(ACTIONS)
    service = rng.choice(SERVICES)
    return (
        f"{action.replace(' ', '-')}-{service}: {action.capitalize()} of the {service} service using {family} tooling."
    )


def build_pool(size: int, seed: int = 7) -> dict[str, list[str]]:
    """Distinct texts by kind (resource 50%, memory 35% over its categories, skill 15% over families)."""
    rng = random.Random(seed)
    pool: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()

    def add(key: str, text: str) -> None:
        if text not in seen:
            seen.add(text)
            pool[key].append(text)

    while len(seen) < size:
        r = rng.random()
        if r < 0.5:
            s, c, text = resource_text(rng)
            add(f"res:{s}/{c}", text)
        elif r < 0.85:
            cat = rng.choice(MEMORY_CATEGORIES)
            add(f"mem:{cat}", memory_text(rng, cat))
        else:
            fam = rng.choice(SKILL_FAMILIES)
            add(f"skill:{fam}", skill_text(rng, fam))
    return dict(pool)


# ----------------------------------------------------------------------------------------------- embedding cache
class EmbeddingCache:
    """Text -> vector, persisted under the work directory; only unseen texts are embedded."""

    def __init__(self, workdir: Path, embedder) -> None:
        self.dir = workdir / "emb"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder
        self.index: dict[str, int] = {}
        self.chunks: list[np.ndarray] = []
        texts_file, vec_file = self.dir / "texts.json", self.dir / "vectors.npy"
        if texts_file.exists() and vec_file.exists():
            texts = json.loads(texts_file.read_text(encoding="utf-8"))
            vectors = np.load(vec_file)
            if len(texts) == len(vectors) and vectors.shape[1] == embedder.dim:
                self.index = {t: i for i, t in enumerate(texts)}
                self.chunks = [vectors]

    def vectors(self, texts: list[str]) -> np.ndarray:
        missing = sorted({t for t in texts if t not in self.index})
        if missing:
            started = time.perf_counter()
            print(f"  embedding {len(missing)} new texts (cached afterwards) ...", flush=True)
            new = self.embedder.embed_documents(missing)
            base = sum(len(c) for c in self.chunks)
            for i, t in enumerate(missing):
                self.index[t] = base + i
            self.chunks.append(new.astype(np.float32))
            allv = np.concatenate(self.chunks)
            self.chunks = [allv]
            texts_sorted = [None] * len(self.index)
            for t, i in self.index.items():
                texts_sorted[i] = t
            np.save(self.dir / "vectors.npy", allv)
            (self.dir / "texts.json").write_text(json.dumps(texts_sorted, ensure_ascii=False), encoding="utf-8")
            print(f"  embedded in {time.perf_counter() - started:.0f} s", flush=True)
        allv = self.chunks[0]
        return allv[[self.index[t] for t in texts]]


# ----------------------------------------------------------------------------------------------- store
def plan_tree(n_nodes: int, pool: dict[str, list[str]], seed: int = 11):
    """Files per account: (account, uri, text) plus per-account directory structure. ~98% files, ~2% dirs."""
    rng = random.Random(seed)
    files: list[tuple[str, str, str]] = []
    n_files = int(n_nodes * 0.975)
    res_keys = sorted(k for k in pool if k.startswith("res:"))
    for account, share in ACCOUNTS:
        count = int(n_files * share)
        users = [f"u{i:03d}" for i in range(max(12, count // 2500))]
        agents = [f"a{i}" for i in range(max(3, count // 12000))]
        for i in range(count):
            r = rng.random()
            if r < 0.5:
                key = rng.choice(res_keys)
                service, component = key[4:].split("/")
                text = rng.choice(pool[key])
                uri = f"ctx://resources/{service}/{component}/r{i}.md"
            elif r < 0.85:
                cat = rng.choice(MEMORY_CATEGORIES)
                text = rng.choice(pool[f"mem:{cat}"])
                uri = f"ctx://user/{rng.choice(users)}/memories/{cat}/m{i}.md"
            else:
                fam = rng.choice(SKILL_FAMILIES)
                text = rng.choice(pool[f"skill:{fam}"])
                uri = f"ctx://agent/{rng.choice(agents)}/skills/{fam}/s{i}.md"
            files.append((account, uri, text))
    return files


def dir_texts(files: list[tuple[str, str, str]]) -> dict[tuple[str, str], str]:
    """A directory abstract per (account, dir uri), like the extractive summarizer's: name, count, first titles."""
    children: dict[tuple[str, str], list[str]] = defaultdict(list)
    for account, uri, text in files:
        u = ContextURI.parse(uri)
        title = text.split(":")[0].split("：")[0][:60]
        child_title = title
        for parent in u.ancestors():
            if parent.context_type is None:
                break
            children[(account, str(parent))].append(child_title)
            child_title = parent.name or str(parent)
    out = {}
    for (account, d), titles in children.items():
        name = ContextURI.parse(d).name or d
        first = sorted(set(titles))[:4]
        out[(account, d)] = f"{name}: {len(titles)} items: {', '.join(first)}"
    return out


class _BenchRows:
    """The bench store's node and vector rows: each file's level-0 vector is its pool text's plus noise, its level-2
    vector that plus noise again (one seeded generator, drawn batch by batch)."""

    def __init__(self, vec_of_text: dict[str, np.ndarray], dir_vecs: dict[tuple[str, str], np.ndarray]) -> None:
        self._rng = np.random.default_rng(5)
        self._vec_of_text, self._dir_vecs = vec_of_text, dir_vecs
        self._parsed: dict[str, ContextURI] = {}

    def _noisy(self, base: np.ndarray) -> np.ndarray:
        w = base + self._rng.standard_normal(base.shape).astype(np.float32) * (0.12 / np.sqrt(base.shape[1]))
        return w / np.linalg.norm(w, axis=1, keepdims=True)

    def _parent_of(self, uri: str) -> tuple[str, ContextURI]:
        head = uri.rsplit("/", 1)[0] + "/"
        found = self._parsed.get(head)
        if found is None:
            found = self._parsed[head] = ContextURI.parse(head)
        return head, found

    def files(self, batch: list[tuple[str, str, str]]) -> tuple[list[NodeRecord], list[VectorRecord]]:
        """One batch of files' node rows and their level-0 and level-2 vector rows."""
        from context_engine.ingest.pipeline import vector_id

        level0 = self._noisy(np.stack([self._vec_of_text[text] for _, _, text in batch]))
        level2 = self._noisy(level0)
        nodes: list[NodeRecord] = []
        vectors: list[VectorRecord] = []
        for f, (account, uri, text) in enumerate(batch):
            parent, u = self._parent_of(uri)  # a file shares its directory's owner space, context type, category
            nodes.append(
                NodeRecord(
                    account_id=account,
                    uri=uri,
                    parent_uri=parent,
                    owner_space=u.owner_space,
                    context_type=u.context_type,
                    category=u.category,
                    is_dir=False,
                    title=text.split(":")[0][:80],
                    has_overview=True,
                    has_content=True,
                    content_hash=hashlib.sha256(text.encode()).hexdigest(),
                    index_status="indexed",
                    source="bench",
                )
            )
            common = {
                "uri": uri,
                "parent_uri": parent,
                "account_id": account,
                "owner_space": u.owner_space,
                "context_type": u.context_type or "",
                "category": u.category or "",
                "doc_id": uri,
            }
            vectors.append(
                VectorRecord(id=vector_id(account, uri, 0, 0), vector=level0[f], level=0, text=text, **common)
            )
            vectors.append(
                VectorRecord(
                    id=vector_id(account, uri, 2, 0),
                    vector=level2[f],
                    level=2,
                    chunk_index=0,
                    text=f"{text} (section 1)",
                    **common,
                )
            )
        return nodes, vectors

    def dirs(self, dirs: dict[tuple[str, str], str]) -> tuple[list[NodeRecord], list[VectorRecord]]:
        """Every directory's node row and level-0 vector row."""
        from context_engine.ingest.pipeline import vector_id

        nodes: list[NodeRecord] = []
        vectors: list[VectorRecord] = []
        for (account, d), text in dirs.items():
            u = ContextURI.parse(d)
            parent = str(u.parent) if u.parent else None
            nodes.append(
                NodeRecord(
                    account_id=account,
                    uri=d,
                    parent_uri=parent,
                    owner_space=u.owner_space,
                    context_type=u.context_type,
                    category=u.category,
                    is_dir=True,
                    title=u.name or d,
                    has_overview=True,
                    has_content=False,
                    index_status="indexed",
                    source="bench",
                )
            )
            vectors.append(
                VectorRecord(
                    id=vector_id(account, d, 0, 0),
                    vector=self._dir_vecs[(account, d)],
                    uri=d,
                    parent_uri=parent,
                    account_id=account,
                    owner_space=u.owner_space,
                    context_type=u.context_type or "",
                    category=u.category or "",
                    level=0,
                    doc_id=d,
                    text=text,
                )
            )
        return nodes, vectors


def build_store(home: Path, n_nodes: int, pool_size: int, workdir: Path, embedder, vector_index: bool) -> None:
    marker = home / f"complete-v{STORE_VERSION}"
    if marker.exists():
        print(f"  reusing the store at {home}")
        build_hints(home, embedder, vector_index)
        return
    if home.exists():
        import shutil

        shutil.rmtree(home)
    started = time.perf_counter()
    pool = build_pool(pool_size)
    cache = EmbeddingCache(workdir, embedder)
    pool_texts = sorted(t for texts in pool.values() for t in texts)
    files = plan_tree(n_nodes, pool)
    dirs = dir_texts(files)
    vec_of_text = dict(zip(pool_texts, cache.vectors(pool_texts), strict=True))
    dir_keys = sorted(dirs)
    dir_vecs = dict(zip(dir_keys, cache.vectors([dirs[k] for k in dir_keys]), strict=True))
    print(f"  {len(files)} files, {len(dirs)} directories, pool {len(pool_texts)} texts", flush=True)

    engine = ContextEngineService(
        load_settings(home, vector={"backend": "lancedb" if vector_index else "exact"}), embedder=embedder
    )
    rows = _BenchRows(vec_of_text, dir_vecs)

    # Built and written a batch at a time (issue 26 item 6: all 1M files' records at once peaked at 15.8 GB).
    n_nodes = n_vectors = 0
    t = time.perf_counter()
    print(f"  writing {len(files) + len(dirs)} node rows in batches of {BUILD_BATCH} files ...", flush=True)
    for start in range(0, len(files), BUILD_BATCH):
        nodes, vectors = rows.files(files[start : start + BUILD_BATCH])
        write_rows(engine, nodes, vectors, vector_index)
        n_nodes, n_vectors = n_nodes + len(nodes), n_vectors + len(vectors)
    nodes, vectors = rows.dirs(dirs)
    write_rows(engine, nodes, vectors, vector_index)
    n_nodes, n_vectors = n_nodes + len(nodes), n_vectors + len(vectors)
    del nodes, vectors
    print(f"  rows written in {time.perf_counter() - t:.0f} s (RSS peak {rss_mb()[1]:.0f} MB)", flush=True)
    if vector_index:
        t = time.perf_counter()
        engine.index.optimize()
        print(
            f"  vector index optimised in {time.perf_counter() - t:.0f} s "
            f"(ANN index: {getattr(engine.index, 'has_ann_index', 'n/a')})",
            flush=True,
        )
    (home / "settings.json").write_text(json.dumps({"vector_index": vector_index}), encoding="utf-8")
    # content for a sample (read_memory figures) and the directories above it
    sample = random.Random(3).sample(files, min(500, len(files)))
    for account, uri, text in sample:
        body = f"# {text.split(':')[0]}\n\n{text}\n\n## Diagnosis\n\nCheck the dashboards.\n\n## Mitigation\n\n{text}\n"
        engine.content.write_levels(
            account, uri, {Level.L0: text, Level.L1: f"{text}\n- Diagnosis\n- Mitigation", Level.L2: body}
        )
    engine.close()
    build_hints(home, embedder, vector_index)
    marker.write_text(json.dumps({"nodes": n_nodes, "vectors": n_vectors}), encoding="utf-8")
    (home / "sample.json").write_text(json.dumps([[a, u] for a, u, _ in sample]), encoding="utf-8")
    (home / "callers.json").write_text(json.dumps(callers(files)), encoding="utf-8")
    print(f"  store built in {time.perf_counter() - started:.0f} s", flush=True)


def write_rows(
    engine: ContextEngineService, nodes: list[NodeRecord], vectors: list[VectorRecord], vector_index: bool
) -> None:
    """The bulk path for one batch: node and vector rows in transactions of 50,000 rows, then the vector index in
    calls of 100,000 rows (its optimize comes once, after the last batch)."""
    for start in range(0, len(nodes), 50_000):
        with engine.metadata.transaction():
            engine.metadata.upsert_nodes(nodes[start : start + 50_000], bulk=True)
    for start in range(0, len(vectors), 50_000):
        with engine.metadata.transaction():
            engine.metadata.put_vectors(vectors[start : start + 50_000], bulk=True)
    if vector_index:
        for start in range(0, len(vectors), 100_000):
            engine.index.upsert(vectors[start : start + 100_000])


def build_hints(home: Path, embedder, vector_index: bool) -> None:
    """lookup_knowledge's hint index of every account, as the write pipeline would have kept it (the bulk path
    bypasses it; without this the first write or lookup of each account would rebuild it, inside the measurement)."""
    engine = ContextEngineService(
        load_settings(home, vector={"backend": "lancedb" if vector_index else "exact"}), embedder=embedder
    )
    t = time.perf_counter()
    built = 0
    for account, _ in ACCOUNTS:
        if engine.audit.hint_state(account)[1] != engine.hint_index._version:
            built += engine.hint_index.rebuild(account)
    if built:
        print(f"  hint index: {built} documents in {time.perf_counter() - t:.0f} s", flush=True)
    engine.close()


def callers(files: list[tuple[str, str, str]]) -> list[list[str | None]]:
    spaces: dict[str, dict[str, set[str]]] = defaultdict(lambda: {"user": set(), "agent": set()})
    for account, uri, _ in files:
        u = ContextURI.parse(uri)
        if u.space:
            spaces[account][u.scope].add(u.space)
    out: list[list[str | None]] = []
    rng = random.Random(9)
    for account, kinds in sorted(spaces.items()):
        users, agents = sorted(kinds["user"]), sorted(kinds["agent"])
        for _ in range(40):
            out.append([account, "user", rng.choice(users), rng.choice(agents)])
        out.append([account, "admin", None, None])
    return out


# ----------------------------------------------------------------------------------------------- queries
def make_queries(n: int, seed: int = 21) -> list[str]:
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        r = rng.random()
        s = rng.randrange(len(SERVICES))
        c = rng.randrange(len(COMPONENTS))
        y = rng.randrange(len(SYMPTOMS))
        if r < 0.35:  # no intent word: three typed queries
            out.append(f"{SERVICES[s]} {COMPONENTS[c]} {SYMPTOMS[y]}")
        elif r < 0.45:
            out.append(f"{SERVICES_ZH[s]}{COMPONENTS_ZH[c]}{SYMPTOMS_ZH[y]}怎么处理")
        elif r < 0.6:
            out.append(f"how to {rng.choice(ACTIONS)} for {SERVICES[s]}")
        elif r < 0.75:
            out.append(f"runbook for {SYMPTOMS[y]} on the {SERVICES[s]} {COMPONENTS[c]}")
        elif r < 0.9:
            out.append(
                rng.choice(
                    [
                        "what are my preferences for answers",
                        "remember which team I work on",
                        "我的回答偏好是什么",
                        f"my background with {SERVICES[s]}",
                        "recall what I migrated this quarter",
                    ]
                )
            )
        else:
            out.append(f"{SERVICES[s]} 服务 {COMPONENTS_ZH[c]} 的文档")
    return out


# ----------------------------------------------------------------------------------------------- measuring
class RecordingTrace(trace_module.TraceRecorder):
    last: RecordingTrace | None = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        RecordingTrace.last = self


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def floor_matrices(engine) -> dict[str, np.ndarray]:
    """Each account's level-0 vectors as one plain float32 matrix (unit rows), read from the metadata store: the
    numpy exact floor's data (the same vectors the level-0 matrix serves).

    Loaded once per measured engine, before its warm-up, and the free memory the load leaves behind is handed back
    at once (``malloc_trim``): reading a million rows leaves ~340 MB of freed row objects in glibc's heap, which
    a serving process never holds, and which inflated the RSS this bench reports until 2026-12-06. The matrices
    themselves stay resident while the searches run; the RSS line subtracts their size (:func:`floor_mb`), and
    the peak is reset after the load (:func:`reset_peak`), so that it is the engine's peak plus theirs."""
    matrices = {
        account: np.ascontiguousarray(engine.metadata.load_vector_matrix(account, levels=(0,)).vectors)
        for account, _ in ACCOUNTS
    }
    release_free_heap()
    reset_peak()  # the load's own peak (rows and joined buffers) is not the engine's
    return matrices


def floor_mb(matrices: dict[str, np.ndarray]) -> float:
    """MB the floor's matrices hold: anonymous memory, every page of it resident (written in full when the rows
    were joined into one buffer per account)."""
    return sum(m.nbytes for m in matrices.values()) / 2**20


def reset_peak() -> None:
    """Reset this process's peak RSS (``VmHWM``) to its current RSS (``/proc/self/clear_refs``; a no-op elsewhere)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def release_free_heap() -> None:
    """Hand the free pages of glibc's heap back to the kernel (``malloc_trim(0)``); a no-op without glibc."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def floor_top(matrix: np.ndarray, vector: np.ndarray, k: int = 10) -> np.ndarray:
    """The numpy exact floor: top-``k`` rows of ``matrix`` by inner product with ``vector``, best first (one
    matrix-vector product, a partial sort of the scores, a sort of the ``k``)."""
    scores = matrix @ vector
    top = np.argpartition(-scores, k - 1)[:k] if scores.size > k else np.arange(scores.size)
    return top[np.argsort(-scores[top], kind="stable")]


def measure(
    engine,
    queries,
    contexts,
    warmup: int,
    repetitions: int = 1,
    pause_ms: float = 0.0,
    floor: str = "interleaved",
    matrices: dict[str, np.ndarray] | None = None,
) -> dict[str, list]:
    """search_memory per stage, and, interleaved query by query (so both see the same machine load), the numpy
    exact floor on the same query and the caller account's level-0 rows (``matrices``, :func:`floor_matrices`;
    loaded here when ``None``): ``floor_scan`` (the top-10 given the
    query vector) and ``floor_embed_scan`` (embedding the query, then the top-10). ``total_cpu`` is the thread CPU
    of the search (``time.thread_time``: what the request's own thread spent, without waiting for the cores).
    With ``repetitions`` > 1 the queries run that many times, and each figure of a query is its minimum over the
    repetitions (the noise of a shared machine only ever adds time). ``pause_ms``: idle time before each search (a
    server between requests: work left to background threads, such as the audit row, is done in it). ``floor``
    ``after``: the searches of a pass run back to back and the floor over the same queries after them (a client
    that sends its next request as soon as it has the answer: the audit writer then competes with the next search,
    where interleaved it mostly runs during the floor's work)."""
    search_module.TraceRecorder = RecordingTrace  # per-request float timings
    # a query keeps its caller in every repetition (the warm-up queries come first in the first one only)
    if matrices is None:
        matrices = floor_matrices(engine)
    runs = [
        _measure_once(
            engine, queries, contexts, matrices, warmup if r == 0 else 0, 0 if r == 0 else warmup, pause_ms, floor
        )
        for r in range(max(1, repetitions))
    ]
    search_module.TraceRecorder = trace_module.TraceRecorder
    if len(runs) > 1:  # a first pass much slower than the later ones is cold cost (first touches), not noise
        print(
            "  total per repetition (p50 / p95 ms): "
            + "; ".join(f"{pct(run['total'], 50):.2f} / {pct(run['total'], 95):.2f}" for run in runs)
        )
    samples: dict[str, list] = {}
    for key in runs[0]:
        if key in ("typed_queries", "hits", "caller"):
            samples[key] = runs[0][key]
        else:
            samples[key] = np.min(np.array([run[key] for run in runs]), axis=0).tolist()
    return samples


def _floor_once(engine, matrices: dict[str, np.ndarray], q: str, ctx: RequestContext) -> tuple[float, float]:
    """The floor of one query: ``(floor_scan, floor_embed_scan)`` in ms."""
    start = time.perf_counter()
    vector = np.asarray(engine.embedder.embed_query(q), dtype=np.float32)
    embedded = time.perf_counter()
    floor_top(matrices[ctx.account_id], vector)
    scanned = time.perf_counter()
    return (scanned - embedded) * 1e3, (scanned - start) * 1e3


def _measure_once(
    engine,
    queries,
    contexts,
    matrices: dict[str, np.ndarray],
    warmup: int,
    offset: int,
    pause_ms: float,
    floor: str = "interleaved",
) -> dict[str, list]:
    samples: dict[str, list] = defaultdict(list)
    typed_counts: list[int] = []
    caller_kinds: list[str] = []  # "account role" of each measured query
    asked = list(enumerate(queries[:warmup] + queries))
    for i, q in asked:
        ctx = contexts[(i + offset) % len(contexts)]
        if pause_ms > 0:
            time.sleep(pause_ms / 1e3)
        cpu = time.thread_time()
        start = time.perf_counter()
        response = engine.search_memory(SearchMemoryRequest(query=q, top_k=10), ctx)
        total = (time.perf_counter() - start) * 1e3
        cpu = (time.thread_time() - cpu) * 1e3
        floor_ms = _floor_once(engine, matrices, q, ctx) if floor == "interleaved" else None
        if i < warmup:
            continue
        if floor_ms is not None:
            samples["floor_scan"].append(floor_ms[0])
            samples["floor_embed_scan"].append(floor_ms[1])
        t = RecordingTrace.last.timings_ms
        samples["total"].append(total)
        samples["total_cpu"].append(cpu)
        for stage in ("planner", "embed", "seed", "hierarchical", "recheck", "assemble"):
            samples[stage].append(t.get(stage, 0.0))
        samples["seed_search"].append(t.get("seed", 0.0) - t.get("embed", 0.0))
        samples["other"].append(
            total - sum(t.get(s, 0.0) for s in ("planner", "seed", "hierarchical", "recheck", "assemble"))
        )
        typed_counts.append(len(response.typed_queries))
        samples["hits"].append(len(response.hits))
        caller_kinds.append(f"{ctx.account_id} {ctx.role}")
    if floor != "interleaved":  # after the pass: the same queries and callers, back to back too
        for i, q in asked[warmup:]:
            scan, embed_scan = _floor_once(engine, matrices, q, contexts[(i + offset) % len(contexts)])
            samples["floor_scan"].append(scan)
            samples["floor_embed_scan"].append(embed_scan)
    samples["typed_queries"] = typed_counts
    samples["caller"] = caller_kinds
    return samples


def report(title: str, samples: dict[str, list]) -> None:
    print(
        f"\n  {title}  ({len(samples['total'])} queries, mean typed queries "
        f"{np.mean(samples['typed_queries']):.2f}, mean hits {np.mean(samples['hits']):.1f})"
    )
    print(f"  {'stage':<14}{'p50 ms':>9}{'p95 ms':>9}{'mean ms':>9}{'share':>8}")
    total_mean = float(np.mean(samples["total"]))
    for stage in ("planner", "embed", "seed_search", "hierarchical", "recheck", "assemble", "other", "total"):
        vals = samples[stage]
        share = float(np.mean(vals)) / total_mean if total_mean else 0.0
        print(f"  {stage:<14}{pct(vals, 50):9.2f}{pct(vals, 95):9.2f}{np.mean(vals):9.2f}{share:8.0%}")
    cpu = samples["total_cpu"]
    print(f"  {'total CPU':<14}{pct(cpu, 50):9.2f}{pct(cpu, 95):9.2f}{np.mean(cpu):9.2f}   (the search's thread)")
    print(f"  throughput     {1000.0 / total_mean:9.1f} queries/s (one thread)")
    scan, embed_scan, total = (samples[k] for k in ("floor_scan", "floor_embed_scan", "total"))
    print(
        "  numpy exact floor (plain float32 top-10 over the caller account's level-0 rows, same queries, "
        f"{samples['floor'][0]}):"
    )
    print(f"  {'floor_scan':<14}{pct(scan, 50):9.2f}{pct(scan, 95):9.2f}{np.mean(scan):9.2f}   (query vector given)")
    print(
        f"  {'floor_e+scan':<14}{pct(embed_scan, 50):9.2f}{pct(embed_scan, 95):9.2f}{np.mean(embed_scan):9.2f}"
        "   (query embedded, then scanned)"
    )
    print(
        f"  search_memory total / floor: p50 {pct(total, 50) / pct(scan, 50):.1f}x, "
        f"p95 {pct(total, 95) / pct(scan, 95):.1f}x (scan only); p50 {pct(total, 50) / pct(embed_scan, 50):.1f}x, "
        f"p95 {pct(total, 95) / pct(embed_scan, 95):.1f}x (embedding included)"
    )
    by_caller: dict[str, list[float]] = defaultdict(list)
    for caller, ms in zip(samples["caller"], total, strict=True):
        by_caller[str(caller)].append(ms)
    print(
        "  total by caller (account role: queries, p50 / p95 ms): "
        + "; ".join(f"{c}: {len(v)}, {pct(v, 50):.1f} / {pct(v, 95):.1f}" for c, v in sorted(by_caller.items()))
    )


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MB, from /proc/self/status."""
    fields = _status_mb()
    return fields.get("VmRSS", float("nan")), fields.get("VmHWM", float("nan"))


def rss_split_mb() -> tuple[float, float]:
    """(anonymous, file-backed) parts of the resident set in MB: file-backed pages are the mapped derived files
    (level-0 matrix, BM25) the searches touched, which the kernel may drop and read again."""
    fields = _status_mb()
    return fields.get("RssAnon", float("nan")), fields.get("RssFile", float("nan"))


def _status_mb() -> dict[str, float]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            fields[key] = int(value.split()[0]) / 1024
    return fields


def default_embedder():
    from context_engine.providers.embedder import build_embedder
    from context_engine.settings import EmbeddingSettings

    return build_embedder(EmbeddingSettings(num_threads=1))


def vector_backend(backend: str, home: Path, milvus_uri: str | None) -> dict:
    """The ``vector`` settings of a measured backend (``exact`` for a home built without a vector index); Milvus
    collections are named after the home (``bench_store_<size>_...``)."""
    if backend != "milvus":
        return {"backend": backend}
    prefix = "bench_" + home.name.replace("-", "_")
    return {"backend": "milvus", "milvus": {"uri": milvus_uri, "collection_prefix": prefix, "timeout_s": 60}}


def default_milvus_uri() -> str | None:
    """``CE_TEST_MILVUS_URI`` from the environment, else from ``.services/milvus.env`` (scripts/services.sh)."""
    if os.environ.get("CE_TEST_MILVUS_URI"):
        return os.environ["CE_TEST_MILVUS_URI"]
    env = ROOT / ".services" / "milvus.env"
    for line in env.read_text().splitlines() if env.exists() else []:
        if line.startswith("export CE_TEST_MILVUS_URI="):
            return line.split("=", 1)[1].strip().strip("'\"")
    return None


def sync_milvus(home: Path, milvus_uri: str, embedder) -> None:
    """Make the home's Milvus collection hold exactly its metadata store's vector rows (bulk upsert of what is
    missing, delete of what is extra), and say how long it took."""
    engine = ContextEngineService(
        load_settings(home, vector=vector_backend("milvus", home, milvus_uri)), embedder=embedder, recover_writes=False
    )
    t = time.perf_counter()
    added = removed = 0
    for account, _ in ACCOUNTS:
        have = set(engine.index.ids(account))
        keep: set[str] = set()
        for batch in engine.metadata.iter_vectors(account, batch_size=20_000):
            keep.update(v.id for v in batch)
            missing = [v for v in batch if v.id not in have]
            if missing:
                engine.index.upsert(missing)
                added += len(missing)
        extra = sorted(have - keep)
        if extra:
            engine.index.delete(extra)
            removed += len(extra)
    engine.index.optimize()  # flush: Milvus Lite searches unflushed rows without the index
    print(
        f"  milvus collection {engine.index.collection}: {added} rows upserted, {removed} deleted and flushed in "
        f"{time.perf_counter() - t:.0f} s ({engine.index.count()} rows)",
        flush=True,
    )
    engine.close()


def measure_home(args: argparse.Namespace) -> None:
    """The measurements of one built home, in this (fresh) process."""
    home = args.measure_home
    size = json.loads(next(home.glob("complete-v*")).read_text(encoding="utf-8"))["nodes"]
    vector_index = json.loads((home / "settings.json").read_text(encoding="utf-8"))["vector_index"]
    contexts = [
        RequestContext(account_id=a, role=r, user_space=u, agent_space=g)
        for a, r, u, g in json.loads((home / "callers.json").read_text())
    ]
    random.Random(1).shuffle(contexts)
    queries = make_queries(args.queries)
    backend = vector_backend(args.backend[0] if vector_index else "exact", home, args.milvus_uri)
    print(f"\n  -- vector backend: {backend['backend']} --")
    for source, hybrid in [(s, h) for s in args.sources for h in args.hybrid]:
        retrieval = {"l0_source": source, "seed": {"hybrid": hybrid == "on"}}
        t0 = time.perf_counter()
        engine = ContextEngineService(
            load_settings(home, retrieval=retrieval, vector=backend, knowledge={"hybrid": hybrid == "on"}),
            embedder=default_embedder(),
        )
        opened = time.perf_counter() - t0
        t = time.perf_counter()
        matrices = floor_matrices(engine)  # before the warm-up: its load's garbage is handed back at once
        t0 += time.perf_counter() - t  # not part of the start
        if args.serve_warm_up:
            print(f"  warmed as `serve` warms it in {warm_up(engine).seconds:.1f} s (gc.freeze included)")
        engine.search_memory(SearchMemoryRequest(query=queries[0], top_k=10), contexts[0])
        first = time.perf_counter() - t0
        for account, _ in ACCOUNTS:  # the other accounts' loads are not part of the first query
            for ctx in contexts:
                if ctx.account_id == account:
                    engine.search_memory(SearchMemoryRequest(query=queries[1], top_k=10), ctx)
                    break
        print(
            f"\n  {size} nodes, source '{source}', hybrid {hybrid}: opened in {opened:.2f} s, "
            f"first search_memory answered {first:.2f} s after the start (model, matrix and BM25 loads included)"
        )
        if args.audit == "off":  # no tool_invocation row (the row is written after the answer, off the thread)
            engine.search_audit = None
        samples = measure(
            engine, queries, contexts, args.warmup, args.repetitions, args.pause_ms, args.floor, matrices=matrices
        )
        samples["floor"] = [args.floor]
        report(f"search_memory, {size} nodes, level-0 source '{source}', hybrid {hybrid}", samples)
        # the floor's matrices are the bench's, not the engine's: their resident bytes are left out
        held = floor_mb(matrices)
        now, peak = rss_mb()
        anon, mapped = rss_split_mb()
        del matrices
        print(
            f"  RSS after the warm searches: {now - held:.0f} MB (peak {peak - held:.0f} MB; anonymous "
            f"{anon - held:.0f} MB, file-backed {mapped:.0f} MB; the floor's {held:.0f} MB of float32 rows left out)"
        )
        if vector_index and source == args.sources[0] and hybrid == args.hybrid[0] and not args.search_only:
            admin = RequestContext(account_id=ACCOUNTS[0][0], role="admin")
            times, stages = [], defaultdict(list)
            for i, q in enumerate(queries[: min(300, len(queries))]):
                t = time.perf_counter()
                answer = engine.lookup_knowledge(q, admin, session_id=f"bench-{i}")
                times.append((time.perf_counter() - t) * 1e3)
                if i >= args.warmup:
                    for stage in ("hint", "embed", "semantic", "keyword", "hydrate", "post", "record"):
                        stages[stage].append(getattr(answer.traces, f"{stage}_ms") or 0.0)
            times = times[args.warmup :]
            print(
                f"  lookup_knowledge: p50 {pct(times, 50):.2f} ms, p95 {pct(times, 95):.2f} ms ({len(times)} queries)"
            )
            print(
                "    per stage, p50 / p95 ms: "
                + ", ".join(f"{k} {pct(v, 50):.1f} / {pct(v, 95):.1f}" for k, v in stages.items())
            )
        if source == args.sources[0] and hybrid == args.hybrid[0] and not args.search_only:
            writes(engine, contexts)
            recall(engine, queries, contexts)
        engine.close()


def writes(engine, contexts) -> None:
    """Write latency through the real pipeline (embedding included), into one user's memories."""
    ctx = next(c for c in contexts if c.role == "user")
    run = int(time.time())  # new texts every run: a re-run on a cached store must not find them "unchanged"
    one, hundred = [], []
    for i in range(10):
        t = time.perf_counter()
        text = f"Bench note {run}-{i}: the {SERVICES[i % len(SERVICES)]} deploy finished at {i}:00."
        engine.add_memory(text, ctx, policy="keep")  # keep: near-duplicates are written, not skipped
        one.append((time.perf_counter() - t) * 1e3)
    from context_engine.schema.memory import MemoryItem

    for r in range(3):
        items = [
            MemoryItem(text=f"Bench batch {run}-{r} item {j}: {TECH[j % len(TECH)]} on day {j}.") for j in range(100)
        ]
        t = time.perf_counter()
        engine.add_memories(items, ctx, policy="keep")
        hundred.append((time.perf_counter() - t) * 1e3)
    print(
        f"  write latency: add 1 memory p50 {pct(one, 50):.0f} ms (max {max(one):.0f}), "
        f"add 100 memories p50 {pct(hundred, 50):.0f} ms (max {max(hundred):.0f})"
    )


def recall(engine, queries, contexts) -> None:
    """Recall@10 of the level-0 matrix as served against an uncompressed float32 matrix of the same rows."""
    from context_engine.retrieval.scope import base_filter
    from context_engine.schema.query import TypedQuery
    from context_engine.storage.vector.matrix import MatrixVectorIndex
    from context_engine.storage.vector.matrix_scoring import MemoryL0Scorer

    exact = MatrixVectorIndex(engine.metadata, levels=(0,))
    compressed = sum(
        seg.compressed
        for account, _ in ACCOUNTS
        for seg, _ in (engine.l0_matrix.view(account) or type("V", (), {"segments": {}})).segments.values()
    )
    found = []
    for i, q in enumerate(queries[:200]):
        ctx = contexts[i % len(contexts)]
        vector = engine.embedder.embed_query(q)
        flt = base_filter(TypedQuery(text=q, context_type=("resource", "memory", "skill")[i % 3]), ctx)
        served = MemoryL0Scorer(engine.l0_matrix.view(ctx.account_id), vector).top(flt, 10)
        want = MemoryL0Scorer(exact.view(ctx.account_id), vector).top(flt, 10)
        if want:
            found.append(len({m.uri for m in served} & {m.uri for m in want}) / len(want))
    print(f"  level-0 recall@10 as served vs float32: {np.mean(found):.4f} ({compressed} compressed segments)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--sources", nargs="+", default=["memory"], choices=["memory", "index", "auto"])
    parser.add_argument("--pool", type=int, default=12_000, help="distinct file texts embedded once")
    parser.add_argument(
        "--hybrid", nargs="+", default=["on"], choices=["off", "on"], help="retrieval.seed.hybrid values to measure"
    )
    parser.add_argument("--no-vector-index", action="store_true", help="build no LanceDB index (no lookup figures)")
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / ".cache" / "search_memory")
    parser.add_argument("--build-only", action="store_true", help="build (or reuse) the stores, measure nothing")
    parser.add_argument(
        "--backend",
        nargs="+",
        default=["lancedb"],
        choices=["lancedb", "milvus"],
        help="vector backends to measure, each in its own child process (milvus: see --milvus-uri)",
    )
    parser.add_argument("--milvus-uri", default=None, help="Milvus address (default: CE_TEST_MILVUS_URI)")
    parser.add_argument(
        "--repetitions", type=int, default=1, help="run the queries this many times; per query the minimum is kept"
    )
    parser.add_argument(
        "--audit", default="on", choices=["on", "off"], help="search_memory's tool_invocation row (default on)"
    )
    parser.add_argument("--pause-ms", type=float, default=0.0, help="idle time before each measured search")
    parser.add_argument(
        "--floor",
        default="interleaved",
        choices=["interleaved", "after"],
        help="the numpy floor between the searches (default), or after each pass (searches back to back)",
    )
    parser.add_argument(
        "--search-only", action="store_true", help="search_memory and the floor only (no lookup, writes, recall, reads)"
    )
    parser.add_argument(
        "--serve-warm-up",
        action="store_true",
        help="warm each measured engine as `serve` does before /readyz (context_engine.warm_up: loads, gc.freeze)",
    )
    parser.add_argument("--measure-home", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.milvus_uri = args.milvus_uri or default_milvus_uri()
    if "milvus" in args.backend and (args.no_vector_index or not args.milvus_uri):
        parser.error("--backend milvus needs a vector index and a Milvus: --milvus-uri or `scripts/services.sh up`")
    if args.measure_home is not None:
        measure_home(args)
        return

    print(
        f"machine: {os.cpu_count()} CPUs, load average {' / '.join(f'{x:.1f}' for x in os.getloadavg())} (1/5/15 min)"
    )
    embedder = default_embedder()
    for size in args.sizes:
        home = args.workdir / f"store-{size}"
        print(f"\n== {size} nodes ==", flush=True)
        t0 = time.perf_counter()
        build_store(home, size, args.pool, args.workdir, embedder, not args.no_vector_index)
        print(f"  store ready in {time.perf_counter() - t0:.0f} s", flush=True)
        if args.build_only:
            continue
        for backend in args.backend:
            if backend == "milvus":
                sync_milvus(home, args.milvus_uri, embedder)
            child = [sys.executable, __file__, "--measure-home", str(home), "--queries", str(args.queries)]
            child += ["--warmup", str(args.warmup), "--sources", *args.sources, "--hybrid", *args.hybrid]
            child += ["--repetitions", str(args.repetitions), "--audit", args.audit, "--pause-ms", str(args.pause_ms)]
            child += ["--floor", args.floor]
            child += ["--search-only"] if args.search_only else []
            child += ["--serve-warm-up"] if args.serve_warm_up else []
            child += ["--backend", backend] + (["--milvus-uri", args.milvus_uri] if args.milvus_uri else [])
            subprocess.run(child, check=True)
            print(f"  load average after the {backend} run: {' / '.join(f'{x:.1f}' for x in os.getloadavg())}")
        if args.search_only:
            continue
        backend = "exact" if args.no_vector_index else "lancedb"
        engine = ContextEngineService(load_settings(home, vector={"backend": backend}), embedder=embedder)
        sample = json.loads((home / "sample.json").read_text())
        for level in ("L1", "L2"):
            times = []
            for account, uri in sample[:300]:
                ctx = RequestContext(account_id=account, role="admin")
                t = time.perf_counter()
                engine.read_memory(uri, ctx, level=level)
                times.append((time.perf_counter() - t) * 1e3)
            print(f"  read_memory {level}: p50 {pct(times, 50):.2f} ms, p95 {pct(times, 95):.2f} ms")
        engine.close()


if __name__ == "__main__":
    main()
