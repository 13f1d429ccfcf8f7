"""add_messages from Python takes LangChain message objects and OpenAI dicts as they are (issue 29 item 3): the role,
the speaker and the text are stored as with our own format, and the messages are found by search_memory; in an
agent's OpenAI history (tool calls, tool results, a repeated system prompt) the user's statement ranks first."""

from __future__ import annotations

import pytest

from context_engine.schema.context import RequestContext
from context_engine.settings import load_settings

pytestmark = pytest.mark.slow

SAM = RequestContext(account_id="default", role="user", user_space="sam", agent_space="helper")


@pytest.fixture
def engine(tmp_path, default_embedder):
    from context_engine.service import ContextEngineService

    svc = ContextEngineService(load_settings(tmp_path / "home"), embedder=default_embedder)
    yield svc
    svc.close()


def test_langchain_objects_and_openai_dicts_are_stored_and_found(engine):
    lc = pytest.importorskip("langchain_core.messages")
    result = engine.add_messages(
        [
            lc.HumanMessage("I started a new job at Northwind Traders.", name="Sam"),
            lc.AIMessage("Congratulations on the new job!"),
            {"role": "user", "name": "Sam", "content": [{"type": "text", "text": "My sister lives in Leeds."}]},
        ],
        "s1",
        SAM,
    )
    details = [engine.get_memory(u, SAM) for u in result.uris]
    assert [(d.metadata["role"], d.metadata["speaker"]) for d in details] == [
        ("user", "Sam"),
        ("assistant", "assistant"),
        ("user", "Sam"),
    ]
    assert details[0].abstract == "Sam: I started a new job at Northwind Traders."
    hits = engine.search_memory("Which company is Sam's new job at?", SAM, top_k=3).hits
    assert hits[0].uri == result.uris[0]


SYSTEM = (
    "You are Compass, a personal assistant with access to calendar, weather, reminder and restaurant tools. "
    "Be concise, confirm bookings, and remember the user's preferences."
)


def _aroha(text: str) -> dict:
    return {"role": "user", "name": "Aroha", "content": [{"type": "text", "text": text}]}


def _assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


def _call(call_id: str, name: str, arguments: str) -> dict:
    """An assistant's tool call as the OpenAI SDK keeps it: null content, the call in ``tool_calls``."""
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _result(call_id: str, content: str) -> dict:
    """The tool's answer to the call ``call_id``."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _openai_sessions() -> list[list[dict]]:
    """Two sessions of an agent's Chat Completions history (the unseen-shapes probe's "openai" conversation): the
    system prompt opens each, so the second one follows the user's turn about her partner; tool calls with null
    content and tool results after the user's requests."""
    return [
        [
            {"role": "system", "content": SYSTEM},
            _aroha("Hi! Can you find me a vegan restaurant near Cuba Street for Friday night? Table for three."),
            _call("c1", "restaurant_search", '{"query": "vegan", "near": "Cuba Street, Wellington"}'),
            _result("c1", '{"results": [{"name": "Kiln & Clover", "cuisine": "vegan", "rating": 4.6}]}'),
            _assistant("Kiln & Clover at 112 Cuba Street is fully vegan and rated 4.6. Shall I book it for 7pm?"),
            _aroha("Yes please, 7pm is perfect. I've been vegan for about six years, so always filter for that."),
            _call("c2", "book_table", '{"restaurant": "Kiln & Clover", "time": "19:00", "party_size": 3}'),
            _result("c2", '{"status": "confirmed", "confirmation": "KC-88213"}'),
            _assistant("Booked! Confirmation KC-88213 for three at 7pm on Friday."),
            _aroha("Thanks. Also, my partner Wiremu is gluten-intolerant, keep that in mind for future bookings."),
            _assistant("Noted: vegan for you and gluten-free options for Wiremu."),
        ],
        [
            {"role": "system", "content": SYSTEM},
            _aroha("What's the weather like in Queenstown this weekend? We're heading to Coronet Peak."),
            _call("c3", "get_weather", '{"location": "Queenstown", "days": ["2024-05-25", "2024-05-26"]}'),
            _result("c3", '{"forecast": [{"date": "2024-05-25", "summary": "light snow", "high_c": 3}]}'),
            _assistant("Saturday light snow with a high of 3°C, Sunday clear: good conditions at Coronet Peak."),
            _aroha(
                "Oh, and please remind me that my passport expires in November; I need to renew it before the "
                "Japan trip in January."
            ),
            _call("c4", "reminder_create", '{"text": "Renew passport before Japan trip", "due": "2024-09-01"}'),
            _result("c4", '{"status": "created", "reminder_id": "rem_118"}'),
            _assistant("Reminder set for 1 September to renew your passport."),
        ],
    ]


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("Who is the partner?", 9),  # the repeated system prompt ranked first when it borrowed this turn's words
        ("What is the name of her partner?", 9),
        ("When does the passport expire?", 16),  # the tool result after it, indexed with it, ranked first
    ],
)
def test_a_repeated_system_prompt_and_tool_results_never_outrank_the_users_statement(engine, question, answer):
    uris = [u for session in _openai_sessions() for u in engine.add_messages(session, "compass", SAM).uris]
    hits = engine.search_memory(question, SAM, top_k=3).hits
    assert hits[0].uri == uris[answer], [h.abstract for h in hits]
