// gilty HTML report, tasks part (`gilty record --tasks`): per process, the longest-lived asyncio tasks
// and the most-awaited sites, with what the task samples were doing. Drawn only when a process
// carries a task view; built with createElement/textContent like report.js.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("gilty-data").textContent);
  const procs = (DATA.processes || []).filter((p) => p.tasks);
  if (!procs.length) return;
  const { el, add } = GILTY_DOM;
  const secs = (s) => (s < 1 ? (1000 * s).toFixed(1) + " ms" : s.toFixed(2) + " s");
  const pct = (x) => (100 * x).toFixed(1) + " %";
  const section = el("section", { id: "tasks-section" });
  const main = document.querySelector("main");
  main.appendChild(section);
  add(section, "h2", {}, "Tasks");
  add(section, "p", { class: "hint" }, "Every asyncio task, read in each sampling pass (every Nth pass when a read " +
    "would cost more than a quarter of the period; each read then stands for N passes). Task-seconds add up over " +
    "tasks that wait at the same time; a running task is charged with its thread's state.");
  function table(parent, head, rows) {
    const t = add(parent, "table", {});
    const tr = add(add(t, "thead", {}), "tr", {});
    for (const h of head) add(tr, "th", {}, h);
    const body = add(t, "tbody", {});
    for (const r of rows) {
      const row = add(body, "tr", {});
      for (const c of r) add(row, "td", {}, c);
    }
    return t;
  }
  for (const p of procs) {
    const d = p.tasks;
    const box = add(section, "div", { class: "tasks-process" });
    if (procs.length > 1 || DATA.processes.length > 1) add(box, "h3", {}, d.label);
    const states = Object.entries(d.state_seconds).sort((a, b) => b[1] - a[1]);
    add(box, "p", {}, d.mean_tasks + " tasks per pass over " + d.passes + " passes (" + d.reads + " task reads); task-seconds: " +
      states.map(([k, v]) => k + " " + secs(v)).join(", ") + ".");
    const errs = Object.entries(d.errors).filter(([, v]) => v > 0);
    if (errs.length) add(box, "p", { class: "hint" }, "Dropped reads: " + errs.map(([k, v]) => k + " " + v).join(", ") + ".");
    add(box, "h3", {}, "Most-awaited sites");
    table(box, ["awaiting", "site", "task-seconds", "share of task samples"],
      d.await_sites.map((s) => [s.kind, s.function + " (" + s.file + ":" + s.line + ")", secs(s.seconds), pct(s.share)]));
    add(box, "h3", {}, "Longest-lived tasks");
    table(box, ["task", "seen from", "to", "lifetime", "samples"],
      d.longest_lived.map((t) => [t.name, secs(t.first_s), secs(t.last_s), secs(t.lifetime_s), String(t.samples)]));
  }
})();
