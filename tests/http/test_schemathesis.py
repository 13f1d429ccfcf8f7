"""Property-based testing of the OpenAPI schema with schemathesis against a real uvicorn server: no 5xx, and every
response conforms to its documented schema (errors to the envelope). Bounded for CI: ``CE_SCHEMATHESIS_EXAMPLES``
examples per operation (default 10)."""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from context_engine.interfaces.http import create_app
from context_engine.settings import load_settings
from tests.http.helpers import LiveServer

MAX_EXAMPLES = int(os.environ.get("CE_SCHEMATHESIS_EXAMPLES", "10"))

# The schema is what the app publishes (building the app opens nothing: the engine opens in the lifespan).
schema = schemathesis.openapi.from_dict(create_app(load_settings("/nonexistent-ce-home")).openapi())


@pytest.fixture(scope="module")
def live(service, tenants):
    with LiveServer(create_app(service=service)) as server:
        yield server


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_server_errors(case, live, tenants):
    case.call_and_validate(
        base_url=live.url,
        headers=dict(tenants.admin),
        checks=[not_a_server_error, response_schema_conformance],
        timeout=60,
    )
