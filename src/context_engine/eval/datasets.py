"""Evaluation datasets (DESIGN §11): BEIR folders, the runbook set, and golden-case JSON, in one shape.

* **BEIR** (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv`` with a ``query-id corpus-id score`` header):
  SciFact, CMRC 2018. Only the queries that have qrels in the split are kept.
* **Runbooks** (``../shared/data/runbooks``; see its SOURCES.md): markdown files; a document id is the file's path
  relative to ``runbooks/``; the split names a qrels file (``prometheus-operator``: summary queries on 108 docs,
  ``prometheus-operator+openshift``: ``description_clean`` queries on 380 docs, ``kubesphere-zh``: English summaries
  against 49 Chinese runbooks). The corpus is every ``.md`` (except ``_index.md``) below the folders named by the
  split, so distractors without qrels count too.
* **Golden JSON** (``{"name", "corpus"?, "cases": [{"id", "query", "expected": [{"doc"|"uri", "grade"}], "tags"}]}``,
  or a bare list of cases): ``corpus`` is a path relative to the file (a BEIR ``corpus.jsonl`` or a folder of
  markdown); without one the dataset can only be run live or from stored candidates.

Every id is a ``str``. :attr:`EvalDataset.hash` is the SHA-256 of every file read (path and bytes, in a fixed
order), so a report names exactly the data it measured; :attr:`EvalDataset.corpus_hash` covers the corpus alone and
keys the document-vector cache.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from context_engine.errors import ContextEngineError, ErrorCode

__all__ = [
    "RUNBOOK_QUERY_FIELDS",
    "Document",
    "EvalDataset",
    "half_of",
    "load_beir",
    "load_dataset",
    "load_golden",
    "load_runbooks",
]

Half = Literal["dev", "test"]

#: Default query field per runbook split (the issue's definition of the three runbook sets).
RUNBOOK_QUERY_FIELDS = {
    "prometheus-operator": "text",
    "prometheus-operator+openshift": "description_clean",
    "kubesphere-zh": "text",
}

_FRONT_MATTER_RE = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.DOTALL)
_H1_RE = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Document:
    """One corpus document. The text embedded and BM25-indexed is :meth:`content` (``title + " " + text``)."""

    id: str
    title: str
    text: str

    def content(self) -> str:
        """``title + " " + text`` (the BEIR/MTEB convention), or ``text`` alone without a title."""
        return f"{self.title} {self.text}" if self.title else self.text


@dataclass(frozen=True)
class EvalDataset:
    """A retrieval test set: corpus, queries and graded qrels (grade > 0 is relevant).

    Attributes:
        name: the data folder or golden file name (``scifact``, ``runbooks``, ``cmrc2018_zh``).
        split: the qrels split (``test``, ``dev``, ``prometheus-operator``, ...).
        corpus: documents by id (empty for a golden file without a corpus).
        queries: query text by query id, only queries with qrels.
        qrels: ``{query_id: {doc_id: grade}}``.
        hash: SHA-256 (hex) of the files read.
        corpus_hash: SHA-256 (hex) of the corpus files only.
        source: the path loaded.
        half: ``dev``/``test`` when the queries were halved with :func:`half_of`, else ``None``.
        query_field: the query field used (runbooks), else ``None``.
        tags: golden-case tags by query id.
        max_docs: set when the corpus was cut with :meth:`with_max_docs`.
        query_limit: set when the queries were cut with :meth:`limited` (the first N by id).
    """

    name: str
    split: str
    corpus: dict[str, Document]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    hash: str
    corpus_hash: str
    source: str
    half: Half | None = None
    query_field: str | None = None
    tags: dict[str, list[str]] = field(default_factory=dict)
    max_docs: int | None = None
    query_limit: int | None = None

    @property
    def key(self) -> str:
        """``name/split`` plus ``@half`` and ``#field`` when set; names baselines and reports."""
        key = f"{self.name}/{self.split}"
        if self.query_field and self.query_field != RUNBOOK_QUERY_FIELDS.get(self.split, self.query_field):
            key += f"#{self.query_field}"
        if self.half:
            key += f"@{self.half}"
        if self.query_limit:
            key += f"~q{self.query_limit}"
        if self.max_docs:
            key += f"~{self.max_docs}"
        return key

    @property
    def slug(self) -> str:
        """:attr:`key` as a file-name stem (``runbooks-prometheus-operator+openshift``)."""
        return re.sub(r"[^A-Za-z0-9_.+-]+", "-", self.key).strip("-")

    def select(self, query_ids: Iterable[str], *, half: Half | None = None) -> EvalDataset:
        """The same dataset restricted to ``query_ids`` (in sorted order)."""
        keep = sorted(set(query_ids) & set(self.queries))
        return replace(
            self,
            queries={q: self.queries[q] for q in keep},
            qrels={q: self.qrels[q] for q in keep if q in self.qrels},
            tags={q: self.tags[q] for q in keep if q in self.tags},
            half=half if half is not None else self.half,
        )

    def halved(self, half: Half) -> EvalDataset:
        """The ``dev`` or ``test`` half of the queries (see :func:`half_of`)."""
        return self.select([q for q in self.queries if half_of(q) == half], half=half)

    def limited(self, n: int) -> EvalDataset:
        """The first ``n`` queries by id (a quick slice); the corpus is unchanged. Its scores are not those of the
        whole set: the key gets ``~q<n>`` and the hash changes (a baseline of the slice is its own file), unless
        ``n`` keeps every query (the same dataset)."""
        if n >= len(self.queries):
            return self
        cut = self.select(sorted(self.queries)[:n])
        return replace(cut, query_limit=n, hash=hashlib.sha256(f"{self.hash}\0q{n}".encode()).hexdigest())

    @property
    def whole_slug(self) -> str:
        """:attr:`slug` of the whole query set (without ``~q<n>``): where a :meth:`limited` slice's full-set
        baseline lives."""
        return replace(self, query_limit=None).slug

    def with_max_docs(self, max_docs: int) -> EvalDataset:
        """A smaller corpus for expensive models: every document judged for the kept queries, then distractors in
        ``sha1(id)`` order (deterministic) up to ``max_docs``. Scores are comparable between methods on the same
        slice, not with full-corpus numbers; the key gets ``~<max_docs>`` and the corpus hash changes with the ids.
        """
        judged = {d for q in self.queries for d in self.qrels.get(q, {}) if d in self.corpus}
        rest = sorted((d for d in self.corpus if d not in judged), key=lambda d: hashlib.sha1(d.encode()).hexdigest())
        keep = judged | set(rest[: max(0, max_docs - len(judged))])
        corpus = {d: doc for d, doc in self.corpus.items() if d in keep}
        digest = hashlib.sha256((self.corpus_hash + "\0" + "\0".join(sorted(keep))).encode()).hexdigest()
        return replace(
            self,
            corpus=corpus,
            corpus_hash=digest,
            max_docs=max_docs,
            hash=hashlib.sha256((self.hash + digest).encode()).hexdigest(),
        )


def half_of(query_id: str) -> Half:
    """Deterministic dev/test assignment of a query: ``dev`` when the first byte of ``sha1(id)`` is even.

    Independent of order and of the other queries, so adding a query never moves another between halves.
    """
    return "dev" if hashlib.sha1(query_id.encode("utf-8")).digest()[0] % 2 == 0 else "test"


class _Hasher:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.all = hashlib.sha256()
        self.corpus = hashlib.sha256()

    def add(self, path: Path, *, corpus: bool = False) -> bytes:
        data = path.read_bytes()
        rel = path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else path.name
        for h in (self.all, self.corpus) if corpus else (self.all,):
            h.update(rel.encode("utf-8") + b"\0" + len(data).to_bytes(8, "little") + data)
        return data


def _jsonl(data: bytes, path: Path) -> list[dict]:
    out = []
    for n, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{path}:{n}: invalid JSON: {err.msg}") from err
    return out


def read_beir_qrels(data: bytes) -> dict[str, dict[str, int]]:
    """BEIR qrels TSV (optional ``query-id`` header) to ``{qid: {doc_id: grade}}``; grade 0 rows are kept."""
    qrels: dict[str, dict[str, int]] = {}
    for line in data.decode("utf-8").splitlines():
        parts = line.rstrip("\n").split("\t")
        if len(parts) < 3 or parts[0] == "query-id":
            continue
        qid, did, grade = parts[0], parts[1], parts[2]
        qrels.setdefault(str(qid), {})[str(did)] = int(float(grade))
    return qrels


def load_beir(path: Path, split: str = "test") -> EvalDataset:
    """A BEIR folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

    Raises:
        ContextEngineError: ``WRT-4041`` a file is missing; ``WRT-4221`` a line is not valid JSON.
    """
    path = Path(path)
    qrels_path = path / "qrels" / f"{split}.tsv"
    for p in (path / "corpus.jsonl", path / "queries.jsonl", qrels_path):
        if not p.is_file():
            raise ContextEngineError(ErrorCode.PATH_NOT_FOUND, f"BEIR dataset file missing: {p}")
    h = _Hasher(path)
    corpus_rows = _jsonl(h.add(path / "corpus.jsonl", corpus=True), path / "corpus.jsonl")
    query_rows = _jsonl(h.add(path / "queries.jsonl"), path / "queries.jsonl")
    qrels = read_beir_qrels(h.add(qrels_path))
    corpus = {
        str(r["_id"]): Document(str(r["_id"]), str(r.get("title") or ""), str(r.get("text") or "")) for r in corpus_rows
    }
    queries = {str(r["_id"]): str(r["text"]) for r in query_rows if str(r["_id"]) in qrels}
    qrels = {q: d for q, d in qrels.items() if q in queries}
    return EvalDataset(path.name, split, corpus, queries, qrels, h.all.hexdigest(), h.corpus.hexdigest(), str(path))


def markdown_document(doc_id: str, raw: str) -> Document:
    """A markdown file as a :class:`Document`: YAML front matter removed; title from the front matter's ``title``,
    else the first ``# `` heading, else the file stem; text = the rest of the body (headings kept)."""
    title = ""
    body = raw
    m = _FRONT_MATTER_RE.match(raw)
    if m:
        body = raw[m.end() :]
        for line in m.group(1).splitlines():
            if line.lower().startswith("title:"):
                title = line.split(":", 1)[1].strip().strip("'\"")
    h1 = _H1_RE.search(body)
    if not title and h1:
        title = h1.group(1)
    if not title:
        title = Path(doc_id).stem
    return Document(doc_id, title, body.strip())


def _markdown_corpus(root: Path, folders: Iterable[Path], h: _Hasher) -> dict[str, Document]:
    corpus: dict[str, Document] = {}
    for folder in folders:
        for p in sorted(folder.rglob("*")):
            if p.suffix.lower() not in (".md", ".markdown") or p.name == "_index.md" or not p.is_file():
                continue
            doc_id = p.relative_to(root).as_posix()
            corpus[doc_id] = markdown_document(doc_id, h.add(p, corpus=True).decode("utf-8"))
    return corpus


def load_runbooks(path: Path, split: str = "prometheus-operator", *, query_field: str | None = None) -> EvalDataset:
    """The runbook set (see the module docstring). ``query_field``: ``text`` (the alert summary) or a metadata key
    such as ``description_clean``; default from :data:`RUNBOOK_QUERY_FIELDS`.

    Raises:
        ContextEngineError: ``WRT-4041`` unknown split or missing files; ``WRT-4002`` a query lacks the field.
    """
    path = Path(path)
    qrels_path = path / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        known = sorted(p.stem for p in (path / "qrels").glob("*.tsv"))
        raise ContextEngineError(ErrorCode.PATH_NOT_FOUND, f"no runbook split {split!r}; known: {known}")
    field_name = query_field or RUNBOOK_QUERY_FIELDS.get(split, "text")
    h = _Hasher(path)
    folders = [path / part for part in split.split("+")]
    corpus = _markdown_corpus(path, folders, h)
    rows = _jsonl(h.add(path / "queries.jsonl"), path / "queries.jsonl")
    qrels = read_beir_qrels(h.add(qrels_path))
    queries: dict[str, str] = {}
    for r in rows:
        qid = str(r["_id"])
        if qid not in qrels:
            continue
        text = r.get("text") if field_name == "text" else (r.get("metadata") or {}).get(field_name)
        if not text:
            raise ContextEngineError(ErrorCode.REQUEST_INVALID, f"query {qid} has no field {field_name!r}")
        queries[qid] = str(text)
    qrels = {q: d for q, d in qrels.items() if q in queries}
    return EvalDataset(
        path.name,
        split,
        corpus,
        queries,
        qrels,
        h.all.hexdigest(),
        h.corpus.hexdigest(),
        str(path),
        query_field=field_name,
    )


def load_golden(path: Path) -> EvalDataset:
    """A golden-case JSON file (see the module docstring). Expected entries name ``doc`` (a corpus id) or ``uri``.

    Raises:
        ContextEngineError: ``WRT-4221`` malformed file (missing ``id``/``query``/``expected``, duplicate ids).
    """
    path = Path(path)
    h = _Hasher(path.parent)
    try:
        raw = json.loads(h.add(path).decode("utf-8"))
    except json.JSONDecodeError as err:
        raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{path}: invalid JSON: {err.msg}") from err
    cases = raw if isinstance(raw, list) else raw.get("cases", [])
    name = path.stem if isinstance(raw, list) else str(raw.get("name") or path.stem)
    corpus: dict[str, Document] = {}
    if isinstance(raw, dict) and raw.get("corpus"):
        cpath = (path.parent / str(raw["corpus"])).resolve()
        if cpath.is_dir():
            h.root = cpath
            corpus = _markdown_corpus(cpath, [cpath], h)
        elif cpath.is_file():
            rows = _jsonl(h.add(cpath, corpus=True), cpath)
            corpus = {
                str(r["_id"]): Document(str(r["_id"]), str(r.get("title") or ""), str(r.get("text") or ""))
                for r in rows
            }
        else:
            raise ContextEngineError(ErrorCode.PATH_NOT_FOUND, f"golden corpus not found: {cpath}")
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    tags: dict[str, list[str]] = {}
    for i, case in enumerate(cases):
        try:
            qid, query, expected = str(case["id"]), str(case["query"]), case["expected"]
        except (KeyError, TypeError) as err:
            raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{path}: case {i} lacks id/query/expected") from err
        if qid in queries:
            raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{path}: duplicate case id {qid!r}")
        grades: dict[str, int] = {}
        for e in expected:
            target = e.get("doc") if isinstance(e, dict) else e
            target = target if target is not None else e.get("uri")
            if target is None:
                raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{path}: case {qid} has an entry without doc/uri")
            grades[str(target)] = int(e.get("grade", 1)) if isinstance(e, dict) else 1
        queries[qid] = query
        qrels[qid] = grades
        tags[qid] = [str(t) for t in case.get("tags", [])]
    return EvalDataset(
        name, "golden", corpus, queries, qrels, h.all.hexdigest(), h.corpus.hexdigest(), str(path), tags=tags
    )


def load_dataset(
    path: str | Path,
    split: str | None = None,
    *,
    query_field: str | None = None,
    half: Half | None = None,
    limit_queries: int | None = None,
    max_docs: int | None = None,
) -> EvalDataset:
    """Load any supported dataset, recognised by its layout (see the module docstring).

    Args:
        path: a BEIR folder, the runbooks folder, or a golden JSON file.
        split: the qrels split (default ``test`` for BEIR, ``prometheus-operator`` for runbooks).
        query_field: runbooks only: the query field.
        half: keep only the ``dev`` or ``test`` half of the queries (:func:`half_of`).
        limit_queries: keep the first N queries by id.
        max_docs: cut the corpus to the judged documents plus distractors (:meth:`EvalDataset.with_max_docs`).

    Raises:
        ContextEngineError: ``WRT-4041`` when ``path`` is none of the known layouts.
    """
    p = Path(path).expanduser()
    if p.is_file() and p.suffix == ".json":
        ds = load_golden(p)
    elif (p / "corpus.jsonl").is_file():
        ds = load_beir(p, split or "test")
    elif (p / "queries.jsonl").is_file() and (p / "qrels").is_dir():
        ds = load_runbooks(p, split or "prometheus-operator", query_field=query_field)
    else:
        raise ContextEngineError(
            ErrorCode.PATH_NOT_FOUND, f"{p} is not a BEIR folder, the runbooks folder or a golden JSON file"
        )
    if half:
        ds = ds.halved(half)
    if limit_queries:
        ds = ds.limited(limit_queries)
    if max_docs:
        ds = ds.with_max_docs(max_docs)
    return ds
