"""The explorer's single page: plain HTML, CSS and JavaScript, all inline (no CDN, works offline).

Every URL is relative (``api/...``, ``runs/...``, ``../dags/...``), so the page works under any
prefix the app is mounted at. The script only fetches JSON and swaps in the server's HTML
fragments and SVG charts; ``document.body.dataset.updates`` counts completed refreshes (tests wait
on it). The filters live in the page's query string (written after every refresh, read once on
load), so the address of a view is a link to it; every view gets the same filters, the suite
included.
"""

from __future__ import annotations

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>dlbench results explorer</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<style>
body{font-family:sans-serif;margin:1.2em 2em;color:#222;max-width:100%}
h1{font-size:1.5em;margin:.2em 0} h2{font-size:1.15em;margin:1.2em 0 .4em;border-bottom:1px solid #ccc}
form#filters{display:flex;flex-wrap:wrap;gap:.6em 1.2em;align-items:flex-start;background:#f6f6f6;padding:.7em;
  border-radius:4px}
form#filters label{display:flex;flex-direction:column;font-size:.85em;gap:.2em}
select[multiple]{min-width:16em;height:7em}
.scroll{overflow-x:auto;max-width:100%}
.charts{display:flex;flex-wrap:wrap;gap:.8em} svg.chart{max-width:100%;height:auto}
table{border-collapse:collapse;font-size:.85em;margin:.4em 0} td,th{padding:.2em .7em;border-bottom:1px solid #eee;
  text-align:left} th{background:#fafafa}
.verdict.worse{color:#b00;font-weight:bold}.verdict.better{color:#070;font-weight:bold}
.verdict.equivalent{color:#1d4f7a}.verdict.inconclusive,.verdict.different_within_margin{color:#555}.verdict.too_few_repetitions{color:#a60}
.flag{color:#a60} .direction{font-weight:bold}
#status{font-size:.8em;color:#666} .note{font-size:.85em;color:#555} a.dagrun{font-size:.8em;margin-right:.5em}
</style></head>
<body data-updates="0">
<h1>dlbench results explorer</h1>
<p class="note">Pick runs (or a date range of scheduled runs) and a case; everything below is computed from the
warehouse, read-only, for the same runs and filters. ×BM = platform mean / bare-metal mean with its 95 % interval;
verdicts and ⚠ flags as in the run's report (docs/statistics.md). The filters are in this page's address:
<a id="share" href="">link to this view</a>.</p>
<form id="filters" onsubmit="return false">
  <label>Runs (none = latest)<select id="runs" name="runs" multiple></select></label>
  <label>Scheduled from<input type="date" id="since" name="since"></label>
  <label>to<input type="date" id="until" name="until"></label>
  <label>Suite<select id="suite" name="suite"></select></label>
  <label>Model<select id="model" name="model"></select></label>
  <label>Data<select id="data" name="data"></select></label>
  <label>Framework<select id="framework" name="framework"></select></label>
  <label>Scenario<select id="scenario" name="scenario"></select></label>
  <label>Platforms<span id="platforms"></span></label>
  <label>Trend metric<select id="metric" name="metric"></select></label>
  <label>Trend case<select id="case" name="case"></select></label>
  <label>Hardware (capacity)<select id="hardware" name="hardware"></select></label>
</form>
<div id="status">loading...</div>
<h2>Normalized comparison</h2>
<div id="comparison-chart-box" class="charts"></div><div id="comparison"></div>
<h2>Trend (the latest runs unless runs or dates are picked; change points circled)</h2>
<div id="trend-chart-box" class="charts"></div><div id="trend-links"></div>
<h2>Capacity: throughput per host, cost per 1000 images (per model, data kind and framework)</h2>
<div id="capacity-chart-box" class="charts"></div><div id="capacity"></div>
<p class="note">Prices: Airflow Variable <code>dlbench_host_prices</code> or <code>$DLBENCH_HOME/prices.yaml</code>
(docs/capacity.md).</p>
<h2>Serving: capacity at the latency target and latency against the load (the selected runs, or the latest
serving run)</h2>
<label>Requests/s to serve
  <input id="demand" name="demand" type="number" min="0.001" step="any" value="{{FLEET_RATE}}"></label>
<div id="serving-capacity"></div>
<div id="serving-chart-box" class="charts"></div><div id="serving"></div>
<p class="note">TTFT and TPOT p99 per platform at each offered Poisson rate (the mean over every repetition of
every selected run), the latency target flat: where a platform's line crosses it is its capacity
(docs/serving.md).</p>
<h2>Regression baseline</h2>
<form id="pin-form" onsubmit="return false">
  <select id="pin-run"></select> for suite <select id="pin-suite"><option value="">all suites</option></select>
  <button type="button" id="pin-button">Pin as baseline</button>
  <button type="button" id="unpin-button">Remove pin</button>
</form>
<div id="pins"></div>
<h2>Reports</h2>
<div class="scroll"><table><tr><th>Run</th><th>Written</th></tr>{{REPORT_ROWS}}</table></div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const FIELDS = ["since", "until", "suite", "model", "data", "framework", "scenario"];
const INITIAL = new URLSearchParams(location.search);  // a shared view: restored once, on load
const FLEET_RATE = "{{FLEET_RATE}}";  // the serving view's default demand (requests/s): the report's
let OPTIONS = null;
let wantedCase = INITIAL.get("case") || "";

function fill(select, values, blank, chosen) {
  const keep = chosen || Array.from(select.selectedOptions || []).map((o) => o.value);
  select.textContent = "";
  if (blank !== undefined) { const o = document.createElement("option"); o.value = ""; o.textContent = blank;
    select.appendChild(o); }
  for (const v of values) {
    const o = document.createElement("option");
    o.value = typeof v === "string" ? v : v.value; o.textContent = typeof v === "string" ? v : v.label;
    o.selected = keep.includes(o.value); select.appendChild(o);
  }
}

function query(extra) {
  const p = new URLSearchParams();
  for (const o of $("runs").selectedOptions) p.append("runs", o.value);
  for (const id of FIELDS) if ($(id).value) p.set(id, $(id).value);
  const boxes = Array.from(document.querySelectorAll("#platforms input"));
  if (boxes.some((c) => !c.checked)) for (const c of boxes) if (c.checked) p.append("platforms", c.value);
  for (const [k, v] of Object.entries(extra || {})) if (v) p.set(k, v);
  return p.toString();
}

async function getJSON(url, init) {
  const r = await fetch(url, init);
  // 401: the Airflow session expired; 403: this Airflow user may not read (or, for a pin, edit)
  // the benchmark DAG. Say what to do, not only the code.
  if (r.status === 401) throw new Error("not logged in to Airflow (or the session expired): log in again and reload");
  if (r.status === 403) throw new Error(url.split("?")[0] + ": your Airflow user lacks the permission on the "
                                        + "benchmark DAG (read to view, edit to pin)");
  if (!r.ok) throw new Error(url.split("?")[0] + ": HTTP " + r.status);
  return r.json();
}

function suiteChanged(chosen) {
  const s = $("suite").value;
  fill($("model"), OPTIONS.models[s] || [], "all models", chosen && chosen.model);
  // A suite without a framework dimension (the micro-benchmarks) offers none: only "all".
  fill($("framework"), OPTIONS.frameworks[s] || [], "all frameworks", chosen && chosen.framework);
  fill($("metric"), (OPTIONS.metrics[s] || []).map((m) => ({value: m.metric,
    label: m.metric + (m.direction === "higher" ? " (↑ higher is better)" : " (↓ lower is better)")})),
    undefined, chosen && chosen.metric);
}

function demand() {
  // The fleet's demand for the serving capacity's instances: a positive number, else the default.
  const v = Number($("demand").value);
  return v > 0 ? String(v) : FLEET_RATE;
}

async function refresh() {
  $("status").textContent = "loading...";
  try {
    const [cmp, tr, cap, srv] = await Promise.all([
      getJSON("api/comparison?" + query()),
      getJSON("api/trend?" + query({metric: $("metric").value, case: wantedCase || $("case").value})),
      getJSON("api/capacity?" + query({hardware: $("hardware").value})),
      getJSON("api/serving?" + query({demand: demand()})),
    ]);
    wantedCase = "";
    $("comparison-chart-box").innerHTML = cmp.svg; $("comparison").innerHTML = cmp.table;
    $("trend-chart-box").innerHTML = tr.svg; $("trend-links").innerHTML = "DAG runs: " + (tr.links || "none");
    // Several frameworks among the cases: each names its own (a TensorFlow case's name has none).
    const several = new Set(Object.values(tr.case_frameworks)).size > 1;
    fill($("case"), tr.cases.map((c) => ({value: c, label: several ? c + " · " + tr.case_frameworks[c] : c})),
         undefined, tr.case ? [tr.case] : []);
    $("capacity-chart-box").innerHTML = cap.svg; $("capacity").innerHTML = cap.table;
    $("serving-capacity").innerHTML = srv.capacity_table;
    $("serving-chart-box").innerHTML = srv.svg; $("serving").innerHTML = srv.table;
    if (cap.hardware) $("hardware").value = cap.hardware;
    $("status").innerHTML = "runs: " + (cmp.links || "none");
    const shared = query({metric: $("metric").value, case: tr.case, hardware: $("hardware").value,
                          demand: demand() === FLEET_RATE ? "" : demand()});
    history.replaceState(null, "", shared ? "?" + shared : location.pathname);
    $("share").href = location.href;
  } catch (err) {
    $("status").textContent = "failed: " + err.message;
  }
  document.body.dataset.updates = String(Number(document.body.dataset.updates) + 1);
}

async function showPins() {
  const pins = await getJSON("api/pins");
  $("pins").textContent = pins.length ? pins.map((p) => p.suite + ": " + p.run_id).join("; ") : "no pinned baseline";
}

async function changePin(remove) {
  const body = {run_id: $("pin-run").value || "-", suite: $("pin-suite").value || null, remove: remove};
  await getJSON("api/pins", {method: "POST", headers: {"Content-Type": "application/json"},
                             body: JSON.stringify(body)});
  await showPins();
}

async function init() {
  OPTIONS = await getJSON("api/options");
  const runs = OPTIONS.runs.map((r) => ({value: r.run_id, label: r.run_id + (r.scheduled ? " (scheduled)" : "")}));
  fill($("runs"), runs, undefined, INITIAL.getAll("runs")); fill($("pin-run"), runs);
  fill($("suite"), OPTIONS.suites);
  const suite = INITIAL.get("suite");
  const fallback = OPTIONS.suites.includes(OPTIONS.default_suite) ? OPTIONS.default_suite : "";
  $("suite").value = OPTIONS.suites.includes(suite) ? suite : fallback;
  fill($("pin-suite"), OPTIONS.suites, "all suites");
  fill($("data"), OPTIONS.data, "all data", [INITIAL.get("data") || ""]);
  fill($("scenario"), OPTIONS.scenarios, "all scenarios", [INITIAL.get("scenario") || ""]);
  fill($("hardware"), OPTIONS.hardware, undefined, [INITIAL.get("hardware") || ""]);
  if (INITIAL.get("demand")) $("demand").value = INITIAL.get("demand");
  for (const id of ["since", "until"]) $(id).value = INITIAL.get(id) || "";
  suiteChanged({model: [INITIAL.get("model") || ""], metric: [INITIAL.get("metric") || ""],
                framework: [INITIAL.get("framework") || ""]});
  const shown = INITIAL.getAll("platforms");
  for (const p of OPTIONS.platforms) {
    const l = document.createElement("label"); l.style.flexDirection = "row";
    const c = document.createElement("input"); c.type = "checkbox"; c.value = p;
    c.checked = !shown.length || shown.includes(p);
    c.addEventListener("change", refresh); l.appendChild(c); l.appendChild(document.createTextNode(p));
    $("platforms").appendChild(l);
  }
  for (const id of ["runs", "since", "until", "model", "data", "framework", "scenario", "metric", "case", "hardware",
                    "demand"])
    $(id).addEventListener("change", refresh);
  $("suite").addEventListener("change", () => { suiteChanged(); refresh(); });
  $("pin-button").addEventListener("click", () => changePin(false));
  $("unpin-button").addEventListener("click", () => changePin(true));
  await showPins();
  await refresh();
}
init().catch((err) => { $("status").textContent = "failed: " + err.message; });
</script>
</body></html>
"""
