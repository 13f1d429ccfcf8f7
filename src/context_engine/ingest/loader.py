"""Collect and validate source files before anything is written (DESIGN.md §4, bad input).

Every check happens here, before the write phase, so bad input leaves the store exactly as it was.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.text import has_visible_text
from context_engine.schema.uri import ContextURI
from context_engine.settings import IngestSettings

# Bumped whenever parsing, chunking or summarising changes what a file produces, so re-adding re-ingests.
PIPELINE_VERSION = "1"
_BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True, slots=True)
class SourceDoc:
    """One validated document ready to parse. ``kind`` picks the parser; ``content_hash`` drives idempotency.

    The memory fields (issue 11) are set by the memory write path only: ``occurred_at`` and ``metadata`` are stored
    on the node, ``context`` (a message's preceding turn) is indexed with its abstract but never shown, ``version``
    is the node's version counter, ``abstract`` overrides the extractive L0, ``title`` the parsed title, and
    ``whole_text_l0`` means the abstract already holds the whole text, so no level-2 chunk vectors are written
    (they would repeat the abstract's vector; lookup_knowledge searches resources only by default).
    """

    uri: ContextURI
    text: str
    kind: str  # "markdown" | "plain"
    source: str
    content_hash: str
    title_hint: str
    occurred_at: datetime | None = None
    metadata: dict[str, Any] | None = field(default=None, hash=False)
    context: str = ""
    version: int = 1
    abstract: str | None = None
    title: str | None = None
    whole_text_l0: bool = False


def content_hash(text: str, *extra: str) -> str:
    """sha256 over the pipeline version, ``extra`` labels and the text (hex)."""
    h = hashlib.sha256(PIPELINE_VERSION.encode())
    for part in (*extra, text):
        h.update(b"\x00")
        h.update(part.encode("utf-8"))
    return h.hexdigest()


def kind_for(path: Path) -> str:
    return "plain" if path.suffix.lower() == ".txt" else "markdown"


def decode_text(data: bytes, where: str, settings: IngestSettings) -> str:
    """Validate raw bytes and decode them as UTF-8 (a leading BOM is dropped).

    Raises:
        ContextEngineError: ``WRT-4131`` over the size limit; ``WRT-4221`` for empty, binary or invalid UTF-8, or
            text with no visible character (only whitespace and invisible format characters: :func:`has_visible_text`).
    """
    if len(data) > settings.max_file_bytes:
        raise ContextEngineError(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"{where} is {len(data)} bytes, over the limit of {settings.max_file_bytes} "
            "(raise CE_INGEST__MAX_FILE_BYTES to allow it)",
            {"size_bytes": len(data), "limit_bytes": settings.max_file_bytes},
        )
    if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        raise ContextEngineError(
            ErrorCode.CONTENT_INVALID, f"{where} looks binary (NUL bytes); only text files can be added"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ContextEngineError(
            ErrorCode.CONTENT_INVALID,
            f"{where} is not valid UTF-8 (byte {err.start}); convert it to UTF-8 first",
            {"byte_offset": err.start},
        ) from err
    if not text.strip():
        raise ContextEngineError(ErrorCode.CONTENT_INVALID, f"{where} is empty; nothing to add")
    if not has_visible_text(text):  # only invisible format characters (U+200B, U+FEFF, U+202E...) and whitespace
        raise ContextEngineError(
            ErrorCode.CONTENT_INVALID,
            f"{where} has no visible character (only whitespace and invisible characters such as U+200B); "
            "nothing to add",
            {"reason": "no_visible_text"},
        )
    return text


def load_file(path: Path, uri: ContextURI, settings: IngestSettings) -> SourceDoc:
    """Read and validate one file destined for ``uri``.

    Raises:
        ContextEngineError: ``WRT-4151`` unsupported extension, ``WRT-4131`` too large, ``WRT-4221`` empty,
            binary or invalid UTF-8, ``WRT-4041`` unreadable.
    """
    if path.suffix.lower() not in settings.extensions:
        raise ContextEngineError(
            ErrorCode.UNSUPPORTED_FORMAT,
            f"{path.name}: unsupported file type {path.suffix or '(none)'}; "
            f"supported: {', '.join(settings.extensions)}",
        )
    try:
        size = path.stat().st_size
        if size > settings.max_file_bytes:  # check before reading a huge file into memory
            raise ContextEngineError(
                ErrorCode.PAYLOAD_TOO_LARGE,
                f"{path.name} is {size} bytes, over the limit of {settings.max_file_bytes} "
                "(raise CE_INGEST__MAX_FILE_BYTES to allow it)",
                {"size_bytes": size, "limit_bytes": settings.max_file_bytes},
            )
        data = path.read_bytes()
    except OSError as err:
        raise ContextEngineError(ErrorCode.PATH_NOT_FOUND, f"cannot read {path}: {err.strerror}") from err
    text = decode_text(data, path.name, settings)
    return SourceDoc(
        uri=uri,
        text=text,
        kind=kind_for(path),
        source=path.name,
        content_hash=content_hash(text, kind_for(path)),
        title_hint=path.stem,
    )


@dataclass
class Collected:
    """Files found under a path: ``(path, uri)`` pairs to load, and skipped paths with the reason."""

    files: list[tuple[Path, ContextURI]]
    skipped: list[tuple[str, str]]


def collect(
    path: Path, target: ContextURI, settings: IngestSettings, *, follow_symlinks: bool | None = None
) -> Collected:
    """Map a file or a directory tree onto URIs below ``target``.

    A single file goes to ``target`` (or ``target/<name>`` when ``target`` is a directory). A directory's files go
    below ``target`` by relative path, sorted; hidden entries are ignored and other extensions are skipped. A
    symbolic link whose target lies outside the directory is skipped with its reason (a link cannot pull in
    ``/etc/passwd``), unless ``follow_symlinks`` (default ``settings.follow_symlinks_outside_root``) allows links to
    files; links to directories are never descended into.

    Raises:
        ContextEngineError: ``WRT-4041`` when ``path`` does not exist; ``WRT-4001`` for a file name that is not a
            valid URI segment (single-file mode).
    """
    if not path.exists():
        raise ContextEngineError(ErrorCode.PATH_NOT_FOUND, f"path not found: {path}")
    if path.is_file():
        uri = target.child(path.name) if target.is_dir else target
        return Collected([(path, uri)], [])
    if not path.is_dir():
        raise ContextEngineError(ErrorCode.UNSUPPORTED_FORMAT, f"{path} is neither a file nor a directory")
    base = target.as_dir()
    follow = settings.follow_symlinks_outside_root if follow_symlinks is None else follow_symlinks
    root = path.resolve()
    files: list[tuple[Path, ContextURI]] = []
    skipped: list[tuple[str, str]] = []
    taken: dict[str, str] = {}  # URI key -> the file that has it
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if p.is_symlink():
            why = _link_problem(p, root, follow)
            if why is not None:
                skipped.append((str(rel), why))
                continue
        if not p.is_file():
            continue
        if p.suffix.lower() not in settings.extensions:
            skipped.append((str(rel), f"unsupported file type {p.suffix or '(none)'}"))
            continue
        file_uri, why = _file_uri(base, rel, taken)
        if file_uri is None:
            skipped.append((str(rel), why))
            continue
        files.append((p, file_uri))
    return Collected(files, skipped)


def _file_uri(base: ContextURI, rel: Path, taken: dict[str, str]) -> tuple[ContextURI | None, str]:
    """The URI of the folder's file ``rel`` below ``base`` and ``""``, or ``None`` and why it is skipped: a name that
    is no valid URI segment, or a URI another file of the folder has (``taken``: URI key -> that file, updated).
    Names that differ only in Unicode normalisation ("café.md" as NFC and as NFD) are one URI: the second was written
    over the first and both were counted (an attack pass, 2026-12-07); the upload route refuses such a pair."""
    try:
        uri = base
        for part in rel.parts[:-1]:
            uri = uri.child(part, is_dir=True)
        uri = uri.child(rel.parts[-1])
    except ContextEngineError as err:
        return None, err.message
    first = taken.setdefault(uri.key, str(rel))
    if first != str(rel):
        return None, f"its URI {uri} is also that of {first} (the names differ only in their Unicode form)"
    return uri, ""


def _link_problem(link: Path, root: Path, follow: bool) -> str | None:
    """Why the symbolic link ``link`` (inside ``root``) is not followed, or ``None`` to follow it."""
    try:
        dest = link.resolve(strict=True)
    except (OSError, RuntimeError):  # dangling or a loop
        return "symbolic link to nothing (dangling or a loop); not followed"
    if dest.is_dir():
        return None if dest.is_relative_to(root) else "symbolic link to a directory outside the folder; not followed"
    if dest.is_relative_to(root) or follow:
        return None
    return "symbolic link to a file outside the folder; not followed (ingest.follow_symlinks_outside_root)"
