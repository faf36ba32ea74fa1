//! `gilty._native`: exposes gilty-core's attach, snapshot and sampler to Python. No logic lives here.

use gilty_core::interpreter::{attach, Interpreter};
use gilty_core::sampler::Sampler as CoreSampler;
use gilty_core::{Error as CoreError, ErrorKind};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::{Arc, Mutex};

create_exception!(_native, GiltyError, PyException, "A user-facing gilty error; `kind` says which.");

fn to_py_err(e: CoreError) -> PyErr {
    let err = GiltyError::new_err(e.message.clone());
    Python::with_gil(|py| {
        let _ = err.value(py).setattr("kind", e.kind.as_str());
    });
    err
}

fn exited_err(pid: i32) -> PyErr {
    to_py_err(CoreError::new(ErrorKind::TargetExited, format!("pid {pid} exited")))
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

    /// Every thread once: {"t": float, "threads": [{"tid","name","state","syscall","stack"}]}.
    fn dump<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let pid = self.pid;
        let (t, snap) = {
            let mut guard = self.inner.lock().unwrap();
            let s: &mut CoreSampler = &mut guard;
            let snap = py.allow_threads(|| s.snapshot());
            (s.elapsed(), snap)
        };
        let snap = snap.map_err(|_| exited_err(pid))?;
        let threads = PyList::empty(py);
        for th in snap {
            let d = PyDict::new(py);
            d.set_item("tid", th.tid)?;
            d.set_item("name", th.name)?;
            d.set_item("state", th.state as u8)?;
            d.set_item("syscall", th.syscall)?;
            let stack = PyList::empty(py);
            for f in th.stack {
                stack.append(PyTuple::new(py, [f.function.into_pyobject(py)?.into_any(), f.file.into_pyobject(py)?.into_any(), f.line.into_pyobject(py)?.into_any()])?)?;
            }
            d.set_item("stack", stack)?;
            threads.append(d)?;
        }
        let out = PyDict::new(py);
        out.set_item("t", t)?;
        out.set_item("threads", threads)?;
        Ok(out)
    }
}

/// Samples a Target at a fixed rate; `collect(seconds)` returns one batch (see docs/json-format.md).
#[pyclass(module = "gilty._native")]
struct Sampler {
    inner: Arc<Mutex<CoreSampler>>,
}

#[pymethods]
impl Sampler {
    #[new]
    fn new(target: &Target, rate_hz: f64) -> PyResult<Self> {
        if !(rate_hz > 0.0 && rate_hz <= 20_000.0) {
            return Err(pyo3::exceptions::PyValueError::new_err("rate_hz must be in (0, 20000]"));
        }
        target.inner.lock().unwrap().set_rate(rate_hz);
        Ok(Sampler { inner: Arc::clone(&target.inner) })
    }

    fn collect<'py>(&self, py: Python<'py>, seconds: f64) -> PyResult<Bound<'py, PyDict>> {
        let batch = {
            let mut guard = self.inner.lock().unwrap();
            let s: &mut CoreSampler = &mut guard;
            py.allow_threads(|| s.collect(seconds))
        };
        let out = PyDict::new(py);
        out.set_item("times", PyList::new(py, &batch.times)?)?;
        let rows = PyList::empty(py);
        for r in &batch.rows {
            rows.append((r.sample, r.tid, r.state as u8, r.stack, r.syscall))?;
        }
        out.set_item("rows", rows)?;
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
        let threads = PyDict::new(py);
        for (tid, name) in &batch.threads {
            threads.set_item(tid, name)?;
        }
        out.set_item("threads", threads)?;
        let errors = PyDict::new(py);
        errors.set_item("torn_retried", batch.errors.torn_retried)?;
        errors.set_item("torn_dropped", batch.errors.torn_dropped)?;
        errors.set_item("read_failed", batch.errors.read_failed)?;
        out.set_item("errors", errors)?;
        out.set_item("exited", batch.exited)?;
        out.set_item("late", batch.late)?;
        Ok(out)
    }
}

#[pyfunction]
fn syscall_name(nr: i64) -> String {
    gilty_core::syscalls::name(nr)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("GiltyError", m.py().get_type::<GiltyError>())?;
    m.add_class::<Target>()?;
    m.add_class::<Sampler>()?;
    m.add_function(wrap_pyfunction!(syscall_name, m)?)?;
    Ok(())
}
