// gilty HTML report, load part (`gilty load -o run.html`): the latency and throughput curve by rate
// with the knee and the SLO marked, the server's state shares per step, endpoints and event loops.
// Drawn only when the page carries a load run; built with createElement/textContent like report.js.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("gilty-data").textContent);
  const LOAD = DATA.load;
  if (!LOAD) return;
  const SVG = "http://www.w3.org/2000/svg";
  const STATES = DATA.states;
  const ms = (s) => (s === null || s === undefined) ? "–" : (1000 * s).toFixed(1) + " ms";
  const pct = (x) => (x === null || x === undefined) ? "–" : (100 * x).toFixed(0) + " %";
  const { el, add } = GILTY_DOM;
  function svgAdd(parent, tag, attrs, text) {
    const n = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, String(v));
    if (text !== undefined) n.textContent = String(text);
    parent.appendChild(n);
    return n;
  }
  const color = (name) => getComputedStyle(document.documentElement).getPropertyValue("--" + name).trim() || "#999";
  if (LOAD.kind === "load_locust") return locust();
  if (!LOAD.steps || !LOAD.steps.length) return;
  loadHeader();

  const section = el("section", { id: "load-section" });
  const main = document.querySelector("main");
  main.insertBefore(section, main.firstChild);
  add(section, "h2", {}, "Load: latency and throughput by rate");
  add(section, "p", { class: "hint" }, "Open-loop arrivals; latency from each request's intended start. " +
    LOAD.urls.map((u) => u.url).join(", ") + " (" + LOAD.arrivals + " arrivals).");
  const knee = LOAD.knee;
  if (knee) add(section, "div", { class: "verdict", id: "load-knee" },
    (knee.rate === null ? "Knee below the first step" : "Knee: " + knee.rate + " rps") + " (limit: " + knee.limit + "). " + knee.explanation + ".");

  // -- the header: the run (steps, rates, knee), not an empty recording's "0 processes, samples 0" --
  function loadHeader() {
    document.getElementById("title").textContent = "gilty load: " + LOAD.urls.map((u) => u.url).join(", ");
    const summary = document.getElementById("summary");
    const recorded = DATA.processes.length > 0;
    // A step's recording drawn below keeps its own figures, after the run's and said to be that step's.
    const ofRecording = recorded ? Array.from(summary.children) : [];
    summary.textContent = "";
    if (!recorded) document.getElementById("targets-box").hidden = true;
    const item = (k, v) => { const d = add(summary, "div"); add(d, "dt", {}, k); add(d, "dd", {}, v); };
    const rates = LOAD.steps.map((s) => s.requested_rate);
    const each = String(Number((LOAD.steps[0].window_s || 0).toFixed(2)));
    item("steps", rates.length + " (" + (rates.length > 1 ? Math.min(...rates) + " to " + Math.max(...rates) : rates[0]) +
      " rps, " + each + " s each)");
    item("arrivals", LOAD.arrivals + ", open loop");
    if (LOAD.slo) item("SLO", LOAD.slo.percentile.replace("_", ".") + " <= " + (1000 * LOAD.slo.limit_s).toFixed(0) + " ms");
    const knee = LOAD.knee;
    if (knee) item("knee", knee.rate === null ? "below " + Math.min(...rates) + " rps" : knee.rate + " rps (limit: " + knee.limit + ")");
    item("max throughput", Math.max(...LOAD.steps.map((s) => s.verdict.throughput)).toFixed(1) + " answers/s");
    if (LOAD.stopped) item("stopped", "early (Ctrl-C): the last step is partial");
    if (recorded) {
      if (LOAD.recording_step !== null && LOAD.recording_step !== undefined) {
        item("recording below", "the server during the " + LOAD.recording_step + " rps step");
      }
      for (const n of ofRecording) summary.appendChild(n);
    }
  }

  // -- the curve ---------------------------------------------------------------------------------
  const steps = LOAD.steps;
  const W = 760, H = 260, L = 60, R = 60, T = 16, B = 36;
  const rates = steps.map((s) => s.requested_rate);
  const xmax = Math.max(...rates) * 1.05, xmin = Math.min(0, ...rates);
  const lat = steps.flatMap((s) => [s.latency_s.p50, s.latency_s.p99]).filter((v) => v !== null);
  const slo = LOAD.slo ? LOAD.slo.limit_s : null;
  const ymax = Math.max(...lat, slo || 0) * 1.1 || 1;
  const tmax = Math.max(...steps.map((s) => s.verdict.throughput), ...rates) * 1.1 || 1;
  const x = (r) => L + (r - xmin) / (xmax - xmin) * (W - L - R);
  const y = (v) => T + (1 - v / ymax) * (H - T - B);
  const yt = (v) => T + (1 - v / tmax) * (H - T - B);
  const svg = svgAdd(section, "svg", { id: "load-curve", viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img" });
  svgAdd(svg, "line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" });
  svgAdd(svg, "line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" });
  svgAdd(svg, "line", { x1: W - R, y1: T, x2: W - R, y2: H - B, class: "axis" });
  for (const r of rates) svgAdd(svg, "text", { x: x(r), y: H - B + 14, class: "tick", "text-anchor": "middle" }, r);
  svgAdd(svg, "text", { x: (L + W - R) / 2, y: H - 4, class: "tick", "text-anchor": "middle" }, "requested rate (rps)");
  for (let i = 0; i <= 4; i++) {
    svgAdd(svg, "text", { x: L - 6, y: y(ymax * i / 4) + 4, class: "tick", "text-anchor": "end" }, (1000 * ymax * i / 4).toFixed(0));
    svgAdd(svg, "text", { x: W - R + 6, y: yt(tmax * i / 4) + 4, class: "tick" }, (tmax * i / 4).toFixed(0));
  }
  svgAdd(svg, "text", { x: 4, y: T - 4, class: "tick" }, "latency ms");
  svgAdd(svg, "text", { x: W - R - 10, y: T - 4, class: "tick" }, "answers/s");
  if (slo) {
    svgAdd(svg, "line", { x1: L, y1: y(slo), x2: W - R, y2: y(slo), class: "slo" });
    svgAdd(svg, "text", { x: L + 4, y: y(slo) - 4, class: "tick" }, "SLO " + LOAD.slo.percentile.replace("_", ".") + " " + ms(slo));
  }
  if (knee && knee.rate !== null && knee.limit !== "none reached") {
    svgAdd(svg, "line", { x1: x(knee.rate), y1: T, x2: x(knee.rate), y2: H - B, class: "knee", id: "load-knee-line" });
    svgAdd(svg, "text", { x: x(knee.rate) + 4, y: T + 12, class: "tick" }, "knee " + knee.rate + " rps");
  }
  // Throughput first, so the latency points are drawn over it: a p99 point on the same pixel as a
  // throughput point stays visible (drawn larger, with a white ring).
  const series = [
    ["throughput", (s) => s.verdict.throughput, yt, "tp"],
    ["p50", (s) => s.latency_s.p50, y, "p50"],
    ["p99", (s) => s.latency_s.p99, y, "p99"],
  ];
  for (const [name, get, scale, cls] of series) {
    const pts = steps.filter((s) => get(s) !== null).map((s) => x(s.requested_rate).toFixed(1) + "," + scale(get(s)).toFixed(1));
    svgAdd(svg, "polyline", { points: pts.join(" "), class: "series " + cls, "data-series": name });
    for (const s of steps) if (get(s) !== null) {
      const dot = svgAdd(svg, "circle", { cx: x(s.requested_rate), cy: scale(get(s)), r: cls === "p99" ? 4.5 : 3, class: "series point " + cls, "data-series": name });
      svgAdd(dot, "title", {}, name + " at " + s.requested_rate + " rps: " + (cls === "tp" ? get(s).toFixed(1) + " /s" : ms(get(s))));
    }
  }
  const keys = add(section, "div", { class: "legend" });
  for (const [name, , , cls] of series) {
    const span = add(keys, "span");
    add(span, "span", { class: "swatch series-" + cls });
    span.appendChild(document.createTextNode(name));
  }

  // -- the steps: figures and the server's state shares ---------------------------------------------
  add(section, "h2", {}, "Steps");
  const tbl = add(section, "table", { id: "load-steps" });
  const head = add(tbl, "tr");
  for (const h of ["rate", "answers/s", "p50", "p99", "errors", "SLO", "server (busiest processes' threads by state)", "GIL", "PSS"])
    add(head, "th", { class: h.startsWith("server") ? "name" : "" }, h);
  for (const s of steps) {
    const tr = add(tbl, "tr", { class: s.verdict.meets_slo ? "" : "miss" });
    add(tr, "td", {}, s.requested_rate);
    add(tr, "td", {}, s.verdict.throughput.toFixed(1));
    add(tr, "td", {}, ms(s.latency_s.p50));
    add(tr, "td", {}, ms(s.latency_s.p99));
    add(tr, "td", {}, pct(s.verdict.error_share));
    add(tr, "td", {}, s.verdict.meets_slo ? "met" : "missed");
    const cell = add(tr, "td", { class: "name" });
    const p = s.profile;
    if (p) {
      const bar = add(cell, "div", { class: "state-bar" });
      STATES.forEach((name) => {
        const share = p.states[name] || 0;
        if (share <= 0) return;
        const seg = add(bar, "span", { class: "state-seg", style: "width:" + (100 * share).toFixed(2) + "%;background:" + color(name) });
        seg.title = name + " " + pct(share);
      });
      add(tr, "td", {}, pct(p.gil_utilisation));
      const pss = (p.memory || []).reduce((n, m) => n + m.pss, 0);
      add(tr, "td", {}, pss ? (pss / 1048576).toFixed(0) + " MiB" : "–");
    } else {
      cell.textContent = "(not profiled)";
      add(tr, "td", {}, "–");
      add(tr, "td", {}, "–");
    }
  }

  // -- endpoints and event loops of the last profiled step ------------------------------------------
  const last = [...steps].reverse().find((s) => s.profile);
  if (last && last.profile.endpoints.length) {
    add(section, "h2", {}, "Server time per endpoint at " + last.requested_rate + " rps");
    add(section, "p", { class: "hint" }, "Thread-seconds in each handler (the first application frame under the framework's dispatch), by state.");
    const t = add(section, "table", { id: "load-endpoints" });
    const hr = add(t, "tr");
    add(hr, "th", { class: "name" }, "endpoint");
    add(hr, "th", {}, "total");
    for (const name of STATES) add(hr, "th", {}, name);
    add(hr, "th", { class: "name" }, "top site (GIL held)");
    for (const e of last.profile.endpoints) {
      const tr = add(t, "tr");
      add(tr, "td", { class: "name" }, e.file ? e.function + " (" + String(e.file).split("/").pop() + ")" : e.function);
      add(tr, "td", {}, e.total_s.toFixed(2) + " s");
      for (const name of STATES) add(tr, "td", {}, (e.seconds[name] || 0).toFixed(2));
      add(tr, "td", { class: "name" }, e.top_site ? e.top_site + " " + pct(e.top_site_share) : "");
    }
  }
  if (last && (last.profile.task_endpoints || []).length) {
    add(section, "h2", {}, "Requests' asyncio tasks per endpoint at " + last.requested_rate + " rps");
    add(section, "p", { class: "hint" }, "Shares of the wall time of each endpoint's requests' tasks (--tasks): running, " +
      "waiting for the GIL, ready to run, and awaiting, with the await they spend most time in.");
    const t = add(section, "table", { id: "load-task-endpoints" });
    const cols = ["holding_gil", "waiting_gil", "native", "ready", "awaiting"];
    const hr = add(t, "tr");
    add(hr, "th", { class: "name" }, "endpoint");
    add(hr, "th", {}, "task-seconds");
    for (const name of cols) add(hr, "th", {}, name);
    add(hr, "th", { class: "name" }, "top await");
    for (const e of last.profile.task_endpoints) {
      const tr = add(t, "tr");
      add(tr, "td", { class: "name" }, e.function + " (" + String(e.file).split("/").pop() + ")");
      add(tr, "td", {}, e.task_s.toFixed(2) + " s");
      for (const name of cols) add(tr, "td", {}, pct(e.states[name] || 0));
      const a = e.awaits[0];
      add(tr, "td", { class: "name" }, a ? a.kind + " " + pct(a.share) + " at " + a.function + " (" +
        String(a.file).split("/").pop() + ":" + a.line + ")" + (a.code ? ": " + a.code : "") : "");
    }
  }
  const loops = steps.flatMap((s) => (s.profile ? s.profile.loops : []).map((l) => [s, l]));
  if (loops.length) {
    add(section, "h2", {}, "Event loops");
    add(section, "p", { class: "hint" }, "A lag span: the asyncio loop did not get back to its selector for longer than the threshold.");
    const t = add(section, "table", { id: "load-loops" });
    const hr = add(t, "tr");
    for (const h of ["rate", "loop", "at selector", "spans", "lagging", "longest", "most lag under"]) add(hr, "th", { class: h === "loop" || h === "most lag under" ? "name" : "" }, h);
    for (const [s, l] of loops) {
      const tr = add(t, "tr");
      add(tr, "td", {}, s.requested_rate);
      add(tr, "td", { class: "name" }, "pid " + l.pid + " " + l.thread);
      add(tr, "td", {}, pct(l.at_rest));
      add(tr, "td", {}, l.spans);
      add(tr, "td", {}, pct(l.lag_share));
      add(tr, "td", {}, ms(l.max_span_s));
      const c = l.culprits[0];
      add(tr, "td", { class: "name" }, c ? c.site + ", " + c.doing : "");
    }
  }
  if (LOAD.recording_step !== null && LOAD.recording_step !== undefined)
    add(section, "p", { class: "hint", id: "load-recording-note" }, "The sections below (flame graph, timeline, blame) are the server's recording during the step at " + LOAD.recording_step + " rps.");

  // -- a Locust run: its closed-loop figures per second beside the server's GIL -----------------------
  function locust() {
    const section = el("section", { id: "load-section" });
    const main = document.querySelector("main");
    main.insertBefore(section, main.firstChild);
    add(section, "h2", {}, "Locust: " + LOAD.users + " users, " + LOAD.workers + " workers, " + LOAD.duration_s + " s");
    add(section, "p", { class: "verdict", id: "locust-closed-loop" }, "Closed loop: each Locust user waits for its answer before its next request, " +
      "so a slow server is sent less and these latencies omit the requests never sent.");
    const secs = LOAD.seconds || [];
    if (secs.length) {
      const W = 760, H = 220, L = 60, R = 60, T = 16, B = 30;
      const t0 = secs[0].t, n = secs.length;
      const rmax = Math.max(1, ...secs.map((s) => s.requests)) * 1.1;
      const x = (i) => L + (i + 0.5) / n * (W - L - R);
      const svg = svgAdd(section, "svg", { id: "locust-seconds", viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img" });
      svgAdd(svg, "line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" });
      svgAdd(svg, "line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" });
      svgAdd(svg, "line", { x1: W - R, y1: T, x2: W - R, y2: H - B, class: "axis" });
      svgAdd(svg, "text", { x: 4, y: T - 4, class: "tick" }, "requests in the second");
      svgAdd(svg, "text", { x: W - R - 40, y: T - 4, class: "tick" }, "server GIL");
      for (let i = 0; i <= 4; i++) {
        svgAdd(svg, "text", { x: L - 6, y: T + (1 - i / 4) * (H - T - B) + 4, class: "tick", "text-anchor": "end" }, (rmax * i / 4).toFixed(0));
        svgAdd(svg, "text", { x: W - R + 6, y: T + (1 - i / 4) * (H - T - B) + 4, class: "tick" }, (25 * i) + " %");
      }
      const bw = Math.max(1, (W - L - R) / n * 0.7);
      secs.forEach((s, i) => {
        const h = s.requests / rmax * (H - T - B);
        const bar = svgAdd(svg, "rect", { x: x(i) - bw / 2, y: H - B - h, width: bw, height: h, class: "locust-bar" });
        svgAdd(bar, "title", {}, "second " + (s.t - t0) + ": " + s.requests + " requests, " + s.users + " users");
        svgAdd(svg, "text", { x: x(i), y: H - B + 14, class: "tick", "text-anchor": "middle" }, s.t - t0);
      });
      const pts = secs.map((s, i) => [i, s.server_gil]).filter(([, g]) => g !== null && g !== undefined)
        .map(([i, g]) => x(i).toFixed(1) + "," + (T + (1 - g) * (H - T - B)).toFixed(1));
      if (pts.length) svgAdd(svg, "polyline", { points: pts.join(" "), class: "series p99", "data-series": "server_gil" });
    }
    const t = add(section, "table", { id: "locust-requests" });
    const hr = add(t, "tr");
    for (const h of ["request", "count", "failures", "requests/s", "p50", "p90", "p99", "max"]) add(hr, "th", { class: h === "request" ? "name" : "" }, h);
    for (const r of [...LOAD.requests, ...(LOAD.aggregated ? [LOAD.aggregated] : [])]) {
      const tr = add(t, "tr");
      add(tr, "td", { class: "name" }, (r.method + " " + r.name).trim());
      add(tr, "td", {}, r.count);
      add(tr, "td", {}, r.failures);
      add(tr, "td", {}, r.rps === null ? "–" : r.rps.toFixed(1));
      for (const k of ["p50_s", "p90_s", "p99_s", "max_s"]) add(tr, "td", {}, ms(r[k]));
    }
    if (LOAD.profile && LOAD.profile.endpoints.length) {
      add(section, "h2", {}, "Server time per endpoint during the run");
      const e = add(section, "table", { id: "load-endpoints" });
      const h = add(e, "tr");
      add(h, "th", { class: "name" }, "endpoint");
      add(h, "th", {}, "total");
      for (const name of STATES) add(h, "th", {}, name);
      add(h, "th", { class: "name" }, "top site (GIL held)");
      for (const row of LOAD.profile.endpoints) {
        const tr = add(e, "tr");
        add(tr, "td", { class: "name" }, row.file ? row.function + " (" + String(row.file).split("/").pop() + ")" : row.function);
        add(tr, "td", {}, row.total_s.toFixed(2) + " s");
        for (const name of STATES) add(tr, "td", {}, (row.seconds[name] || 0).toFixed(2));
        add(tr, "td", { class: "name" }, row.top_site ? row.top_site + " " + pct(row.top_site_share) : "");
      }
    }
  }
})();
