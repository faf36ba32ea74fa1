//! `load_run()` and `LoadStop`: gilty-load's open-loop generator for `gilty load`. Conversions
//! only.

use gilty_load::stats::Stats;
use gilty_load::{run, Arrivals, Plan, RequestSpec};
use hdrhistogram::Histogram;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A flag another Python thread (e.g. a signal handler) sets to end a run early.
#[pyclass(module = "gilty._native")]
#[derive(Default)]
pub struct LoadStop {
    flag: Arc<AtomicBool>,
}

#[pymethods]
impl LoadStop {
    #[new]
    fn new() -> Self {
        LoadStop::default()
    }
    fn set(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }
    #[getter]
    fn is_set(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }
}

impl LoadStop {
    /// The flag itself, for the other long native calls a Ctrl-C ends (`specialization_watch`).
    pub(crate) fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.flag)
    }
}

fn quantiles<'py>(py: Python<'py>, h: &Histogram<u64>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let s = |us: u64| us as f64 / 1e6;
    if h.is_empty() {
        for k in ["p50", "p90", "p99", "p99_9", "max", "mean"] {
            d.set_item(k, py.None())?;
        }
        return Ok(d);
    }
    d.set_item("p50", s(h.value_at_quantile(0.5)))?;
    d.set_item("p90", s(h.value_at_quantile(0.9)))?;
    d.set_item("p99", s(h.value_at_quantile(0.99)))?;
    d.set_item("p99_9", s(h.value_at_quantile(0.999)))?;
    d.set_item("max", s(h.max()))?;
    d.set_item("mean", h.mean() / 1e6)?;
    Ok(d)
}

fn seconds_list<'py>(py: Python<'py>, stats: &Stats) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for (i, sec) in stats.seconds.iter().enumerate() {
        let d = PyDict::new(py);
        d.set_item("t", i)?;
        d.set_item("sent", sec.sent)?;
        d.set_item("completed", sec.completed)?;
        d.set_item("errors", sec.errors)?;
        d.set_item("dropped", sec.dropped)?;
        d.set_item("latency_s", quantiles(py, &sec.latency)?)?;
        out.append(d)?;
    }
    Ok(out)
}

/// A plan's seconds as a Duration; NaN, negative or too large for a Duration is a ValueError (one
/// line for the user), not the panic `Duration::from_secs_f64` would raise.
fn seconds(what: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        PyValueError::new_err(format!(
            "{what} must be a number of seconds between 0 and about 1.8e19, not {value}"
        ))
    })
}

/// Runs one open-loop load: `plan` is {"requests": [{"method","url","headers","body","weight"}],
/// "rate", "duration_s", "arrivals": "constant"|"poisson", "seed", "max_in_flight", "timeout_s",
/// "connections", "threads"}. Returns the measured figures (docs/load.md).
#[pyfunction]
#[pyo3(signature = (plan, stop = None))]
pub fn load_run<'py>(
    py: Python<'py>,
    plan: &Bound<'py, PyDict>,
    stop: Option<&LoadStop>,
) -> PyResult<Bound<'py, PyDict>> {
    let get = |k: &str| -> PyResult<Bound<'py, PyAny>> {
        plan.get_item(k)?
            .ok_or_else(|| PyValueError::new_err(format!("load plan has no {k:?}")))
    };
    let mut requests = Vec::new();
    for r in get("requests")?.try_iter()? {
        let r = r?;
        let headers: Vec<(String, String)> = r.get_item("headers")?.extract()?;
        requests.push(RequestSpec {
            method: r.get_item("method")?.extract()?,
            url: r.get_item("url")?.extract()?,
            headers,
            body: r.get_item("body")?.extract()?,
            weight: r.get_item("weight")?.extract()?,
        });
    }
    let arrivals = match get("arrivals")?.extract::<String>()?.as_str() {
        "constant" => Arrivals::Constant,
        "poisson" => Arrivals::Poisson {
            seed: get("seed")?.extract()?,
        },
        other => return Err(PyValueError::new_err(format!("unknown arrivals {other:?}"))),
    };
    let p = Plan {
        requests,
        rate: get("rate")?.extract()?,
        duration: seconds("duration_s", get("duration_s")?.extract()?)?,
        arrivals,
        max_in_flight: get("max_in_flight")?.extract()?,
        timeout: seconds("timeout_s", get("timeout_s")?.extract()?)?,
        connections: get("connections")?.extract()?,
        threads: get("threads")?.extract()?,
    };
    let flag = stop.map(|s| Arc::clone(&s.flag)).unwrap_or_default();
    let result = py
        .allow_threads(|| run(&p, &flag))
        .map_err(PyValueError::new_err)?;
    let st = &result.stats;
    let out = PyDict::new(py);
    out.set_item("requested_rate", p.rate)?;
    out.set_item("window_s", result.window_s)?;
    out.set_item("wall_s", result.wall_s)?;
    out.set_item("stopped", result.stopped)?;
    out.set_item("sent", st.sent)?;
    out.set_item("completed", st.completed)?;
    out.set_item("ok", st.ok)?;
    out.set_item("dropped", st.dropped)?;
    out.set_item("abandoned", result.abandoned)?;
    out.set_item("latency_s", quantiles(py, &st.latency)?)?;
    out.set_item("service_s", quantiles(py, &st.service)?)?;
    let errors = PyDict::new(py);
    for (k, n) in &st.failures {
        errors.set_item(k, n)?;
    }
    out.set_item("errors", errors)?;
    let per = PyList::empty(py);
    for (i, r) in p.requests.iter().enumerate() {
        let d = PyDict::new(py);
        d.set_item("method", &r.method)?;
        d.set_item("url", &r.url)?;
        d.set_item("ok", st.per_request[i].len())?;
        d.set_item("errors", st.per_request_errors[i])?;
        d.set_item("latency_s", quantiles(py, &st.per_request[i])?)?;
        per.append(d)?;
    }
    out.set_item("per_request", per)?;
    out.set_item("seconds", seconds_list(py, st)?)?;
    let seen = st.in_flight_seen.max(1) as f64;
    out.set_item("in_flight_at_arrivals", st.in_flight_sum as f64 / seen)?;
    out.set_item(
        "in_flight_mean",
        if result.window_s > 0.0 {
            st.in_system_s / result.window_s
        } else {
            0.0
        },
    )?;
    let gen = PyDict::new(py);
    gen.set_item("cpu_s", result.cpu_s)?;
    gen.set_item("lag_p99_s", st.lag.value_at_quantile(0.99) as f64 / 1e6)?;
    gen.set_item("lag_max_s", st.lag.max() as f64 / 1e6)?;
    gen.set_item("threads", p.threads)?;
    out.set_item("generator", gen)?;
    Ok(out)
}

pub fn register(m: &Bound<PyModule>) -> PyResult<()> {
    m.add_class::<LoadStop>()?;
    m.add_function(wrap_pyfunction!(load_run, m)?)?;
    Ok(())
}
