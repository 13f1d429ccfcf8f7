"""Tests for markdown parsing, chunking and breadcrumbs (DESIGN.md §4)."""

from __future__ import annotations

import statistics
import time
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_engine.ingest.parse import (
    ATOMIC_KINDS,
    BREADCRUMB_SEPARATOR,
    MarkdownChunker,
    MarkdownParser,
    ParsedDocument,
    detect_language,
    embedding_input,
    estimate_tokens,
    format_breadcrumb,
    parse_plain,
    split_breadcrumb,
    split_sentences,
)
from context_engine.schema.nodes import Chunk
from context_engine.settings import IngestSettings

RUNBOOKS = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "runbooks"
CORPORA = {"prometheus-operator": 108, "openshift": 272, "kubesphere-zh": 49}

PARSER = MarkdownParser()
SMALL = IngestSettings(chunk_max_tokens=64, chunk_overlap_tokens=16)


def parse(text: str, title: str = "stem") -> ParsedDocument:
    return PARSER.parse(text, fallback_title=title)


def chunk(doc: ParsedDocument, settings: IngestSettings = SMALL) -> list[Chunk]:
    return MarkdownChunker(settings).chunk(doc, doc_id="doc-1", category="ops", source="inline.md")


# -- token estimate and language ---------------------------------------------------------------------------------


def test_estimate_tokens_counts_words_cjk_and_punctuation() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("   \n\t") == 0
    assert estimate_tokens("alpha beta") == 3  # 2 words x 1.3, rounded up
    assert estimate_tokens("alpha, beta.") == 5  # + 2 punctuation marks
    assert estimate_tokens("磁盘已满") == 4  # one per ideograph
    assert estimate_tokens("磁盘已满。") == 5
    assert estimate_tokens("重启 nginx 服务") == 4 + 2


def test_estimate_tokens_is_subadditive_over_whitespace_cuts() -> None:
    text = "One two three. Four five six! 七八九。 ten"
    pieces = ["One two three. ", "Four five six! ", "七八九。 ", "ten"]
    assert "".join(pieces) == text
    assert sum(estimate_tokens(p) for p in pieces) >= estimate_tokens(text)


def test_detect_language() -> None:
    assert detect_language("The disk is almost full.") == "en"
    assert detect_language("节点磁盘空间即将耗尽，请检查 kubelet 日志。") == "zh"
    assert detect_language("Restart the pod named 测试 in the staging cluster.") == "en"
    assert detect_language("") == "en"


def test_split_sentences_english_and_chinese() -> None:
    text = "The queue is full. Workers stall, e.g. the indexer. Why? Check v1.2 first!"
    expected = ["The queue is full.", "Workers stall, e.g. the indexer.", "Why?", "Check v1.2 first!"]
    assert split_sentences(text) == expected
    zh = ["队列已满。", "工作进程停滞！", "为什么？", "检查配置"]
    assert split_sentences("".join(zh)) == zh
    assert split_sentences("first item\nsecond item") == ["first item", "second item"]


# -- parsing -----------------------------------------------------------------------------------------------------

TREE = """\
# Billing Service

Intro paragraph about billing.

## Alerts

Alerts paragraph with `code` and a [link](http://example.com/x).

### Queue Backlog

Backlog text.

#### Deep

Deep text.

## Recovery

Recovery text.
"""


def test_headings_become_paths_and_levels() -> None:
    doc = parse(TREE)
    assert doc.title == "Billing Service"
    assert [(s.path, s.level) for s in doc.sections] == [
        (("Billing Service",), 1),
        (("Billing Service", "Alerts"), 2),
        (("Billing Service", "Alerts", "Queue Backlog"), 3),
        (("Billing Service", "Alerts", "Queue Backlog", "Deep"), 4),
        (("Billing Service", "Recovery"), 2),
    ]
    assert doc.sections[1].heading_lines[-1] == "## Alerts"
    assert doc.sections[1].blocks[0].plain == "Alerts paragraph with code and a link."
    assert doc.sections[1].blocks[0].text == "Alerts paragraph with `code` and a [link](http://example.com/x)."


def test_paths_without_h1_are_rooted_at_title_and_skipped_levels_nest() -> None:
    doc = parse("Preamble words.\n\n## Setup\n\ntext\n\n#### Detail\n\nmore\n\n## `run` *now*\n\ngo\n", "guide")
    assert doc.title == "guide"
    assert [s.path for s in doc.sections] == [
        ("guide",),
        ("guide", "Setup"),
        ("guide", "Setup", "Detail"),
        ("guide", "run now"),
    ]
    assert doc.sections[0].level == 0
    assert doc.sections[3].heading_lines == ("# guide", "## `run` *now*")


def test_blocks_keep_markdown_verbatim() -> None:
    text = (
        "# T\n\n"
        "- one\n  continued\n- two\n\n"
        "```sh\nkubectl get pods   # keep spacing\n\n  indented\n```\n\n"
        "    indented code\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "> quoted *text*\n\n"
        "<div>raw</div>\n\n"
        "See [the docs][ref].\n\n"
        "[ref]: https://example.com/docs\n"
    )
    doc = parse(text)
    blocks = doc.sections[0].blocks
    assert [b.kind for b in blocks] == ["list", "code", "code", "table", "blockquote", "html", "paragraph", "other"]
    assert blocks[0].text == "- one\n  continued\n- two"
    assert blocks[0].plain == "one continued\ntwo"
    assert blocks[1].text == "```sh\nkubectl get pods   # keep spacing\n\n  indented\n```"
    assert blocks[2].text == "    indented code"
    assert blocks[3].plain == "a | b\n1 | 2"
    assert blocks[7].text == "[ref]: https://example.com/docs"  # no token, but not lost
    assert blocks[6].plain == "See the docs."


def test_hugo_shortcode_links_become_text() -> None:
    link = '[RAID Degraded]({{< ref "./RaidDegraded.md" >}})'
    doc = parse(f"# RaidFailure\n\nSee {link} and {{{{< hint >}}}}this{{{{< /hint >}}}}.\n")
    assert doc.lead == "See RAID Degraded and this."


def test_front_matter_is_stripped_and_used_as_title_fallback() -> None:
    doc = parse("---\ntitle: Disk Pressure\nweight: 3\n---\n\nThe node is short of disk.\n", "disk-pressure")
    assert doc.title == "Disk Pressure"
    assert doc.front_matter == {"title": "Disk Pressure", "weight": 3}
    assert all("weight" not in b.text for b in doc.blocks)
    chunks = chunk(doc)
    assert [c.breadcrumb for c in chunks] == [["Disk Pressure"]]
    assert chunks[0].text == "The node is short of disk."


def test_h1_wins_over_front_matter_title_and_bom_crlf_are_handled() -> None:
    doc = parse("\ufeff---\r\ntitle: Pretty Name\r\n---\r\n# RawName\r\n\r\nBody.\r\n")
    assert doc.title == "RawName"
    assert doc.front_matter["title"] == "Pretty Name"
    assert doc.sections[0].blocks[0].text == "Body."


def test_broken_front_matter_is_tolerated_with_a_warning() -> None:
    doc = parse("---\ntitle: [unclosed\n---\n\nBody text.\n", "fallback")
    assert doc.front_matter == {}
    assert doc.title == "fallback"
    assert doc.warnings and "front matter" in doc.warnings[0]
    doc = parse("---\n- just\n- a list\n---\n\nBody.\n", "fallback")
    assert doc.front_matter == {} and doc.warnings


def test_lead_skips_code_tables_and_prefers_meaning_section() -> None:
    doc = parse("# T\n\n```\ncode first\n```\n\n| a |\n|---|\n| b |\n\nFirst prose sentence here. Second one.\n")
    assert doc.lead.startswith("First prose sentence here.")
    doc = parse("# Alert\n\nSee [other](x.md).\n\n## Meaning\n\nThe *queue* is `stuck`. More.\n\n## Impact\n\nBad.\n")
    assert doc.lead == "The queue is stuck. More."


def test_plain_text_documents() -> None:
    doc = parse_plain("First paragraph line one\nline two.\n\n\nSecond paragraph.\n", "notes")
    assert doc.title == "notes"
    assert [b.text for b in doc.blocks] == ["First paragraph line one\nline two.", "Second paragraph."]
    assert doc.lead == "First paragraph line one line two."
    chunks = chunk(doc)
    assert chunks and all(c.breadcrumb == ["notes"] for c in chunks)
    assert parse_plain("  \n\n", "blank").is_empty


def test_cjk_document() -> None:
    text = "# 磁盘告警\n\n## 含义\n\n节点的磁盘使用率超过阈值。可能导致写入失败。\n\n## 处理\n\n清理日志目录。"
    doc = parse(text)
    assert doc.title == "磁盘告警"
    assert doc.language == "zh"
    assert doc.lead == "节点的磁盘使用率超过阈值。可能导致写入失败。"
    assert estimate_tokens("节点的磁盘使用率超过阈值。") == 13


def test_empty_body_document() -> None:
    doc = parse("# Only A Title\n\n## Empty Section\n")
    assert doc.is_empty
    assert doc.lead == ""
    assert [s.path for s in doc.sections] == [("Only A Title",), ("Only A Title", "Empty Section")]
    assert chunk(doc) == []
    assert chunk(parse("")) == []


# -- chunking ----------------------------------------------------------------------------------------------------

LONG_WORDS = " ".join(f"w{k}" for k in range(120))


def test_sections_become_chunks_with_breadcrumbs_and_no_heading_line() -> None:
    text = (
        f"# Svc\n\n## Alpha\n\n{LONG_WORDS[:150]}\n\n### Beta\n\n{LONG_WORDS[:160]}\n\n## Gamma\n\n{LONG_WORDS[:140]}\n"
    )
    chunks = chunk(parse(text))
    assert [c.breadcrumb for c in chunks] == [["Svc", "Alpha"], ["Svc", "Alpha", "Beta"], ["Svc", "Gamma"]]
    assert [c.chunk_index for c in chunks] == [0, 1, 2]
    assert {c.total_chunks for c in chunks} == {3}
    assert all(not c.text.startswith("#") for c in chunks)
    assert all(c.doc_id == "doc-1" and c.category == "ops" and c.source == "inline.md" for c in chunks)
    assert all(c.token_estimate == estimate_tokens(c.text) for c in chunks)


def test_document_without_headings_gets_title_breadcrumb() -> None:
    chunks = chunk(parse("Just a paragraph.\n\nAnother one.\n", "loose-notes"))
    assert [c.breadcrumb for c in chunks] == [["loose-notes"]]
    assert chunks[0].text == "Just a paragraph.\n\nAnother one."


def test_code_block_and_table_are_kept_whole_even_over_the_cap() -> None:
    code = "```python\n" + "\n".join(f"value_{k} = compute({k}, flag=True)" for k in range(40)) + "\n```"
    table = "| key | value |\n|---|---|\n" + "\n".join(f"| k{k} | v{k} |" for k in range(40))
    text = f"# Ref\n\n## Code\n\nBefore the code.\n\n{code}\n\nAfter the code.\n\n## Table\n\n{table}\n"
    chunks = chunk(parse(text))
    assert estimate_tokens(code) > SMALL.chunk_max_tokens and estimate_tokens(table) > SMALL.chunk_max_tokens
    texts = [c.text for c in chunks]
    assert code in texts and table in texts
    assert texts.count(code) == 1
    for c in chunks:
        assert c.token_estimate <= SMALL.chunk_max_tokens or c.text in (code, table)
    assert any("Before the code." in t for t in texts) and any("After the code." in t for t in texts)


def test_over_long_paragraph_is_split_on_sentences_with_overlap() -> None:
    sentences = [f"Sentence number {k} talks about replica {k}." for k in range(30)]
    text = "# Doc\n\n## Long\n\n" + " ".join(sentences) + "\n\n## Next\n\nA separate section that is long enough."
    chunks = chunk(parse(text))
    long_chunks = [c for c in chunks if c.breadcrumb == ["Doc", "Long"]]
    assert len(long_chunks) >= 3
    assert all(c.token_estimate <= SMALL.chunk_max_tokens for c in chunks)
    for prev, nxt in pairwise(long_chunks):
        first = split_sentences(nxt.text)[0]
        assert prev.text.endswith(first) or first in prev.text  # starts with a sentence of the previous chunk
        assert all(s.endswith(".") for s in split_sentences(nxt.text))  # cut on sentence boundaries
    covered = [s for c in long_chunks for s in split_sentences(c.text)]
    assert sorted(set(covered), key=sentences.index) == sentences  # nothing lost, order kept
    overlap = sum(len(split_sentences(c.text)) for c in long_chunks) - len(sentences)
    assert overlap > 0
    # no overlap across sections
    nxt = [c for c in chunks if c.breadcrumb == ["Doc", "Next"]]
    assert nxt[0].text == "A separate section that is long enough."


def test_over_long_chinese_paragraph_is_split_on_chinese_punctuation() -> None:
    para = "".join(f"第{k}台服务器的磁盘空间不足。" for k in range(20))
    chunks = chunk(parse(f"# 磁盘\n\n{para}\n"))
    assert len(chunks) >= 3
    for c in chunks:
        assert c.token_estimate <= SMALL.chunk_max_tokens
        assert c.text.endswith("。")


def test_over_long_list_is_split_at_items() -> None:
    items = "\n".join(f"- item {k} checks the component number {k}" for k in range(30))
    chunks = chunk(parse(f"# L\n\n{items}\n"))
    assert len(chunks) >= 3
    for c in chunks:
        assert c.token_estimate <= SMALL.chunk_max_tokens
        assert all(line.startswith("- item") for line in c.text.splitlines())


def test_sentence_without_punctuation_is_hard_split_under_the_cap() -> None:
    chunks = chunk(parse("# H\n\n" + " ".join(["word"] * 300) + "\n"))
    assert len(chunks) > 1 and all(c.token_estimate <= SMALL.chunk_max_tokens for c in chunks)
    chunks = chunk(parse("# H\n\n" + "无标点的长句" * 60 + "\n"))
    assert len(chunks) > 1 and all(c.token_estimate <= SMALL.chunk_max_tokens for c in chunks)


def test_tiny_sections_are_merged_with_the_next_sibling() -> None:
    body = "This section has enough words to stand on its own as a chunk of text here."
    text = f"# Alert\n\n## Meaning\n\nIt broke.\n\n## Impact\n\nUsers wait.\n\n## Diagnosis\n\n{body}\n"
    chunks = chunk(parse(text))
    assert chunks[0].breadcrumb == ["Alert"]  # the common parent of the merged sections
    assert chunks[0].text == "## Meaning\n\nIt broke.\n\n## Impact\n\nUsers wait."
    assert chunks[-1].breadcrumb == ["Alert", "Diagnosis"]
    assert chunks[-1].text == body


def test_tiny_intro_is_merged_with_its_first_subsection() -> None:
    text = "# A\n\n## Steps\n\nDo this:\n\n### Logs\n\nRead the logs carefully before acting on them.\n"
    chunks = chunk(parse(text))
    assert len(chunks) == 1
    assert chunks[0].breadcrumb == ["A", "Steps"]
    assert chunks[0].text == "Do this:\n\n### Logs\n\nRead the logs carefully before acting on them."


def test_tiny_last_section_merges_backward_and_distant_sections_do_not_merge() -> None:
    body = "Plenty of words in this section so that it does not count as tiny at all."
    chunks = chunk(parse(f"# A\n\n## One\n\n{body}\n\n## Two\n\nEnd.\n"))
    assert len(chunks) == 1 and chunks[0].breadcrumb == ["A"]
    assert chunks[0].text == f"## One\n\n{body}\n\n## Two\n\nEnd."
    # cousins: merging would drop two levels of the breadcrumb
    chunks = chunk(parse("# T\n\n## X\n\n### Y\n\nTiny.\n\n## Z\n\n### W\n\nTiny too.\n"))
    assert [c.breadcrumb for c in chunks] == [["T", "X", "Y"], ["T", "Z", "W"]]


def test_a_second_h1_is_rooted_at_the_title() -> None:
    doc = parse("# Alert\n\n## Meaning\n\nText.\n\n# Mitigation\n\nFix it.\n")
    assert [s.path for s in doc.sections] == [("Alert",), ("Alert", "Meaning"), ("Alert", "Mitigation")]


def test_budget_reserves_the_embedding_prefix() -> None:
    settings = IngestSettings(chunk_max_tokens=64, chunk_overlap_tokens=0)
    heading = " ".join(["verylongheadingword"] * 12)
    text = f"# T\n\n## {heading}\n\n" + " ".join(f"Sentence {k} is here." for k in range(40))
    chunks = chunk(parse(text), settings)
    assert len(chunks) > 1
    for c in chunks:
        assert estimate_tokens(embedding_input(c)) <= settings.chunk_max_tokens


# -- breadcrumbs -------------------------------------------------------------------------------------------------


def test_breadcrumb_with_separator_and_backslash_round_trips() -> None:
    parts = ["Runbook", "24/7 Support > Escalation", "C:\\path\\", "a > b \\> c"]
    s = format_breadcrumb(parts)
    assert s == "Runbook > 24/7 Support \\> Escalation > C:\\\\path\\\\ > a \\> b \\\\\\> c"
    assert split_breadcrumb(s) == parts
    assert format_breadcrumb(["KubePodCrashLooping", "Diagnosis"]) == "KubePodCrashLooping > Diagnosis"
    assert split_breadcrumb("A > B") == ["A", "B"] and split_breadcrumb("A>B") == ["A", "B"]
    assert split_breadcrumb("") == [] and format_breadcrumb([]) == ""
    assert BREADCRUMB_SEPARATOR == " > "


@given(st.lists(st.text(alphabet=st.sampled_from("ab >\\\\ 中"), max_size=8), min_size=1, max_size=5))
def test_split_breadcrumb_inverts_format(parts: list[str]) -> None:
    if parts == [""]:
        return  # documented exception: formats like []
    assert split_breadcrumb(format_breadcrumb(parts)) == parts


def test_heading_with_separator_survives_parsing_and_chunking() -> None:
    doc = parse("# Ops\n\n## 24/7 Support > Escalation\n\nPage the on-call engineer through the pager tool.\n")
    (c,) = chunk(doc)
    assert c.breadcrumb == ["Ops", "24/7 Support > Escalation"]
    assert split_breadcrumb(format_breadcrumb(c.breadcrumb)) == c.breadcrumb


def test_embedding_input_joins_title_breadcrumb_and_text() -> None:
    base = {"doc_id": "d", "chunk_index": 0, "total_chunks": 1, "text": "Body."}
    c = Chunk(title="KubePodCrashLooping", breadcrumb=["KubePodCrashLooping", "Diagnosis"], **base)
    assert embedding_input(c) == "KubePodCrashLooping > Diagnosis\n\nBody."
    c = Chunk(title="Guide", breadcrumb=["Appendix", "Tables"], **base)
    assert embedding_input(c) == "Guide\nAppendix > Tables\n\nBody."


# -- real runbooks -----------------------------------------------------------------------------------------------


def _corpus_files(name: str) -> list[Path]:
    root = RUNBOOKS / name
    if not root.is_dir():
        pytest.skip(f"runbook corpus not found at {root.resolve()} (shared data not mounted)")
    return sorted(root.rglob("*.md"))


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_real_runbooks_parse_and_chunk_under_the_cap(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    files = _corpus_files(name)
    assert len(files) == CORPORA[name]
    settings = IngestSettings()
    chunker = MarkdownChunker(settings)
    started = time.perf_counter()
    chunks: list[Chunk] = []
    for path in files:
        doc = PARSER.parse(path.read_text(encoding="utf-8"), fallback_title=path.stem)
        doc_chunks = chunker.chunk(doc, doc_id=path.stem, category=name, source=str(path))
        assert doc_chunks, path
        assert doc.lead, path
        atomic = {b.text for b in doc.blocks if b.kind in ATOMIC_KINDS}
        for k, c in enumerate(doc_chunks):
            assert (c.chunk_index, c.total_chunks) == (k, len(doc_chunks))
            assert c.breadcrumb and c.breadcrumb[0] == doc.title and c.text.strip()
            assert c.token_estimate <= settings.chunk_max_tokens or c.text in atomic, (path, c.breadcrumb)
        chunks.extend(doc_chunks)
    elapsed = time.perf_counter() - started
    tokens = [c.token_estimate for c in chunks]
    with capsys.disabled():
        print(
            f"\n[{name}] files={len(files)} chunks={len(chunks)} median_tokens={statistics.median(tokens):.0f}"
            f" max_tokens={max(tokens)} parse+chunk={elapsed * 1000:.0f} ms"
        )


def test_real_runbook_breadcrumbs_and_language() -> None:
    files = _corpus_files("prometheus-operator")
    path = next(p for p in files if p.stem == "KubePodCrashLooping")
    doc = PARSER.parse(path.read_text(encoding="utf-8"), fallback_title=path.stem)
    assert doc.title == "KubePodCrashLooping" and doc.language == "en"
    assert doc.front_matter.get("title") == "Kube Pod Crash Looping"
    crumbs = [c.breadcrumb for c in MarkdownChunker(IngestSettings()).chunk(doc, doc_id="x")]
    assert ["KubePodCrashLooping", "Diagnosis"] in crumbs
    zh = _corpus_files("kubesphere-zh")
    doc = PARSER.parse(zh[0].read_text(encoding="utf-8"), fallback_title=zh[0].stem)
    assert doc.language == "zh"


_MD_PIECES = st.sampled_from(
    [
        "# ",
        "## ",
        "### ",
        "- ",
        "1. ",
        "> ",
        "```\n",
        "    ",
        "|a|b|\n|-|-|\n|1|2|\n",
        "---\n",
        "<div>\n",
        "[x]: http://y\n",
        "`c`",
        "**b**",
        "[l](u)",
        "word ",
        "句子。",
        "\n",
        "\n\n",
        "text. ",
        "Next! ",
        "\r\n",
        "===\n",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_MD_PIECES, max_size=60), st.sampled_from([32, 64, 256]), st.sampled_from([0, 16, 40]))
def test_chunk_invariants_on_arbitrary_markdown(pieces: list[str], cap: int, overlap: int) -> None:
    settings_ = IngestSettings(chunk_max_tokens=cap, chunk_overlap_tokens=overlap)
    text = "".join(pieces)
    for doc in (PARSER.parse(text, fallback_title="f"), parse_plain(text, "f")):
        chunks = MarkdownChunker(settings_).chunk(doc, doc_id="d")
        atomic = {b.text for b in doc.blocks if b.kind in ATOMIC_KINDS}
        for k, c in enumerate(chunks):
            assert (c.chunk_index, c.total_chunks) == (k, len(chunks))
            assert c.text.strip() and c.breadcrumb[0] == doc.title
            assert c.token_estimate <= cap or c.text in atomic
