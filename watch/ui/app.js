// The live page: polls /stats and /series, draws the charts with uPlot and
// fills the tables. Every table is bounded (top N rows, a summary of old
// filter layers), so a crawl of many hosts or a filter of many layers keeps
// the page light.
"use strict";
(function () {
  const MAX_ROWS = 25; // rows of the hosts, partitions and crawls tables
  const SHOWN_LAYERS = 10; // newest filter layers listed; older ones summed
  const OUTCOMES = ["2xx", "3xx", "4xx", "5xx", "robots", "failed"];
  const COLORS = { "2xx": "#16a34a", "3xx": "#2563eb", "4xx": "#f59e0b", "5xx": "#dc2626", robots: "#7c3aed", failed: "#6b7280", retried: "#db2777" };

  const state = { at: [], values: {}, intervalMS: 1000, report: null, crawl: "", charts: {} };
  window.sieveWatch = state; // for the browser test and the curious

  const $ = (id) => document.getElementById(id);
  const fmt = (n) => (n == null ? "–" : Math.round(n).toLocaleString("en-US"));
  const rate = (n) => (n == null ? "" : n.toFixed(n < 10 ? 1 : 0) + "/s");
  const pct = (x) => (100 * x).toFixed(1) + "%";
  const sci = (x) => (x == null ? "–" : x === 0 ? "0" : x.toExponential(2));
  const bytes = (n) => {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : n) + " " + u[i];
  };
  const sum = (m) => Object.values(m || {}).reduce((a, b) => a + b, 0);

  // fill replaces a table's rows: head is a list of column titles (a
  // title ending in "#" is numeric), rows lists of cell values.
  function fill(table, head, rows) {
    const t = document.createElement("tbody");
    if (head) {
      const tr = t.insertRow();
      for (const h of head) {
        const th = document.createElement("th");
        const num = h.endsWith("#");
        th.textContent = num ? h.slice(0, -1) : h;
        if (num) th.className = "n";
        tr.appendChild(th);
      }
    }
    for (const r of rows) {
      const tr = t.insertRow();
      r.forEach((v, i) => {
        const td = tr.insertCell();
        if (v && typeof v === "object" && v.cls) { td.className = v.cls; td.textContent = v.text; if (v.id) td.id = v.id; if (v.title) td.title = v.title; return; }
        td.textContent = typeof v === "number" ? fmt(v) : v == null ? "–" : String(v);
        if (typeof v === "number" || (head && head[i] && head[i].endsWith("#"))) td.className = "n";
      });
    }
    table.replaceChildren(t);
  }

  // rates turns a counter's samples into per-second rates (null where the
  // counter went back, as after a restart).
  function rates(key) {
    const v = state.values[key];
    const out = new Array(state.at.length).fill(null);
    if (!v) return out;
    for (let i = 1; i < v.length; i++) {
      const dt = (state.at[i] - state.at[i - 1]) / 1000;
      const d = v[i] - v[i - 1];
      if (dt > 0 && d >= 0) out[i] = d / dt;
    }
    return out;
  }
  const level = (key) => state.values[key] || new Array(state.at.length).fill(null);
  const prefix = () => (state.crawl ? "crawl:" + state.crawl + ":" : "");

  const chartDefs = {
    seen: () => [["admitted", "#16a34a", rates(prefix() + "admitted")], ["duplicates", "#f59e0b", rates(prefix() + "duplicates")], ["rejected", "#dc2626", rates(prefix() + "rejected")]],
    fetches: () => OUTCOMES.map((o) => [o, COLORS[o], rates(prefix() + "outcome:" + o)]).concat([["retries", COLORS.retried, rates(prefix() + "retried")]]),
    queues: () => [["discovered", "#2563eb", level("queue:discovered")], ["frontier", "#16a34a", level(state.crawl ? prefix() + "queued" : "queue:frontier")],
      ["in flight", "#6b7280", level("queue:discovered_in_flight")], ["redelivered", "#dc2626", level("queue:redelivered")]],
    filter: () => [["items", "#7c3aed", level("filter:items")]],
  };

  function draw() {
    const xs = state.at.map((t) => t / 1000);
    for (const [name, def] of Object.entries(chartDefs)) {
      const lines = def();
      const data = [xs].concat(lines.map((l) => l[2]));
      const el = $("chart-" + name);
      let c = state.charts[name];
      const labels = lines.map((l) => l[0]).join();
      if (c && c.labels !== labels) { c.plot.destroy(); c = null; }
      if (!c) {
        const plot = new uPlot({
          width: Math.max(el.clientWidth, 200), height: 220,
          scales: { x: { time: true } },
          series: [{}].concat(lines.map((l) => ({ label: l[0], stroke: l[1], width: 1.5, spanGaps: false }))),
          axes: [{}, { size: 60 }],
          legend: { live: true },
        }, data, el);
        c = state.charts[name] = { plot, labels };
      } else {
        c.plot.setData(data);
      }
      // Points drawn: the non-null values of the chart's series.
      el.dataset.points = data.slice(1).reduce((n, s) => n + s.filter((v) => v != null).length, 0);
    }
  }

  function resize() {
    for (const [name, c] of Object.entries(state.charts)) {
      c.plot.setSize({ width: Math.max($("chart-" + name).clientWidth, 200), height: 220 });
    }
  }

  function crawlerView(r) {
    const cr = r.crawler;
    if (!cr) return null;
    if (!state.crawl) return { fetched: cr.fetched, outcomes: cr.outcomes || {}, retried: sum(cr.retried), failed: sum(cr.failed), links: cr.links };
    const c = (cr.crawls || {})[state.crawl] || {};
    return { fetched: c.fetched || 0, outcomes: c.outcomes || {}, retried: c.retried || 0, failed: c.failed || 0, links: c.links || 0 };
  }

  function render(r) {
    $("role").textContent = r.role || "";
    const ready = $("ready");
    // Degraded: ready, but a part works not as it should (a stream's
    // replica behind, batches held); each part is listed with its reason.
    const degraded = Object.entries(r.degraded || {}).sort();
    ready.textContent = !r.ready ? "not ready" : degraded.length ? "degraded" : "ready";
    ready.className = "pill " + (!r.ready ? "bad" : degraded.length ? "warn" : "ok");
    ready.title = Object.entries(r.not_ready || {}).concat(degraded).map(([k, v]) => k + ": " + v).join("\n");
    const dl = $("degraded");
    dl.replaceChildren(...degraded.map(([k, v]) => {
      const li = document.createElement("li");
      li.textContent = "degraded: " + k + ": " + v;
      return li;
    }));
    $("updated").textContent = "updated " + new Date(r.at).toLocaleTimeString();

    // Crawl selector: the crawls the crawler or the queues know.
    const ids = new Set(Object.keys((r.crawler && r.crawler.crawls) || {}).concat(Object.keys((r.streams && r.streams.crawls) || {}),
      Object.keys((r.shared && r.shared.totals.crawls) || {})));
    const sel = $("crawl");
    const have = new Set([...sel.options].map((o) => o.value));
    for (const id of [...ids].sort()) if (!have.has(id)) sel.add(new Option(id, id));
    document.querySelectorAll(".scope").forEach((e) => (e.textContent = state.crawl ? "(crawl " + state.crawl + ")" : "(all crawls)"));

    const cv = crawlerView(r);
    const t = r.shared ? r.shared.totals : null;
    // The selected crawl's links, or all of them.
    const seenView = t && state.crawl ? Object.assign({ links: 0, admitted: 0, duplicates: 0, rejected: 0 }, (t.crawls || {})[state.crawl]) :
      t ? { links: t.links, admitted: t.admitted, duplicates: t.duplicates, rejected: sum(t.rejected) } : null;
    const seenRate = (k) => (state.crawl ? "" : rate(r.rates[k]));
    $("total-fetched").textContent = cv ? fmt(cv.fetched) : "–";
    $("rate-fetched").textContent = cv && !state.crawl ? rate(r.rates.fetched) : "";
    for (const k of ["links", "admitted", "duplicates", "rejected"]) {
      $("total-" + k).textContent = seenView ? fmt(seenView[k]) : "–";
      $("rate-" + k).textContent = seenView ? seenRate(k) : "";
    }
    $("total-retried").textContent = cv ? fmt(cv.retried) : "–";
    $("total-failed").textContent = cv ? fmt(cv.failed) + " given up" : "";
    const q = r.streams;
    $("total-frontier").textContent = q ? fmt(state.crawl ? (q.crawls || {})[state.crawl] || 0 : q.frontier_queued) : "–";
    $("total-discovered").textContent = q ? fmt(q.discovered_queued) + " discovered waiting" : "";
    const f = r.filter;
    $("total-filter").textContent = f ? fmt(f.items) : "–";
    $("filter-fpp").textContent = f ? "FPP " + sci(f.estimated_fpp) + " / " + sci(f.target_fpp) : "";

    // Outcomes, retries and failures.
    if (cv) {
      const rows = OUTCOMES.map((o) => [o, { cls: "n", text: fmt(cv.outcomes[o] || 0), id: "outcome-" + o }]);
      rows.push(["retries", { cls: "n", text: fmt(cv.retried), id: "outcome-retries" }]);
      if (!state.crawl) {
        for (const [k, v] of Object.entries(r.crawler.retried || {}).sort()) rows.push(["  retried: " + k, v]);
        for (const [k, v] of Object.entries(r.crawler.failed || {}).sort()) rows.push(["  given up: " + k, v]);
        for (const [k, v] of Object.entries(r.crawler.refetched || {}).sort()) rows.push(["  refetched in full (capture " + k + ")", { cls: "n", text: fmt(v), id: "refetched-" + k }]);
      }
      fill($("outcomes"), ["outcome", "attempts#"], rows);
    } else {
      fill($("outcomes"), null, [["no crawler in this process"]]);
    }
    const rejected = t ? Object.entries(t.rejected || {}).sort((a, b) => b[1] - a[1]).slice(0, MAX_ROWS) : [];
    fill($("rejected"), ["reason", "links#"], rejected.length ? rejected : [[t ? "none" : "no counts here", null]]);

    // The crawler's WARC output.
    const a = r.archive;
    if (a) {
      const rows = [["directory", a.dir], ["files begun", fmt(a.files)], ["written", bytes(a.bytes)]];
      if (a.current) rows.push(["writing", a.current]);
      for (const [k, v] of Object.entries(a.records || {}).sort()) rows.push([k + " records", fmt(v)]);
      if (a.error) rows.push(["STOPPED", a.error]);
      fill($("archive"), null, rows);
    } else {
      fill($("archive"), null, [["this process keeps no archive (--warc-dir)"]]);
    }

    // Filter and its layers: the newest SHOWN_LAYERS, the older ones summed.
    if (f) {
      fill($("filter"), null, [
        ["kind", f.kind], ["items", fmt(f.items)],
        ["false-positive rate", sci(f.estimated_fpp) + " now, bound " + sci(f.target_fpp)],
        ["memory", bytes(f.memory_bytes) + (f.bytes_per_item ? ", " + f.bytes_per_item.toFixed(2) + " B/item" : "")],
        ["layers", fmt((f.layers || []).length)],
        ["next layer opens", f.next_layer_capacity ? "in " + fmt(r.growth_remaining || 0) + " items (capacity " + fmt(f.next_layer_capacity) + ")" : "never (fixed size)"],
      ]);
      const ls = f.layers || [];
      const rows = [];
      const cut = Math.max(0, ls.length - SHOWN_LAYERS);
      if (cut > 0) {
        const old = ls.slice(0, cut);
        rows.push(["0–" + (cut - 1), fmt(sum(old.map((l) => l.items))) + " / " + fmt(sum(old.map((l) => l.capacity))), "", sci(1 - old.reduce((p, l) => p * (1 - l.estimated_fpp), 1))]);
      }
      ls.slice(cut).forEach((l, i) => rows.push([String(cut + i), fmt(l.items) + " / " + fmt(l.capacity), pct(l.fill), sci(l.estimated_fpp)]));
      fill($("layers"), ["layer", "items / capacity", "fill", "FPP now"], rows.reverse());
    } else {
      fill($("filter"), null, [["the filter lives in the dedup workers"]]);
      fill($("layers"), null, []);
    }

    // Queues and partitions (the deepest first).
    if (q) {
      fill($("queues"), ["stream", "waiting#", "in flight#", "redelivered#"], [
        ["discovered", q.discovered_queued, q.discovered_in_flight, q.discovered_redelivered],
        ["frontier", q.frontier_queued, null, q.frontier_redelivered],
      ]);
      const parts = (q.partitions || []).map((n, p) => [p, n]).sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, MAX_ROWS);
      fill($("partitions"), ["partition", "waiting#"], parts.map(([p, n]) => [String(p), n]));
    } else {
      fill($("queues"), null, [["queues unavailable"]]);
      fill($("partitions"), null, []);
    }

    // Top hosts: the crawler's most fetched and the workers' most admitted.
    const hosts = new Map();
    const host = (h) => hosts.get(h) || hosts.set(h, { fetched: null, admitted: null, duplicates: null }).get(h);
    for (const h of (r.crawler && r.crawler.top_hosts) || []) host(h.host).fetched = h.fetched;
    for (const h of (r.shared && r.shared.top_hosts) || []) Object.assign(host(h.host), { admitted: h.admitted, duplicates: h.duplicates });
    const hrows = [...hosts.entries()].sort((a, b) => (b[1].fetched || 0) + (b[1].admitted || 0) - (a[1].fetched || 0) - (a[1].admitted || 0)).slice(0, MAX_ROWS);
    fill($("hosts"), ["host", "fetched#", "admitted#", "duplicates#"], hrows.map(([h, c]) => [{ cls: "host", text: h }, c.fetched, c.admitted, c.duplicates]));
    const counts = [];
    if (r.crawler) counts.push(fmt(r.crawler.host_count) + " fetched");
    if (r.shared) counts.push(fmt(r.shared.host_count) + " admitted");
    $("host-count").textContent = counts.length ? "(" + counts.join(", ") + " hosts)" : "";

    renderOneFetch(r);

    // This process's worker and crawler.
    const procs = [];
    if (r.worker) {
      const deps = Object.entries(r.worker.dependencies || {}).map(([k, v]) => k + (v.up ? " up" : " DOWN")).join(", ");
      procs.push(["dedup worker", (r.worker.ready ? "ready" : "not ready") + " · " + rate(r.rates.admitted) + " admitted · " + r.worker.inflight_batches + " batches in hand"]);
      procs.push(["", deps]);
      // Batches in hand past the bound: pages wait, unacknowledged, for a dependency.
      const h = r.worker.held;
      if (h) {
        procs.push([{ cls: "bad", text: "batches held" }, fmt(h.batches) + " for " +
          Math.max(0, Math.round((new Date(r.at) - new Date(h.since)) / 1000)) + "s" + (h.reason ? ": " + h.reason : "")]);
      }
      // A crawl whose filter cannot be opened: its messages wait in the stream.
      for (const [id, pk] of Object.entries(r.worker.parked || {}).sort()) {
        procs.push([{ cls: "bad", text: "crawl " + id + " parked" }, fmt(pk.messages) + " messages held back since " +
          new Date(pk.since).toLocaleTimeString() + ": " + pk.error]);
      }
    }
    if (r.crawler) {
      procs.push([{ cls: "host", text: "crawler " + r.crawler.id }, rate(r.rates.fetched) + " fetched · " + r.crawler.in_flight + " URLs in hand"]);
      procs.push(["", "partitions " + ((r.crawler.partitions || []).join(" ") || "none")]);
    }
    fill($("processes"), null, procs);

    // The deployment's processes, as they last announced themselves.
    const peers = r.peers || [];
    $("peer-count").textContent = peers.length ? "(" + peers.length + ")" : "";
    fill($("peers"), ["process", "state", "rate#", "seen"], peers.slice(0, MAX_ROWS).map((p) => [
      { cls: "host", text: p.role + " " + p.id + (p.id === r.id ? " (this)" : "") },
      !p.ready ? "not ready" : p.degraded ? "degraded: " + Object.entries(p.degraded).map(([k, v]) => k + ": " + v).join("; ") : "ready",
      p.role === "dedup-worker" ? rate(p.rates.admitted) + " admitted" : rate(p.rates.fetched) + " fetched",
      Math.max(0, Math.round((new Date(r.at) - new Date(p.at)) / 1000)) + "s ago",
    ]));

    // Crawls.
    const crows = [...ids].sort().slice(0, MAX_ROWS).map((id) => {
      const c = (r.crawler && r.crawler.crawls && r.crawler.crawls[id]) || {};
      const d = (t && t.crawls && t.crawls[id]) || {};
      return [id, c.fetched || 0, d.admitted || 0, d.duplicates || 0, (q && q.crawls && q.crawls[id]) || 0];
    });
    fill($("crawls"), ["crawl", "fetched#", "admitted#", "duplicates#", "waiting#"], crows);

    $("errors").textContent = Object.entries(r.errors || {}).map(([k, v]) => k + ": " + v).join(" · ");
  }

  // renderOneFetch shows what fetching each page once costs and saves: the
  // duplicates fetched (by kind, with their bytes), the spellings dropped
  // unfetched by the learned rules, the second renders fetched to measure
  // a page's noise, the hosts with the most duplicates, and the rules.
  function renderOneFetch(r) {
    const cr = r.crawler;
    const rules = r.rules || {};
    if (!cr) {
      fill($("dust"), null, [["no crawler in this process"]]);
      fill($("dup-hosts"), null, []);
    } else {
      const crawls = state.crawl ? { [state.crawl]: (cr.crawls || {})[state.crawl] || {} } : cr.crawls || {};
      const dup = state.crawl ? crawls[state.crawl].duplicates || {} : cr.duplicates || {};
      const byKind = state.crawl ? null : cr.duplicate_bytes || {};
      const total = state.crawl ? crawls[state.crawl].duplicate_bytes || 0 : sum(byKind);
      const spellings = state.crawl ? crawls[state.crawl].spellings || 0 : cr.spellings || 0;
      const noise = state.crawl ? crawls[state.crawl].noise_fetches || 0 : cr.noise_fetches || 0;
      let saved = 0, wasted = 0;
      for (const [id, c] of Object.entries(rules)) if (!state.crawl || id === state.crawl) { saved += c.saved; wasted += c.wasted; }
      const cell = (id, text) => ({ cls: "n", text, id });
      fill($("dust"), ["", "pages#", "bytes#"], [
        ["duplicates, exact (same bytes)", cell("dup-exact", fmt(dup.exact || 0)), cell("dup-exact-bytes", byKind ? bytes(byKind.exact || 0) : "")],
        ["duplicates, near (same but for noise)", cell("dup-near", fmt(dup.near || 0)), cell("dup-near-bytes", byKind ? bytes(byKind.near || 0) : "")],
        ["duplicates fetched", cell("dup-total", fmt(sum(dup))), cell("dup-bytes", bytes(total))],
        ["spellings dropped unfetched", cell("dup-spellings", fmt(spellings)), ""],
        ["second renders (to measure noise)", cell("dup-noise", fmt(noise)), ""],
        ["fetches saved by rules", cell("rules-saved", fmt(saved)), ""],
        ["fetches wasted before a rule was active", cell("rules-wasted", fmt(wasted)), ""],
      ]);
      // Hosts by duplicates, summed over the crawls shown.
      const hosts = new Map();
      for (const c of Object.values(crawls)) {
        for (const [h, d] of Object.entries(c.duplicate_hosts || {})) {
          const x = hosts.get(h) || { exact: 0, near: 0, bytes: 0, spellings: 0 };
          x.exact += d.exact || 0; x.near += d.near || 0; x.bytes += d.bytes || 0; x.spellings += d.spellings || 0;
          hosts.set(h, x);
        }
      }
      const hrows = [...hosts.entries()].sort((a, b) => b[1].exact + b[1].near + b[1].spellings - a[1].exact - a[1].near - a[1].spellings || (a[0] < b[0] ? -1 : 1)).slice(0, MAX_ROWS);
      fill($("dup-hosts"), ["host", "exact#", "near#", "bytes#", "spellings#"], hrows.length ?
        hrows.map(([h, d]) => [{ cls: "host", text: h, title: h }, d.exact, d.near, { cls: "n", text: bytes(d.bytes) }, d.spellings]) : [["no duplicates", null, null, null, null]]);
    }

    // Learned rules, those that saved the most fetches first.
    const shown = Object.entries(rules).filter(([id]) => !state.crawl || id === state.crawl);
    const many = shown.length > 1;
    const list = [];
    const states = {};
    let count = 0;
    for (const [id, c] of shown) {
      count += c.count;
      for (const [k, n] of Object.entries(c.states || {})) states[k] = (states[k] || 0) + n;
      for (const v of c.top || []) list.push(Object.assign({ crawl: id }, v));
    }
    list.sort((a, b) => b.saved - a.saved || b.wasted - a.wasted || b.support - a.support);
    const today = new Date().toDateString();
    const ago = (t) => (!t ? "–" : new Date(t).toDateString() === today ? new Date(t).toLocaleTimeString() : new Date(t).toLocaleString());
    const pair = (p) => (p && p[0] ? p[0] + " = " + p[1] : "");
    const rrows = list.slice(0, MAX_ROWS).map((v) => {
      const ex = pair(v.example) + (v.counter_example && v.counter_example[0] ? (v.example && v.example[0] ? "; " : "") + "differ: " + v.counter_example[0] + " ≠ " + v.counter_example[1] : "");
      const row = [{ cls: "host", text: v.host, title: v.host }, v.rule, { cls: "state-" + v.state, text: v.state }, v.support, v.saved, v.wasted, ago(v.since), { cls: "ex", text: ex || "–", title: ex }];
      return many ? [v.crawl].concat(row) : row;
    });
    const head = ["host", "rule", "state", "support#", "saved#", "wasted#", "since", "example"];
    fill($("rules"), many ? ["crawl"].concat(head) : head, rrows.length ? rrows : [["no rule learned yet"]]);
    const parts = Object.entries(states).sort().map(([k, n]) => fmt(n) + " " + k);
    const n = rrows.length;
    $("rules-count").textContent = count ? "(" + fmt(count) + ": " + parts.join(", ") + (count > n ? "; the " + fmt(n) + " that saved most shown" : "") + ")" : "";
  }

  // base is the page's own address without credentials: a page opened as
  // https://user:pass@host/ would resolve a relative URL with them, and
  // fetch() refuses a URL with credentials (the browser keeps sending them
  // for the origin once the page is open).
  const base = location.origin + location.pathname.replace(/[^/]*$/, "");

  async function poll() {
    try {
      const last = state.at.length ? state.at[state.at.length - 1] : 0;
      const [sr, rr] = await Promise.all([fetch(base + "series?after=" + last), fetch(base + "stats")]);
      const s = await sr.json();
      state.report = await rr.json();
      state.intervalMS = s.interval_ms || 1000;
      const n = state.at.length;
      state.at = state.at.concat(s.at);
      for (const [k, v] of Object.entries(s.values)) {
        const old = state.values[k] || new Array(n).fill(0);
        state.values[k] = old.concat(v);
      }
      for (const k of Object.keys(state.values)) {
        if (state.values[k].length < state.at.length) state.values[k] = state.values[k].concat(new Array(state.at.length - state.values[k].length).fill(0));
      }
      // Keep what the server keeps: an hour of samples.
      const keep = Math.ceil(3600000 / state.intervalMS) + 1;
      if (state.at.length > keep) {
        const cut = state.at.length - keep;
        state.at = state.at.slice(cut);
        for (const k of Object.keys(state.values)) state.values[k] = state.values[k].slice(cut);
      }
      render(state.report);
      draw();
      state.polls = (state.polls || 0) + 1;
    } catch (e) {
      $("errors").textContent = "cannot reach the process: " + e;
    }
    setTimeout(poll, Math.max(state.intervalMS, 1000));
  }

  $("crawl").addEventListener("change", (e) => { state.crawl = e.target.value; if (state.report) { render(state.report); draw(); } });
  window.addEventListener("resize", resize);
  poll();
})();
