"""The Python examples of docs/memories.md run as written on the default model and print what their comments say
(the console example is checked by tests/integration/test_memory_interfaces.py through the README)."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

DOC = REPO / "docs" / "memories.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)\n```", text, flags=re.DOTALL)


def expected_prints(code: str) -> list[str]:
    """The ``# value`` comments of ``print(...)  # value`` lines, in order."""
    return [m.group(1).strip() for m in re.finditer(r"^\s*print\(.*\)\s+# (.+)$", code, flags=re.MULTILINE)]


def test_memories_doc_python_examples_print_what_they_say(tmp_path, monkeypatch):
    # the doc shows what a user of the defaults sees: the default model, not the suite's MiniLM (tests/conftest.py)
    monkeypatch.setenv("CE_EMBEDDING__BACKEND", "use-multilingual")
    blocks = python_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 2
    home = str(tmp_path / "home")
    # The first block opens the engine in a `with` block; the later ones use `engine` and `alice` as the doc's
    # reader would in the same session: run them inside the first block's scope.
    first, rest = blocks[0], blocks[1:]
    assert '"/tmp/ce-memories"' in first
    body = first.replace('"/tmp/ce-memories"', repr(home))
    indented = "\n".join("    " + line for line in "\n".join(rest).splitlines())
    program = body + "\n" + indented + "\n"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(program, str(DOC), "exec"), {"__name__": "docs_memories"})  # noqa: S102 - the doc's own code
    printed = out.getvalue().splitlines()
    assert printed == expected_prints(first)
