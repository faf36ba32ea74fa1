//! `gilty memory --faults`'s native side: `FaultWatch`, the workers' minor page faults sampled and
//! joined with their Python stacks (gilty-core's `memory::faults` does the work).

use gilty_core::memory::faults::{FaultReport, FaultWatch as CoreWatch};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::Mutex;

use crate::to_py_err;
use gilty_core::{Error as CoreError, ErrorKind};

fn report_dict<'py>(py: Python<'py>, r: &FaultReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("period", r.period)?;
    d.set_item("page_size", r.page_size)?;
    d.set_item("method", if r.by_pfn { "pfn" } else { "exclusive" })?;
    d.set_item("samples", r.samples)?;
    d.set_item("copied", r.copied)?;
    d.set_item("other", r.other)?;
    d.set_item("no_stack", r.no_stack)?;
    d.set_item("lost", r.lost)?;
    d.set_item("lag_p50_s", r.lag_p50_ns as f64 / 1e9)?;
    d.set_item("lag_p99_s", r.lag_p99_ns as f64 / 1e9)?;
    d.set_item("lag_max_s", r.lag_max_ns as f64 / 1e9)?;
    d.set_item("late", r.late)?;
    d.set_item("elapsed_s", r.elapsed_ns as f64 / 1e9)?;
    d.set_item("cpu_s", r.cpu_ns as f64 / 1e9)?;
    d.set_item("stack_reads", r.stack_reads)?;
    d.set_item("stack_failures", r.stack_failures)?;
    d.set_item("workers", r.workers.clone())?;
    let errors = PyList::empty(py);
    for (pid, e) in &r.errors {
        errors.append((pid, e))?;
    }
    d.set_item("errors", errors)?;
    let rows = PyList::empty(py);
    for row in &r.rows {
        let rd = PyDict::new(py);
        rd.set_item("pid", row.pid)?;
        let frames = PyList::empty(py);
        for f in &row.frames {
            frames.append(PyTuple::new(
                py,
                [
                    f.function.clone().into_pyobject(py)?.into_any(),
                    f.file.clone().into_pyobject(py)?.into_any(),
                    f.line.into_pyobject(py)?.into_any(),
                ],
            )?)?;
        }
        rd.set_item("frames", frames)?;
        rd.set_item("gc", row.gc)?;
        rd.set_item("c_function", &row.c_function)?;
        rd.set_item("samples", row.samples)?;
        rows.append(rd)?;
    }
    d.set_item("rows", rows)?;
    Ok(d)
}

/// Samples the minor page faults of every worker below a master in a thread of its own.
#[pyclass(module = "gilty._native")]
struct FaultWatch {
    inner: Mutex<Option<CoreWatch>>,
}

#[pymethods]
impl FaultWatch {
    #[new]
    #[pyo3(signature = (pid, period = 1))]
    fn new(py: Python<'_>, pid: i32, period: u64) -> PyResult<Self> {
        if !(1..=1_000_000).contains(&period) {
            return Err(PyValueError::new_err("period must be in [1, 1000000]"));
        }
        let w = py.allow_threads(|| {
            let w = CoreWatch::start(pid, period);
            let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !w.ready() && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            w
        });
        // Not one event could be opened and one could not: perf events are refused here (a tree
        // without workers yet is fine: they are looked for all along).
        let started = w.started();
        if started.events == 0 {
            if let Some((_, why)) = started.errors.first() {
                let why = why.clone();
                py.allow_threads(|| drop(w.stop()));
                return Err(to_py_err(CoreError::new(
                    ErrorKind::PermissionDenied,
                    format!("--faults: {why}"),
                )));
            }
        }
        Ok(FaultWatch {
            inner: Mutex::new(Some(w)),
        })
    }

    /// Ends sampling and returns what was sampled (None if already stopped).
    fn stop<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let w = self.inner.lock().unwrap().take();
        match w {
            Some(w) => {
                let r = py.allow_threads(|| w.stop());
                Ok(Some(report_dict(py, &r)?))
            }
            None => Ok(None),
        }
    }
}

pub fn register(m: &Bound<PyModule>) -> PyResult<()> {
    m.add_class::<FaultWatch>()?;
    Ok(())
}
