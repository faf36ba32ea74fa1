// gilty HTML report, specialization part (`gilty specialization -o spec.html`): the verdict, the
// per-family table and the hot functions' source annotated per line and instruction by form.
// Drawn only when the page carries a specialization run; built with createElement/textContent like
// report.js (source lines, names and paths come from the target and are never parsed as HTML).
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("gilty-data").textContent);
  const SPEC = DATA.specialization;
  if (!SPEC) return;
  const { el, add } = GILTY_DOM;
  const pct = (x) => (x === null || x === undefined) ? "–" : (100 * x).toFixed(0) + " %";
  const FORMS = [
    ["specialized", "specialized"], ["missing", "specialized, missing"], ["backoff", "adaptive / backoff"],
    ["generic", "generic"], ["warming", "warming"], ["cold", "cold"],
  ];

  // A run of `gilty specialization` alone carries no thread states or stacks: its header says what
  // was read, and the recording's empty sections are hidden.
  if (!DATA.processes.length) {
    document.getElementById("title").textContent = "gilty specialization: " +
      SPEC.processes.map((p) => "pid " + p.pid).join(", ");
    const targets = document.getElementById("targets");
    for (const p of SPEC.processes) add(targets, "div", {}, "pid " + p.pid + " — Python " + p.python_version);
    const summary = document.getElementById("summary");
    summary.textContent = "";
    const item = (k, v) => { const d = add(summary, "div"); add(d, "dt", {}, k); add(d, "dd", {}, v); };
    item("duration", Math.max(0, ...SPEC.processes.map((p) => p.elapsed_s)).toFixed(1) + " s");
    item("running samples", SPEC.processes.reduce((n, p) => n + p.running_samples, 0));
    item("reads of the hot code", SPEC.processes.reduce((n, p) => n + p.reads, 0));
    item("hot code objects", SPEC.processes.reduce((n, p) => n + p.codes, 0));
    for (const id of ["flame-section", "timeline-section", "blame-section", "convoy-section"]) {
      const s = document.getElementById(id);
      if (s) s.hidden = true;
    }
  }

  const section = el("section", { id: "specialization-section" });
  const main = document.querySelector("main");
  main.insertBefore(section, main.firstChild);
  add(section, "h2", {}, "Specialization: which hot instructions stay specialized");
  add(section, "p", { class: "hint" }, "Each specializable instruction's form, read from the target's adaptive bytecode " +
    "over the run; the number is the samples that found a thread executing it. Hover for the counter and the likely cause.");
  const verdict = add(section, "ol", { id: "spec-verdict" });
  if (SPEC.nothing_ran) add(section, "p", { class: "verdict" }, SPEC.nothing_ran);
  else if (SPEC.verdict.length) for (const v of SPEC.verdict) add(verdict, "li", { class: "verdict" }, v);
  else add(section, "p", { class: "verdict" }, "The hot sites stay specialized.");
  if (SPEC.generic_calls && SPEC.generic_calls.length) {
    add(section, "p", { class: "hint" }, "Calls on the generic path, not ranked: their time is the called C function's own work; " +
      "specializing a call saves only the call's overhead.");
    const calls = add(section, "ul", { id: "spec-generic-calls" });
    for (const c of SPEC.generic_calls) add(calls, "li", {}, c);
  }
  for (const [pid, reason] of Object.entries(SPEC.skipped)) add(section, "p", { class: "hint" }, "pid " + pid + " not read: " + reason);
  for (const n of SPEC.notes) add(section, "p", { class: "hint" }, n);

  const legend = add(section, "div", { class: "legend", id: "spec-legend" });
  for (const [cls, label] of FORMS) add(legend, "span", { class: "ins " + cls }, label);

  if (SPEC.families.length) {
    add(section, "h3", {}, "Per family");
    const t = add(section, "table", { id: "spec-families" });
    const hr = add(t, "tr");
    for (const h of ["family", "sites", "samples", "on specialized", "slow path", "missing", "backoff", "cold"])
      add(hr, "th", { class: h === "family" ? "name" : "" }, h);
    for (const g of SPEC.families) {
      const tr = add(t, "tr");
      add(tr, "td", { class: "name" }, g.key);
      add(tr, "td", {}, g.sites);
      add(tr, "td", {}, g.samples);
      add(tr, "td", {}, pct(g.specialized_share));
      add(tr, "td", {}, pct(g.slow_share));
      add(tr, "td", {}, g.missing);
      add(tr, "td", {}, g.backoff);
      add(tr, "td", {}, g.cold);
    }
  }

  for (const f of SPEC.functions) {
    const box = add(section, "div", { class: "spec-function" });
    const h = add(box, "h3", {}, f.qualname + " ");
    add(h, "small", {}, f.filename + (SPEC.processes.length > 1 ? " (pid " + f.pid + ")" : "") + " — " + f.samples + " samples");
    if (f.source_not_shown) add(box, "p", { class: "note" }, "source not shown: " + f.source_not_shown);
    const t = add(box, "table", { class: "spec-src" });
    for (const line of f.lines) {
      const tr = add(t, "tr", { "data-line": line.no });
      add(tr, "td", { class: "no" }, line.no);
      add(tr, "td", { class: "code" }, line.text);
      const cell = add(tr, "td", { class: "chips" });
      for (const s of line.sites) {
        const chip = add(cell, "span", { class: "ins " + s.class, "data-form": s.form }, s.name + " " + s.samples);
        chip.title = s.name + " (" + s.form + (s.slow === null ? "" : ", slow path ~" + pct(s.slow)) + "); " + s.counter +
          (s.cause ? "; likely cause: " + s.cause : "");
      }
    }
  }
})();
