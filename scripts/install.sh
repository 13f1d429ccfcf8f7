#!/usr/bin/env bash
# Set up .venv on a fresh machine (Python 3.11 + pip + the package registries). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
# torch first, pinned: an unpinned torch would pull a multi-GB CUDA build (DESIGN §14).
python -m pip install --quiet torch==2.13.0
python -m pip install --quiet -c constraints.txt -e ".[test]"
python -m pip check
echo "installed into $(pwd)/.venv"
