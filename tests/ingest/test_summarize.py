"""Tests for the extractive L0/L1 summarizer (DESIGN.md §1, §4)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_engine.ingest.parse import MarkdownParser, ParsedDocument, parse_plain
from context_engine.ingest.summarize import (
    ChildSummary,
    ExtractiveSummarizer,
    Summarizer,
    Summary,
    truncate_text,
)
from context_engine.settings import IngestSettings

RUNBOOKS = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "runbooks"
SETTINGS = IngestSettings()
PARSER = MarkdownParser()
SUMMARIZER = ExtractiveSummarizer(SETTINGS)


def parse(text: str, title: str = "stem") -> ParsedDocument:
    return PARSER.parse(text, fallback_title=title)


def test_extractive_summarizer_satisfies_the_protocol() -> None:
    summarizer: Summarizer = SUMMARIZER
    assert isinstance(summarizer.summarize_document(parse("# T\n\nBody.")), Summary)


# -- truncation ----------------------------------------------------------------------------------------------------


def test_truncate_text_prefers_sentences_then_words() -> None:
    assert truncate_text("Short.", 10) == "Short."
    assert truncate_text("First sentence is here. Second sentence is longer.", 30) == "First sentence is here."
    cut = truncate_text("alpha beta gamma delta epsilon", 17)
    assert cut == "alpha beta gamma…" and len(cut) <= 17
    cut = truncate_text("一二三四五六七八九十一二三四五六七八九十", 8)
    assert cut == "一二三四五六七…"


# -- documents -------------------------------------------------------------------------------------------------------

RUNBOOK = """\
---
title: Queue Stalled Pretty
owner: team-a
---

# QueueStalled

## Meaning

The **worker queue** has not moved for `10m`, see [the dashboard](https://grafana.example/d/q). Jobs pile up.

## Impact

Jobs are delayed.

## Diagnosis

```sh
kubectl -n jobs logs deploy/worker
```

Check the worker logs first. Then check the broker.

### Broker

- Is the broker reachable?
- Are there consumers?

## Mitigation

Restart the worker deployment.
"""


def test_document_l0_is_title_and_lead_without_markdown() -> None:
    summary = SUMMARIZER.summarize_document(parse(RUNBOOK))
    assert summary.abstract == "QueueStalled: The worker queue has not moved for 10m, see the dashboard. Jobs pile up."


def test_document_l1_is_an_indented_outline_with_first_sentences() -> None:
    summary = SUMMARIZER.summarize_document(parse(RUNBOOK))
    assert summary.overview == (
        "QueueStalled\n"
        "- Meaning: The worker queue has not moved for 10m, see the dashboard.\n"
        "- Impact: Jobs are delayed.\n"
        "- Diagnosis: Check the worker logs first.\n"
        "  - Broker: Is the broker reachable?\n"
        "- Mitigation: Restart the worker deployment."
    )
    assert "owner" not in summary.overview and "kubectl" not in summary.overview


def test_lead_skips_headings_code_tables_and_front_matter() -> None:
    doc = parse("---\ntitle: X\n---\n# Tool\n\n```\nrun --fast\n```\n\n| a |\n|---|\n| 1 |\n\nIt *speeds up* builds.\n")
    assert SUMMARIZER.summarize_document(doc).abstract == "Tool: It speeds up builds."


def test_lead_that_starts_with_the_title_is_not_repeated() -> None:
    doc = parse("# DiskFull\n\nDiskFull fires when a volume is above 95% usage.\n")
    assert SUMMARIZER.summarize_document(doc).abstract == "DiskFull fires when a volume is above 95% usage."


def test_chinese_document_summary() -> None:
    doc = parse(
        "# 磁盘告警\n\n## 含义\n\n节点的**磁盘**使用率超过阈值。可能导致写入失败。\n\n"
        "## 处理\n\n清理 `/var/log` 目录。然后重启。"
    )
    summary = SUMMARIZER.summarize_document(doc)
    assert summary.abstract == "磁盘告警：节点的磁盘使用率超过阈值。可能导致写入失败。"
    assert summary.overview == "磁盘告警\n- 含义：节点的磁盘使用率超过阈值。\n- 处理：清理 /var/log 目录。"


def test_limits_hold_for_long_documents() -> None:
    long_lead = " ".join(f"word{k}" for k in range(200)) + "."
    sections = "\n\n".join(f"## Section {k}\n\nSection {k} explains one thing in detail. More." for k in range(300))
    doc = parse(f"# Big\n\n## Meaning\n\n{long_lead}\n\n{sections}\n")
    summary = SUMMARIZER.summarize_document(doc)
    assert len(summary.abstract) <= 256 and summary.abstract.endswith("…")
    assert summary.abstract.startswith("Big: word0 word1")
    assert summary.abstract[:-1].split()[-1].startswith("word")  # cut between words
    assert len(summary.overview) <= 4000 and summary.overview.endswith("\n…")
    small = ExtractiveSummarizer(IngestSettings(l0_max_chars=40, l1_max_chars=300))
    summary = small.summarize_document(doc)
    assert len(summary.abstract) <= 40 and len(summary.overview) <= 300


def test_empty_body_document() -> None:
    summary = SUMMARIZER.summarize_document(parse("# Only Title\n\n## Nothing Here\n"))
    assert summary.abstract == "Only Title"
    assert summary.overview == "Only Title\n- Nothing Here"
    summary = SUMMARIZER.summarize_document(parse("", "empty-file"))
    assert summary == Summary("empty-file", "empty-file")


def test_plain_text_document_summary() -> None:
    doc = parse_plain("The cache warms at boot. It takes a minute.\n\nEvictions follow LRU order.\n", "cache-notes")
    summary = SUMMARIZER.summarize_document(doc)
    assert summary.abstract == "cache-notes: The cache warms at boot. It takes a minute."
    assert summary.overview == "cache-notes\n- The cache warms at boot.\n- Evictions follow LRU order."


# -- directories -------------------------------------------------------------------------------------------------


def test_directory_summary_in_english() -> None:
    children = [
        ChildSummary("b.md", "Beta", "Beta: handles retries.", False),
        ChildSummary("a.md", "Alpha", "Alpha: starts the service.", False),
        ChildSummary("sub", "sub", "Directory sub: 2 items: X, Y.", True),
    ]
    summary = SUMMARIZER.summarize_directory("svc", children)
    assert summary.abstract == "Directory svc: 3 items: Alpha, Beta, sub/."
    assert summary.overview == (
        "Directory svc (3 items)\n"
        "- a.md: Alpha: starts the service.\n"
        "- b.md: Beta: handles retries.\n"
        "- sub/: Directory sub: 2 items: X, Y."
    )
    assert SUMMARIZER.summarize_directory("svc", list(reversed(children))) == summary  # order-independent


def test_directory_summary_in_chinese_when_children_are_mostly_chinese() -> None:
    children = [
        ChildSummary("DiskFull.md", "DiskFull", "DiskFull：磁盘空间不足。", False),
        ChildSummary("NodeDown.md", "NodeDown", "NodeDown：节点不可达。", False),
        ChildSummary("readme.md", "Readme", "Readme: an English note.", False),
    ]
    summary = SUMMARIZER.summarize_directory("kubernetes", children)
    assert summary.abstract == "目录 kubernetes：包含 3 项：DiskFull、NodeDown、Readme。"
    assert summary.overview == (
        "目录 kubernetes（共 3 项）\n"
        "- DiskFull.md：磁盘空间不足。\n"
        "- NodeDown.md：节点不可达。\n"
        "- readme.md：an English note."
    )


def test_directory_limits_and_empty_directory() -> None:
    children = [
        ChildSummary(f"doc{k:03}.md", f"Document {k}", f"Document {k}: " + "text " * 60, False) for k in range(200)
    ]
    summary = SUMMARIZER.summarize_directory("many", children)
    assert len(summary.abstract) <= 256 and summary.abstract.endswith("more.")
    assert summary.abstract.startswith("Directory many: 200 items: Document 0, Document 1,")
    assert len(summary.overview) <= 4000
    assert summary.overview.splitlines()[-1].startswith("… and ") and summary.overview.endswith(" more")
    assert SUMMARIZER.summarize_directory("void", []) == Summary("Directory void: empty.", "Directory void (0 items)")


# -- real runbooks -----------------------------------------------------------------------------------------------


def _files(name: str) -> list[Path]:
    root = RUNBOOKS / name
    if not root.is_dir():
        pytest.skip(f"runbook corpus not found at {root.resolve()} (shared data not mounted)")
    return sorted(root.rglob("*.md"))


def test_real_prometheus_operator_abstract() -> None:
    path = next(p for p in _files("prometheus-operator") if p.stem == "KubePodCrashLooping")
    summary = SUMMARIZER.summarize_document(PARSER.parse(path.read_text(encoding="utf-8"), fallback_title=path.stem))
    assert summary.abstract == (
        "KubePodCrashLooping: Pod is in CrashLoop which means the app dies or is unresponsive and kubernetes tries to"
        " restart it automatically."
    )
    assert summary.overview.splitlines()[:2] == ["KubePodCrashLooping", f"- Meaning: {summary.abstract[21:]}"]


def test_real_runbooks_summaries_within_limits(capsys: pytest.CaptureFixture[str]) -> None:
    files = [p for name in ("prometheus-operator", "openshift", "kubesphere-zh") for p in _files(name)]
    assert len(files) == 429
    started = time.perf_counter()
    for path in files:
        doc = PARSER.parse(path.read_text(encoding="utf-8"), fallback_title=path.stem)
        summary = SUMMARIZER.summarize_document(doc)
        assert 0 < len(summary.abstract) <= 256 and len(summary.abstract) > len(doc.title), path
        assert 0 < len(summary.overview) <= 4000, path
        assert "](" not in summary.abstract and "`" not in summary.abstract and "**" not in summary.abstract
    elapsed = time.perf_counter() - started
    with capsys.disabled():
        print(f"\n[runbooks] parse+summarize {len(files)} files: {elapsed * 1000:.0f} ms")


def test_real_chinese_directory_summary() -> None:
    files = _files("kubesphere-zh")
    children = []
    for path in files:
        doc = PARSER.parse(path.read_text(encoding="utf-8"), fallback_title=path.stem)
        assert doc.language == "zh"
        summary = SUMMARIZER.summarize_document(doc)
        assert "：" in summary.abstract
        children.append(ChildSummary(path.name, doc.title, summary.abstract, False))
    summary = SUMMARIZER.summarize_directory("kubernetes", children)
    assert summary.abstract.startswith("目录 kubernetes：包含 49 项：CPUThrottlingHigh、")
    assert len(summary.abstract) <= 256 and len(summary.overview) <= 4000
    assert summary.overview.count("\n- ") == 49  # every child listed, lines shortened to share the budget


_CHILD = st.builds(
    ChildSummary, st.text(min_size=1, max_size=20), st.text(max_size=30), st.text(max_size=300), st.booleans()
)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.lists(_CHILD, max_size=60), st.sampled_from([32, 256]), st.sampled_from([256, 4000]))
def test_directory_summary_limits_and_order_independence(
    name: str, children: list[ChildSummary], l0: int, l1: int
) -> None:
    summarizer = ExtractiveSummarizer(IngestSettings(l0_max_chars=l0, l1_max_chars=l1))
    summary = summarizer.summarize_directory(name, children)
    assert len(summary.abstract) <= l0 and len(summary.overview) <= l1
    assert summarizer.summarize_directory(name, list(reversed(children))) == summary
