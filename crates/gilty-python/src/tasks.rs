//! `Target.tasks()`: the asyncio snapshot as Python dicts (docs/asyncio.md has the fields).

use gilty_core::asyncio::TasksSnapshot;
use gilty_core::interp::frames::Frame;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use std::collections::HashMap;

pub(crate) fn snapshot_dict<'py>(
    py: Python<'py>,
    snap: &TasksSnapshot,
) -> PyResult<Bound<'py, PyDict>> {
    // Tens of thousands of new containers would set off the cyclic GC dozens of times, each pass
    // walking every object gilty holds; none of them can form a cycle, so it is paused while they
    // are made.
    let gc = py.import("gc")?;
    let was_enabled: bool = gc.call_method0("isenabled")?.extract()?;
    if was_enabled {
        gc.call_method0("disable")?;
    }
    let out = build(py, snap);
    if was_enabled {
        gc.call_method0("enable")?;
    }
    out
}

fn build<'py, 'a>(py: Python<'py>, snap: &'a TasksSnapshot) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("asyncio_imported", snap.asyncio_imported)?;
    let loops = PyList::empty(py);
    for l in &snap.loops {
        let d = PyDict::new(py);
        d.set_item("address", l.address)?;
        d.set_item("type", &l.type_name)?;
        d.set_item("thread_ident", l.thread_ident)?;
        d.set_item("tid", l.tid)?;
        d.set_item("running_task", l.running_task)?;
        loops.append(d)?;
    }
    out.set_item("loops", loops)?;
    // File and function names repeat across thousands of tasks: one Python str each.
    let mut strs: HashMap<&str, Bound<'py, PyString>> = HashMap::new();
    let mut intern_str = |s: &'a str| -> Bound<'py, PyString> {
        strs.entry(s)
            .or_insert_with(|| PyString::new(py, s))
            .clone()
    };
    let mut frames: HashMap<&'a Frame, Bound<'py, PyTuple>> = HashMap::new();
    let tasks = PyList::empty(py);
    for t in &snap.tasks {
        let d = PyDict::new(py);
        d.set_item(intern!(py, "id"), t.id)?;
        d.set_item(intern!(py, "name"), &t.name)?;
        d.set_item(intern!(py, "state"), t.state)?;
        d.set_item(intern!(py, "loop"), t.loop_addr)?;
        d.set_item(intern!(py, "python_impl"), t.python_impl)?;
        d.set_item(intern!(py, "eager"), t.eager)?;
        let stack = PyList::empty(py);
        for f in &t.stack {
            // The same frame recurs in every task parked at the same await: one tuple for all.
            let tuple = match frames.get(f) {
                Some(tuple) => tuple.clone(),
                None => {
                    let tuple = PyTuple::new(
                        py,
                        [
                            intern_str(&f.function).into_any(),
                            intern_str(&f.file).into_any(),
                            f.line.into_pyobject(py)?.into_any(),
                        ],
                    )?;
                    frames.insert(f, tuple.clone());
                    tuple
                }
            };
            stack.append(tuple)?;
        }
        d.set_item(intern!(py, "stack"), stack)?;
        match &t.awaiting {
            Some(a) => {
                let w = PyDict::new(py);
                w.set_item(intern!(py, "kind"), intern_str(&a.kind))?;
                w.set_item(intern!(py, "type"), intern_str(&a.type_name))?;
                w.set_item(intern!(py, "address"), a.address)?;
                d.set_item(intern!(py, "awaiting"), w)?;
            }
            None => d.set_item(intern!(py, "awaiting"), py.None())?,
        }
        d.set_item(intern!(py, "parent"), t.parent)?;
        d.set_item(intern!(py, "parent_via"), t.parent_via)?;
        d.set_item(intern!(py, "waits_for"), &t.waits_for)?;
        tasks.append(d)?;
    }
    out.set_item("tasks", tasks)?;
    let e = PyDict::new(py);
    e.set_item("torn_dropped", snap.errors.torn_dropped)?;
    e.set_item("unreadable", snap.errors.unreadable)?;
    e.set_item("changed", snap.errors.changed)?;
    out.set_item("errors", e)?;
    out.set_item("pages_read", snap.pages_read)?;
    out.set_item("other_frameworks", snap.other_frameworks.clone())?;
    Ok(out)
}

/// One batch's task view (`record --tasks`): {"passes", "counts": [(path, stack, state, await, n)],
/// "paths": {id: [names]}, "awaits": {id: (kind, frame id)}, "lifetimes": [(id, name, first s,
/// last s, samples)], "errors": {...}} (docs/json-format.md, "Batches").
pub(crate) fn aggregate_dict<'py>(
    py: Python<'py>,
    agg: &gilty_core::sampling::task_record::TaskAggregate,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("passes", agg.passes)?;
    out.set_item("reads", agg.reads)?;
    let counts: Vec<(u32, i32, u8, i32, u64)> = agg
        .counts
        .entries
        .iter()
        .map(|&((p, s, st, a), n)| (p, s, st, a, n))
        .collect();
    out.set_item("counts", counts)?;
    let paths = PyDict::new(py);
    for (id, names) in &agg.new_paths {
        paths.set_item(id, names)?;
    }
    out.set_item("paths", paths)?;
    let awaits = PyDict::new(py);
    for (id, kind, frame) in &agg.new_awaits {
        awaits.set_item(id, (kind.as_str(), frame))?;
    }
    out.set_item("awaits", awaits)?;
    out.set_item("lifetimes", &agg.lifetimes)?;
    let e = PyDict::new(py);
    e.set_item("torn_dropped", agg.errors.torn_dropped)?;
    e.set_item("unreadable", agg.errors.unreadable)?;
    e.set_item("changed", agg.errors.changed)?;
    e.set_item("running_unmatched", agg.errors.running_unmatched)?;
    e.set_item("read_failed", agg.errors.read_failed)?;
    out.set_item("errors", e)?;
    Ok(out)
}
