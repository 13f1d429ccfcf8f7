"""Content-free conversation messages are no BM25 documents (issue 25): an acknowledgement or a question back holds
no tokens and leaves N and avgdl as they were, so a session full of "Noted!" does not change any other message's
score; a message with content, an answer read with its question, and any non-message record keep their text."""

from __future__ import annotations

import numpy as np
import pytest

from context_engine.schema.nodes import VectorFilter, VectorRecord
from context_engine.storage.keyword import BM25Index
from context_engine.storage.keyword.bm25_index import keyword_text

ACC = "acc"
SESSION = "ctx://user/sam/memories/sessions/s1/"


def message(n: int, text: str, *, context: str = "", level: int = 0, uri: str | None = None) -> VectorRecord:
    uri = uri or f"{SESSION}{n:06d}.md"
    return VectorRecord(
        id=f"m{n}-{level}",
        vector=np.zeros(4, dtype=np.float32),
        uri=uri,
        parent_uri=SESSION,
        account_id=ACC,
        owner_space="user:sam",
        context_type="memory",
        category="sessions",
        level=level,
        doc_id=uri,
        text=text,
        context=context,
    )


FACTS = [
    "Sam: I work at Northwind Traders as a data engineer.",
    "Sam: My sister lives in Leeds and teaches chemistry.",
    "Sam: I switched from coffee to rooibos tea last spring.",
]
ACKS = ["assistant: Noted, thanks!", "assistant: Got it.", "assistant: How long have you been there?"]


@pytest.mark.parametrize("text", ACKS)
def test_an_acknowledgement_or_question_back_indexed_alone_has_no_keyword_text(text):
    assert keyword_text(message(1, text)) == ""


@pytest.mark.parametrize(
    "record",
    [
        message(1, FACTS[0]),
        message(2, "Sam: Yes.", context="assistant: Do you still live in Leeds?"),  # an answer keeps its question
        message(3, "Noted, thanks!", uri="ctx://user/sam/memories/notes.md"),  # not a conversation message
        message(4, "assistant: Noted, thanks!", level=2),  # only level-0 rows of messages
    ],
)
def test_records_with_content_or_outside_conversations_keep_their_text(record):
    assert record.text in keyword_text(record)


def test_acknowledgements_do_not_change_the_scores_of_the_facts():
    facts = [message(i, t) for i, t in enumerate(FACTS)]
    plain = BM25Index()
    plain.upsert(facts)
    noisy = BM25Index()
    noisy.upsert([r for i, f in enumerate(facts) for r in (f, message(100 + i, ACKS[i % len(ACKS)]))])
    flt = VectorFilter(account_id=ACC)
    for query in ["Where does Sam's sister live?", "What does Sam drink instead of coffee?", "thanks noted"]:
        want = [(h.id, round(h.score, 6)) for h in plain.search(query, 10, flt)]
        got = [(h.id, round(h.score, 6)) for h in noisy.search(query, 10, flt)]
        assert got == want
    assert noisy.count(ACC) == 2 * len(FACTS)  # the acknowledgements are stored rows, only without tokens
    assert [h.id for h in noisy.search("Leeds chemistry", 10, flt)] == ["m1-0"]


def test_deleting_an_empty_row_keeps_the_statistics_exact():
    index = BM25Index()
    index.upsert([message(0, FACTS[0]), message(1, FACTS[1]), message(9, ACKS[0])])
    index.delete(ACC, ["m9-0"])
    fresh = BM25Index()
    fresh.upsert([message(0, FACTS[0]), message(1, FACTS[1])])
    flt = VectorFilter(account_id=ACC)
    assert [(h.id, h.score) for h in index.search("Northwind engineer", 10, flt)] == [
        (h.id, h.score) for h in fresh.search("Northwind engineer", 10, flt)
    ]
