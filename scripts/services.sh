#!/usr/bin/env bash
# The scale-out services the tests use (issue 13; docs/deployment.md), from packages only, on 127.0.0.1:
#   bash scripts/services.sh up [NAME...]    start them (default: every scripts/services/*.sh), write .services/env
#   bash scripts/services.sh down [NAME...]  stop them (always safe to call)
#   bash scripts/services.sh status
# Each scripts/services/NAME.sh takes up|down|status, keeps its state under .services/NAME/ and, once up, writes the
# variables the tests read (CE_TEST_*) as `export` lines to .services/NAME.env. Tests that need a service skip with a
# reason when its variable is absent (tests/services.py reads the environment, then .services/*.env).
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-status}; shift || true
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in scripts/services/*.sh; do names+=("$(basename "$f" .sh)"); done
fi
mkdir -p .services
case "$cmd" in
  up)
    for n in "${names[@]}"; do bash "scripts/services/$n.sh" up; done
    cat .services/*.env > .services/env 2>/dev/null || true
    echo "services up: ${names[*]} (variables in .services/env)"
    ;;
  down)
    rc=0
    for n in "${names[@]}"; do bash "scripts/services/$n.sh" down || rc=1; rm -f ".services/$n.env"; done
    cat .services/*.env > .services/env 2>/dev/null || rm -f .services/env
    exit $rc
    ;;
  status)
    for n in "${names[@]}"; do bash "scripts/services/$n.sh" status || true; done
    ;;
  *) echo "usage: $0 up|down|status [NAME...]" >&2; exit 2 ;;
esac
