"""The user's name said only in the assistant's greetings (issue 25): an agent's user is stored under the role
``user`` and the assistant greets them by name ("Hi Priya, ..."), so "Where does Priya work?" names no speaker.
The greeted name is read as the user (``speakers.addressed_name``, ``L0Retriever``): the user's turns get the speaker
boost and the second search puts the name in the first person. The default model, a real home."""

from __future__ import annotations

import pytest

from context_engine.schema.context import RequestContext
from context_engine.settings import load_settings

PRIYA = RequestContext(account_id="default", role="user", user_space="priya", agent_space="helper")

# written for this test: the user never says her name, the assistant greets her with it
SESSIONS = (
    [
        ("user", "hey, can you help me plan meals for the week? I'm trying to eat less meat."),
        ("assistant", "Hi Priya, of course! Any allergies or time limits I should know about?"),
        ("user", "I only have 20 minutes on weeknights, I get home from the hospital around 7."),
        ("assistant", "Then one-pan dishes are your friend: a chickpea and spinach curry takes 15 minutes."),
        ("user", "I'm a respiratory therapist at St. Columba's, mostly on the ICU."),
        ("assistant", "That's demanding work. Batch-cooking on Sundays would help a lot."),
    ],
    [
        ("user", "back again"),
        ("assistant", "Welcome back, Priya! How did the meal plan go?"),
        ("user", "Good! Also my brother Arjun just started at the airport in Singapore as an engineer."),
        ("assistant", "Congratulations to him, that's a great job."),
    ],
    [
        ("user", "Can you write a short text to my landlord Greg? The heater in the flat is broken again."),
        ("assistant", "Hi Greg, just a heads-up that the heater is broken again. Could you send someone this week?"),
        ("user", "Perfect. Also, how long does a UK passport renewal take at the moment?"),
        ("assistant", "Usually about three weeks online, longer in spring and summer."),
    ],
)


@pytest.fixture(scope="module")
def engine(tmp_path_factory, default_embedder):
    from context_engine.service import ContextEngineService

    e = ContextEngineService(load_settings(tmp_path_factory.mktemp("home")), embedder=default_embedder)
    for i, turns in enumerate(SESSIONS):
        e.add_messages([{"role": r, "content": t} for r, t in turns], conversation_id=f"s{i}", ctx=PRIYA)
    yield e
    e.close()


def _search(engine, question: str):
    r = engine.search_memory(question, PRIYA, top_k=5, include_debug=True, trace_level="detailed")
    return r.hits, r.thinking_trace["events"]


@pytest.mark.parametrize(
    ("question", "answer", "rewritten"),
    [
        ("Where does Priya work?", "user: I'm a respiratory therapist", "Where does I work?"),
        ("How long does Priya have to cook on weeknights?", "user: I only have 20 minutes", None),
        ("What does Priya's brother do?", "user: Good! Also my brother Arjun", "What does my brother do?"),
    ],
)
def test_a_name_only_the_assistant_greets_the_user_by_is_the_user(engine, question, answer, rewritten):
    hits, events = _search(engine, question)
    assert hits[0].abstract.startswith(answer)
    messages = [e for e in events if e["event"] == "messages" and e.get("user_reference")]
    assert messages and messages[0]["named"] == ["user"]
    transforms = [e for e in events if e["event"] == "query_transform" and e.get("transform") == "speaker_names"]
    assert transforms and transforms[0]["speakers"] == ["user"]
    if rewritten is not None:
        assert transforms[0]["text"] == rewritten


def test_a_name_no_one_is_greeted_by_is_not_the_user(engine):
    """Arjun is only spoken about: no boost for the user's turns, no rewrite."""
    _, events = _search(engine, "Where does Arjun work?")
    assert not [e for e in events if e["event"] == "messages" and e.get("user_reference")]
    assert not [e for e in events if e["event"] == "query_transform"]


def test_a_greeting_the_assistant_drafts_for_someone_else_is_not_the_users_name(engine):
    """A greeting "Hi Greg, ..." opens a text for the landlord the user speaks of ("my landlord Greg"): not the
    user."""
    _, events = _search(engine, "When is Greg coming to fix the heater?")
    assert not [e for e in events if e["event"] == "messages" and e.get("user_reference")]
    assert not [e for e in events if e["event"] == "query_transform"]


def test_a_question_about_what_the_user_asked_the_assistant_finds_the_question(engine):
    """The query names the assistant and the user (by the greeted name) and asks about the asking: the user's
    question ranks above the assistant's answer, and the greeted name reads as "the user" does."""
    hits, events = _search(engine, "What did Priya ask the assistant about passport renewal?")
    texts = [h.abstract for h in hits]
    asked = next(i for i, t in enumerate(texts) if t.startswith("user: Perfect. Also, how long does a UK passport"))
    answers = [i for i, t in enumerate(texts) if t.startswith("assistant: Usually about three weeks")]
    answered = answers[0] if answers else len(texts)
    assert asked < answered
    messages = [e for e in events if e["event"] == "messages" and e.get("user_reference")]
    assert messages and messages[0]["named"] == ["assistant", "user"]
    as_role, _ = _search(engine, "What did the user ask the assistant about passport renewal?")
    assert [h.uri for h in hits] == [h.uri for h in as_role]
