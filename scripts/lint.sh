#!/usr/bin/env bash
# The CI gate before the tests (.ci/run): ruff (the rule set of pyproject.toml [tool.ruff.lint]) over the repository
# and mypy over src/ (pyproject.toml [tool.mypy]: strict on schema/, the storage protocols and retrieval/). Both must
# report nothing; both run even when the first fails, so one run shows every finding. Fixes never go through
# `ruff format`; `ruff check --fix` applies the safe fixes of the rules.
set -uo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
rc=0
echo "ruff $(ruff --version | cut -d' ' -f2): ruff check ."
ruff check --no-cache . || rc=1
echo "mypy $(mypy --version | cut -d' ' -f2): mypy (src/)"
mypy || rc=1
exit $rc
