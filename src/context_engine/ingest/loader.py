"""Collect and validate source files before anything is written (DESIGN.md §4, bad input).

Every check happens here, before the write phase, so bad input leaves the store exactly as it was.
"""

from __future__ import annotations

import hashlib
import os
import stat
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


def shown_path(path: Path | str) -> str:
    """``path`` as text for reports and messages: a file name is bytes, and bytes that are not UTF-8 (which Python
    keeps as lone surrogates) are shown as ``\\xNN`` escapes (the byte 0xFF of ``n<0xFF>.md``: ``n\\xff.md``), so a
    report that lists such a file is still valid UTF-8 JSON."""
    text = str(path)
    try:
        return os.fsencode(text).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that no file-system byte gives (U+D800): escaped as \ud800
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _special_kind(mode: int) -> str:
    """What a file that is neither a regular file nor a directory is (its ``st_mode``)."""
    kinds = (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((name for test, name in kinds if test(mode)), "a special file")


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
    """Read and validate one file destined for ``uri``. Only a regular file is opened (a FIFO would block the read).

    Raises:
        ContextEngineError: ``WRT-4151`` unsupported extension or not a regular file, ``WRT-4131`` too large,
            ``WRT-4221`` empty, binary or invalid UTF-8, ``WRT-4041`` unreadable.
    """
    if path.suffix.lower() not in settings.extensions:
        raise ContextEngineError(
            ErrorCode.UNSUPPORTED_FORMAT,
            f"{shown_path(path.name)}: unsupported file type {path.suffix or '(none)'}; "
            f"supported: {', '.join(settings.extensions)}",
        )
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # replaced since it was collected: never opened
            raise ContextEngineError(
                ErrorCode.UNSUPPORTED_FORMAT,
                f"{shown_path(path.name)} is not a regular file ({_special_kind(st.st_mode)}); not read",
            )
        size = st.st_size
        if size > settings.max_file_bytes:  # check before reading a huge file into memory
            raise ContextEngineError(
                ErrorCode.PAYLOAD_TOO_LARGE,
                f"{shown_path(path.name)} is {size} bytes, over the limit of {settings.max_file_bytes} "
                "(raise CE_INGEST__MAX_FILE_BYTES to allow it)",
                {"size_bytes": size, "limit_bytes": settings.max_file_bytes},
            )
        data = path.read_bytes()
    except OSError as err:
        raise ContextEngineError(ErrorCode.PATH_NOT_FOUND, f"cannot read {shown_path(path)}: {err.strerror}") from err
    text = decode_text(data, shown_path(path.name), settings)
    return SourceDoc(
        uri=uri,
        text=text,
        kind=kind_for(path),
        source=shown_path(path.name),
        content_hash=content_hash(text, kind_for(path)),
        title_hint=shown_path(path.stem),
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
    below ``target`` by relative path, sorted; hidden entries are ignored; other extensions, entries that are not
    regular files (a FIFO, a socket, a device: never opened) and names that are no valid URI segment (a name that is
    not UTF-8 included) are skipped with the reason, their paths as :func:`shown_path` writes them. A symbolic link
    whose target lies outside the directory is skipped with its reason (a link cannot pull in ``/etc/passwd``),
    unless ``follow_symlinks`` (default ``settings.follow_symlinks_outside_root``) allows links to files; links to
    directories are never descended into.

    Raises:
        ContextEngineError: ``WRT-4041`` when ``path`` does not exist; ``WRT-4001`` for a file name that is not a
            valid URI segment (single-file mode); ``WRT-4151`` for a path that is neither a file nor a directory.
    """
    if not path.exists():
        raise ContextEngineError(ErrorCode.PATH_NOT_FOUND, f"path not found: {shown_path(path)}")
    if path.is_file():
        try:
            uri = target.child(path.name) if target.is_dir else target
        except ContextEngineError as err:
            raise ContextEngineError(err.code, _bad_name(path.name, "file", err), err.details) from None
        return Collected([(path, uri)], [])
    if not path.is_dir():
        raise ContextEngineError(
            ErrorCode.UNSUPPORTED_FORMAT, f"{shown_path(path)} is neither a file nor a directory (not read)"
        )
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
        why = _not_read(p, root, follow, settings)
        if why is None:
            file_uri, why = _file_uri(base, rel, taken)
            if file_uri is not None:
                files.append((p, file_uri))
                continue
        if why:  # "" for a directory: walked, not read
            skipped.append((shown_path(rel), why))
    return Collected(files, skipped)


def _not_read(p: Path, root: Path, follow: bool, settings: IngestSettings) -> str | None:
    """Why the folder entry ``p`` is not read: ``None`` to read it, ``""`` for a directory (walked, not read; a link
    to one is never descended into), else the reason it is skipped. Only ``stat`` is called: nothing is opened."""
    if p.is_symlink():
        why = _link_problem(p, root, follow)
        if why is not None:
            return why
    try:
        mode = p.stat().st_mode
    except OSError as err:  # removed since the walk listed it, or not accessible
        return f"cannot read it: {err.strerror}"
    if stat.S_ISDIR(mode):
        return ""
    if not stat.S_ISREG(mode):
        return f"not a regular file ({_special_kind(mode)}); not read"
    if p.suffix.lower() not in settings.extensions:
        return f"unsupported file type {shown_path(p.suffix) or '(none)'}"
    return None


def _file_uri(base: ContextURI, rel: Path, taken: dict[str, str]) -> tuple[ContextURI | None, str]:
    """The URI of the folder's file ``rel`` below ``base`` and ``""``, or ``None`` and why it is skipped: a name that
    is no valid URI segment (the reason names it), or a URI another file of the folder has (``taken``: URI key -> that
    file, updated). Names that differ only in Unicode normalisation ("café.md" as NFC and as NFD) are one URI: the
    second was written over the first and both were counted (an attack pass, 2026-12-07); the upload route refuses
    such a pair."""
    uri = base
    for i, part in enumerate(rel.parts):
        last = i == len(rel.parts) - 1
        try:
            uri = uri.child(part, is_dir=not last)
        except ContextEngineError as err:
            return None, _bad_name(part, "file" if last else "folder", err)
    first = taken.setdefault(uri.key, str(rel))
    if first != str(rel):
        return None, f"its URI {uri} is also that of {shown_path(first)} (the names differ only in their Unicode form)"
    return uri, ""


def _bad_name(name: str, what: str, err: ContextEngineError) -> str:
    """Why the ``what`` (file or folder) ``name`` cannot be part of a URI, naming it (:func:`shown_path`)."""
    shown = shown_path(name)
    if shown != name:  # bytes that are not UTF-8
        return f"the {what} name '{shown}' is not valid UTF-8 (shown with \\x escapes); rename it to add it"
    return f"the {what} name '{shown}' is not a valid URI segment: {err.details.get('reason', err.message)}"


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
