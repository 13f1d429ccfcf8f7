"""A CLI that reads well (issue 15), through the real commands on a temporary home with the suite's model.

Tables fit 100 columns (long URIs shortened in the middle, whole in --json and on the ``next:`` lines); user text in
brackets survives (never read as rich markup); informational planner notes only with ``--verbose``; ``ls``/``tree``
on the ``ctx://user/`` and ``ctx://agent/`` roots; ``add`` names the skipped files and why; ``keys create`` refuses
a malformed context like ``--as`` does.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_engine.interfaces.cli.app import app
from context_engine.interfaces.cli.common import PIPE_WIDTH, short_uri

pytestmark = pytest.mark.slow  # the real model (the suite's) behind every command

BRACKETS = "Always flush before rename: the journal is [fsync'd] twice."
LONG_DIR = "ctx://resources/a-rather-long-directory-name-for-tables/and-another-long-one-below-it/"
LONG_DOC = "# Journal Flushing Procedure\n\n## Steps\n\n" + BRACKETS + "\n"
BOB = "default:user:bob:helper"


@pytest.fixture(scope="module")
def home(tmp_path_factory, embedder):
    mp = pytest.MonkeyPatch()
    mp.setattr("context_engine.service.build_embedder", lambda *a, **k: embedder)  # one model per session
    home = str(tmp_path_factory.mktemp("cli-home"))
    folder = tmp_path_factory.mktemp("long")
    (folder / "journal-flushing-procedure-for-the-storage-nodes.md").write_text(LONG_DOC, encoding="utf-8")
    runner = CliRunner()
    sample = str(resources.files("context_engine") / "sample_corpus")
    for args in (
        ["add", sample, "ctx://resources/sample/"],
        ["add", str(folder), LONG_DIR],
        ["--as", BOB, "add-memory", BRACKETS],
        ["--as", BOB, "add-skill", "flush", "-d", "Flush a journal [fsync'd]", "--content", "sync"],
    ):
        r = runner.invoke(app, ["--home", home, *args])
        assert r.exit_code == 0, r.output
    yield home
    mp.undo()


def cli(home: str, *args: str):
    return CliRunner().invoke(app, ["--home", home, *args])


def table_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line[:1] in "┏┃┡│└"]


def test_short_uri_keeps_both_ends():
    uri = LONG_DIR + "journal-flushing-procedure-for-the-storage-nodes.md"
    short = short_uri(uri, 60)
    assert len(short) == 60 and short.startswith("ctx://resources/") and short.endswith("storage-nodes.md")
    assert "…" in short and short_uri("ctx://resources/x.md", 60) == "ctx://resources/x.md"


def test_search_table_fits_100_columns_with_whole_uris_elsewhere(home):
    uri = LONG_DIR + "journal-flushing-procedure-for-the-storage-nodes.md"
    r = cli(home, "search", "journal flushing procedure fsync", "-k", "5")
    assert r.exit_code == 0, r.output
    lines = table_lines(r.output)
    assert lines and max(len(line) for line in lines) <= PIPE_WIDTH == 100
    row = next(line for line in lines if "storage-nodes.md" in line)
    assert "…" in row and uri not in row  # shortened in the middle
    assert f"next: context-engine read {uri} --level" in r.output  # whole, unwrapped
    assert any(line in ("match: strong", "match: weak") for line in r.output.splitlines()), r.output
    hits = json.loads(cli(home, "--json", "search", "journal flushing procedure fsync", "-k", "5").output)
    assert uri in [h["uri"] for h in hits]


def test_user_text_in_brackets_survives(home):
    r = cli(home, "--as", BOB, "ls", "ctx://user/bob/memories/general/")
    assert r.exit_code == 0 and "[fsync'd]" in r.output, r.output
    r = cli(home, "--as", BOB, "tree", "ctx://agent/", "--files")
    assert r.exit_code == 0 and "[fsync'd]" in r.output, r.output
    r = cli(home, "lookup", "journal flushing procedure", "-k", "1")
    assert r.exit_code == 0 and "[fsync'd]" in r.output, r.output
    assert max(len(line) for line in table_lines(r.output)) <= 100


def test_planner_notes_only_with_verbose(home):
    query = "something about flushing"  # names no context type: the planner notes RET-4221
    full = json.loads(cli(home, "--json", "search", query, "--full").output)
    assert any(w.startswith("RET-4221") for w in full["trace"]["warnings"])
    quiet = cli(home, "search", query)
    assert quiet.exit_code == 0 and "RET-4221" not in quiet.output
    verbose = cli(home, "search", query, "--verbose")
    assert verbose.exit_code == 0 and "note RET-4221" in verbose.output


def test_json_compact_is_the_agents_answer(home):
    r = cli(home, "--json", "search", "journal flushing procedure", "-k", "3", "--compact")
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    assert {"request_id", "match_quality", "hits"} <= set(got) <= {
        "request_id",
        "match_quality",
        "hits",
        "warnings",
        "retryable",
    }
    assert set(got["hits"][0]) == {"uri", "level", "score", "abstract", "read_recommendation"}
    r = cli(home, "--json", "lookup", "journal flushing procedure", "-k", "1", "--compact")
    assert r.exit_code == 0 and json.loads(r.output)["evidence"][0]["excerpt"], r.output


def test_search_says_none_when_nothing_is_about_the_query(home):
    r = cli(home, "--as", BOB, "search", "What is the capital of France?", "-k", "3")
    assert r.exit_code == 0 and "match: none" in r.output.splitlines(), r.output
    assert table_lines(r.output)  # the hits are still listed


def test_ls_and_tree_on_the_user_and_agent_roots(home):
    r = cli(home, "--json", "ls", "ctx://user/")
    assert r.exit_code == 0, r.output
    assert [n["uri"] for n in json.loads(r.output)] == ["ctx://user/bob/"]  # admin: every space
    assert [n["uri"] for n in json.loads(cli(home, "--json", "--as", BOB, "ls", "ctx://agent").output)] == [
        "ctx://agent/helper/"
    ]
    assert json.loads(cli(home, "--json", "--as", "default:user:alice", "ls", "ctx://user/").output) == []
    tree = json.loads(cli(home, "--json", "--as", BOB, "tree", "ctx://user/", "--depth", "2").output)
    assert tree["uri"] == "ctx://user/" and tree["children"][0]["uri"] == "ctx://user/bob/"
    assert tree["children"][0]["children"][0]["uri"] == "ctx://user/bob/memories/"
    r = cli(home, "--as", "default:user:alice", "tree", "ctx://user/")
    assert r.exit_code == 0 and "ctx://user/ is empty" in r.output


def test_add_names_the_skipped_files(home, tmp_path: Path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "ok.md").write_text("# Fine\n\nA runbook.\n", encoding="utf-8")
    (folder / "rules.yaml").write_text("groups: []\n", encoding="utf-8")
    (folder / "alerts.yml").write_text("a: 1\n", encoding="utf-8")
    r = cli(home, "add", str(folder), "ctx://resources/mixed/")
    assert r.exit_code == 0, r.output
    assert "skipped=2" in r.output
    assert "rules.yaml" in r.output and "alerts.yml" in r.output and "unsupported file type .yaml" in r.output
    report = json.loads(cli(home, "--json", "add", str(folder), "ctx://resources/mixed/").output)
    assert sorted(report["skipped_paths"], key=lambda f: f["path"]) == [
        {"path": "alerts.yml", "reason": "unsupported file type .yml"},
        {"path": "rules.yaml", "reason": "unsupported file type .yaml"},
    ]


@pytest.mark.parametrize("spec", ["acme:wizard", "acme:user:al/ice", "a:user:b:c:d", "", "bad account:user"])
def test_keys_create_refuses_a_malformed_context_like_as(tmp_path, spec):
    home = str(tmp_path / "keys")
    r = cli(home, "--json", "keys", "create", spec)
    assert r.exit_code == 2, r.output
    envelope = json.loads(r.output)
    assert envelope["code"] == "WRT-4002" and "context" in envelope["message"]
    assert json.loads(cli(home, "--json", "keys", "list", "--all").output) == []
    as_ = cli(home, "--json", "--as", spec, "keys", "list") if spec else None  # the same parser behind --as
    if as_ is not None:
        assert as_.exit_code == 2 and json.loads(as_.output)["code"] == "WRT-4002"


def test_batch_runs_every_line_on_one_engine(home, tmp_path, monkeypatch):
    import context_engine.service as service_module

    opened: list[int] = []
    original = service_module.ContextEngineService

    def counting(*args, **kwargs):
        opened.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(service_module, "ContextEngineService", counting)
    queries = tmp_path / "q.txt"
    queries.write_text("Pod is crash looping\ndisk is almost full\n", encoding="utf-8")
    steps = tmp_path / "steps.txt"
    steps.write_text(
        "# a comment\n"
        "ls ctx://resources/sample/\n"
        f"search --queries {queries} --top-k 2\n"
        'echo "lookup: disk"\n'
        "--json lookup 'disk almost full' -k 1\n",
        encoding="utf-8",
    )
    r = cli(home, "batch", str(steps))
    assert r.exit_code == 0, r.output
    assert opened == [1]  # one engine for every line
    assert "search: Pod is crash looping" in r.output and "search: disk is almost full" in r.output
    assert "lookup: disk" in r.output and '"evidence_status"' in r.output


def test_batch_stops_at_the_first_failing_line(home, tmp_path):
    steps = tmp_path / "steps.txt"
    steps.write_text("ls ctx://resources/sample/\nread ctx://resources/nowhere.md\nls ctx://resources/\n")
    r = cli(home, "batch", str(steps))
    assert r.exit_code == 3 and "RET-4032" in r.output  # the failing line's status
    assert "batch stopped at line 2: read ctx://resources/nowhere.md" in r.output
    for refused in ("serve\n", "--home /tmp/x ls\n", "keys list\n", "search 'unclosed\n"):
        steps.write_text(refused)
        r = cli(home, "--json", "batch", str(steps))
        assert r.exit_code == 2 and json.loads(r.output)["code"] == "WRT-4002", (refused, r.output)
