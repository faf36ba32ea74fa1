// gilty HTML report, memory part (`gilty memory -o memory.html`): the summary sentences and warnings, the
// per-process table, the workers' copying split between garbage collection and outside it and, with
// --faults, a flame graph of the writes that copied shared pages; then the whole text report.
// Drawn only when the page carries a memory run (report/memory/html.py); the figures are the JSON
// report's. Built with createElement/textContent like report.js: command lines and function names come
// from the target and are never parsed as HTML.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("gilty-data").textContent);
  const MEM = DATA.memory;
  if (!MEM) return;
  const R = MEM.report;
  const { add } = GILTY_DOM;
  const MIB = 1 << 20;
  // Sizes as the text report prints them: MiB with one decimal, "-" when not measured.
  const mib = (n) => (n === null || n === undefined) ? "-" : (n / MIB).toFixed(1);
  const signed = (n) => (n >= 0 ? "+" : "") + (n / MIB).toFixed(1);
  const last = (p) => p.samples.length ? p.samples[p.samples.length - 1] : null;

  // A memory run carries no thread states or stacks: the header says what was measured, and the
  // recording's sections, empty, are hidden.
  if (!DATA.processes.length) {
    document.getElementById("title").textContent = "gilty memory: pid " + R.master_pid;
    document.getElementById("headline").textContent = MEM.headline;
    const targets = document.getElementById("targets");
    for (const p of R.processes) add(targets, "div", {}, p.role + " " + p.pid + " — " + (p.cmdline || "?"));
    if (R.processes.length > 1) document.getElementById("targets-box").open = false;
    const summary = document.getElementById("summary");
    summary.textContent = "";
    const item = (k, v) => { const d = add(summary, "div"); add(d, "dt", {}, k); add(d, "dd", {}, v); };
    const workers = R.processes.filter((p) => p.role === "worker").length;
    item("duration", R.duration_s.toFixed(1) + " s, every " + R.interval_s + " s");
    item("workers", workers);
    const tree = R.tree.length ? R.tree[R.tree.length - 1] : null;
    if (tree) item("tree PSS", mib(tree.pss) + " MiB");
    if (tree) item("sharing saves", mib(R.savings.sharing_saves_bytes) + " MiB");
    item("copy-on-write read by", R.method.cow || "none (pagemap unreadable)");
    for (const id of ["flame-section", "timeline-section", "blame-section", "convoy-section", "source-section"]) {
      const s = document.getElementById(id);
      if (s) s.hidden = true;
    }
  }

  const section = document.getElementById("memory-section");
  const main = document.querySelector("main");
  main.insertBefore(section, main.firstChild);
  section.hidden = false;
  const box = document.getElementById("memory");
  if (R.partial) add(box, "p", { class: "partial" }, "PARTIAL: " + R.partial_reason);
  for (const h of MEM.helpers) add(box, "p", { class: "hint" }, h);
  const verdicts = add(box, "div", { id: "memory-summary" });
  for (const line of R.summary) add(verdicts, "div", { class: "verdict" }, line);
  for (const w of R.warnings) add(verdicts, "div", { class: "verdict warn", "data-code": w.code }, w.message);

  // -- per process: the text report's two tables side by side in one --------------------------
  add(box, "h3", {}, "Per process (MiB)");
  add(box, "p", { class: "hint" }, "The last measurement of each process; growth, and the copies of pages shared " +
    "with the master during garbage collection or outside it, over this run; since fork: each worker's pages " +
    "against the master's at the same addresses.");
  const table = add(box, "table", { id: "memory-processes" });
  const head = add(table, "tr");
  const cols = ["process", "role", "RSS", "PSS", "USS", "shared", "growth", "CoW in GC", "outside GC",
    "shared w/ master", "copied", "new", "private since fork"];
  for (const c of cols) add(head, "th", { class: c === "process" || c === "role" ? "name" : "" }, c);
  for (const p of R.processes) {
    const tr = add(table, "tr", { "data-pid": p.pid, "data-role": p.role });
    add(tr, "td", { class: "name" }, "pid " + p.pid + (p.exited_s === null ? "" : " (exited " + p.exited_s.toFixed(1) + "s)"));
    add(tr, "td", { class: "name role" }, p.role);
    const s = last(p);
    const tracked = p.cow.baseline_shared_bytes !== null;
    const f = p.since_fork;
    const cells = s === null ? Array(11).fill("") : [
      mib(s.rss), mib(s.pss), mib(s.uss), mib(s.shared_clean + s.shared_dirty), signed(p.cow.private_growth_bytes),
      tracked ? mib(p.cow.during_gc_bytes) : "-", tracked ? mib(p.cow.outside_gc_bytes) : "-",
      f ? mib(f.shared_with_parent_bytes) : "", f ? mib(f.copied_bytes) : "", f ? mib(f.new_bytes) : "",
      f ? mib(f.private_bytes) : "",
    ];
    if (s === null) cells[0] = "(not measured)";
    cells.forEach((c, i) => add(tr, "td", { "data-col": cols[i + 2] }, c));
  }
  if (R.tree.length) {
    const first = R.tree[0], now = R.tree[R.tree.length - 1];
    const tr = add(table, "tr", { class: "tree" });
    add(tr, "td", { class: "name" }, "tree (now)");
    add(tr, "td", { class: "name" }, "");
    for (const c of [mib(now.rss), mib(now.pss), mib(now.uss), "", signed(now.uss - first.uss)]) add(tr, "td", {}, c);
  }

  // -- the workers' copying: during garbage collection or outside it ---------------------------
  const split = MEM.split;
  if (split.tracked) {
    add(box, "h3", {}, "Copied by the workers: garbage collection or not");
    const total = split.during_gc_bytes + split.outside_gc_bytes;
    const bar = add(box, "div", { class: "mem-split", id: "memory-split" });
    if (total > 0) {
      add(bar, "span", { class: "gc", style: "width:" + (100 * split.during_gc_bytes / total) + "%" });
      add(bar, "span", { class: "outside", style: "width:" + (100 * split.outside_gc_bytes / total) + "%" });
    }
    const legend = add(box, "div", { class: "legend" });
    const swatch = (cls, text) => { const s = add(legend, "span"); add(s, "span", { class: "swatch " + cls }); s.appendChild(document.createTextNode(text)); };
    swatch("gc", "during garbage collection " + mib(split.during_gc_bytes) + " MiB");
    swatch("outside", "outside it (reference counting, other writes) " + mib(split.outside_gc_bytes) + " MiB");
    add(legend, "span", { class: "hint" }, mib(split.estimated_bytes) + " MiB of the split by estimate");
    if (split.caveat) add(box, "div", { class: "verdict warn", id: "memory-estimate" }, split.caveat);
  }

  if (R.faults) faults(R.faults);

  add(box, "h3", {}, "Text report");
  const details = add(box, "details", { id: "memory-text-box" });
  add(details, "summary", {}, "the whole report as `gilty memory` prints it");
  add(details, "pre", { id: "memory-text" }, MEM.text);
  document.body.setAttribute("data-memory-ready", "1");

  // -- --faults: who copied shared pages ----------------------------------------------------------
  function faults(F) {
    add(box, "h3", {}, "Who copied shared pages");
    add(box, "p", { class: "hint" }, "Sampled page faults that copied a page shared with the master (" + F.method +
      ", every " + F.period + "), each with its thread's Python stack: outermost at the top, the C function that " +
      "wrote at the bottom, widths in bytes copied (" + mib(F.copied_bytes) + " MiB in all); frames under " +
      "[garbage collection] ran in a collection. Click a frame to zoom into it.");
    if (!F.collapsed.length) {
      add(box, "p", { id: "memory-flame-empty" }, "No sampled fault copied a page shared with the master.");
      return;
    }
    const root = { name: "all", value: 0, children: new Map() };
    for (const line of F.collapsed) {
      const cut = line.lastIndexOf(" ");
      const kib = Number(line.slice(cut + 1));
      let node = root;
      root.value += kib;
      for (const name of line.slice(0, cut).split(";")) {
        if (!node.children.has(name)) node.children.set(name, { name, value: 0, children: new Map(), parent: node });
        node = node.children.get(name);
        node.value += kib;
      }
    }
    const crumb = add(box, "div", { id: "memory-flame-crumb", class: "details" });
    const graph = add(box, "div", { id: "memory-flame" });
    const detail = add(box, "div", { class: "details" });
    const ROW = 18;
    const color = (name) => {
      if (name === "[garbage collection]") return "var(--gc)";
      if (name.endsWith(" [C]")) return "#9ec3e6";
      let h = 0;
      for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
      return "hsl(" + (20 + h % 30) + ", 80%, " + (62 + h % 12) + "%)";
    };
    const size = (kib) => kib >= 1024 ? (kib / 1024).toFixed(1) + " MiB" : kib + " KiB";
    function draw(top) {
      graph.textContent = "";
      crumb.textContent = "";
      const path = [];
      for (let n = top; n; n = n.parent) path.unshift(n);
      path.forEach((n, i) => {
        if (i) add(crumb, "span", { class: "sep" }, "›");
        const c = add(crumb, "span", { class: "crumb" }, n.name);
        c.addEventListener("click", () => draw(n));
      });
      let depth = 0;
      const place = (node, x, level) => {
        const w = node.value / top.value;
        if (w < 0.002) return;
        depth = Math.max(depth, level + 1);
        const f = add(graph, "div", { class: "frame", style: "left:" + (100 * x) + "%;width:" + (100 * w) + "%;top:" + (level * ROW) +
          "px;background:" + color(node.name) }, node.name);
        f.title = node.name + " — " + size(node.value) + " (" + (100 * node.value / root.value).toFixed(1) + " % of the copies)";
        f.addEventListener("click", () => draw(node));
        f.addEventListener("mouseenter", () => { detail.textContent = f.title; });
        let cx = x;
        for (const child of Array.from(node.children.values()).sort((a, b) => b.value - a.value)) {
          place(child, cx, level + 1);
          cx += child.value / top.value;
        }
      };
      let x = 0;
      for (const child of Array.from(top.children.values()).sort((a, b) => b.value - a.value)) {
        place(child, x, 0);
        x += child.value / top.value;
      }
      graph.style.height = (Math.max(depth, 1) * ROW + 2) + "px";
    }
    draw(root);
    if (F.functions.length) {
      const t = add(box, "table", { id: "memory-fault-functions" });
      const hr = add(t, "tr");
      for (const h of ["MiB", "share", "in GC", "function", "C function that wrote"]) add(hr, "th", { class: h.length > 6 ? "name" : "" }, h);
      for (const fn of F.functions) {
        const tr = add(t, "tr");
        add(tr, "td", {}, mib(fn.bytes));
        add(tr, "td", {}, (100 * fn.share).toFixed(1) + "%");
        add(tr, "td", {}, fn.bytes ? (100 * fn.gc_bytes / fn.bytes).toFixed(0) + "%" : "-");
        add(tr, "td", { class: "name" }, fn.function + (fn.file ? " (" + fn.file.split("/").pop() + ")" : ""));
        add(tr, "td", { class: "name" }, fn.c_functions.slice(0, 2).map((c) => c.name).join(", "));
      }
    }
  }
})();
