"""The CLI as a thin client (issue 29): with ``--url``/``CE_URL`` and ``--api-key``/``CE_API_KEY`` the read and
write commands go to a running server (a real uvicorn on a free loopback port over a real engine) and print what the
same commands print on the home; no home is opened and nothing of the engine is imported (a child process checks
its own ``sys.modules``). Also: ``serve`` on a port that is taken fails with ``API-4092`` and exit status 5 before
it loads anything."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from context_engine.interfaces.cli.app import app
from context_engine.interfaces.http import create_app
from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.storage.metadata.keys import ApiKeyStore
from tests.http.helpers import LiveServer
from tests.serve_process import CLI

ADMIN = RequestContext(account_id="acme", role="admin")
ALICE = RequestContext(account_id="acme", role="user", user_space="alice", agent_space="alice-bot")
DOC = "ctx://resources/ops/disk-full.md"
TEXT = (
    "# Node Disk Full\n\n## Meaning\n\nThe root filesystem of a node has almost no free disk space left; pods get "
    "evicted.\n\n## Fix\n\nPrune unused container images with `crictl rmi --prune` and rotate logs under /var/log.\n"
)
#: Modules that opening a home or loading the model would import; a --url command imports none of them.
#: The CLI's entry point in a child process that prints, at exit, which of HEAVY it imported.
PROBE = (
    "import atexit, json, sys\n"
    "heavy = {heavy!r}\n"
    "atexit.register(lambda: sys.stderr.write('MODULES=' + json.dumps([m for m in heavy if m in sys.modules])))\n"
    "from context_engine.interfaces.cli.app import main\n"
    "main()\n"
)
SERVER_LOG = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[")
HEAVY = ("torch", "sentence_transformers", "lancedb", "sqlalchemy", "fastapi", "context_engine.service")
#: Nor does `search --url` import numpy or the models of the client's other routes (issue 29: its start time).
NOT_FOR_SEARCH = (
    "numpy",
    "context_engine.api.models",
    "context_engine.schema.compact",
    "context_engine.schema.knowledge",
    "context_engine.schema.memory",
)
SEARCH_PROBE = PROBE.format(heavy=(*HEAVY, *NOT_FOR_SEARCH))
PROBE = PROBE.format(heavy=HEAVY)


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder):
    service = ContextEngineService(load_settings(tmp_path_factory.mktemp("remote-home")), embedder=embedder)
    keys = ApiKeyStore(service.metadata)
    admin, alice = keys.create(ADMIN, "admin")[1], keys.create(ALICE, "alice")[1]
    service.add_text(TEXT, DOC, ADMIN)
    try:
        with LiveServer(create_app(service=service)) as live:
            yield live.url, admin, alice, service
    finally:
        service.close()


@pytest.fixture
def remote(server, tmp_path):
    url, _, alice_key, _ = server
    missing_home = tmp_path / "no-home-here"

    def run(*args: str, key: str | None = alice_key) -> tuple[int, str]:
        env = {"CE_URL": url, "CE_HOME": str(missing_home), "COLUMNS": "100"}
        if key is not None:
            env["CE_API_KEY"] = key
        result = CliRunner().invoke(app, list(args), env=env)
        assert not missing_home.exists()  # the home was never opened (nor created)
        # the server runs in this process: its log lines land in the captured output too
        shown = [line for line in result.output.splitlines(keepends=True) if not SERVER_LOG.match(line)]
        return result.exit_code, "".join(shown)

    return run


def test_reads_go_to_the_server(remote, server):
    _, _, _, service = server
    code, out = remote("--json", "search", "the node ran out of disk space", "--top-k", "3")
    assert code == 0, out
    hits = json.loads(out)
    local = service.search_memory("the node ran out of disk space", ALICE, top_k=3)
    assert [h["uri"] for h in hits] == [h.uri for h in local.hits] and hits[0]["uri"] == DOC
    code, out = remote("read", DOC, "--level", "L2")
    assert code == 0 and out.startswith("# Node Disk Full") and "crictl rmi --prune" in out
    code, out = remote("--json", "read", DOC, "--level", "L2", "--max-chars", "60")
    page = json.loads(out)
    assert code == 0 and page["next_offset"] is not None and page["total_chars"] == len(TEXT)
    code, out = remote("--json", "read", DOC, "--level", "L0")
    assert code == 0 and "disk" in json.loads(out)["text"].lower()
    code, out = remote("--json", "ls", "ctx://resources/ops/")
    assert code == 0 and [n["uri"] for n in json.loads(out)] == [DOC]
    code, out = remote("tree", "ctx://resources/", "--files")
    assert code == 0 and DOC in out
    code, out = remote("--json", "lookup", "node disk is full and pods are evicted", "--top-k", "1")
    assert code == 0 and json.loads(out)["evidence_blocks"][0]["doc_id"] == DOC


def test_memory_writes_go_to_the_server(remote, server, tmp_path):
    _, _, _, service = server
    code, out = remote("--json", "add-memory", "Alice prefers tea to coffee.", "--category", "preference")
    assert code == 0, out
    added = json.loads(out)
    uri = added["uris"][0]
    assert uri.startswith("ctx://user/alice/memories/preference/") and added["items"][0]["status"] == "added"
    assert service.get_memory(uri, ALICE).text == "Alice prefers tea to coffee."
    lines = [{"role": "user", "content": "I flew to Oslo on Monday."}, {"role": "assistant", "content": "Nice!"}]
    (tmp_path / "chat.jsonl").write_text("\n".join(json.dumps(m) for m in lines) + "\n", encoding="utf-8")
    code, out = remote("add-messages", str(tmp_path / "chat.jsonl"), "--conversation", "oslo")
    assert code == 0 and "2 messages added to conversation oslo" in out, out
    code, out = remote("--json", "memories", "--conversation", "oslo")
    assert code == 0 and json.loads(out)["total"] == 2
    code, out = remote("get-memory", uri)
    assert code == 0 and "Alice prefers tea to coffee." in out
    code, out = remote("update-memory", uri, "Alice prefers green tea to coffee.")
    assert code == 0 and "version 2" in " ".join(out.split())
    code, out = remote("delete-memory", uri)
    assert code == 0 and "memory deleted" in out
    code, out = remote("--json", "get-memory", uri)
    assert code == 2 and json.loads(out)["code"] == "RET-4041"  # her own deleted memory


def test_stats_errors_and_refusals(remote, server, tmp_path):
    _, admin_key, _, _ = server
    code, out = remote("--json", "stats", key=admin_key)
    info = json.loads(out)
    assert code == 0 and info["account_id"] == "acme" and info["nodes"] >= 1 and "home" not in info
    code, out = remote("--json", "stats")  # a user key: account-wide counts are an admin's
    assert code == 3 and json.loads(out)["code"] == "RET-4032"
    code, out = remote("--json", "search", "disk", key="ce_bogus_key")
    assert code == 3 and json.loads(out)["code"] == "AUTH-4011"
    code, out = remote("--json", "--as", "acme:user:bob", "search", "disk")
    assert code == 2 and json.loads(out)["details"] == {"option": "--as"}
    (tmp_path / "lines.txt").write_text("--json ls ctx://resources/ops/\nsearch 'disk space' --top-k 1\n")
    code, out = remote("batch", str(tmp_path / "lines.txt"))
    assert code == 0 and out.count(DOC) >= 2, out  # a batch's lines go to the server too
    code, out = remote("--json", "rm", DOC)
    assert code == 2 and json.loads(out)["code"] == "WRT-4002" and "--url" in json.loads(out)["message"]


def test_a_url_command_imports_nothing_of_the_engine(server, tmp_path):
    url, _, alice_key, _ = server
    probe = SEARCH_PROBE
    env = {**os.environ, "CE_URL": url, "CE_API_KEY": alice_key, "CE_HOME": str(tmp_path / "none")}
    proc = subprocess.run(
        [sys.executable, "-c", probe, "--json", "search", "disk space", "--top-k", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["uri"] == DOC
    assert proc.stderr.rsplit("MODULES=", 1)[1].strip() == "[]"
    assert not (tmp_path / "none").exists()


def test_serve_on_a_busy_port_fails_fast_with_its_own_exit_status(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        probe = PROBE
        home = str(tmp_path / "home")
        proc = subprocess.run(
            [sys.executable, "-c", probe, "--home", home, "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        json_proc = subprocess.run(
            [*CLI, "--home", home, "--json", "serve", "--port", str(port)], capture_output=True, text=True, timeout=120
        )
    assert proc.returncode == 5, proc.stderr
    assert f"127.0.0.1:{port} is already in use" in proc.stderr and "API-4092" in proc.stderr
    assert "ContextEngine on http" not in proc.stderr  # it stopped before the banner, the stores and the model
    assert proc.stderr.rsplit("MODULES=", 1)[1].strip() == "[]"
    assert json_proc.returncode == 5
    env = json.loads(json_proc.stdout)
    assert env["code"] == "API-4092" and env["details"]["port"] == port


def test_user_space_narrows_an_admin_key_only(remote, server):
    _, admin_key, _, service = server
    uri = service.add_memory("Alice keeps her bike in the blue shed.", ALICE).uris[0]
    code, out = remote("--json", "memories", "--user-space", "alice", key=admin_key)
    assert code == 0 and uri in [m["uri"] for m in json.loads(out)["items"]]
    code, out = remote("--json", "search", "where is the bike kept", "--user-space", "alice", key=admin_key)
    assert code == 0 and uri in [h["uri"] for h in json.loads(out)]
    code, out = remote("--json", "memories", "--user-space", "carol")  # alice's key cannot act for carol
    assert code == 3 and json.loads(out)["code"] == "RET-4031"
    code, out = remote("--json", "search", "bike", "--user-space", "carol")
    assert code == 3 and json.loads(out)["code"] == "RET-4031"
