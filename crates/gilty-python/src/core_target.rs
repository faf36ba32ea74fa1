//! `_native.CoreTarget`: a core file attached as a target (`gilty dump --core`). Wraps gilty-core's
//! `attach_core` and `dump_core`; the snapshot dict is `Target.dump`'s, plus the lock each thread
//! waits for and the verdicts.

use crate::dump::thread_dict;
use crate::to_py_err;
use gilty_core::interp::interpreter::{attach_core, Interpreter};
use gilty_core::process::core_file::CoreFile;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::sync::Arc;

#[pyclass(module = "gilty._native")]
pub(crate) struct CoreTarget {
    interp: Interpreter,
    #[pyo3(get)]
    pid: i32,
    #[pyo3(get)]
    python_version: String,
    #[pyo3(get)]
    executable: String,
    #[pyo3(get)]
    binary: String,
    #[pyo3(get)]
    core: String,
    /// The command line the core recorded (NT_PRPSINFO, at most 80 bytes), or None.
    #[pyo3(get)]
    command: Option<String>,
}

#[pymethods]
impl CoreTarget {
    #[new]
    #[pyo3(signature = (path, exe = None, sysroot = None))]
    fn new(py: Python<'_>, path: &str, exe: Option<&str>, sysroot: Option<&str>) -> PyResult<Self> {
        let (interp, command) = py
            .allow_threads(|| {
                let core = Arc::new(CoreFile::open(path, exe, sysroot)?);
                let command = core.command.clone();
                Ok((attach_core(core)?, command))
            })
            .map_err(to_py_err)?;
        Ok(CoreTarget {
            pid: interp.pid,
            python_version: interp.version_string(),
            executable: interp.executable.clone(),
            binary: interp.binary.clone(),
            core: path.to_owned(),
            command,
            interp,
        })
    }

    /// `sys.getswitchinterval()` as the core has it.
    #[getter]
    fn switch_interval_s(&self) -> PyResult<f64> {
        self.interp.switch_interval_s().map_err(to_py_err)
    }

    /// As `Target.dump`, plus "diagnosis" (one line per verdict), for each thread blocked
    /// acquiring a lock "waiting_for_lock": {"address", "type", "locked", "owner_tid"}, and for a
    /// thread whose frames could not be walked "stack_error".
    /// With `native`, "native_stack" / "native_error" as `Target.dump` has them, unwound from the
    /// core's registers and stack memory.
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
        let interp = &self.interp;
        let core = py
            .allow_threads(|| gilty_core::sampling::core_dump::dump_core(interp, want, native))
            .map_err(to_py_err)?;
        let threads = PyList::empty(py);
        for thread in core.dump.threads {
            let tid = thread.snapshot.tid;
            let d = thread_dict(py, thread, locals, positions)?;
            if let Some(why) = core.stack_errors.get(&tid) {
                d.set_item("stack_error", why)?;
            }
            if let Some(w) = core.locks.get(&tid) {
                let lock = PyDict::new(py);
                lock.set_item("address", w.address)?;
                lock.set_item("type", &w.kind)?;
                lock.set_item("locked", w.locked)?;
                lock.set_item(
                    "owner_tid",
                    w.owner_ident.and_then(|o| core.owner_tids.get(&o).copied()),
                )?;
                d.set_item("waiting_for_lock", lock)?;
            }
            threads.append(d)?;
        }
        let out = PyDict::new(py);
        out.set_item("t", core.dump.t)?;
        out.set_item("threads", threads)?;
        out.set_item("diagnosis", core.diagnosis)?;
        Ok(out)
    }

    /// Every asyncio task, as `Target.tasks` reads them (once: a core does not change).
    fn tasks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let interp = &self.interp;
        let snap = py
            .allow_threads(|| gilty_core::asyncio::read_tasks(interp))
            .map_err(to_py_err)?;
        crate::tasks::snapshot_dict(py, &snap)
    }
}
