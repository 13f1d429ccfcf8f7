"""What a write embeds, and the vector rows it makes of the vectors (DESIGN.md §3; ingest/pipeline.py).

A node prepared for a write (:class:`PreparedNode`) gets one vector row for its L0 (embedded with its context, when it
has one) and one per chunk (level 2). :func:`embedding_inputs` lists their texts in that order, and
:func:`vector_records` pairs them with the embedder's matrix. :func:`early_texts` says what those texts will be
before the documents are parsed, where that is known (a message, a short memory: indexed whole as its given L0), so
the write can start the model on them early (issue 26).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from context_engine.ingest.document import embedding_input, format_breadcrumb
from context_engine.ingest.loader import SourceDoc
from context_engine.schema.nodes import Chunk, Level, NodeRecord, VectorRecord

__all__ = ["EmbeddingInputs", "PreparedNode", "early_texts", "embedding_inputs", "vector_id", "vector_records"]


def vector_id(account_id: str, uri: str, level: int, chunk_index: int) -> str:
    """Deterministic record id (DESIGN §3): sha1 of ``account_id|uri|level|chunk_index``, 32 hex characters."""
    key = f"{account_id}\x1f{uri}\x1f{level}\x1f{chunk_index}".encode()
    return hashlib.sha1(key).hexdigest()[:32]


@dataclass
class PreparedNode:
    """A node as a write will store it: its metadata row, its level texts, its chunks and the context its L0 is
    indexed with."""

    record: NodeRecord
    levels: dict[Level, str | None]
    chunks: list[Chunk] = field(default_factory=list)
    context: str = ""  # indexed with the abstract (embedding input and BM25), never shown
    existed: bool = True  # False: no node at this URI before the write (nothing to snapshot for a rollback)


@dataclass
class EmbeddingInputs:
    """What a write embeds: one text per vector row, and each row's node, level, chunk index, text and breadcrumb."""

    texts: list[str] = field(default_factory=list)
    rows: list[tuple[PreparedNode, int, int, str, str]] = field(default_factory=list)

    @property
    def chars(self) -> int:
        return sum(map(len, self.texts))


def early_texts(docs: Sequence[SourceDoc], abstracts: dict[str, str]) -> list[str] | None:
    """What :func:`embedding_inputs` will make of ``docs`` before they are parsed, when that is known: every document
    is indexed whole as its L0 (no chunks), with its abstract given. ``None`` otherwise. Redaction of the abstracts
    (in :meth:`WritePipeline._prepare`) may still change a text: the caller compares."""
    texts: list[str] = []
    for doc in docs:
        abstract = abstracts.get(str(doc.uri)) or doc.abstract
        if not doc.whole_text_l0 or not abstract or doc.uri.context_type is None:
            return None
        texts.append(f"{doc.context}\n{abstract}" if doc.context else abstract)
    return texts


def embedding_inputs(nodes: Sequence[PreparedNode]) -> EmbeddingInputs:
    """One text per vector row of ``nodes``: the L0 (after the context, when there is one) and each chunk."""
    out = EmbeddingInputs()
    for n in nodes:
        if n.record.context_type is None:
            continue  # space roots above a type root hold no content and are not searchable
        abstract = n.levels[Level.L0] or n.record.title
        out.texts.append(f"{n.context}\n{abstract}" if n.context else abstract)
        out.rows.append((n, 0, 0, abstract, ""))
        for c in n.chunks:
            out.texts.append(embedding_input(c))
            out.rows.append((n, 2, c.chunk_index, c.text, format_breadcrumb(c.breadcrumb)))
    return out


def vector_records(account_id: str, inputs: EmbeddingInputs, matrix: np.ndarray) -> list[VectorRecord]:
    """The vector rows of ``inputs`` with the embedder's ``matrix`` (one row each, in order)."""
    out: list[VectorRecord] = []
    for (n, level, ci, text, crumb), vec in zip(inputs.rows, matrix, strict=True):
        r = n.record
        out.append(
            VectorRecord(
                id=vector_id(account_id, r.uri, level, ci),
                vector=vec,
                uri=r.uri,
                parent_uri=r.parent_uri,
                account_id=account_id,
                owner_space=r.owner_space,
                context_type=r.context_type or "",
                category=r.category or "",
                level=level,
                doc_id=r.uri,
                chunk_index=ci,
                text=text,
                breadcrumb=crumb,
                context=n.context if level == 0 else "",
            )
        )
    return out
