"""``ContextFS`` on an S3-compatible object store, through obstore (issue 13; docs/deployment.md "S3 content store").

Layout: the local layout (:mod:`context_engine.storage.content.local`) under ``s3://<bucket>/<prefix>/``: one key
prefix per node, ``<account_id>/<scope>/[<space>/]<segment>/.../``, holding the objects ``.abstract.md`` (L0),
``.overview.md`` (L1) and, for files, ``.content.md`` (L2). S3 has no folders: a node exists while an object lies
under its prefix.

What S3 gives, and what this store builds on it:

* **A PUT is atomic per object** (readers see the old object or the new one), and S3 (since 2020), MinIO and
  SeaweedFS give **read-after-write consistency** for PUT, DELETE and LIST: a read or a listing after a write sees it.
  So ``write_levels`` is one PUT (or DELETE) per level, each atomic like the local store's write-then-rename.
* **No rename and no multi-object transaction.** ``move`` is a server-side COPY of every object of the subtree, then a
  DELETE of the sources; ``delete`` is a DELETE of every object. A crash part-way leaves both copies of a moved
  subtree, or part of a deleted one. Journaled changes (the only ones the write protocol makes) are safe all the same:
  each is recorded before it starts (below), so :meth:`S3ContentStore.rollback` puts back exactly what was there,
  whichever object the crash stopped at. The plain :meth:`~S3ContentStore.delete` and :meth:`~S3ContentStore.move`
  are used only where no node points at the content any more (``reindex --gc``).
* **Put, then commit.** The write protocol (``ingest/pipeline.py``, ``ingest/journal.py``) changes the content store
  inside the write's metadata transaction, before its commit: every object a committed node points at was written
  (and acknowledged) before the commit, and a write whose PUT failed raises ``WRT-5001`` before the commit, so its
  metadata never commits and its content changes are rolled back from the undo records.

Undo records of the write protocol live under ``<prefix>/@journal/<journal id>/`` (``@`` cannot start an account id):
one ``<seq>.json`` manifest per journaled change and, beside it, ``<seq>/<n>`` with server-side copies of what the
change replaced:

* ``stash``: the node's level objects are copied to ``<seq>/<level file>``, then the manifest names those that
  existed (a crash before the manifest leaves copies no manifest names: ignored, and removed by :meth:`discard`).
* ``delete``: the manifest (listing the subtree's keys) first, then each object is copied to ``<seq>/<i>``, then the
  objects are deleted. Rollback copies back every key whose copy exists.
* ``move``: the manifest (listing the keys) first, then copies to the destination, then deletes of the sources.
  Rollback copies back every key still at the destination, then deletes the destination keys.

Rollback undoes the records newest first and deletes each record (its copies, then its manifest) once undone, so a
rollback cut short by a crash runs again from the first record not yet undone; undoing one record twice is harmless.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

import obstore
from obstore.exceptions import BaseError as ObstoreError

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import Level
from context_engine.schema.uri import ContextURI
from context_engine.storage.content.local import JOURNAL_DIR, LEVEL_FILES, STAMP_FILE

__all__ = ["S3ContentStore"]

_LEVEL_NAMES = frozenset(LEVEL_FILES.values())
_STORE_ERRORS = (ObstoreError, OSError, ValueError, RuntimeError)  # obstore raises builtins for some failures too


class S3ContentStore:
    """Content store on an S3-compatible bucket (any obstore store works: ``S3Store`` in production).

    Thread-safe for distinct nodes, like the local store: each level is one PUT. Every call that fails in the object
    store raises ``WRT-5001`` (``STORAGE_FAILED``, retryable), for reads too; a missing object is not a failure.

    Args:
        store: an obstore store (``obstore.store.S3Store`` for ``s3://``).
        prefix: the key prefix of this engine's content inside the bucket (``""``: the bucket root).
        location: how to name the store in messages, e.g. ``s3://bucket/prefix`` (never a credential).
        on_failure: called with the operation name (``put``, ``get``, ``list``, ...) each time a call fails (metrics).
    """

    def __init__(
        self,
        store: Any,
        prefix: str = "",
        *,
        location: str = "s3://",
        on_failure: Callable[[str], None] | None = None,
    ) -> None:
        self._store = store
        clean = prefix.strip("/")
        self._base = f"{clean}/" if clean else ""
        self._journal_root = f"{self._base}{JOURNAL_DIR}/"
        self.location = location
        self._on_failure = on_failure
        self._seq: dict[str, int] = {}
        self._seq_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"S3ContentStore({self.location!r})"

    # ---- the store's calls: every obstore error becomes WRT-5001 here ----------------------------------------
    def _failed(self, operation: str, what: str, err: Exception) -> ContextEngineError:
        if self._on_failure is not None:
            self._on_failure(operation)
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        return ContextEngineError(
            ErrorCode.STORAGE_FAILED,
            f"content store {operation} failed for {what} in {self.location}: {reason}",
            {"store": "content", "operation": operation, "location": self.location},
            retryable=True,
        )

    def _get(self, key: str) -> bytes | None:
        try:
            return bytes(obstore.get(self._store, key).bytes())
        except FileNotFoundError:
            return None
        except _STORE_ERRORS as err:
            raise self._failed("get", key, err) from err

    def _put(self, key: str, data: bytes) -> None:
        try:
            obstore.put(self._store, key, data)
        except _STORE_ERRORS as err:
            raise self._failed("put", key, err) from err

    def _copy(self, src: str, dst: str) -> bool:
        """Server-side copy; ``False`` when ``src`` does not exist."""
        try:
            obstore.copy(self._store, src, dst, overwrite=True)
        except FileNotFoundError:
            return False
        except _STORE_ERRORS as err:
            raise self._failed("copy", src, err) from err
        return True

    def _delete(self, keys: Iterable[str]) -> None:
        """Delete objects (missing ones are ignored); batched by obstore (S3 DeleteObjects, 1,000 a request)."""
        batch = list(keys)
        if not batch:
            return
        try:
            obstore.delete(self._store, batch)
        except FileNotFoundError:
            pass
        except _STORE_ERRORS as err:
            raise self._failed("delete", batch[0], err) from err

    def _list(self, prefix: str) -> list[str]:
        """Every key under ``prefix`` (a key prefix ending with ``/``), sorted; O(objects under it)."""
        try:
            return sorted(m["path"] for batch in obstore.list(self._store, prefix, chunk_size=1000) for m in batch)
        except _STORE_ERRORS as err:
            raise self._failed("list", prefix, err) from err

    def _objects(self, prefix: str) -> list[str]:
        """The keys of the objects directly under ``prefix``: one LIST with a delimiter.

        Its sub-prefixes are not used: SeaweedFS lists the empty folders its filer keeps after a delete among them,
        so only objects say what exists.
        """
        try:
            found = obstore.list_with_delimiter(self._store, prefix)
        except _STORE_ERRORS as err:
            raise self._failed("list", prefix, err) from err
        return [m["path"] for m in found["objects"]]

    def _any(self, prefix: str) -> bool:
        """Whether any object lies under ``prefix`` (recursive): the first page of one LIST."""
        try:
            return any(len(batch) for batch in obstore.list(self._store, prefix, chunk_size=1))
        except _STORE_ERRORS as err:
            raise self._failed("list", prefix, err) from err

    # ---- start-up -------------------------------------------------------------------------------------------
    def probe(self) -> None:
        """Check that the bucket answers with these credentials: one LIST under the prefix; nothing is created.

        Raises:
            ContextEngineError: ``CFG-4001`` naming ``content.url`` and the store (never a credential) when the
                endpoint cannot be reached, the bucket does not exist or the credentials are refused.
        """
        try:
            obstore.list_with_delimiter(self._store, self._journal_root)
        except _STORE_ERRORS as err:
            why = _probe_failure(str(err))
            raise ContextEngineError(
                ErrorCode.CONFIG_INVALID,
                f"content.url: cannot use {self.location}: {why}",
                {"setting": "content.url", "location": self.location},
            ) from err

    # ---- ContentStore -----------------------------------------------------------------------------------------
    def _node(self, account_id: str, uri: str) -> str:
        """The key prefix of a node: ``<prefix>/<account>/<scope>/[<space>/]<segments>/``."""
        u = ContextURI.parse(uri)
        parts = [account_id, u.scope]
        if u.space is not None:
            parts.append(u.space)
        parts.extend(u.segments)
        return self._base + "/".join(parts) + "/"

    def write_levels(self, account_id: str, uri: str, levels: dict[Level, str | None]) -> None:
        """Write the given levels of one node (one PUT each, atomic per object); ``None`` deletes a level.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when the object store fails; levels written before the
                failure stay written (the write protocol's undo records put them back).
        """
        node = self._node(account_id, uri)
        for level, text in levels.items():
            key = node + LEVEL_FILES[level]
            if text is None:
                self._delete([key])
            else:
                self._put(key, text.encode("utf-8"))

    def read_level(self, account_id: str, uri: str, level: Level) -> str | None:
        """The text of ``level`` for ``uri``, or ``None`` if the node or the level is absent.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when the object store fails.
        """
        data = self._get(self._node(account_id, uri) + LEVEL_FILES[level])
        return None if data is None else data.decode("utf-8")

    def exists(self, account_id: str, uri: str) -> bool:
        """Whether any object lies under the node's prefix (its levels or a descendant's)."""
        return self._any(self._node(account_id, uri))

    def delete(self, account_id: str, uri: str) -> None:
        """Delete every object of the node and its subtree; a missing node is ignored. Not atomic (module
        docstring): the write protocol uses :meth:`delete_journaled`.

        Raises:
            ContextEngineError: ``WRT-5001`` (retryable) when the object store fails.
        """
        self._delete(self._list(self._node(account_id, uri)))

    def move(self, account_id: str, src_uri: str, dst_uri: str) -> None:
        """Copy every object of the subtree to ``dst_uri``, then delete the sources (S3 has no rename).

        Raises:
            ContextEngineError: ``WRT-4091`` if the destination exists, ``WRT-5001`` when the object store fails.
        """
        src, dst = self._node(account_id, src_uri), self._node(account_id, dst_uri)
        if self.exists(account_id, dst_uri):
            raise ContextEngineError(ErrorCode.CONFLICT, f"{dst_uri} already exists")
        self._move_keys(src, dst, [k[len(src) :] for k in self._list(src)])

    def _move_keys(self, src: str, dst: str, rels: list[str]) -> None:
        for rel in rels:  # every copy before any delete: a crash never loses an object
            self._copy(src + rel, dst + rel)
        self._delete(src + rel for rel in rels)

    # ---- the write protocol's undo records (module docstring) ---------------------------------------------------
    def stash(self, journal_id: str, account_id: str, uri: str) -> None:
        """Copy the node's current level objects into the journal before the write replaces them.

        Raises:
            ContextEngineError: ``WRT-5001`` when the object store fails.
        """
        node = self._node(account_id, uri)
        seq, data = self._next_record(journal_id)
        objects = self._objects(node)
        existed = []
        for name in sorted(k[len(node) :] for k in objects if k[len(node) :] in _LEVEL_NAMES):
            if self._copy(node + name, data + name):
                existed.append(name)
        self._write_manifest(journal_id, seq, {"op": "stash", "path": self._rel(node), "existed": existed})

    def delete_journaled(self, journal_id: str, account_id: str, uri: str) -> None:
        """Delete the node and its subtree, copying each object into the journal first; :meth:`rollback` copies
        them back.

        Raises:
            ContextEngineError: ``WRT-5001`` when the object store fails.
        """
        node = self._node(account_id, uri)
        keys = self._list(node)
        if not keys:
            return
        seq, data = self._next_record(journal_id)
        rels = [k[len(node) :] for k in keys]
        self._write_manifest(journal_id, seq, {"op": "delete", "path": self._rel(node), "keys": rels})
        for i, key in enumerate(keys):  # backups named by index: keys stay short (S3 allows 1,024 bytes)
            self._copy(key, f"{data}{i}")
        self._delete(keys)

    def move_journaled(self, journal_id: str, account_id: str, src_uri: str, dst_uri: str) -> None:
        """:meth:`move`, recorded first (with the keys moved) so that :meth:`rollback` can move them back.

        Raises:
            ContextEngineError: ``WRT-4091`` if the destination exists, ``WRT-5001`` when the object store fails.
        """
        src, dst = self._node(account_id, src_uri), self._node(account_id, dst_uri)
        if self.exists(account_id, dst_uri):
            raise ContextEngineError(ErrorCode.CONFLICT, f"{dst_uri} already exists")
        rels = [k[len(src) :] for k in self._list(src)]
        if not rels:
            return
        seq, _ = self._next_record(journal_id)
        self._write_manifest(
            journal_id, seq, {"op": "move", "src": self._rel(src), "dst": self._rel(dst), "keys": rels}
        )
        self._move_keys(src, dst, rels)

    def rollback(self, journal_id: str) -> None:
        """Undo the journaled changes of ``journal_id``, newest first, then drop its records.

        Idempotent: each record is deleted once undone, so a rollback cut short by a crash runs again from the
        first record still there, and undoing a record a second time puts back the same objects.

        Raises:
            ContextEngineError: ``WRT-5001`` when the object store fails (run it again).
        """
        folder = f"{self._journal_root}{journal_id}/"
        objects = self._objects(folder)
        manifests = sorted(
            (int(name[:-5]), k) for k in objects if (name := k[len(folder) :]).endswith(".json") and name[:-5].isdigit()
        )
        for seq, key in reversed(manifests):
            raw = self._get(key)
            if raw is None:
                continue
            record = json.loads(raw)
            data = f"{folder}{seq}/"
            if record["op"] == "stash":
                node = self._base + record["path"]
                for name in sorted(_LEVEL_NAMES):
                    if name in record["existed"]:
                        self._copy(data + name, node + name)  # False once restored and its copy dropped
                    else:
                        self._delete([node + name])
            elif record["op"] == "delete":
                node = self._base + record["path"]
                for i, rel in enumerate(record["keys"]):
                    self._copy(f"{data}{i}", node + rel)
            elif record["op"] == "move":
                src, dst = self._base + record["src"], self._base + record["dst"]
                for rel in record["keys"]:
                    self._copy(dst + rel, src + rel)
                self._delete(dst + rel for rel in record["keys"])
            self._delete(self._list(data))  # this record is undone: its copies, then its manifest
            self._delete([key])
        self.discard(journal_id)

    def discard(self, journal_id: str) -> None:
        """Drop the undo records of ``journal_id`` (its write committed, or was rolled back). Idempotent.

        The manifests go first: a discard cut short never leaves a manifest whose copies are gone.
        """
        with self._seq_lock:
            self._seq.pop(journal_id, None)
        keys = self._list(f"{self._journal_root}{journal_id}/")
        self._delete(k for k in keys if k.endswith(".json"))
        self._delete(k for k in keys if not k.endswith(".json"))

    def journal_ids(self) -> list[str]:
        """Journal ids with undo records left (normally none), sorted: a listing of the records, O(leftovers)."""
        return sorted({k[len(self._journal_root) :].split("/", 1)[0] for k in self._list(self._journal_root)})

    def node_uris(self, account_id: str) -> list[str]:
        """Every node of ``account_id`` that has a level object, as a URI (directories end with ``/``), sorted: a
        full listing of the account's keys (``reindex --gc`` compares it with the metadata to find orphans)."""
        base = f"{self._base}{account_id}/"
        levels: dict[str, set[str]] = {}
        for key in self._list(base):
            folder, _, name = key[len(base) :].rpartition("/")
            if name in _LEVEL_NAMES and folder:
                levels.setdefault(folder, set()).add(name)
        return sorted(
            "ctx://" + folder + ("" if LEVEL_FILES[Level.L2] in names else "/") for folder, names in levels.items()
        )

    def account_ids(self) -> list[str]:
        """The accounts with a key prefix under the store's prefix (``reindex --gc`` sweeps them all), sorted: one
        LIST with a delimiter (SeaweedFS also lists an account whose objects were all deleted: harmless here)."""
        try:
            found = obstore.list_with_delimiter(self._store, self._base or None)
        except _STORE_ERRORS as err:
            raise self._failed("list", self._base or "/", err) from err
        names = (p.rstrip("/")[len(self._base) :] for p in found["common_prefixes"])
        return sorted(n for n in names if n and n != JOURNAL_DIR)

    def read_stamp(self) -> str | None:
        """The owner stamp (the object ``<prefix>/@store-id``), or ``None``."""
        data = self._get(self._base + STAMP_FILE)
        return data.decode("utf-8").strip() or None if data is not None else None

    def write_stamp(self, store_id: str) -> None:
        """Write the owner stamp (one PUT: atomic per object)."""
        self._put(self._base + STAMP_FILE, store_id.encode("utf-8"))

    # ---- journal helpers ----------------------------------------------------------------------------------------
    def _next_record(self, journal_id: str) -> tuple[int, str]:
        """The next record number of ``journal_id`` and the key prefix of its copies."""
        folder = f"{self._journal_root}{journal_id}/"
        with self._seq_lock:
            known = journal_id in self._seq
        if not known:  # another process (or a restart) may have written records: continue after them
            objects = self._objects(folder)
            found = [int(n[:-5]) for k in objects if (n := k[len(folder) :]).endswith(".json") and n[:-5].isdigit()]
            with self._seq_lock:
                self._seq.setdefault(journal_id, max(found, default=0))
        with self._seq_lock:
            self._seq[journal_id] += 1
            seq = self._seq[journal_id]
        return seq, f"{folder}{seq}/"

    def _write_manifest(self, journal_id: str, seq: int, record: dict[str, object]) -> None:
        self._put(f"{self._journal_root}{journal_id}/{seq}.json", json.dumps(record).encode("utf-8"))

    def _rel(self, key: str) -> str:
        return key[len(self._base) :]


# The server's answer in obstore's error text: "... status code: 403 Forbidden: <?xml ...><Code>AccessDenied</Code>".
# Read from those two places only: the request's URL in the same text carries the endpoint's port and the prefix,
# which may hold "403" or "404" themselves (a port 40363 once read as refused credentials).
_STATUS = re.compile(r"status code: (\d{3})\b")
_S3_CODE = re.compile(r"<Code>(\w+)</Code>")
_REFUSED_CODES = frozenset({"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken"})


def _probe_failure(text: str) -> str:
    """Why the start-up LIST failed, for a CFG-4001 message: from the HTTP status and S3 error code the server
    answered, or, when no answer came, that the endpoint cannot be reached. ``text`` is obstore's error text."""
    status_match, code_match = _STATUS.search(text), _S3_CODE.search(text)
    status = int(status_match.group(1)) if status_match else None
    code = code_match.group(1) if code_match else ""
    if code == "NoSuchBucket" or (status == 404 and not code):
        return "the bucket does not exist (create it first; the engine never creates buckets)"
    if status in (401, 403) or code in _REFUSED_CODES:
        return (
            "the credentials were refused (content.s3_access_key_id / content.s3_secret_access_key, or "
            "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)"
        )
    lowered = text.lower()
    if status is None and ("error sending request" in lowered or "connect" in lowered or "timed out" in lowered):
        return "the endpoint cannot be reached (content.s3_endpoint)"
    return (text.strip().splitlines() or ["the object store refused the request"])[0][:300]
