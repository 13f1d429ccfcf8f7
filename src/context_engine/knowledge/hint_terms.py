"""The term extraction of the hint index (ingest side): what ``KnowledgeIndexService`` indexes for a document.

Kinds, keys and the patterns that find them (alert names, titles, distinctive headings, error codes, metric and
service names), the domain resolver and :func:`extract_document`; see :mod:`context_engine.knowledge.hint_index` for
the index, its matching and the term kinds. Split out of that module (issue 28: no module over 800 lines), which
re-exports these names.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from context_engine.ingest.parse import split_breadcrumb
from context_engine.knowledge.tokenize import (
    has_cjk,
    join_key,
    norm,
    singular,
    split_identifier,
    tokenize,
)
from context_engine.schema.nodes import NodeRecord, VectorRecord
from context_engine.schema.uri import ContextURI
from context_engine.settings import DomainVocabulary
from context_engine.storage.metadata.audit import HintDoc, HintTerm

EXTRACTOR_VERSION = 1
"""Bump when term extraction changes: every account's hint index is then rebuilt from the metadata store."""

STRONG_KINDS = frozenset({"alert", "title", "heading", "error_code", "metric", "service"})

#: Section names every runbook has: they name no document.
GENERIC_HEADINGS = frozenset(
    norm(h)
    for h in (
        "meaning",
        "impact",
        "diagnosis",
        "mitigation",
        "summary",
        "overview",
        "description",
        "troubleshooting",
        "resolution",
        "solution",
        "solutions",
        "steps",
        "references",
        "reference",
        "links",
        "see also",
        "notes",
        "note",
        "prerequisites",
        "background",
        "procedure",
        "verification",
        "introduction",
        "purpose",
        "about",
        "details",
        "context",
        "next steps",
        "additional resources",
        "related alerts",
        "possible causes",
        "causes",
        "cause",
        "symptoms",
        "remediation",
        "how to fix",
        "fix",
        "escalation",
        "readme",
        "index",
        "untitled",
        "含义",
        "影响",
        "诊断",
        "缓解",
        "排查",
        "处理",
        "解决",
        "解决方案",
        "概述",
        "说明",
        "步骤",
        "参考",
        "原因",
        "描述",
        "简介",
        "摘要",
        "概要",
        "介绍",
        "处理步骤",
        "排查步骤",
    )
)
_STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "is",
        "are",
        "was",
        "be",
        "been",
        "has",
        "have",
        "had",
        "of",
        "to",
        "in",
        "on",
        "for",
        "and",
        "or",
        "not",
        "no",
        "too",
        "with",
        "by",
        "at",
        "as",
        "it",
        "its",
        "this",
        "that",
        "any",
        "some",
        "more",
        "than",
        "less",
        "all",
        "from",
        "into",
        "over",
        "under",
        "per",
        "via",
        "while",
        "within",
    ]
)

_METRIC_RE = re.compile(r"(?<![\w$])[a-z][a-z0-9]*(?::[a-z0-9_]+)*(?:_[a-z0-9]+){2,}(?::[a-z0-9_]+)*(?![\w(])")
_ERROR_CODE_RE = re.compile(r"(?<![\w-])[A-Z][A-Z0-9]{1,9}-\d{2,6}(?![\w-])")
_K8S_REASONS = frozenset(
    norm(r)
    for r in (
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "OOMKilled",
        "CreateContainerConfigError",
        "CreateContainerError",
        "InvalidImageName",
        "ContainerCannotRun",
        "DeadlineExceeded",
        "Evicted",
        "NodeAffinity",
        "FailedScheduling",
        "FailedMount",
        "FailedAttachVolume",
        "BackoffLimitExceeded",
        "RunContainerError",
        "PostStartHookError",
        "ErrImageNeverPull",
    )
)
_REASON_RE = re.compile(r"\b(?:[A-Z][a-z]+){1,4}(?:BackOff|Killed|Error|Pull|Exceeded|Failed|Evicted)\b|\bEvicted\b")
_INLINE_CODE_RE = re.compile(r"`([^`\n]{2,80})`")
_SERVICE_RE = re.compile(r"(?<![\w./-])[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?![\w/-])")
_COMPONENT_WORDS = frozenset(
    [
        "kube",
        "etcd",
        "prometheus",
        "alertmanager",
        "operator",
        "exporter",
        "controller",
        "apiserver",
        "scheduler",
        "proxy",
        "manager",
        "reloader",
        "metrics",
        "dns",
        "coredns",
        "ovn",
        "ovs",
        "ceph",
        "virt",
        "kubelet",
        "grafana",
        "thanos",
        "daemon",
        "server",
        "agent",
        "gateway",
        "registry",
        "ingress",
        "router",
        "collector",
    ]
)
_IDENTIFIER_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_.][A-Za-z0-9]+)*$")


# ---- extraction (ingest side) ---------------------------------------------------------------------------------------
def phrase_key(text: str) -> str:
    """The key of a phrase: its tokens' keys joined (no space between Chinese words)."""
    return join_key([t.key for t in tokenize(text)])


def alert_key(name: str) -> str:
    """The key of an identifier-like name: its words concatenated (``KubePodCrashLooping`` ->
    ``kubepodcrashlooping``)."""
    return "".join(split_identifier(name))


def is_identifier(name: str) -> bool:
    """Whether ``name`` is one identifier (an alert name) rather than a phrase."""
    return bool(_IDENTIFIER_RE.match(name)) and len(name) >= 3


def title_words(title: str) -> tuple[str, ...]:
    """Distinct words of a title in order, singular, without stop words (weak matching)."""
    if has_cjk(title):
        raw = [w for t in tokenize(title) for w in ([t.key] if t.cjk else split_identifier(t.text))]
    elif is_identifier(title):
        raw = split_identifier(title)
    else:
        raw = [w for t in tokenize(title) for w in split_identifier(t.text)]
    out = [singular(w) for w in raw if w and w not in _STOP_WORDS]
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True, slots=True)
class DomainResolver:
    """Maps documents and query tokens to domains (the rules are in ``knowledge/domains.py``)."""

    aliases: dict[str, str]
    prefixes: tuple[tuple[str, str], ...]  # (prefix, domain), longest first
    terms: dict[str, str]  # phrase key -> domain
    max_term_tokens: int
    cross_cutting: frozenset[str] = frozenset()

    @classmethod
    def build(cls, vocab: dict[str, DomainVocabulary]) -> DomainResolver:
        aliases: dict[str, str] = {}
        prefixes: list[tuple[str, str]] = []
        terms: dict[str, str] = {}
        for domain in sorted(vocab):
            v = vocab[domain]
            aliases.update({norm(a): domain for a in v.path_aliases})
            prefixes.extend((p, domain) for p in v.title_prefixes)
            for term in v.terms:
                key = phrase_key(term)
                if key:
                    terms.setdefault(key, domain)
        prefixes.sort(key=lambda p: (-len(p[0]), p[0]))
        longest = max((len(tokenize(t)) for v in vocab.values() for t in v.terms), default=1)
        cross = frozenset(d for d, v in vocab.items() if v.cross_cutting)
        return cls(aliases, tuple(prefixes), terms, longest, cross)

    def title_domain(self, title: str) -> str | None:
        """The domain whose title prefix starts ``title`` at a CamelCase boundary (longest prefix first)."""
        for prefix, domain in self.prefixes:
            if title.startswith(prefix):
                rest = title[len(prefix) :]
                if not rest or not rest[0].islower():
                    return domain
        return None

    def document_domain(self, uri: str, title: str, category: str | None) -> str | None:
        """The domain of a document (rules 1-4 of ``knowledge/domains.py``)."""
        parsed = ContextURI.parse(uri)
        dirs = [norm(s) for s in parsed.segments[: -1 if not parsed.is_dir else None]]
        if dirs and dirs[-1] in self.aliases and self.aliases[dirs[-1]] not in self.cross_cutting:
            return self.aliases[dirs[-1]]
        stem = parsed.name.rsplit(".", 1)[0]
        found = self.title_domain(title) or self.title_domain(stem)
        if found:
            return found
        for seg in reversed(dirs):
            if seg in self.aliases:
                return self.aliases[seg]
        return category

    def signature(self) -> str:
        return json.dumps(
            [sorted(self.aliases.items()), list(self.prefixes), sorted(self.cross_cutting)], ensure_ascii=False
        )


def extract_document(
    node: NodeRecord, chunks: Sequence[VectorRecord], resolver: DomainResolver
) -> tuple[HintDoc, list[HintTerm]]:
    """The hint-index entry of one document: its domain, title words and keyword terms (see the module doc).

    Args:
        node: the file's metadata row.
        chunks: its level=2 vector rows (text and display breadcrumb).
        resolver: the domain rules.
    """
    uri = node.uri
    stem = ContextURI.parse(uri).name.rsplit(".", 1)[0]
    terms: dict[str, str] = {}

    for key, kind in itertools.chain(_name_terms(node.title, stem), *(_chunk_terms(c) for c in chunks)):
        if key and key not in GENERIC_HEADINGS and key not in terms:
            terms[key] = kind  # the first kind found for a key stays
    doc = HintDoc(
        uri=uri,
        parent_uri=node.parent_uri,
        owner_space=node.owner_space,
        context_type=node.context_type or "",
        title=node.title or stem,
        domain=resolver.document_domain(uri, node.title or stem, node.category),
        title_words=title_words(node.title or stem),
    )
    return doc, [HintTerm(uri, key, kind) for key, kind in sorted(terms.items())]



def _name_terms(title: str | None, stem: str) -> Iterator[tuple[str, str]]:
    """``(key, kind)`` terms of a document's names (title, file stem): alert-like identifiers and titles."""
    for name in dict.fromkeys(n for n in (title, stem) if n):
        if is_identifier(name):
            yield alert_key(name), "alert"
            yield norm(name), "alert"
        elif has_cjk(name) or len(tokenize(name)) >= 2:
            yield phrase_key(name), "title"


def _chunk_terms(chunk: VectorRecord) -> Iterator[tuple[str, str]]:
    """``(key, kind)`` terms of one chunk, in order: its headings, then metrics, error codes, Kubernetes reasons and
    services in its text."""
    for heading in split_breadcrumb(chunk.breadcrumb)[1:]:
        toks = tokenize(heading)
        cjk_chars = sum(len(t.text) for t in toks if t.cjk)
        if 2 <= len(toks) <= 6 or (cjk_chars >= 3 and len(toks) <= 6):
            yield phrase_key(heading), "heading"
    text = chunk.text
    for m in _METRIC_RE.finditer(text):
        yield m.group(), "metric"
    for m in _ERROR_CODE_RE.finditer(text):
        yield norm(m.group()), "error_code"
    for m in _REASON_RE.finditer(text):
        if norm(m.group()) in _K8S_REASONS:
            yield norm(m.group()), "error_code"
    code = " ".join(_INLINE_CODE_RE.findall(text))
    for m in _SERVICE_RE.finditer(code):
        yield m.group(), "service"
    for m in _SERVICE_RE.finditer(text):
        if any(part in _COMPONENT_WORDS for part in m.group().split("-")):
            yield m.group(), "service"
