//! `gilty specialization`'s native side: `specialization_read_code()` (one code object now) and
//! `specialization_watch()` (sample and follow hot code). Conversions only; gilty-core's
//! `specialization` module does the work.

use crate::load::LoadStop;
use gilty_core::interp::interpreter::{attach, Interpreter};
use gilty_core::specialization::code::{read_identity, read_instructions, CodeIdentity};
use gilty_core::specialization::decode::Instruction;
use gilty_core::specialization::opcode_table;
use gilty_core::specialization::watch::{watch_until, SiteHistory, WatchOptions};
use gilty_core::{Error as CoreError, ErrorKind};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::time::Duration;

use crate::to_py_err;

fn instruction_dict<'py>(
    py: Python<'py>,
    id: &CodeIdentity,
    i: &Instruction,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("offset", i.offset)?;
    d.set_item("opcode", i.opcode)?;
    d.set_item("name", i.name)?;
    d.set_item("oparg", i.oparg)?;
    d.set_item("line", id.line_of(i.unit()))?;
    d.set_item("family", i.family)?;
    d.set_item("form", i.form.map(|f| f.as_str()))?;
    d.set_item("operator", i.operator)?;
    match i.counter {
        Some(c) => {
            d.set_item("counter", c.word)?;
            d.set_item("counter_value", c.value)?;
            d.set_item("backoff", c.backoff)?;
            d.set_item("misses_since_specialized", c.misses_since_specialized)?;
        }
        None => {
            for k in [
                "counter",
                "counter_value",
                "backoff",
                "misses_since_specialized",
            ] {
                d.set_item(k, py.None())?;
            }
        }
    }
    Ok(d)
}

fn identity_into(d: &Bound<'_, PyDict>, id: &CodeIdentity) -> PyResult<()> {
    d.set_item("address", id.address)?;
    d.set_item("qualname", &id.qualname)?;
    d.set_item("filename", &id.filename)?;
    d.set_item("firstlineno", id.firstlineno)?;
    Ok(())
}

fn attach_311(py: Python<'_>, pid: i32) -> PyResult<Interpreter> {
    py.allow_threads(|| attach(pid)).map_err(to_py_err)
}

fn rules_dict<'py>(py: Python<'py>, interp: &Interpreter) -> PyResult<Bound<'py, PyDict>> {
    let t = opcode_table(interp).map_err(to_py_err)?;
    let r = t.counter;
    let d = PyDict::new(py);
    d.set_item("value_shift", r.value_shift)?;
    d.set_item(
        "specialized_start",
        r.specialized_start >> r.specialized_shift,
    )?;
    d.set_item("specialized_shift", r.specialized_shift)?;
    d.set_item("warmup", r.warmup)?;
    d.set_item("quickening_warmup_delay", r.quickening_warmup_delay)?;
    d.set_item("adaptive_start", r.adaptive_start)?;
    d.set_item("max_backoff", r.max_backoff)?;
    Ok(d)
}

/// The code object at `address` in process `pid`, decoded now: identity and every instruction.
#[pyfunction]
fn specialization_read_code<'py>(
    py: Python<'py>,
    pid: i32,
    address: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let interp = attach_311(py, pid)?;
    let table = opcode_table(&interp).map_err(to_py_err)?;
    let l = &interp.layout;
    let read = py.allow_threads(|| {
        let id = read_identity(&interp.mem, l, interp.code_type, address)?;
        let ins = read_instructions(&interp.mem, l, table, &id)?;
        Ok::<_, std::io::Error>((id, ins))
    });
    let (id, ins) = read.map_err(|e| {
        to_py_err(CoreError::new(
            ErrorKind::Internal,
            format!("pid {pid}: no readable code object at {address:#x}: {e}"),
        ))
    })?;
    let out = PyDict::new(py);
    identity_into(&out, &id)?;
    out.set_item("python_version", interp.version_string())?;
    let list = PyList::empty(py);
    for i in &ins {
        list.append(instruction_dict(py, &id, i)?)?;
    }
    out.set_item("instructions", list)?;
    Ok(out)
}

fn history_dict<'py>(py: Python<'py>, h: &SiteHistory) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("reads", h.reads)?;
    d.set_item("forms", h.forms.clone())?;
    d.set_item("names", h.names.clone())?;
    let mut specs: Vec<u32> = h.specializations.values().copied().collect();
    specs.sort_unstable_by(|a, b| b.cmp(a));
    d.set_item("specializations", specs)?;
    d.set_item("counted_misses", h.counted_misses)?;
    d.set_item("changes", h.changes)?;
    d.set_item("rest_reads", h.rest_reads)?;
    d.set_item("rest_specialized", h.rest_specialized)?;
    d.set_item("rest_generic_values", h.rest_generic_values.clone())?;
    Ok(d)
}

/// Samples process `pid` for `duration_s` and follows its hot code objects (see
/// docs/json-format.md). Setting `stop` (a `LoadStop`) ends it early with what was read so far.
#[pyfunction]
#[pyo3(signature = (pid, duration_s, rate_hz = 500.0, read_interval_s = 0.01, max_codes = 200, stop = None))]
fn specialization_watch<'py>(
    py: Python<'py>,
    pid: i32,
    duration_s: f64,
    rate_hz: f64,
    read_interval_s: f64,
    max_codes: usize,
    stop: Option<&LoadStop>,
) -> PyResult<Bound<'py, PyDict>> {
    if !(duration_s > 0.0 && rate_hz > 0.0 && rate_hz <= 20_000.0 && read_interval_s > 0.0)
        || Duration::try_from_secs_f64(duration_s).is_err()
        || Duration::try_from_secs_f64(read_interval_s).is_err()
    {
        return Err(PyValueError::new_err(
            "duration_s, rate_hz (<= 20000) and read_interval_s must be positive and finite",
        ));
    }
    let interp = attach_311(py, pid)?;
    let table = opcode_table(&interp).map_err(to_py_err)?;
    let opts = WatchOptions {
        duration: Duration::from_secs_f64(duration_s),
        rate_hz,
        read_interval: Duration::from_secs_f64(read_interval_s),
        max_codes,
    };
    let flag = stop.map(LoadStop::flag).unwrap_or_default();
    let report = py.allow_threads(|| watch_until(&interp, table, opts, &flag));
    let out = PyDict::new(py);
    out.set_item("pid", pid)?;
    out.set_item("python_version", interp.version_string())?;
    out.set_item("counter_rules", rules_dict(py, &interp)?)?;
    out.set_item("passes", report.passes)?;
    out.set_item("thread_samples", report.thread_samples)?;
    out.set_item("running_samples", report.running_samples)?;
    out.set_item("without_gil_samples", report.without_gil_samples)?;
    out.set_item("unfollowed_samples", report.unfollowed_samples)?;
    out.set_item("read_passes", report.read_passes)?;
    out.set_item("idle_read_passes", report.idle_read_passes)?;
    out.set_item("elapsed_s", report.elapsed_s)?;
    out.set_item("busy_s", report.busy_s)?;
    let codes = PyList::empty(py);
    for w in &report.codes {
        let d = PyDict::new(py);
        identity_into(&d, &w.identity)?;
        d.set_item("samples", w.samples)?;
        d.set_item("reads", w.reads)?;
        d.set_item("gone", w.gone)?;
        let ins = PyList::empty(py);
        for i in w.last.iter().flatten() {
            let id = instruction_dict(py, &w.identity, i)?;
            id.set_item(
                "samples",
                w.samples_by_unit.get(&i.unit()).copied().unwrap_or(0),
            )?;
            match w.sites.get(&i.offset) {
                Some(h) => id.set_item("history", history_dict(py, h)?)?,
                None => id.set_item("history", py.None())?,
            }
            ins.append(id)?;
        }
        d.set_item("instructions", ins)?;
        codes.append(d)?;
    }
    out.set_item("codes", codes)?;
    Ok(out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(specialization_read_code, m)?)?;
    m.add_function(wrap_pyfunction!(specialization_watch, m)?)?;
    register_opcache(m)?;
    Ok(())
}

fn opcache_code_dict<'py>(
    py: Python<'py>,
    c: &gilty_core::specialization::opcache::OpcacheCode,
    samples: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("address", c.address)?;
    d.set_item("qualname", &c.name)?;
    d.set_item("filename", &c.filename)?;
    d.set_item("firstlineno", c.firstlineno)?;
    d.set_item("samples", samples)?;
    d.set_item("has_opcache", c.has_opcache)?;
    d.set_item("opcache_flag", c.flag)?;
    d.set_item("entries", c.entries)?;
    let sites = PyList::empty(py);
    for s in &c.sites {
        let sd = PyDict::new(py);
        sd.set_item("offset", s.offset)?;
        sd.set_item("name", s.name)?;
        sd.set_item("line", s.line)?;
        sd.set_item("state", s.state.as_str())?;
        let left = match s.state {
            gilty_core::specialization::opcache::EntryState::Active(n) => Some(n),
            _ => None,
        };
        sd.set_item("misses_tolerated", left)?;
        sites.append(sd)?;
    }
    d.set_item("sites", sites)?;
    Ok(d)
}

/// Python 3.10's opcache: the code object at `address` now, or (address None) the hot code objects
/// found by sampling `pid` for `duration_s`, at most `max_codes` of them.
#[pyfunction]
#[pyo3(signature = (pid, duration_s = 0.0, rate_hz = 500.0, address = None, max_codes = 50))]
fn specialization_opcache<'py>(
    py: Python<'py>,
    pid: i32,
    duration_s: f64,
    rate_hz: f64,
    address: Option<u64>,
    max_codes: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let interp = attach_311(py, pid)?;
    let Some(oc) = gilty_core::specialization::opcache_layout(&interp) else {
        return Err(to_py_err(CoreError::new(
            ErrorKind::UnsupportedVersion,
            format!(
                "pid {pid} runs Python {}, which has no 3.10 opcache",
                interp.version_string()
            ),
        )));
    };
    let hot: Vec<(u64, u64)> = match address {
        Some(a) => vec![(a, 0)],
        None => py.allow_threads(|| {
            gilty_core::specialization::opcache::hot_code_objects(
                &interp,
                Duration::from_secs_f64(duration_s),
                rate_hz,
            )
        }),
    };
    let out = PyDict::new(py);
    out.set_item("pid", pid)?;
    out.set_item("python_version", interp.version_string())?;
    let codes = PyList::empty(py);
    let mut sampled = 0u64;
    for &(code, samples) in hot.iter().take(max_codes) {
        sampled += samples;
        match py
            .allow_threads(|| gilty_core::specialization::opcache::read_opcache(&interp, oc, code))
        {
            Ok(c) => codes.append(opcache_code_dict(py, &c, samples)?)?,
            Err(e) if address.is_some() => {
                return Err(to_py_err(CoreError::new(
                    ErrorKind::Internal,
                    format!("pid {pid}: no readable code object at {code:#x}: {e}"),
                )))
            }
            Err(_) => {}
        }
    }
    out.set_item("samples", hot.iter().map(|h| h.1).sum::<u64>())?;
    out.set_item("samples_in_listed", sampled)?;
    out.set_item("codes", codes)?;
    Ok(out)
}

pub fn register_opcache(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(specialization_opcache, m)?)?;
    Ok(())
}
