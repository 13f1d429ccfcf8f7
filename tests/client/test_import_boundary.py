"""What importing the client and calling one route loads (issue 29: ``context-engine --url search`` starts in under
half a second): no numpy and no model until a route is called, then only the models of that route. Each check runs
in a fresh interpreter and reads its ``sys.modules``."""

from __future__ import annotations

import json
import subprocess
import sys

from pydantic import BaseModel

from context_engine.client.endpoints import ENDPOINTS

#: Modules of models that ``search_memory`` does not need (the other routes' models), and numpy.
NOT_FOR_SEARCH = (
    "numpy",
    "context_engine.client.params",
    "context_engine.api.models",
    "context_engine.schema.compact",
    "context_engine.schema.knowledge",
    "context_engine.schema.memory",
    "context_engine.schema.memory_events",
    "context_engine.schema.nodes",
    "context_engine.schema.vector_record",
)


def loaded(code: str, names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` are in ``sys.modules`` after ``code`` ran in a new interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([n for n in {names!r} if n in sys.modules]))\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_cli_and_the_client_builds_no_model() -> None:
    code = "import context_engine.interfaces.cli.app, context_engine.client"
    assert loaded(code, (*NOT_FOR_SEARCH, "context_engine.schema.query")) == []


def test_a_search_imports_the_models_of_its_route_only() -> None:
    code = (
        "import httpx\n"
        "from context_engine.client import Client\n"
        "answer = {'request_id': 'r1', 'typed_queries': [], 'seed_hits': [], 'hits': [], 'next_actions': {},\n"
        "          'trace': {}, 'match_quality': 'none'}\n"
        "transport = httpx.MockTransport(lambda request: httpx.Response(200, json=answer))\n"
        "with Client('http://ce.test', 'ce_k_s', transport=transport) as client:\n"
        "    assert client.search_memory('disk full', top_k=3).request_id == 'r1'\n"
    )
    assert loaded(code, (*NOT_FOR_SEARCH, "context_engine.schema.query")) == ["context_engine.schema.query"]


def test_every_model_the_table_names_resolves() -> None:
    for name, endpoint in ENDPOINTS.items():
        models = [(endpoint.response_model, endpoint.response), (endpoint.request_model, endpoint.request)]
        for wanted, model in models:
            if wanted is not None:
                assert isinstance(model, type) and issubclass(model, BaseModel), name
                assert model.__name__ == wanted, name
