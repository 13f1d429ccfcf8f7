import pytest

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.context import RequestContext
from context_engine.schema.uri import ContextURI


def test_visibility_of_user_agent_and_admin():
    user = RequestContext(account_id="acme", role="user", user_space="alice", agent_space="bot")
    assert user.visible_owner_spaces() == ["shared", "user:alice", "agent:bot"]
    assert user.can_see("user:alice") and not user.can_see("user:bob")
    admin = RequestContext(account_id="acme", role="admin")
    assert admin.visible_owner_spaces() is None
    assert admin.can_see("user:bob")


def test_writes_limited_to_own_spaces_and_admin_for_resources():
    user = RequestContext(account_id="acme", role="user", user_space="alice")
    assert user.can_write_uri(ContextURI.parse("ctx://user/alice/memories/x"))
    assert not user.can_write_uri(ContextURI.parse("ctx://user/bob/memories/x"))
    assert not user.can_write_uri(ContextURI.parse("ctx://resources/x.md"))


def test_parse_as_spec():
    ctx = RequestContext.parse("acme:agent::bot")
    assert (ctx.account_id, ctx.role, ctx.user_space, ctx.agent_space) == ("acme", "agent", None, "bot")
    with pytest.raises(ContextEngineError) as exc:
        RequestContext.parse("acme:superuser")
    assert exc.value.code is ErrorCode.REQUEST_INVALID
    with pytest.raises(ContextEngineError):
        RequestContext.parse("bad account:user")


def test_error_code_table():
    assert ErrorCode.TARGET_FORBIDDEN.http_status == 403
    assert ErrorCode.QUERY_INVALID.http_status == 400
    assert ErrorCode.VECTOR_SEARCH_FAILED.http_status == 500
    assert ErrorCode.PAYLOAD_TOO_LARGE.http_status == 413
    assert ErrorCode.UNAUTHENTICATED.http_status == 401
    assert ErrorCode.URI_FORBIDDEN.exit_code == 3
    assert ErrorCode.QUERY_INVALID.exit_code == 2
    assert ErrorCode.EMBEDDING_FAILED.exit_code == 4
    e = ContextEngineError(ErrorCode.QUERY_INVALID, "query is empty")
    assert e.envelope("r1") == {"code": "RET-4001", "message": "query is empty", "details": {}, "request_id": "r1"}
