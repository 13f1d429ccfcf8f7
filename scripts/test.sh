#!/usr/bin/env bash
# The test suite (unit, conformance, integration on the real model and stores). Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
python -m pytest "$@"
