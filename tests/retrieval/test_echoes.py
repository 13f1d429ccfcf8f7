"""The assistant's echo of what the user said ranks below the user's statement (issue 25, role-aware ranking):
recognised by the words it shares with the statement just before it (retrieval/replies.py ``echoes``,
``prefer_sources``)."""

from __future__ import annotations

import pytest

from context_engine.retrieval.replies import echoes, prefer_sources
from context_engine.schema.hits import NodeHit
from tests.retrieval.messages import message_hit, roles_of

WORKER = "The worker reads its settings from /etc/orbit/worker.yaml on the box, not from env vars."


@pytest.mark.parametrize(
    ("reply", "source", "expected"),
    [
        ("Noted, the worker config lives at /etc/orbit/worker.yaml.", WORKER, True),
        (
            "Got it, Dev is an A&E nurse and Kiran is the paramedic.",
            "Correction: he's a nurse in A&E, not a paramedic. I always say paramedic because his brother Kiran is"
            " one.",
            True,
        ),
        ("Noted, Callum as emergency contact.", "Emergency contact is my brother Callum, 07700 900 812.", True),
        # the reply adds to the statement, answers a question, or shares nothing with it
        (
            "Cocker spaniels are affectionate but need a lot of exercise and grooming.",
            "We're thinking of getting a dog, probably a cocker spaniel.",
            False,
        ),
        ("Lima is the capital of Peru.", "What is the capital of Peru?", False),
        ("Rooibos is caffeine-free.", "I switched to rooibos.", False),
        ("Noted!", "I switched to rooibos.", False),
        # a report of what the assistant did is the record of the request, never an echo of it
        ("I've booked the Harbourside Inn for the 28th.", "Please book the Harbourside Inn for the 28th.", False),
    ],
)
def test_an_echo_restates_the_statement_before_it(reply, source, expected):
    assert echoes(reply, source, ["Priya"]) is expected


def _hit(seq: int, score: float, abstract: str) -> NodeHit:
    return message_hit("priya", seq, score, abstract)


_roles = roles_of


def test_the_statement_ranks_just_above_its_echo():
    said = _hit(7, 0.41, f"Priya: {WORKER}")
    echo = _hit(8, 0.52, "assistant: Noted, the worker config lives at /etc/orbit/worker.yaml.")
    other = _hit(3, 0.30, "assistant: Noted, your locker code is 4471.")
    assert prefer_sources([echo, said, other], 0.15, _roles(7)) == 1
    assert said.score == pytest.approx(0.5201) and echo.score == 0.52 and other.score == 0.30


def test_a_statement_far_below_a_message_not_next_to_it_or_of_another_role_is_left_alone():
    echo = _hit(8, 0.52, "assistant: Noted, the worker config lives at /etc/orbit/worker.yaml.")
    far = _hit(7, 0.30, f"Priya: {WORKER}")
    assert prefer_sources([echo, far], 0.15, _roles(7)) == 0 and far.score == 0.30  # 0.22 below
    said = _hit(7, 0.45, f"Priya: {WORKER}")
    assert prefer_sources([echo, said], 0.0, _roles(7)) == 0  # switched off
    assert prefer_sources([echo, said], 0.15, None) == 0
    assert prefer_sources([echo, said], 0.15, _roles()) == 0  # stored as a tool's or a system's message
    earlier = _hit(6, 0.45, f"Priya: {WORKER}")
    assert prefer_sources([echo, earlier], 0.15, _roles(6)) == 0  # not the message the echo replies to
    assert said.score == earlier.score == 0.45
