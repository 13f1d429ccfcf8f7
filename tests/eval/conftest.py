"""A tiny BEIR dataset written into a temporary folder (English and Chinese), for harness tests without real data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CORPUS = [
    {"_id": "d1", "title": "Pod crash looping", "text": "The pod restarts repeatedly because the container exits."},
    {"_id": "d2", "title": "Node not ready", "text": "The kubelet stopped posting status; the node is not ready."},
    {"_id": "d3", "title": "Disk almost full", "text": "The volume is almost full; free space or expand it."},
    {"_id": "d4", "title": "证书即将过期", "text": "TLS 证书将在七天内过期，请及时续期。"},
    {"_id": "d5", "title": "Etcd leader changes", "text": "The etcd cluster elects a new leader too often."},
]
QUERIES = [
    {"_id": "q1", "text": "why does my pod keep restarting"},
    {"_id": "q2", "text": "node status not ready"},
    {"_id": "q3", "text": "证书过期怎么办"},
    {"_id": "q4", "text": "zzzz qqqq"},  # matches nothing: scores 0
]
QRELS = [("q1", "d1", 1), ("q2", "d2", 1), ("q3", "d4", 2), ("q4", "d5", 1)]


@pytest.fixture
def tiny_beir(tmp_path: Path) -> Path:
    root = tmp_path / "tiny"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in CORPUS), "utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in QUERIES), "utf-8")
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in QRELS), "utf-8"
    )
    return root
