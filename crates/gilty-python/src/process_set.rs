//! `_native.ProcessSet`: several processes (a server's master and workers) sampled on one schedule.

use crate::{batch_dict, to_py_err};
use gilty_core::sampling::process_set::{Event, ProcessSet as CoreSet};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::sync::Mutex;

#[pyclass(module = "gilty._native")]
struct ProcessSet {
    inner: Mutex<CoreSet>,
}

fn event_dict<'py>(py: Python<'py>, e: &Event) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    match e {
        Event::Attached {
            pid,
            ppid,
            t,
            cmdline,
            python_version,
            executable,
            switch_interval_s,
        } => {
            d.set_item("kind", "attached")?;
            d.set_item("pid", pid)?;
            d.set_item("ppid", ppid)?;
            d.set_item("t", t)?;
            d.set_item("cmdline", cmdline)?;
            d.set_item("python_version", python_version)?;
            d.set_item("executable", executable)?;
            d.set_item("switch_interval_s", switch_interval_s)?;
        }
        Event::Exited { pid, t } => {
            d.set_item("kind", "exited")?;
            d.set_item("pid", pid)?;
            d.set_item("t", t)?;
        }
        Event::Skipped {
            pid,
            ppid,
            t,
            reason,
        } => {
            d.set_item("kind", "skipped")?;
            d.set_item("pid", pid)?;
            d.set_item("ppid", ppid)?;
            d.set_item("t", t)?;
            d.set_item("reason", reason)?;
        }
    }
    Ok(d)
}

#[pymethods]
impl ProcessSet {
    /// Attaches to `pids` (and, with `follow`, every Python descendant, now and later).
    #[new]
    #[pyo3(signature = (pids, rate_hz, follow = false, tasks = false, native = false))]
    fn new(
        py: Python<'_>,
        pids: Vec<i32>,
        rate_hz: f64,
        follow: bool,
        tasks: bool,
        native: bool,
    ) -> PyResult<Self> {
        if !(rate_hz > 0.0 && rate_hz <= 20_000.0) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "rate_hz must be in (0, 20000]",
            ));
        }
        let mut set = py
            .allow_threads(|| CoreSet::new(&pids, rate_hz, follow))
            .map_err(to_py_err)?;
        if tasks {
            set.enable_tasks();
        }
        if native {
            // Perf refused: one line saying what to change, as for one process.
            py.allow_threads(|| set.enable_native()).map_err(|m| {
                to_py_err(gilty_core::Error::new(
                    gilty_core::ErrorKind::PermissionDenied,
                    m,
                ))
            })?;
        }
        Ok(ProcessSet {
            inner: Mutex::new(set),
        })
    }

    /// Pids sampled now.
    #[getter]
    fn pids(&self) -> Vec<i32> {
        self.inner.lock().unwrap().pids()
    }

    /// Seconds since the set was created (the clock of every `times` entry and event).
    fn elapsed(&self) -> f64 {
        self.inner.lock().unwrap().elapsed()
    }

    /// Samples for up to `seconds`: {"batches": {pid: batch}, "events": [...], "finished": bool}.
    fn collect<'py>(&self, py: Python<'py>, seconds: f64) -> PyResult<Bound<'py, PyDict>> {
        let got = {
            let mut guard = self.inner.lock().unwrap();
            let s: &mut CoreSet = &mut guard;
            py.allow_threads(|| s.collect(seconds))
        };
        let batches = PyDict::new(py);
        for (pid, batch) in &got.batches {
            batches.set_item(pid, batch_dict(py, batch)?)?;
        }
        let events = PyList::empty(py);
        for e in &got.events {
            events.append(event_dict(py, e)?)?;
        }
        let out = PyDict::new(py);
        out.set_item("batches", batches)?;
        out.set_item("events", events)?;
        out.set_item("finished", got.finished)?;
        Ok(out)
    }
}

pub fn register(m: &Bound<PyModule>) -> PyResult<()> {
    m.add_class::<ProcessSet>()?;
    Ok(())
}
