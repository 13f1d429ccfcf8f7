"""Message formats (issue 29 item 3): OpenAI chat messages (``name``, content parts, ``developer``), the Responses API's
input items, and LangChain's messages (``human``/``ai`` types, the ``messages_to_dict`` form, message objects) map
onto our ``Message`` fields; the mapping is one function used by every entry point."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from context_engine.schema.memory import Message, message_fields


@pytest.mark.parametrize(
    ("raw", "role", "speaker", "content"),
    [
        ({"role": "user", "content": "I moved to Lisbon."}, "user", None, "I moved to Lisbon."),
        ({"role": "user", "name": "Sam", "content": "I moved to Lisbon."}, "user", "Sam", "I moved to Lisbon."),
        ({"role": "user", "name": "Sam", "speaker": "Samuel", "content": "x y"}, "user", "Samuel", "x y"),
        (
            {"role": "user", "content": [{"type": "text", "text": "I moved"}, {"type": "image_url", "image_url": {}},
                                         {"type": "text", "text": "to Lisbon."}]},
            "user",
            None,
            "I moved\nto Lisbon.",
        ),
        ({"role": "developer", "content": "Be brief."}, "system", None, "Be brief."),
        ({"role": "function", "name": "weather", "content": "18 C"}, "tool", "weather", "18 C"),
        (
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Noted."}]},
            "assistant",
            None,
            "Noted.",
        ),
        ({"type": "human", "content": "I moved to Lisbon."}, "user", None, "I moved to Lisbon."),
        ({"type": "ai", "content": "Noted."}, "assistant", None, "Noted."),
        (
            {"type": "human", "data": {"content": "I moved.", "name": "Sam", "additional_kwargs": {}, "id": None}},
            "user",
            "Sam",
            "I moved.",
        ),
        ({"role": "Human", "content": "hi there"}, "user", None, "hi there"),
        ({"role": "AI", "content": "hello"}, "assistant", None, "hello"),
    ],
)
def test_common_formats_map_onto_message_fields(raw, role, speaker, content):
    msg = Message.model_validate(raw)
    assert (msg.role, msg.speaker, msg.content) == (role, speaker, content)


def test_langchain_message_objects_are_read_by_their_type_content_and_name():
    messages = pytest.importorskip("langchain_core.messages")
    human = Message.model_validate(message_fields(messages.HumanMessage("I moved to Lisbon.", name="Sam")))
    ai = Message.model_validate(message_fields(messages.AIMessage("Noted.")))
    system = Message.model_validate(message_fields(messages.SystemMessage("Be brief.")))
    assert (human.role, human.speaker, human.content) == ("user", "Sam", "I moved to Lisbon.")
    assert (ai.role, ai.speaker, system.role) == ("assistant", None, "system")


@pytest.mark.parametrize(
    "raw",
    [
        {"role": "user", "content": "x", "tool_calls": []},  # a field with no place in a memory is refused at top level
        {"role": "user", "contnet": "typo"},
        {"type": "human", "role": "user", "content": "both"},  # type is the role only when role is absent
    ],
)
def test_unknown_fields_are_still_refused(raw):
    with pytest.raises(ValidationError):
        Message.model_validate(raw)


def test_other_values_pass_through_for_validation_to_refuse():
    assert message_fields("text") == "text"
    assert message_fields(None) is None
