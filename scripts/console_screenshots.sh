#!/usr/bin/env bash
# Regenerate the screenshots of docs/console.md (docs/img/console/*.png) from the console's browser tests.
# Needs Debian's chromium (apt-get install -y chromium) and the test extra (playwright); runs about two minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
CE_CONSOLE_SCREENSHOTS="$out" python -m pytest tests/console/test_browser.py -q -p no:randomly "$@"
mkdir -p docs/img/console
for name in login browse-expanded node search-flow lookup-flow session memories memory-events eval-report eval-compare write-confirm; do
  cp "$out/$name.png" docs/img/console/
done
ls -l docs/img/console
