// The wasmstream dashboard: plain JavaScript, no dependencies. It renders
// the frames /dashboard/events sends once a second and fetches one failed
// record's path from /dashboard/record. Every value is set as text, never
// as HTML.
"use strict";

const rates = new Map(); // pipeline -> [{in, out}], the last 120 samples
let selected = null;        // id of the failed entry whose path is shown

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

const fmt = (n) => n >= 100 ? Math.round(n).toLocaleString("en") : (Math.round(n * 10) / 10).toString();
const time = (ms) => new Date(ms).toLocaleTimeString("en-GB", { hour12: false }) + "." + String(ms % 1000).padStart(3, "0");

function stat(cls, value, label, bad) {
  return el("div", { class: "stat " + cls + (bad ? " bad" : "") }, el("b", {}, value), el("span", {}, label));
}

function table(head, rows, numFrom) {
  if (!rows.length) return el("p", { class: "empty" }, "none");
  const t = el("table", {}, el("thead", {}, el("tr", {}, ...head.map((h, i) => el("th", { class: i >= numFrom ? "num" : "" }, h)))));
  const b = el("tbody");
  for (const r of rows) b.append(el("tr", {}, ...r.map((c, i) => el("td", { class: i >= numFrom ? "num" : "" }, c))));
  t.append(b);
  return t;
}

function spark(name, p) {
  let h = rates.get(name);
  if (!h) { h = []; rates.set(name, h); }
  h.push({ in: p.in_rate, out: p.out_rate });
  if (h.length > 120) h.shift();
  const c = el("canvas", { class: "spark", width: "480", height: "48" });
  const g = c.getContext("2d");
  const top = Math.max(1, ...h.map((x) => Math.max(x.in, x.out)));
  for (const [key, colour] of [["in", "#1565c0"], ["out", "#2e7d32"]]) {
    g.strokeStyle = colour; g.lineWidth = 1.5; g.beginPath();
    h.forEach((x, i) => {
      const px = 480 - (h.length - 1 - i) * 4, py = 46 - (x[key] / top) * 44;
      i ? g.lineTo(px, py) : g.moveTo(px, py);
    });
    g.stroke();
  }
  return el("div", {}, c, el("div", { class: "legend" }, el("span", { class: "in" }, "— in"), " ", el("span", { class: "out" }, "— out"), ` records/s, last 2 min (top ${fmt(top)}/s)`));
}

function pipeline(p) {
  const s = el("section", { class: "pipeline", "data-name": p.name });
  s.append(el("h2", {}, p.name), el("div", { class: "module" }, "module " + p.module.slice(0, 12)));
  s.append(el("div", { class: "stats" },
    stat("in-rate", fmt(p.in_rate), "records/s in"),
    stat("out-rate", fmt(p.out_rate), "records/s out"),
    stat("lag", p.lag.toLocaleString("en"), "lag"),
    stat("in-flight", p.in_flight.toLocaleString("en"), "in flight"),
    stat("faults", p.faults, "guest faults", p.faults > 0),
    stat("retried", p.retried, "retried"),
    stat("dead", p.dead_lettered, "dead-lettered", p.dead_lettered > 0),
    stat("done", p.done.toLocaleString("en"), "done")));
  s.append(spark(p.name, p));
  const i = p.instances, r = p.retry_workers;
  s.append(el("h3", {}, "Instances"), table(["", "idle", "busy", "waiting on async", "borrowed"],
    [["pipeline", i.idle, i.busy, i.awaiting, i.borrowed], ["retry workers", r.idle, r.busy, r.awaiting, r.borrowed]], 1));
  if (p.async_limit) s.append(el("p", { class: "hint" }, `async limit ${p.async_limit} per instance (${p.async_reason})`));
  if (p.pool_reason) s.append(el("p", { class: "hint" }, `pool: ${p.pool_reason}`));
  s.append(el("h3", {}, "Partitions"), table(["topic", "partition", "lag", "in flight", "committed"],
    p.partitions.map((x) => [x.topic + (x.paused ? " (paused)" : ""), x.partition, x.lag, x.in_flight, x.committed < 0 ? "–" : x.committed]), 1));
  s.append(el("h3", {}, "Retry tiers"), table(["topic", "delay", "backlog", "recent, not yet due", "next due"],
    p.tiers.map((t) => [t.topic, t.delay, t.backlog, t.pending, t.next_due ? time(t.next_due) : "–"]), 2));
  s.append(el("h3", {}, "Dead letters by error kind"), table(["kind", "records"],
    Object.entries(p.dead_by_kind).sort((a, b) => b[1] - a[1]), 1));
  if (p.deploy) {
    s.append(el("h3", {}, "Deployed"), el("p", { class: "module" },
      `${p.deploy.active.slice(0, 12)} since ${new Date(p.deploy.deployed).toLocaleString("en-GB")}` +
      (p.deploy.history.length ? "; before: " + p.deploy.history.map((d) => d.slice(0, 12)).join(", ") : "")));
  }
  return s;
}

function failed(list) {
  const body = document.querySelector("#failed tbody");
  const rows = list.map((e) => {
    const went = e.retry ? `retry → ${e.dest}, due ${time(e.due)}` : `dead letter → ${e.dest}`;
    const tr = el("tr", { "data-id": e.id, "data-record": e.record, "data-kind": e.kind },
      el("td", {}, time(e.at)), el("td", {}, e.primary), el("td", { class: "record" }, e.record), el("td", {}, e.key),
      el("td", { class: "kind", title: e.error }, e.kind), el("td", { class: "num" }, e.attempt),
      el("td", { class: e.retry ? "retry" : "dead" }, went));
    if (e.id === selected) tr.classList.add("selected");
    tr.addEventListener("click", () => openPath(e.id));
    return tr;
  });
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "7", class: "empty" }, "no failures yet")));
  body.replaceChildren(...rows);
}

async function openPath(id) {
  selected = id;
  document.querySelectorAll("#failed tbody tr").forEach((tr) => tr.classList.toggle("selected", tr.dataset.id === String(id)));
  const box = document.getElementById("path");
  box.hidden = false;
  document.getElementById("path-title").textContent = "loading…";
  const res = await fetch("/dashboard/record?id=" + encodeURIComponent(id), { credentials: "same-origin" });
  if (!res.ok) {
    document.getElementById("path-title").textContent = "path unavailable: " + (await res.text());
    document.getElementById("path-tree").textContent = "";
    return;
  }
  const p = await res.json();
  document.getElementById("path-title").textContent = `Path of ${p.record} (from the ${p.source})`;
  document.getElementById("path-note").textContent = p.note || "";
  document.getElementById("path-tree").textContent = p.tree;
}

function connect() {
  const conn = document.getElementById("conn");
  const es = new EventSource("/dashboard/events");
  es.onopen = () => { conn.textContent = "live"; conn.className = "conn up"; };
  es.onerror = () => { conn.textContent = "reconnecting…"; conn.className = "conn down"; };
  es.onmessage = (m) => {
    if (!m.data) return;
    const f = JSON.parse(m.data);
    document.getElementById("pipelines").replaceChildren(...f.pipelines.map(pipeline));
    failed(f.failed || []);
    document.getElementById("updated").textContent = "updated " + time(f.at);
  };
}

connect();
