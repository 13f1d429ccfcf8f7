"""The console in a real headless chromium: every page loads without console errors and passes axe-core (no serious
or critical violation), the search and lookup flows work on the runbooks, writes need a confirmation and are
disabled for a read-only key, and a key of account B sees nothing of account A (pages and fragment XHRs)."""

from __future__ import annotations

import json
import re
from urllib.parse import quote

import pytest

from context_engine.errors import ContextEngineError
from tests.console.conftest import ADMIN_A, CAROL, GONE, GONE_URI, MEMORY_A, ROTA, ROTA_URI, SESSION_A, USER_A

Axe = pytest.importorskip(
    "axe_playwright_python.sync_playwright", reason="axe-playwright-python (axe-core) is not installed"
).Axe

pytestmark = pytest.mark.slow

NO_LEADER = "ctx://resources/runbooks/etcd/etcdNoLeader.md"
FSYNC = "ctx://resources/runbooks/etcd/etcdHighFsyncDurations.md"

PAGES = {
    "browse": "/console/browse",
    "node": f"/console/node?uri={quote(NO_LEADER)}",
    "search": "/console/search?query=etcd+cluster+has+no+leader&top_k=5",
    "lookup": f"/console/lookup?query=etcd+has+no+leader&session_id={SESSION_A}",
    "sessions": "/console/sessions",
    "memories": "/console/memories?user_space=alice",
    "memories-paged": "/console/memories?user_space=carol&offset=50&events_offset=20",
    "memory-history": f"/console/memories?uri={quote(GONE_URI)}&user_space=alice",
    "memory-node": f"/console/node?uri={quote(ROTA_URI)}",
    "session": f"/console/sessions?session_id={SESSION_A}",
    "eval": "/console/eval",
    "eval-report": "/console/eval/report?run=po-bm25-dense",
    "eval-compare": "/console/eval/compare?a=po-bm25&b=po-bm25-dense",
    "write": "/console/write",
}


def serious_violations(page) -> list[str]:
    results = Axe().run(page)
    return [
        f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:3]}"
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


@pytest.mark.parametrize("name", list(PAGES))
def test_each_page_loads_without_console_errors_and_passes_axe(tab_factory, name):
    tab = tab_factory("admin_a")
    page = tab.open(PAGES[name])
    assert page.locator("h1").count() == 1
    assert not page.locator("[role=alert]").count(), page.locator("[role=alert]").all_inner_texts()
    assert tab.errors == []
    assert serious_violations(page) == []
    assert all(status == 200 for _, status, _ in tab.fragments), [(u, s) for u, s, _ in tab.fragments]
    assert tab.shot(name).stat().st_size > 0


def test_login_page_keeps_the_key_for_the_tab_and_refuses_a_wrong_one(tab_factory, console):
    tab = tab_factory(None)
    page = tab.page
    page.goto(console.url + "/console/search")  # no key yet: sent to the login page, then back
    page.wait_for_url("**/console/login?next=*")
    assert serious_violations(page) == []
    tab.shot("login")
    page.fill("#api-key", "ce_0000000000000000_" + "x" * 43)
    page.click("button[type=submit]")
    page.wait_for_selector("#login-result [role=alert]")
    assert "AUTH-4011" in page.inner_text("#login-result")
    page.fill("#api-key", console.keys["user_a"])
    page.click("button[type=submit]")
    page.wait_for_url("**/console/search")
    page.wait_for_selector("body[data-ready=true]")
    assert "account acme" in page.inner_text("#whoami") and "user alice" in page.inner_text("#whoami")
    assert page.evaluate("sessionStorage.getItem('ce_console_key')") == console.keys["user_a"]
    page.click("#signout")
    page.wait_for_url("**/console/login")
    assert page.evaluate("sessionStorage.getItem('ce_console_key')") is None


def test_browse_expands_the_tree_lazily_and_by_keyboard(tab_factory):
    tab = tab_factory("admin_a")
    page = tab.open("/console/browse")
    tab.settle(lambda: len(tab.fragments) >= 2)
    assert sorted(u.split("/console/fragments/")[1].split("?")[0] for u, _, _ in tab.fragments) == ["roots", "whoami"]
    toggle = page.locator("button[data-tree='ctx://resources/']")
    for _ in range(15):  # Tab through the skip link, the navigation and the sign-out button to the first toggle
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.dataset.tree") == "ctx://resources/":
            break
    page.keyboard.press("Enter")
    page.wait_for_selector("button[data-tree='ctx://resources/runbooks/']")
    assert toggle.get_attribute("aria-expanded") == "true"
    page.click("button[data-tree='ctx://resources/runbooks/']")
    page.click("button[data-tree='ctx://resources/runbooks/etcd/']")
    link = page.locator(f"li[data-uri='{NO_LEADER}'] a")
    link.wait_for()
    trees = lambda: [u for u, _, _ in tab.fragments if "/fragments/tree" in u]  # noqa: E731
    tab.settle(lambda: len(trees()) >= 3)
    assert len(trees()) == 3
    tab.shot("browse-expanded")
    link.click()
    page.wait_for_selector("body[data-ready=true] #l2 .md")
    assert "etcd" in page.inner_text("#l2 .md").lower()
    assert page.inner_text("#l0 p").startswith("etcdNoLeader")
    assert "Created" in page.inner_text("dl.meta") and "runbooks" in page.inner_text("dl.meta")
    assert tab.errors == []


def test_search_shows_score_components_timings_typed_queries_and_recheck_exclusions(tab_factory):
    tab = tab_factory("admin_a")
    page = tab.open("/console/search")
    page.fill("#s-query", "etcd cluster has no leader")
    page.fill("#s-hints", '{"exclude_terms": ["fsync"]}')
    page.press("#s-query", "Enter")
    page.wait_for_selector("table.hits")
    rows = page.locator("table.hits tbody tr")
    assert rows.first.get_attribute("data-uri") == NO_LEADER
    uris = rows.evaluate_all("rs => rs.map(r => r.dataset.uri)")
    assert FSYNC not in uris
    # one score per column, each with its meaning; the final score is shown once, the clamped similarity not at all
    columns = page.locator("table.hits thead th[data-score]").evaluate_all("ths => ths.map(t => t.dataset.score)")
    assert columns == ["final", "similarity", "hierarchy", "category", "target"]
    headers = page.locator("table.hits thead th[data-score]").all_inner_texts()
    assert "0–1, ranks the hits" in headers[0] and "cosine" in headers[1]
    final = float(rows.first.locator("td.num").first.inner_text())
    assert 0.0 <= final <= 1.0
    assert [b.split("\n")[0] for b in page.locator(".bars li .bar-label").all_inner_texts()][:2] == ["planner", "embed"]
    typed = page.locator("#tq-h + table tbody tr td:first-child").all_inner_texts()
    assert typed == ["memory", "skill", "resource"]
    excluded = page.locator("#rc-h ~ table tbody tr").all_inner_texts()
    assert any(FSYNC in r and "excluded_term:fsync" in r for r in excluded), excluded
    assert "exclude_terms" in page.url  # the form is kept in the URL: the page can be reloaded or shared
    tab.shot("search-flow", scroll_to="#search-result")
    rows.first.locator("td.reads a", has_text="L2").click()
    page.wait_for_selector("body[data-ready=true] #l2 .md")
    assert "leader" in page.inner_text("#l2 .md").lower()
    assert tab.errors == []


def test_lookup_shows_evidence_attempts_and_the_invocation_and_verifies_excerpts(tab_factory):
    tab = tab_factory("user_a")
    page = tab.open("/console/lookup")
    page.fill("#l-query", "etcd cluster has no leader for a minute")
    page.fill("#l-session", "console-lookup")
    page.click("form button[type=submit]")
    page.wait_for_selector("article.evidence")
    first = page.locator("article.evidence").first
    assert first.get_attribute("data-doc") == NO_LEADER
    assert page.locator("p.status strong").first.inner_text() == "found"
    assert page.locator("p.status strong").nth(1).inner_text() in ("PRECISE", "RELATED")
    assert page.locator("#att-h ~ table tbody tr").count() >= 1
    # one score per term with its meaning: the rank score and the similarity, never a distance beside them
    terms = first.locator("dl.scores dt").all_inner_texts()
    assert terms[:3] == ["Rank score", "Similarity", "Hint boost"]
    assert "higher is closer" in first.locator("dl.scores").inner_text()
    invocation = page.locator("dl[data-invocation]").get_attribute("data-invocation")
    assert invocation and len(invocation) == 32
    excerpt = first.locator("details.source pre").text_content()[:60]  # the text as returned, as an agent quotes it
    page.fill(f"#excerpt-{invocation}", excerpt)
    page.click("form.verify button")
    page.wait_for_selector(f"#verify-{invocation} [data-verified]")
    assert page.get_attribute(f"#verify-{invocation} [data-verified]", "data-verified") == "true"
    page.fill(f"#excerpt-{invocation}", "restart every node of the cluster at once and hope")
    page.click("form.verify button")
    page.wait_for_selector(f"#verify-{invocation} [data-verified=false]")
    tab.shot("lookup-flow", scroll_to="#lookup-result")
    # the same question again in the session: the document is withheld as already retrieved
    page.click("form.grid button[type=submit]")
    # a locator, not wait_for_function: that evals its string in the page, which the console's CSP forbids
    page.locator("p.status", has_text=re.compile("dedup")).first.wait_for()
    page.goto(tab.console.url + "/console/sessions?session_id=console-lookup")
    page.wait_for_selector("body[data-ready=true]")
    rows = page.locator("table caption:has-text('Invocations') >> xpath=.. >> tbody tr")
    assert rows.count() == 2  # newest first: the repeat withheld the document the first call returned
    assert rows.nth(0).locator("td").nth(2).inner_text() == "etcd cluster has no leader for a minute"  # the question
    assert NO_LEADER in rows.nth(1).locator("td").nth(5).inner_text()  # returned as evidence
    assert NO_LEADER not in rows.nth(0).locator("td").nth(5).inner_text()
    assert NO_LEADER in rows.nth(0).locator("td").nth(6).inner_text()  # deduped
    assert "invocation count\n2" in page.inner_text("#sum-h + dl")
    assert tab.errors == []


def test_writes_need_a_confirmation_and_go_through_the_api_checks(tab_factory, console):
    uri = "ctx://resources/notes/console-note.md"
    tab = tab_factory("admin_a")
    page = tab.open("/console/write")
    page.fill("#w-uri", uri)
    page.fill("#w-text", "# Console note\n\nWritten from the console test.\n")
    page.click("text=Add text…")
    page.wait_for_selector("dialog#confirm[open]")
    tab.shot("write-confirm")
    assert serious_violations(page) == []
    page.click("dialog#confirm button[value=cancel]")
    with pytest.raises(ContextEngineError):
        console.service.stat(uri, ADMIN_A)
    page.click("text=Add text…")
    page.click("#confirm-ok")
    page.wait_for_selector("#write-result .verdict")
    assert "Added text" in page.inner_text("#write-result")
    assert console.service.stat(uri, ADMIN_A).title == "Console note"
    page.fill("#d-uri", uri)
    page.click("text=Delete…")
    page.click("#confirm-ok")
    page.wait_for_selector("#write-result :text('Deleted')")
    with pytest.raises(ContextEngineError):
        console.service.stat(uri, ADMIN_A)
    assert tab.errors == []


def test_a_read_only_key_gets_disabled_forms_and_the_server_refuses_its_writes(tab_factory, console):
    tab = tab_factory("reader_a")
    page = tab.open("/console/write")
    assert "read-only" in page.inner_text("#whoami")
    assert page.locator("fieldset:disabled").count() == 3
    assert page.locator("fieldset:not(:disabled)").count() == 0
    assert serious_violations(page) == []
    tab.shot("write-read-only")
    status = page.evaluate(
        """async ([key]) => (await fetch('/console/fragments/write/text', {method: 'POST',
            headers: {'Authorization': 'Bearer ' + key, 'Content-Type': 'application/json'},
            body: JSON.stringify({uri: 'ctx://resources/x.md', text: 'x'})})).status""",
        [console.keys["reader_a"]],
    )
    assert status == 403


def test_a_key_of_account_b_sees_nothing_of_account_a(tab_factory, console):
    tab = tab_factory("user_b")
    page = tab.open("/console/browse")
    page.click("button[data-tree='ctx://resources/']")
    page.click("button[data-tree='ctx://resources/billing/']")
    page.wait_for_selector("li[data-uri='ctx://resources/billing/globex-billing.md']")  # B's own data is there
    for folder in ("ctx://user/bob/", "ctx://user/bob/memories/", "ctx://user/bob/memories/preference/"):
        page.click(f"button[data-tree='{folder}']")
    page.wait_for_selector("text=Bob wants invoices")
    seen = [page.content()]
    for path in (
        "/console/search?query=etcd+cluster+has+no+leader",
        "/console/lookup?query=etcd+cluster+has+no+leader",
        "/console/sessions",
        "/console/write",
    ):
        seen.append(tab.open(path).content())
    assert "globex" in page.inner_text("#whoami")
    tab.open("/console/sessions")
    assert "No session yet" in page.inner_text("#sessions-result")  # A's sessions are not listed
    tab.open(f"/console/sessions?session_id={SESSION_A}")  # A's session asked for by name: empty
    assert "No invocation in this session" in page.inner_text("#sessions-result")
    bodies = [body for _, _, body in tab.fragments]
    assert len(bodies) >= 10
    for text in seen + bodies:
        for marker in ("etcdNoLeader", "Alertmanager", "kubectl commands", "acme", "alice"):
            assert marker not in text, (marker, text[:300])
    # A's node and A's memory, asked for by URI: the same refusal as a URI that does not exist
    refusals = []
    for uri in (NO_LEADER, console.memory_a, "ctx://resources/runbooks/etcd/no-such-runbook.md"):
        tab.open("/console/node?uri=" + quote(uri))
        refusals.append(page.inner_text("#node"))
    assert refusals[0] == refusals[1] == refusals[2]
    assert refusals[0].startswith("RET-4032")
    tab.shot("account-b-search")


def test_eval_pages_are_for_admin_keys(tab_factory, console):
    tab = tab_factory("user_a")
    page = tab.open("/console/eval")
    assert "RET-4032" in page.inner_text("#eval-list")
    admin = tab_factory("admin_a")
    page = admin.open("/console/eval/report?run=po-bm25-dense")
    alts = page.locator("figure.chart img").evaluate_all("imgs => imgs.map(i => i.alt)")
    assert [a.split(".")[0] for a in alts] == ["Recall@K", "Measures per method", "Latency per query (ms)"]
    assert "bm25" in alts[0] and "dense" in alts[0]
    page = admin.open("/console/eval/compare?a=po-bm25&b=po-bm25-dense")
    rows = page.locator("table.compare tbody tr")
    assert rows.count() == 10  # two methods x five measures; dense has no A value
    reports = console.service.settings.home_path / "eval-reports"
    a, b = (json.loads((reports / n / "report.json").read_text())["results"][0] for n in ("po-bm25", "po-bm25-dense"))
    assert a["method"] == b["method"] == "bm25"
    cells = page.locator("table.compare tbody tr", has_text="nDCG@10").first.locator("td").all_inner_texts()
    expected = [f"{a['metrics']['nDCG@10']:.4f}", f"{b['metrics']['nDCG@10']:.4f}"]
    assert cells[-3:] == [*expected, f"{b['metrics']['nDCG@10'] - a['metrics']['nDCG@10']:+.4f}"]
    page = admin.open("/console/eval/report?run=..%2F..%2Fetc")
    assert "WRT-4041" in page.inner_text("#eval-report")


def test_a_search_is_recorded_and_every_invocation_shows_its_question_and_parameters(tab_factory):
    """search_memory leaves a tool_invocation row (issue 29 item 5): the search page shows it, and the sessions
    pages show each call's question and parameters, a search's and a lookup's alike."""
    tab = tab_factory("user_a")
    page = tab.open("/console/search?query=which+answers+does+alice+prefer&top_k=4&conversation_id=console-search")
    inv = page.locator("#inv-h ~ dl[data-invocation]")
    assert "which answers does alice prefer" in inv.locator("dd.question").inner_text()
    params = inv.locator("dd.params").inner_text()
    assert "top_k=4" in params and "conversation_id=console-search" in params
    assert "search_memory" in inv.inner_text()
    page = tab.open("/console/sessions")
    sessions = page.locator("#sessions-result table").first.locator("tbody tr")
    assert "which answers does alice prefer" in sessions.filter(has_text="console-search").inner_text()
    recent = page.locator("table.recent tbody tr")
    first = recent.first.locator("td").all_inner_texts()
    assert first[1:3] == ["search_memory", "which answers does alice prefer"] and "top_k=4" in first[3]
    tools = recent.evaluate_all("rs => rs.map(r => r.cells[1].innerText)")
    assert "lookup_knowledge" in tools
    page = tab.open("/console/sessions?session_id=console-search")
    heading = page.locator("#sessions-result section.card h3[id^=inv-]").first.inner_text()
    assert "which answers does alice prefer" in heading
    assert serious_violations(page) == []
    assert tab.errors == []


def test_excerpts_are_rendered_markdown_sanitised(tab_factory, console):
    """Evidence and levels are rendered from markdown, and the document's own HTML is sanitised (issue 29 item 5):
    runbooks' <details> blocks are rendered, not shown as text; a script, a style attribute, an event handler and
    an image are removed; the text as returned stays one click away."""
    uri = "ctx://resources/notes/console-markdown.md"
    text = (
        "# Markdown note\n\nSome **bold** words and `code`.\n\n<details><summary>Full query</summary>\n\n"
        "quokka ledger</details>\n\n<script>document.title = 'owned'</script>\n\n"
        '<p style="color: red" onclick="alert(1)">styled</p> <img src="http://example.invalid/x.png">\n'
    )
    console.service.add_text(text, uri, ADMIN_A)
    tab = tab_factory("admin_a")
    page = tab.open("/console/node?uri=" + quote(uri))
    md = page.locator("#l2 .md")
    assert md.locator("strong").inner_text() == "bold" and md.locator("code").first.inner_text() == "code"
    assert md.locator("details summary").inner_text() == "Full query"
    html = md.inner_html()
    for unsafe in ("<script", "style=", "onclick", "<img", "<h1"):
        assert unsafe not in html, (unsafe, html)
    assert "&lt;details" not in html and "<details" not in page.inner_text("#l2 .md")
    assert "<details>" in page.locator("#l2 details.source pre").text_content()
    assert page.evaluate("document.title") != "owned"
    assert page.locator("h1").count() == 1
    assert serious_violations(page) == []
    assert tab.errors == []
    tab = tab_factory("admin_a")
    page = tab.open("/console/lookup?query=etcd+has+no+leader")
    assert page.locator("article.evidence .excerpt.md").count() >= 1
    excerpts = page.locator("article.evidence .excerpt.md").evaluate_all("es => es.map(e => e.innerHTML)")
    assert all("&lt;details" not in h for h in excerpts)


@pytest.mark.parametrize("width", [390, 1366])
def test_no_page_scrolls_sideways_on_a_phone_or_a_laptop(tab_factory, width):
    """No horizontal scroll at 390 px (a phone) and 1,366 px (a laptop): the document is never wider than the window
    (issue 29 item 5; it was 807 px on a phone and a 1,674 px table at 1,366 px)."""
    tab = tab_factory("admin_a")
    tab.page.set_viewport_size({"width": width, "height": 800})
    wide = {}
    for name, path in PAGES.items():
        page = tab.open(path)
        scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        if scroll > inner:  # name the widest elements that stick out, to say what to fix
            wide[name] = page.evaluate(
                """(w) => [...document.querySelectorAll('body *')]
                   .filter(e => e.getBoundingClientRect().right > w).slice(-3)
                   .map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().width))""",
                inner,
            )
    assert wide == {}, f"pages wider than {width} px: {wide}"
    assert tab.errors == []


def test_tabs_are_shown_only_to_keys_that_may_use_them(tab_factory):
    """Evaluation is an admin's tab; Write is hidden from a key that can write nowhere (the pages still answer)."""
    shown = {}
    for key in ("admin_a", "user_a", "reader_a"):
        page = tab_factory(key).open("/console/browse")
        shown[key] = page.locator("nav a:visible").all_inner_texts()
    assert shown["admin_a"] == ["Browse", "Search", "Lookup", "Memories", "Sessions", "Evaluation", "Write"]
    assert shown["user_a"] == ["Browse", "Search", "Lookup", "Memories", "Sessions", "Write"]
    assert shown["reader_a"] == ["Browse", "Search", "Lookup", "Sessions"]


def test_an_unclassified_query_gets_a_note_not_a_warning(tab_factory):
    """RET-4221 (the planner preferred no context type) reports a decision: it is a note, not an orange warning."""
    tab = tab_factory("admin_a")
    page = tab.open("/console/search?query=etcd+cluster+has+no+leader&top_k=5")
    notes = page.locator("#search-result ul.notes li").all_inner_texts()
    assert any("RET-4221" in n for n in notes), notes
    assert not any("RET-4221" in w for w in page.locator("#search-result ul.warnings li").all_inner_texts())
    assert serious_violations(page) == []


def test_a_users_memories_with_filters_and_a_session_as_its_transcript(tab_factory, console):
    """The memory view (issue 29 item 5): a user's memories by category, a conversation session as a transcript
    (oldest first, with speakers), an admin choosing the user; another account's user sees none of them."""
    from context_engine.schema.memory import Message

    messages = [
        Message(role="user", speaker="alice", content="We moved the etcd backups to the eu-west bucket."),
        Message(role="assistant", speaker="bot", content="Noted: etcd backups now go to eu-west."),
    ]
    console.service.add_messages(messages, "console-chat", USER_A)
    tab = tab_factory("user_a")
    page = tab.open("/console/memories")
    assert MEMORY_A[:30] in page.inner_text("table.memories")
    page = tab.open("/console/memories?category=preference")
    assert page.locator("table.memories tbody tr").count() >= 1
    assert all(c == "preference" for c in page.locator("table.memories tbody td:nth-child(2)").all_inner_texts())
    page = tab.open("/console/memories?conversation_id=console-chat")
    items = page.locator("ol.transcript li")
    assert items.count() >= 1 and "etcd backups" in page.inner_text("ol.transcript")
    transcript = page.inner_text("ol.transcript")
    assert tab.open("/console/memories?session_id=console-chat").inner_text("ol.transcript") == transcript  # old link
    assert serious_violations(page) == []
    admin = tab_factory("admin_a").open("/console/memories?user_space=alice")
    assert MEMORY_A[:30] in admin.inner_text("table.memories")
    other = tab_factory("user_b").open("/console/memories?conversation_id=console-chat")
    assert "etcd backups" not in other.content()
    assert tab.errors == []


def _events(page, scope: str = "table.events") -> list[tuple[str, str]]:
    """(event, uri) of each row of an event table, top to bottom."""
    rows = page.locator(f"{scope} tbody tr")
    return [(r.get_attribute("data-event"), r.get_attribute("data-uri")) for r in rows.all()]


def test_a_users_memory_events_newest_first_and_each_memorys_own(tab_factory, console):
    """The ADD/UPDATE/DELETE history (issue 29 item 5): alice's events newest first with versions and abstracts
    before and after; a memory's own events (a deleted one's too) and on its page; an admin naming alice sees the
    same; a user of another account sees only its own."""
    tab = tab_factory("user_a")
    page = tab.open("/console/memories")
    mine = [e for e in _events(page) if e[1] in (ROTA_URI, GONE_URI)]
    assert mine == [("DELETE", GONE_URI), ("ADD", GONE_URI), ("UPDATE", ROTA_URI), ("ADD", ROTA_URI)]
    update = page.locator(f"table.events tr[data-event=UPDATE][data-uri='{ROTA_URI}'] td").all_inner_texts()
    assert update[1:] == ["UPDATE", ROTA_URI, "1 → 2", ROTA[0], ROTA[1]]
    delete = page.locator(f"table.events tr[data-event=DELETE][data-uri='{GONE_URI}'] td").all_inner_texts()
    assert delete[1:] == ["DELETE", GONE_URI, "1", GONE, "(deleted)"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", update[0])
    assert serious_violations(page) == []
    tab.shot("memory-events", scroll_to="#events-h")
    # a deleted memory's own events, from its link in the table
    page.click(f"table.events tr[data-event=DELETE][data-uri='{GONE_URI}'] a")
    page.wait_for_selector("body[data-ready=true] #memories-result h2")
    assert "Events of one memory (2)" in page.inner_text("#memories-result h2")
    assert _events(page) == [("DELETE", GONE_URI), ("ADD", GONE_URI)]
    assert "deleted" in page.inner_text("#memories-result p") and not page.locator("text=Open the memory").count()
    # an existing one: its events, then its page with its versions and events
    page = tab.open(f"/console/memories?uri={quote(ROTA_URI)}")
    assert _events(page) == [("UPDATE", ROTA_URI), ("ADD", ROTA_URI)]
    page.click("text=Open the memory")
    page.wait_for_selector("body[data-ready=true] #events table.events")
    assert [r.get_attribute("data-event") for r in page.locator("#events tbody tr").all()] == ["UPDATE", "ADD"]
    assert ROTA[0] in page.inner_text("#events") and ROTA[0] in page.inner_text("#ver-h ~ table")
    assert serious_violations(page) == []
    # an admin naming alice sees her history; bob (account globex) sees only his own, nothing of alice's
    admin = tab_factory("admin_a").open("/console/memories?user_space=alice")
    assert [e for e in _events(admin) if e[1] in (ROTA_URI, GONE_URI)] == mine
    other = tab_factory("user_b")
    page = other.open("/console/memories")
    assert _events(page) and all(e == "ADD" and u.startswith("ctx://user/bob/") for e, u in _events(page))
    other.open(f"/console/memories?uri={quote(GONE_URI)}")  # alice's deleted memory, by URI: refused
    assert page.inner_text("#memories-result").startswith("RET-4032")
    assert sorted(s for _, s, _ in other.fragments) == [200, 200, 200, 403]  # whoami and memories, twice
    for _, _, body in other.fragments:
        assert GONE not in body and ROTA[0] not in body and ROTA[1] not in body
    assert tab.errors == [] and all("status of 403" in e for e in other.errors)  # the refusal, logged by chromium


def test_the_memories_list_pages_by_keyboard_with_its_filters(tab_factory):
    """The Memories list shows 50 a page: Previous/Next are buttons (keyboard: focus, Enter), the offset is kept in
    the URL, the events page on their own, and new filters start again at the first page."""
    tab = tab_factory("admin_a")
    page = tab.open("/console/memories?user_space=carol")
    rows = page.locator("table.memories tbody tr")
    assert rows.count() == 50 and f"Memories ({CAROL})" in page.inner_text("#memories-result h2")
    memories_pager = "nav.pager[aria-label='Memories: pages']"
    pager = page.locator(memories_pager)
    assert "Memories 1–50 of 55" in pager.inner_text()
    previous, following = pager.locator("button").all()
    assert previous.is_disabled() and following.is_enabled()
    first_page = {r.get_attribute("data-uri") for r in rows.all()}
    following.focus()
    page.keyboard.press("Enter")
    # locators, not wait_for_function: that evals its string in the page, which the console's CSP forbids
    page.locator(memories_pager, has_text="Memories 51–55 of 55").wait_for()
    assert "offset=50" in page.url and page.locator("table.memories tbody tr").count() == 5
    second_page = {r.get_attribute("data-uri") for r in page.locator("table.memories tbody tr").all()}
    assert len(second_page) == 5 and not second_page & first_page
    # Next is disabled on the last page: the focus is on Previous, and Enter goes back
    assert page.evaluate("document.activeElement.textContent") == "Previous 50"
    page.keyboard.press("Enter")
    page.locator(memories_pager, has_text="Memories 1–50 of 55").wait_for()
    assert "offset=" not in page.url
    # the events page on their own (20 a page), the memories stay where they are
    page.locator("nav.pager[aria-label='Events: pages'] button", has_text="Next").focus()
    page.keyboard.press("Enter")
    page.locator("nav.pager[aria-label='Events: pages']", has_text="Events 21–40 of 55").wait_for()
    assert "events_offset=20" in page.url
    assert page.evaluate("document.activeElement.textContent") == "Next 20"
    assert page.locator("table.memories tbody tr").count() == 50
    # a filter (Enter in its field) starts every list again at its first page
    page.fill("#mem-cat", "notes")
    page.press("#mem-cat", "Enter")
    page.locator("nav.pager[aria-label='Events: pages']", has_text="Events 1–20 of 55").wait_for()
    assert "category=notes" in page.url and "offset" not in page.url
    assert page.locator("table.memories tbody tr").count() == 50
    assert serious_violations(page) == []
    assert tab.errors == []
