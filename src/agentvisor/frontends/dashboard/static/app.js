// agentvisor dashboard. Plain JavaScript, no build step.
// Everything an agent wrote (commands, paths, reasons) is put in the page as text
// (textContent), never as markup.
"use strict";

const API = "/dashboard/api";
const VIEWS = ["approvals", "activity", "sessions", "changes", "grants", "policy", "audit"];
const FEED_LIMIT = 300;

let me = null;
let clockSkew = 0; // server time minus browser time, seconds
const cards = new Map(); // ask id -> {el, ask}
const answeredHere = new Set(); // ask ids this browser answered

// -- small helpers -------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

async function api(path, options = {}) {
  const init = { method: options.method || "GET", headers: {}, credentials: "same-origin" };
  if (options.body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  if (init.method !== "GET" && me) init.headers["x-csrf-token"] = me.csrf;
  let response;
  try {
    response = await fetch(API + path, init);
  } catch (e) { // the gateway is restarting or gone; the event stream reconnects
    return { ok: false, status: 0, data: { error: "the gateway cannot be reached" } };
  }
  if (response.status === 401) {
    location.href = "/dashboard/login";
    throw new Error("log in first");
  }
  let data = {};
  try { data = await response.json(); } catch (e) { /* not JSON */ }
  return { ok: response.ok, status: response.status, data };
}

function toast(text, kind = "") {
  const el = h("div", { class: `toast ${kind}`, role: "status" }, text);
  document.getElementById("toasts").append(el);
  setTimeout(() => el.remove(), kind === "error" ? 9000 : 5000);
}

const now = () => Date.now() / 1000 + clockSkew;
const pad = (n) => String(n).padStart(2, "0");

function clock(epoch) {
  const d = new Date(epoch * 1000);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function ago(epoch) {
  const s = Math.max(0, Math.round(now() - epoch));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(epoch * 1000).toLocaleString();
}

function until(epoch) {
  if (epoch === null || epoch === undefined) return "never ends";
  const s = Math.round(epoch - now());
  if (s <= 0) return "expired";
  if (s < 3600) return `in ${Math.max(1, Math.round(s / 60))} min`;
  if (s < 86400) return `in ${(s / 3600).toFixed(s < 36000 ? 1 : 0)} h`;
  return `in ${Math.round(s / 86400)} d`;
}

function pill(text) {
  return text ? h("span", { class: `pill ${text}` }, text) : "";
}

function actionText(action) {
  if (!action) return "";
  if (action.argv && action.argv.length) return action.argv.join(" ");
  return action.target || "";
}

function empty(el, text, cols) {
  el.replaceChildren(cols
    ? h("tbody", {}, h("tr", { class: "empty-row" }, h("td", { colspan: cols }, text)))
    : h("li", { class: "empty-row" }, text));
}

// -- navigation ----------------------------------------------------------------------

function show(view) {
  if (!VIEWS.includes(view)) view = "approvals";
  for (const name of VIEWS) {
    document.getElementById(`view-${name}`).hidden = name !== view;
  }
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.view === view);
  }
  const load = {
    sessions: loadSessions, changes: loadChanges, grants: loadGrants, policy: loadPolicy,
    audit: loadAudit,
  };
  if (load[view]) load[view]();
}

window.addEventListener("hashchange", () => show(location.hash.slice(1)));

// -- approvals -----------------------------------------------------------------------

const WANTS = {
  exec: "wants to run", read: "wants to read", write: "wants to write",
  fetch: "wants to reach", secret: "wants to use the secret", tool: "wants to call",
};
const CHOICE_LABEL = {
  once: "Allow once", session: "Allow for this session", always: "Always…", deny: "Deny…",
};

function renderAsks(pending) {
  const list = document.getElementById("asks");
  const ids = new Set(pending.map((a) => a.id));
  for (const [id, card] of cards) {
    if (!ids.has(id)) { card.el.remove(); cards.delete(id); }
  }
  for (const ask of pending) {
    if (!cards.has(ask.id)) {
      const el = askCard(ask);
      cards.set(ask.id, { el, ask });
      list.append(el);
    }
  }
  document.getElementById("no-asks").hidden = pending.length > 0;
  const count = document.getElementById("count-approvals");
  count.hidden = pending.length === 0;
  count.textContent = pending.length;
  document.title = pending.length ? `(${pending.length}) agentvisor` : "agentvisor";
  tick();
}

function askCard(ask) {
  const action = ask.action || {};
  const panel = h("div", { class: "panel-slot" });
  const buttons = ask.choices.map((choice) => h("button", {
    class: `btn ${choice === "once" ? "primary" : ""} ${choice === "deny" ? "danger" : ""}`,
    type: "button", "data-choice": choice,
    onclick: () => choose(ask, choice, panel),
  }, CHOICE_LABEL[choice] || choice));
  buttons.splice(buttons.length - 1, 0, h("span", { class: "spacer" }));

  const facts = h("dl", { class: "facts" });
  const fact = (k, v) => { if (v) facts.append(h("dt", {}, k), h("dd", {}, v)); };
  fact("Session", ask.session);
  fact("Agent", ask.agent || "unnamed");
  fact("Tool", ask.tool);
  fact("Method", action.method);
  fact("Host", action.host);
  fact("Asked", clock(ask.created_at));

  const why = h("div", { class: "why" },
    h("p", { class: "reason" }, ask.reason),
    (ask.category_info || []).map((c) =>
      h("span", { class: `chip ${c.hardline ? "hard" : ""}`, title: c.summary }, c.name)),
    h("dl", { class: "facts" },
      ask.rule ? [h("dt", {}, "Rule"), h("dd", { class: "mono" }, ask.rule)] : null),
    (ask.details || []).filter((d) => d !== ask.reason).length
      ? h("ul", { class: "details" },
        ask.details.filter((d) => d !== ask.reason).slice(0, 8).map((d) => h("li", {}, d)))
      : null,
    ask.patterns && ask.patterns.length && ask.choices.includes("session")
      ? h("p", { class: "would" }, "“This session” and “Always” would allow: ",
        ask.patterns.map((p, i) => [i ? ", " : "", h("code", {}, p)]))
      : null);

  return h("article", { class: "ask-card", "data-id": ask.id },
    h("div", { class: "ask-head" },
      h("span", { class: "kind" }, action.kind || "?"),
      h("span", {}, WANTS[action.kind] || "wants to"),
      h("span", { class: "timer", "data-expires": ask.expires_at }, "")),
    h("pre", { class: "command" }, actionText(action)),
    h("div", { class: "ask-body" }, why, facts),
    h("div", { class: "actions" }, buttons),
    panel);
}

function choose(ask, choice, slot) {
  if (choice === "once" || choice === "session") return answer(ask, { choice });
  slot.replaceChildren(choice === "deny" ? denyPanel(ask, slot) : alwaysPanel(ask, slot));
  const field = slot.querySelector("textarea, input");
  if (field) field.focus();
}

function denyPanel(ask, slot) {
  const reason = h("textarea", { name: "reason", maxlength: "1000",
    placeholder: "e.g. not on this machine; use the staging database instead" });
  return h("div", { class: "choice-panel deny" },
    h("label", {}, "Reason — the agent sees this", reason),
    h("div", { class: "row" },
      h("button", { class: "btn danger solid", type: "button", "data-confirm": "deny",
        onclick: () => answer(ask, { choice: "deny", reason: reason.value.trim() }) }, "Deny"),
      h("button", { class: "btn", type: "button", onclick: () => slot.replaceChildren() },
        "Cancel")));
}

function alwaysPanel(ask, slot) {
  const files = ask.config_files || [];
  const radios = files.map((file, i) => h("label", { class: "radio" },
    h("input", { type: "radio", name: `file-${ask.id}`, value: file, checked: i === 0 }), file));
  return h("div", { class: "choice-panel" },
    h("div", {}, h("strong", {}, "Save an allow rule to:"), radios),
    h("div", {}, h("div", { class: "muted" }, "This rule will be added:"),
      h("pre", { class: "rule-preview" }, (ask.rule_previews || []).join("\n"))),
    h("div", { class: "row" },
      h("button", { class: "btn primary", type: "button", "data-confirm": "always",
        onclick: () => {
          const picked = slot.querySelector("input[type=radio]:checked");
          answer(ask, { choice: "always", config_file: picked ? picked.value : null });
        } }, "Save rule and allow"),
      h("button", { class: "btn", type: "button", onclick: () => slot.replaceChildren() },
        "Cancel")));
}

async function answer(ask, body) {
  const card = cards.get(ask.id);
  if (card) for (const b of card.el.querySelectorAll("button")) b.disabled = true;
  answeredHere.add(ask.id);
  const { ok, data } = await api(`/approvals/${encodeURIComponent(ask.id)}`,
    { method: "POST", body });
  const what = actionText(ask.action);
  if (ok) {
    toast(`${body.choice === "deny" ? "Denied" : CHOICE_LABEL[body.choice].replace("…", "")}: ${what}`, "ok");
  } else {
    toast(`Not applied: ${data.message || data.error || "refused"}`, "error");
  }
  if (card) { card.el.classList.add("done"); }
  refreshApprovals();
}

function renderSettled(recent) {
  const list = document.getElementById("settled");
  if (!recent.length) { empty(list, "Nothing settled yet."); return; }
  list.replaceChildren(...recent.slice(0, 10).map((s) => {
    const a = s.answer;
    const verdict = a ? (a.choice === "deny" ? "deny" : a.choice) : s.status;
    const by = a ? `${a.approver} via ${a.channel}` : (s.outcome || s.status);
    return h("li", {}, pill(verdict), h("span", { class: "what" }, actionText(s.action)),
      h("span", { class: "muted" }, by));
  }));
}

async function refreshApprovals() {
  const { ok, data } = await api("/approvals");
  if (!ok) return;
  renderAsks(data.pending);
  renderSettled(data.recent);
}

function tick() {
  for (const el of document.querySelectorAll(".timer[data-expires]")) {
    const left = Math.max(0, Math.round(Number(el.dataset.expires) - now()));
    el.textContent = `${Math.floor(left / 60)}:${pad(left % 60)} left, then denied`;
    el.classList.toggle("soon", left < 30);
  }
}

// -- activity ------------------------------------------------------------------------

function eventLine(e) {
  const args = e.arguments || {};
  const by = e.approver ? `${e.approver}${e.channel ? ` via ${e.channel}` : ""}` : "";
  if (e.kind === "call") {
    const what = args.command || args.path || args.url || args.code || "";
    return [`${e.tool || "call"}${what ? ": " : ""}${what}`, e.result || e.reason || ""];
  }
  if (e.kind === "approval" || e.kind === "grant") {
    const line1 = [by, e.result].filter(Boolean).join(" — ");
    return [line1 || e.kind, e.reason || e.rule || ""];
  }
  return [e.result || e.reason || e.kind, e.rule || ""];
}

function when(epoch) {
  const d = new Date(epoch * 1000);
  return `${d.toLocaleDateString(undefined, { month: "short", day: "numeric" })} ${clock(epoch)}`;
}

function feedItem(e, fresh) {
  const [line1, line2] = eventLine(e);
  return h("li", { class: fresh ? "new" : "" },
    h("span", { class: "t" }, clock(e.time)),
    h("span", { class: "k" }, h("span", { class: "kind" }, e.kind)),
    h("div", { class: "main" },
      h("div", { class: "line1" }, line1),
      h("div", { class: "line2" },
        [e.session, e.agent].filter(Boolean).join(" · "), line2 ? ` — ${line2}` : "")),
    h("span", { class: "d" }, pill(e.decision)));
}

function addToFeed(e) {
  const feed = document.getElementById("feed");
  const placeholder = feed.querySelector(".empty-row");
  if (placeholder) placeholder.remove();
  feed.prepend(feedItem(e, true));
  while (feed.children.length > FEED_LIMIT) feed.lastChild.remove();
}

async function loadFeed() {
  const { ok, data } = await api("/audit?limit=100");
  if (!ok) return;
  const feed = document.getElementById("feed");
  if (!data.events.length) { empty(feed, "Nothing has happened yet."); return; }
  feed.replaceChildren(...data.events.map((e) => feedItem(e, false)));
}

// -- sessions ------------------------------------------------------------------------

async function loadSessions() {
  const { ok, data } = await api("/sessions");
  if (!ok) return;
  const box = document.getElementById("sessions");
  const ids = document.getElementById("session-ids");
  ids.replaceChildren(...data.sessions.map((s) => h("option", { value: s.id })));
  if (!data.sessions.length) {
    box.replaceChildren(h("div", { class: "empty" }, h("p", {}, "No agent is connected.")));
    return;
  }
  box.replaceChildren(...data.sessions.map((s) => {
    const sb = s.sandbox;
    const running = sb.jobs.filter((j) => j.running);
    return h("div", { class: "panel session", "data-session": s.id },
      h("h3", {}, s.id, h("span", { class: "state" },
        pill(sb.running ? "running" : "idle"))),
      h("dl", { class: "facts" },
        h("dt", {}, "Agent"), h("dd", {}, s.agent || "unnamed"),
        h("dt", {}, "Toolsets"), h("dd", {}, s.toolsets.join(", ")),
        h("dt", {}, "Started"), h("dd", {}, ago(s.created)),
        h("dt", {}, "Last call"), h("dd", {}, `${Math.round(s.idle)} s ago`),
        h("dt", {}, "Sandbox"), h("dd", {},
          `${sb.backend}${sb.persistent ? ", persistent" : ""}, network ${sb.network}`),
        h("dt", {}, "Jobs"), h("dd", {}, sb.jobs.length
          ? `${running.length} running, ${sb.jobs.length - running.length} ended` : "none"),
        h("dt", {}, "Task scope"), h("dd", { class: "scope" }, Object.entries(s.scope)
          .flatMap(([field, values]) => values.map((v) => `${field}=${v}`)).join(", ") || "none")),
      sb.jobs.length ? h("ul", { class: "jobs" }, sb.jobs.slice(-5).map((j) =>
        h("li", {}, `#${j.id} ${j.running ? "▶" : "■"} ${j.command}`))) : null,
      h("div", { class: "foot" }, h("button", {
        class: "btn danger small", type: "button",
        onclick: async () => {
          if (!confirm(`End session ${s.id} and stop its sandbox?`)) return;
          const r = await api(`/sessions/${encodeURIComponent(s.id)}/end`, { method: "POST" });
          toast(r.data.message || "done", r.ok ? "ok" : "error");
          loadSessions();
        } }, "End session"),
        h("button", {
          class: "btn small", type: "button",
          onclick: async () => {
            const item = prompt("Add to the task scope (recipient=, host=, account= or request=)",
              "recipient=");
            const at = item ? item.indexOf("=") : -1;
            if (at < 1) return;
            const body = { field: item.slice(0, at).trim(), value: item.slice(at + 1).trim() };
            const r = await api(`/sessions/${encodeURIComponent(s.id)}/scope`,
              { method: "POST", body });
            toast(r.data.message || "done", r.ok ? "ok" : "error");
            loadSessions();
          } }, "Add to scope…")));
  }));
}

// -- changes (changesets) -------------------------------------------------------------

async function loadChanges() {
  const { ok, data } = await api("/changes");
  if (!ok) return;
  const box = document.getElementById("changes");
  if (!data.enabled) {
    box.replaceChildren(h("div", { class: "empty" },
      h("p", {}, "Changesets are off (workspace.mode: direct): writes land at once.")));
  } else if (!data.sessions.length) {
    box.replaceChildren(h("div", { class: "empty" }, h("p", {}, "Nothing waits for you.")));
  } else {
    box.replaceChildren(...data.sessions.map((s) => h("div", { class: "panel changeset",
      "data-session": s.id },
      h("h3", {}, `session ${s.id}`, h("span", { class: "state" }, pill(s.live ? "live" : "ended"))),
      s.pending.map((p) => changeItem(s.id, p)))));
  }
  document.getElementById("applied").replaceChildren(...data.applied.map((a) =>
    h("li", {}, `${clock(a.time)} changeset ${a.id} ${a.undone ? "undone" : "applied"} by ${a.by}`
      + ` (session ${a.session}): ${a.entries.map((e) => `${e.kind} ${e.path}`).join(", ")}`)));
}

function changeItem(session, p) {
  const act = (what) => async () => {
    const r = await api(`/changes/${what}`, { method: "POST", body: { session, paths: [p.path] } });
    toast(r.data.message || "done", r.ok ? "ok" : "error");
    loadChanges();
  };
  return h("div", { class: "change", "data-path": p.path },
    h("div", { class: "change-head" },
      h("span", { class: "mono" }, `${p.kind} ${p.path}${p.entry === "dir" ? "/" : ""}`),
      h("span", { class: "change-buttons" },
        h("button", { class: "btn primary small", type: "button", onclick: act("apply") }, "Apply"),
        h("button", { class: "btn danger small", type: "button", onclick: act("discard") },
          "Discard"))),
    h("p", { class: "reason" }, p.reason || "not settled yet"),
    p.diff ? h("pre", { class: "diff" }, p.diff) : null);
}

// -- grants --------------------------------------------------------------------------

async function loadGrants() {
  const { ok, data } = await api("/grants");
  if (!ok) return;
  const table = document.getElementById("grants");
  if (!data.grants.length) { empty(table, "No grants. Create one above.", 8); return; }
  table.replaceChildren(
    h("thead", {}, h("tr", {}, ["Grant", "Kind", "Pattern", "Session", "Ends", "Reason", "By", ""]
      .map((t) => h("th", {}, t)))),
    h("tbody", {}, data.grants.map((g) => h("tr", { class: g.active ? "" : "off", "data-grant": g.id },
      h("td", { class: "mono" }, g.id),
      h("td", {}, h("span", { class: "kind" }, g.kind)),
      h("td", { class: "mono" }, g.pattern),
      h("td", { class: "mono" }, g.session || "any"),
      h("td", {}, g.active ? until(g.expires_at) : g.revoked_at ? "revoked" : "expired"),
      h("td", {}, g.reason || ""),
      h("td", { class: "muted" }, g.created_by),
      h("td", {}, g.active ? h("button", {
        class: "btn danger small", type: "button",
        onclick: async () => {
          const r = await api(`/grants/${encodeURIComponent(g.id)}/revoke`, { method: "POST" });
          toast(r.ok ? `Revoked ${g.id}` : r.data.message, r.ok ? "ok" : "error");
          loadGrants();
        } }, "Revoke") : "")))));
}

function setupGrantForm() {
  const form = document.getElementById("grant-form");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = Object.fromEntries(new FormData(form).entries());
    const r = await api("/grants", { method: "POST", body });
    if (r.ok) {
      toast(`Granted ${r.data.grant.kind} ${r.data.grant.pattern} (${r.data.grant.id})`, "ok");
      form.pattern.value = "";
      form.reason.value = "";
      loadGrants();
    } else {
      toast(r.data.message || "not granted", "error");
    }
  });
}

// -- policy --------------------------------------------------------------------------

async function loadPolicy() {
  const { ok, data } = await api("/policy");
  if (!ok) return;
  const stat = (k, v, cls = "") =>
    h("div", { class: "panel" }, h("div", { class: "k" }, k), h("div", { class: `v ${cls}` }, v));
  const rules = data.rules.length
    ? h("table", { class: "table" },
      h("thead", {}, h("tr", {}, ["Decision", "Kind", "Pattern", "When", "Reason", "Name"]
        .map((t) => h("th", {}, t)))),
      h("tbody", {}, data.rules.map((r) => h("tr", {},
        h("td", {}, pill(r.decision)), h("td", {}, h("span", { class: "kind" }, r.kind)),
        h("td", { class: "mono pattern" }, r.pattern, r.methods ? ` (${r.methods.join(", ")})` : ""),
        h("td", { class: "muted" }, Object.entries(r.when || {})
          .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(", ") : v}`).join("; ")
          + (r.expires ? ` until ${r.expires}` : "")),
        h("td", {}, r.reason || ""), h("td", { class: "mono muted small" }, r.name)))))
    : h("p", { class: "muted", style: null }, "No rules in the config: the categories and defaults below decide.");
  const defaults = h("table", { class: "table compact" },
    h("tbody", {}, Object.entries(data.defaults).map(([k, v]) =>
      h("tr", {}, h("td", {}, h("span", { class: "kind" }, k)), h("td", {}, pill(v))))));
  const grants = data.grants.length
    ? h("ul", { class: "settled" }, data.grants.map((g) => h("li", {}, pill("allow"),
      h("span", { class: "what" }, `${g.kind} ${g.pattern}`),
      h("span", { class: "muted" }, `${g.session || "any session"}, ends ${until(g.expires_at)}`))))
    : h("p", { class: "muted" }, "No active grants.");
  document.getElementById("policy").replaceChildren(
    h("div", { class: "summary" },
      stat("Approvals", `${data.approvals.mode}, ${data.approvals.timeout} s`),
      stat("Sandbox", `${data.sandbox.backend}, network ${data.sandbox.network}`),
      stat("Config", data.source || "built-in defaults", data.source ? "path" : ""),
      stat("Workspace", data.workspace, "path")),
    h("h2", { class: "section" }, "Rules (deny beats ask beats allow)"),
    h("div", { class: "panel flush" }, rules),
    h("h2", { class: "section" }, "Active grants"), grants,
    h("h2", { class: "section" }, "When nothing else decides"),
    h("div", { class: "panel flush fit" }, defaults),
    h("h2", { class: "section" }, "Built-in categories"),
    h("div", { class: "cats" }, data.categories.map((c) =>
      h("div", { class: `panel cat ${c.enabled ? "" : "off"}` },
        h("div", { class: "name" }, c.name,
          pill(c.enabled ? (c.hardline ? "deny" : "ask") : "off")),
        h("p", {}, c.summary)))));
}

// -- audit ---------------------------------------------------------------------------

async function loadAudit() {
  const form = document.getElementById("audit-form");
  const params = new URLSearchParams();
  for (const [k, v] of new FormData(form).entries()) if (v) params.set(k, v);
  const { ok, data } = await api(`/audit?${params}`);
  const table = document.getElementById("audit");
  if (!ok) { toast(data.error || "search failed", "error"); return; }
  if (!data.events.length) { empty(table, "No matching events.", 5); return; }
  const rows = [];
  for (const e of data.events) {
    const [line1, line2] = eventLine(e);
    const more = h("tr", { class: "more", hidden: true },
      h("td", { colspan: 5 }, h("pre", {}, JSON.stringify(e, null, 2))));
    rows.push(h("tr", { class: "row", onclick: () => { more.hidden = !more.hidden; } },
      h("td", { class: "nowrap muted" }, when(e.time)),
      h("td", {}, h("span", { class: "kind" }, e.kind)),
      h("td", { class: "nowrap" }, h("div", { class: "mono" }, e.session || ""),
        h("div", { class: "faint" }, e.agent || "")),
      h("td", {}, pill(e.decision)),
      h("td", {}, h("div", { class: "mono" }, line1),
        line2 ? h("div", { class: "muted" }, line2) : null)), more);
  }
  table.replaceChildren(
    h("thead", {}, h("tr", {}, ["Time", "Kind", "Session", "Decision", "What"]
      .map((t) => h("th", {}, t)))),
    h("tbody", {}, rows));
}

// -- live updates --------------------------------------------------------------------

function connect() {
  const live = document.getElementById("live");
  const source = new EventSource(`${API}/events`);
  source.onopen = () => { live.textContent = "live"; live.classList.add("on"); refreshApprovals(); };
  source.onerror = () => { live.textContent = "reconnecting…"; live.classList.remove("on"); };
  source.addEventListener("approvals", (m) => renderAsks(JSON.parse(m.data).pending));
  source.addEventListener("settled", (m) => {
    const s = JSON.parse(m.data);
    if (!answeredHere.has(s.id)) {
      const by = s.answer ? `${s.answer.approver} via ${s.answer.channel} (${s.answer.choice})`
        : (s.outcome || s.status);
      toast(`${actionText(s.action)} — settled elsewhere: ${by}`);
    }
    refreshApprovals();
  });
  source.addEventListener("audit", (m) => addToFeed(JSON.parse(m.data)));
}

async function start() {
  const { ok, data } = await api("/me");
  if (!ok) return;
  me = data;
  clockSkew = data.time - Date.now() / 1000;
  document.getElementById("me").textContent = me.name;
  const logout = document.getElementById("logout");
  logout.hidden = !me.logged_in;
  logout.addEventListener("click", async () => {
    await api("/logout", { method: "POST" });
    location.href = "/dashboard/login";
  });
  document.getElementById("approvals-sub").textContent =
    `Actions agents want to take that need a person. No answer within ${me.approvals.timeout} s counts as deny.`;
  setupGrantForm();
  document.getElementById("audit-form").addEventListener("submit", (event) => {
    event.preventDefault();
    loadAudit();
  });
  show(location.hash.slice(1));
  await Promise.all([refreshApprovals(), loadFeed(), loadSessions()]);
  connect();
  setInterval(tick, 1000);
  setInterval(refreshApprovals, 10000); // a fallback if the event stream is cut
}

document.addEventListener("DOMContentLoaded", start);
