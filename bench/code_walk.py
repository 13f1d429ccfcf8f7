"""The walk of one search_memory request through the code (issue 28): where it stops, how often it climbs back up.

One request is run on a small home (the bundled sample corpus under ``ctx://resources/runbooks/``, plus two users'
memories and a skill) under :func:`sys.setprofile` and :func:`threading.setprofile`, after a first identical request
has loaded what a first request loads (the level-0 matrix, BM25, the model), so the walk is the steady one. Threads
started by that first request (a worker pool, the audit writer) are not profiled (``threading.setprofile`` reaches
only threads started after it): ``tests/test_architecture.py`` walks from the first request on for that. Every
Python function entered is seen; only those of ``src/context_engine`` count. The figures:

``stops``
    distinct functions of ``context_engine`` entered by a call from another ``context_engine`` module (the nearest
    ``context_engine`` frame on the stack is the caller: a call through a library, e.g. a pydantic validator or a
    thread pool, counts as the module's call that led to it: on a worker thread, the nearest frame of that thread),
    plus the entry point. A call within one module is no stop: the reader stays in the file. Generator expressions,
    comprehensions and lambdas are part of the function that defines them (a generator consumed by another module's
    function is no stop).
``files``
    the modules those stops are in.
``returns to a higher layer``
    the stops in the order they were first entered, each given its layer (docs/architecture.md: integrations,
    interfaces, client, eval, api, service, knowledge, retrieval, ingest, storage, schema, errors; the modules beside
    the layers, settings, providers, observability and redaction, have none and are skipped): the number of times the
    next stop is in a higher layer than the one before it, i.e. the walk went down and had to come back up to go on.
``... data layers skipped``
    the same without the stops in ``schema`` and ``errors`` (methods of the data models, used by every layer).
``layer entries``
    per layer, how many separate runs of consecutive stops the walk spends in it (1 everywhere only if the stages
    never came back to a layer after a lower one answered: a staged pipeline that asks storage between its stages
    alternates retrieval and storage here; the call paths below are the per-descent figures).
``call paths``
    for every call across a module boundary, the layers of the package frames on its stack (outermost first; the
    data layers and the modules beside the layers skipped): ``calls to a higher layer`` counts the calls whose
    callee's layer is above its caller's (an upward arrow at run time, e.g. a callback), ``paths entering a layer a
    second time`` the stacks on which a layer comes back after a lower one. Both 0: each path down the stack enters
    each layer once (issue 28), whatever the sequence above shows of the returns between stages.
``target_uri parsed``
    calls of ``ContextURI.parse`` on the request's ``target_uri`` (its text or its canonical form), wherever from,
    and by the module that asked (the metadata store parses every URI it is asked for to key it: the target is among
    the nodes hydrated when a seed's directory is the target).
``tenant filters built``
    ``VectorFilter`` objects constructed (pydantic ``__init__``; a ``model_copy`` does not count), with the typed
    queries of the plan beside it; and the calls of ``scope.effective_owner_spaces`` (the caller's visible spaces,
    narrowed).
``visibility checks``
    calls of ``RequestContext.can_see`` / ``can_see_uri``, by the module (the stage) that made them; the stages are
    the modules apart from ``retrieval/search_memory.py``'s check of the target (which answers ``RET-4031``).

Usage::

    .venv/bin/python bench/code_walk.py [--no-target] [--query TEXT] [--list]

``--list`` prints every stop in walk order with its layer. Run it on another tree with
``PYTHONPATH=/path/to/tree/src``. Never a test; the figures do not depend on the machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import FrameType
from typing import Any

import context_engine

PACKAGE_DIR = str(Path(context_engine.__file__).resolve().parent)
LAYERS = (
    "integrations", "interfaces", "client", "eval", "api", "service", "knowledge", "retrieval", "ingest",
    "storage", "schema", "errors",
)  # fmt: skip
SERVICE_MODULES = ("service", "service_memory", "engine_factory", "engine_parts", "warm_up")
TARGET = "ctx://resources/runbooks/kubernetes/"
QUERY = "Pod is crash looping"


def module_of(filename: str) -> str | None:
    """The dotted module of a file of the package, ``None`` for any other file."""
    if not filename.startswith(PACKAGE_DIR):
        return None
    rel = Path(filename[len(PACKAGE_DIR) + 1 :]).with_suffix("")
    parts = ["context_engine", *rel.parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None
    top = parts[1]
    if top in SERVICE_MODULES:
        return "service"
    return top if top in LAYERS else None


@dataclass
class Walk:
    """What the profiler saw of one request."""

    target: set[str]
    stops: dict[tuple[str, str], int] = field(default_factory=dict)  # (module, qualname) -> order of first entry
    crossings: int = 0
    parses: Counter[str] = field(default_factory=Counter)  # by the module that asked
    filters: int = 0
    spaces: int = 0
    visibility: Counter[str] = field(default_factory=Counter)
    upward: Counter[tuple[str, str]] = field(default_factory=Counter)  # (caller, callee) of a call to a higher layer
    reentered: Counter[str] = field(default_factory=Counter)  # call paths that enter a layer a second time
    paths: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code.co_name == "__init__" and type(frame.f_locals.get("self")).__name__ == "VectorFilter":
            with self._lock:
                self.filters += 1
            return
        module = module_of(code.co_filename)
        if module is None or code.co_name.startswith("<"):  # a comprehension or lambda is part of its function
            return
        caller = frame.f_back
        while caller is not None and module_of(caller.f_code.co_filename) is None:
            caller = caller.f_back
        caller_module = module_of(caller.f_code.co_filename) if caller is not None else None
        name = code.co_qualname
        path = _layer_path(frame) if caller_module != module else None
        with self._lock:
            if caller_module != module:
                self.crossings += 1
                self.stops.setdefault((module, name), len(self.stops))
                self._check_path(path or [], caller_module, module, name)
            if name == "ContextURI.parse" and frame.f_locals.get("uri") in self.target:
                self.parses[caller_module or "?"] += 1
            elif name == "effective_owner_spaces":
                self.spaces += 1
            elif name in ("RequestContext.can_see", "RequestContext.can_see_uri") and caller_module != module:
                self.visibility[caller_module or "?"] += 1


    def _check_path(self, path: list[str], caller_module: str | None, module: str, name: str) -> None:
        """Record what the call path down to this call says: an upward call (the callee's layer above its caller's,
        data layers skipped), a layer entered a second time on the way down."""
        self.paths += 1
        logic = [layer for layer in path if layer not in DATA_LAYERS]
        if len(logic) >= 2 and LAYERS.index(logic[-1]) < LAYERS.index(logic[-2]):
            self.upward[(str(caller_module), f"{module}:{name}")] += 1
        runs = [layer for i, layer in enumerate(logic) if i == 0 or layer != logic[i - 1]]
        for layer in set(runs):
            if runs.count(layer) > 1:
                self.reentered[layer] += 1


DATA_LAYERS = ("schema", "errors")


def _layer_path(frame: FrameType) -> list[str]:
    """The layers of the package frames on ``frame``'s stack, outermost first (frames of modules beside the layers
    and of other packages skipped)."""
    layers: list[str] = []
    f: FrameType | None = frame
    while f is not None:
        module = module_of(f.f_code.co_filename)
        layer = layer_of(module) if module is not None else None
        if layer is not None:
            layers.append(layer)
        f = f.f_back
    return layers[::-1]


def build_home(home: Path) -> Any:
    from context_engine.engine_factory import build_engine
    from context_engine.schema.context import RequestContext
    from context_engine.settings import load_settings

    engine = build_engine(load_settings(home))
    admin = RequestContext(account_id="default", role="admin")
    alice = RequestContext(account_id="default", role="user", user_space="alice", agent_space="helper")
    bob = RequestContext(account_id="default", role="user", user_space="bob")
    corpus = Path(str(resources.files("context_engine") / "sample_corpus"))
    engine.add_resource(corpus, "ctx://resources/runbooks/", admin)
    engine.add_memory("I prefer answers in Chinese with short code samples.", alice, category="preference")
    engine.add_memory("I restart crash looping pods with kubectl rollout restart.", alice, category="profile")
    engine.add_memory("Bob prefers very long and detailed explanations.", bob, category="preference")
    engine.add_skill(
        "restart-deployment",
        "Restart a Kubernetes deployment's pods one by one",
        "## Steps\n\n1. kubectl rollout restart deployment/NAME\n2. kubectl rollout status deployment/NAME\n",
        alice,
    )
    return engine, alice


def measure(query: str, target: str | None) -> tuple[Walk, Any]:
    from context_engine.schema.query import SearchMemoryRequest

    with tempfile.TemporaryDirectory(prefix="ce-walk-") as tmp:
        engine, alice = build_home(Path(tmp) / "home")
        try:
            fields: dict[str, Any] = {"query": query, "top_k": 5}
            if target is not None:
                fields["target_uri"] = target
            request = SearchMemoryRequest(**fields)
            engine.search_memory(request, alice)  # the first request's loads (matrix, BM25, model) stay out
            walk = Walk(target={target, target.rstrip("/") + "/"} if target else set())
            threading.setprofile(walk.profile)
            sys.setprofile(walk.profile)
            try:
                response = engine.search_memory(request, alice)
            finally:
                sys.setprofile(None)
                threading.setprofile(None)  # type: ignore[arg-type]
        finally:
            engine.close()
    return walk, response


def _ups(layered: list[tuple[str, str, str | None]]) -> int:
    """How often the next stop is in a higher layer than the one before it."""
    rank = [LAYERS.index(layer) for _, _, layer in layered if layer is not None]
    return sum(1 for a, b in zip(rank, rank[1:], strict=False) if b < a)


def report(walk: Walk, response: Any, *, listing: bool) -> None:
    order = sorted(walk.stops, key=walk.stops.__getitem__)
    files = {module for module, _ in order}
    layered = [(m, f, layer_of(m)) for m, f in order if layer_of(m) is not None]
    ups = _ups(layered)
    ups_logic = _ups([stop for stop in layered if stop[2] not in ("schema", "errors")])
    runs: Counter[str] = Counter()
    previous = None
    for _, _, layer in layered:
        if layer != previous:
            runs[layer] += 1
        previous = layer
    stages = {m: n for m, n in walk.visibility.items() if m != "context_engine.retrieval.search_memory"}
    rows = [
        ("stops (functions entered from another module)", len(order)),
        ("files", len(files)),
        ("calls across a module boundary", walk.crossings),
        ("returns to a higher layer", ups),
        ("... data layers (schema, errors) skipped", ups_logic),
        ("layer entries", ", ".join(f"{layer} {runs[layer]}" for layer in LAYERS if runs[layer])),
        ("call paths checked (one per call across a module boundary)", walk.paths),
        ("... calls to a higher layer (upward arrows at run time)", sum(walk.upward.values())),
        ("... paths entering a layer a second time on the way down", sum(walk.reentered.values())),
        ("typed queries", len(response.typed_queries)),
        ("target_uri parsed (ContextURI.parse)", sum(walk.parses.values())),
        ("... by module", ", ".join(f"{m.rsplit('.', 1)[1]} {n}" for m, n in sorted(walk.parses.items()))),
        ("tenant filters built (VectorFilter)", walk.filters),
        ("effective_owner_spaces calls", walk.spaces),
        ("visibility checks, by stage", ", ".join(f"{m.rsplit('.', 1)[1]} {n}" for m, n in sorted(stages.items()))),
        ("stages checking visibility", len(stages)),
        ("hits", len(response.hits)),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"| {'figure'.ljust(width)} | value |")
    print(f"|{'-' * (width + 2)}|-------|")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")
    for (caller, callee), n in sorted(walk.upward.items()):
        print(f"  upward: {caller} -> {callee} ({n})")
    for layer, n in sorted(walk.reentered.items()):
        print(f"  re-entered on the way down: {layer} ({n} paths)")
    if listing:
        print()
        for i, (module, name) in enumerate(order):
            print(f"{i:3d} {layer_of(module) or '-':12s} {module.removeprefix('context_engine.')}:{name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--query", default=QUERY)
    ap.add_argument("--target", default=TARGET, help=f"the request's target_uri (default {TARGET})")
    ap.add_argument("--no-target", action="store_true", help="a request without target_uri")
    ap.add_argument("--list", action="store_true", help="print every stop in walk order")
    args = ap.parse_args()
    target = None if args.no_target else args.target
    walk, response = measure(args.query, target)
    print(f"search_memory {args.query!r}, target_uri {target!r}, top_k 5, as alice ({PACKAGE_DIR})\n")
    report(walk, response, listing=args.list)


if __name__ == "__main__":
    main()
