"""Derived indexes kept as files under ``<home>/derived`` (docs/derived_indexes.md, "Files").

The level-0 matrix and the BM25 partitions of an account are caches of the metadata store. A process that holds one
in memory writes it here, stamped with the account generation it is exactly at, so that the next process opens it in
milliseconds and catches up from the change log like an in-memory copy would, instead of reloading and re-tokenising
the account. The one invalidation rule stays the only rule: a file is used only when its format version, its
parameters and the database it was built from match, and only as the state at its generation; a file whose
generation the change log no longer reaches back to is replaced by a wholesale reload (and a new file).

One file per (structure, account): ``<root>/<kind>/<sha256(account)[:32]>.safetensors`` in the safetensors layout
(an 8-byte little-endian header length, a JSON header naming each array's dtype, shape and byte range, then the
arrays), written by the ``safetensors`` library and read here zero-copy through a private (copy-on-write) memory
map: arrays are paged in when used, and writes to them (a tombstone) never reach the file. The engine's own header
(``__metadata__["context-engine"]``, JSON) holds the format version, the kind, the account, its generation and that
generation's token (absent in files written before tokens: read as ``None``), the database's identity and the
structure's parameters.

Writes are atomic: the bytes go to a temporary file in the same folder, which is fsync'd and renamed over the
target, and the folder is fsync'd; a process killed at any point leaves the previous file (or none) and maybe a
temporary file, removed by the next save of that file. A file of another format version, other parameters, another
database, or one that does not parse is ignored (logged) and replaced at the next save: it is a cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import mmap
import os
import struct
import threading
import uuid
import weakref
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

import numpy as np

from context_engine.errors import ContextEngineError
from context_engine.storage.protocols import MetaStore

__all__ = [
    "FORMAT_VERSION",
    "STORE_ID_KEY",
    "BackgroundSaves",
    "DerivedFiles",
    "FileRows",
    "Snapshot",
    "pack_strings",
    "PackedValues",
    "unpack_strings",
]

_LOG = logging.getLogger(__name__)

FORMAT_VERSION = 4
"""Version of the derived-file layout (the arrays each kind writes and what they mean). A file of another version is
ignored and rebuilt (docs/derived_indexes.md). 4: a projected segment keeps its projections in two arrays, the
leading coordinates that a scan reads (``vectors``) and the others (``tail``); 3: a projected segment of a
compressed level-0 account also holds int8 copies of its vectors with one scale a row (``q8``, ``q8_scale``), which
pick the few candidates its float16 vectors rescore; 2: row ids, URIs, texts and breadcrumbs are packed string columns
(UTF-8 bytes and int64 *byte* offsets, ``<name>.utf8`` / ``<name>.byte_offsets``) read back zero-copy, and a
segment of a compressed level-0 account holds float16 vectors (``full``) with its layout in its metadata; 1 stored
character offsets and projections only."""

STORE_ID_KEY = "derived_store_id"
"""``meta`` key of the metadata database's identity: files built from another database are ignored."""

_FORMAT = "context-engine-derived"
_META_KEY = "context-engine"
_SUFFIX = ".safetensors"
_DTYPES = {
    "BOOL": np.dtype(np.bool_),
    "U8": np.dtype(np.uint8),
    "I8": np.dtype(np.int8),
    "U16": np.dtype("<u2"),
    "I16": np.dtype("<i2"),
    "U32": np.dtype("<u4"),
    "I32": np.dtype("<i4"),
    "U64": np.dtype("<u8"),
    "I64": np.dtype("<i8"),
    "F16": np.dtype("<f2"),
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
}


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One derived file as read: the state of one account's structure at ``generation``.

    Attributes:
        generation: the account generation the state is exactly at.
        token: the token of ``generation`` (``AccountState``) written with it; ``None`` for a file written without
            one (before tokens, or of an account at generation 0).
        meta: the structure's own JSON-able description (row counts, vocabularies, ...).
        arrays: name -> array, zero-copy views of a private memory map (writable; writes stay in memory).
        path: the file.
        identity: ``(st_dev, st_ino)`` of the file that was mapped, so that :meth:`file_rows` reads that file and
            not one a later save renamed over ``path``; ``None`` for a snapshot read from elsewhere.
        offsets: name -> byte offset of each array in the file.
    """

    generation: int
    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]
    path: Path
    identity: tuple[int, int] | None = None
    offsets: Mapping[str, int] | None = None
    token: str | None = None
    _opened: dict[str, _OpenFile | None] = field(default_factory=dict, repr=False, compare=False)

    def file_rows(self, name: str) -> FileRows | None:
        """The 2-D array ``name`` read row by row from the file (:class:`FileRows`), or ``None`` when the snapshot
        has no such non-empty array or its file is no longer at ``path`` (replaced or removed since it was
        mapped: the caller reads the array through the map instead). The file is opened once per snapshot, on
        the first call (one descriptor for every array of it, closed when the last :class:`FileRows` goes)."""
        array = self.arrays.get(name)
        if self.identity is None or self.offsets is None or array is None or array.ndim != 2 or not array.size:
            return None
        if "file" not in self._opened:
            self._opened["file"] = _open_same(self.path, self.identity)
        opened = self._opened["file"]
        return None if opened is None else FileRows(opened, self.offsets[name], array.shape, array.dtype)


def _open_same(path: Path, identity: tuple[int, int]) -> _OpenFile | None:
    """``path`` opened read-only when it is still the file ``identity`` names, else ``None``."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != identity:
        os.close(fd)
        return None
    return _OpenFile(fd)


class _OpenFile:
    """A read-only file descriptor closed when the last :class:`FileRows` (or snapshot) holding it is collected."""

    __slots__ = ("__weakref__", "fd")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        weakref.finalize(self, os.close, fd)


class FileRows:
    """Rows of a 2-D array in a derived file, read with ``pread`` instead of through the memory map.

    For an array read a few rows at a time at random (the float16 vectors a search rescores: ~100 of 1M rows a
    search), the map would keep every page it once read (and the kernel maps up to 64 KB around each page faulted)
    in the process's resident set: at 1M nodes most of the 1 GB of float16 vectors after a few hundred searches. A
    ``pread`` copies the row (~1 us a row from the OS cache) and maps nothing; the pages stay in the OS cache, which
    the kernel reclaims under pressure. ``rows(at)`` -> ``(len(at), columns)`` array of the file's dtype; ``whole()``
    a read-only memory map of the array for bulk reads (a save, a compaction), unmapped once dropped.
    """

    __slots__ = ("_file", "_offset", "_row_bytes", "dtype", "shape")

    def __init__(self, file: _OpenFile, offset: int, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self._file = file
        self._offset = int(offset)
        self.shape = (int(shape[0]), int(shape[1]))
        self.dtype = np.dtype(dtype)
        self._row_bytes = self.shape[1] * self.dtype.itemsize

    def rows(self, at: np.ndarray) -> np.ndarray:
        """Rows ``at`` (row numbers below ``shape[0]``; raises IndexError otherwise), in that order."""
        size, base, fd = self._row_bytes, self._offset, self._file.fd
        picked = at.tolist()
        if picked and (min(picked) < 0 or max(picked) >= self.shape[0]):
            raise IndexError("row out of range")
        data = b"".join([os.pread(fd, size, base + r * size) for r in picked])
        if len(data) != size * len(picked):
            raise OSError("derived file shorter than its header says")
        return np.frombuffer(data, dtype=self.dtype).reshape(len(picked), self.shape[1])

    def whole(self) -> np.ndarray:
        """The whole array, through a read-only memory map of its own."""
        mm = mmap.mmap(self._file.fd, 0, access=mmap.ACCESS_READ)  # the array holds the map; dropped with it
        count = self.shape[0] * self.shape[1]
        return np.frombuffer(mm, dtype=self.dtype, count=count, offset=self._offset).reshape(self.shape)


def pack_strings(values: Sequence[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as two arrays: their UTF-8 concatenation (uint8) and character offsets (int64, ``len + 1``); a
    ``None`` is stored as an empty string with offset ``-1`` at its end (see :func:`unpack_strings`)."""
    text = "".join(v or "" for v in values)
    ends = np.fromiter((len(v) if v is not None else 0 for v in values), dtype=np.int64, count=len(values))
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(ends, out=offsets[1:])
    nulls = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    if nulls.any():
        offsets[1:][nulls] = -offsets[1:][nulls] - 1  # -(end) - 1: negative marks a None, the end stays recoverable
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8), offsets


def unpack_strings(blob: np.ndarray, offsets: np.ndarray) -> list[Any]:
    """The list :func:`pack_strings` packed (``None`` where it was ``None``)."""
    text = blob.tobytes().decode("utf-8")
    marks = offsets[1:]
    nulls = marks < 0
    ends = (np.where(nulls, -marks - 1, marks) if nulls.any() else marks).tolist()
    starts = [0, *ends][: len(ends)]
    if nulls.any():
        return [None if null else text[a:b] for a, b, null in zip(starts, ends, nulls.tolist(), strict=True)]
    return [text[a:b] for a, b in zip(starts, ends, strict=True)]


class PackedValues(Sequence[str | None]):
    """The list :func:`pack_strings` packed, read in place: ``values[i]`` decodes one value (``None`` where it was
    ``None``), ``len``, slices (a list) and iteration as a list's.

    A restored column vocabulary (``RowTable``'s ``doc_id``, ``filters.PACKED_COLUMNS``: about one value a row; every
    restored column is read through it, and the others are then copied into lists) held as Python strings in a list
    costs ~100 bytes a value plus a dictionary entry, ~470 MB at 1M nodes (issue 26); held so, it
    costs the file's pages that are read, plus one ``str`` of the text (decoded on the first read; the offsets count
    characters). Immutable, so readers share it without a lock.
    """

    __slots__ = ("_blob", "_offsets", "_text")

    def __init__(self, blob: np.ndarray, offsets: np.ndarray) -> None:
        if offsets.ndim != 1 or offsets.shape[0] < 1:
            raise ValueError("packed values need len + 1 offsets")
        self._blob = blob
        self._offsets = offsets
        self._text: str | None = None

    def __len__(self) -> int:
        return int(self._offsets.shape[0]) - 1

    @overload
    def __getitem__(self, index: int) -> str | None: ...

    @overload
    def __getitem__(self, index: slice) -> list[str | None]: ...

    def __getitem__(self, index: int | slice) -> str | None | list[str | None]:
        n = len(self)
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(n))]
        i = int(index) + n if index < 0 else int(index)
        if not 0 <= i < n:
            raise IndexError("packed value index out of range")
        end = int(self._offsets[i + 1])
        if end < 0:
            return None
        start = int(self._offsets[i])
        text = self._text
        if text is None:
            text = self._text = self._blob.tobytes().decode("utf-8")
        return text[-start - 1 if start < 0 else start : end]


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # some filesystems cannot fsync a directory; the rename is still atomic
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


class DerivedFiles:
    """The ``<home>/derived`` folder: atomic saves and validated zero-copy loads of account snapshots.

    Args:
        root: the folder (created on the first save).
        metadata: the metadata store whose ``meta`` holds the database identity (:data:`STORE_ID_KEY`).

    Attributes:
        saves: files written; ``save_failures``: saves that failed (logged; the search that triggered them goes on).
        rejected: files found but not used (other version, parameters or database, or unreadable).
    """

    def __init__(self, root: Path, metadata: MetaStore, *, read_only: bool = False) -> None:
        self.root = root
        self.read_only = read_only  # a read-only home: files are opened, never written
        self._metadata = metadata
        self._store_id: str | None = None
        self._lock = threading.Lock()
        self.saves = 0
        self.save_failures = 0
        self.rejected = 0
        self._problems: dict[str, str] = {}  # path -> why it was not used, until it is written anew

    def path(self, kind: str, account_id: str) -> Path:
        """The file of ``kind`` (``l0``, ``bm25``) for ``account_id``."""
        digest = hashlib.sha256(account_id.encode("utf-8")).hexdigest()[:32]
        return self.root / kind / f"{digest}{_SUFFIX}"

    def store_id(self, *, create: bool) -> str | None:
        """The metadata database's identity (a random hex string in its ``meta``), set when ``create`` and absent.

        The first write wins (``ensure_meta``: an insert that does nothing when the key exists), so the savers of
        two structures, or two processes, creating it at once all stamp their files with the one stored value."""
        with self._lock:
            if self._store_id is not None:
                return self._store_id
        found = self._metadata.get_meta(STORE_ID_KEY)
        if found is None and create:
            found = self._metadata.ensure_meta(STORE_ID_KEY, uuid.uuid4().hex)
        with self._lock:
            if found is not None:
                self._store_id = found
        return found

    # ---- write ------------------------------------------------------------------------------------------------------
    def save(
        self,
        kind: str,
        account_id: str,
        generation: int,
        params: Mapping[str, Any],
        meta: Mapping[str, Any],
        arrays: Mapping[str, np.ndarray],
        *,
        token: str | None = None,
    ) -> Path | None:
        """Write one snapshot atomically (temporary file, fsync, rename, fsync of the folder); returns its path, or
        ``None`` when writing failed (logged and counted in :attr:`save_failures`: a cache that cannot be written is
        not an error of the search that triggered it). Nothing is written for a read-only home (``read_only``).
        ``token``: the token of ``generation``, stamped beside it (:attr:`Snapshot.token`)."""
        import safetensors.numpy

        if self.read_only:
            return None
        target = self.path(kind, account_id)
        try:
            contiguous = {name: np.ascontiguousarray(arr) for name, arr in arrays.items()}
            header = {
                "format": _FORMAT,
                "version": FORMAT_VERSION,
                "kind": kind,
                "account_id": account_id,
                "generation": int(generation),
                "token": token,
                "store_id": self.store_id(create=True),
                "params": dict(params),
                "meta": dict(meta),
                # numpy's stubs do not declare ndarray a buffer; it is one (PEP 3118)
                "crc32": {
                    name: zlib.crc32(memoryview(arr).cast("B"))  # type: ignore[arg-type]
                    for name, arr in contiguous.items()
                    if arr.size
                },
            }
            data = safetensors.numpy.save(contiguous, metadata={_META_KEY: json.dumps(header, ensure_ascii=False)})
            target.parent.mkdir(parents=True, exist_ok=True)
            self._sweep(target)
            tmp = target.with_name(f"{target.name}.tmp.{os.getpid()}.{uuid.uuid4().hex[:8]}")
            try:
                with open(tmp, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    tmp.unlink()
                raise
            _fsync_dir(target.parent)
        except (OSError, ValueError, TypeError, ContextEngineError) as err:
            with self._lock:
                self.save_failures += 1
            _LOG.warning("could not write the derived file %s (%s); it will be rebuilt", target, err)
            return None
        with self._lock:
            self.saves += 1
            self._problems.pop(str(target), None)
        return target

    @staticmethod
    def _sweep(target: Path) -> None:
        """Remove temporary files of ``target`` left by processes that died mid-save."""
        for tmp in target.parent.glob(f"{target.name}.tmp.*"):
            try:
                pid = int(tmp.name.split(".tmp.", 1)[1].split(".", 1)[0])
            except ValueError:
                continue
            if pid != os.getpid() and not _alive(pid):
                with contextlib.suppress(OSError):
                    tmp.unlink()

    # ---- read -------------------------------------------------------------------------------------------------------
    def load(self, kind: str, account_id: str, params: Mapping[str, Any]) -> Snapshot | None:
        """The account's snapshot of ``kind``, or ``None`` when there is none or it cannot be used (another format
        version, other ``params``, another database, or a file that does not parse: logged and counted in
        :attr:`rejected`). Never raises for a bad file."""
        return self._read(kind, account_id, params, arrays=True)

    def usable(self, kind: str, account_id: str, params: Mapping[str, Any]) -> bool:
        """Whether the account has a file of ``kind`` that :meth:`load` would use, judged from its header alone (the
        arrays are not mapped); nothing is logged or counted."""
        return self._read(kind, account_id, params, arrays=False, quiet=True) is not None

    def check(self, kind: str, account_id: str) -> str | None:
        """Why the account's file of ``kind`` would not be used (it does not parse, an array fails its CRC-32, it is
        of another format version or database), or ``None`` when it is absent or whole; its parameters are not
        compared (the caller may not know them). Reads the whole file (~1.8 GB/s); nothing is logged or counted.
        ``stats`` reports it: such a file is a cache, rebuilt at the account's next search."""
        found: list[str] = []
        self._read(kind, account_id, None, arrays=True, reject=lambda _path, why: found.append(why))
        return found[0] if found else None

    def _read(
        self,
        kind: str,
        account_id: str,
        params: Mapping[str, Any] | None,
        *,
        arrays: bool,
        quiet: bool = False,
        reject: Callable[[Path, str], None] | None = None,
    ) -> Snapshot | None:
        path = self.path(kind, account_id)
        reject = reject or (_quiet if quiet else self.reject)
        try:
            with open(path, "rb") as fh:
                if os.fstat(fh.fileno()).st_size < 8:
                    return reject(path, "truncated")
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)  # the map outlives the file object
                st = os.fstat(fh.fileno())
                identity = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            return None
        except OSError as err:
            return reject(path, f"unreadable ({err.strerror})")
        try:
            header, base = _header(mm)
            own = json.loads(header.get("__metadata__", {}).get(_META_KEY, "{}"))
            if own.get("format") != _FORMAT or own.get("version") != FORMAT_VERSION:
                return reject(path, f"format version {own.get('version')!r}, this engine reads {FORMAT_VERSION}")
            if own.get("kind") != kind or own.get("account_id") != account_id:
                return reject(path, "written for another account or structure")
            if params is not None and own.get("params") != json.loads(json.dumps(dict(params))):
                return reject(path, "built with other settings")
            if own.get("store_id") != self.store_id(create=False):
                return reject(path, "built from another metadata database")
            found = _arrays(mm, header, base) if arrays else {}
            if arrays:
                bad = _checksum_mismatch(path, header, base, own.get("crc32"))
                if bad is not None:
                    return reject(path, bad)
            offsets = {name: base + int(spec["data_offsets"][0]) for name, spec in header.items() if name in found}
            token = own.get("token")  # absent in a file written before tokens: None, as the store's rows of then
            if token is not None and not isinstance(token, str):
                raise TypeError("the generation's token is not a string")
            return Snapshot(int(own["generation"]), own.get("meta", {}), found, path, identity, offsets, token)
        except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError, OSError) as err:
            return reject(path, f"does not parse ({type(err).__name__}: {err})"[:200])

    def current_problems(self) -> list[str]:
        """The files this process found unusable and has not rewritten since, each ``<path>: <why>`` (``/readyz``)."""
        with self._lock:
            return [f"{path}: {why}" for path, why in sorted(self._problems.items())]

    def reject(self, path: Path, why: str) -> None:
        """Record that the file at ``path`` is not used and why (logged at INFO, counted, listed by
        :meth:`current_problems` until the file is written anew)."""
        with self._lock:
            self.rejected += 1
            self._problems[str(path)] = why
        _LOG.info("derived file %s not used: %s; rebuilding it from the metadata store", path, why)


class BackgroundSaves:
    """Derived files written off the search path: one worker thread per index, at most one save per account pending
    or running at once (a save asked for meanwhile is dropped: the running one, or the next trigger, covers it). A save
    that raises is logged, never re-raised: a cache that is not written is rebuilt later, never a failed search.

    Args:
        name: the worker thread's name prefix (``ce-derived-l0``, ``ce-derived-bm25``).
        what: what the files hold, for the log line of a failed save.
    """

    def __init__(self, name: str, what: str) -> None:
        self._name = name
        self._what = what
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified when the last pending save ends
        self._pool: Any = None  # a ThreadPoolExecutor, made at the first save
        self._pending: set[str] = set()

    def submit(self, account_id: str, save: Callable[[], object]) -> None:
        """Run ``save`` for ``account_id`` on the worker, unless a save of that account is pending or running."""
        from concurrent.futures import ThreadPoolExecutor

        with self._lock:
            if account_id in self._pending:
                return
            self._pending.add(account_id)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._name)
            pool = self._pool
        try:
            pool.submit(self._run, account_id, save)
        except RuntimeError:  # shut down by close() meanwhile: not pending, so later saves and waits go on
            with self._lock:
                self._pending.discard(account_id)
                if not self._pending:
                    self._idle.notify_all()

    def _run(self, account_id: str, save: Callable[[], object]) -> None:
        try:
            save()
        except Exception:  # noqa: BLE001 - logged; a cache that is not written is rebuilt later
            _LOG.exception("writing the %s file of an account failed", self._what)
        finally:
            with self._lock:
                self._pending.discard(account_id)
                if not self._pending:
                    self._idle.notify_all()

    def wait(self, timeout: float) -> bool:
        """Wait until no save is pending or running, at most ``timeout`` seconds; whether none is."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._pending, timeout)

    def close(self) -> None:
        """Wait for the saves submitted (a process that exits right after still leaves whole files)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


def _quiet(_path: Path, _why: str) -> None:
    """A rejection that is neither logged nor counted (:meth:`DerivedFiles.usable`)."""


def _header(mm: mmap.mmap) -> tuple[dict[str, Any], int]:
    (length,) = struct.unpack("<Q", mm[:8])
    if length > len(mm) - 8:
        raise ValueError("header longer than the file")
    header = json.loads(mm[8 : 8 + length].decode("utf-8"))
    if not isinstance(header, dict):
        raise TypeError("header is not an object")
    return header, 8 + length


def _checksum_mismatch(path: Path, header: dict[str, Any], base: int, crcs: Any) -> str | None:
    """Why the arrays of the file at ``path`` do not match the CRC-32 of each written in its stamp (``crcs``: name ->
    checksum), or ``None`` when they all do. Read with ordinary reads in 8 MB chunks, not through the memory map, so
    checking pages nothing into the process (the pages stay in the OS cache for the map): ~1.8 GB/s, 1 s for the 2 GB
    of a 1M-node home. A flipped byte in a tombstone or a string column would otherwise be served or break catch-up
    until the file is rewritten."""
    if not isinstance(crcs, dict):
        return "no checksums"
    buf = bytearray(8 << 20)
    view = memoryview(buf)
    with open(path, "rb") as fh:
        for name, spec in header.items():
            if name == "__metadata__":
                continue
            begin, end = (int(x) for x in spec["data_offsets"])
            if end == begin:
                continue
            fh.seek(base + begin)
            crc, left = 0, end - begin
            while left:
                got = fh.readinto(view[: min(left, len(buf))])
                if not got:
                    return f"array {name} truncated"
                crc = zlib.crc32(view[:got], crc)
                left -= got
            if crcs.get(name) != crc:
                return f"checksum mismatch in array {name}"
    return None


def _arrays(mm: mmap.mmap, header: dict[str, Any], base: int) -> dict[str, np.ndarray]:
    """Zero-copy views of the safetensors arrays in ``mm`` (each range checked against the file)."""
    out: dict[str, np.ndarray] = {}
    room = len(mm) - base
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES[spec["dtype"]]
        shape = tuple(int(d) for d in spec["shape"])
        begin, end = (int(x) for x in spec["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not 0 <= begin <= end <= room or end - begin != count * dtype.itemsize:
            raise ValueError(f"array {name} does not fit the file")
        if count == 0:
            out[name] = np.zeros(shape, dtype=dtype)
            continue
        out[name] = np.frombuffer(mm, dtype=dtype, count=count, offset=base + begin).reshape(shape)
    return out
