"""The memory CLI (issue 11) through typer's CliRunner on the real engine: the README's "Memories and conversations"
example prints what the README says, bad input gets its code and exit status and writes nothing, add-messages
batches by ``memory.max_batch_items`` and names the bad line, and another user's memory is the same 403 as a missing
one. (HTTP: tests/http/test_memories.py; MCP: tests/mcp/test_mcp_memories.py.)"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_engine.interfaces.cli.app import app
from tests.conftest import REPO

ALICE = ["--as", "default:user:alice:helper"]
BOB = ["--as", "default:user:bob"]
# Times that the README example gives as input; every other time in its output is "now" and differs per run.
_FIXED_TIMES = ("2023-05-08", "2024-02-01")
_TIME = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d(\.\d+)?)?(\+00:00|Z)?")


@pytest.fixture
def cli(tmp_path, monkeypatch, default_embedder):
    """``cli(*args) -> (exit_code, output)`` on a fresh home, in ``tmp_path``, sharing one default model, at a
    100-column terminal (the README's width)."""
    monkeypatch.setattr("context_engine.service.build_embedder", lambda settings, **kw: default_embedder, raising=True)
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "home"

    def run(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, ["--home", str(home), *args], env={"COLUMNS": "100"})
        return result.exit_code, result.output

    return run


def write_jsonl(path: Path, lines: list[object]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def total(cli, *who: str) -> int:
    code, out = cli(*(who or ALICE), "--json", "memories", "--limit", "200")
    assert code == 0, out
    return json.loads(out)["total"]


# ---- the README example -------------------------------------------------------------------------------------------
def readme_console() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Memories and conversations\n")
    section = readme[start : readme.index("\n## ", start + 1)]
    body = section.index("```console\n") + len("```console\n")
    return section[body : section.index("\n```", body)]


def steps(console: str) -> tuple[dict[str, str], list[tuple[str, list[str]]]]:
    """The heredoc files and the ``(command, expected output lines)`` of a console block."""
    files: dict[str, str] = {}
    out: list[tuple[str, list[str]]] = []
    lines = console.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        heredoc = re.match(r"^\$ cat > (\S+) <<'EOF'$", line)
        if heredoc:
            end = lines.index("EOF", i)
            files[heredoc.group(1)] = "\n".join(lines[i + 1 : end]) + "\n"
            i = end + 1
            continue
        assert line.startswith("$ "), line
        expected: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        out.append((line[2:], expected))
    return files, out


def normalise(text: str) -> str:
    return _TIME.sub(lambda m: m.group(0) if m.group(0).startswith(_FIXED_TIMES) else "<now>", text).rstrip()


def test_readme_memory_example_prints_what_the_readme_says(cli, tmp_path):
    files, commands = steps(readme_console())
    assert set(files) == {"trip.jsonl"} and len(commands) >= 8
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    last_code = 0
    shown = set()
    for command, expected in commands:
        if command == "echo $?":
            output = str(last_code)
        else:
            argv = shlex.split(command)
            assert argv[0] == "context-engine", command
            last_code, output = cli(*argv[1:])
            shown.add(next(a for a in argv[1:] if not a.startswith("-") and ":" not in a))
            if "bob" not in command:
                assert last_code == 0, (command, output)
        assert normalise(output) == normalise("\n".join(expected)), command
    assert {"add-messages", "add-memory", "memories", "update-memory", "get-memory", "delete-memory"} <= shown
    assert last_code == 0


# ---- add-messages -------------------------------------------------------------------------------------------------
def test_add_messages_batches_by_the_limit_and_continues_the_session(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("CE_MEMORY__MAX_BATCH_ITEMS", "2")
    f = write_jsonl(tmp_path / "s.jsonl", [{"content": f"message number {i}"} for i in range(1, 6)])
    code, out = cli(*ALICE, "--json", "add-messages", str(f), "--conversation", "s1")
    assert code == 0, out
    body = json.loads(out)
    assert [i["uri"].rsplit("/", 1)[1] for i in body["items"]] == [f"00000{i}.md" for i in range(1, 6)]
    assert body["nodes"] == 5
    code, out = cli(*ALICE, "--json", "add-messages", str(f), "--conversation", "s1")
    assert json.loads(out)["items"][0]["uri"].endswith("/s1/000006.md")
    code, out = cli(*ALICE, "--json", "memories", "--conversation", "s1", "--limit", "3", "--offset", "3")
    page = json.loads(out)
    assert page["total"] == 10 and len(page["items"]) == 3 and page["next_offset"] == 6


def test_a_bad_line_in_a_later_batch_is_named_and_earlier_batches_are_reported(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("CE_MEMORY__MAX_BATCH_ITEMS", "2")
    lines = [{"content": "one"}, {"content": "two"}, {"content": "three"}, {"content": "four", "role": "robot"}]
    f = write_jsonl(tmp_path / "s.jsonl", lines)
    code, out = cli(*ALICE, "--json", "add-messages", str(f), "--conversation", "s2")
    assert code == 2, out
    env = json.loads(out)
    assert env["code"] == "WRT-4002" and env["details"]["line"] == 4 and env["details"]["written"] == 2
    assert "line 4" in env["message"] and "robot" in env["message"]
    assert total(cli) == 2  # the first batch; the failing batch (lines 3-4) wrote nothing


BAD_FILES = [
    ("not json", ['{"content": "fine"}', '{"content": "broken"'], "WRT-4002", 2),
    ("not an object", ['{"content": "fine"}', '["a list"]'], "WRT-4002", 2),
    ("unknown field", ['{"content": "fine", "mood": "x"}'], "WRT-4002", 1),
    ("metadata not an object", ['{"content": "fine"}', '{"content": "x", "metadata": "tag"}'], "WRT-4002", 2),
    ("no content", ['{"content": "fine"}', '{"role": "user"}'], "WRT-4221", 2),
    ("blank content", ['{"content": "  "}'], "WRT-4221", 1),
    ("unknown role", ['{"content": "fine"}', '{"content": "x", "role": "robot"}'], "WRT-4002", 2),
    ("bad timestamp", ['{"content": "x", "timestamp": "next friday"}'], "WRT-4002", 1),
    ("metadata too large", ['{"content": "x", "metadata": {"a": "' + "y" * 5000 + '"}}'], "WRT-4131", 1),
]


@pytest.mark.parametrize(("case", "lines", "code", "line"), BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_bad_jsonl_names_the_line_and_writes_nothing(cli, tmp_path, case, lines, code, line):
    f = write_jsonl(tmp_path / "bad.jsonl", ["", *lines])  # a leading blank line: numbering counts it
    exit_code, out = cli(*ALICE, "--json", "add-messages", str(f), "--conversation", "bad")
    assert exit_code == 2, out
    env = json.loads(out)
    assert env["code"] == code and env["details"]["line"] == line + 1, env
    assert f"line {line + 1}" in env["message"]
    assert total(cli) == 0


def test_bad_json_is_a_plain_error_naming_the_line(cli, tmp_path):
    f = write_jsonl(tmp_path / "bad.jsonl", ['{"content": "ok"}', "{nope"])
    code, out = cli(*ALICE, "add-messages", str(f), "--conversation", "s")
    flat = " ".join(out.split())  # the error console wraps long lines
    assert code == 2 and "error WRT-4002" in flat
    assert "bad.jsonl line 2: not valid JSON (Expecting property name enclosed in double quotes at column 2)" in flat


@pytest.mark.parametrize(("session", "code"), [("a/b", "WRT-4001"), ("..", "WRT-4001")])
def test_bad_session_ids(cli, tmp_path, session, code):
    f = write_jsonl(tmp_path / "s.jsonl", [{"content": "hello"}])
    exit_code, out = cli(*ALICE, "--json", "add-messages", str(f), "--conversation", session)
    assert exit_code == 2 and json.loads(out)["code"] == code, out
    assert total(cli) == 0


# ---- add-memory, list, update, delete -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("extra", "code"),
    [
        (["--metadata", "{not json"], "WRT-4002"),
        (["--metadata", "[1, 2]"], "WRT-4002"),
        (["--metadata", json.dumps({"a": "z" * 5000})], "WRT-4131"),
        (["--occurred-at", "the day before"], "WRT-4002"),
    ],
)
def test_add_memory_bad_options(cli, extra, code):
    exit_code, out = cli(*ALICE, "--json", "add-memory", "A fact about Alice.", *extra)
    assert exit_code == 2 and json.loads(out)["code"] == code, out
    assert total(cli) == 0


def test_add_memory_policy_metadata_and_unix_seconds(cli):
    code, out = cli(
        *ALICE,
        "--json",
        "add-memory",
        "Alice drinks green tea.",
        "--metadata",
        '{"source": "chat"}',
        "--occurred-at",
        "1700000000",
    )
    assert code == 0, out
    uri = json.loads(out)["uris"][0]
    code, out = cli(*ALICE, "--json", "get-memory", uri)
    detail = json.loads(out)
    assert detail["metadata"] == {"source": "chat"} and detail["occurred_at"] == "2023-11-14T22:13:20Z"
    near = "Alice is drinking green tea."  # a near-duplicate with the default model (cosine 0.97)
    code, out = cli(*ALICE, "--json", "add-memory", near, "--policy", "replace")
    assert json.loads(out)["uris"] == [uri] and json.loads(out)["nodes"] == 1, out
    detail = json.loads(cli(*ALICE, "--json", "get-memory", uri)[1])
    assert detail["text"] == near and detail["version"] == 2
    assert [h["text"] for h in detail["history"]] == ["Alice drinks green tea."]
    code, out = cli(*ALICE, "add-memory", "x", "--policy", "merge")
    assert code == 2 and "merge" in out  # typer's usage error lists the choices


def test_user_text_is_not_rich_markup(cli):
    text = "[bold red]not markup[/bold red] and [link=x]y[/link]"
    assert cli(*ALICE, "add-memory", text)[0] == 0
    code, out = cli(*ALICE, "memories")
    assert code == 0 and "[bold red]not markup[/bold red]" in out
    uri = json.loads(cli(*ALICE, "--json", "memories")[1])["items"][0]["uri"]
    code, out = cli(*ALICE, "get-memory", uri)
    assert text in out


def test_memories_bad_paging(cli):
    for args in (["--limit", "0"], ["--limit", "201"], ["--offset", "-1"]):
        code, out = cli(*ALICE, "--json", "memories", *args)
        assert code == 2 and json.loads(out)["code"] == "WRT-4002", (args, out)


def test_another_users_memory_is_the_same_403_as_a_missing_one(cli):
    code, out = cli(*ALICE, "--json", "add-memory", "Alice's bank is in Porto.")
    uri = json.loads(out)["uris"][0]
    missing = uri.replace(".md", "-missing.md")
    for command in (["get-memory"], ["update-memory"], ["delete-memory"]):
        results = []
        for target in (uri, missing):
            args = [*command, target, *(["stolen text"] if command == ["update-memory"] else [])]
            exit_code, out = cli(*BOB, "--json", *args)
            assert exit_code == 3, out
            env = json.loads(out)
            assert env["code"] == "RET-4032"
            results.append(out.replace(target, "URI"))
        assert results[0] == results[1], command
    detail = json.loads(cli(*ALICE, "--json", "get-memory", uri)[1])
    assert detail["version"] == 1 and detail["text"] == "Alice's bank is in Porto."
    code, out = cli(*ALICE, "--json", "delete-memory", uri)
    assert code == 0 and json.loads(out)["uris"] == [uri]
    code, out = cli(*ALICE, "--json", "get-memory", uri)
    assert code == 2 and json.loads(out)["code"] == "RET-4041"  # her own deleted memory: not found (issue 29)


def test_search_with_memory_filters(cli, tmp_path):
    rows = [
        {
            "role": "user",
            "speaker": "Alice",
            "content": "We booked a cabin by the lake.",
            "metadata": {"topic": "travel"},
            "timestamp": "2023-07-01T10:00:00Z",
        },
        {
            "role": "user",
            "speaker": "Alice",
            "content": "We booked a table at the sushi bar.",
            "metadata": {"topic": "food"},
            "timestamp": "2023-08-01T10:00:00Z",
        },
    ]
    assert cli(*ALICE, "add-messages", str(write_jsonl(tmp_path / "s.jsonl", rows)), "--conversation", "plans")[0] == 0
    code, out = cli(*ALICE, "--json", "search", "what did we book?", "--meta", "topic=food")
    assert code == 0, out
    assert [h["uri"] for h in json.loads(out)] == ["ctx://user/alice/memories/sessions/plans/000002.md"]
    code, out = cli(*ALICE, "--json", "search", "what did we book?", "--since", "2023-06-01", "--until", "2023-07-15")
    assert [h["uri"] for h in json.loads(out)] == ["ctx://user/alice/memories/sessions/plans/000001.md"]
    code, out = cli(*ALICE, "--json", "search", "what did we book?", "--conversation", "plans")
    assert len(json.loads(out)) == 2
    code, out = cli(*ALICE, "search", "x", "--since", "not a time")
    assert code != 0 and "RET-4001" in out


# ---- renamed options (issue 29: one word per concept) --------------------------------------------------------------
def test_old_option_names_still_work_hidden_with_a_note(cli, tmp_path):
    """``--conversation`` is the conversation of add-messages, memories and search; ``--session`` (add-messages,
    memories), ``--session-id`` (search) and search's ``--session FILE`` (now ``--session-archive``) still work,
    hidden from --help, with a note on stderr; an old and a new option with different values is WRT-4002."""
    home = str(tmp_path / "home")

    def run(*args: str):
        return CliRunner().invoke(app, ["--home", home, *ALICE, *args], env={"COLUMNS": "100"})

    f = write_jsonl(tmp_path / "c.jsonl", [{"speaker": "Alice", "content": "We hiked to the glacier on Sunday."}])
    new = run("--json", "add-messages", str(f), "--conversation", "trip")
    old = run("--json", "add-messages", str(f), "--session", "trip")
    short = run("--json", "add-messages", str(f), "-s", "trip")
    assert [r.exit_code for r in (new, old, short)] == [0, 0, 0], (new.output, old.output)
    uris = [json.loads(r.stdout)["items"][0]["uri"] for r in (new, old, short)]
    assert uris == [f"ctx://user/alice/memories/sessions/trip/00000{i}.md" for i in (1, 2, 3)]
    assert new.stderr == "" and "--session is deprecated; use --conversation" in old.stderr
    both = run("--json", "add-messages", str(f), "--conversation", "trip", "--session", "other")
    assert both.exit_code == 2 and json.loads(both.stdout)["code"] == "WRT-4002"
    assert "--session is the deprecated name of --conversation" in json.loads(both.stdout)["message"]
    neither = run("--json", "add-messages", str(f))
    assert neither.exit_code == 2 and "--conversation" in json.loads(neither.stdout)["message"]

    listed = [run("--json", "memories", flag, "trip") for flag in ("--conversation", "--session", "-s")]
    assert [json.loads(r.stdout)["total"] for r in listed] == [3, 3, 3] and "deprecated" in listed[1].stderr
    item = json.loads(listed[0].stdout)["items"][0]
    assert item["conversation_id"] == item["session_id"] == "trip"
    both = run("--json", "memories", "--conversation", "trip", "--session", "other")
    assert both.exit_code == 2 and json.loads(both.stdout)["code"] == "WRT-4002"
    assert "conversation: trip" in run("get-memory", uris[0]).stdout

    found = [run("--json", "search", "glacier", flag, "trip") for flag in ("--conversation", "--session-id")]
    assert [len(json.loads(r.stdout)) for r in found] == [3, 3] and "--session-id is deprecated" in found[1].stderr
    both = run("--json", "search", "glacier", "--conversation", "trip", "--session-id", "other")
    assert both.exit_code == 2 and json.loads(both.stdout)["code"] == "WRT-4002"

    archive = tmp_path / "recent.json"
    archive.write_text(json.dumps([{"role": "user", "content": "how do I restart a pod?"}]), encoding="utf-8")
    flags = ("--session-archive", "--session")
    answers = [run("--json", "search", "and then?", "--full", flag, str(archive)) for flag in flags]
    assert [r.exit_code for r in answers] == [0, 0], answers[0].output
    assert "--session is deprecated; use --session-archive" in answers[1].stderr
    queries = [[q["text"] for q in json.loads(r.stdout)["typed_queries"]] for r in answers]
    assert queries[0] == queries[1] and queries[0][0] == "and then? how do I restart a pod?"  # the archive was read

    for command, shown, hidden in (
        ("add-messages", "--conversation", ("--session",)),
        ("memories", "--conversation", ("--session",)),
        ("search", "--conversation", ("--session-id", "--session ")),
    ):
        text = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output
        assert shown in text and not any(h in text for h in hidden), command
