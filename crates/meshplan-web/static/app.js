// meshplan serve: the page's script. It turns the form into a scenario (the
// scenario file's sections as JSON), posts it to the API, and renders the
// answer: the core's document (the CLI's report), the plots (SVG shown as
// images, which run no script), the derivation and the --json report. The
// numbers are never computed here: every one comes from meshplan-core.
"use strict";

const ENDPOINT = {
  "train": "/api/train",
  "infer": "/api/infer",
  "plan-train": "/api/plan/train",
  "plan-infer": "/api/plan/infer",
};
// What a first visit shows: an 8B model on one 8-GPU node.
const DEFAULTS = { tab: "train", model: "llama-3-8b", chip: "h100", chips: "8", batch_tokens: "1Mi", seq_len: "4096", zero: "1", microbatches: "32" };

const $ = (id) => document.getElementById(id);
let tab = "train";
let pending = null;

// Whether an input belongs to the current tab (every enclosing data-tabs lists it).
function active(el) {
  for (let e = el; e; e = e.parentElement) {
    const t = e.dataset && e.dataset.tabs;
    if (t && !t.split(" ").includes(tab)) return false;
  }
  return true;
}

function inputs() {
  return Array.from(document.querySelectorAll("#form [data-key], #form [data-option]"));
}

function value(el) {
  if (el.type === "checkbox") return el.checked ? true : null;
  const v = el.value.trim();
  if (v === "") return null;
  switch (el.dataset.kind) {
    // whole numbers the API takes as JSON integers; a count may carry a suffix ("4M")
    case "int": return /^\d+$/.test(v) ? Number(v) : v;
    case "float": return isNaN(Number(v)) ? v : Number(v);
    default: return v;
  }
}

// The request body: {scenario: {section: {key: value}}, option: value}.
function request() {
  const body = { scenario: {} };
  for (const el of inputs()) {
    const v = value(el);
    if (v === null || !active(el)) continue;
    if (el.dataset.option) { body[el.dataset.option] = v; continue; }
    const s = (body.scenario[el.dataset.section] ||= {});
    s[el.dataset.key] = v;
  }
  // --mesh beats --chips, as on the command line
  const hw = body.scenario.hardware;
  if (hw && hw.mesh) delete hw.chips;
  if (body.model_config && body.scenario.model) delete body.scenario.model.name;
  return body;
}

// The page's state in the URL (#tab=…&model=…): a link reproduces it.
function saveState() {
  const p = new URLSearchParams({ tab });
  for (const el of inputs()) {
    if (el.id === "model_config") continue; // too long for a URL
    const v = el.type === "checkbox" ? (el.checked ? "1" : "") : el.value.trim();
    if (v !== "") p.set(el.id, v);
  }
  history.replaceState(null, "", "#" + p.toString());
  $("share").href = location.href;
}

function loadState() {
  const h = location.hash.slice(1);
  const p = h ? new URLSearchParams(h) : new URLSearchParams(DEFAULTS);
  setTab(p.get("tab") || "train");
  // a field the URL does not name is cleared (a link states the whole form),
  // except the pickers, which keep a model and a chip
  for (const el of inputs()) {
    if (el.type === "checkbox") el.checked = p.get(el.id) === "1";
    else if (p.has(el.id)) el.value = p.get(el.id);
    else if (el.tagName !== "SELECT" && el.id !== "model_config") el.value = "";
  }
}

function setTab(t) {
  tab = ENDPOINT[t] ? t : "train";
  for (const b of document.querySelectorAll("#tabs button")) {
    b.setAttribute("aria-selected", String(b.dataset.tab === tab));
  }
  for (const f of document.querySelectorAll("#form [data-tabs]")) {
    f.hidden = !f.dataset.tabs.split(" ").includes(tab);
  }
  $("run").textContent = tab.startsWith("plan") ? "Search" : "Evaluate";
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function table(header, rows, numeric) {
  const t = el("table");
  if (header) {
    const tr = t.createTHead().insertRow();
    header.forEach((h) => tr.appendChild(el("th", "", h)));
  }
  const body = t.createTBody();
  for (const r of rows) {
    const tr = body.insertRow();
    r.forEach((c, i) => tr.appendChild(el("td", numeric.includes(i) ? "num" : "", c)));
  }
  return t;
}

// The core's document (view::Doc) as HTML: the same blocks the CLI prints as text.
function renderDoc(doc) {
  const out = $("doc");
  out.replaceChildren();
  for (const b of doc.blocks) {
    switch (b.kind) {
      case "title": out.appendChild(el("h2", "", b.text)); break;
      case "line": out.appendChild(el("p", "", b.text)); break;
      case "note": out.appendChild(el("p", "note", "note: " + b.text)); break;
      case "verdict": {
        out.appendChild(el("p", "verdict " + (b.ok ? "ok" : "bad"), b.label + ": " + b.text));
        if (b.items.length) out.appendChild(list(b.items));
        break;
      }
      case "fields": out.appendChild(fields(b.rows)); break;
      case "table": out.appendChild(table(b.header, b.rows, b.numeric)); break;
      case "list": out.appendChild(el("p", "", b.title)); out.appendChild(list(b.items)); break;
    }
  }
}

// Label/value rows: a label without a value heads the rows under it, a
// label indented by two spaces is a sub-item (as in the CLI's text).
function fields(rows) {
  const t = el("table", "fields");
  const body = t.createTBody();
  for (const [label, v] of rows) {
    const tr = body.insertRow();
    if (v === "") {
      const th = el("th", "", label);
      th.colSpan = 2;
      tr.appendChild(th);
      continue;
    }
    tr.appendChild(el("td", label.startsWith("  ") ? "sub" : "", label.trim()));
    tr.appendChild(el("td", "num", v));
  }
  return t;
}

function list(items) {
  const ul = el("ul");
  items.forEach((i) => ul.appendChild(el("li", "", i)));
  return ul;
}

function renderPlots(plots) {
  const out = $("plots");
  for (const img of out.querySelectorAll("img")) URL.revokeObjectURL(img.src);
  out.replaceChildren();
  for (const [kind, svg] of plots) {
    const f = el("figure");
    const img = el("img");
    img.alt = kind + " plot";
    img.dataset.kind = kind;
    img.src = URL.createObjectURL(new Blob([svg], { type: "image/svg+xml" }));
    f.appendChild(img);
    f.appendChild(el("figcaption", "", kind));
    out.appendChild(f);
  }
}

function showError(msg) {
  $("error").textContent = msg;
  $("error").hidden = !msg;
}

async function run() {
  saveState();
  if (pending) pending.abort();
  const ctl = (pending = new AbortController());
  const t0 = performance.now();
  $("status").textContent = tab.startsWith("plan") ? "searching…" : "evaluating…";
  document.body.dataset.state = "busy";
  try {
    const res = await fetch(ENDPOINT[tab], {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(request()),
      signal: ctl.signal,
    });
    const ans = await res.json();
    if (!res.ok) throw new Error(ans.error || res.statusText);
    showError("");
    renderDoc(ans.doc);
    renderPlots(ans.plots);
    $("derivation").textContent = ans.derivation || "";
    $("derivation-box").hidden = !ans.derivation;
    $("report-json").textContent = JSON.stringify(ans.report, null, 2);
    $("status").textContent = `${tab} answered in ${Math.round(performance.now() - t0)} ms`;
  } catch (e) {
    if (e.name === "AbortError") return;
    showError("error: " + e.message);
    $("status").textContent = "";
  }
  if (ctl === pending) document.body.dataset.state = "done";
}

async function fillCatalog() {
  const c = await (await fetch("/api/catalog")).json();
  for (const [id, items] of [["model", c.models], ["chip", c.chips]]) {
    const s = $(id);
    for (const i of items) {
      const o = el("option", "", `${i.name} — ${i.display_name}`);
      o.value = i.name;
      s.appendChild(o);
    }
  }
}

async function main() {
  await fillCatalog();
  loadState();
  $("form").addEventListener("submit", (e) => { e.preventDefault(); run(); });
  // evaluations are quick: update on every change; searches wait for the button
  $("form").addEventListener("change", () => { if (!tab.startsWith("plan")) run(); });
  for (const b of document.querySelectorAll("#tabs button")) {
    b.addEventListener("click", () => { setTab(b.dataset.tab); run(); });
  }
  // a link pasted into an open page (saveState's replaceState fires no event)
  window.addEventListener("hashchange", () => { loadState(); run(); });
  run();
}

main().catch((e) => showError("error: " + e.message));
