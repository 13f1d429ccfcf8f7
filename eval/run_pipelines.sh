#!/usr/bin/env bash
# lookup_knowledge and search_memory through the engine (corpus ingested through the write path), hybrid off and on,
# on the held-out side: the runbook sets' test halves (the fusion weights were tuned on their dev halves), the
# Chinese->English golden set and CMRC dev (never tuned on). Reports: eval/reports/pipelines/<set>-<backend>-off|on/.
#
#   bash eval/run_pipelines.sh [BACKEND ...]      # default: use-multilingual sentence-transformers
#   UPDATE_BASELINES=1 bash eval/run_pipelines.sh  # record the results as eval/baselines/<set>.json entries
#   HYBRID=on bash eval/run_pipelines.sh            # one side only
#
# Each result is keyed in the baseline files by (method, model, variant hybrid-off|hybrid-on).
# Ingested corpora are cached under ${EVAL_CACHE:-bench/.cache}/pipelines (one engine home per model).
set -uo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data}
CACHE=${EVAL_CACHE:-bench/.cache}
BACKENDS=("$@")
[ ${#BACKENDS[@]} -eq 0 ] && BACKENDS=(use-multilingual sentence-transformers)
status=0
run() {  # name, then the dataset options
  local name=$1; shift
  for b in "${BACKENDS[@]}"; do
    for h in ${HYBRID:-off on}; do
      context-engine eval "$@" --method lookup_knowledge --method search_memory --embedder "$b" --hybrid "$h" \
        --variant "hybrid-$h" --cache-dir "$CACHE" --out "eval/reports/pipelines/$name-$b-$h" \
        ${UPDATE_BASELINES:+--update-baselines} || status=1
    done
  done
}
run po108-test --dataset "$DATA/runbooks" --split prometheus-operator --half test
run po+os380-test --dataset "$DATA/runbooks" --split prometheus-operator+openshift --half test
run kubesphere-zh-test --dataset "$DATA/runbooks" --split kubesphere-zh --half test
run zh-en --dataset eval/golden/runbooks-zh-en.json
run cmrc-dev --dataset "$DATA/cmrc2018_zh" --split dev
exit $status
