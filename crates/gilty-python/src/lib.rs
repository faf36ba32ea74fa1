//! `gilty._native`: exposes gilty-core's attach, snapshot and sampler to Python. No logic lives
//! here.

use dump::thread_dict;
use gilty_core::exact::histogram::Distribution;
use gilty_core::exact::ExactSummary;
use gilty_core::interp::interpreter::{attach, Interpreter};
use gilty_core::sampling::aggregate::Runs;
use gilty_core::sampling::sampler::{Batch, Sampler as CoreSampler};
use gilty_core::{Error as CoreError, ErrorKind};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::sync::{Arc, Mutex};

mod core_target;
mod dump;
mod faults;
mod flamegraph;
mod gil_monitor;
mod load;
mod memory;
mod modules;
mod process_set;
mod specialization;
mod tasks;
create_exception!(
    _native,
    GiltyError,
    PyException,
    "A user-facing gilty error; `kind` says which."
);

pub(crate) fn to_py_err(e: CoreError) -> PyErr {
    let err = GiltyError::new_err(e.message.clone());
    Python::with_gil(|py| {
        let _ = err.value(py).setattr("kind", e.kind.as_str());
    });
    err
}

fn exited_err(pid: i32) -> PyErr {
    to_py_err(CoreError::new(
        ErrorKind::TargetExited,
        format!("pid {pid} exited"),
    ))
}

/// An attached target. Holds the sampler so `dump()` and `Sampler` share caches.
#[pyclass(module = "gilty._native")]
struct Target {
    inner: Arc<Mutex<CoreSampler>>,
    #[pyo3(get)]
    pid: i32,
    #[pyo3(get)]
    python_version: String,
    #[pyo3(get)]
    executable: String,
    #[pyo3(get)]
    binary: String,
    #[pyo3(get)]
    used_debug_offsets: bool,
    #[pyo3(get)]
    debug_offset_mismatches: Vec<String>,
}

#[pymethods]
impl Target {
    /// Every asyncio task, read twice and kept where both reads agree (docs/asyncio.md):
    /// {"asyncio_imported", "loops": [...], "tasks": [...], "errors": {...}, "pages_read"}.
    fn tasks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let snap = {
            let guard = self.inner.lock().unwrap();
            let interp = &guard.interp;
            py.allow_threads(|| gilty_core::asyncio::read_tasks(interp))
        }
        .map_err(to_py_err)?;
        tasks::snapshot_dict(py, &snap)
    }

    /// Every extension module in `sys.modules` and what it declares about the GIL
    /// (docs/free-threading.md): {"modules": [{"name", "def_name", "init", "gil", "unknown_why",
    /// "path", "builtin"}], "unreadable", "first_error"}.
    fn extension_modules<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let scan = {
            let guard = self.inner.lock().unwrap();
            let interp = &guard.interp;
            py.allow_threads(|| gilty_core::interp::module_slots::scan(interp))
        }
        .map_err(to_py_err)?;
        modules::scan_dict(py, &scan)
    }

    #[new]
    fn new(py: Python<'_>, pid: i32) -> PyResult<Self> {
        let interp: Interpreter = py.allow_threads(|| attach(pid)).map_err(to_py_err)?;
        Ok(Target {
            pid,
            python_version: interp.version_string(),
            executable: interp.executable.clone(),
            binary: interp.binary.clone(),
            used_debug_offsets: interp.used_debug_offsets,
            debug_offset_mismatches: interp.debug_offset_mismatches.clone(),
            inner: Arc::new(Mutex::new(CoreSampler::new(interp, 100.0))),
        })
    }

    /// `sys.getswitchinterval()` of the target, read now.
    #[getter]
    fn switch_interval_s(&self) -> PyResult<f64> {
        let pid = self.pid;
        let s = self.inner.lock().unwrap();
        s.interp.switch_interval_s().map_err(|_| exited_err(pid))
    }

    /// Every thread once: {"t": float, "threads": [{"tid","name","state","syscall","stack"}]}, and
    /// for Python threads "handling_exception" (the type name, or None).
    /// With `locals`, each thread also has "locals" (per frame, innermost first, a list of
    /// (name, is_argument, repr) or None with the frame's error) or "locals_error". With
    /// `positions`, "positions" (per frame, (line, end_line, column, end_column) or None; 3.11+).
    /// With `native`, each thread has "native_stack" (innermost first: ("py", function, file,
    /// line) or ("c", function or None, library or None, offset)) or "native_error"; a target where
    /// kernel sampling is not permitted raises (permission_denied) instead.
    #[pyo3(signature = (locals = false, positions = false, native = false))]
    fn dump<'py>(
        &self,
        py: Python<'py>,
        locals: bool,
        positions: bool,
        native: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let want = gilty_core::interp::locals::Want {
            variables: locals,
            positions,
        };
        let dump = {
            let mut guard = self.inner.lock().unwrap();
            let s: &mut CoreSampler = &mut guard;
            py.allow_threads(|| gilty_core::sampling::dump::dump(s, want, native))
                .map_err(to_py_err)?
        };
        let threads = PyList::empty(py);
        for thread in dump.threads {
            threads.append(thread_dict(py, thread, locals, positions)?)?;
        }
        let out = PyDict::new(py);
        out.set_item("t", dump.t)?;
        out.set_item("threads", threads)?;
        Ok(out)
    }
}

/// Samples a Target at a fixed rate; `collect(seconds)` returns one batch (see
/// docs/json-format.md).
#[pyclass(module = "gilty._native")]
struct Sampler {
    inner: Arc<Mutex<CoreSampler>>,
    /// Functions the exact-mode probes were placed on (empty without exact mode).
    #[pyo3(get)]
    exact_symbols: Vec<String>,
}

#[pymethods]
impl Sampler {
    #[new]
    #[pyo3(signature = (target, rate_hz, exact = false, tasks = false, native = false))]
    fn new(
        py: Python<'_>,
        target: &Target,
        rate_hz: f64,
        exact: bool,
        tasks: bool,
        native: bool,
    ) -> PyResult<Self> {
        if !(rate_hz > 0.0 && rate_hz <= 20_000.0) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "rate_hz must be in (0, 20000]",
            ));
        }
        let symbols = {
            let mut guard = target.inner.lock().unwrap();
            let s: &mut CoreSampler = &mut guard;
            s.set_rate(rate_hz);
            if tasks {
                s.enable_tasks().map_err(to_py_err)?;
            } else {
                s.disable_tasks();
            }
            if native {
                // Perf refused: one line saying what to change, never a silent fallback.
                py.allow_threads(|| s.enable_native())
                    .map_err(|m| to_py_err(CoreError::new(ErrorKind::PermissionDenied, m)))?;
            } else {
                s.disable_native();
            }
            if exact {
                py.allow_threads(|| s.enable_exact()).map_err(to_py_err)?
            } else {
                Vec::new()
            }
        };
        Ok(Sampler {
            inner: Arc::clone(&target.inner),
            exact_symbols: symbols,
        })
    }

    fn collect<'py>(&self, py: Python<'py>, seconds: f64) -> PyResult<Bound<'py, PyDict>> {
        let batch = {
            let mut guard = self.inner.lock().unwrap();
            let s: &mut CoreSampler = &mut guard;
            py.allow_threads(|| s.collect(seconds))
        };
        batch_dict(py, &batch)
    }

    /// Exact summary since the previous call (or the start), tracing going on; None without exact
    /// mode.
    fn exact_window<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let (done, origin) = {
            let mut guard = self.inner.lock().unwrap();
            let s: &mut CoreSampler = &mut guard;
            let origin = s.start_mono_ns();
            (py.allow_threads(|| s.exact_window()), origin)
        };
        match done {
            Some((summary, lost)) => Ok(Some(exact_dict(py, &summary, lost, 0, origin)?)),
            None => Ok(None),
        }
    }

    /// Ends exact tracing and returns its summary (None when exact mode is off). Call once, at the
    /// end.
    fn exact_summary<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let (done, origin) = {
            let mut guard = self.inner.lock().unwrap();
            let s: &mut CoreSampler = &mut guard;
            let origin = s.start_mono_ns();
            (py.allow_threads(|| s.finish_exact()), origin)
        };
        match done {
            Some((summary, lost, threads)) => {
                Ok(Some(exact_dict(py, &summary, lost, threads, origin)?))
            }
            None => Ok(None),
        }
    }
}

/// One `Batch` as the dict `Sampler.collect()` returns (docs/json-format.md, last section).
/// (frame id, line, end line, column, end column, walks): columns None where the table has none.
type PositionRow = (u32, i32, Option<i32>, Option<i32>, Option<i32>, u64);

pub(crate) fn batch_dict<'py>(py: Python<'py>, batch: &Batch) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("times", PyList::new(py, &batch.times)?)?;
    let agg = &batch.aggregate;
    out.set_item("runs", runs_dict(py, &agg.runs)?)?;
    out.set_item("thread_slices", &agg.thread_slices)?;
    let counts: Vec<(i32, u8, i32, u64)> = agg
        .counts
        .entries
        .iter()
        .map(|&((t, s, k), n)| (t, s, k, n))
        .collect();
    out.set_item("counts", counts)?;
    let blame: Vec<(i32, i32, i32, u64)> = agg
        .blame
        .entries
        .iter()
        .map(|&((w, h, k), n)| (w, h, k, n))
        .collect();
    out.set_item("blame", blame)?;
    out.set_item("pass_flags", PyBytes::new(py, &agg.pass_flags))?;
    out.set_item("held_cpu_wait", &agg.held_cpu_wait.entries)?;
    let handling: Vec<(i32, u8, i32, u64)> = agg
        .handling
        .entries
        .iter()
        .map(|&((t, s, k), n)| (t, s, k, n))
        .collect();
    out.set_item("handling", handling)?;
    let stacks = PyDict::new(py);
    for (id, frames) in &batch.new_stacks {
        stacks.set_item(id, PyList::new(py, frames)?)?;
    }
    out.set_item("stacks", stacks)?;
    let frames = PyDict::new(py);
    for (id, f) in &batch.new_frames {
        frames.set_item(id, (f.function.as_str(), f.file.as_str(), f.line))?;
    }
    out.set_item("frames", frames)?;
    let positions: Vec<PositionRow> = batch
        .positions
        .iter()
        .map(|&(id, p, n)| (id, p.line, p.end_line, p.column, p.end_column, n))
        .collect();
    out.set_item("positions", positions)?;
    let threads = PyDict::new(py);
    for (tid, name) in &batch.threads {
        threads.set_item(tid, name)?;
    }
    out.set_item("threads", threads)?;
    let errors = PyDict::new(py);
    errors.set_item("torn_retried", batch.errors.torn_retried)?;
    errors.set_item("torn_dropped", batch.errors.torn_dropped)?;
    errors.set_item("torn_partial", batch.errors.torn_partial)?;
    errors.set_item("read_failed", batch.errors.read_failed)?;
    let e = &batch.errors;
    if e.native_matched + e.native_missing + e.native_lost + e.native_bare > 0 {
        errors.set_item("native_matched", e.native_matched)?;
        errors.set_item("native_partial", e.native_partial)?;
        errors.set_item("native_missing", e.native_missing)?;
        errors.set_item("native_lost", e.native_lost)?;
        errors.set_item("native_missing_moved", e.native_missing_moved)?;
        errors.set_item("native_missing_no_sample", e.native_missing_no_sample)?;
        errors.set_item("native_missing_unmatched", e.native_missing_unmatched)?;
        errors.set_item("native_bare", e.native_bare)?;
    }
    if e.gil_flag_checked > 0 {
        errors.set_item("gil_flag_checked", e.gil_flag_checked)?;
        errors.set_item("gil_flag_disagreed", e.gil_flag_disagreed)?;
    }
    out.set_item("errors", errors)?;
    out.set_item("exited", batch.exited)?;
    out.set_item("late", batch.late)?;
    if let Some(sched) = &batch.sched {
        let d = PyDict::new(py);
        d.set_item("seconds", sched.seconds)?;
        d.set_item("threads", &sched.threads)?;
        if let Some(c) = sched.cgroup {
            d.set_item("cgroup", (c.nr_periods, c.nr_throttled, c.throttled_ns))?;
        }
        out.set_item("sched", d)?;
    }
    if let Some(t) = &batch.tasks {
        out.set_item("tasks", tasks::aggregate_dict(py, t)?)?;
    }
    Ok(out)
}

/// A vector as its native-endian bytes: Python reads it back with `array.frombytes`.
fn ne_bytes<T: Copy, const N: usize>(values: &[T], to_bytes: fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to_bytes(v)).collect()
}

/// Closed runs by (tid, first_pass), column-wise: one `bytes` per field (array typecodes I, B, i,
/// h). Tid and first pass are per thread, in `thread_slices`.
fn runs_dict<'py>(py: Python<'py>, runs: &Runs) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(
        "passes",
        PyBytes::new(py, &ne_bytes(&runs.passes, u32::to_ne_bytes)),
    )?;
    d.set_item("state", PyBytes::new(py, &runs.state))?;
    d.set_item(
        "stack",
        PyBytes::new(py, &ne_bytes(&runs.stack, i32::to_ne_bytes)),
    )?;
    d.set_item(
        "syscall",
        PyBytes::new(py, &ne_bytes(&runs.syscall, i16::to_ne_bytes)),
    )?;
    Ok(d)
}

fn distribution_dict<'py>(py: Python<'py>, d: &Distribution) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let s = |ns: u64| ns as f64 / 1e9;
    out.set_item("count", d.count)?;
    out.set_item("total_s", s(d.total_ns))?;
    out.set_item("p50_s", s(d.p50_ns))?;
    out.set_item("p90_s", s(d.p90_ns))?;
    out.set_item("p99_s", s(d.p99_ns))?;
    out.set_item("max_s", s(d.max_ns))?;
    let hist = PyDict::new(py);
    for (lo, n) in &d.log2_hist_ns {
        hist.set_item(lo, n)?;
    }
    out.set_item("log2_hist_ns", hist)?;
    Ok(out)
}

fn exact_dict<'py>(
    py: Python<'py>,
    summary: &ExactSummary,
    lost: u64,
    threads_attached: usize,
    origin_ns: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("wall_s", summary.wall_ns as f64 / 1e9)?;
    out.set_item(
        "start_s",
        (summary.start_ns as f64 - origin_ns as f64) / 1e9,
    )?;
    out.set_item("events", summary.events)?;
    out.set_item("lost", lost)?;
    out.set_item("threads_attached", threads_attached)?;
    let threads = PyDict::new(py);
    for t in &summary.threads {
        let d = PyDict::new(py);
        d.set_item("hold", distribution_dict(py, &t.hold)?)?;
        d.set_item("wait", distribution_dict(py, &t.wait)?)?;
        d.set_item("acquisitions", t.acquisitions)?;
        d.set_item("handoff_s", t.handoff_ns as f64 / 1e9)?;
        d.set_item("wait_unheld_s", t.wait_unheld_ns as f64 / 1e9)?;
        d.set_item("forced_switches", t.forced_switches)?;
        let blame = PyList::empty(py);
        for b in &t.blame {
            let e = PyDict::new(py);
            e.set_item("holder_tid", b.holder_tid)?;
            e.set_item("wait_s", b.wait_ns as f64 / 1e9)?;
            let fns: Vec<(i64, u64)> = b
                .functions
                .iter()
                .map(|(f, n)| (if *f == u32::MAX { -1 } else { *f as i64 }, *n))
                .collect();
            e.set_item("functions", fns)?;
            blame.append(e)?;
        }
        d.set_item("blame", blame)?;
        threads.set_item(t.tid, d)?;
    }
    out.set_item("threads", threads)?;
    let collections = PyList::empty(py);
    for c in &summary.collections {
        let d = PyDict::new(py);
        d.set_item("tid", c.tid)?;
        d.set_item("generation", c.generation)?;
        d.set_item("start_s", (c.start_ns as f64 - origin_ns as f64) / 1e9)?;
        d.set_item("duration_s", (c.end_ns - c.start_ns) as f64 / 1e9)?;
        d.set_item("collected", c.collected)?;
        d.set_item("open", c.open)?;
        collections.append(d)?;
    }
    out.set_item("collections", collections)?;
    let by_gen = PyDict::new(py);
    for (g, dist) in &summary.gc_by_generation {
        by_gen.set_item(
            g.map(|g| g.to_string())
                .unwrap_or_else(|| "unknown".to_owned()),
            distribution_dict(py, dist)?,
        )?;
    }
    out.set_item("gc_by_generation", by_gen)?;
    Ok(out)
}

#[pyfunction]
fn syscall_name(nr: i64) -> String {
    gilty_core::process::syscalls::name(nr)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("GiltyError", m.py().get_type::<GiltyError>())?;
    m.add_class::<Target>()?;
    m.add_class::<core_target::CoreTarget>()?;
    m.add_class::<Sampler>()?;
    m.add_function(wrap_pyfunction!(syscall_name, m)?)?;
    memory::register(m)?;
    faults::register(m)?;
    load::register(m)?;
    gil_monitor::register(m)?;
    process_set::register(m)?;
    flamegraph::register(m)?;
    specialization::register(m)?;
    Ok(())
}
