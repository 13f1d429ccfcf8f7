#!/usr/bin/env bash
# The CI gate before the tests (.ci/run): ruff (the rule set of pyproject.toml [tool.ruff.lint]) over the repository
# and mypy over src/ (pyproject.toml [tool.mypy]: strict on schema/, the storage protocols and retrieval/). Both must
# report nothing. Fixes never go through `ruff format`; `ruff check --fix` applies the safe fixes of the rules.
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
echo "ruff $(ruff --version | cut -d' ' -f2): ruff check ."
ruff check --no-cache .
echo "mypy $(mypy --version | cut -d' ' -f2): mypy (src/)"
mypy
