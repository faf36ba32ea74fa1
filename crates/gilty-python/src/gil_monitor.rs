//! `GilMonitor`: the in-process monitor. A native thread reads this very process's GIL and thread
//! states the way the sampler reads another process, and never takes the GIL to do it, so measuring
//! does not create the contention it reports. Conversions only; gilty-core does the reading.

use gilty_core::clock::thread_cpu_ns;
use gilty_core::interp::interpreter::attach;
use gilty_core::sampling::classify::ThreadState;
use gilty_core::sampling::gil_stats::{GilStats, STATES};
use gilty_core::sampling::sampler::Sampler;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::to_py_err;

/// How often threads that exited more than a minute ago are forgotten.
const RETAIN_EVERY: Duration = Duration::from_secs(1);

struct Shared {
    stats: Mutex<GilStats>,
    stop: AtomicBool,
    started: Instant,
    /// Nanoseconds of CPU the monitor thread spent (its own cost, reported with the stats).
    cpu_ns: AtomicU64,
    failure: Mutex<Option<String>>,
}

#[pyclass(module = "gilty._native")]
pub struct GilMonitor {
    shared: Arc<Shared>,
    handle: Mutex<Option<JoinHandle<()>>>,
    #[pyo3(get)]
    interval_s: f64,
}

fn run(shared: Arc<Shared>, mut sampler: Sampler, period: Duration) {
    // SAFETY: gettid has no preconditions.
    let own_tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    sampler.ignore_thread(own_tid);
    let mut next = Instant::now();
    let mut last: Option<Instant> = None;
    let mut last_retain = Instant::now();
    while !shared.stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        let taken = Instant::now();
        match sampler.states_once() {
            Ok(snap) => {
                // A pass stands for the time since the previous one, capped so a stall is not one
                // huge pass.
                let weight = last
                    .map(|l| (taken - l).min(period * 10))
                    .unwrap_or(period)
                    .as_secs_f64();
                last = Some(taken);
                let states: Vec<(i32, String, ThreadState)> =
                    snap.into_iter().filter(|t| t.0 != own_tid).collect();
                let t = (taken - shared.started).as_secs_f64();
                let mut stats = shared.stats.lock().unwrap();
                stats.add_pass(t, weight, &states);
                if last_retain.elapsed() >= RETAIN_EVERY {
                    stats.retain(t);
                    last_retain = Instant::now();
                }
            }
            Err(e) => {
                *shared.failure.lock().unwrap() = Some(format!("the monitor stopped: {e}"));
                break;
            }
        }
        shared.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
        next += period;
        let now = Instant::now();
        if next < now {
            next = now; // overran: skip the missed slots rather than burst
        }
    }
}

#[pymethods]
impl GilMonitor {
    /// Attaches to this process and starts the monitor thread, one pass every `interval_s`.
    #[new]
    fn new(py: Python<'_>, interval_s: f64) -> PyResult<Self> {
        if !(1e-4..=60.0).contains(&interval_s) {
            return Err(PyValueError::new_err(
                "interval must be between 0.0001 and 60 seconds",
            ));
        }
        let pid = std::process::id() as i32;
        let interp = py.allow_threads(|| attach(pid)).map_err(to_py_err)?;
        let sampler = Sampler::new(interp, 1.0 / interval_s);
        let shared = Arc::new(Shared {
            stats: Mutex::new(GilStats::default()),
            stop: AtomicBool::new(false),
            started: Instant::now(),
            cpu_ns: AtomicU64::new(0),
            failure: Mutex::new(None),
        });
        let worker = Arc::clone(&shared);
        let period = Duration::from_secs_f64(interval_s);
        let handle = std::thread::Builder::new()
            .name("gilty-monitor".into())
            .spawn(move || run(worker, sampler, period))
            .map_err(|e| {
                PyRuntimeError::new_err(format!("cannot start the monitor thread: {e}"))
            })?;
        Ok(GilMonitor {
            shared,
            handle: Mutex::new(Some(handle)),
            interval_s,
        })
    }

    /// Stops the monitor thread (idempotent). Its figures stay readable.
    fn stop(&self, py: Python<'_>) {
        self.shared.stop.store(true, Ordering::Relaxed);
        let handle = self.handle.lock().unwrap().take();
        if let Some(h) = handle {
            py.allow_threads(|| {
                let _ = h.join();
            });
        }
    }

    #[getter]
    fn running(&self) -> bool {
        self.handle
            .lock()
            .unwrap()
            .as_ref()
            .map(|h| !h.is_finished())
            .unwrap_or(false)
    }

    /// {"elapsed_s", "passes", "monitor_cpu_s", "failure", "threads": [{tid, name, total: [6
    /// counts], total_s: [6 seconds], windows: {w: [6 counts]}}]}; states in gilty's state-code
    /// order.
    #[pyo3(signature = (windows = vec![1, 10, 60]))]
    fn stats<'py>(&self, py: Python<'py>, windows: Vec<u64>) -> PyResult<Bound<'py, PyDict>> {
        let elapsed = self.shared.started.elapsed().as_secs_f64();
        let (passes, threads) = {
            let stats = self.shared.stats.lock().unwrap();
            (stats.passes(), stats.snapshot(elapsed, &windows))
        };
        let out = PyDict::new(py);
        out.set_item("elapsed_s", elapsed)?;
        out.set_item("passes", passes)?;
        out.set_item(
            "monitor_cpu_s",
            self.shared.cpu_ns.load(Ordering::Relaxed) as f64 / 1e9,
        )?;
        out.set_item("failure", self.shared.failure.lock().unwrap().clone())?;
        let list = PyList::empty(py);
        for t in threads {
            let d = PyDict::new(py);
            d.set_item("tid", t.tid)?;
            d.set_item("name", t.name)?;
            d.set_item("total", t.total.to_vec())?;
            d.set_item("total_s", t.total_s.to_vec())?;
            let w = PyDict::new(py);
            for (secs, c) in &t.windows {
                w.set_item(secs, c.counts.to_vec())?;
            }
            d.set_item("windows", w)?;
            list.append(d)?;
        }
        out.set_item("threads", list)?;
        out.set_item("states", STATES)?;
        Ok(out)
    }
}

impl Drop for GilMonitor {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

pub fn register(m: &Bound<PyModule>) -> PyResult<()> {
    m.add_class::<GilMonitor>()
}
