"""Alembic migrations of the metadata database, on every backend (storage/metadata/migrate.py; issue 13)."""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import create_engine, inspect, text

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import NodeRecord, VectorRecord
from context_engine.storage.metadata.migrate import HEAD, REVISIONS, SCHEMA_VERSION, alembic_config, target_metadata
from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore

from .conftest import MetadataBackend

A = "acc-a"


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


def _vector(rid: str) -> VectorRecord:
    return VectorRecord(
        id=rid,
        vector=np.ones(4, dtype=np.float32) / 2,
        uri=f"ctx://resources/{rid}.md",
        parent_uri="ctx://resources/",
        account_id=A,
        owner_space="shared",
        context_type="resource",
        level=0,
    )


def _sql(url: str, *statements: str) -> list[object]:
    """Run ``statements`` in one transaction; the first value of each (``None`` for a statement without rows)."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            results = [conn.execute(text(s)) for s in statements]
            return [r.scalar() if r.returns_rows else None for r in results]
    finally:
        engine.dispose()


def test_the_revisions_named_in_code_are_the_packaged_scripts() -> None:
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(alembic_config())
    chain = tuple(s.revision for s in reversed(list(scripts.walk_revisions())))
    assert chain == REVISIONS and scripts.get_current_head() == HEAD == REVISIONS[-1]
    assert Path(scripts.dir).is_relative_to(Path(__file__).resolve().parents[2] / "src" / "context_engine")


def test_a_new_database_is_created_at_head_and_matches_the_models(metadata_backend: MetadataBackend) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    store = metadata_backend.open()
    status = store.schema_status()
    assert (status.revision, status.schema_version, status.current) == (HEAD, SCHEMA_VERSION, True)
    engine = create_engine(metadata_backend.url)
    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            differences = compare_metadata(MigrationContext.configure(conn), target_metadata())
    finally:
        engine.dispose()
    assert {"nodes", "vectors", "tool_invocations", "retrieved_docs", "api_keys", "write_journal"} <= tables
    assert differences == []  # the scripts build exactly the schema the models (audit and keys included) describe


def test_a_database_migrated_by_a_newer_release_is_refused(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    store.upsert_nodes([_node("ctx://resources/a.md")])
    store.close()
    _sql(metadata_backend.url, "UPDATE alembic_version SET version_num = '9999_future'")
    with pytest.raises(ContextEngineError) as info:
        metadata_backend.open()
    assert info.value.code is ErrorCode.CONFIG_INVALID
    assert "upgrade context-engine" in info.value.message and "9999_future" in info.value.message
    assert info.value.details == {"setting": "metadata.url", "found_revision": "9999_future", "head": HEAD}
    assert _sql(metadata_backend.url, "SELECT COUNT(*) FROM nodes") == [1]  # untouched


def test_opened_without_upgrade_an_empty_database_stays_empty_until_upgraded(
    metadata_backend: MetadataBackend,
) -> None:
    store = SqlMetadataStore(metadata_backend.url, upgrade=False)
    try:
        status = store.schema_status()
        assert (status.revision, status.schema_version, status.current) == (None, None, False)
        engine = create_engine(metadata_backend.url)
        with engine.connect() as conn:
            assert inspect(conn).get_table_names() == []
        engine.dispose()
        before, after = store.upgrade_schema()
        assert (before.revision, after.revision, after.current) == (None, HEAD, True)
        assert store.upgrade_schema()[0].current  # a second upgrade finds nothing to do
        store.upsert_nodes([_node("ctx://resources/a.md")])
        assert store.get_node(A, "ctx://resources/a.md") is not None
    finally:
        store.close()


def test_a_version_4_database_of_a_release_before_alembic_is_taken_under_alembic(
    metadata_backend: MetadataBackend,
) -> None:
    store = metadata_backend.open()
    store.upsert_nodes([_node("ctx://resources/kept.md")])
    store.set_meta("embedding_model", "m")
    store.close()
    # what such a release left: the tables and schema_version = 4, no alembic_version
    _sql(metadata_backend.url, "DROP TABLE alembic_version")
    again = metadata_backend.open()
    assert again.schema_status().current
    assert again.get_node(A, "ctx://resources/kept.md") is not None and again.get_meta("embedding_model") == "m"


def test_replicas_starting_together_on_an_empty_database_create_it_once(metadata_backend: MetadataBackend) -> None:
    start = threading.Barrier(4)
    errors: list[BaseException] = []
    opened: list[SqlMetadataStore] = []

    def replica() -> None:
        start.wait()
        try:
            opened.append(SqlMetadataStore(metadata_backend.url))
        except BaseException as err:  # noqa: BLE001 - collected and asserted below
            errors.append(err)

    threads = [threading.Thread(target=replica) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for store in opened:
        store.close()
    assert errors == [] and len(opened) == 4
    assert _sql(
        metadata_backend.url, "SELECT COUNT(*) FROM alembic_version", "SELECT COUNT(*) FROM schema_version"
    ) == [
        1,
        1,
    ]


def test_opening_a_current_database_imports_no_alembic(tmp_path: Path) -> None:
    """The CLI's cold start: only creating or upgrading a database imports Alembic."""
    SqlMetadataStore.sqlite(tmp_path / "metadata.db").close()
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "import context_engine.interfaces.cli.app\n"
        "from context_engine.storage.metadata.sqlalchemy_store import SqlMetadataStore\n"
        f"SqlMetadataStore.sqlite(Path({str(tmp_path / 'metadata.db')!r})).close()\n"
        "print('alembic' in sys.modules)\n"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"


def test_the_migrate_command_reports_then_upgrades(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from context_engine.interfaces.cli.app import app

    home = tmp_path / "home"

    def migrate(*args: str) -> tuple[int, dict]:
        result = CliRunner().invoke(app, ["--home", str(home), "--json", "migrate", *args])
        return result.exit_code, json.loads(result.output)

    code, report = migrate("--check")
    assert (code, report["current"], report["head"], report["up_to_date"]) == (1, None, HEAD, False)
    assert not home.exists()  # a check changes nothing, not even by creating the database file
    code, report = migrate()
    assert (code, report["current"], report["upgraded_from"], report["up_to_date"]) == (0, HEAD, "none", True)
    code, report = migrate("--check")
    assert (code, report["current"], report["up_to_date"]) == (0, HEAD, True)
    # a database of a release before Alembic (schema version 3, no alembic_version) is reported, then upgraded
    _sql(f"sqlite:///{home / 'metadata.db'}", "DROP TABLE alembic_version", "UPDATE schema_version SET version = 3")
    assert migrate("--check")[0] == 1
    code, report = migrate()
    assert (code, report["upgraded_from"], report["current"]) == (0, "none", HEAD)
    assert _sql(f"sqlite:///{home / 'metadata.db'}", "SELECT version FROM schema_version") == [SCHEMA_VERSION]


def test_a_directory_window_reads_its_children_from_the_parent_key_index(tmp_path: Path) -> None:
    """``children_window`` (each write's directory summaries and conversation tail) is planned on the ``(account_id,
    parent_uri, uri_key)`` index of revision 0003, not as a walk of the account's whole key index (issue 26)."""
    from sqlalchemy import event

    store = SqlMetadataStore.sqlite(tmp_path / "metadata.db")
    try:
        parent = "ctx://user/bob/memories/sessions/s1/"
        nodes = [_node(f"{parent}{i:06d}.md").model_copy(update={"parent_uri": parent}) for i in range(30)]
        nodes += [_node(f"ctx://resources/r{i}.md") for i in range(30)]
        store.upsert_nodes(nodes)
        seen: list[tuple[str, object]] = []

        def record(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001
            if statement.lstrip().upper().startswith("SELECT") and "ORDER BY" in statement.upper():
                seen.append((statement, parameters))

        engine = store._engine  # noqa: SLF001 - the test reads the plan of the statements the store sends
        event.listen(engine, "before_cursor_execute", record)
        try:
            window, total = store.children_window(A, parent, 5)
        finally:
            event.remove(engine, "before_cursor_execute", record)
        assert total == 30 and [n.uri.rsplit("/", 1)[1] for n in window] == [
            *(f"{i:06d}.md" for i in range(5)),
            *(f"{i:06d}.md" for i in range(25, 30)),
        ]
        assert len(seen) == 2  # the head and the tail of the window
        with engine.connect() as conn:
            for statement, parameters in seen:
                rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
                plan = " ".join(str(row[-1]) for row in rows)
                assert "ix_nodes_account_parent_key" in plan and "TEMP B-TREE" not in plan, plan
    finally:
        store.close()


def test_revision_0005_adds_generation_tokens_and_existing_rows_keep_null(metadata_backend: MetadataBackend) -> None:
    """Revision 0005 (schema version 7): a nullable ``token`` on ``index_generations`` and ``index_changes`` and a
    ``log_floor_token``. A database of the release before it (downgraded to 0004 here) keeps its rows, which read as
    states without a token: a reader without one (a derived file written before) catches up, it does not reload."""
    from alembic import command

    from context_engine.storage.changes import AccountState

    store = metadata_backend.open()
    store.put_vectors([_vector("a"), _vector("b")])
    generation = store.account_generation(A)
    store.close()
    engine = create_engine(metadata_backend.url)
    try:
        with engine.begin() as conn:
            config = alembic_config()
            config.attributes["connection"] = conn
            command.downgrade(config, "0004")
        with engine.connect() as conn:
            assert "token" not in {c["name"] for c in inspect(conn).get_columns("index_generations")}
            assert "token" not in {c["name"] for c in inspect(conn).get_columns("index_changes")}
        assert _sql(metadata_backend.url, "SELECT version FROM schema_version") == [6]
        again = metadata_backend.open()  # upgraded to 0005 on open
        assert again.schema_status().current and SCHEMA_VERSION == 7
        with engine.connect() as conn:
            columns = {c["name"]: c for c in inspect(conn).get_columns("index_generations")}
            assert columns["token"]["nullable"] and columns["log_floor_token"]["nullable"]
            assert conn.execute(text("SELECT COUNT(*) FROM index_changes WHERE token IS NOT NULL")).scalar() == 0
    finally:
        engine.dispose()
    assert again.account_state(A) == AccountState(generation, None)
    assert again.changes_since(A, generation).empty
    again.put_vectors([_vector("c")])
    delta = again.changes_since(A, generation)
    assert not delta.reload and [r.id for r in delta.upserted] == ["c"] and delta.token is not None
