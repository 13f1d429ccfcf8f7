"""``ContextFS`` on a local directory (DESIGN.md §3, content store).

Layout: ``<root>/<account_id>/<scope>/[<space>/]<segment>/.../`` is one folder per node, holding ``.abstract.md``
(L0), ``.overview.md`` (L1) and, for files, ``.content.md`` (L2). Children are sub-folders. URI validation reserves
those names, so no node can collide with a level file. Every file is written atomically: a temporary file in the
same folder, then ``os.replace``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import Level
from context_engine.schema.uri import ContextURI

LEVEL_FILES: dict[Level, str] = {Level.L0: ".abstract.md", Level.L1: ".overview.md", Level.L2: ".content.md"}


class LocalContentStore:
    """Content store on the local file system. Thread-safe for distinct nodes (each write is one rename)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _node_dir(self, account_id: str, uri: str) -> Path:
        u = ContextURI.parse(uri)
        parts = [account_id, u.scope]
        if u.space is not None:
            parts.append(u.space)
        parts.extend(u.segments)
        return self.root.joinpath(*parts)

    def write_levels(self, account_id: str, uri: str, levels: dict[Level, str | None]) -> None:
        """Write the given levels of one node; ``None`` removes a level. Each file is replaced atomically.

        Raises:
            ContextEngineError: ``WRT-5001`` when the file system refuses the write.
        """
        node = self._node_dir(account_id, uri)
        try:
            node.mkdir(parents=True, exist_ok=True)
            for level, text in levels.items():
                target = node / LEVEL_FILES[level]
                if text is None:
                    target.unlink(missing_ok=True)
                    continue
                fd, tmp = tempfile.mkstemp(dir=node, prefix=".tmp-", suffix=".part")
                try:
                    with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                        fh.write(text)
                    os.replace(tmp, target)
                except BaseException:
                    Path(tmp).unlink(missing_ok=True)
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
