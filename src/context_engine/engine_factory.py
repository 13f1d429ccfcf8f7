"""``build_engine``: the one composition root the interfaces and the evaluation open an engine through (issue 28).

The CLI (``open_engine``, ``migrate-home``, ``mcp``), the HTTP app, the MCP server's background engine and the eval
pipelines all call :func:`build_engine` instead of constructing the service themselves, so opening an engine has one
entry point: the service opens the stores and the embedder the settings name, and :mod:`context_engine.engine_parts`
builds the rest over them.

An engine opened here has no default caller (``default_context=None``): every tenant-bound call names its
:class:`~context_engine.schema.context.RequestContext` (the HTTP key's, the MCP transport's, the CLI's ``--as``, the
eval's), and one that does not is refused with ``AUTH-4011`` rather than run as the admin of account ``default``, the
embedded Python API's default (``ContextEngineService(settings)``).

The service module is imported on the first call, not with this module: it imports the stores and the models (about
a second), which a CLI command that fails early or a remote client never needs. It is looked up on
:mod:`context_engine.service` at each call, so a test that replaces ``ContextEngineService`` there sees every engine
opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from context_engine.service import ContextEngineService
    from context_engine.settings import Settings
    from context_engine.storage.protocols import Embedder

__all__ = ["build_engine"]


def build_engine(
    settings: Settings, *, embedder: Embedder | None = None, recover_writes: bool = True
) -> ContextEngineService:
    """Open the engine the settings describe: its stores, embedder, write and read pipelines.

    Args:
        settings: the one ``Settings`` (home, stores, sections), built by the caller.
        embedder: an embedder already loaded (the eval pipelines and the HTTP app share one); ``None`` loads the
            configured model.
        recover_writes: run the startup check of the write journal (off only for ``reindex --check``).

    Returns:
        An open :class:`~context_engine.service.ContextEngineService` without a default caller (every tenant-bound
        call must pass ``ctx``; one without is ``AUTH-4011``); the caller closes it (it is a context manager).

    Raises:
        ContextEngineError: ``CFG-4001`` when a store cannot be opened or the home is not this deployment's.
    """
    from context_engine import service

    # No default caller: an interface's engine never acts as the admin of account default. Besides that, only what
    # the caller chose is passed on (the rest are the service's defaults), so a wrapper that adds its own part (a
    # test's shared embedder) composes with it.
    parts: dict[str, Any] = {"default_context": None}
    if embedder is not None:
        parts["embedder"] = embedder
    if not recover_writes:
        parts["recover_writes"] = False
    return service.ContextEngineService(settings, **parts)
