//! `gilty memory`'s native side: `MemoryMonitor` (a process tree measured in background threads),
//! `gc_config()` and `measure_once()`. Conversions only; gilty-core's `memory` module does the
//! work.

use gilty_core::interp::gc_config::{read_gc_config, GcState};
use gilty_core::interp::interpreter::attach;
use gilty_core::memory::measurement::{Output, TreeWatchOptions, TreeWatchStats};
use gilty_core::memory::pass_cost::measure_once as core_measure_once;
use gilty_core::memory::tree_watch::TreeWatch;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::to_py_err;

fn gc_state_into<'py>(d: &Bound<'py, PyDict>, s: &GcState) -> PyResult<()> {
    d.set_item("enabled", s.enabled)?;
    d.set_item("collecting", s.collecting)?;
    d.set_item("thresholds", s.thresholds.to_vec())?;
    d.set_item("counts", s.counts.to_vec())?;
    d.set_item("collections", s.collections.map(|c| c.to_vec()))?;
    d.set_item("frozen_empty", s.frozen_empty())?;
    d.set_item("long_lived_total", s.long_lived_total)?;
    d.set_item("long_lived_pending", s.long_lived_pending)?;
    Ok(())
}

fn output_dict<'py>(py: Python<'py>, o: &Output) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let processes = PyList::empty(py);
    for p in &o.processes {
        let d = PyDict::new(py);
        d.set_item("pid", p.pid)?;
        d.set_item("ppid", p.ppid)?;
        d.set_item("role", p.role.as_str())?;
        d.set_item("cmdline", &p.cmdline)?;
        d.set_item("first_seen", p.first_seen)?;
        d.set_item("exited", p.exited)?;
        d.set_item("python", &p.python)?;
        d.set_item("gc_note", &p.gc_note)?;
        match &p.baseline {
            Some(b) => {
                let bd = PyDict::new(py);
                bd.set_item("t", b.t)?;
                bd.set_item("present_bytes", b.present_bytes)?;
                bd.set_item("shared_bytes", b.shared_bytes)?;
                bd.set_item("mappings", b.mappings)?;
                bd.set_item("scan_s", b.scan_s)?;
                bd.set_item("method", b.method.as_str())?;
                d.set_item("baseline", bd)?;
            }
            None => d.set_item("baseline", py.None())?,
        }
        processes.append(d)?;
    }
    out.set_item("processes", processes)?;

    let samples = PyList::empty(py);
    for s in &o.samples {
        let d = PyDict::new(py);
        let r = &s.rollup;
        d.set_item("pid", s.pid)?;
        d.set_item("pass", s.pass)?;
        d.set_item("t", s.t)?;
        d.set_item("rss", r.rss)?;
        d.set_item("pss", r.pss)?;
        d.set_item("uss", r.uss())?;
        d.set_item("shared_clean", r.shared_clean)?;
        d.set_item("shared_dirty", r.shared_dirty)?;
        d.set_item("private_clean", r.private_clean)?;
        d.set_item("private_dirty", r.private_dirty)?;
        d.set_item("anonymous", r.anonymous)?;
        d.set_item("swap", r.swap)?;
        d.set_item("minflt", s.minflt)?;
        d.set_item("majflt", s.majflt)?;
        match &s.gc {
            Some(g) => {
                let gd = PyDict::new(py);
                gc_state_into(&gd, g)?;
                d.set_item("gc", gd)?;
            }
            None => d.set_item("gc", py.None())?,
        }
        let c = PyDict::new(py);
        c.set_item("stat_s", s.cost.stat_s)?;
        c.set_item("smaps_s", s.cost.smaps_s)?;
        c.set_item("gc_s", s.cost.gc_s)?;
        c.set_item("pagemap_s", s.cost.pagemap_s)?;
        c.set_item("pages_read", s.cost.pages_read)?;
        d.set_item("cost", c)?;
        samples.append(d)?;
    }
    out.set_item("samples", samples)?;

    let steps = PyList::empty(py);
    for s in &o.cow_steps {
        let d = PyDict::new(py);
        d.set_item("pid", s.pid)?;
        d.set_item("t", s.t)?;
        d.set_item("reason", s.reason.as_str())?;
        d.set_item("gc_bytes", s.gc_bytes)?;
        d.set_item("outside_bytes", s.outside_bytes)?;
        d.set_item("ambiguous_bytes", s.ambiguous_bytes)?;
        d.set_item("released_bytes", s.released_bytes)?;
        d.set_item("sole_bytes", s.sole_bytes)?;
        d.set_item("minflt", s.minflt)?;
        d.set_item("scan_s", s.scan_s)?;
        d.set_item("pages_read", s.pages_read)?;
        steps.append(d)?;
    }
    out.set_item("cow_steps", steps)?;

    let windows = PyList::empty(py);
    for w in &o.gc_windows {
        let d = PyDict::new(py);
        d.set_item("pid", w.pid)?;
        d.set_item("start", w.start)?;
        d.set_item("end", w.end)?;
        d.set_item("generation", w.generation)?;
        d.set_item("polls", w.polls)?;
        windows.append(d)?;
    }
    out.set_item("gc_windows", windows)?;

    let snaps = PyList::empty(py);
    for s in &o.gc_snapshots {
        let d = PyDict::new(py);
        d.set_item("pid", s.pid)?;
        d.set_item("t", s.t)?;
        d.set_item("reason", s.reason)?;
        gc_state_into(&d, &s.state)?;
        d.set_item("frozen_objects", s.frozen.objects)?;
        d.set_item("frozen_exact", s.frozen.exact)?;
        d.set_item("frozen_walk_s", s.frozen.walk_ns as f64 / 1e9)?;
        snaps.append(d)?;
    }
    out.set_item("gc_snapshots", snaps)?;

    let facts = PyList::empty(py);
    for f in &o.fork_facts {
        let d = PyDict::new(py);
        d.set_item("pid", f.pid)?;
        d.set_item("t", f.t)?;
        d.set_item("when", f.when)?;
        d.set_item("parent", f.parent)?;
        match &f.share {
            Some(s) => {
                let sd = PyDict::new(py);
                let ps = s.page_size;
                sd.set_item("present_bytes", s.present_pages * ps)?;
                sd.set_item("shared_with_parent_bytes", s.shared_with_parent_pages * ps)?;
                sd.set_item("copied_bytes", s.copied_pages * ps)?;
                sd.set_item("new_bytes", s.new_pages * ps)?;
                sd.set_item("shared_other_bytes", s.shared_other_pages * ps)?;
                sd.set_item(
                    "method",
                    if s.by_pfn {
                        "pagemap_pfn"
                    } else {
                        "pagemap_exclusive_bit"
                    },
                )?;
                sd.set_item("scan_s", s.scan_ns as f64 / 1e9)?;
                d.set_item("share", sd)?;
            }
            None => d.set_item("share", py.None())?,
        }
        d.set_item("modules", f.modules.clone())?;
        facts.append(d)?;
    }
    out.set_item("fork_facts", facts)?;
    out.set_item("notes", o.notes.clone())?;
    out.set_item("master_exited", o.master_exited)?;
    out.set_item("finished", o.finished)?;
    Ok(out)
}

fn stats_dict<'py>(py: Python<'py>, s: &TreeWatchStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("elapsed_s", s.elapsed_s)?;
    d.set_item("passes", s.passes)?;
    d.set_item("trigger_scans", s.trigger_scans)?;
    d.set_item("trigger_scans_skipped", s.trigger_scans_skipped)?;
    d.set_item("tree_scans", s.tree_scans)?;
    d.set_item("tree_scan_s", s.tree_scan_s)?;
    d.set_item("measuring_cpu_s", s.measuring_cpu_s)?;
    let p = &s.poller;
    let g = PyDict::new(py);
    g.set_item("period_s", p.period_ns as f64 / 1e9)?;
    g.set_item("passes", p.passes)?;
    g.set_item("reads", p.reads)?;
    g.set_item("read_errors", p.read_errors)?;
    g.set_item("late_passes", p.late_passes)?;
    g.set_item("max_gap_s", p.max_gap_ns as f64 / 1e9)?;
    g.set_item("elapsed_s", p.elapsed_ns as f64 / 1e9)?;
    g.set_item("cpu_s", p.cpu_ns as f64 / 1e9)?;
    g.set_item("windows", p.windows)?;
    d.set_item("gc_poll", g)?;
    Ok(d)
}

/// Measures a process tree (the master `pid` and its descendants) in background threads.
#[pyclass(module = "gilty._native")]
struct MemoryMonitor {
    inner: Mutex<TreeWatch>,
    #[pyo3(get)]
    pid: i32,
}

#[pymethods]
impl MemoryMonitor {
    #[new]
    #[pyo3(signature = (pid, interval_s = 1.0, gc_poll_s = 0.001, pagemap = true))]
    fn new(
        py: Python<'_>,
        pid: i32,
        interval_s: f64,
        gc_poll_s: f64,
        pagemap: bool,
    ) -> PyResult<Self> {
        if !(0.01..=3600.0).contains(&interval_s) {
            return Err(PyValueError::new_err("interval_s must be in [0.01, 3600]"));
        }
        if !(0.0001..=1.0).contains(&gc_poll_s) {
            return Err(PyValueError::new_err("gc_poll_s must be in [0.0001, 1]"));
        }
        let opts = TreeWatchOptions {
            interval: Duration::from_secs_f64(interval_s),
            gc_poll: Duration::from_secs_f64(gc_poll_s),
            pagemap,
            ..TreeWatchOptions::default()
        };
        let m = py
            .allow_threads(|| TreeWatch::start(pid, opts))
            .map_err(to_py_err)?;
        Ok(MemoryMonitor {
            inner: Mutex::new(m),
            pid,
        })
    }

    /// Waits up to `seconds` (less if the run ends) and returns what was measured meanwhile.
    fn collect<'py>(&self, py: Python<'py>, seconds: f64) -> PyResult<Bound<'py, PyDict>> {
        let out = py.allow_threads(|| {
            let deadline = Instant::now() + Duration::from_secs_f64(seconds.max(0.0));
            loop {
                let done = self.inner.lock().unwrap().finished();
                let now = Instant::now();
                if done || now >= deadline {
                    break;
                }
                std::thread::sleep((deadline - now).min(Duration::from_millis(10)));
            }
            self.inner.lock().unwrap().drain()
        });
        output_dict(py, &out)
    }

    /// The run has ended (the master exited, or `stop()` was called).
    #[getter]
    fn finished(&self) -> bool {
        self.inner.lock().unwrap().finished()
    }

    /// Ends the run (one last measurement of each live process) and returns the cost totals.
    /// Call `collect(0)` afterwards for the last measurements.
    fn stop<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = py.allow_threads(|| self.inner.lock().unwrap().stop());
        stats_dict(py, &stats)
    }
}

/// The GC configuration of a Python process, read from outside.
#[pyfunction]
#[pyo3(signature = (pid, max_frozen = 5_000_000, budget_s = 0.1))]
fn gc_config<'py>(
    py: Python<'py>,
    pid: i32,
    max_frozen: u64,
    budget_s: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let cfg = py
        .allow_threads(|| {
            attach(pid).and_then(|i| {
                read_gc_config(&i, max_frozen, Duration::from_secs_f64(budget_s.max(0.0)))
            })
        })
        .map_err(to_py_err)?;
    let d = PyDict::new(py);
    gc_state_into(&d, &cfg.state)?;
    d.set_item("frozen_objects", cfg.frozen.objects)?;
    d.set_item("frozen_exact", cfg.frozen.exact)?;
    d.set_item("frozen_walk_s", cfg.frozen.walk_ns as f64 / 1e9)?;
    Ok(d)
}

/// One measurement of one process with each part timed (the cost benchmark).
#[pyfunction]
fn measure_once<'py>(py: Python<'py>, pid: i32) -> PyResult<Bound<'py, PyDict>> {
    let c = py
        .allow_threads(|| core_measure_once(pid))
        .map_err(to_py_err)?;
    let d = PyDict::new(py);
    d.set_item("rss", c.rss)?;
    d.set_item("stat_s", c.stat_s)?;
    d.set_item("smaps_s", c.smaps_s)?;
    d.set_item("maps_s", c.maps_s)?;
    d.set_item("gc_s", c.gc_s)?;
    d.set_item("pagemap_baseline_s", c.pagemap_baseline_s)?;
    d.set_item("pagemap_scan_s", c.pagemap_scan_s)?;
    d.set_item("pages_read", c.pages_read)?;
    d.set_item("shared_pages", c.shared_pages)?;
    Ok(d)
}

pub fn register(m: &Bound<PyModule>) -> PyResult<()> {
    m.add_class::<MemoryMonitor>()?;
    m.add_function(wrap_pyfunction!(gc_config, m)?)?;
    m.add_function(wrap_pyfunction!(measure_once, m)?)?;
    Ok(())
}
