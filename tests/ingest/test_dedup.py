"""The specifics of a memory (ingest/dedup.py): two texts that differ in a number, identifier, date, amount, version,
address or name are never near-duplicates; rewordings keep their specifics. Pure functions, no model."""

from __future__ import annotations

import pytest

from context_engine.ingest.dedup import distinguishing_tokens, same_specifics, specifics

DIFFERENT = [
    pytest.param(
        "The parts were bundled under XJ-4477 last week", "The parts were bundled under XJ-4488 last week", id="ident"
    ),
    pytest.param("The trip to Porto took 3 days", "The trip to Porto took 4 days", id="number"),
    pytest.param("The trip took three days", "The trip took 4 days", id="number-word"),
    pytest.param("The bag weighs 1.5 kg", "The bag weighs 15 kg", id="decimal"),
    pytest.param("The repair cost $120", "The repair cost $150", id="amount"),
    pytest.param("The repair cost $120", "The repair cost €120", id="currency"),
    pytest.param("The dentist appointment is on 12 May", "The dentist appointment is on 13 May", id="date"),
    pytest.param("The invoice was paid on 2024-03-12", "The invoice was paid on 2024-03-13", id="iso-date"),
    pytest.param("The meeting with Alice is on Tuesday", "The meeting with Alice is on Wednesday", id="weekday"),
    pytest.param("Carol booked a table for 4 people at 7pm", "Carol booked a table for 4 people at 8pm", id="time"),
    pytest.param("The standup moved to 10:30", "The standup moved to 11:30", id="clock"),
    pytest.param("The server runs version 2.3.1", "The server runs version 2.3.2", id="version"),
    pytest.param("Bob likes green tea", "Alice likes green tea", id="name-initial"),
    pytest.param("The contract was signed by John Smith", "The contract was signed by John Smyth", id="name"),
    pytest.param("Apple released a new phone", "Google released a new phone", id="org-initial"),
    pytest.param("Send the invoice to billing@acme.com", "Send the invoice to billing@acme.org", id="email"),
    pytest.param("Send the invoice to billing@acme.com", "Send the invoice to accounts@acme.com", id="email-user"),
    pytest.param("The database lives at 10.0.0.12", "The database lives at 10.0.0.13", id="ip"),
    pytest.param(
        "The docs are at https://example.com/v1/guide", "The docs are at https://example.com/v2/guide", id="url"
    ),
    pytest.param(
        "Incident INC-12 was caused by a full disk on db-prod-3",
        "Incident INC-12 was caused by a full disk on db-prod-4",
        id="hostname",
    ),
    pytest.param("The team uses Postgres for billing", "The team uses MySQL for billing", id="product"),
    pytest.param("Bob likes green tea", "Bob likes green tea, says Alice", id="added-name"),
    pytest.param("The room was booked", "The room was booked for 2 nights", id="added-number"),
    pytest.param("我下周三去北京出差", "我下周四去北京出差", id="zh-weekday"),
    pytest.param("我的航班是CA1234", "我的航班是CA1235", id="zh-latin-ident"),
    pytest.param("会议在3点开始", "会议在4点开始", id="zh-digit"),
    # the polarity (an attack pass: the second of each pair was dropped as a near-duplicate, cosine 0.95-0.96)
    pytest.param("I am allergic to shellfish.", "I am not allergic to shellfish.", id="negation-not"),
    pytest.param("I like my coffee black", "I don't like my coffee black", id="negation-nt"),
    pytest.param("Bob has pets", "Bob has no pets", id="negation-no"),
    pytest.param("Alice has been to Japan", "Alice has never been to Japan", id="negation-never"),
    pytest.param("我喝咖啡", "我不喝咖啡", id="zh-negation"),
]

SAME = [
    pytest.param("Bob likes green tea", "Bob really likes green tea", id="adverb"),
    pytest.param("I moved to Lisbon in March", "In March I moved to Lisbon", id="word-order"),
    pytest.param("Really, Bob likes green tea", "Bob really likes green tea", id="initial-common-word"),
    pytest.param("The user prefers dark mode in the editor", "User prefers the editor in dark mode", id="initial"),
    pytest.param("Alice drinks green tea.", "Alice is drinking green tea.", id="initial-name"),
    pytest.param("Green tea is what Bob likes", "Bob likes green tea", id="initial-lower-elsewhere"),
    pytest.param(
        "The parts were bundled under XJ-4477 last week", "Last week the parts were bundled under XJ-4477", id="ident"
    ),
    pytest.param("The budget is 1,000 euros", "The budget is 1.000 euros", id="thousands"),
    pytest.param("The budget is 1000 euros", "The budget is 1,000 euros", id="thousands-plain"),
    pytest.param("It costs $1,200.50", "It costs $1.200,50", id="decimal-comma"),
    pytest.param("The repair cost $120", "The repair cost $120.00", id="trailing-zeros"),
    pytest.param("Carol booked a table for 4 people", "Carol booked a table for four people", id="number-word"),
    pytest.param("The dentist appointment is on 12 May", "The dentist appointment is on May 12th", id="ordinal"),
    pytest.param("Alice's cat is called Miso", "The cat of Alice is called Miso", id="possessive"),
    pytest.param("The parts went under ＸＪ－４４７７", "The parts went under xj-4477", id="nfkc-casefold"),
    pytest.param("我下周三去北京出差", "下周三我去北京出差", id="zh-order"),
    pytest.param("我们一起去北京", "我们一同去北京", id="zh-lone-yi"),
    pytest.param("Send it to billing@acme.com.", "Please send it to billing@acme.com", id="email-trailing-dot"),
    pytest.param("I don't drink coffee any more", "I no longer drink coffee", id="negated-both"),
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_texts_that_differ_in_a_specific_are_different(a: str, b: str) -> None:
    assert not same_specifics(a, b)
    assert not same_specifics(b, a)


@pytest.mark.parametrize(("a", "b"), SAME)
def test_rewordings_keep_their_specifics(a: str, b: str) -> None:
    assert same_specifics(a, b)
    assert same_specifics(b, a)


@pytest.mark.parametrize("text", [p.values[i] for p in DIFFERENT + SAME for i in (0, 1)])
def test_a_text_has_its_own_specifics(text: str) -> None:
    assert same_specifics(text, text)
    assert specifics(text).same_as(specifics(text))


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("The parts were bundled under XJ-4477 last week", {"xj-4477"}),
        ("Bob met Alice at 10:30 on 12 May", {"bob", "alice", "10:30", "12", "may"}),
        ("I moved to Lisbon in March", {"lisbon", "march"}),
        ("The repair cost $1,200.00 plus 15% tax", {"$1200", "15%"}),
        ("It fell to -5 degrees", {"-5"}),
        ("Upgrade to v2.3.1 on 192.168.0.12", {"upgrade", "v2.3.1", "192.168.0.12"}),  # alone: a first word counts
        ("See https://example.com/a?b=1.", {"https://example.com/a?b=1", "see"}),
        ("Mail foo.bar+x@acme.com about INC-12 on db-prod-3", {"mail", "foo.bar+x@acme.com", "inc-12", "db-prod-3"}),
        ("the iPhone and the AWS account", {"iphone", "aws"}),
        ("we stayed three nights in june", {"3", "june"}),
        ("you may march on", set()),  # a verb, not a month
        ("I think the plan is fine", set()),  # function words and common words
        ("我的航班是CA1234，下周三出发。", {"ca1234", "三"}),
        ("我用Python写代码", {"python"}),  # inside CJK text a capitalised word is never sentence-initial
    ],
)
def test_distinguishing_tokens(text: str, tokens: set[str]) -> None:
    assert distinguishing_tokens(text) == tokens


def test_a_capitalised_first_word_is_a_name_unless_a_text_writes_it_in_lower_case() -> None:
    bob = specifics("Bob likes green tea")
    assert bob.tentative == {"bob"} and not bob.definite
    assert bob.resolved(specifics("Alice likes green tea")) == {"bob"}
    assert bob.resolved(specifics("We asked bob")) == set()  # written in lower case: a common word in this pair
    assert specifics("Yesterday Bob came").resolved(specifics("Bob came yesterday")) == {"bob"}
