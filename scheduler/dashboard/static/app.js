// The wasmstream dashboard: plain JavaScript, no dependencies. The page
// arrives rendered by the host with its newest sample, and carries that
// sample and the pipelines' history (an hour: 10 s points, then the last
// ten minutes at 1 s) as JSON; this script draws the history, then renders
// the frames /dashboard/events sends once a second, and fetches one failed
// record's path from /dashboard/record. Every value is set as text, never
// as HTML. Times are ISO 8601 in UTC.
"use strict";

const maxPoints = 960;  // as the host keeps: 360 coarse + 600 fine
let history = {};       // pipeline -> {at, in, out, lag, failed}
let selected = null;    // id of the failed entry whose path is shown
let lastFrame = null;
let pathTimer = null;
let pathBox = null;     // the path's row, kept across renders of the list

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

const fmt = (n) => n >= 100 ? String(Math.round(n)) : (Math.round(n * 10) / 10).toFixed(1);
const iso = (ms) => new Date(ms).toISOString(); // UTC, e.g. 2026-12-03T09:41:07.123Z
const short = (d) => (d || "").slice(0, 12);
// when: a time on one line (the stylesheet's span.when).
const when = (ms) => el("span", { class: "when" }, iso(ms));
// topic: a topic name (or topic[p]@offset) on one line, never broken
// inside (the stylesheet's span.topic).
const topic = (t) => el("span", { class: "topic" }, t);
// A record the module rejected on purpose (guest.fail, dead-lettered): a
// business outcome, not shown as a fault.
const kindReject = "guest.fail";
const rejected = (e) => e.kind === kindReject && !e.retry;

function stat(cls, value, label, bad) {
  return el("div", { class: "stat " + cls + (bad ? " bad" : "") }, el("b", {}, value), el("span", {}, label));
}

// table: rows of cells, those from numFrom on right-aligned (text
// columns listed in text stay left); rowClass gives a row's class.
function table(head, rows, numFrom, text, rowClass, cls) {
  if (!rows.length) return el("p", { class: "empty" }, "none");
  const num = (i) => i >= numFrom && !(text || []).includes(i) ? "num" : "";
  const t = el("table", cls ? { class: cls } : {}, el("thead", {}, el("tr", {}, ...head.map((h, i) => el("th", { class: num(i) }, h)))));
  const b = el("tbody");
  rows.forEach((r, j) => b.append(el("tr", rowClass ? { class: rowClass(j) } : {}, ...r.map((c, i) => el("td", { class: num(i) }, c)))));
  t.append(b);
  return t;
}

// record appends a frame's rates to the history the page started from.
const failedSoFar = new Map(); // pipeline -> retried + dead-lettered at the previous frame
function record(f) {
  for (const p of f.pipelines) {
    let h = history[p.name];
    if (!h) h = history[p.name] = { at: [], in: [], out: [], lag: [], failed: [] };
    const n = p.retried + p.dead_lettered, prev = failedSoFar.get(p.name);
    failedSoFar.set(p.name, n);
    if (h.at.length && h.at[h.at.length - 1] >= f.at) continue;
    h.at.push(f.at); h.in.push(p.in_rate); h.out.push(p.out_rate); h.lag.push(p.lag); h.failed.push(prev === undefined ? 0 : Math.max(0, n - prev));
    if (h.at.length > maxPoints) for (const k of ["at", "in", "out", "lag", "failed"]) h[k].shift();
  }
}

// spark draws a pipeline's history against time: the last hour.
function spark(name) {
  const h = history[name] || { at: [], in: [], out: [] };
  const W = 480, H = 64;
  const c = el("canvas", { class: "spark", width: String(W), height: String(H) });
  const g = c.getContext("2d");
  // The x axis is the history there is, two minutes at least.
  const end = h.at.length ? h.at[h.at.length - 1] : Date.now(), span = Math.max(120e3, end - (h.at.length ? h.at[0] : end));
  const top = Math.max(1, ...h.in, ...h.out);
  // Failed attempts (retried or dead-lettered): red ticks along the bottom.
  g.strokeStyle = "#b71c1c"; g.lineWidth = 1;
  h.at.forEach((at, i) => {
    if (!(h.failed && h.failed[i] > 0)) return;
    const px = W - ((end - at) / span) * W;
    g.beginPath(); g.moveTo(px, H); g.lineTo(px, H - Math.min(12, 3 + h.failed[i])); g.stroke();
  });
  for (const [key, colour] of [["in", "#1565c0"], ["out", "#2e7d32"]]) {
    g.strokeStyle = colour; g.lineWidth = 1.5; g.beginPath();
    h.at.forEach((at, i) => {
      const px = W - ((end - at) / span) * W, py = H - 2 - (h[key][i] / top) * (H - 4);
      i ? g.lineTo(px, py) : g.moveTo(px, py);
    });
    g.stroke();
  }
  const since = h.at.length ? iso(h.at[0]) : "–";
  return el("div", { class: "history" }, c, el("div", { class: "legend" }, el("span", { class: "in" }, "— in"), " ", el("span", { class: "out" }, "— out"),
    " records/s, ", el("span", { class: "dead" }, "| failed attempts"), `, since ${since} (top ${fmt(top)}/s; the host keeps an hour)`));
}

function pipeline(p) {
  const s = el("section", { class: "pipeline", "data-name": p.name });
  s.append(el("h2", {}, p.name), el("div", { class: "module" }, "module ", version(p.module, p.label)));
  if (p.canary) {
    const on = p.partitions.filter((x) => x.canary).map((x) => `${x.topic}[${x.partition}]`);
    const c = el("div", { class: "canary" }, "canary ", version(p.canary.digest, p.canary.label), ` on ${p.canary.percent}% of partitions`);
    on.forEach((x, i) => c.append(i ? ", " : ": ", topic(x)));
    s.append(c);
  }
  s.append(el("div", { class: "stats" },
    stat("in-rate", fmt(p.in_rate), "records/s in"),
    stat("out-rate", fmt(p.out_rate), "records/s out"),
    stat("lag", p.lag, "lag"),
    stat("in-flight", p.in_flight, "in flight"),
    stat("faults", p.faults, "guest faults", p.faults > 0),
    stat("retried", p.retried, "retried"),
    stat("dead", p.dead_lettered, "dead-lettered", deadFaulty(p)),
    stat("dropped", p.dropped, "dropped (no output)"),
    stat("done", p.done, "done")));
  s.append(spark(p.name));
  const i = p.instances, r = p.retry_workers;
  s.append(el("h3", {}, "Instances"), table(["", "idle", "busy", "waiting on async", "borrowed"],
    [["pipeline", i.idle, i.busy, i.awaiting, i.borrowed], ["retry workers", r.idle, r.busy, r.awaiting, r.borrowed]], 1));
  if (p.async_limit) s.append(el("p", { class: "hint" }, `async limit ${p.async_limit} per instance (${p.async_reason})`));
  if (p.pool_reason) s.append(el("p", { class: "hint" }, `pool: ${p.pool_reason}`));
  s.append(el("h3", {}, "Partitions"), table(["topic", "partition", "version", "lag", "in flight", "committed"],
    p.partitions.map((x) => [el("span", {}, topic(x.topic), x.paused ? " (paused)" : ""), x.partition, x.canary ? "canary" : "stable", x.lag, x.in_flight, x.committed < 0 ? "–" : x.committed]),
    1, [2], (j) => p.partitions[j].canary ? "canary" : "", "partitions"));
  s.append(el("h3", {}, "Retry tiers"), table(["topic", "delay", "backlog", "recent, not yet due", "next due (UTC)"],
    p.tiers.map((t) => [topic(t.topic), t.delay, t.backlog, t.pending, t.next_due ? iso(t.next_due) : "–"]), 2));
  const kinds = Object.entries(p.dead_by_kind).sort((a, b) => b[1] - a[1]);
  s.append(el("h3", {}, "Dead letters by error kind"), table(["kind", "records"],
    kinds.map(([k, n]) => [k === kindReject ? k + " (rejected by the module)" : k, n]), 1, [], (j) => kinds[j][0] === kindReject ? "reject" : "dead"));
  return s;
}

// deadFaulty: a dead letter came from something other than a rejection
// (as pipelineFrame.DeadFaulty on the host).
const deadFaulty = (p) => Object.entries(p.dead_by_kind || {}).some(([k, n]) => k !== kindReject && n > 0);

function version(d, label) {
  const e = el("span", { title: d || "" }, short(d));
  if (label) e.append(" ", el("span", { class: "label" }, label));
  return e;
}

function versions(vs) {
  const rows = vs.map((v) => el("tr", { "data-pipeline": v.pipeline },
    el("td", {}, v.pipeline), el("td", { class: "digest" }, version(v.digest, v.label)),
    el("td", {}, v.deployed ? when(v.deployed) : "–", v.by ? " by " + v.by : ""),
    el("td", { class: "canary" }, v.canary ? el("span", {}, version(v.canary.digest, v.canary.label), ` on ${v.canary.percent}% of partitions`, ...(v.canary.since ? [", since ", when(v.canary.since)] : [])) : "none"),
    el("td", { class: "aborted" }, v.aborted || "–"),
    el("td", { class: "earlier" }, ...v.history.flatMap((h, i) => {
      const e = el("span", { title: h.digest }, short(h.digest) + (h.label ? ` (${h.label})` : ""));
      if (h.note) e.append(" ", el("span", { class: "note" }, h.note));
      return i ? [", ", e] : [e];
    }))));
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "6", class: "empty" }, "no deployed versions recorded (the admin API is off)")));
  document.querySelector("#versions tbody").replaceChildren(...rows);
}

function filterOf() {
  const v = (n) => document.querySelector(`#filter input[name=${n}]`).value.trim();
  return { pipeline: v("pipeline"), kind: v("kind"), key: v("key") };
}

function failed(list) {
  const f = filterOf();
  const has = (s, sub) => !sub || String(s).toLowerCase().includes(sub.toLowerCase());
  const rows = list.filter((e) => has(e.primary, f.pipeline) && has(e.kind, f.kind) && has(e.key, f.key)).map((e) => {
    const went = e.retry ? el("span", {}, "retry → ", topic(e.dest), ", due ", when(e.due)) : el("span", {}, rejected(e) ? "rejected, dead letter → " : "dead letter → ", topic(e.dest));
    const value = el("td", { class: "value" }, e.value, " ", el("span", { class: "hint" }, e.value_size < 0 ? "null" : `(${e.value_size} B)`));
    const hs = el("td", { class: "headers" }, ...(e.headers || []).map((h) => el("div", {}, `${h.key}: ${h.value}`)));
    if (e.headers_cut) hs.append(el("div", { class: "hint" }, `and ${e.headers_cut} more`));
    const tr = el("tr", { "data-id": e.id, "data-record": e.record, "data-kind": e.kind },
      el("td", {}, iso(e.at)), el("td", {}, e.primary), el("td", { class: "record" }, topic(e.record)), el("td", { class: "key" }, e.key),
      el("td", { class: "kind" }, e.kind), el("td", { class: rejected(e) ? "error reject" : "error" }, e.error), value, hs,
      el("td", { class: "digest" }, short(e.module) + (e.canary ? " (canary)" : "")), el("td", { class: "num" }, e.attempt),
      el("td", { class: e.retry ? "retry" : rejected(e) ? "reject" : "dead" }, went));
    tr.addEventListener("click", () => openPath(e.id));
    return tr;
  });
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "11", class: "empty" }, list.length ? "no failures match" : "no failures yet")));
  document.querySelector("#failed tbody").replaceChildren(...rows);
  placePath();
}

// placePath puts the path's row right after the selected entry's row.
function placePath() {
  const box = pathBox;
  if (!box) return;
  const tr = selected === null ? null : document.querySelector(`#failed tbody tr[data-id="${selected}"]`);
  document.querySelectorAll("#failed tbody tr").forEach((r) => r.classList.toggle("selected", r === tr));
  if (tr) tr.after(box); else document.querySelector("#failed tbody").append(box);
}

function pathRow() {
  let box = pathBox;
  if (!box) {
    box = pathBox = el("tr", { id: "path-row" }, el("td", { colspan: "11" }, el("div", { id: "path" },
      el("h3", { id: "path-title" }), el("p", { id: "path-note", class: "hint" }), el("pre", { id: "path-tree" }))));
  }
  return box;
}

async function openPath(id, tries) {
  clearTimeout(pathTimer);
  selected = id;
  const box = pathRow();
  document.querySelector("#failed tbody").append(box);
  placePath();
  const title = document.getElementById("path-title");
  if (!tries) title.textContent = "loading…";
  const res = await fetch("/dashboard/record?id=" + encodeURIComponent(id), { credentials: "same-origin" });
  if (selected !== id) return;
  if (!res.ok) {
    title.textContent = "path unavailable: " + (await res.text());
    document.getElementById("path-tree").textContent = "";
    return;
  }
  const p = await res.json();
  title.textContent = `Path of ${p.record} (from the ${p.source})`;
  document.getElementById("path-note").textContent = p.note || "";
  document.getElementById("path-tree").textContent = p.tree;
  if (p.pending && (tries || 0) < 30) pathTimer = setTimeout(() => openPath(id, (tries || 0) + 1), 2000);
}

function events(list) {
  const rows = list.map((e) => el("tr", { "data-kind": e.kind }, el("td", {}, iso(e.at)), el("td", {}, e.kind), el("td", {}, e.pipeline || ""),
    el("td", {}, e.text + (e.count > 1 ? ` (${e.count} errors in this entry since ${iso(e.first)})` : ""))));
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "4", class: "empty" }, "none yet")));
  document.querySelector("#events tbody").replaceChildren(...rows);
}

function hosts(h) {
  let sec = document.getElementById("hosts");
  if (!h) { if (sec) sec.remove(); return; }
  if (!sec) {
    sec = el("section", { id: "hosts", class: "panel" }, el("h2", {}, "Hosts of the fleet"),
      el("table", {}, el("thead", {}, el("tr", {}, ...["host", "state", "last status (UTC)", "runs", "could not run"].map((x) => el("th", {}, x)))), el("tbody")));
    document.querySelector("main").append(sec);
  }
  sec.querySelector("tbody").replaceChildren(...h.hosts.map((x) => el("tr", { "data-host": x.host },
    el("td", {}, x.host + (x.self ? " (this host)" : "")), el("td", { class: x.live ? "up" : "down" }, x.live ? "live" : "not heard of"), el("td", {}, iso(x.at)),
    el("td", {}, ...Object.entries(x.pipelines).map(([p, d]) => el("div", {}, `${p}: ${short(d)}`))),
    el("td", {}, ...Object.entries(x.failed || {}).map(([p, e]) => el("div", { class: "dead" }, `${p}: ${e}`))))));
}

function render(f) {
  lastFrame = f;
  document.getElementById("pipelines").replaceChildren(...f.pipelines.map(pipeline));
  versions(f.versions || []);
  failed(f.failed || []);
  events(f.events || []);
  hosts(f.hosts);
  document.getElementById("updated").textContent = "sampled " + iso(f.at);
  document.getElementById("started").textContent = "host up since " + iso(f.started);
}

function connect() {
  const conn = document.getElementById("conn");
  const es = new EventSource("/dashboard/events");
  es.onopen = () => { conn.textContent = "live"; conn.className = "conn up"; };
  es.onerror = () => { conn.textContent = "reconnecting…"; conn.className = "conn down"; };
  es.onmessage = (m) => {
    if (!m.data) return;
    const f = JSON.parse(m.data);
    record(f);
    render(f);
  };
}

function start() {
  const init = JSON.parse(document.getElementById("initial").textContent);
  history = init.history || {};
  if (init.frame) render(init.frame);
  // The filter works as the page types; the address keeps it for a reload.
  document.getElementById("filter").addEventListener("submit", (ev) => ev.preventDefault());
  document.querySelectorAll("#filter input").forEach((i) => i.addEventListener("input", () => {
    const q = new URLSearchParams(filterOf());
    for (const [k, v] of [...q]) if (!v) q.delete(k);
    window.history.replaceState(null, "", "/dashboard" + (q.toString() ? "?" + q : ""));
    if (lastFrame) failed(lastFrame.failed || []);
  }));
  connect();
}

start();
