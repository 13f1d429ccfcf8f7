"""The import graph of ``src/context_engine`` keeps the shape docs/architecture.md states (issue 28).

The graph is built with the standard library alone (``ast``) from every ``import`` statement of every module: at
module level, inside functions and methods (deferred imports), and under ``if TYPE_CHECKING:``; an edge goes to the
module imported (``from a.b import c`` to ``a.b.c`` when that is a module, else to ``a.b``). Two checks:

- no cycles between modules;
- no upward arrow: a module of one layer imports only its own layer and those below it, in the order of
  docs/architecture.md ("Layers"), which this test reads from that page; the modules beside the layers (settings,
  providers, observability, redaction) import only each other and the bottom of the stack (errors, schema and the
  storage protocols), never a pipeline.

A deliberate exception is listed below with its reason; an exception that no longer occurs fails the test too, so
the lists only shrink.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from context_engine.errors import ContextEngineError

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = "context_engine"

# Edges a cycle may use, each with its reason. Only annotations: the import sits under ``if TYPE_CHECKING:``, never
# runs, so it orders no import; the cycle it closes is one of types, not of code.
CYCLE_EXCEPTIONS: dict[tuple[str, str], str] = {}

# Upward arrows kept on purpose, each with its reason.
UPWARD_EXCEPTIONS: dict[tuple[str, str], str] = {}

# Beside the layers (docs/architecture.md): used by several layers, importing none of the pipelines.
SIDE = ("settings", "providers", "observability", "redaction")
# What a side module may import besides the side modules: the bottom of the stack.
SIDE_MAY_IMPORT = ("context_engine.errors", "context_engine.schema", "context_engine.storage.protocols")


def _modules() -> dict[str, Path]:
    out = {}
    for path in (SRC / PACKAGE).rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
            (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
            or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
        ):
            for stmt in node.body:
                out.update(id(n) for n in ast.walk(stmt))
    return out


def _targets(node: ast.AST, package: str, modules: dict[str, Path]) -> list[str]:
    """The package's modules an import statement names (none for other statements and other packages)."""
    targets: list[str] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            name = alias.name
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                targets.append(name)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            origin = ".".join([*base, *([node.module] if node.module else [])])
        else:
            origin = node.module or ""
        for alias in node.names:
            if f"{origin}.{alias.name}" in modules:
                targets.append(f"{origin}.{alias.name}")
            elif origin in modules:
                targets.append(origin)
    return targets


def _imports(module: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int, bool]]:
    """``(imported module, line, type-checking only)`` for every import of ``module`` that lands in the package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    type_only = _type_checking_nodes(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        for target in _targets(node, package, modules):
            if target != module:
                yield target, getattr(node, "lineno", 0), id(node) in type_only


def import_graph() -> dict[str, dict[str, tuple[int, bool]]]:
    """module -> {imported module: (first line, type-checking only)} over ``src/context_engine``."""
    modules = _modules()
    graph: dict[str, dict[str, tuple[int, bool]]] = {m: {} for m in modules}
    for module, path in modules.items():
        for target, line, type_only in _imports(module, path, modules):
            seen = graph[module].get(target)
            # an edge is type-only when every import of it is
            graph[module][target] = (min(line, seen[0]), type_only and seen[1]) if seen else (line, type_only)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _layers_section() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    return text.split("## Layers", 1)[1].split("\n## ", 1)[0]


def _places(cell: str) -> list[str]:
    """The module prefixes a cell of the doc names: ``retrieval/`` -> ``context_engine.retrieval``,
    ``service.py`` -> ``context_engine.service``, ``interfaces/http/`` -> ``context_engine.interfaces.http``."""
    out = []
    for name in re.findall(r"`([\w/]+/|[\w/]+\.py)`", cell):
        dotted = name.removesuffix("/").removesuffix(".py").replace("/", ".")
        out.append(f"{PACKAGE}.{dotted}")
    return out


def documented_layers() -> list[tuple[str, list[str]]]:
    """``(layer, the module prefixes of its package column)`` of docs/architecture.md's table, top to bottom."""
    layers = []
    rows = _layers_section().split("|---|", 1)[1]  # below the header row
    for m in re.finditer(r"^\| (\w+) \| ([^|]+) \|", rows, flags=re.MULTILINE):
        layers.append((m.group(1), _places(m.group(2))))
    assert layers, "docs/architecture.md: no layer table under '## Layers'"
    return layers


def documented_side_modules() -> list[str]:
    """The modules the doc places beside the layers (the paragraph after the table that starts "Beside the layers")."""
    paragraph = _layers_section().split("Beside the layers", 1)[1].split("\n\n", 1)[0]
    return _places(paragraph)


def layer_of(module: str) -> str | None:
    """The layer of a module by the doc, ``"side"`` for the modules beside the layers, ``"package"`` for the
    package's ``__init__`` (the public names, imported on first use from every layer), ``None`` when the doc places
    it nowhere."""
    if module == PACKAGE:
        return "package"
    places = [(prefix, layer) for layer, prefixes in documented_layers() for prefix in prefixes]
    places += [(prefix, "side") for prefix in documented_side_modules()]
    for prefix, layer in places:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    # a package whose parts the doc names one by one (interfaces/http/, interfaces/mcp/, ...): their layer
    parents = {layer for prefix, layer in places if prefix.startswith(module + ".")}
    return parents.pop() if len(parents) == 1 else None


def test_the_graph_sees_deferred_and_type_only_imports() -> None:
    graph = import_graph()
    # a deferred import (inside build_embedder) and a type-only one are both edges
    assert "context_engine.providers.onnx_embedder" in graph["context_engine.providers.embedder"]
    assert graph["context_engine.interfaces.cli.remote"]["context_engine.client"][1] is True
    assert len(graph) > 150


def test_no_import_cycles() -> None:
    graph = import_graph()
    edges = {m: {t for t in targets if (m, t) not in CYCLE_EXCEPTIONS} for m, targets in graph.items()}
    assert _cycles(edges) == []
    for (source, target), reason in CYCLE_EXCEPTIONS.items():
        assert target in graph[source], f"exception no longer needed: {source} -> {target} ({reason})"
        assert graph[source][target][1], f"a cycle exception must be type-only: {source} -> {target}"
    # without the exceptions the cycles are exactly the ones they name
    closed = {frozenset(c) for c in _cycles({m: set(t) for m, t in graph.items()})}
    assert closed == {frozenset(pair) for pair in CYCLE_EXCEPTIONS}


def test_every_module_belongs_to_a_documented_layer() -> None:
    nowhere = [module for module in import_graph() if layer_of(module) is None]
    assert nowhere == [], f"modules docs/architecture.md ('Layers') places in no layer: {nowhere}"


def test_no_upward_imports() -> None:
    order = [layer for layer, _ in documented_layers()]
    assert order == [
        "integrations", "interfaces", "client", "eval", "api", "service", "knowledge", "retrieval", "ingest",
        "storage", "schema", "errors",
    ]  # fmt: skip
    assert sorted(documented_side_modules()) == [f"{PACKAGE}.{name}" for name in sorted(SIDE)]
    rank = {name: i for i, name in enumerate(order)}
    upward: dict[tuple[str, str], int] = {}
    for module, targets in import_graph().items():
        source = layer_of(module)
        for target, (line, _) in targets.items():
            if _upward(source, target, layer_of(target), rank):
                upward[(module, target)] = line
    unexpected = {edge: line for edge, line in upward.items() if edge not in UPWARD_EXCEPTIONS}
    assert unexpected == {}, "\n".join(f"{a} -> {b} (line {n})" for (a, b), n in sorted(unexpected.items()))
    stale = set(UPWARD_EXCEPTIONS) - set(upward)
    assert stale == set(), f"exceptions that no longer occur: {sorted(stale)}"


def _upward(source: str | None, target: str, target_layer: str | None, rank: dict[str, int]) -> bool:
    """Whether an import from a module of layer ``source`` to ``target`` goes against the doc's order."""
    if source in (None, "package"):
        return False  # the package's public names; a module the doc places nowhere fails the test above
    if source == "side":
        return target_layer != "side" and not any(
            target == allowed or target.startswith(allowed + ".") for allowed in SIDE_MAY_IMPORT
        )
    if target_layer in (None, "package"):
        return target_layer == "package"  # the package's __init__ sits above every layer
    return target_layer != "side" and rank[target_layer] < rank[source]


MAX_MODULE_LINES = 800


def test_no_module_over_800_lines() -> None:
    """Issue 28: a module a reader can hold in mind; the service facade's memory methods live in service_memory.py."""
    long = {
        str(path.relative_to(SRC)): n
        for path in sorted(SRC.rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines: {long}"


# ---- the walk of a request at run time: every call path goes down the layers ----------------------------------
def _upward_calls(run) -> list[str]:
    """Calls made while ``run()`` runs (every thread) whose callee's layer is above the layer of its nearest caller
    in a layer (docs/architecture.md's order; modules beside the layers and other packages are skipped, so a call
    through a library or a thread pool counts as the call of the package frame that led to it)."""
    import sys
    import threading
    from types import FrameType

    import context_engine

    order = [layer for layer, _ in documented_layers()]
    rank = {name: i for i, name in enumerate(order)}
    package_dir = str(Path(context_engine.__file__).resolve().parent)  # the package that runs, wherever it is
    layers: dict[str, str | None] = {}
    seen = [0]

    def layer_at(frame: FrameType) -> str | None:
        filename = frame.f_code.co_filename
        if filename not in layers:
            layer = None
            if filename.startswith(package_dir):
                rel = Path(filename[len(package_dir) + 1 :]).with_suffix("")
                parts = [PACKAGE, *rel.parts]
                module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                layer = layer_of(module)
            layers[filename] = layer if layer in rank else None
        return layers[filename]

    found: list[str] = []
    lock = threading.Lock()

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event != "call":
            return
        callee = layer_at(frame)
        if callee is None:
            return
        seen[0] += 1
        caller_frame = frame.f_back
        while caller_frame is not None and layer_at(caller_frame) is None:
            caller_frame = caller_frame.f_back
        caller = layer_at(caller_frame) if caller_frame is not None else None
        if caller is not None and rank[callee] < rank[caller]:
            with lock:
                found.append(f"{caller} {caller_frame.f_code.co_qualname} -> {callee} {frame.f_code.co_qualname}")

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert seen[0] > 0, f"no call of the package under {package_dir} was seen"
    return found


def test_a_request_never_calls_a_layer_above_the_one_it_is_in(make_engine) -> None:
    """Issue 28: the walk of a read request enters each layer once on the way down: no call, at run time, from a layer
    to one above it (a callback, or the search pipeline writing its audit row through the knowledge layer, as it did
    before the service took that over). The requests run under the profiler from the engine's first search on, so the
    worker threads they start (the level-0 pool, the audit writer) are profiled too (``threading.setprofile`` reaches
    only threads started after it). ``bench/code_walk.py`` prints the same figures for one search. Writes are not
    walked here: the hint index is a listener of the write pipeline (docs/architecture.md)."""
    from context_engine.schema.context import RequestContext
    from context_engine.schema.query import SearchMemoryRequest

    engine = make_engine()
    admin = RequestContext(account_id="default", role="admin")
    alice = RequestContext(account_id="default", role="user", user_space="alice", agent_space="helper")
    runbook = "ctx://resources/runbooks/crashloop.md"
    engine.add_text("# CrashLoopBackOff\n\nCheck the logs, then restart the pod.\n", runbook, admin)
    engine.add_memory("I restart crash looping pods with kubectl rollout restart.", alice, category="profile")
    said = [{"role": "user", "content": "I moved to Lisbon."}, {"role": "assistant", "content": "Noted!"}]
    engine.add_messages(said, "chat", alice)
    requests = [
        SearchMemoryRequest(query="Pod is crash looping", top_k=5),
        SearchMemoryRequest(query="runbook for a crash looping pod", top_k=5, target_uri="ctx://resources/runbooks/"),
        SearchMemoryRequest(query="Where does Alice live?", top_k=5),
    ]
    refused = [
        SearchMemoryRequest(query="x", top_k=5, target_uri="ctx://user/bob/"),  # RET-4031 in the pipeline
        SearchMemoryRequest(query="x", top_k=5, user_space="bob"),  # RET-4031 before it (RequestContext.for_user)
    ]

    def reads() -> None:
        for request in requests * 2:  # the first round loads the indexes and starts the worker threads
            engine.search_memory(request, alice)
        for request in refused:  # a refused request is audited on the way out, as an answered one
            with pytest.raises(ContextEngineError):
                engine.search_memory(request, alice)
        engine.read_memory(runbook, alice)
        engine.lookup_knowledge("pod crash looping", admin, session_id="s1")
        # the rows are written off the request thread; reading them waits for that writer (profiled: started above)
        rows = engine.list_invocations(alice, tool_name="search_memory")
        assert [row.success for row in rows] == [False, False] + [True] * 6  # newest first

    assert _upward_calls(reads) == []
