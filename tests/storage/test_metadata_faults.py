"""Faults of the metadata database (issue 13): unreachable at start, failing mid-request, and credentials that never
show (storage/metadata/sqlalchemy_store.py, storage/factory.py)."""

from __future__ import annotations

import io
import logging
import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest
import structlog
from sqlalchemy import create_engine, pool, text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import NodeRecord
from context_engine.settings import LoggingSettings, load_settings
from context_engine.storage.factory import open_metadata
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore
from tests.http.helpers import LOOPBACK_URL
from tests.postgres import POSTGRES_URL, fresh_postgres_database
from tests.retrieval.conftest import HashEmbedder
from tests.services import service_var

PASSWORD = "Fake-Metadata-Passw0rd"
A = "acc-a"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node(uri: str) -> NodeRecord:
    return NodeRecord(
        account_id=A,
        uri=uri,
        parent_uri="ctx://resources/",
        owner_space="shared",
        context_type="resource",
        is_dir=False,
        title="t",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def _assert_no_password(err: ContextEngineError, password: str = PASSWORD) -> None:
    for surface in (err.message, str(err), repr(err), str(err.details), str(err.envelope())):
        assert password not in surface


# ---- unreachable at start -------------------------------------------------------------------------------------------
def test_an_unreachable_database_at_start_names_the_setting_and_the_address(tmp_path: Path) -> None:
    port = _closed_port()
    settings = load_settings(
        tmp_path / "home", metadata={"url": f"postgresql+psycopg://ce:{PASSWORD}@127.0.0.1:{port}/ce"}
    )
    with pytest.raises(ContextEngineError) as info:
        open_metadata(settings)
    err = info.value
    assert err.code is ErrorCode.CONFIG_INVALID and not err.retryable
    assert "metadata.url" in err.message and f"127.0.0.1:{port}" in err.message
    assert err.details["setting"] == "metadata.url" and err.details["address"] == f"127.0.0.1:{port}"
    assert "ce:***@127.0.0.1" in err.message  # the URL shown with its password hidden
    _assert_no_password(err)
    assert PASSWORD not in repr(settings) and PASSWORD not in str(settings.metadata)


def test_the_engine_does_not_start_and_creates_nothing_on_an_unreachable_database(tmp_path: Path) -> None:
    from context_engine.service import ContextEngineService

    home = tmp_path / "home"
    url = f"postgresql+psycopg://ce:{PASSWORD}@127.0.0.1:{_closed_port()}/ce?password={PASSWORD}"
    with pytest.raises(ContextEngineError) as info:
        ContextEngineService(load_settings(home, metadata={"url": url}), embedder=HashEmbedder())
    assert info.value.code is ErrorCode.CONFIG_INVALID
    _assert_no_password(info.value)
    assert sorted(p.name for p in home.iterdir()) == []  # no content store, no journal, no database file


@pytest.mark.parametrize("command", [["migrate"], ["migrate", "--check"], ["keys", "list"]])
def test_the_cli_exits_non_zero_naming_the_setting(tmp_path: Path, command: list[str]) -> None:
    from context_engine.interfaces.cli.app import app

    url = f"postgresql+psycopg://ce:{PASSWORD}@127.0.0.1:{_closed_port()}/ce"
    result = CliRunner().invoke(
        app, ["--home", str(tmp_path / "home"), "--json", *command], env={"CE_METADATA__URL": url}
    )
    assert result.exit_code == ErrorCode.CONFIG_INVALID.exit_code == 2
    assert '"CFG-4001"' in result.output and "metadata.url" in result.output and PASSWORD not in result.output
    assert not (tmp_path / "home" / "metadata.db").exists()


def test_a_wrong_password_is_refused_without_showing_it() -> None:
    with fresh_postgres_database() as url:
        wrong = make_url(url).set(password=PASSWORD).render_as_string(hide_password=False)
        with pytest.raises(ContextEngineError) as info:
            SqlMetadataStore(wrong)
    assert info.value.code is ErrorCode.CONFIG_INVALID and "password authentication failed" in info.value.message
    _assert_no_password(info.value)
    _assert_no_password(info.value, make_url(url).password or "?")


def test_the_pool_settings_reach_the_engine(tmp_path: Path) -> None:
    with fresh_postgres_database() as url:
        settings = load_settings(tmp_path, metadata={"url": url, "pool_size": 3, "max_overflow": 2})
        store = open_metadata(settings)
        try:
            assert (store.engine.pool.size(), store.engine.pool._max_overflow) == (3, 2)  # type: ignore[attr-defined]
            assert store.dialect == "postgresql" and store.schema_status().current
        finally:
            store.close()


# ---- failing mid-request --------------------------------------------------------------------------------------------
def test_a_connection_lost_mid_transaction_is_a_retryable_storage_error_and_writes_nothing() -> None:
    with fresh_postgres_database() as url:
        store = SqlMetadataStore(url)
        killer = create_engine(url, poolclass=pool.NullPool)
        try:
            with pytest.raises(ContextEngineError) as info, store.transaction():
                store.upsert_nodes([_node("ctx://resources/a.md")])
                with store.session(write=True) as s:
                    pid = s.execute(text("SELECT pg_backend_pid()")).scalar()
                with killer.connect() as conn:  # the server ends this transaction's session (a failover, a crash)
                    conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
                store.upsert_nodes([_node("ctx://resources/b.md")])
            assert info.value.code is ErrorCode.STORAGE_FAILED and info.value.retryable
            # the next request gets a live connection, and nothing of the failed one was committed
            assert store.get_node(A, "ctx://resources/a.md") is None
            store.upsert_nodes([_node("ctx://resources/c.md")])
            assert store.get_node(A, "ctx://resources/c.md") is not None
        finally:
            killer.dispose()
            store.close()


def test_pooled_connections_the_server_dropped_are_replaced_not_served() -> None:
    with fresh_postgres_database() as url:
        store = SqlMetadataStore(url)
        admin = create_engine(url, poolclass=pool.NullPool)
        try:
            store.upsert_nodes([_node("ctx://resources/a.md")])  # leaves connections idle in the pool
            with admin.connect() as conn:  # a server restart: every session of the database ends
                conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                )
            assert store.get_node(A, "ctx://resources/a.md") is not None
        finally:
            admin.dispose()
            store.close()


# ---- credentials --------------------------------------------------------------------------------------------------
def test_the_password_appears_in_no_log_line_error_body_repr_or_readyz(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from context_engine.interfaces.http import create_app
    from context_engine.observability.logging import configure_logging
    from context_engine.service import ContextEngineService

    with fresh_postgres_database() as url:
        password = make_url(url).password
        assert password
        buf = io.StringIO()
        configure_logging(LoggingSettings(level="DEBUG"), stream=buf)
        logging.getLogger("sqlalchemy.engine").setLevel(logging.INFO)  # statements too
        surfaces: dict[str, str] = {}
        try:
            settings = load_settings(tmp_path / "home", metadata={"url": url})
            service = ContextEngineService(settings, embedder=HashEmbedder())
            surfaces["reprs"] = " ".join(
                repr(x) for x in (settings, settings.metadata, service.metadata, service.metadata.url)
            )
            with TestClient(create_app(service=service), base_url=LOOPBACK_URL, client=("127.0.0.1", 40000)) as client:
                surfaces["readyz"] = client.get("/readyz").text
                surfaces["metrics"] = client.get("/metrics").text
                surfaces["ls"] = client.get("/api/v1/tool_invocations").text
                # the database stops accepting connections: requests fail with a retryable storage error
                server = make_url(service_var(POSTGRES_URL) or "")  # the base database: not the one altered
                admin = create_engine(server, poolclass=pool.NullPool, isolation_level="AUTOCOMMIT")
                database = make_url(url).database
                with admin.connect() as conn:
                    conn.execute(text(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false'))
                    conn.execute(
                        text(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                            "WHERE datname = :db AND pid <> pg_backend_pid()"
                        ),
                        {"db": database},
                    )
                admin.dispose()
                failed = client.get("/api/v1/tool_invocations")
                surfaces["error body"] = failed.text
            service.close()
        finally:
            root = logging.getLogger()
            for h in list(root.handlers):
                if h.get_name() == "context-engine":
                    root.removeHandler(h)
            logging.getLogger("sqlalchemy.engine").setLevel(logging.WARNING)
            structlog.reset_defaults()
        surfaces["logs"] = buf.getvalue()
    assert failed.status_code == 500 and failed.json()["code"] == "WRT-5001", failed.text
    assert '"ready"' in surfaces["readyz"] or "embedding_model" in surfaces["readyz"]
    assert "SELECT" in surfaces["logs"]  # the log did capture the database's traffic
    assert {name: password in text_ for name, text_ in surfaces.items()} == {name: False for name in surfaces}


def test_a_database_failing_mid_request_is_counted_per_operation(tmp_path: Path) -> None:
    """Each mid-request failure reaches ``on_failure`` with its operation (the service counts it in
    ``ce_storage_failures_total{store="metadata",operation}``), and the caller gets the retryable ``WRT-5001``."""
    failures: list[str] = []
    path = tmp_path / "metadata.db"
    store = SqlMetadataStore.sqlite(path)
    store.close()
    store = SqlMetadataStore(f"sqlite:///{path}", on_failure=failures.append)
    try:
        with create_engine(f"sqlite:///{path}", poolclass=pool.NullPool).begin() as conn:
            conn.execute(text("DROP TABLE nodes"))  # the database now fails every node read
        with pytest.raises(ContextEngineError) as err:
            store.get_node("acme", "ctx://resources/a.md")
        assert err.value.code == ErrorCode.STORAGE_FAILED and err.value.retryable
        assert failures == ["read"]
    finally:
        store.close()


def test_postgresql_sessions_carry_the_statement_and_idle_transaction_timeouts(tmp_path: Path) -> None:
    """A replica that hangs in a transaction holding the write lock is cut off by the server after
    ``metadata.statement_timeout_s``, so it cannot stall the other replicas for ever (attack pass, issue 13)."""
    with fresh_postgres_database() as url:
        settings = load_settings(tmp_path, metadata={"url": url, "statement_timeout_s": 1.5})
        store = open_metadata(settings)
        try:
            with store.engine.connect() as conn:
                assert conn.execute(text("SHOW statement_timeout")).scalar() == "1500ms"
                assert conn.execute(text("SHOW idle_in_transaction_session_timeout")).scalar() == "1500ms"
                with pytest.raises(Exception, match="statement timeout"):
                    conn.execute(text("SELECT pg_sleep(5)"))
        finally:
            store.close()
