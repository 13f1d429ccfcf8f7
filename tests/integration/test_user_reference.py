"""A question about the user in the third person, over a named user's turns and an assistant that echoes them
(issue 25): "Where does she work?" is answered by the user's own statement, not the assistant's echo or advice
(``speakers.refers_to_user``, ``L0Retriever``), and an echo never supersedes the statement it repeats
(``current_state.supersede``). The default model, a real home."""

from __future__ import annotations

import pytest

from context_engine.schema.context import RequestContext
from context_engine.settings import load_settings

MARTA = RequestContext(account_id="default", role="user", user_space="marta", agent_space="helper")


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "speaker": "Marta", "content": text}


def _assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


MESSAGES = (
    _user("I've just started as a pharmacist at the Riverside hospital."),
    _assistant(
        "Congratulations on the new role at Riverside! Hospital pharmacy work is varied, and a good place to build "
        "your career."
    ),
    _user("My favourite trail shoes are the Salomon Speedcross, I'm on my second pair."),
    _assistant("Speedcross shoes grip well on muddy trails; runners who work long shifts often love them."),
    _user("Also, I switched from coffee to green tea in the mornings."),
    _assistant("Switching from coffee to green tea is a nice change: it still has caffeine, released more gently."),
)


@pytest.fixture(scope="module")
def engine(tmp_path_factory, default_embedder):
    from context_engine.service import ContextEngineService

    e = ContextEngineService(load_settings(tmp_path_factory.mktemp("home")), embedder=default_embedder)
    e.add_messages(list(MESSAGES), conversation_id="s1", ctx=MARTA)
    yield e
    e.close()


def _first(engine, question: str, **kw):
    r = engine.search_memory(question, MARTA, top_k=5, include_debug=True, trace_level="detailed", **kw)
    return r.hits[0].abstract, r.thinking_trace["events"]


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        # without the rule the assistant's echo comes first for these two (measured: "the user" names no
        # speaker when the user is stored as "Marta")
        ("Where does the user work?", "Marta: I've just started as a pharmacist"),
        ("What does the user drink now?", "Marta: Also, I switched from coffee"),
        ("Where does she work?", "Marta: I've just started as a pharmacist"),
        ("What is her job?", "Marta: I've just started as a pharmacist"),
        ("Which trail shoes does she like?", "Marta: My favourite trail shoes"),
        ("What does she drink in the morning now?", "Marta: Also, I switched from coffee"),
    ],
)
def test_the_users_own_statement_answers_a_question_about_the_user(engine, question, answer):
    first, events = _first(engine, question)
    assert first.startswith(answer)
    messages = [e for e in events if e["event"] == "messages" and e.get("user_reference")]
    assert messages and messages[0]["named"] == ["Marta"]
