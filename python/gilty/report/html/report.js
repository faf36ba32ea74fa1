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
  // Read once: asking for computed style after each added band made the browser recompute the
  // style of the whole page every time, seconds for a long recording's timeline.
  const STATE_COLORS = (() => {
    const style = getComputedStyle(document.documentElement);
    return STATES.map((name) => style.getPropertyValue("--" + name).trim() || "#999");
  })();
  const stateColor = (s) => STATE_COLORS[s] || "#999";
  // Frames show the file's base name; the tooltip and details line give the whole path.
  const LINES = !DATA.options || DATA.options.lines !== false; // --no-lines: a function's lines are one frame
  // A C frame of `record --native` has line -2 - offset: "function (source.c:line)" where its library
  // has line tables (file "library/source-path:line"), else "function (library+0xOFFSET)", or its
  // label alone without a symbol (gilty/sampling/native_frames.py).
  const isNative = (i) => DATA.frames[i][2] <= -2;
  const frameLabel = (i, whole) => {
    const f = DATA.frames[i];
    if (f[2] <= -2) {
      const name = String(f[0]);
      const where = String(f[1] || "");
      const slash = where.indexOf("/");
      const colon = where.lastIndexOf(":");
      if (slash >= 0 && colon > slash && /^\d+$/.test(where.slice(colon + 1))) {
        const source = where.slice(slash + 1, colon);
        return name + " (" + (whole ? source : source.split("/").pop()) + (LINES ? ":" + where.slice(colon + 1) : "") + ")";
      }
      return !where || name.startsWith(where + "+0x") ? name : name + " (" + where + "+0x" + (-2 - f[2]).toString(16) + ")";
    }
    const file = whole ? f[1] : String(f[1]).split("/").pop();
    return f[0] + " (" + file + (LINES ? ":" + f[2] + (whole ? columns(f[3]) : "") : "") + ")";
  };
  // 3.11+: the instruction's columns, 1-based and inclusive ("12:5-17"; "12:5-14:9" over lines).
  function columns(p) {
    if (!p || p[2] === null || p[2] === undefined) return "";
    const end = p[3] === null || p[3] === undefined ? "" : "-" + (p[1] !== null && p[1] !== p[0] ? p[1] + ":" : "") + p[3];
    return ":" + (p[2] + 1) + end;
  }

  // -- header ---------------------------------------------------------------------------------
  function header() {
    const procs = DATA.processes;
    document.getElementById("title").textContent =
      "gilty: " + (procs.length === 1 ? procs[0].label : procs.length + " processes");
    const targets = document.getElementById("targets");
    for (const p of procs) add(targets, "div", {}, p.label + " — Python " + p.python_version);
    if (procs.length > 1) document.getElementById("targets-box").open = false; // the table names them
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
      if (p.free_threading) item((procs.length > 1 ? "pid " + p.pid + " " : "") + "free threading", p.free_threading);
    }
    const verdicts = document.getElementById("verdicts");
    if (DATA.partial_reason) add(verdicts, "p", { class: "partial" }, "PARTIAL: " + DATA.partial_reason);
    // Equal verdicts of several processes (identical workers) are one box naming them all.
    const byText = new Map();
    for (const p of procs) {
      const key = p.verdict || "(no verdict)";
      if (!byText.has(key)) byText.set(key, { pids: [], severity: p.severity || "ok" });
      byText.get(key).pids.push(p.pid);
    }
    // The most severe first; past two, the rest fold away so the flame graph stays on the first screen.
    const rank = { bad: 0, warn: 1, ok: 2 };
    const ordered = Array.from(byText).sort((a, b) => rank[a[1].severity] - rank[b[1].severity]);
    let into = verdicts;
    ordered.forEach(([text, v], i) => {
      if (i === 2 && ordered.length > 3) {
        const more = add(verdicts, "details", { id: "more-verdicts" });
        add(more, "summary", {}, (ordered.length - 2) + " more verdicts");
        into = more;
      }
      const who = procs.length > 1 ? "pid " + v.pids.join(", ") + ": " : "";
      add(into, "div", { class: "verdict " + v.severity, "data-severity": v.severity }, who + text);
    });
    processTable();
    document.getElementById("footer").textContent = "made by " + DATA.generator;
  }

  const busyShare = (b) => b ? 1 - (b.states.idle || 0) - (b.states.unknown || 0) : 0;
  const holdShare = (b) => b ? (b.states.holding_gil || 0) + (b.states.gc || 0) : 0;
  const shortFrame = (f) => f ? f[0] + " (" + String(f[1]).split("/").pop() + ":" + f[2] + ")" : "";

  // The first screen: which process and thread did the most, its role and state split, and where.
  function processTable() {
    if (!DATA.processes.length) return; // a specialization or load page without a recording
    const procs = DATA.processes.slice().sort((a, b) =>
      (busyShare(b.busiest) - busyShare(a.busiest)) || (holdShare(b.busiest) - holdShare(a.busiest)) || (a.pid - b.pid));
    const top = procs[0];
    if (top && top.busiest) {
      const b = top.busiest;
      document.getElementById("headline").textContent =
        "Busiest: pid " + top.pid + (top.role ? " (" + top.role + ")" : "") + ", thread " + b.name +
        ": holds the GIL " + pct(holdShare(b)) + ", waits " + pct(b.states.waiting_gil) +
        ", native " + pct(b.states.native) + ", idle " + pct(b.states.idle) +
        (b.function ? ", mostly in " + shortFrame(b.function) : "");
    }
    const box = document.getElementById("process-table");
    const body = table(box, ["process", "role", "GIL", "busiest thread", "hold", "wait", "native", "idle", "top function", "command"]);
    body.parentNode.id = "processes";
    for (const p of procs) {
      const b = p.busiest;
      const tr = add(body, "tr", { "data-pid": p.pid, "data-role": p.role || "" });
      add(tr, "td", { class: "name" }, "pid " + p.pid);
      add(tr, "td", { class: "name role" }, p.role || "");
      add(tr, "td", {}, pct(p.gil_utilisation));
      add(tr, "td", { class: "name" }, b ? b.name + " (tid " + b.tid + ")" : "–");
      add(tr, "td", {}, b ? pct(holdShare(b)) : "–");
      add(tr, "td", {}, b ? pct(b.states.waiting_gil) : "–");
      add(tr, "td", {}, b ? pct(b.states.native) : "–");
      add(tr, "td", {}, b ? pct(b.states.idle) : "–");
      const fn = add(tr, "td", { class: "name" }, b && b.function ? shortFrame(b.function) : "");
      if (b && b.function) fn.title = b.function[0] + " (" + b.function[1] + ":" + b.function[2] + ")";
      add(add(tr, "td", { class: "name", title: p.command }), "div", { class: "cmd" }, p.short_command || p.command);
    }
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
  // Idle is hidden unless the report was written with --idle: a server sleeps most of the time.
  const shownByDefault = (name) => name !== "idle" || (DATA.options && DATA.options.idle);
  const filters = { process: "all", thread: "all", search: "", range: null,
    states: new Set(STATES.map((_, i) => i).filter((i) => shownByDefault(STATES[i]))) };

  function node(name, kind, state, full) { return { name, full: full || name, kind, state, value: 0, children: new Map() }; }

  function buildTree() {
    const root = node("all", "root", null);
    for (const [, , state, path, n] of shownSamples()) {
      root.value += n;
      let cur = root;
      const keys = [["s" + state, STATES[state], "state", null, false, null]].concat(path.map((f) => [LINES ? "f" + f : "f" + frameLabel(f, true), frameLabel(f), "frame", frameLabel(f, true), isNative(f), f]));
      for (const [key, name, kind, full, native, frame] of keys) {
        let child = cur.children.get(key);
        if (!child) { child = node(name, kind, state, full); child.native = native; child.frame = frame; cur.children.set(key, child); }
        child.value += n;
        cur = child;
      }
    }
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
    // C frames (record --native): one muted sand colour whatever the state, so C stands apart.
    if (n.native) return "hsl(" + (40 + (h % 12)) + ",22%," + (58 + (h >> 5) % 16) + "%)";
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
      const div = add(box, "div", { class: n.native ? "frame native" : "frame", "data-kind": n.kind, "data-depth": depth });
      div.style.left = (100 * x) + "%";
      div.style.width = (100 * w) + "%";
      div.style.top = (depth * ROW) + "px";
      div.style.background = frameColor(n);
      div.textContent = n.name;
      div.title = n.full + "\n" + n.value + " samples (" + pct(flame.tree.value ? n.value / flame.tree.value : 0) + " of all shown)" +
        (hasSource(n) ? "\nclick: zoom in, then follow the link to its lines" : "");
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
    sourceLink(top);
    if (!flame.tree.value) add(box, "p", { class: "hint" }, "No samples match these filters.");
    highlight();
    selfTime();
  }

  // A frame zoomed into whose function the source view shows: a link to its lines, the frame's
  // own line marked there.
  const hasSource = (n) => n && n.frame !== null && n.frame !== undefined && !n.native &&
    GILTY_SOURCE.has(DATA.frames[n.frame][0], DATA.frames[n.frame][1]);
  function sourceLink(top) {
    const box = document.getElementById("flame-source");
    box.replaceChildren();
    if (!hasSource(top)) return;
    const [fn, file, line] = DATA.frames[top.frame];
    const a = add(box, "a", { href: "#source-section", id: "flame-source-link" },
      "Lines of " + fn + " (" + String(file).split("/").pop() + (LINES ? ":" + line : "") + ") ↓");
    a.addEventListener("click", (ev) => { ev.preventDefault(); GILTY_SOURCE.show(fn, file, LINES ? line : null); });
  }

  // The samples the flame graph shows, with the filters applied: [process, tid, state, path, n].
  // With a time range chosen on the timeline, n counts only the slots whose middle lies in it.
  function shownSamples() {
    const out = [];
    DATA.processes.forEach((p, pi) => {
      if (!processShown(pi)) return;
      const mask = rangeMask(p);
      p.stacks.forEach(([tid, state, path, n], si) => {
        if (filters.thread !== "all" && filters.thread !== pi + ":" + tid) return;
        if (!filters.states.has(state)) return;
        let count = n;
        if (mask) {
          const slots = p.stack_slots[si];
          count = 0;
          for (let i = 0; i < slots.length; i += 2) if (mask[slots[i]]) count += slots[i + 1];
          if (!count) return;
        }
        out.push([pi, tid, state, path, count]);
      });
    });
    return out;
  }

  // -- time range -----------------------------------------------------------------------------
  // filters.range is null (the whole recording) or [from, to] in seconds; each process's slots
  // (p.slot_edges) are in it when their middle is.
  const rangeMasks = new Map();
  function rangeMask(p) {
    if (!filters.range) return null;
    let mask = rangeMasks.get(p);
    if (!mask) {
      const e = p.slot_edges || [];
      mask = new Uint8Array(Math.max(e.length - 1, 0));
      for (let j = 0; j + 1 < e.length; j++) {
        const mid = (e[j] + e[j + 1]) / 2;
        mask[j] = mid >= filters.range[0] && mid <= filters.range[1] ? 1 : 0;
      }
      rangeMasks.set(p, mask);
    }
    return mask;
  }
  let shadeTo = null; // (from s, to s) -> draws the timeline's shade; set once the timeline is drawn
  const hasSlots = () => DATA.processes.some((p) => p.slot_edges && p.slot_edges.length > 1);

  function setRange(range) {
    filters.range = range;
    rangeMasks.clear();
    const label = document.getElementById("range-label");
    const reset = document.getElementById("range-reset");
    const shade = document.getElementById("tl-selection");
    if (range) {
      // The slots actually taken: from the first chosen slot's start to the last one's end.
      let lo = Infinity, hi = -Infinity;
      for (const p of DATA.processes) {
        const mask = rangeMask(p), e = p.slot_edges || [];
        for (let j = 0; j < mask.length; j++) if (mask[j]) { lo = Math.min(lo, e[j]); hi = Math.max(hi, e[j + 1]); }
      }
      label.textContent = lo <= hi
        ? "Showing " + secs(lo) + " – " + secs(hi) + " of the recording only"
        : "No samples between " + secs(range[0]) + " and " + secs(range[1]);
      label.dataset.from = lo <= hi ? lo : range[0];
      label.dataset.to = lo <= hi ? hi : range[1];
      if (lo <= hi && shadeTo) shadeTo(lo, hi); // the shade snaps to the slots shown
    } else {
      label.textContent = "";
      delete label.dataset.from;
      delete label.dataset.to;
      if (shade) shade.hidden = true;
    }
    reset.disabled = !range;
    flame.zoom = [];
    drawFlame();
  }

  // Search: frames whose name or path holds the text are outlined, the rest dimmed, and the share
  // of the shown samples with such a frame anywhere on their stack is given.
  function highlight() {
    const q = filters.search.toLowerCase();
    const result = document.getElementById("search-result");
    for (const div of document.querySelectorAll("#flamegraph .frame")) {
      div.classList.toggle("match", !!q && div.dataset.kind === "frame" && div.title.toLowerCase().split("\n")[0].includes(q));
      div.classList.toggle("dim", !!q && !div.classList.contains("match"));
    }
    if (!q) { result.textContent = ""; return; }
    let hit = 0, all = 0;
    for (const [, , , path, n] of shownSamples()) {
      all += n;
      if (path.some((f) => frameLabel(f, true).toLowerCase().includes(q))) hit += n;
    }
    const frames = document.querySelectorAll("#flamegraph .frame.match").length;
    result.textContent = frames + " frames match · " + hit + " samples, " + pct(all ? hit / all : 0) + " of those shown";
  }

  function selfTime() {
    const rows = new Map();
    let all = 0;
    for (const [, , state, path, n] of shownSamples()) {
      all += n;
      const key = path.length ? "f" + path[path.length - 1] : "s" + state;
      let r = rows.get(key);
      if (!r) {
        r = { name: path.length ? frameLabel(path[path.length - 1]) : "(no Python stack: " + STATES[state] + ")",
              full: path.length ? frameLabel(path[path.length - 1], true) : STATES[state], self: 0, total: 0, states: {} };
        rows.set(key, r);
      }
      r.self += n;
      r.states[state] = (r.states[state] || 0) + n;
      for (const f of new Set(path)) {
        const k = "f" + f;
        if (k === key) continue;
        let o = rows.get(k);
        if (!o) { o = { name: frameLabel(f), full: frameLabel(f, true), self: 0, total: 0, states: {} }; rows.set(k, o); }
        o.total += n;
      }
      r.total += n;
    }
    const box = document.getElementById("self-time");
    box.replaceChildren();
    const ranked = Array.from(rows.values()).filter((r) => r.self).sort((a, b) => b.self - a.self || b.total - a.total).slice(0, 25);
    if (!ranked.length) { add(box, "p", { class: "hint" }, "No samples match these filters."); return; }
    const body = table(box, ["function", "self", "total"].concat(STATES.filter((_, i) => filters.states.has(i))));
    body.parentNode.id = "self-time-table";
    for (const r of ranked) {
      const tr = add(body, "tr");
      add(tr, "td", { class: "name", title: r.full }, r.name);
      add(tr, "td", {}, pct(all ? r.self / all : 0));
      add(tr, "td", {}, pct(all ? r.total / all : 0));
      STATES.forEach((_, i) => { if (filters.states.has(i)) add(tr, "td", {}, r.states[i] ? pct(r.states[i] / r.self) : ""); });
    }
  }

  // filters.process is "all" or a comma-separated list of process indices (merged workers).
  function processShown(pi) {
    return filters.process === "all" || filters.process.split(",").map(Number).includes(pi);
  }

  function fillThreads() {
    const sel = document.getElementById("filter-thread");
    sel.replaceChildren(el("option", { value: "all" }, "all threads"));
    DATA.processes.forEach((p, pi) => {
      if (!processShown(pi)) return;
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
    // With workers merged (the default for a server), a master's identical workers are one choice.
    const merged = new Map();
    if (DATA.options && DATA.options.merge_workers) {
      DATA.processes.forEach((p, pi) => {
        if (p.role !== "worker") return;
        const key = p.ppid + "\u0000" + p.command;
        if (!merged.has(key)) merged.set(key, []);
        merged.get(key).push(pi);
      });
    }
    const done = new Set();
    DATA.processes.forEach((p, pi) => {
      if (done.has(pi)) return;
      const group = Array.from(merged.values()).find((g) => g.includes(pi) && g.length > 1);
      if (group) {
        group.forEach((i) => done.add(i));
        add(proc, "option", { value: group.join(","), "data-group": "workers" },
          group.length + " workers of pid " + p.ppid + " · " + (p.short_command || p.command));
      } else {
        add(proc, "option", { value: String(pi) }, p.label + (p.role && p.role !== "main" ? " (" + p.role + ")" : ""));
      }
    });
    proc.addEventListener("change", () => { filters.process = proc.value; fillThreads(); flame.zoom = []; drawFlame(); });
    fillThreads();
    const threadSel = document.getElementById("filter-thread");
    threadSel.addEventListener("change", () => { filters.thread = threadSel.value; flame.zoom = []; drawFlame(); });
    const states = document.getElementById("filter-states");
    STATES.forEach((name, s) => {
      const label = add(states, "label");
      const box = add(label, "input", { type: "checkbox", value: String(s), "data-state": name });
      box.checked = filters.states.has(s);
      box.addEventListener("change", () => {
        if (box.checked) filters.states.add(s); else filters.states.delete(s);
        drawFlame();
      });
      add(label, "span", { class: "swatch", style: "background:" + stateColor(s) });
      label.appendChild(document.createTextNode(name));
    });
    document.getElementById("flame-reset").addEventListener("click", () => { flame.zoom = []; drawFlame(); });
    document.getElementById("range-reset").addEventListener("click", () => setRange(null));
    const search = document.getElementById("flame-search");
    search.addEventListener("input", () => { filters.search = search.value.trim(); highlight(); });
  }

  // -- timeline -------------------------------------------------------------------------------
  function timeline() {
    legend(document.getElementById("legend"));
    const box = document.getElementById("timeline");
    const span = DATA.duration_s || Math.max(0, ...DATA.processes.map((p) => p.duration_s)) || 1;
    for (const p of DATA.processes) {
      add(box, "div", { class: "tl-process" }, p.label);
      if (p.timeline_note) add(box, "p", { class: "hint" }, p.timeline_note);
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
    rangeSelection(box, span);
  }

  // Dragging across the tracks chooses a time range: the flame graph and the self-time table then
  // count only the samples of that range (to the slot: p.slot_edges), until "Whole recording".
  function rangeSelection(box, span) {
    const hint = document.getElementById("range-hint");
    if (!hasSlots()) { hint.textContent = "This recording keeps no stacks over time (saved by an older gilty): the flame graph is of the whole recording."; return; }
    const track = box.querySelector(".tl-track");
    if (!track) return;
    const shade = add(box, "div", { id: "tl-selection" });
    shade.hidden = true;
    let from = null;
    const at = (x) => {
      const r = track.getBoundingClientRect();
      return Math.min(Math.max((x - r.left) / r.width, 0), 1);
    };
    const draw = (a, b) => {
      a = Math.min(Math.max(a, 0), 1);
      b = Math.min(Math.max(b, 0), 1);
      const r = track.getBoundingClientRect(), outer = box.getBoundingClientRect();
      shade.style.left = (r.left - outer.left + Math.min(a, b) * r.width) + "px";
      shade.style.width = (Math.abs(b - a) * r.width) + "px";
      shade.hidden = false;
    };
    shadeTo = (lo, hi) => draw(lo / span, hi / span);
    box.addEventListener("mousedown", (ev) => {
      if (ev.button !== 0 || !ev.target.closest(".tl-track")) return;
      from = at(ev.clientX);
      ev.preventDefault(); // no text selection while dragging
    });
    window.addEventListener("mousemove", (ev) => { if (from !== null) draw(from, at(ev.clientX)); });
    window.addEventListener("mouseup", (ev) => {
      if (from === null) return;
      const to = at(ev.clientX), a = Math.min(from, to), b = Math.max(from, to);
      from = null;
      const width = track.getBoundingClientRect().width;
      if ((b - a) * width < 3) { if (!filters.range) shade.hidden = true; return; } // a click, not a drag
      draw(a, b);
      setRange([a * span, b * span]);
    });
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
      // Threads named alike (ThreadPoolExecutor-0_0 .. _7) are one row and one column: a pool.
      // As in the text report: differently numbered names make a pool from three threads on.
      const byKey = new Map();
      const note = (name) => {
        if (name === null || name === undefined) return;
        const k = String(name).replace(/\d+/g, "#");
        if (!byKey.has(k)) byKey.set(k, new Set());
        byKey.get(k).add(String(name));
      };
      for (const t of p.threads) note(t.name);
      for (const t of waiters) for (const b of t.blame) note(b.holder);
      const poolOf = (name) => {
        if (name === null || name === undefined) return "(none)";
        const k = String(name).replace(/\d+/g, "#");
        const names = byKey.get(k);
        return names && (names.size === 1 || names.size >= 3) ? k : String(name);
      };
      const rowsByPool = new Map();
      for (const t of waiters) {
        const k = poolOf(t.name);
        if (!rowsByPool.has(k)) rowsByPool.set(k, []);
        rowsByPool.get(k).push(t);
      }
      const holderNames = new Map(); // pool -> set of holder names
      for (const t of waiters) for (const b of t.blame) {
        const k = poolOf(b.holder);
        if (!holderNames.has(k)) holderNames.set(k, new Set());
        holderNames.get(k).add(b.holder);
      }
      const label = (k, names) => names.size > 1 ? k + " ×" + names.size : Array.from(names)[0] === undefined ? k : String(Array.from(names)[0]);
      const holders = Array.from(holderNames.keys());
      const body = table(box, ["waiter \\ holder"].concat(holders.map((k) => label(k, holderNames.get(k)))));
      body.parentNode.classList.add("blame-matrix");
      for (const [k, members] of rowsByPool) {
        const tr = add(body, "tr");
        const name = members.length > 1 ? k + " ×" + members.length : members[0].name + " (tid " + members[0].tid + ")";
        add(tr, "td", { class: "name" }, name);
        const waited = members.reduce((s, t) => s + t.waiting_s, 0);
        for (const h of holders) {
          let seconds = 0;
          const fns = [];
          for (const t of members) for (const b of t.blame) if (poolOf(b.holder) === h) {
            seconds += b.fraction * t.waiting_s;
            if (b.function) fns.push(b.function + ": " + secs(b.fraction * t.waiting_s));
          }
          const share = waited ? seconds / waited : 0;
          const td = add(tr, "td", {}, share ? pct(share) + " · " + secs(seconds) : "");
          if (share) td.style.background = "rgba(217,83,79," + (0.1 + 0.6 * share).toFixed(2) + ")";
          if (fns.length) td.title = fns.slice(0, 20).join("\n");
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

  function errorPaths() { // shown only when some thread was seen handling an exception
    const rows = [];
    for (const p of DATA.processes) for (const t of p.threads) if (t.handling_exception_share) rows.push([p, t]);
    if (!rows.length) return;
    document.getElementById("errors-section").hidden = false;
    const body = table(document.getElementById("errors"), ["thread", "handling an exception", "time"]);
    rows.sort((a, b) => b[1].handling_exception_share - a[1].handling_exception_share);
    for (const [p, t] of rows) {
      const tr = add(body, "tr");
      add(tr, "td", { class: "name" }, (DATA.processes.length > 1 ? "pid " + p.pid + " · " : "") + t.name + " (tid " + t.tid + ")");
      add(tr, "td", {}, pct(t.handling_exception_share));
      add(tr, "td", {}, secs(t.handling_exception_share * t.samples / p.rate_hz));
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

  header();
  GILTY_SOURCE.draw(DATA, stateColor, secs);
  flameControls();
  drawFlame();
  timeline();
  blame();
  convoy();
  errorPaths();
  exact();
  document.body.setAttribute("data-ready", "1");
})();
