"""Conformance suite for the ContentStore protocol (ContextFS). Every adapter must pass it: ``local`` always, ``s3``
on the endpoint of ``bash scripts/services.sh up seaweedfs`` (skipped when it is not running). The ``content_store``
fixture is in tests/storage/conftest.py."""

import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import Level
from context_engine.storage.protocols import ContentStore


def test_is_a_content_store(content_store):
    assert isinstance(content_store, ContentStore)


def test_write_and_read_each_level(content_store):
    uri = "ctx://resources/k8s/pod.md"
    content_store.write_levels("a", uri, {Level.L0: "abstract", Level.L1: "overview", Level.L2: "# body\ntext"})
    assert content_store.read_level("a", uri, Level.L0) == "abstract"
    assert content_store.read_level("a", uri, Level.L1) == "overview"
    assert content_store.read_level("a", uri, Level.L2) == "# body\ntext"


def test_missing_node_and_level_read_as_none(content_store):
    assert content_store.read_level("a", "ctx://resources/none.md", Level.L0) is None
    content_store.write_levels("a", "ctx://resources/d/", {Level.L0: "dir"})
    assert content_store.read_level("a", "ctx://resources/d/", Level.L2) is None


def test_none_removes_a_level_and_overwrite_replaces(content_store):
    uri = "ctx://resources/x.md"
    content_store.write_levels("a", uri, {Level.L0: "one", Level.L1: "ov"})
    content_store.write_levels("a", uri, {Level.L0: "two", Level.L1: None})
    assert content_store.read_level("a", uri, Level.L0) == "two"
    assert content_store.read_level("a", uri, Level.L1) is None


def test_accounts_are_isolated(content_store):
    content_store.write_levels("a", "ctx://resources/x.md", {Level.L0: "A"})
    content_store.write_levels("b", "ctx://resources/x.md", {Level.L0: "B"})
    assert content_store.read_level("a", "ctx://resources/x.md", Level.L0) == "A"
    assert content_store.read_level("b", "ctx://resources/x.md", Level.L0) == "B"
    content_store.delete("a", "ctx://resources/x.md")
    assert content_store.read_level("b", "ctx://resources/x.md", Level.L0) == "B"


def test_delete_removes_subtree_and_ignores_missing(content_store):
    content_store.write_levels("a", "ctx://resources/d/", {Level.L0: "d"})
    content_store.write_levels("a", "ctx://resources/d/x.md", {Level.L2: "x"})
    content_store.write_levels("a", "ctx://resources/dd/y.md", {Level.L2: "y"})
    content_store.delete("a", "ctx://resources/d/")
    assert content_store.read_level("a", "ctx://resources/d/x.md", Level.L2) is None
    assert content_store.read_level("a", "ctx://resources/dd/y.md", Level.L2) == "y"
    content_store.delete("a", "ctx://resources/never/")


def test_move_carries_subtree_and_refuses_to_overwrite(content_store):
    content_store.write_levels("a", "ctx://resources/d/x.md", {Level.L2: "x"})
    content_store.write_levels("a", "ctx://resources/e/", {Level.L0: "e"})
    content_store.move("a", "ctx://resources/d/", "ctx://resources/f/g/")
    assert content_store.read_level("a", "ctx://resources/f/g/x.md", Level.L2) == "x"
    assert content_store.read_level("a", "ctx://resources/d/x.md", Level.L2) is None
    with pytest.raises(ContextEngineError) as exc:
        content_store.move("a", "ctx://resources/f/", "ctx://resources/e/")
    assert exc.value.code is ErrorCode.CONFLICT


def test_cjk_and_unicode_round_trip(content_store):
    uri = "ctx://user/张三/memories/偏好/咖啡.md"
    content_store.write_levels("a", uri, {Level.L0: "喜欢美式咖啡", Level.L2: "emoji ☕ and CJK 文本"})
    assert content_store.read_level("a", uri, Level.L0) == "喜欢美式咖啡"
    assert content_store.read_level("a", uri, Level.L2) == "emoji ☕ and CJK 文本"


def test_no_temporary_files_left_behind(content_backend):
    store = content_backend.open()
    store.write_levels("a", "ctx://resources/x.md", {Level.L0: "a", Level.L1: "b", Level.L2: "c"})
    assert content_backend.raw() == [f"a/resources/x.md/{n}" for n in (".abstract.md", ".content.md", ".overview.md")]


def test_layout_mirrors_the_uri(content_backend):
    """Both stores keep one folder (key prefix) per node under ``<account>/<scope>/[<space>/]<segments>``."""
    store = content_backend.open()
    store.write_levels("a", "ctx://user/u1/memories/prefs/", {Level.L0: "dir"})
    store.write_levels("a", "ctx://user/u1/memories/prefs/tea.md", {Level.L2: "green"})
    assert content_backend.raw() == [
        "a/user/u1/memories/prefs/.abstract.md",
        "a/user/u1/memories/prefs/tea.md/.content.md",
    ]


def test_node_uris_and_exists(content_store):
    content_store.write_levels("a", "ctx://resources/d/", {Level.L0: "d"})
    content_store.write_levels("a", "ctx://resources/d/x.md", {Level.L0: "x0", Level.L2: "x"})
    content_store.write_levels("a", "ctx://resources/d/e/y.md", {Level.L2: "y"})  # e/ has no level of its own
    content_store.write_levels("b", "ctx://resources/z.md", {Level.L2: "z"})
    assert content_store.node_uris("a") == ["ctx://resources/d/", "ctx://resources/d/e/y.md", "ctx://resources/d/x.md"]
    assert content_store.node_uris("c") == []
    assert content_store.exists("a", "ctx://resources/d/e/") and not content_store.exists("a", "ctx://resources/q/")


def test_a_second_store_on_the_same_root_sees_the_writes(content_backend):
    first, second = content_backend.open(), content_backend.open()
    first.write_levels("a", "ctx://resources/x.md", {Level.L2: "v1"})
    assert second.read_level("a", "ctx://resources/x.md", Level.L2) == "v1"  # read-after-write, across clients
    second.write_levels("a", "ctx://resources/x.md", {Level.L2: "v2"})
    assert first.read_level("a", "ctx://resources/x.md", Level.L2) == "v2"


def test_the_owner_stamp_round_trips_and_is_no_account(content_store):
    assert content_store.read_stamp() is None
    content_store.write_levels("acme", "ctx://resources/a.md", {Level.L0: "a", Level.L2: "body"})
    content_store.write_stamp("0123abcd")
    assert content_store.read_stamp() == "0123abcd"
    content_store.write_stamp("feedbeef")  # replaced whole
    assert content_store.read_stamp() == "feedbeef"
    assert content_store.account_ids() == ["acme"]
    assert content_store.node_uris("acme") == ["ctx://resources/a.md"]
