"""Browser tests of the web console (issue 16): a real uvicorn server on 127.0.0.1, Debian's chromium driven by
Playwright (system executable; Playwright's own browser download is never used), axe-core from the
``axe-playwright-python`` wheel.

Data: two runbook folders of ../shared/data/runbooks in account ``acme`` (A), a memory of A's user alice and her
memory events (a memory added and updated, one added and deleted), a session of A's lookups, 55 memories of A's user
carol (paging); account ``globex`` (B) has one document and one memory of its own. Two ``context-engine eval`` runs
(BM25, BM25 + dense with more distractors) are written to the server home's ``eval-reports/``.

Screenshots go to ``$CE_CONSOLE_SCREENSHOTS`` when set (``docs/img/console`` regenerates the docs' images), else to
a pytest temporary folder whose path the tests print.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from context_engine.interfaces.http import create_app
from context_engine.schema.context import RequestContext
from context_engine.schema.knowledge import LookupRequest
from context_engine.service import ContextEngineService
from context_engine.settings import load_settings
from context_engine.storage.metadata.keys import ApiKeyStore
from tests.conftest import shared_data
from tests.http.helpers import LiveServer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

ADMIN_A = RequestContext(account_id="acme", role="admin")
USER_A = RequestContext(account_id="acme", role="user", user_space="alice", agent_space="alice-bot")
READER_A = RequestContext(account_id="acme", role="user")  # no space of its own: can write nowhere
USER_B = RequestContext(account_id="globex", role="user", user_space="bob")
USER_C = RequestContext(account_id="acme", role="user", user_space="carol")  # 55 memories: two pages of them

FOLDERS = ("etcd", "alertmanager")  # 14 runbooks: enough for search and lookup, small enough for CI
SESSION_A = "incident-4711"
MEMORY_A = "Alice prefers runbook answers with the exact kubectl commands."
ROTA = ("Alice is on call on Mondays.", "Alice is on call on Tuesdays.")  # an ADD and an UPDATE in A's history
ROTA_URI = "ctx://user/alice/memories/rota/on-call.md"
GONE = "Alice's old pager number is 555-0100."  # added, then deleted: an ADD and a DELETE
GONE_URI = "ctx://user/alice/memories/rota/old-pager.md"
CAROL = 55  # carol's memories
DOC_B = "# Globex Billing\n\n## Meaning\n\nInvoices stop when the quokka ledger stalls.\n\n## Fix\n\nRestart it.\n"


@dataclass
class Console:
    """The running server: its URL, an API key per caller name, the service behind it, the screenshot folder."""

    url: str
    keys: dict[str, str]
    service: ContextEngineService
    shots: Path
    memory_a: str  # the URI of A's memory


def _eval_reports(home: Path, tmp: Path) -> None:
    """Two real `context-engine eval` runs into <home>/eval-reports/ (BM25; BM25 + dense on MiniLM)."""
    from context_engine.interfaces.cli.app import app

    data = shared_data("runbooks")
    base = tmp / "baselines"
    base.mkdir()
    runs = {  # B adds dense and more distractors: the comparison has differences to show
        "po-bm25": ["--method", "bm25", "--max-docs", "40"],
        "po-bm25-dense": ["--method", "bm25", "--method", "dense", "--max-docs", "108"],
    }
    for name, methods in runs.items():
        args = ["--home", str(tmp / "eval-home"), "eval", "--dataset", str(data), "--split", "prometheus-operator"]
        args += [*methods, "--embedder", "sentence-transformers", "--limit-queries", "24"]
        args += ["--out", str(home / "eval-reports" / name), "--baselines", str(base)]
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output


@pytest.fixture(scope="package")
def console(tmp_path_factory, embedder) -> Iterator[Console]:
    runbooks = shared_data("runbooks", "prometheus-operator")
    home = tmp_path_factory.mktemp("console-home")
    service = ContextEngineService(load_settings(home), embedder=embedder)
    for folder in FOLDERS:
        report = service.add_resource(runbooks / folder, f"ctx://resources/runbooks/{folder}/", ADMIN_A)
        assert report.failed == 0 and report.nodes > 0
    memory = service.add_memory(MEMORY_A, USER_A, category="preference").uris[0]
    service.add_memory(ROTA[0], USER_A, uri=ROTA_URI)
    service.update_memory(ROTA_URI, ROTA[1], USER_A)
    service.add_memory(GONE, USER_A, uri=GONE_URI)
    service.delete_memory(GONE_URI, USER_A)
    notes = [{"text": f"Carol's note {i}: rack {i} is in row {i % 7}.", "category": "notes"} for i in range(CAROL)]
    assert [o.status for o in service.add_memories(notes, USER_C).items] == ["added"] * CAROL
    for query in ("etcd cluster has no leader", "etcd has no leader, what do I check?"):
        service.lookup_knowledge(LookupRequest(query=query, session_id=SESSION_A), USER_A)
    admin_b = RequestContext(account_id="globex", role="admin")
    service.add_text(DOC_B, "ctx://resources/billing/globex-billing.md", admin_b)
    service.add_memory("Bob wants invoices in EUR.", USER_B, category="preference")
    _eval_reports(home, tmp_path_factory.mktemp("console-eval"))
    store = ApiKeyStore(service.metadata)
    keys = {name: store.create(ctx, name)[1] for name, ctx in
            {"admin_a": ADMIN_A, "user_a": USER_A, "reader_a": READER_A, "user_b": USER_B}.items()}
    shots = Path(os.environ.get("CE_CONSOLE_SCREENSHOTS") or tmp_path_factory.mktemp("console-screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    print(f"\nconsole screenshots: {shots}")
    with LiveServer(create_app(service=service)) as server:
        yield Console(server.url, keys, service, shots, memory_a=memory)
    service.close()


@pytest.fixture(scope="package")
def browser():
    """Debian's chromium under Playwright; the test skips, saying why, where either is missing.

    Package-scoped: the sync API runs an event loop in this thread while it is open, so it must be closed before
    the tests of other packages run ``asyncio`` (the MCP client tests would find a loop already running)."""
    playwright_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -c constraints.txt -e '.[test]')"
    )
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


class Tab:
    """One browser tab signed in with one key: collects console errors and every fragment response (the XHRs)."""

    def __init__(self, browser, console: Console, key: str | None) -> None:
        self.console = console
        self.context = browser.new_context(viewport={"width": 1100, "height": 760}, device_scale_factor=1)
        if key is not None:
            self.context.add_init_script(f"sessionStorage.setItem('ce_console_key', {key!r});")
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.fragments: list[tuple[str, int, str]] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("response", self._record)

    def _record(self, response) -> None:
        if "/console/fragments/" in response.url:
            try:
                body = response.text()
            except Exception as err:  # a response the page navigated away from: record that, not its body
                body = f"<unreadable: {err}>"
            self.fragments.append((response.url, response.status, body))

    def settle(self, condition: Any, timeout_ms: int = 10_000) -> None:
        """Let Playwright deliver pending events until ``condition()`` holds: a response is recorded when the sync
        API next yields to its loop, which can be after the page has already shown what the response brought."""
        waited = 0
        while not condition() and waited < timeout_ms:
            self.page.wait_for_timeout(50)
            waited += 50

    def open(self, path: str) -> Any:
        self.page.goto(self.console.url + path)
        self.page.wait_for_selector("body[data-ready=true]", timeout=60_000)
        return self.page

    def shot(self, name: str, scroll_to: str | None = None) -> Path:
        """A viewport screenshot ``<name>.png``; with Pillow there, reduced to a 96-colour palette (small PNGs for
        docs/console.md)."""
        if scroll_to:
            self.page.locator(scroll_to).evaluate("el => el.scrollIntoView()")
        path = self.console.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=False)
        try:
            from PIL import Image
        except ImportError:
            return path
        with Image.open(path) as img:
            small = img.convert("RGB").quantize(colors=96)
        small.save(path, optimize=True)
        return path

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def tab_factory(browser, console):
    tabs: list[Tab] = []

    def make(key_name: str | None) -> Tab:
        tab = Tab(browser, console, None if key_name is None else console.keys[key_name])
        tabs.append(tab)
        return tab

    yield make
    for t in tabs:
        t.close()
