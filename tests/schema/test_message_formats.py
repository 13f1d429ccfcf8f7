"""Message formats (issue 29 item 3): OpenAI chat messages (``name``, content parts, ``developer``, tool calls and tool
results, the SDK's response message), the Responses API's input items, and LangChain's messages (``human``/``ai``
types, the ``messages_to_dict`` form, message objects) map onto our ``Message`` fields; the mapping is one function
used by every entry point."""

from __future__ import annotations

from types import SimpleNamespace

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
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "I moved"},
                    {"type": "image_url", "image_url": {}},
                    {"type": "text", "text": "to Lisbon."},
                ],
            },
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
        {"role": "user", "content": "x", "tool_call": []},  # a field with no place in a memory is refused at top level
        {"role": "user", "contnet": "typo"},
        {"role": "assistant", "content": "x", "tool_calls": [], "refusals": None},  # a typo beside OpenAI's fields
        # an OpenAI field on a role that never carries it is no OpenAI message: refused, not dropped
        {"role": "user", "content": "x", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
        {"role": "assistant", "content": "x", "tool_call_id": "call_1"},
        {"type": "human", "role": "user", "content": "both"},  # type is the role only when role is absent
    ],
)
def test_unknown_fields_are_still_refused(raw):
    with pytest.raises(ValidationError):
        Message.model_validate(raw)


def test_other_values_pass_through_for_validation_to_refuse():
    assert message_fields("text") == "text"
    assert message_fields(None) is None


CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "restaurant_search", "arguments": '{"area": "Queenstown"}'},
}


def test_an_assistant_tool_call_without_content_is_its_calls_one_line_each():
    second = {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    msg = Message.model_validate({"role": "assistant", "content": None, "tool_calls": [CALL, second]})
    assert msg.content == 'restaurant_search({"area": "Queenstown"})\nget_weather({})'
    assert msg.metadata == {"tool_calls": ["restaurant_search", "get_weather"]}


def test_tool_calls_follow_the_text_and_merge_with_the_callers_metadata():
    raw = {"role": "assistant", "content": "Let me look.", "tool_calls": [CALL], "metadata": {"turn": 3}}
    msg = Message.model_validate(raw)
    assert msg.content == 'Let me look.\nrestaurant_search({"area": "Queenstown"})'
    assert msg.metadata == {"turn": 3, "tool_calls": ["restaurant_search"]}
    assert raw["metadata"] == {"turn": 3}  # the caller's dict is not changed


def test_legacy_function_call_and_custom_tool_calls_are_rendered_too():
    legacy = {"role": "assistant", "content": None, "function_call": {"name": "lookup", "arguments": '{"q": 1}'}}
    custom = {
        "role": "assistant",
        "tool_calls": [{"id": "c", "type": "custom", "custom": {"name": "sql", "input": "x"}}],
    }
    assert Message.model_validate(legacy).content == 'lookup({"q": 1})'
    assert Message.model_validate(custom).model_dump(include={"content", "metadata"}) == {
        "content": "sql(x)",
        "metadata": {"tool_calls": ["sql"]},
    }


def test_a_tool_result_keeps_its_tool_call_id_in_metadata():
    msg = Message.model_validate({"role": "tool", "tool_call_id": "call_1", "content": '{"results": []}'})
    assert (msg.role, msg.speaker, msg.content) == ("tool", None, '{"results": []}')
    assert msg.metadata == {"tool_call_id": "call_1"}


def test_the_sdk_response_message_dump_is_accepted_and_its_empty_fields_dropped():
    # ChatCompletionMessage.model_dump() (openai 1.x): every field present, most of them null or empty
    dump = {
        "content": None,
        "refusal": None,
        "role": "assistant",
        "annotations": [],
        "audio": None,
        "function_call": None,
        "tool_calls": [CALL],
    }
    msg = Message.model_validate(dump)
    assert msg.content == 'restaurant_search({"area": "Queenstown"})'
    assert msg.metadata == {"tool_calls": ["restaurant_search"]}
    text = dict(dump, content="Kiln & Clover is vegan.", tool_calls=None)
    assert Message.model_validate(text).model_dump(include={"content", "metadata"}) == {
        "content": "Kiln & Clover is vegan.",
        "metadata": None,
    }


def test_a_refusal_or_an_audio_transcript_is_the_text_when_there_is_no_content():
    refusal = {"role": "assistant", "content": None, "refusal": "I can't help with that.", "annotations": None}
    assert Message.model_validate(refusal).content == "I can't help with that."
    audio = {"role": "assistant", "content": None, "audio": {"id": "a1", "data": "UklGR...", "transcript": "Hello."}}
    assert Message.model_validate(audio).content == "Hello."
    # citations point into the text that is kept: dropped, whatever they hold
    cited = {
        "role": "assistant",
        "content": "See the docs.",
        "annotations": [{"type": "url_citation", "url_citation": {}}],
    }
    assert Message.model_validate(cited).content == "See the docs."


def test_the_messages_tool_fields_are_set_in_metadata_over_the_callers_value():
    same = {"role": "tool", "tool_call_id": "call_1", "content": "ok", "metadata": {"tool_call_id": "call_1"}}
    assert Message.model_validate(same).metadata == {"tool_call_id": "call_1"}
    assert Message.model_validate(dict(same, metadata={"tool_call_id": "other", "k": 1})).metadata == {
        "tool_call_id": "call_1",
        "k": 1,
    }
    mine = {"role": "assistant", "tool_calls": [CALL], "metadata": {"tool_calls": "mine"}}
    assert Message.model_validate(mine).metadata == {"tool_calls": ["restaurant_search"]}


@pytest.mark.parametrize(
    "raw",
    [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {}}]},
        {"role": "assistant", "content": None, "tool_calls": "restaurant_search"},
        {"role": "tool", "tool_call_id": 7, "content": "ok"},
    ],
)
def test_malformed_tool_calls_are_refused(raw):
    with pytest.raises(ValidationError):
        Message.model_validate(raw)


_CYCLE: dict = {}
_CYCLE["self"] = _CYCLE
_DEEP: list = []
for _ in range(5000):
    _DEEP = [_DEEP]


@pytest.mark.parametrize(
    ("field", "call", "says"),
    [
        ("tool_calls", {"type": ["x"], "function": {"name": "f"}}, "tool_calls[0]: a tool call's type must be text"),
        ("tool_calls", {"type": {"a": 1}, "function": {"name": "f"}}, "type must be text, got dict"),
        ("tool_calls", {"type": 5, "name": "f"}, "type must be text, got int"),
        ("tool_calls", {"type": "function", "function": ["f"]}, "'function' must be an object"),
        ("tool_calls", {"type": "custom", "custom": "f"}, "'custom' must be an object"),
        ("tool_calls", {"function": {"name": 5}}, "function name must be text, got int"),
        ("tool_calls", {"function": {"name": ["f"]}}, "function name must be text, got list"),
        ("tool_calls", {"function": {"name": "f", "arguments": {(1, 2): 3}}}, "arguments of tool call 'f'"),
        ("tool_calls", {"function": {"name": "f", "arguments": _CYCLE}}, "arguments of tool call 'f'"),
        ("tool_calls", {"function": {"name": "f", "arguments": _DEEP}}, "arguments of tool call 'f'"),
        ("function_call", {"type": [1], "name": "f", "arguments": "{}"}, "function_call: a tool call's type"),
        ("function_call", ["f"], "function_call: a tool call must be an object"),
    ],
)
def test_a_tool_call_field_of_the_wrong_type_is_a_value_error_naming_it(field, call, says):
    # a list or an object where text is expected used to escape as a TypeError (unhashable type): a 500 over HTTP
    raw = {"role": "assistant", "content": "x", field: [call] if field == "tool_calls" else call}
    with pytest.raises(ValueError) as caught:
        message_fields(raw)
    assert says in str(caught.value)
    with pytest.raises(ValidationError):
        Message.model_validate(raw)


def test_a_second_call_names_its_own_position():
    calls = [{"function": {"name": "f"}}, {"type": ["x"], "function": {"name": "g"}}]
    with pytest.raises(ValueError, match=r"^tool_calls\[1\]: "):
        message_fields({"role": "assistant", "content": None, "tool_calls": calls})


def test_arguments_of_any_json_type_are_still_written_as_compact_json():
    for args, line in ((None, "f(null)"), (3, "f(3)"), ([1, "a"], 'f([1,"a"])'), ({"a": {"b": 1}}, 'f({"a":{"b":1}})')):
        raw = {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": args}}]}
        assert message_fields(raw)["content"] == line


def test_mapping_is_idempotent_for_openai_messages():
    raw = {"role": "assistant", "content": None, "tool_calls": [CALL], "refusal": None, "metadata": {"turn": 1}}
    once = message_fields(raw)
    assert message_fields(once) == once


def test_langchain_tool_calls_and_tool_results_are_read_as_openais():
    # LangChain's shapes (AIMessage.tool_calls: name/args/id; ToolMessage.tool_call_id), as objects and in the
    # messages_to_dict form; langchain_core is not a dependency: plain objects with the same attributes
    ai = SimpleNamespace(
        type="ai", content="", name=None, tool_calls=[{"name": "search", "args": {"q": "Lisbon"}, "id": "c1"}]
    )
    tool = SimpleNamespace(type="tool", content="3 results", name="search", tool_call_id="c1")
    assert Message.model_validate(ai).model_dump(include={"role", "content", "metadata"}) == {
        "role": "assistant",
        "content": 'search({"q":"Lisbon"})',
        "metadata": {"tool_calls": ["search"]},
    }
    assert Message.model_validate(tool).metadata == {"tool_call_id": "c1"}
    as_dict = {"type": "ai", "data": {"content": "Looking.", "tool_calls": ai.tool_calls, "id": "run-1"}}
    assert Message.model_validate(as_dict).content == 'Looking.\nsearch({"q":"Lisbon"})'
    human = SimpleNamespace(type="human", content="Hi", name=None)  # no tool attributes at all
    assert Message.model_validate(human).metadata is None


def test_responses_api_function_call_items_are_a_tool_call_and_its_result():
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "call_1", "output": '{"temp": 14}', "timestamp": 1700000000}
    assert Message.model_validate(dict(call, status="completed")).model_dump(
        include={"role", "content", "metadata"}
    ) == {
        "role": "assistant",
        "content": "get_weather({})",
        "metadata": {"tool_calls": ["get_weather"]},
    }
    result = Message.model_validate(output)
    assert (result.role, result.content, result.metadata, result.timestamp) == (
        "tool",
        '{"temp": 14}',
        {"tool_call_id": "call_1"},
        1700000000,
    )
    with pytest.raises(ValidationError):  # a call without a function name is still refused
        Message.model_validate({"type": "function_call", "call_id": "c", "arguments": "{}"})
