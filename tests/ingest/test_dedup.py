"""The specifics of a memory (ingest/dedup.py): two texts that differ in a number (or its unit), identifier, date,
relative time, frequency, amount, version, address or name, in the order of two names or two dates, or in what is
negated, are never near-duplicates; rewordings keep their specifics. Pure functions, no model."""

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
    # an attack pass (2026-12-07): the second of each pair was dropped as a near-duplicate (cosine 0.93-0.99)
    pytest.param("My daily standup is at 7 am.", "My daily standup is at 7 pm.", id="am-pm"),
    pytest.param("The standup is at 10:30 a.m.", "The standup is at 10:30 p.m.", id="am-pm-clock"),
    pytest.param("I take 5 mg of melatonin every night.", "I take 5 g of melatonin every night.", id="unit-mass"),
    pytest.param("I run 10 km every Saturday.", "I run 10 miles every Saturday.", id="unit-length"),
    pytest.param("The rent is 1200 dollars a month.", "The rent is 1200 euros a month.", id="currency-word"),
    pytest.param("The freezer is at -18 °C.", "The freezer is at -18 °F.", id="unit-temperature"),
    pytest.param("The trip took 3 days.", "The trip took 3 weeks.", id="unit-time"),
    pytest.param("The shelf is 5' wide.", 'The shelf is 5" wide.', id="feet-inches"),
    pytest.param(
        "The minimum supported version of the mobile app is 4.10, so older builds must update.",
        "The minimum supported version of the mobile app is 4.1, so older builds must update.",
        id="version-trailing-zero",
    ),
    pytest.param("Our cluster runs Kubernetes 1.30.", "Our cluster runs Kubernetes 1.3.", id="version-minor"),
    pytest.param("The bag weighs 1.50 kg", "The bag weighs 1.5 kg", id="precision"),
    pytest.param("Alice owes Bob 50 dollars.", "Bob owes Alice 50 dollars.", id="order-names"),
    pytest.param(
        "The meeting moved from Monday to Friday.", "The meeting moved from Friday to Monday.", id="order-days"
    ),
    pytest.param("The shift runs from 10:30 to 11:30", "The shift runs from 11:30 to 10:30", id="order-clock"),
    pytest.param("Alice is 30 and Bob is 25", "Alice is 25 and Bob is 30", id="order-numbers"),
    pytest.param("I go to the gym once a week.", "I go to the gym twice a week.", id="once-twice"),
    pytest.param("I go to the gym once a week.", "I go to the gym once a month.", id="frequency-period"),
    pytest.param("I visit my parents every weekend.", "I visit my parents every week.", id="weekend-week"),
    pytest.param("I always take the bus to work.", "I rarely take the bus to work.", id="frequency-adverb"),
    pytest.param("The deadline for the tax report is tomorrow.", "The deadline for the tax report is today.", id="rel"),
    pytest.param("The project review is next week.", "The project review was last week.", id="next-last"),
    pytest.param("The release is next Monday.", "The release was last Monday.", id="next-last-weekday"),
    pytest.param("The meeting is in two weeks.", "The meeting was two weeks ago.", id="ago"),
    pytest.param("I jog in the morning.", "I jog in the evening.", id="time-of-day"),
    pytest.param("The office is on the second floor.", "The office is on the third floor.", id="ordinal-word"),
    pytest.param("I like tea but I don't like coffee.", "I like coffee but I don't like tea.", id="negation-moved"),
    pytest.param("I like tea, but not coffee.", "I like coffee, but not tea.", id="negation-moved-not"),
    pytest.param("I love cilantro.", "I hate cilantro.", id="aversion"),
    pytest.param("I like tea but I hate coffee.", "I like coffee but I hate tea.", id="aversion-moved"),
    pytest.param("The pull request was approved.", "The pull request was rejected.", id="refusal"),
    pytest.param("我下周三去北京出差", "我上周三去北京出差", id="zh-next-last-week"),
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
    # rewordings that keep each specific's unit, kind order and polarity (the attack pass's rules must not split them)
    pytest.param("My daily standup is at 7 am.", "Every day my standup is at 7 a.m.", id="am-daily-every-day"),
    pytest.param("My standup is at 7pm", "My standup is at 7 PM", id="attached-unit"),
    pytest.param("I take 5 mg of melatonin every night.", "Every night I take 5 milligrams of melatonin.", id="mg"),
    pytest.param("I run 10 km every Saturday.", "Every Saturday I run 10 kilometres.", id="km"),
    pytest.param("The rent is 1,200 dollars a month.", "The rent is $1200 per month.", id="dollars"),
    pytest.param("The freezer is at -18 ℃.", "The freezer is at -18°C.", id="celsius"),
    pytest.param("The discount is 15 percent.", "The discount is 15%.", id="percent"),
    pytest.param("The laptop has 16GB of memory.", "The laptop has 16 GB of memory.", id="gb"),
    pytest.param("The trip took 3 days.", "The trip took three days.", id="days"),
    pytest.param("The shelf is 5' wide.", "The shelf is 5′ wide.", id="feet"),
    pytest.param("I go to the gym twice a week.", "Twice a week I go to the gym.", id="twice-moved"),
    pytest.param("I go to the gym three times a week.", "I go to the gym thrice a week.", id="thrice"),
    pytest.param("I visit my parents every weekend.", "Every weekend I visit my parents.", id="weekend-moved"),
    pytest.param("The project review is next week.", "Next week is the project review.", id="next-week-moved"),
    pytest.param("The deadline is tomorrow.", "Tomorrow is the deadline.", id="tomorrow-moved"),
    pytest.param(
        "The meeting moved from Monday to Friday.", "The meeting was moved from Monday to Friday.", id="passive"
    ),
    pytest.param("Alice owes Bob 50 dollars.", "Alice owes Bob $50.", id="names-kept"),
    pytest.param("The meeting is at 10:30 am", "At 10:30 a.m. there is the meeting", id="clock-moved"),
    pytest.param("I like tea but I don't like coffee.", "I don't like coffee, but I like tea.", id="clauses-moved"),
    pytest.param("I like tea but I don't like coffee.", "I like tea, but not coffee.", id="negation-shortened"),
    pytest.param("I never drink coffee after dinner.", "After dinner, I never drink coffee.", id="negation-phrase"),
    pytest.param("I don't like cilantro.", "I dislike cilantro.", id="aversion-negation"),
    pytest.param(
        "I'm allergic to peanuts and I don't eat shellfish.",
        "I don't eat shellfish and I'm allergic to peanuts.",
        id="clauses-swapped",
    ),
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
        ("The parts were bundled under XJ-4477 last week", {"xj-4477", "last week"}),
        ("Bob met Alice at 10:30 on 12 May", {"bob", "alice", "10:30", "12", "may"}),
        ("I moved to Lisbon in March", {"lisbon", "march"}),
        ("The repair cost $1,200.00 plus 15% tax", {"$1200", "15%"}),
        ("It fell to -5 degrees", {"-5°"}),
        ("Upgrade to v2.3.1 on 192.168.0.12", {"upgrade", "v2.3.1", "192.168.0.12"}),  # alone: a first word counts
        ("See https://example.com/a?b=1.", {"https://example.com/a?b=1", "see"}),
        ("Mail foo.bar+x@acme.com about INC-12 on db-prod-3", {"mail", "foo.bar+x@acme.com", "inc-12", "db-prod-3"}),
        ("the iPhone and the AWS account", {"iphone", "aws"}),
        ("we stayed three nights in june", {"3 night", "june"}),
        ("you may march on", set()),  # a verb, not a month
        ("I think the plan is fine", set()),  # function words and common words
        ("我的航班是CA1234，下周三出发。", {"ca1234", "三", "下周"}),
        ("我用Python写代码", {"python"}),  # inside CJK text a capitalised word is never sentence-initial
        # a number's unit is part of it, in one spelling
        ("I take 5 mg, or 5mg, or 5 milligrams", {"5 mg"}),
        ("Standup at 7 am, lunch at 12:30 p.m.", {"standup", "7 am", "12:30 pm"}),
        ("The rent is 1,200 dollars, 1200 EUR or £1,200.00", {"$1200", "€1200", "£1200"}),
        ("A 5' shelf, a 5\" screen, a 5″ pipe, a '5' sign", {"5′", "5″", "5"}),
        ("We raised $5 million in 2024", {"$5 million", "2024"}),
        ("Kubernetes 1.30, not 1.3; 4.10 and 1.50 kg", {"kubernetes", "1.30", "1.3", "4.10", "1.50 kg"}),
        ("twice daily, once a week, three times a month", {"2 time", "day", "1 time", "week", "3 time", "month"}),
        ("tomorrow morning, or next Monday, or last week", {"tomorrow", "morning", "next monday", "last week"}),
    ],
)
def test_distinguishing_tokens(text: str, tokens: set[str]) -> None:
    assert distinguishing_tokens(text) == tokens


def test_a_capitalised_first_word_is_a_name_unless_a_text_writes_it_in_lower_case() -> None:
    bob = specifics("Bob likes green tea")
    assert bob.tentative == {"bob"} and not bob.definite
    assert bob.resolved(specifics("Alice likes green tea")) == {"bob"}
    assert bob.resolved(specifics("We asked bob")) == set()  # written in lower case: a common word in this pair
    assert specifics("Yesterday Bob came").resolved(specifics("Bob came yesterday")) == {"bob", "yesterday"}


def test_order_counts_within_a_kind_only() -> None:
    alice_bob = specifics("Alice owes Bob 50 dollars")
    assert alice_bob.sequence(alice_bob) == {"name": ("alice", "bob"), "num $": ("$50",)}
    # a phrase moved across kinds keeps each kind's order: one name, one month
    assert same_specifics("I moved to Lisbon in March", "In March I moved to Lisbon")
    assert not same_specifics("Alice owes Bob 50 dollars", "Bob owes Alice 50 dollars")


def test_the_polarity_names_the_words_a_negation_moved_to() -> None:
    tea = specifics("I like tea but I don't like coffee.")
    assert (tea.negations, tea.negated, tea.affirmed) == (1, {"coffee"}, {"tea"})
    assert specifics("Bob doesn't eat meat").negated == {"eat", "meat"}  # the subject is neither
    assert specifics("I hate cilantro").negations == specifics("I don't like cilantro").negations == 1
