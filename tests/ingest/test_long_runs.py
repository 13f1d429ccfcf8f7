"""A long run without whitespace (a 1 MB "word", base64, a heading of one word) is chunked like any text: its
estimate grows with its length (ingest/text.py ``LONG_RUN_CHARS``), it is cut by characters into pieces of at most the
budget, and no write path embeds it whole. Before, a run of any length counted 1.3 tokens, stayed one chunk, and a
1 MB one took 12 GB of memory in the embedder."""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest

from context_engine.ingest.chunker import ATOMIC_MAX_FACTOR, HEADING_MAX_CHARS
from context_engine.ingest.document import embedding_input
from context_engine.ingest.memory_context import INDEXED_TEXT_MAX_CHARS
from context_engine.ingest.parse import MarkdownChunker, MarkdownParser, parse_plain
from context_engine.ingest.text import LONG_RUN_CHARS, estimate_tokens
from context_engine.schema.context import RequestContext
from context_engine.settings import IngestSettings

SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "src" / "context_engine" / "sample_corpus"
CAP = IngestSettings().chunk_max_tokens
ADMIN = RequestContext(account_id="default", role="admin")
ALICE = RequestContext(account_id="default", role="user", user_space="alice")


def _word(n: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters) for _ in range(n))


def _chunks(markdown: str, title: str = "doc"):
    doc = MarkdownParser().parse(markdown, fallback_title=title)
    return MarkdownChunker(IngestSettings()).chunk(doc, doc_id=title)


# -- the estimate -------------------------------------------------------------------------------------------------


def test_a_word_up_to_the_limit_counts_as_a_word_and_a_longer_run_one_token_per_two_characters():
    assert LONG_RUN_CHARS == 64
    assert estimate_tokens("a" * 64) == 2  # 1.3, rounded up
    assert estimate_tokens("a" * 65) == 33  # 32.5, rounded up
    assert estimate_tokens("a" * 1_000) == 500
    assert estimate_tokens(_word(1_000_000)) == 500_000
    assert estimate_tokens("x " * 10) == 13  # ten words: 13.0
    assert estimate_tokens("The node is running out of disk space.") == 12  # 8 words (10.4 -> 11) + "."
    assert estimate_tokens("容器 restart") == 4  # two ideographs + one word (1.3 -> 2)


def test_the_estimate_of_pieces_cut_at_whitespace_is_never_below_their_join():
    rng = random.Random(3)
    for _ in range(200):
        a = " ".join(_word(rng.randint(1, 150), rng.random()) for _ in range(rng.randint(1, 4)))
        b = " ".join(_word(rng.randint(1, 150), rng.random()) for _ in range(rng.randint(1, 4)))
        assert estimate_tokens(f"{a} {b}") <= estimate_tokens(a) + estimate_tokens(b)


# -- the chunker ----------------------------------------------------------------------------------------------


def test_a_300_kb_word_is_cut_into_chunks_of_at_most_the_budget():
    word = _word(300_000)
    chunks = _chunks(f"# One line\n\n{word}\n")
    assert len(chunks) == 1186
    assert max(c.token_estimate for c in chunks) <= CAP
    assert max(len(c.text) for c in chunks) <= CAP  # pieces of a cut run: at most the budget in characters
    assert "".join(c.text for c in chunks) == word  # every character once: pieces of a run never overlap
    assert max(len(embedding_input(c)) for c in chunks) < 300


def test_pieces_of_a_cut_run_are_near_equal_and_the_prose_around_it_is_kept():
    word = _word(5_000)
    chunks = _chunks(f"# Doc\n\nThe token below was pasted by mistake. {word} Then the text goes on.\n")
    texts = [c.text for c in chunks]
    assert texts[0] == "The token below was pasted by mistake."
    assert texts[-1] == "Then the text goes on."
    pieces = texts[1:-1]
    assert "".join(pieces) == word
    # no tiny last piece (the last one also had the space after the run, stripped in its chunk)
    assert max(map(len, pieces)) - min(map(len, pieces)) <= 2
    assert all(c.token_estimate <= CAP for c in chunks)


def test_plain_text_of_one_word_is_cut_too():
    word = _word(50_000)
    doc = parse_plain(word, "plain")
    chunks = MarkdownChunker(IngestSettings()).chunk(doc, doc_id="plain")
    assert len(chunks) > 100 and "".join(c.text for c in chunks) == word
    assert max(c.token_estimate for c in chunks) <= CAP


def test_a_title_or_heading_of_one_long_word_is_cut_in_the_breadcrumb():
    word = _word(100_000)
    chunks = _chunks(f"# {word}\n\n## Fix\n\nRestart the pod.\n\n## {word}\n\nDelete old images.\n")
    assert [c.text for c in chunks] == ["Restart the pod.", "Delete old images."]
    assert all(len(c.title) == HEADING_MAX_CHARS and c.title.endswith("…") for c in chunks)
    assert chunks[0].breadcrumb[1] == "Fix"
    assert all(len(name) <= HEADING_MAX_CHARS for c in chunks for name in c.breadcrumb)
    assert max(len(embedding_input(c)) for c in chunks) < 3 * HEADING_MAX_CHARS


def test_a_code_block_is_kept_whole_up_to_the_atomic_limit_and_cut_at_lines_beyond():
    line = "kubectl get pods --all-namespaces\n"  # 9 estimated tokens
    small = "".join(f"{line}" for _ in range(100))  # 900 tokens: one chunk, over the cap, as before
    chunks = _chunks(f"# Doc\n\n```\n{small}```\n")
    assert len(chunks) == 1 and chunks[0].token_estimate > CAP
    big = "".join(f"{line}" for _ in range(2_000))  # 18,000 tokens: over 16 x the cap
    assert estimate_tokens(big) > ATOMIC_MAX_FACTOR * CAP
    chunks = _chunks(f"# Doc\n\n```\n{big}```\n")
    assert len(chunks) > 60 and max(c.token_estimate for c in chunks) <= CAP
    assert all(c.text.strip("`\n").strip().startswith("kubectl") for c in chunks)  # cut at line breaks


def test_the_sample_corpus_chunks_as_before():
    # chunk counts measured before long runs got their cost (no run there is over 64 characters)
    before = {
        "database/ConnectionPoolExhausted.md": 3,
        "etcd/EtcdNoLeader.md": 4,
        "kubernetes/NodeDiskAlmostFull.md": 4,
        "kubernetes/NodeNotReady.md": 3,
        "kubernetes/PodRestartingRepeatedly.md": 3,
        "kubernetes/容器频繁重启.md": 4,
        "networking/CertificateExpiringSoon.md": 2,
        "storage/VolumeAlmostFull.md": 3,
    }
    got = {
        str(p.relative_to(SAMPLE_CORPUS)): len(_chunks(p.read_text(encoding="utf-8"), p.stem))
        for p in sorted(SAMPLE_CORPUS.rglob("*.md"))
    }
    assert got == before


# -- what the write paths embed ---------------------------------------------------------------------------------


@pytest.fixture
def recorded(tmp_path):
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings
    from tests.retrieval.conftest import HashEmbedder

    class Recording(HashEmbedder):
        def __init__(self) -> None:
            self.lengths: list[int] = []

        def embed_documents(self, texts, *, progress=None):
            self.lengths.extend(map(len, texts))
            return super().embed_documents(texts, progress=progress)

    embedder = Recording()
    engine = ContextEngineService(load_settings(tmp_path / "home"), embedder=embedder)
    yield engine, embedder
    engine.close()


WRITES = {
    "resource body": lambda e, w: e.add_text(f"# Big\n\n{w}", "ctx://resources/big/a.md", ADMIN),
    "resource title": lambda e, w: e.add_text(f"# {w}\n\nbody text.", "ctx://resources/big/b.md", ADMIN),
    "resource heading": lambda e, w: e.add_text(f"# T\n\n## {w}\n\nbody.", "ctx://resources/big/c.md", ADMIN),
    "plain resource": lambda e, w: e.add_text(w, "ctx://resources/big/d.txt", ADMIN),
    "memory": lambda e, w: e.add_memory(w, ALICE),
    "memory at a URI": lambda e, w: e.add_memory(w, ALICE, uri="ctx://user/alice/memories/x/big.md"),
    "message": lambda e, w: e.add_messages([{"role": "user", "content": w}], "c1", ALICE),
    "skill content": lambda e, w: e.add_skill("bomb", "one long word", w, ADMIN),
    "skill description": lambda e, w: e.add_skill("bomb", w, "body", ADMIN),
}


@pytest.mark.parametrize("write", WRITES, ids=list(WRITES))
def test_no_write_path_embeds_a_long_word_whole(recorded, write):
    engine, embedder = recorded
    WRITES[write](engine, _word(60_000))
    assert embedder.lengths
    # memories and messages: the L0 and the indexed text (INDEXED_TEXT_MAX_CHARS); others: a chunk and its prefix
    limit = INDEXED_TEXT_MAX_CHARS + 512 if write in ("memory", "message") else 2 * HEADING_MAX_CHARS + CAP
    assert max(embedder.lengths) <= limit
