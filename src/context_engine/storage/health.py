"""The engine's health as ``/readyz``, ``stats`` and ``reindex --full`` read it: the vector index and the derived files.

Split out of ``service.py`` (issue 28); the service's ``index_health``, ``derived_files_health`` and ``health``
delegate here.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.storage.derived_files import DerivedFiles
from context_engine.storage.protocols import Embedder, MetadataStore, VectorIndex

__all__ = [
    "DERIVED_KINDS",
    "account_stats",
    "derived_files_health",
    "drop_unusable_derived_files",
    "engine_problems",
    "index_health",
    "prepare_full_rebuild",
]

_LOG = logging.getLogger("context_engine.service")  # logged as the service's reindex did

DERIVED_KINDS = ("l0", "bm25")
"""The kinds of derived files (docs/derived_indexes.md): the level-0 matrix and the BM25 index."""


def index_health(index: VectorIndex, metadata: MetadataStore) -> dict[str, Any]:
    """Whether the vector index can serve: ``{"status", "records", "problem"}``.

    ``status`` is ``ok``; ``damaged`` (its files are missing, truncated or unreadable: ``IDX-5031``, and
    ``records`` is ``None`` rather than the stale count its manifest still claims); ``missing`` (it holds no
    record while the metadata database holds vectors: its folder was deleted and recreated empty); or
    ``unavailable`` (another failure, e.g. a vector server that does not answer). ``problem`` says what and how to
    fix it. Opens the index if it was not yet (LanceDB: reads one int32 column of every data file).
    """
    try:
        index.check()
        records = index.count()
    except ContextEngineError as err:
        status = "damaged" if err.code is ErrorCode.INDEX_DAMAGED else "unavailable"
        return {"status": status, "records": None, "problem": f"{err.code.value}: {err.message}"}
    expected = metadata.count_vectors() if records == 0 else 0  # 0 for the exact index: it counts those rows
    if expected > 0:
        return {
            "status": "missing",
            "records": 0,
            # no count: /readyz (no key) and every account's stats show this sentence, and the count is all accounts'
            "problem": "the vector index holds no records but the metadata database holds vectors "
            "(its files were deleted): run `context-engine reindex --full`",
        }
    return {"status": "ok", "records": records, "problem": None}


def derived_files_health(files: DerivedFiles | None, account_id: str) -> dict[str, str]:
    """Per kind (``l0``, ``bm25``), the state of the account's derived file: ``absent``, ``ok``, or why it is not
    used (damaged: it does not parse or fails its CRC-32; another format or database). Such a file is a cache:
    the account's next search ignores it, loads from the metadata database and writes it anew. Reads the files;
    ``{}`` when derived files are off."""
    if files is None:
        return {}
    found: dict[str, str] = {}
    for kind in DERIVED_KINDS:
        problem = files.check(kind, account_id)
        if problem is not None:
            found[kind] = f"not used, rebuilt at the next search: {problem}"
        else:
            found[kind] = "ok" if files.path(kind, account_id).exists() else "absent"
    return found


def engine_problems(index: dict[str, Any], files: DerivedFiles | None) -> list[str]:
    """What degrades the engine now (``/readyz``), each a sentence saying how to fix it; ``[]`` when nothing does:
    the vector index (``index``: :func:`index_health`'s answer) and the derived files this process found unusable
    and has not replaced yet."""
    problems: list[str] = []
    if index["problem"]:
        problems.append(f"vector index {index['status']}: {index['problem']}")
    if files is not None:
        problems.extend(f"derived file {p}" for p in files.current_problems())
    return problems


def prepare_full_rebuild(index: VectorIndex, health: dict[str, Any]) -> bool:
    """Before ``reindex --full``: drop a damaged vector index (without opening it); whether every account must be
    rebuilt (the index was ``damaged`` and dropped, or ``missing``: its table is shared by every account).

    Args:
        index: the engine's vector index.
        health: its :func:`index_health`.

    Raises:
        ContextEngineError: ``IDX-5031`` when the index is damaged and cannot be dropped.
    """
    if health["status"] == "damaged":
        _LOG.warning("reindex --full: dropping the damaged vector index (%s)", health["problem"])
        if not index.drop():  # an index that stores nothing of its own (matrix, exact) cannot be dropped
            raise ContextEngineError(ErrorCode.INDEX_DAMAGED, str(health["problem"]), {"index": index.name})
        return True
    return health["status"] == "missing"


def drop_unusable_derived_files(files: DerivedFiles, accounts: list[str]) -> None:
    """After ``reindex --full``: remove the derived files that would not be used (damaged, another format); the
    account's next search loads and writes them anew."""
    for acc in accounts:
        for kind in DERIVED_KINDS:
            if files.check(kind, acc) is not None:
                files.path(kind, acc).unlink(missing_ok=True)


def account_stats(
    metadata: MetadataStore,
    index: VectorIndex,
    embedder: Embedder,
    files: DerivedFiles | None,
    home: Path,
    account_id: str,
) -> dict[str, Any]:
    """``stats``: the account's counts, and the deployment's index and model.

    Every count is of ``account_id`` alone (the index's table is shared by every account: its own row count, once
    returned as ``index_records``, let an admin of any account watch the others' writes): ``nodes``, ``files``,
    ``directories``, ``pending`` (the account's nodes); ``index_records``, the account's vector records (the
    metadata database's rows, which the index holds once in sync; ``None`` when the index is damaged or unavailable,
    0 when it is missing); ``derived_files``, the account's. The rest describes the deployment, not an account's
    data: ``index_backend``, ``index_status`` and ``index_problem`` (:func:`index_health`), ``embedding_model``,
    ``embedding_dim``, and ``home`` (which the HTTP route leaves out).
    """
    counts = metadata.count_nodes(account_id)
    health = index_health(index, metadata)  # a damaged index shows as such, never with the stale count of its manifest
    records = metadata.count_vectors(account_id) if health["status"] == "ok" else health["records"]
    return {
        "home": str(home),
        "account_id": account_id,
        **counts,
        "index_backend": index.name,
        "index_records": records,
        "index_status": health["status"],
        **({"index_problem": health["problem"]} if health["problem"] else {}),
        **({"derived_files": derived_files_health(files, account_id)} if files is not None else {}),
        "embedding_model": embedder.model_name,
        "embedding_dim": embedder.dim,
    }
