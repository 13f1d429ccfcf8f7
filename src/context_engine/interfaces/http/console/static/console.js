// ContextEngine console: loads server-rendered HTML fragments with the API key from sessionStorage.
// No framework: fetch(), a few delegated listeners, and the native <dialog> for confirmations (docs/console.md).
(() => {
  "use strict";
  const KEY = "ce_console_key";
  const page = document.body.dataset.page;
  const storedKey = () => sessionStorage.getItem(KEY);

  function headers(json) {
    const h = { Accept: "text/html" };
    const k = storedKey();
    if (k) h.Authorization = "Bearer " + k;
    if (json) h["Content-Type"] = "application/json";
    return h;
  }

  function toLogin() {
    const next = location.pathname + location.search;
    location.assign("/console/login?next=" + encodeURIComponent(next));
  }

  // One fragment request; an error comes back as {ok: false, message: "<code>: <message>"} (the API envelope).
  async function fetchFragment(url, body) {
    let res;
    try {
      res = await fetch(url, body === undefined
        ? { headers: headers(false) }
        : { method: "POST", headers: headers(true), body: JSON.stringify(body) });
    } catch (err) {
      return { ok: false, status: 0, message: "the server cannot be reached" };
    }
    const text = await res.text();
    if (res.ok) return { ok: true, status: res.status, html: text };
    let message = res.status + " " + res.statusText;
    try {
      const env = JSON.parse(text);
      if (env.code) message = env.code + ": " + env.message;
    } catch (err) { /* not an envelope: keep the status line */ }
    if (res.status === 401 && page !== "login") {
      sessionStorage.removeItem(KEY);
      toLogin();
    }
    return { ok: false, status: res.status, message };
  }

  function errorNode(message) {
    const p = document.createElement("p");
    p.className = "error";
    p.setAttribute("role", "alert");
    p.textContent = message;
    return p;
  }

  async function load(el, url, body) {
    el.setAttribute("aria-busy", "true");
    const r = await fetchFragment(url, body);
    el.removeAttribute("aria-busy");
    if (r.ok) el.innerHTML = r.html;
    else el.replaceChildren(errorNode(r.message));
    return r;
  }

  // A form's fields as the API request body: data-type says how a value is sent; empty fields are left out.
  function formBody(form) {
    const body = {};
    for (const el of form.elements) {
      if (!el.name || el.disabled) continue;
      const type = el.dataset.type || "str";
      if (el.type === "checkbox") { body[el.name] = el.checked; continue; }
      const raw = el.value;
      if (raw.trim() === "") continue;
      if (type === "int" || type === "float") {
        const n = Number(raw);
        body[el.name] = Number.isFinite(n) ? n : raw; // the server answers a non-number with its error code
      } else if (type === "json") {
        try { body[el.name] = JSON.parse(raw); } catch (err) {
          throw new Error((el.labels[0] ? el.labels[0].textContent : el.name) + " is not valid JSON");
        }
      } else if (type === "list") {
        body[el.name] = raw.split(",").map((s) => s.trim()).filter(Boolean);
      } else {
        body[el.name] = raw;
      }
    }
    return body;
  }

  function confirmDialog(text) {
    const dialog = document.getElementById("confirm");
    document.getElementById("confirm-text").textContent = text;
    dialog.returnValue = "";
    dialog.showModal();
    return new Promise((resolve) => {
      dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    });
  }

  function keepInUrl(form) {
    const params = new URLSearchParams();
    for (const [name, value] of new FormData(form)) {
      if (typeof value === "string" && value.trim() !== "") params.append(name, value);
    }
    const qs = params.toString();
    history.replaceState(null, "", location.pathname + (qs ? "?" + qs : ""));
  }

  // Paging (the Memories page): a Previous/Next button of a fragment submits its page's form (form="...") with the
  // offset it names (data-field, data-value); any other submit (new filters) starts every list at its first page.
  // Returns where the keyboard focus goes once the new page is in: the same pager's same button (or its other one).
  function setPage(form, submitter) {
    const field = submitter ? submitter.dataset.field : undefined;
    for (const el of form.querySelectorAll("input[data-paging]")) {
      if (field === undefined) el.value = "";
      else if (el.name === field) el.value = submitter.dataset.value === "0" ? "" : submitter.dataset.value;
    }
    if (field === undefined) return null;
    const same = [...document.querySelectorAll("button[data-field]")].filter((b) => b.dataset.field === field);
    return { field, index: same.indexOf(submitter) };
  }

  function focusPager(target, paging) {
    const buttons = [...target.querySelectorAll("button[data-field]")].filter((b) => b.dataset.field === paging.field);
    const want = buttons[paging.index];
    const button = want && !want.disabled ? want : buttons.find((b) => !b.disabled);
    if (button) button.focus();
    return Boolean(button);
  }

  async function submitFragmentForm(form, paging) {
    const target = document.getElementById(form.dataset.target);
    let body;
    try { body = formBody(form); } catch (err) { target.replaceChildren(errorNode(err.message)); return; }
    if (form.dataset.confirm !== undefined) {
      const what = body.uri ? " " + body.uri : "";
      if (!(await confirmDialog(form.dataset.confirm + what))) return;
    }
    if (form.dataset.history !== undefined) keepInUrl(form);
    const get = (form.getAttribute("method") || "get").toLowerCase() === "get";
    const url = get ? form.dataset.fragment + "?" + new URLSearchParams(body).toString() : form.dataset.fragment;
    const r = await load(target, url, get ? undefined : body);
    if (r.ok && paging && focusPager(target, paging)) return;
    if (r.ok && target.hasAttribute("tabindex")) target.focus({ preventScroll: true });
  }

  async function toggleTree(button) {
    const box = document.getElementById(button.getAttribute("aria-controls"));
    if (button.getAttribute("aria-expanded") === "true") {
      button.setAttribute("aria-expanded", "false");
      box.hidden = true;
      return;
    }
    if (!box.dataset.loaded) {
      const r = await load(box, "/console/fragments/tree?uri=" + encodeURIComponent(button.dataset.tree));
      if (r.ok) box.dataset.loaded = "1";
    }
    box.hidden = false;
    button.setAttribute("aria-expanded", "true");
  }

  async function signIn(key) {
    const out = document.getElementById("login-result");
    sessionStorage.setItem(KEY, key);
    const r = await fetchFragment("/console/fragments/whoami");
    if (!r.ok) {
      sessionStorage.removeItem(KEY);
      out.replaceChildren(errorNode(r.message));
      return;
    }
    const next = new URLSearchParams(location.search).get("next");
    location.assign(next && next.startsWith("/console/") ? next : "/console/browse");
  }

  document.addEventListener("submit", (ev) => {
    const form = ev.target;
    if (form.id === "login") {
      ev.preventDefault();
      const key = document.getElementById("api-key").value.trim();
      if (key) signIn(key);
      else document.getElementById("login-result").replaceChildren(errorNode("Enter an API key, or continue without one."));
      return;
    }
    if (form.dataset.fragment) {
      ev.preventDefault();
      submitFragmentForm(form, setPage(form, ev.submitter));
    }
  });

  document.addEventListener("click", (ev) => {
    const toggle = ev.target.closest("button[data-tree]");
    if (toggle) { toggleTree(toggle); return; }
    if (ev.target.id === "anonymous") { signIn(""); return; }
    if (ev.target.id === "signout") { sessionStorage.removeItem(KEY); location.assign("/console/login"); }
  });

  document.addEventListener("DOMContentLoaded", async () => {
    if (page !== "login" && storedKey() === null) { toLogin(); return; }
    const loads = [...document.querySelectorAll("[data-load]")].map((el) => load(el, el.dataset.load));
    for (const form of document.querySelectorAll("form[data-autorun]")) {
      if (form.dataset.autorun === "always" || location.search) loads.push(submitFragmentForm(form));
    }
    await Promise.all(loads);
    // tabs a key may use: the whoami fragment says what this key may do (data-may); others stay hidden
    const who = document.querySelector("#whoami .identity");
    const may = who ? (who.dataset.may || "").split(" ") : [];
    for (const li of document.querySelectorAll("nav li[data-needs]")) li.hidden = !may.includes(li.dataset.needs);
    if (location.hash) {
      const anchor = document.getElementById(location.hash.slice(1));
      if (anchor) anchor.scrollIntoView();
    }
    document.body.dataset.ready = "true"; // for tests and screenshots: every fragment of the page has arrived
  });
})();
