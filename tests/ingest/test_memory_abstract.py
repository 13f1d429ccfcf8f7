"""The L0 of a memory (ingest/memory_abstract.py; issue 11 item 2): the whole text when it fits, else whole
sentences that keep the facts (names, numbers, dates) within the budget; English and Chinese."""

from __future__ import annotations

import re

import pytest

from context_engine.ingest.memory_abstract import fact_score, memory_abstract
from context_engine.ingest.parse import split_sentences

FILLER = [
    "It was a really nice day overall.",
    "We talked about this and that for a while.",
    "Honestly it was fun and we laughed a lot.",
    "Anyway that is what happened and it was good.",
]
FACT = "On 12 March 2024 Caroline moved to Berlin to join Siemens as an engineer."
LEAD = "We had a long chat yesterday."
LONG = " ".join([LEAD, *FILLER, FACT, *FILLER])

ZH_FACT = "卡罗琳在二〇二三年五月八日搬到了柏林，下午3点开始新工作。"
ZH_SENTENCES = [
    "我们昨天聊了很久。",
    "天气很好，大家都很开心。",
    "说了很多有的没的事情，真的很有意思。",
    ZH_FACT,
    "后来大家又随便聊了一会儿，没有什么特别的。",
    "最后我们各自回家休息了，感觉很放松。",
]
ZH_LONG = "".join(ZH_SENTENCES)


def _sentences_of(abstract: str, text: str) -> list[str]:
    """The sentences of ``text`` that ``abstract`` is made of, asserting it holds nothing else and keeps their order."""
    pool = split_sentences(text)
    rest = abstract
    used: list[str] = []
    for s in pool:
        at = rest.find(s)
        if at != -1:
            assert rest[:at].strip() == "", f"text between sentences: {rest[:at]!r}"
            used.append(s)
            rest = rest[at + len(s) :]
    assert rest.strip() == "", f"not made of whole sentences in order: left over {rest!r}"
    return used


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Bob likes green tea.", "Bob likes green tea."),
        ("  Bob likes\n\n green   tea.\tAnd\ncoffee on Mondays.  ", "Bob likes green tea. And coffee on Mondays."),
        ("鲍勃喜欢\n绿茶。", "鲍勃喜欢绿茶。"),  # no space is put between CJK characters of two lines
    ],
)
def test_a_memory_that_fits_is_its_own_l0_whitespace_collapsed(text, expected):
    assert memory_abstract(text, 300) == expected


def test_a_memory_of_exactly_the_budget_is_kept_whole():
    text = ("x" * 9 + " ") * 29 + "y" * 9 + "."  # 300 characters, no sentence break before the end
    assert len(text) == 300
    assert memory_abstract(text, 300) == text


def test_a_long_memory_keeps_the_fact_sentence_over_filler_within_the_budget():
    assert len(LONG) > 400
    abstract = memory_abstract(LONG, 200)
    assert len(abstract) <= 200
    used = _sentences_of(abstract, LONG)
    assert used[0] == LEAD  # the first sentence always leads
    assert FACT in used  # names, a date and a number: kept although it comes after four filler sentences
    assert abstract.endswith(".")  # never ends mid-sentence
    assert len(used) < len(split_sentences(LONG))  # something was left out
    # the budget is used greedily: no left-out sentence would still have fit
    spare = 200 - len(abstract)
    assert all(len(s) + 1 > spare for s in split_sentences(LONG) if s not in used)


def test_the_fact_sentence_wins_even_when_only_one_more_fits():
    budget = len(LEAD) + 1 + len(FACT)
    abstract = memory_abstract(LONG, budget)
    assert abstract == f"{LEAD} {FACT}"


def test_facts_are_scored_above_filler():
    assert fact_score(FACT) >= 4  # "12", "March", "2024", "Caroline", "Berlin", "Siemens"
    assert all(fact_score(s) == 0 for s in FILLER)
    assert fact_score("The error ERR_DISK_FULL came from nodeExporter at 03:15.") >= 3


def test_sentences_keep_their_original_order():
    text = " ".join(
        [
            "My week was busy.",
            "Alice called on Monday about the 3 tickets.",
            *FILLER,
            "Then Bob flew to Paris on 5 May.",
        ]
    )
    abstract = memory_abstract(text, 120)
    assert abstract == "My week was busy. Alice called on Monday about the 3 tickets. Then Bob flew to Paris on 5 May."


def test_a_single_first_sentence_over_budget_is_cut_at_a_word_boundary():
    first = "I really want to tell you about " + " and ".join(f"thing number {i}" for i in range(30)) + "."
    text = first + " " + FACT
    abstract = memory_abstract(text, 100)
    assert len(abstract) <= 100
    assert abstract.endswith("…")
    body = abstract[:-1]
    assert first.startswith(body)
    assert first[len(body)] == " " or body.endswith(tuple("0123456789"))  # cut between words, not inside one


def test_every_budget_is_respected():
    for budget in (64, 90, 150, 250, 299):
        abstract = memory_abstract(LONG, budget)
        assert 0 < len(abstract) <= budget
        if len(LEAD) < budget:
            assert abstract.startswith(LEAD)
            _sentences_of(abstract, LONG)


def test_a_long_chinese_memory_keeps_its_date_sentence_in_whole_sentences():
    assert len(ZH_LONG) > 80
    abstract = memory_abstract(ZH_LONG, 60)
    assert len(abstract) <= 60
    used = _sentences_of(abstract, ZH_LONG)
    assert used[0] == ZH_SENTENCES[0]
    assert ZH_FACT in used  # a date (年月日), a time (3点) and a place
    assert abstract.endswith("。")
    assert fact_score(ZH_FACT) > 0 and fact_score(ZH_SENTENCES[2]) == 0


def test_a_chinese_memory_that_fits_is_kept_whole():
    text = "卡罗琳下周二去上海出差，\n住在外滩附近。"
    assert memory_abstract(text, 300) == "卡罗琳下周二去上海出差，住在外滩附近。"


def test_a_long_run_of_chinese_without_punctuation_is_cut_within_the_budget():
    text = "非常" * 200
    abstract = memory_abstract(text, 80)
    assert len(abstract) <= 80 and abstract.endswith("…")
    assert re.fullmatch(r"(非常)+非?…", abstract)


def test_the_abstract_is_deterministic():
    assert {memory_abstract(LONG, 180) for _ in range(5)} == {memory_abstract(LONG, 180)}


# ---- the documented L0 bound, 256 characters, through the engine (issue 27, attack pass) ----------------------------
L0_BOUND = 256  # DESIGN §1: an L0 abstract is at most 256 characters


@pytest.fixture
def engine(tmp_path):
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings
    from tests.retrieval.conftest import HashEmbedder

    e = ContextEngineService(load_settings(tmp_path / "home"), embedder=HashEmbedder())
    yield e
    e.close()


def _ends_cleanly(l0: str) -> bool:
    """Whole sentences, or a cut at a word boundary marked with an ellipsis."""
    return l0.endswith(("…", ".", "!", "?", "。")) and not l0.endswith(" …")


@pytest.mark.parametrize(
    "text",
    [
        " ".join(["Caroline met Melanie in Lisbon on 3 March 2023 and they talked for hours."] * 8),  # 8 sentences
        "word " * 200,  # one sentence of 1,000 characters
        "Caroline " + "said the garden on Elm Street opens at nine and " * 5 + "closes at six.",  # 270 characters
    ],
)
def test_a_long_memory_has_an_l0_within_256_characters(engine, text):
    from tests.retrieval.conftest import ALICE

    uri = engine.add_memory(text, ALICE, category="events").uris[0]
    l0 = engine.read(uri, "L0", ALICE)
    assert len(l0) <= L0_BOUND, len(l0)
    assert _ends_cleanly(l0), l0[-30:]
    assert all(len(h.abstract) <= L0_BOUND for h in engine.search_memory("Caroline garden Lisbon", ALICE).hits)


@pytest.mark.parametrize("speaker", [None, "Caroline", "S" * 128])
def test_a_long_conversation_message_has_an_l0_within_256_characters(engine, speaker):
    from tests.retrieval.conftest import ALICE

    content = " ".join(["We met in Lisbon on 3 March 2023 and talked about the garden for hours."] * 6)
    message = {"role": "user", "content": content, **({"speaker": speaker} if speaker else {})}
    uri = engine.add_messages([message], "s1", ALICE).uris[0]
    l0 = engine.read(uri, "L0", ALICE)
    assert len(l0) <= L0_BOUND, len(l0)
    assert l0.startswith(f"{speaker or 'user'}: ")
    updated = engine.update_memory(uri, content + " " + content, ALICE)
    assert updated.items[0].status == "updated"
    assert len(engine.read(uri, "L0", ALICE)) <= L0_BOUND


def test_the_memory_l0_setting_cannot_exceed_the_documented_bound(tmp_path):
    from context_engine.errors import ContextEngineError
    from context_engine.settings import load_settings

    assert load_settings(tmp_path / "a").memory.l0_max_chars == L0_BOUND
    with pytest.raises(ContextEngineError) as exc:
        load_settings(tmp_path / "b", memory={"l0_max_chars": 300})
    assert exc.value.code.value == "CFG-4001"
