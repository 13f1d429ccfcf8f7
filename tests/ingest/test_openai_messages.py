"""OpenAI Chat Completions messages through ``add_messages`` (schema/memory.py ``message_fields``, ingest/memory.py):
an assistant's tool calls with ``content: null``, a tool result with ``tool_call_id`` and the SDK's response message
dump are stored with their text and metadata; the caller's metadata is merged, never overwritten; a real typo is
still refused; and the conversation is indexed by its roles (ingest/conversation.py): the system prompt, the tool
call and the tool result are indexed alone, and the user's turn with the assistant's reply past them."""

from __future__ import annotations

import pytest

from context_engine.errors import ContextEngineError, ErrorCode

CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "restaurant_search", "arguments": '{"area": "Queenstown"}'},
}
TOOL_CALL = {"role": "assistant", "content": None, "tool_calls": [CALL]}
TOOL_RESULT = {"role": "tool", "tool_call_id": "call_1", "content": '{"results": [{"name": "Kiln & Clover"}]}'}
# ChatCompletionMessage.model_dump() (openai 1.x): every field, most of them null or empty
SDK_DUMP = {
    "content": "Kiln & Clover on Cuba Street is fully vegan.",
    "refusal": None,
    "role": "assistant",
    "annotations": [],
    "audio": None,
    "function_call": None,
    "tool_calls": None,
}


@pytest.fixture
def engine(tmp_path):
    from context_engine.service import ContextEngineService
    from context_engine.settings import load_settings
    from tests.retrieval.conftest import HashEmbedder

    e = ContextEngineService(
        load_settings(tmp_path / "home", memory={"max_metadata_bytes": 160}), embedder=HashEmbedder()
    )
    yield e
    e.close()


def _alice():
    from tests.retrieval.conftest import ALICE

    return ALICE


def _stored(engine, uri: str) -> tuple[str, dict]:
    detail = engine.get_memory(uri, _alice())
    md = {k: v for k, v in detail.metadata.items() if k != "session_id"}
    return detail.text, md


def _level0_context(engine, uri: str) -> str:
    rows = engine.metadata.get_vectors(_alice().account_id, [uri])
    return next(r.context for r in rows if r.level == 0)


def test_the_three_openai_shapes_are_stored_with_their_text_and_metadata(engine):
    user = {"role": "user", "name": "Aroha", "content": "Find me a vegan place in Queenstown."}
    uris = engine.add_messages([user, TOOL_CALL, TOOL_RESULT, SDK_DUMP], "s1", _alice()).uris
    assert _stored(engine, uris[1]) == (
        'restaurant_search({"area": "Queenstown"})',
        {"role": "assistant", "speaker": "assistant", "tool_calls": ["restaurant_search"]},
    )
    assert _stored(engine, uris[2]) == (
        '{"results": [{"name": "Kiln & Clover"}]}',
        {"role": "tool", "speaker": "tool", "tool_call_id": "call_1"},
    )
    assert _stored(engine, uris[3]) == (
        "Kiln & Clover on Cuba Street is fully vegan.",
        {"role": "assistant", "speaker": "assistant"},
    )


def test_a_tool_call_with_text_keeps_the_text_first_and_the_callers_metadata(engine):
    msg = dict(TOOL_CALL, content="Let me look.", metadata={"turn": 2})
    uri = engine.add_messages([msg], "s1", _alice()).uris[0]
    assert _stored(engine, uri) == (
        'Let me look.\nrestaurant_search({"area": "Queenstown"})',
        {"turn": 2, "tool_calls": ["restaurant_search"], "role": "assistant", "speaker": "assistant"},
    )


def test_a_real_typo_is_still_refused_with_the_messages_index(engine):
    with pytest.raises(ContextEngineError) as caught:
        engine.add_messages([TOOL_RESULT, dict(SDK_DUMP, tool_cals=[CALL])], "s1", _alice())
    assert caught.value.code is ErrorCode.REQUEST_INVALID
    assert caught.value.details["index"] == 1 and "tool_cals" in caught.value.message


def test_the_messages_fields_win_over_metadata_under_the_same_keys(engine):
    # a message read back from another conversation, an app's own "session_id", a role alias in metadata: the
    # batch is stored, the message's fields say what the engine's keys hold (the caller's value under them goes)
    messages = [
        dict(TOOL_RESULT, metadata={"tool_call_id": "call_9", "k": 1}),
        {"role": "user", "content": "I moved.", "metadata": {"speaker": "Ann", "session_id": "chat-42"}},
        {"role": "user", "content": "To Leeds.", "metadata": {"role": "human", "timestamp": 1714999999000}},
    ]
    uris = engine.add_messages(messages, "s1", _alice()).uris
    assert _stored(engine, uris[0])[1] == {"tool_call_id": "call_1", "k": 1, "role": "tool", "speaker": "tool"}
    assert engine.get_memory(uris[1], _alice()).metadata["session_id"] == "s1"
    assert _stored(engine, uris[1])[1] == {"speaker": "user", "role": "user"}
    assert _stored(engine, uris[2])[1] == {"role": "user", "speaker": "user", "timestamp": 1714999999000}


def test_metadata_that_agrees_with_the_message_is_kept(engine):
    # a stored message's metadata given back (a timestamp written another way is the same instant)
    msg = {
        "role": "user",
        "speaker": "Ann",
        "content": "I moved.",
        "timestamp": "2024-05-06T18:00:00Z",
        "metadata": {"speaker": "Ann", "session_id": "s1", "timestamp": "2024-05-06T18:00:00+00:00", "k": 1},
    }
    uri = engine.add_messages([msg], "s1", _alice()).uris[0]
    assert _stored(engine, uri)[1] == {
        "speaker": "Ann",
        "timestamp": "2024-05-06T18:00:00+00:00",
        "k": 1,
        "role": "user",
    }


def test_the_metadata_size_limit_counts_the_merged_keys(engine):
    # 160 bytes (the fixture's limit): the caller's metadata fits alone, not with the tool call names merged in
    msg = dict(TOOL_CALL, metadata={"note": "x" * 60})
    with pytest.raises(ContextEngineError) as caught:
        engine.add_messages([msg], "s1", _alice())
    assert caught.value.code is ErrorCode.PAYLOAD_TOO_LARGE
    engine.add_messages([dict(TOOL_CALL, metadata={"note": "x" * 20})], "s1", _alice())


def test_system_prompt_tool_call_and_result_are_indexed_alone_and_the_user_turn_with_the_reply(engine):
    system = {"role": "system", "content": "You are Compass, a concise personal assistant."}
    user = {"role": "user", "name": "Aroha", "content": "My partner Wiremu is gluten-intolerant."}
    uris = engine.add_messages([system, user, TOOL_CALL, TOOL_RESULT, SDK_DUMP, system], "s1", _alice()).uris
    contexts = [_level0_context(engine, u) for u in uris]
    # the user's turn: not the system prompt before it, and the assistant's reply past the call and its result
    assert contexts[1] == "assistant: " + SDK_DUMP["content"]
    assert contexts[0] == contexts[2] == contexts[3] == contexts[4] == contexts[5] == ""


def test_a_stored_tool_call_is_known_as_one_in_the_next_batchs_tail(engine):
    # "Yes." answers the question before the call and its result: read from the stored tail, the call is known by
    # its metadata and passed over, so the answer is read with the question
    question = {"role": "assistant", "content": "Shall I book Kiln & Clover for Friday?"}
    engine.add_messages([question, TOOL_CALL, TOOL_RESULT], "s1", _alice())
    uri = engine.add_messages([{"role": "user", "name": "Aroha", "content": "Yes."}], "s1", _alice()).uris[0]
    assert _level0_context(engine, uri) == "assistant: Shall I book Kiln & Clover for Friday?"


def test_a_tool_call_without_a_function_name_fails_the_batch_with_its_index(engine):
    bad = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {}}]}
    with pytest.raises(ContextEngineError) as caught:
        engine.add_messages([{"role": "user", "content": "Book it."}, bad], "s2", _alice())
    assert caught.value.code is ErrorCode.REQUEST_INVALID
    assert caught.value.details["index"] == 1 and "function name" in caught.value.message
    assert engine.list_memories(_alice()).total == 0  # a failing batch writes nothing


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "assistant", "content": "x", "tool_calls": [{"type": ["x"], "function": {"name": "f"}}]},
        {"role": "assistant", "content": "x", "tool_calls": [{"type": {"a": 1}, "function": {"name": "f"}}]},
        {"role": "assistant", "content": "x", "function_call": {"type": [1], "name": "f", "arguments": "{}"}},
        {"role": "assistant", "content": "x", "tool_calls": [{"function": {"name": ["f"]}}]},
        {"role": "assistant", "content": "x", "tool_calls": [{"function": "f"}]},
        {"role": "assistant", "content": "x", "tool_calls": [{"function": {"name": "f", "arguments": {(1,): 2}}}]},
    ],
)
def test_a_tool_call_field_of_the_wrong_type_is_wrt_4002_and_writes_nothing(engine, bad):
    # was a bare TypeError (unhashable type) out of add_messages: a 500 over HTTP, an MCP error without the envelope
    engine.add_messages([{"role": "user", "content": "Book it."}], "s3", _alice())
    before = engine.stats(_alice())["nodes"]
    with pytest.raises(ContextEngineError) as caught:
        engine.add_messages([{"role": "user", "content": "And a table."}, bad], "s3", _alice())
    assert caught.value.code is ErrorCode.REQUEST_INVALID
    assert caught.value.details["index"] == 1
    assert "tool_calls[0]" in caught.value.message or "function_call" in caught.value.message
    assert engine.stats(_alice())["nodes"] == before
    assert engine.list_memories(_alice()).total == 1
