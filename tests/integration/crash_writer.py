"""The writer process of the crash tests: one write on a home, killed with SIGKILL somewhere inside it.

Run as ``python -m tests.integration.crash_writer HOME OP_JSON``. It opens a :class:`ContextEngineService` on HOME
(settings from the environment: ``CE_INGEST__CRASH_AT`` names the protocol point at which it kills itself), prints
``{"ready": true}``, waits for one line on stdin (so a parent that kills it after a delay starts the clock at the
write, not at the model load), runs the write and prints ``{"done": true}`` once it has returned (committed).
``OP_JSON`` is ``{"op": "add" | "readd" | "delete" | "move", "uri"/"text"/"src"/"dst"/"recursive": ...}``.
"""

from __future__ import annotations

import json
import sys

from context_engine.schema.context import RequestContext
from context_engine.service import ContextEngineService


def main(home: str, op_json: str) -> None:
    op = json.loads(op_json)
    ctx = RequestContext(account_id="default", role="admin")
    with ContextEngineService.open(home) as engine:
        print(json.dumps({"ready": True}), flush=True)
        sys.stdin.readline()
        if op["op"] in ("add", "readd"):
            engine.add_text(op["text"], op["uri"], ctx)
        elif op["op"] == "delete":
            engine.delete(op["uri"], ctx, recursive=op.get("recursive", False))
        elif op["op"] == "move":
            engine.move(op["src"], op["dst"], ctx)
        else:
            raise SystemExit(f"unknown op {op['op']!r}")
        print(json.dumps({"done": True}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
