"""docs/interfaces.md's error table names every code of ``context_engine.errors.ErrorCode`` with its HTTP status (or
200 for the degradations reported in ``trace.warnings``), so a code added to ``errors.py`` is documented too."""

from __future__ import annotations

import re
from pathlib import Path

from context_engine.errors import ErrorCode

DOC = Path(__file__).resolve().parents[2] / "docs" / "interfaces.md"


def _table_rows() -> list[tuple[list[str], list[int]]]:
    """``(codes, statuses)`` of each row of the table under "### Errors"."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("### Errors") :]
    section = section[: section.index("\n### ", 1)]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`"):
            codes = re.findall(r"`([A-Z]+-\d{4})`", cells[0])
            dots = re.fullmatch(r"`([A-Z]+)-(\d{4})`\.\.`\1-(\d{4})`", cells[0].split()[-1])
            if dots:  # a range such as `RET-5001`..`RET-5005`
                prefix, lo, hi = dots.group(1), int(dots.group(2)), int(dots.group(3))
                codes += [f"{prefix}-{n}" for n in range(lo, hi + 1)]
            rows.append((codes, [int(s) for s in re.findall(r"\d{3}", cells[1])]))
    return rows


def test_every_error_code_is_in_the_table_with_its_status():
    rows = _table_rows()
    documented = {code: statuses for codes, statuses in rows for code in codes}
    missing = [code.value for code in ErrorCode if code.value not in documented]
    assert not missing, f"codes missing from the error table of docs/interfaces.md: {missing}"
    # a row of status 200 lists degradations, reported in trace.warnings of a successful answer
    wrong = [c.value for c in ErrorCode if 200 not in documented[c.value] and c.http_status not in documented[c.value]]
    assert not wrong, f"codes whose row does not give their HTTP status: {wrong}"
