"""Process B of the two-process tests: a real second OS process writing to the same home.

Run as ``python -m tests.integration.writer_process HOME``; reads one JSON command per line on stdin
(``{"op": "add_text" | "add_memory" | "delete" | "move", ...}``), runs it through its own
:class:`ContextEngineService`, and answers one JSON line (``{"ok": true, "uris": [...]}``) when the write has
committed. It shares nothing with the test process but the home directory.
"""

from __future__ import annotations

import json
import sys

from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService


def main(home: str) -> None:
    with ContextEngineService.open(home) as engine:
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            cmd = json.loads(line)
            ctx = RequestContext(**cmd.get("ctx", {"account_id": "default", "role": "admin"}))
            op = cmd["op"]
            if op == "add_text":
                report = engine.add_text(cmd["text"], cmd["uri"], ctx)
            elif op == "add_memory":
                report = engine.add_memory(cmd["text"], ctx, category=cmd.get("category", "note"))
            elif op == "delete":
                report = engine.delete(cmd["uri"], ctx)
            elif op == "move":
                report = engine.move(cmd["src"], cmd["dst"], ctx)
            else:
                raise SystemExit(f"unknown op {op!r}")
            print(json.dumps({"ok": True, "uris": report.uris}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
