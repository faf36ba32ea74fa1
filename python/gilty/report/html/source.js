// gilty HTML report: the source view (docs/source-view.md). For each hot function, its hottest lines
// first, then its lines in file order, each with a heat column: the line's time by state, self
// (the thread stood on the line) above total (the line was anywhere on the stack). Source text comes
// from the target and is only ever set as textContent.
"use strict";
const GILTY_SOURCE = (function () {
  const { add } = GILTY_DOM;
  const blocks = new Map(); // "function\0file" -> { block, rows: Map(line -> row) }
  const keyOf = (fn, file) => String(fn) + "\u0000" + String(file);
  const sum = (xs, states) => xs ? states.reduce((n, s) => n + (xs[s] || 0), 0) : 0;

  function draw(DATA, stateColor, secs) {
    const view = DATA.source_view;
    const section = document.getElementById("source-section");
    if (!view || !view.functions.length || !section) return;
    section.hidden = false;
    const STATES = DATA.states;
    const ranked = view.states_ranked;
    const rate = DATA.rate_hz || 1;
    const time = (n) => secs(n / rate);
    const split = (xs) => STATES.map((name, s) => xs && xs[s] ? name + " " + time(xs[s]) : "").filter(Boolean).join(", ");
    const legend = document.getElementById("source-legend");
    for (const s of ranked) {
      const span = add(legend, "span");
      add(span, "span", { class: "swatch", style: "background:" + stateColor(s) });
      span.appendChild(document.createTextNode(STATES[s]));
    }
    const index = document.getElementById("source-index");
    const box = document.getElementById("source-view");

    // A bar of samples by state, as wide as its share of ``peak``.
    function bar(parent, xs, peak, cls) {
      const b = add(parent, "div", { class: "src-bar " + cls });
      for (const s of ranked) {
        if (!xs || !xs[s] || !peak) continue;
        const part = add(b, "span", { "data-state": STATES[s] });
        part.style.width = (100 * xs[s] / peak) + "%";
        part.style.background = stateColor(s);
      }
      return b;
    }

    function heat(tr, self, total, peak) {
      const td = add(tr, "td", { class: "src-heat" });
      bar(td, self, peak, "self");
      bar(td, total, peak, "total");
      const s = sum(self, ranked), t = sum(total, ranked);
      add(tr, "td", { class: "src-num" }, s ? time(s) : "");
      add(tr, "td", { class: "src-num total" }, t ? time(t) : "");
      if (self || total) tr.title = "self: " + (split(self) || "none") + "\ntotal: " + (split(total) || "none");
      return s;
    }

    view.functions.forEach((f, i) => {
      const id = "src-" + i;
      const selfN = sum(f.self, ranked), totalN = sum(f.total, ranked);
      const li = add(index, "li");
      const a = add(li, "a", { href: "#" + id }, f.function);
      a.addEventListener("click", (ev) => { ev.preventDefault(); show(f.function, f.file, null); });
      add(li, "span", { class: "src-where" }, " " + f.file + " · self " + time(selfN) + " · total " + time(totalN));

      const block = add(box, "details", { class: "src-fn", id: id, "data-function": f.function, "data-file": f.file });
      if (i < 3) block.open = true;
      const summary = add(block, "summary");
      add(summary, "span", { class: "src-name" }, f.function);
      add(summary, "span", { class: "src-where" }, " " + f.file + " · self " + time(selfN) + " · total " + time(totalN));
      bar(summary, f.self, selfN, "whole");
      const rows = new Map();
      const peak = Math.max(1, ...f.lines.map((l) => Math.max(sum(l[2], ranked), sum(l[3], ranked))));
      const text = new Map(f.lines.map((l) => [l[0], l[1]]));
      const times = new Map(f.lines.map((l) => [l[0], l]));

      if (f.hottest.length) {
        add(block, "div", { class: "src-caption" }, "Hottest lines (self time)");
        const hot = add(add(block, "table", { class: "src src-hot" }), "tbody");
        for (const n of f.hottest) {
          const l = times.get(n);
          const tr = add(hot, "tr", { "data-line": n });
          add(tr, "td", { class: "src-no" }, n);
          heat(tr, l && l[2], l && l[3], peak);
          add(tr, "td", { class: "src-code" }, text.get(n) === null || text.get(n) === undefined ? "" : text.get(n));
          tr.addEventListener("click", () => mark(rows, n));
        }
      }
      if (f.not_shown) add(block, "p", { class: "hint src-missing" }, "source not shown: " + f.not_shown);
      add(block, "div", { class: "src-caption" }, "Lines in file order");
      const body = add(add(block, "table", { class: "src src-file" }), "tbody");
      const head = add(body, "tr", { class: "src-head" });
      for (const h of ["line", "self ▲ total ▼ by state", "self", "total", "source"]) add(head, "th", {}, h);
      let prev = null;
      for (const [n, code, self, total] of f.lines) {
        if (prev !== null && n > prev + 1) add(add(body, "tr", { class: "src-fold" }), "td", { colspan: 5 }, "⋯");
        prev = n;
        const tr = add(body, "tr", { "data-line": n });
        add(tr, "td", { class: "src-no" }, n);
        const s = heat(tr, self, total, peak);
        const td = add(tr, "td", { class: "src-code" }, code === null ? "" : code);
        if (s) td.style.background = "rgba(217,83,79," + (0.08 + 0.32 * s / peak).toFixed(3) + ")";
        rows.set(n, tr);
      }
      blocks.set(keyOf(f.function, f.file), { block, rows });
    });
  }

  function mark(rows, line) {
    for (const tr of document.querySelectorAll("#source-view tr.src-marked")) tr.classList.remove("src-marked");
    const tr = line === null ? null : rows.get(line);
    if (tr) { tr.classList.add("src-marked"); tr.scrollIntoView({ block: "center" }); }
    return tr;
  }

  // The function's block opened and scrolled to, its ``line`` marked when it is shown.
  function show(fn, file, line) {
    const got = blocks.get(keyOf(fn, file));
    if (!got) return false;
    got.block.open = true;
    if (!mark(got.rows, line)) got.block.scrollIntoView({ block: "start" });
    return true;
  }

  const has = (fn, file) => blocks.has(keyOf(fn, file));
  return { draw, has, show };
})();
