#!/usr/bin/env bash
# The main job on the embedded default: ingest the prometheus-operator runbooks (or, where ../shared is absent, the
# bundled sample corpus) into a local data directory and answer a few queries.
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
export CE_HOME=${CE_HOME:-$(pwd)/.context-engine}
DATA=../shared/data/runbooks/prometheus-operator
TARGET=ctx://resources/runbooks/prometheus-operator/
if [ ! -d "$DATA" ]; then
  DATA=src/context_engine/sample_corpus
  TARGET=ctx://resources/sample/
  echo "../shared/data not found: using the bundled sample corpus"
fi
# Every step runs in one process on one engine (`batch`: the model loads once). English and Chinese questions (the
# default model is multilingual: a Chinese question finds English runbooks); each search is printed under a
# "search: <question>" header.
context-engine batch - <<STEPS
add "$DATA" "$TARGET"
tree ctx://resources/ --depth 3
echo
search --queries scripts/main_job_queries.txt --top-k 3
echo
echo "lookup: etcd 集群没有主节点，怎么处理"
lookup "etcd 集群没有主节点，怎么处理" --session main-job --top-k 3 --budget 400
STEPS
