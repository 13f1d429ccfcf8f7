"""The S3 content store around the conformance suite (storage/content/s3.py, storage/factory.py): the start-up probe
(CFG-4001 naming ``content.url`` and the endpoint, never the secret, nothing created), malformed settings, and a
failing object-store call mid-request (WRT-5001, retryable, counted). The conformance and journal suites run the
store itself (test_content_conformance.py, test_content_journal.py)."""

from __future__ import annotations

import socket

import obstore
import pytest
from obstore.store import MemoryStore

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import Level
from context_engine.settings import Settings
from context_engine.storage.content.s3 import S3ContentStore
from context_engine.storage.factory import open_content
from tests.s3_store import drop_prefix, s3_content_settings, s3_keys

SECRET = "sEcReT-never-shown-0123456789abcdef"


@pytest.fixture
def closed_port():
    """A port on 127.0.0.1 bound and not listening for the test's length: a connection is refused, and no other
    process can take the port meanwhile (a port merely free when chosen can be)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def _assert_secret_hidden(err: ContextEngineError, secret: str = SECRET) -> None:
    shown = [str(err), repr(err.details), err.message]
    cause = err.__cause__
    while cause is not None:  # a traceback in a log prints the causes too
        shown.append(str(cause))
        cause = cause.__cause__
    assert not [s for s in shown if secret in s]


def _open_unreachable(tmp_path, endpoint: str, url: str) -> ContextEngineError:
    """The error of opening an S3 content store at ``url`` through ``endpoint``, where nothing listens."""
    settings = Settings(
        home=tmp_path / "home",
        content={
            "url": url,
            "s3_endpoint": endpoint,
            "s3_access_key_id": "AKIDEXAMPLE",
            "s3_secret_access_key": SECRET,
            "timeout_s": 2,
        },
    )
    with pytest.raises(ContextEngineError) as info:
        open_content(settings)
    return info.value


def test_an_unreachable_endpoint_fails_at_start_naming_the_setting_and_the_address(tmp_path, closed_port):
    endpoint = f"http://127.0.0.1:{closed_port}"  # nothing listens there
    err = _open_unreachable(tmp_path, endpoint, "s3://bucket/ce")
    assert err.code is ErrorCode.CONFIG_INVALID and not err.retryable
    assert err.message.startswith("content.url: cannot use s3://bucket/ce at " + endpoint)
    assert "cannot be reached" in err.message and err.details["setting"] == "content.url"
    _assert_secret_hidden(err)
    assert not (tmp_path / "home").exists()  # nothing created


def test_a_port_or_prefix_holding_403_or_404_is_not_read_as_the_server_s_answer(tmp_path):
    """The request's URL is in the error text: a refused connection to port 40403 under a prefix "404-401" is still
    "cannot be reached", never refused credentials or a missing bucket (a CI run once met port 40363). The port is
    fixed, since its digits are the point; held bound (not listening) meanwhile, and skipped on a machine where
    another process uses it."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", 40403))
        except OSError:
            pytest.skip("port 40403 is in use on this machine")
        err = _open_unreachable(tmp_path, "http://127.0.0.1:40403", "s3://bucket404/404-401")
    assert err.code is ErrorCode.CONFIG_INVALID
    assert err.message.endswith("the endpoint cannot be reached (content.s3_endpoint)")


@pytest.mark.parametrize(
    ("content", "setting"),
    [
        ({"url": "s3:///no-bucket"}, "content.url"),
        ({"url": f"s3://AKID:{SECRET}@bucket/p"}, "content.url"),  # credentials in the URL: refused, not shown
        ({"url": "s3://bucket/p?x=1"}, "content.url"),
        ({"url": "s3://bucket/p", "s3_endpoint": "ftp://127.0.0.1:1"}, "content.s3_endpoint"),
        ({"url": "s3://bucket/p", "s3_endpoint": f"http://user:{SECRET}@127.0.0.1:1"}, "content.s3_endpoint"),
        ({"url": "gs://bucket/p"}, "content.url"),
    ],
)
def test_malformed_s3_settings_are_refused_without_showing_a_credential(content, setting):
    with pytest.raises(ContextEngineError) as info:
        open_content(Settings(content=content))
    assert info.value.code is ErrorCode.CONFIG_INVALID and info.value.message.startswith(setting)
    _assert_secret_hidden(info.value)


def test_the_secret_is_never_in_the_settings_repr_or_dump():
    settings = Settings(content={"url": "s3://b/p", "s3_access_key_id": "AKIDEXAMPLE", "s3_secret_access_key": SECRET})
    assert SECRET not in repr(settings) and SECRET not in settings.model_dump_json()
    assert SECRET not in repr(S3ContentStore(MemoryStore(), "p", location="s3://b/p"))


# ---- a failing object-store call (obstore's in-memory store, with one call made to fail) ----------------------------


class _FailingPut:
    """``obstore.put`` failing from its ``fail_at``-th call on, as a dropped connection does (GenericError)."""

    def __init__(self, real, fail_at: int) -> None:
        self.real, self.fail_at, self.calls = real, fail_at, 0

    def __call__(self, store, path, data, **kw):
        self.calls += 1
        if self.calls >= self.fail_at:
            raise obstore.exceptions.GenericError(f"Generic S3 error: Error performing PUT {path}: connection reset")
        return self.real(store, path, data, **kw)


def test_a_failing_put_raises_a_retryable_storage_error_and_is_counted(monkeypatch):
    failures: list[str] = []
    store = S3ContentStore(MemoryStore(), "p", location="s3://b/p", on_failure=failures.append)
    uri = "ctx://resources/x.md"
    store.write_levels("a", uri, {Level.L0: "old0", Level.L2: "old2"})
    monkeypatch.setattr(obstore, "put", _FailingPut(obstore.put, fail_at=2))
    with pytest.raises(ContextEngineError) as info:
        store.write_levels("a", uri, {Level.L0: "new0", Level.L2: "new2"})
    assert info.value.code is ErrorCode.STORAGE_FAILED and info.value.retryable
    assert info.value.message.startswith("content store put failed for p/a/resources/x.md/.content.md in s3://b/p")
    assert failures == ["put"]
    # one PUT is atomic: the level that failed is the old one, the one before it the new one (the write protocol's
    # undo records put it back: tests/integration/test_s3_content_store.py)
    assert [store.read_level("a", uri, lv) for lv in (Level.L0, Level.L2)] == ["new0", "old2"]


def test_a_rollback_that_fails_part_way_is_completed_by_the_next_one(monkeypatch):
    store = S3ContentStore(MemoryStore(), "p")
    uri = "ctx://resources/x.md"
    store.write_levels("a", uri, {Level.L0: "old0", Level.L1: "old1"})
    store.stash("1", "a", uri)
    store.write_levels("a", uri, {Level.L0: "new0", Level.L1: None})
    store.delete_journaled("1", "a", "ctx://resources/")
    real_copy, calls = obstore.copy, []

    def copy_then_fail(*args, **kw):
        calls.append(args[1:3])
        if len(calls) == 2:
            raise obstore.exceptions.GenericError("connection reset")
        return real_copy(*args, **kw)

    monkeypatch.setattr(obstore, "copy", copy_then_fail)
    with pytest.raises(ContextEngineError):
        store.rollback("1")
    monkeypatch.undo()
    store.rollback("1")
    assert [store.read_level("a", uri, lv) for lv in (Level.L0, Level.L1)] == ["old0", "old1"]
    assert store.journal_ids() == []
    assert s3_keys(store) == ["a/resources/x.md/.abstract.md", "a/resources/x.md/.overview.md"]


# ---- on the seaweedfs endpoint ------------------------------------------------------------------------------------


@pytest.fixture
def s3_content():
    content = s3_content_settings("probe")
    yield content
    drop_prefix(content)


def test_wrong_credentials_fail_at_start_and_create_nothing(s3_content, tmp_path):
    wrong = dict(s3_content, s3_secret_access_key=SECRET)
    with pytest.raises(ContextEngineError) as info:
        open_content(Settings(home=tmp_path / "home", content=wrong))
    err = info.value
    assert err.code is ErrorCode.CONFIG_INVALID and "credentials were refused" in err.message
    assert err.message.startswith(f"content.url: cannot use {s3_content['url']} at {s3_content['s3_endpoint']}")
    _assert_secret_hidden(err)
    _assert_secret_hidden(err, s3_content["s3_secret_access_key"])
    assert s3_keys(open_content(Settings(content=s3_content))) == []


def test_a_missing_bucket_fails_at_start_and_is_not_created(s3_content, tmp_path):
    missing = dict(s3_content, url="s3://ce-no-such-bucket/p")
    for _ in range(2):  # the second probe finds it still missing: the first created nothing
        with pytest.raises(ContextEngineError) as info:
            open_content(Settings(home=tmp_path / "home", content=missing))
        assert info.value.code is ErrorCode.CONFIG_INVALID and "bucket does not exist" in info.value.message
        _assert_secret_hidden(info.value, s3_content["s3_secret_access_key"])


def test_credentials_from_the_standard_aws_variables(s3_content, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_content["s3_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_content["s3_secret_access_key"])
    bare = {k: v for k, v in s3_content.items() if not k.startswith("s3_access") and not k.startswith("s3_secret")}
    store = open_content(Settings(content=bare))
    store.write_levels("a", "ctx://resources/x.md", {Level.L2: "via AWS_*"})
    assert store.read_level("a", "ctx://resources/x.md", Level.L2) == "via AWS_*"


class _Crash(BaseException):
    """Stands for a SIGKILL: nothing after it runs (not an Exception, so no handler in the store catches it)."""


def _crash_at(monkeypatch, name: str, nth: int) -> list[int]:
    """Make ``obstore.<name>`` raise :class:`_Crash` on its ``nth`` call (1-based); returns the call counter."""
    real, calls = getattr(obstore, name), [0]

    def call(*args, **kw):
        calls[0] += 1
        if calls[0] == nth:
            raise _Crash(name)
        return real(*args, **kw)

    monkeypatch.setattr(obstore, name, call)
    return calls


def _objects(memory: MemoryStore) -> dict[str, bytes]:
    return {m["path"]: bytes(obstore.get(memory, m["path"]).bytes()) for b in obstore.list(memory) for m in b}


def _seeded() -> tuple[MemoryStore, S3ContentStore]:
    memory = MemoryStore()
    store = S3ContentStore(memory, "p")
    store.write_levels("a", "ctx://resources/d/", {Level.L0: "d0", Level.L1: "d1"})
    for name in ("x", "y", "z"):
        store.write_levels("a", f"ctx://resources/d/{name}.md", {Level.L0: f"{name}0", Level.L2: f"{name}2"})
    return memory, store


@pytest.mark.parametrize("op", ["move", "delete"])
@pytest.mark.parametrize("call", ["copy", "delete", "put"])
def test_a_crash_at_any_object_of_a_journaled_move_or_delete_is_rolled_back_by_the_next_process(monkeypatch, op, call):
    """S3 has no rename: a move or delete is many calls. Whichever call the writer dies at, a new store object (the
    next process) rolls the write back to exactly the objects there were before."""
    for nth in range(1, 12):
        memory, store = _seeded()
        before = _objects(memory)
        calls = _crash_at(monkeypatch, call, nth)
        try:
            if op == "move":
                store.move_journaled("1", "a", "ctx://resources/d/", "ctx://resources/e/f/")
            else:
                store.delete_journaled("1", "a", "ctx://resources/d/")
            finished = True
        except _Crash:
            finished = False
        monkeypatch.undo()
        if finished and calls[0] < nth:
            assert nth > 1
            break  # the change made fewer calls than nth: every crash point was covered
        S3ContentStore(memory, "p").rollback("1")
        assert _objects(memory) == before, (op, call, nth)
