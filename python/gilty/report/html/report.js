// gilty HTML report. Every node is built with createElement/textContent: names of functions,
// files and threads come from the profiled program and are never parsed as HTML.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("gilty-data").textContent);
  const STATES = DATA.states;
  const ROW = 18;
  const MIN_WIDTH = 0.001; // frames narrower than this share of the view are not drawn

  const { el, add } = GILTY_DOM;
  const pct = (x) => (x === null || x === undefined) ? "–" : (100 * x).toFixed(1) + " %";
  const secs = (x) => (x === null || x === undefined) ? "–" : (x >= 1 ? x.toFixed(2) + " s" : (1000 * x).toFixed(1) + " ms");
  const stateColor = (s) => getComputedStyle(document.documentElement).getPropertyValue("--" + STATES[s]).trim() || "#999";
  // Frames show the file's base name; the tooltip and details line give the whole path.
  const frameLabel = (i, whole) => {
    const f = DATA.frames[i];
    const file = whole ? f[1] : String(f[1]).split("/").pop();
    return f[0] + " (" + file + ":" + f[2] + ")";
  };

  // -- header ---------------------------------------------------------------------------------
  function header() {
    const procs = DATA.processes;
    document.getElementById("title").textContent =
      "gilty: " + (procs.length === 1 ? procs[0].label : procs.length + " processes");
    const targets = document.getElementById("targets");
    for (const p of procs) add(targets, "div", {}, p.label + " — Python " + p.python_version);
    const summary = document.getElementById("summary");
    const item = (k, v) => { const d = add(summary, "div"); add(d, "dt", {}, k); add(d, "dd", {}, v); };
    item("duration", secs(DATA.duration_s));
    item("rate", DATA.rate_hz + " Hz");
    item("samples", procs.reduce((n, p) => n + p.samples, 0));
    if (procs.length === 1) {
      item("GIL utilisation", pct(procs[0].gil_utilisation));
      item("garbage collection", pct(procs[0].gc_share));
      item("threads waiting (mean)", procs[0].mean_waiting_threads.toFixed(2));
    }
    for (const p of procs) {
      if (p.saturation) item((procs.length > 1 ? "pid " + p.pid + " " : "") + "CPU", p.saturation);
    }
    const verdicts = document.getElementById("verdicts");
    if (DATA.partial_reason) add(verdicts, "p", { class: "partial" }, "PARTIAL: " + DATA.partial_reason);
    for (const p of procs) {
      const text = (procs.length > 1 ? "pid " + p.pid + ": " : "") + (p.verdict || "(no verdict)");
      add(verdicts, "div", { class: "verdict" }, text);
    }
    document.getElementById("footer").textContent = "made by " + DATA.generator;
  }

  function legend(parent) {
    STATES.forEach((name, s) => {
      const span = add(parent, "span");
      add(span, "span", { class: "swatch", style: "background:" + stateColor(s) });
      span.appendChild(document.createTextNode(name));
    });
  }

  // -- flame graph ----------------------------------------------------------------------------
  const flame = { zoom: [], tree: null };
  const filters = { process: "all", thread: "all", states: new Set(STATES.map((_, i) => i)) };

  function node(name, kind, state, full) { return { name, full: full || name, kind, state, value: 0, children: new Map() }; }

  function buildTree() {
    const root = node("all", "root", null);
    DATA.processes.forEach((p, pi) => {
      if (filters.process !== "all" && Number(filters.process) !== pi) return;
      for (const [tid, state, path, n] of p.stacks) {
        if (filters.thread !== "all" && filters.thread !== pi + ":" + tid) continue;
        if (!filters.states.has(state)) continue;
        root.value += n;
        let cur = root;
        const keys = [["s" + state, STATES[state], "state", null]].concat(path.map((f) => ["f" + f, frameLabel(f), "frame", frameLabel(f, true)]));
        for (const [key, name, kind, full] of keys) {
          let child = cur.children.get(key);
          if (!child) { child = node(name, kind, state, full); cur.children.set(key, child); }
          child.value += n;
          cur = child;
        }
      }
    });
    return root;
  }

  function hue(name) { // a stable shade per function name
    let h = 0;
    for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    return h;
  }
  function frameColor(n) {
    if (n.kind !== "frame") return stateColor(n.state === null ? STATES.indexOf("unknown") : n.state);
    const base = { 0: [6, 70], 1: [280, 45], 2: [36, 85], 3: [210, 60], 4: [210, 8], 5: [190, 5], 6: [150, 45] }[n.state] || [0, 0];
    const h = hue(n.name);
    return "hsl(" + (base[0] + (h % 20) - 10) + "," + base[1] + "%," + (62 + (h >> 5) % 22) + "%)";
  }

  function zoomNode() {
    let cur = flame.tree;
    const path = [cur];
    for (const key of flame.zoom) {
      const next = cur.children.get(key);
      if (!next) break;
      cur = next;
      path.push(cur);
    }
    return path;
  }

  function drawFlame() {
    flame.tree = buildTree();
    const box = document.getElementById("flamegraph");
    box.replaceChildren();
    const path = zoomNode();
    flame.zoom = flame.zoom.slice(0, path.length - 1);
    const top = path[path.length - 1];
    const crumbs = document.getElementById("breadcrumb");
    crumbs.replaceChildren();
    path.forEach((n, i) => {
      if (i) add(crumbs, "span", { class: "sep" }, "›");
      const c = add(crumbs, "span", { class: "crumb" }, n.name);
      c.addEventListener("click", () => { flame.zoom = flame.zoom.slice(0, i); drawFlame(); });
    });
    const total = top.value;
    let depthMax = 0;
    const zoomKeys = flame.zoom.slice();
    function place(n, key, keys, depth, x) {
      const w = total ? n.value / total : 0;
      if (w < MIN_WIDTH) return;
      depthMax = Math.max(depthMax, depth);
      const div = add(box, "div", { class: "frame", "data-kind": n.kind, "data-depth": depth });
      div.style.left = (100 * x) + "%";
      div.style.width = (100 * w) + "%";
      div.style.top = (depth * ROW) + "px";
      div.style.background = frameColor(n);
      div.textContent = n.name;
      div.title = n.full + "\n" + n.value + " samples (" + pct(flame.tree.value ? n.value / flame.tree.value : 0) + " of all shown)";
      div.addEventListener("click", () => { flame.zoom = keys; drawFlame(); });
      div.addEventListener("mouseenter", () => {
        document.getElementById("flame-details").textContent = n.full + " — " + n.value + " samples, " + pct(w) + " of this view";
      });
      let cx = x;
      const children = Array.from(n.children.entries()).sort((a, b) => b[1].value - a[1].value);
      for (const [ck, child] of children) {
        place(child, ck, keys.concat([ck]), depth + 1, cx);
        cx += total ? child.value / total : 0;
      }
    }
    place(top, null, zoomKeys, 0, 0);
    box.style.height = ((depthMax + 1) * ROW + 4) + "px";
    if (!flame.tree.value) add(box, "p", { class: "hint" }, "No samples match these filters.");
  }

  function fillThreads() {
    const sel = document.getElementById("filter-thread");
    sel.replaceChildren(el("option", { value: "all" }, "all threads"));
    DATA.processes.forEach((p, pi) => {
      if (filters.process !== "all" && Number(filters.process) !== pi) return;
      for (const t of p.threads) {
        const label = (DATA.processes.length > 1 ? "pid " + p.pid + " · " : "") + t.name + " (tid " + t.tid + ")";
        add(sel, "option", { value: pi + ":" + t.tid }, label);
      }
    });
    filters.thread = "all";
  }

  function flameControls() {
    const proc = document.getElementById("filter-process");
    add(proc, "option", { value: "all" }, "all processes");
    DATA.processes.forEach((p, pi) => add(proc, "option", { value: String(pi) }, p.label));
    proc.addEventListener("change", () => { filters.process = proc.value; fillThreads(); flame.zoom = []; drawFlame(); });
    fillThreads();
    const threadSel = document.getElementById("filter-thread");
    threadSel.addEventListener("change", () => { filters.thread = threadSel.value; flame.zoom = []; drawFlame(); });
    const states = document.getElementById("filter-states");
    STATES.forEach((name, s) => {
      const label = add(states, "label");
      const box = add(label, "input", { type: "checkbox", value: String(s), "data-state": name });
      box.checked = true;
      box.addEventListener("change", () => {
        if (box.checked) filters.states.add(s); else filters.states.delete(s);
        drawFlame();
      });
      add(label, "span", { class: "swatch", style: "background:" + stateColor(s) });
      label.appendChild(document.createTextNode(name));
    });
    document.getElementById("flame-reset").addEventListener("click", () => { flame.zoom = []; drawFlame(); });
  }

  // -- timeline -------------------------------------------------------------------------------
  function timeline() {
    legend(document.getElementById("legend"));
    const box = document.getElementById("timeline");
    const span = DATA.duration_s || Math.max(0, ...DATA.processes.map((p) => p.duration_s)) || 1;
    for (const p of DATA.processes) {
      add(box, "div", { class: "tl-process" }, p.label);
      const rows = p.threads.map((t) => [t.name + " (tid " + t.tid + ")", t.bands.map((b) => [b[0], b[1], b[2], STATES[b[2]]])]);
      if (p.exact_gc.length) rows.push(["garbage collections (exact)", p.exact_gc.map((g) => [g[0], g[0] + g[1], 1, "gc gen " + g[2]])]);
      for (const [label, bands] of rows) {
        const row = add(box, "div", { class: "tl-row", "data-thread": label });
        add(row, "div", { class: "tl-label", title: label }, label);
        const track = add(row, "div", { class: "tl-track" });
        for (const [a, b, s, name] of bands) {
          const band = add(track, "div", { class: "tl-band", title: name + " " + secs(a) + "–" + secs(b) });
          band.style.left = (100 * a / span) + "%";
          band.style.width = (100 * Math.max(b - a, 0) / span) + "%";
          band.style.background = stateColor(s);
        }
      }
    }
    const axis = add(box, "div", { class: "tl-axis" });
    for (let i = 0; i <= 4; i++) add(axis, "span", {}, secs(span * i / 4));
  }

  // -- blame, convoys, exact ------------------------------------------------------------------
  function table(parent, head) {
    const t = add(parent, "table");
    const tr = add(add(t, "thead"), "tr");
    head.forEach((h, i) => add(tr, "th", { class: i ? "" : "name" }, h));
    return add(t, "tbody");
  }

  function blame() {
    const box = document.getElementById("blame");
    let any = false;
    for (const p of DATA.processes) {
      const waiters = p.threads.filter((t) => t.blame.length);
      if (!waiters.length) continue;
      any = true;
      if (DATA.processes.length > 1) add(box, "div", { class: "tl-process" }, p.label);
      const holders = [];
      for (const t of waiters) for (const b of t.blame) if (!holders.includes(b.holder)) holders.push(b.holder);
      const body = table(box, ["waiter \\ holder"].concat(holders));
      for (const t of waiters) {
        const tr = add(body, "tr");
        add(tr, "td", { class: "name" }, t.name + " (tid " + t.tid + ")");
        for (const h of holders) {
          const share = t.blame.filter((b) => b.holder === h).reduce((s, b) => s + b.fraction, 0);
          const td = add(tr, "td", {}, share ? pct(share) + " · " + secs(share * t.waiting_s) : "");
          if (share) td.style.background = "rgba(217,83,79," + (0.1 + 0.6 * share).toFixed(2) + ")";
          const fns = t.blame.filter((b) => b.holder === h && b.function).map((b) => b.function + ": " + pct(b.fraction));
          if (fns.length) td.title = fns.join("\n");
        }
      }
    }
    if (!any) add(box, "p", { class: "hint" }, "No thread waited for the GIL.");
  }

  function convoy() {
    const box = document.getElementById("convoy");
    const body = table(box, ["thread", "episodes", "mean wait", "switch intervals", "convoy"]);
    for (const p of DATA.processes) for (const t of p.threads) {
      const tr = add(body, "tr");
      const c = t.convoy;
      add(tr, "td", { class: "name" }, (DATA.processes.length > 1 ? "pid " + p.pid + " · " : "") + t.name + " (tid " + t.tid + ")");
      add(tr, "td", {}, c.episodes);
      add(tr, "td", {}, secs(c.mean_wait_s));
      add(tr, "td", {}, c.switch_intervals === null ? "–" : c.switch_intervals.toFixed(2));
      add(tr, "td", {}, c.is_convoy ? "yes" : "no");
    }
  }

  function histogram(parent, title, dist, cls) {
    if (!dist || !dist.count) return;
    add(parent, "div", {}, title + ": " + dist.count + " · p50 " + secs(dist.p50_s) + " · p99 " + secs(dist.p99_s) + " · max " + secs(dist.max_s));
    const grid = add(parent, "div", { class: "hist" });
    const peak = Math.max(...dist.hist.map((h) => h[1]));
    const ns = (v) => v >= 1e9 ? v / 1e9 + " s" : v >= 1e6 ? v / 1e6 + " ms" : v >= 1e3 ? v / 1e3 + " µs" : v + " ns";
    for (const [lo, n] of dist.hist) {
      add(grid, "span", {}, "[" + ns(lo) + ", " + ns(lo ? lo * 2 : 1) + ")");
      const bar = add(grid, "div", { class: "bar " + cls });
      bar.style.width = (100 * n / peak) + "%";
      add(grid, "span", {}, n);
    }
  }

  function exact() {
    const box = document.getElementById("exact");
    let any = false;
    for (const p of DATA.processes) for (const t of p.threads) {
      if (!t.exact) continue;
      any = true;
      add(box, "h3", {}, t.name + " (tid " + t.tid + "): held " + secs(t.exact.hold_s) + ", waited " + secs(t.exact.wait_s));
      histogram(box, "GIL holds", t.exact.hold, "hold");
      histogram(box, "GIL waits", t.exact.wait, "wait");
    }
    document.getElementById("exact-section").hidden = !any;
  }

  function memory() { // hook: drawn only when a recording carries memory data
    const procs = DATA.processes.filter((p) => p.memory);
    if (!procs.length) return;
    document.getElementById("memory-section").hidden = false;
    for (const p of procs) add(document.getElementById("memory"), "pre", {}, JSON.stringify(p.memory, null, 2));
  }

  header();
  flameControls();
  drawFlame();
  timeline();
  blame();
  convoy();
  exact();
  memory();
  document.body.setAttribute("data-ready", "1");
})();
