"""What a write request becomes before the write path takes it: the documents of ``add_resource``, ``add_memory`` at
an explicit URI and ``add_skill`` (DESIGN.md §4). Validation happens here (nothing is written); the service checks
the caller's rights first and hands the result to the write pipeline. Split out of ``service.py`` (issue 28).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.ingest.loader import SourceDoc, collect, content_hash, decode_text, load_file, shown_path
from context_engine.ingest.memory import memory_abstract_of, memory_hash
from context_engine.schema.nodes import NodeRecord
from context_engine.schema.uri import ContextURI
from context_engine.settings import IngestSettings, MemorySettings

__all__ = [
    "LoadedResources",
    "check_memory_file_uri",
    "directory_conflicts",
    "load_resources",
    "memory_doc",
    "skill_doc",
    "text_doc",
]


@dataclass
class LoadedResources:
    """The files of an ``add_resource`` call, loaded: ``docs`` to write, ``failures`` (``{path, code, error}``, the
    files that failed validation), ``skipped`` (``(relative path, reason)``, the entries not read), ``paths`` (each
    doc's URI -> its relative path, for a failure the write finds) and ``all_or_nothing`` (a single file or
    ``strict``: any bad file fails the whole add). Paths are as :func:`~context_engine.ingest.loader.shown_path`
    writes them (valid text)."""

    docs: list[SourceDoc]
    failures: list[dict[str, str]]
    skipped: list[tuple[str, str]]
    paths: dict[str, str] = field(default_factory=dict)
    all_or_nothing: bool = True

    def refuse(self, refused: Iterable[tuple[SourceDoc, ContextEngineError]]) -> None:
        """List the ``refused`` documents (each with the error the write would raise for it) under ``failures``, in
        path order, and drop them from ``docs``: the files a folder add that is not ``all_or_nothing`` leaves out."""
        gone: set[str] = set()
        for doc, err in refused:
            gone.add(str(doc.uri))
            self.failures.append({"path": self.paths[str(doc.uri)], "code": err.code.value, "error": err.message})
        self.docs = [d for d in self.docs if str(d.uri) not in gone]
        self.failures.sort(key=lambda f: f["path"])


def load_resources(
    src: Path, target: ContextURI, settings: IngestSettings, *, strict: bool, follow_symlinks: bool | None
) -> LoadedResources:
    """Collect and load a file or a directory of files below ``target`` (see ``ContextEngineService.add_resource``).

    Raises:
        ContextEngineError: a single file's validation error, or the first one (or the first skipped entry:
            ``WRT-4151``) with ``strict``; ``WRT-4041`` missing path.
    """
    found = collect(src, target, settings, follow_symlinks=follow_symlinks)
    single = src.is_file()
    docs: list[SourceDoc] = []
    failures: list[dict[str, str]] = []
    paths: dict[str, str] = {}
    for fpath, uri in found.files:
        rel = shown_path(fpath.name if single else fpath.relative_to(src))
        try:
            docs.append(load_file(fpath, uri, settings))
        except ContextEngineError as err:
            if single or strict:
                raise
            failures.append({"path": rel, "code": err.code.value, "error": err.message})
            continue
        paths[str(uri)] = rel
    if strict and found.skipped:
        rel, why = found.skipped[0]
        raise ContextEngineError(ErrorCode.UNSUPPORTED_FORMAT, f"{rel}: {why}")
    return LoadedResources(docs, failures, found.skipped, paths, single or strict)


def directory_conflicts(
    docs: Sequence[SourceDoc], existing: Mapping[str, NodeRecord]
) -> list[tuple[SourceDoc, ContextEngineError]]:
    """The ``docs`` whose file URI names an existing directory, each with the ``WRT-4091`` that the write would raise
    for it (``WritePipeline._changed_documents``); ``existing``: the nodes at the docs' URIs (``get_nodes``, which
    finds a directory by its URI without the trailing slash)."""
    by_key = {ContextURI.parse(u).key: n for u, n in existing.items()}
    out: list[tuple[SourceDoc, ContextEngineError]] = []
    for doc in docs:
        old = by_key.get(doc.uri.key)
        if old is not None and old.is_dir:
            message = f"{doc.uri} names the existing directory {old.uri}; choose another file URI"
            out.append(
                (doc, ContextEngineError(ErrorCode.CONFLICT, message, {"uri": str(doc.uri), "existing": old.uri}))
            )
    return out


def check_memory_file_uri(target: ContextURI) -> None:
    """Refuse a directory URI (a trailing ``/``) as the place of one memory: a memory is a file node.

    ``add_memory(uri=".../memories/x/")`` answered ``.../x/`` but stored the file ``.../x``, after which a write to
    ``.../x/child.md`` was a 409 conflict.

    Raises:
        ContextEngineError: ``WRT-4001`` (400) for a directory URI.
    """
    if target.is_dir:
        raise ContextEngineError(
            ErrorCode.URI_INVALID,
            f"{target} is a directory URI, and a memory is a file: name the file (e.g. {target}note.md)",
            {"uri": str(target), "field": "uri"},
        )


def memory_doc(
    target: ContextURI,
    text: str,
    ingest: IngestSettings,
    memory: MemorySettings,
    *,
    metadata: dict[str, Any] | None,
    occurred_at: datetime | str | int | float | None,
) -> SourceDoc:
    """One memory written at an explicit URI: the text as given, its L0 the whole text up to ``memory.l0_max_chars``.

    Raises:
        ContextEngineError: ``WRT-4001`` a directory URI (:func:`check_memory_file_uri`); ``WRT-4221`` empty or
            invalid text; ``WRT-4002``/``WRT-4131`` bad metadata or timestamp.
    """
    check_memory_file_uri(target)
    body = decode_text(text.encode("utf-8", "surrogatepass"), str(target), ingest)
    return SourceDoc(
        target,
        body,
        "plain",
        "memory",
        memory_hash(body),
        target.name.rsplit(".", 1)[0],
        **memory_abstract_of(body, memory, metadata=metadata, occurred_at=occurred_at),
    )


def skill_doc(
    target: ContextURI, name: str, description: str, content: str, settings: IngestSettings
) -> tuple[SourceDoc, str]:
    """A skill's document (``# name``, the description, the content) and its L0 (``name: description``, at most
    ``ingest.l0_max_chars``).

    Raises:
        ContextEngineError: ``WRT-4221`` invalid text.
    """
    body = f"# {name}\n\n{description.strip()}\n\n{content.strip()}\n"
    body = decode_text(body.encode("utf-8", "surrogatepass"), str(target), settings)
    abstract = f"{name}: {' '.join(description.split())}"[: settings.l0_max_chars]
    return SourceDoc(target, body, "markdown", "skill", content_hash(body, "skill"), name), abstract


def text_doc(uri: ContextURI, text: str, kind: str, title_hint: str | None, settings: IngestSettings) -> SourceDoc:
    """One document given as text (``add_text``); ``title_hint`` is its title when the text has no H1 (default: the
    file name without extension).

    Raises:
        ContextEngineError: ``WRT-4221`` empty or invalid text (a lone surrogate included); ``WRT-4131`` too large.
    """
    # surrogatepass: a lone surrogate becomes bytes that are not UTF-8, which decode_text refuses (WRT-4221)
    body = decode_text(text.encode("utf-8", "surrogatepass"), str(uri), settings)
    hint = title_hint or uri.name.rsplit(".", 1)[0]
    return SourceDoc(uri, body, kind, "text", content_hash(body, kind), hint)
