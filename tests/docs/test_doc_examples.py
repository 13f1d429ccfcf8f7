"""Every example in README.md and docs/*.md runs, and prints what the docs say (issue 15).

How the docs are marked up (keep to it when you write an example):

* Fenced blocks in ``console``, ``bash``/``sh``/``shell`` and ``python`` are examples and are run; ``json``, ``text``,
  ``toml`` and unlabelled blocks are illustrations and are not (a ``toml`` block that starts with
  ``# <home>/config.toml`` is loaded as a configuration, and must be valid; an illustration that starts with a
  command fails the test). An example that cannot run in a test
  (installs, the main job, benchmarks, Docker, a synopsis with placeholders) carries the line
  ``<!-- doctest: skip REASON -->`` right above its fence; the reason is required.
* ``console`` blocks are transcripts: ``$ command`` (continued by a trailing ``\\``, an open quotation or a
  ``<<'EOF'`` heredoc), then what it prints. The printed lines are compared as **key lines**: blank lines, table rules
  and ``...``/``…`` lines are dropped (so an example may be abridged with ``...``), box-drawing characters and runs of
  spaces are ignored, and what varies between runs is masked: decimals (scores, milliseconds), timestamps and hex ids
  of 16+ digits. Each key line must appear, in order, inside a line of the real output (or inside up to three
  consecutive lines joined, for text wrapped at another width). A command must exit 0 unless the transcript's next
  command is ``echo $?``, whose printed code is then compared.
* ``bash`` blocks must exit 0 (``set -eo pipefail``); they show no output, so curl examples are written as ``console``
  transcripts instead.
* ``python`` blocks: each ``print(...)  # value`` line must print ``value`` (the same key-line comparison, in order).
  They see the variables the document's shell commands exported (``os.environ["KEY"]`` after ``export KEY=...``).
  ``<!-- doctest: continues -->`` runs the block inside the previous python block of the document (its code appended,
  indented by 4: the body of that block's final ``with``).

Each document runs in its own session, in order: a fresh temporary ``$HOME`` (so the default home
``~/.context-engine`` is fresh), the working directory a temporary folder holding ``src`` and ``scripts`` (links into
the repository), ``COLUMNS=100``, the default embedding model, and shell variables kept from one command to the next.
The CLI's output is what it prints into a pipe (tables at their natural width); the key-line comparison makes the
terminal width a doc was written at irrelevant, except for cells a narrow terminal cuts (``…``): write examples from
uncut output. Paths under ``/tmp/`` in examples are redirected into the session's folder. A document whose examples
address ``127.0.0.1:8420`` gets a real ``context-engine serve`` on its home, on a free port that replaces 8420.
``context-engine`` commands without shell syntax run in this process (typer's runner, one shared model: fast); any
other command runs in ``bash``, where ``context-engine`` is the real CLI of these sources. README.md's guide part
(below its ``guides`` marker) is composed from docs/ by ``scripts/compose_readme.py``: it must equal that composition,
and its examples run through the docs.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from shutil import which

import pytest
from typer.testing import CliRunner

from context_engine.interfaces.cli.app import app
from tests.conftest import REPO
from tests.serve_process import ServeProcess

pytestmark = pytest.mark.slow

RUN_LANGS = {"console", "bash", "sh", "shell", "python"}
SHELL_LANGS = {"bash", "sh", "shell"}
DOC_PORT = "127.0.0.1:8420"
COLUMNS = "100"
TOOLS = ("curl", "jq")  # programs the examples call besides context-engine and python

_FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_MARKER = re.compile(r"<!--\s*doctest:\s*(\w+)\s*(.*?)\s*-->\s*$")
_BOX = re.compile(r"[\u2500-\u257f]")
_MASKS = [
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r"\b[0-9a-f]{16,}\b"), "<id>"),
    (re.compile(r"-?\d+\.\d+"), "<num>"),
]
_SHELL_SYNTAX = re.compile(r"[|&;<>$`(){}*?\\]|^\w+=| #")


# ---- the markup ---------------------------------------------------------------------------------------------------
@dataclass
class Block:
    doc: str
    line: int
    lang: str
    body: str
    marker: str = ""
    reason: str = ""

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks_of(doc: str, text: str) -> list[Block]:
    """The fenced blocks of ``text`` with the ``doctest`` marker on the line above each, if any."""
    found = []
    for m in _FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        above = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        block = Block(doc, line, m.group(1), m.group(2))
        marker = _MARKER.search(above)
        if marker:
            block.marker, block.reason = marker.group(1), marker.group(2)
        found.append(block)
    return found


def guide_split(readme: str) -> tuple[str, str]:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import compose_readme
    finally:
        sys.path.pop(0)
    head, _, _ = readme.partition(compose_readme.MARKER)
    return head, compose_readme.compose(head)


def documents() -> dict[str, str]:
    """README.md up to its guide marker, then every docs/*.md: the texts whose examples run."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    docs = {"README.md": guide_split(readme)[0]}
    for path in sorted((REPO / "docs").glob("*.md")):
        docs[f"docs/{path.name}"] = path.read_text(encoding="utf-8")
    return docs


# ---- comparing output ---------------------------------------------------------------------------------------------
def normalise(line: str) -> str:
    line = _BOX.sub(" ", line)
    for pattern, mask in _MASKS:
        line = pattern.sub(mask, line)
    return " ".join(line.split())


def key_lines(expected: list[str]) -> list[str]:
    keys = [normalise(x) for x in expected]
    return [k for k in keys if k and k not in {"...", "…"}]


def assert_key_lines(expected: list[str], actual: str, where: str) -> None:
    """Each key line of ``expected`` inside a line of ``actual``, in order."""
    lines = [normalise(x) for x in actual.splitlines()]

    def found_at(i: int, key: str) -> bool:  # in line i, or in it and the next ones (a line wrapped at the width)
        return any(key in " ".join(lines[i : i + n]) for n in (1, 2, 3))

    at = 0
    for key in key_lines(expected):
        hit = next((i for i in range(at, len(lines)) if found_at(i, key)), None)
        assert hit is not None, f"{where}: expected line not found (in order):\n  {key}\nin the output:\n{actual}"
        at = hit + 1


# ---- transcripts --------------------------------------------------------------------------------------------------
@dataclass
class Step:
    command: str
    expected: list[str] = field(default_factory=list)


def complete(command: str) -> bool:
    """No quotation left open (a quoted argument may span lines)."""
    try:
        shlex.split(command, comments=True)
    except ValueError:
        return False
    return True


def transcript(body: str) -> list[Step]:
    steps: list[Step] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            assert steps, f"output before the first command: {line!r}"
            steps[-1].expected.append(line)
            i += 1
            continue
        command = [line[2:]]
        i += 1
        heredoc = re.search(r"<<-?\s*'?(\w+)'?", line)
        while (command[-1].endswith("\\") or not complete("\n".join(command))) and i < len(lines):
            command.append(lines[i])
            i += 1
        if heredoc:
            while i < len(lines) and lines[i] != heredoc.group(1):
                command.append(lines[i])
                i += 1
            command.append(lines[i])
            i += 1
        steps.append(Step("\n".join(command)))
    return steps


def merge_continued(blocks: list[Block]) -> list[Block]:
    """Python blocks marked ``continues`` appended (indented by 4) to the python block before them, which then
    runs once, with them, in their place."""
    merged: list[Block] = []
    for block in blocks:
        if block.lang == "python" and block.marker == "continues":
            before = next((b for b in reversed(merged) if b.lang == "python"), None)
            assert before is not None, f"{block.where}: 'continues' with no python block before it"
            before.body += "\n" + textwrap.indent(block.body, "    ")
        else:
            merged.append(Block(block.doc, block.line, block.lang, block.body, block.marker, block.reason))
    return merged


# ---- a document's session -----------------------------------------------------------------------------------------
class Session:
    """One document's examples: its HOME, working folder, shell variables and (when needed) server."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.monkeypatch = monkeypatch
        self.home_dir = root / "user"
        self.cwd = root / "work"
        self.tmp = root / "tmp"
        for d in (self.home_dir, self.cwd, self.tmp):
            d.mkdir(parents=True)
        for name in ("src", "scripts"):
            (self.cwd / name).symlink_to(REPO / name)
        shim = root / "bin"
        shim.mkdir()
        cli = shim / "context-engine"
        cli.write_text(
            f'#!/bin/sh\nexec "{sys.executable}" -c "from context_engine.interfaces.cli.app import main; main()" "$@"\n'
        )
        cli.chmod(0o755)
        self.state = root / "shell-state.sh"
        self.state.write_text("")
        self.exported = root / "shell-env"  # the shell's environment after its last command, NUL-separated
        env = {k: v for k, v in os.environ.items() if not k.startswith("CE_") or k == "CE_EMBEDDING__BACKEND"}
        env.update(
            HOME=str(self.home_dir),
            PATH=f"{shim}{os.pathsep}{os.environ.get('PATH', '')}",
            COLUMNS=COLUMNS,
            CE_EMBEDDING__BACKEND="use-multilingual",
            PYTHONPATH=os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH")) if p),
        )
        self.env = env
        for key in [k for k in os.environ if k.startswith("CE_") and k != "CE_EMBEDDING__BACKEND"]:
            monkeypatch.delenv(key)
        monkeypatch.setenv("HOME", str(self.home_dir))
        monkeypatch.setenv("CE_EMBEDDING__BACKEND", "use-multilingual")
        monkeypatch.chdir(self.cwd)
        self.port = DOC_PORT
        self.server: ServeProcess | None = None
        self.last_rc = 0

    def adapt(self, text: str) -> str:
        """The example as run here: the test server's port, ``/tmp/`` inside the session."""
        return text.replace(DOC_PORT, self.port).replace("/tmp/", f"{self.tmp}/")

    def start_server(self) -> None:
        self.server = ServeProcess(self.home_dir / ".context-engine", env=self.env)
        self.server.__enter__()
        self.port = f"127.0.0.1:{self.server.port}"

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()

    # -- commands
    def run(self, command: str) -> tuple[int, str]:
        command = self.adapt(command)
        if command.startswith("context-engine ") and not _SHELL_SYNTAX.search(command):
            argv = shlex.split(command)[1:]
            result = CliRunner().invoke(app, argv, env={"COLUMNS": COLUMNS})
            self.last_rc = result.exit_code
            return result.exit_code, result.output
        script = (
            f"set -a\n. {shlex.quote(str(self.state))}\n( exit {self.last_rc} )\n{command}\n"
            f"__rc=$?\nexport -p > {shlex.quote(str(self.state))}\nenv -0 > {shlex.quote(str(self.exported))}\n"
            "exit $__rc\n"
        )
        proc = subprocess.run(
            ["bash", "-c", script],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        self.last_rc = proc.returncode
        return proc.returncode, proc.stdout + proc.stderr

    def console(self, block: Block) -> None:
        steps = transcript(block.body)
        for n, step in enumerate(steps):
            code, output = self.run(step.command)
            where = f"{block.where} `{step.command.splitlines()[0]}`"
            follows_echo = n + 1 < len(steps) and steps[n + 1].command == "echo $?"
            assert code == 0 or follows_echo, f"{where}: exit {code}\n{output}"
            assert_key_lines(step.expected, output, where)

    def shell(self, block: Block) -> None:
        code, output = self.run("set -eo pipefail\n" + block.body)
        assert code == 0, f"{block.where}: exit {code}\n{output}"
        self.last_rc = 0

    def python(self, block: Block) -> None:
        if self.exported.exists():  # what the shell commands exported, as a user's python would inherit it
            for entry in self.exported.read_text().split("\0"):
                key, sep, value = entry.partition("=")
                if sep and key not in ("_", "__rc", "SHLVL", "PWD", "OLDPWD") and self.env.get(key) != value:
                    self.monkeypatch.setenv(key, value)
        code = self.adapt(block.body)
        out = io.StringIO()
        namespace: dict[str, object] = {"__name__": "doc_example"}
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, block.where, "exec"), namespace)  # noqa: S102 - the docs' own example
        finally:
            for value in namespace.values():  # engines an example left open
                if type(value).__name__ == "ContextEngineService":
                    value.close()  # type: ignore[attr-defined]
        expected = [m.group(1) for m in re.finditer(r"^\s*print\(.*\)\s+# (.+)$", code, flags=re.MULTILINE)]
        assert_key_lines(expected, out.getvalue(), block.where)


# ---- the tests ----------------------------------------------------------------------------------------------------
DOCS = documents()


def test_every_marker_is_known_and_every_skip_has_a_reason():
    for doc, text in DOCS.items():
        fences = {b.line for b in blocks_of(doc, text)}
        for n, line in enumerate(text.splitlines(), start=1):
            m = _MARKER.search(line)
            if m is None:
                continue
            assert m.group(1) in {"skip", "continues"}, f"{doc}:{n}: unknown doctest marker {m.group(1)!r}"
            assert n + 1 in fences, f"{doc}:{n}: a doctest marker must be the line right above a fence"
            assert m.group(1) != "skip" or len(m.group(2)) >= 10, f"{doc}:{n}: a skip needs its reason"
    assert sum(b.lang in RUN_LANGS and b.marker != "skip" for t in DOCS for b in blocks_of(t, DOCS[t])) >= 10


def test_no_command_hides_in_an_illustration():
    """A block of commands labelled json/text/toml or unlabelled would never run: label it (and run it, or mark it
    skip with the reason)."""
    for doc, text in DOCS.items():
        for b in blocks_of(doc, text):
            first = next((x for x in b.body.splitlines() if x.strip() and not x.startswith("#")), "")
            looks_like_command = re.match(r"(\$ |context-engine |curl |python |bash |docker )", first)
            assert b.lang in RUN_LANGS or not looks_like_command, f"{b.where}: commands in a {b.lang or 'plain'} block"


def test_readme_guides_are_the_docs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    _head, composed = guide_split(readme)
    assert readme == composed, "README.md's guide part differs from docs/: run python scripts/compose_readme.py"


@pytest.mark.parametrize("doc", [d for d, t in DOCS.items() if any(b.lang in RUN_LANGS for b in blocks_of(d, t))])
def test_doc_examples_run_and_print_what_the_doc_says(doc, tmp_path, monkeypatch, default_embedder):
    monkeypatch.setattr("context_engine.service.build_embedder", lambda settings, **kw: default_embedder)
    runnable = [b for b in blocks_of(doc, DOCS[doc]) if b.lang in RUN_LANGS and b.marker != "skip"]
    if not runnable:
        pytest.skip(f"{doc}: every example is marked skip (with its reason)")
    missing = sorted(t for t in TOOLS if any(re.search(rf"\b{t}\b", b.body) for b in runnable) and not which(t))
    if missing:
        pytest.skip(
            f"{doc}: its examples need {', '.join(missing)} (apt-get install {' '.join(missing)}; .ci/run does)"
        )
    runnable = merge_continued(runnable)
    session = Session(tmp_path, monkeypatch)
    try:
        if any(DOC_PORT in b.body for b in runnable):
            session.start_server()
        for block in runnable:
            if block.lang == "console":
                session.console(block)
            elif block.lang in SHELL_LANGS:
                session.shell(block)
            else:
                session.python(block)
    finally:
        session.close()


def test_config_examples_are_accepted_by_the_settings(tmp_path):
    """``toml`` blocks that start with ``# <home>/config.toml`` are valid configurations (unknown keys and bad values
    would be CFG-4001)."""
    from context_engine.settings import load_settings

    configs = [b for d, t in DOCS.items() for b in blocks_of(d, t) if b.lang == "toml"]
    configs = [b for b in configs if b.body.startswith("# <home>/config.toml")]
    assert configs, "no config.toml example found"
    for n, block in enumerate(configs):
        home = tmp_path / f"home{n}"
        home.mkdir()
        (home / "config.toml").write_text(block.body, encoding="utf-8")
        tomllib.loads(block.body)
        load_settings(home)  # raises CFG-4001 on an unknown key or a bad value


def test_key_line_comparison_masks_what_varies_and_keeps_order():
    actual = "┃ 1 │ ctx://a.md │ 0.142 │\n┃ 2 │ ctx://b.md │ 0.139 │\ninvocation 0123456789abcdef0123 · 12.5 ms"
    assert_key_lines(["│ 1 │ ctx://a.md │ 0.150 │", "...", "invocation fedcba9876543210fedc · 3.1 ms"], actual, "t")
    with pytest.raises(AssertionError):
        assert_key_lines(["2 ctx://b.md", "1 ctx://a.md"], actual, "t")
    steps = transcript("$ cat > f <<'EOF'\na\nEOF\n$ curl -s x \\\n  -d y\n{\n$ echo $?\n0")
    assert [s.command for s in steps] == ["cat > f <<'EOF'\na\nEOF", "curl -s x \\\n  -d y", "echo $?"]
    assert [s.expected for s in steps] == [[], ["{"], ["0"]]
    assert json.dumps(key_lines(["", "┏━━┓", "  a   b  "])) == '["a b"]'
