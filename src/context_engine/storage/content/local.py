"""``ContextFS`` on a local directory (DESIGN.md §3, content store).

Layout: ``<root>/<account_id>/<scope>/[<space>/]<segment>/.../`` is one folder per node, holding ``.abstract.md``
(L0), ``.overview.md`` (L1) and, for files, ``.content.md`` (L2). Children are sub-folders. URI validation reserves
those names, so no node can collide with a level file. Every file of an existing node is replaced atomically: a
temporary file in the same folder, then ``os.replace``; a new node's folder is filled in place before any reader can
know it (:meth:`LocalContentStore.write_levels`).

Undo records of the write protocol (docs/security.md, "Crash safety and concurrent writers") live in
``<root>/@journal/<journal id>/`` (``@`` cannot start an account id): one line per journaled change in
``records.jsonl`` (``{"seq": n, "op": ...}``) and, beside it, ``<seq>/`` with what the change replaced. Each line is
appended with one ``write`` before its change (a killed process leaves it whole or absent; a line that does not parse
is a record whose change never started), so after a crash at any point :meth:`LocalContentStore.rollback` knows
exactly what to put back. A record undone by a rollback gets an ``{"undone": n}`` line. Journals written before
issue 26 hold one ``<seq>.json`` manifest per change instead (each removed once undone); rollback reads both.

* ``stash``: the node's current level files are hard-linked into ``<seq>/`` (no copy: the write that follows replaces
  the files by rename, so the links keep the old ones); a node that did not exist is recorded as new.
* ``delete``: the node's folder is renamed into ``<seq>/`` (that rename is the delete; :meth:`discard` frees it).
* ``move``: the folder is renamed; rollback renames it back.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import json
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import Level
from context_engine.schema.uri import ContextURI

LEVEL_FILES: dict[Level, str] = {Level.L0: ".abstract.md", Level.L1: ".overview.md", Level.L2: ".content.md"}
RECORDS_FILE = "records.jsonl"  # a journal's undo records, one JSON line each (module docstring)
_TMP_SEQ = itertools.count()  # with the pid and the thread id: a temporary name no other writer uses
JOURNAL_DIR = "@journal"
STAMP_FILE = "@store-id"  # the metadata database this content belongs to (``@`` cannot start an account id)


class LocalContentStore:
    """Content store on the local file system. Thread-safe for distinct nodes (each write is one rename)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._root = os.fspath(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._journal_root = self.root / JOURNAL_DIR
        self._seq: dict[str, int] = {}
        self._seq_lock = threading.Lock()

    def _node_dir(self, account_id: str, uri: str) -> Path:
        return Path(self._node_path(account_id, uri))

    def _node_rel(self, account_id: str, uri: str) -> str:
        """The node's folder relative to the root, ``/``-separated (as the undo records hold it)."""
        u = ContextURI.parse(uri)
        parts = [account_id, u.scope]
        if u.space is not None:
            parts.append(u.space)
        parts.extend(u.segments)
        return "/".join(parts)

    def _node_path(self, account_id: str, uri: str) -> str:
        # strings, not pathlib: a write of 100 messages builds 200 of these (pathlib was a third of its content work)
        return os.path.join(self._root, self._node_rel(account_id, uri))

    def write_levels(self, account_id: str, uri: str, levels: dict[Level, str | None]) -> None:
        """Write the given levels of one node; ``None`` removes a level.

        An existing node's files are each replaced atomically (a temporary file, then a rename). A node whose folder
        this call creates gets its files written in place: no reader knows the folder before the write that creates
        it commits (its metadata row commits after its content), and a write cut short leaves a folder no node
        names, which its undo record removes (:meth:`stash` recorded the node as new) or ``reindex --gc`` sweeps.
        That saves three of a new node's ten file-system calls (issue 26: a conversation message is a new node).

        Raises:
            ContextEngineError: ``WRT-5001`` when the file system refuses the write.
        """
        node = self._node_path(account_id, uri)
        try:
            try:
                os.mkdir(node)
                new = True
            except FileExistsError:
                new = False
            except FileNotFoundError:  # a parent is missing too
                os.makedirs(node, exist_ok=True)
                new = True
            for level, text in levels.items():
                target = os.path.join(node, LEVEL_FILES[level])
                if text is None:
                    if not new:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(target)
                    continue
                data = text.encode("utf-8")
                if new:
                    _write_new(target, data)
                    continue
                tmp = os.path.join(node, f".tmp-{os.getpid()}-{threading.get_ident()}-{next(_TMP_SEQ)}.part")
                try:
                    _write_new(tmp, data)
                    os.replace(tmp, target)
                except BaseException:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(tmp)
                    raise
        except OSError as err:
            raise ContextEngineError(
                ErrorCode.STORAGE_FAILED, f"content store write failed for {uri}: {err.strerror}", retryable=True
            ) from err

    def read_level(self, account_id: str, uri: str, level: Level) -> str | None:
        """The text of ``level`` for ``uri``, or ``None`` if the node or the level is absent."""
        path = self._node_dir(account_id, uri) / LEVEL_FILES[level]
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            return None

    def exists(self, account_id: str, uri: str) -> bool:
        return self._node_dir(account_id, uri).is_dir()

    def delete(self, account_id: str, uri: str) -> None:
        """Remove the node folder and its subtree; a missing node is ignored."""
        node = self._node_dir(account_id, uri)
        if not node.exists():
            return
        # Rename first so a crash never leaves a half-deleted node visible, then remove.
        trash = node.with_name(f".trash-{node.name}-{os.getpid()}-{id(node)}")
        try:
            os.replace(node, trash)
            shutil.rmtree(trash, ignore_errors=True)
        except OSError as err:
            raise ContextEngineError(
                ErrorCode.STORAGE_FAILED, f"content store delete failed for {uri}: {err.strerror}", retryable=True
            ) from err

    def move(self, account_id: str, src_uri: str, dst_uri: str) -> None:
        """Move a node folder (with its subtree) to ``dst_uri``; the destination must not exist.

        Raises:
            ContextEngineError: ``WRT-4091`` if the destination exists, ``WRT-5001`` on file-system failure.
        """
        src = self._node_dir(account_id, src_uri)
        dst = self._node_dir(account_id, dst_uri)
        if dst.exists():
            raise ContextEngineError(ErrorCode.CONFLICT, f"{dst_uri} already exists")
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
        except OSError as err:
            raise ContextEngineError(
                ErrorCode.STORAGE_FAILED, f"content store move failed: {err.strerror}", retryable=True
            ) from err

    # ---- the write protocol's undo records (module docstring) ---------------------------------------------------
    def stash(self, journal_id: str, account_id: str, uri: str) -> None:
        """Keep the current level files of ``uri`` (hard links) before the write replaces them.

        Raises:
            ContextEngineError: ``WRT-5001`` when the file system refuses.
        """
        rel = self._node_rel(account_id, uri)
        node = os.path.join(self._root, rel)
        with self._journal_errors(uri):
            seq, data = self._next_record(journal_id)
            existed: list[str] = []
            if os.path.isdir(node):
                data.mkdir(parents=True, exist_ok=True)
                for name in LEVEL_FILES.values():
                    try:
                        os.link(os.path.join(node, name), data / name)
                    except FileNotFoundError:
                        continue
                    existed.append(name)
            self._write_manifest(journal_id, seq, {"op": "stash", "path": rel, "existed": existed})

    def delete_journaled(self, journal_id: str, account_id: str, uri: str) -> None:
        """Delete the node's folder (and subtree) by renaming it into the journal; :meth:`rollback` renames it back.

        Raises:
            ContextEngineError: ``WRT-5001`` when the file system refuses.
        """
        node = self._node_dir(account_id, uri)
        if not node.exists():
            return
        with self._journal_errors(uri):
            seq, data = self._next_record(journal_id)
            self._write_manifest(journal_id, seq, {"op": "delete", "path": self._rel(node)})
            os.replace(node, data)

    def move_journaled(self, journal_id: str, account_id: str, src_uri: str, dst_uri: str) -> None:
        """:meth:`move`, recorded first so that :meth:`rollback` can move the folder back.

        Raises:
            ContextEngineError: ``WRT-4091`` if the destination exists, ``WRT-5001`` on file-system failure.
        """
        src, dst = self._node_dir(account_id, src_uri), self._node_dir(account_id, dst_uri)
        if dst.exists():
            raise ContextEngineError(ErrorCode.CONFLICT, f"{dst_uri} already exists")
        if not src.exists():
            return
        with self._journal_errors(src_uri):
            seq, _ = self._next_record(journal_id)
            self._write_manifest(journal_id, seq, {"op": "move", "src": self._rel(src), "dst": self._rel(dst)})
        self.move(account_id, src_uri, dst_uri)

    def rollback(self, journal_id: str) -> None:
        """Undo the journaled changes of ``journal_id``, newest first, then drop its records.

        Idempotent: each record is marked undone once its change is undone, and a change half undone (some backups
        moved back) skips what is back, so a rollback cut short by a crash is simply run again. Folders left empty by
        the undone changes are removed.

        Raises:
            ContextEngineError: ``WRT-5001`` when the file system refuses.
        """
        folder = self._journal_root / journal_id
        if not folder.is_dir():
            return
        with self._journal_errors(journal_id):
            for seq, record, undone in reversed(self._records(journal_id)):
                touched: list[Path] = []
                data = folder / str(seq)
                if record["op"] == "stash":
                    node = self.root / record["path"]
                    for name in LEVEL_FILES.values():
                        if name in record["existed"]:
                            if (data / name).exists():  # not yet restored
                                node.mkdir(parents=True, exist_ok=True)
                                os.replace(data / name, node / name)
                        else:
                            (node / name).unlink(missing_ok=True)
                    touched.append(node)
                elif record["op"] == "delete":
                    node = self.root / record["path"]
                    if data.exists() and not node.exists():
                        node.parent.mkdir(parents=True, exist_ok=True)
                        os.replace(data, node)
                elif record["op"] == "move":
                    src, dst = self.root / record["src"], self.root / record["dst"]
                    if dst.exists() and not src.exists():
                        src.parent.mkdir(parents=True, exist_ok=True)
                        os.replace(dst, src)
                    touched.append(dst.parent)
                for node in sorted(touched, key=lambda p: -len(p.parts)):
                    self._prune_empty(node)
                # this record is undone: a rollback cut short after it never undoes it again over what the older
                # records put back (a stash's "this level was absent" would delete a level an older stash restored)
                undone()
        self.discard(journal_id)

    def discard(self, journal_id: str) -> None:
        """Drop the undo records of ``journal_id`` (its write committed, or was rolled back). Idempotent."""
        with self._seq_lock:
            self._seq.pop(journal_id, None)
        folder = self._journal_root / journal_id
        if not folder.exists():
            return
        # Renamed first, so a crash in the middle of the removal never leaves half the records under the live name.
        gone = self._journal_root / f".gone-{journal_id}-{uuid.uuid4().hex[:8]}"
        try:
            os.replace(folder, gone)
        except FileNotFoundError:
            return
        shutil.rmtree(gone, ignore_errors=True)

    def journal_ids(self) -> list[str]:
        """Journal ids with undo records left (normally none), sorted; removes the remains of cut-short discards."""
        if not self._journal_root.is_dir():
            return []
        out: list[str] = []
        for entry in self._journal_root.iterdir():
            if entry.name.startswith(".gone-"):
                shutil.rmtree(entry, ignore_errors=True)
            elif entry.is_dir():
                out.append(entry.name)
        return sorted(out)

    def node_uris(self, account_id: str) -> list[str]:
        """Every node folder of ``account_id`` as a URI (directories end with ``/``), sorted: a full walk of the
        account's content (``reindex --full`` compares it with the metadata to find orphans)."""
        base = self.root / account_id
        out: list[str] = []
        if not base.is_dir():
            return out
        for folder, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            rel = Path(folder).relative_to(base).parts
            if not rel or not any(f in LEVEL_FILES.values() for f in files):
                continue
            is_file = LEVEL_FILES[Level.L2] in files
            out.append("ctx://" + "/".join(rel) + ("" if is_file else "/"))
        return sorted(out)

    def account_ids(self) -> list[str]:
        """The account folders under the root (``reindex --gc`` sweeps them all), sorted."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and p.name[0] not in "@.")

    def read_stamp(self) -> str | None:
        """The owner stamp (``<root>/@store-id``), or ``None``."""
        try:
            return (self.root / STAMP_FILE).read_text(encoding="utf-8").strip() or None
        except FileNotFoundError:
            return None
        except OSError as err:
            raise ContextEngineError(
                ErrorCode.STORAGE_FAILED, f"content store: {err.strerror}", retryable=True
            ) from err

    def write_stamp(self, store_id: str) -> None:
        """Write the owner stamp atomically (a temporary file, then a rename)."""
        tmp = self.root / f".{STAMP_FILE}.{uuid.uuid4().hex}.tmp"
        try:
            tmp.write_text(store_id, encoding="utf-8")
            os.replace(tmp, self.root / STAMP_FILE)
        except OSError as err:
            tmp.unlink(missing_ok=True)
            raise ContextEngineError(
                ErrorCode.STORAGE_FAILED, f"content store: {err.strerror}", retryable=True
            ) from err

    def _next_record(self, journal_id: str) -> tuple[int, Path]:
        folder = self._journal_root / journal_id
        with self._seq_lock:
            if journal_id not in self._seq:
                folder.mkdir(parents=True, exist_ok=True)
                self._seq[journal_id] = max((seq for seq, _, _ in self._records(journal_id)), default=0)
            self._seq[journal_id] += 1
            seq = self._seq[journal_id]
        return seq, folder / str(seq)

    def _write_manifest(self, journal_id: str, seq: int, record: dict[str, object]) -> None:
        """Append the record of change ``seq`` to the journal's log, before the change (module docstring)."""
        self._append(journal_id, {"seq": seq, **record})

    def _append(self, journal_id: str, entry: dict[str, object]) -> None:
        line = (json.dumps(entry) + "\n").encode("utf-8")
        fd = os.open(os.path.join(self._journal_root, journal_id, RECORDS_FILE), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            written = os.write(fd, line)  # one write: a process killed around it leaves the line whole or absent
        finally:
            os.close(fd)
        if written != len(line):  # a full disk: the change is not made (the write fails and is undone)
            raise OSError(errno.ENOSPC, "the journal line was cut short")

    def _records(self, journal_id: str) -> list[tuple[int, dict[str, Any], Callable[[], None]]]:
        """The journal's records not yet undone, oldest first: ``(seq, record, mark undone)``, from its log and from
        the per-change manifests of journals written before issue 26."""
        folder = self._journal_root / journal_id
        found: dict[int, tuple[dict[str, Any], Callable[[], None]]] = {}
        for path in folder.glob("*.json"):
            if path.stem.isdigit():
                found[int(path.stem)] = (json.loads(path.read_text(encoding="utf-8")), path.unlink)
        undone: set[int] = set()
        try:
            lines = (folder / RECORDS_FILE).read_bytes().splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:  # a line whose write never completed: its change never started
                continue
            if "undone" in entry:
                undone.add(int(entry["undone"]))
            elif "seq" in entry:
                seq = int(entry.pop("seq"))
                found[seq] = (entry, functools.partial(self._append, journal_id, {"undone": seq}))
        return [(seq, record, mark) for seq, (record, mark) in sorted(found.items()) if seq not in undone]

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _prune_empty(self, folder: Path) -> None:
        """Remove ``folder`` and its parents while they are empty, up to the account folder."""
        while folder != self.root and folder.parent != self.root and folder.is_dir():
            try:
                folder.rmdir()
            except OSError:
                return  # not empty: a node lives there
            folder = folder.parent

    @contextmanager
    def _journal_errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except OSError as err:
            raise ContextEngineError(
                ErrorCode.STORAGE_FAILED,
                f"content store journal failed for {what}: {err.strerror}",
                retryable=True,
            ) from err


def _write_new(path: str, data: bytes) -> None:
    """Create ``path`` (it must not exist) holding ``data``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # as tempfile.mkstemp made them
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
