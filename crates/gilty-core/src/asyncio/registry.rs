//! Where the target keeps its tasks: `asyncio.tasks._all_tasks` (3.10, 3.11), `_scheduled_tasks` and
//! `_eager_tasks` (3.12+), and the running task per loop in `_current_tasks`. Both the C `_asyncio`
//! module and the pure-Python fallback keep these objects as `asyncio.tasks` globals, so they are
//! found through `sys.modules` the same way whichever implementation runs.

use super::objects::{AsyncReader, Classes};
use crate::object_graph::module_global_in;
use std::io;

/// Largest set table read (2**22 slots: millions of tasks).
const MAX_SET_MASK: u64 = (1 << 22) - 1;

pub struct Registry {
    /// (task, eager) for every registered task (duplicates removed).
    pub tasks: Vec<(u64, bool)>,
    /// (loop, task) pairs of `_current_tasks`.
    pub current: Vec<(u64, u64)>,
}

/// The task and future classes, or None when asyncio was never imported.
pub fn classes(r: &AsyncReader, main_interp: u64) -> io::Result<Option<Classes>> {
    let g = r.graph();
    let get = |m: &str, n: &str| module_global_in(&g, main_interp, m, n);
    let Some(py_task) = get("asyncio.tasks", "_PyTask")? else { return Ok(None) };
    let partial = get("functools", "partial")?.unwrap_or(0);
    let member = |n: &str| if partial == 0 { Ok(None) } else { r.member_offset(partial, n) };
    let (partial_func, partial_args) = (member("func")?.unwrap_or(0), member("args")?.unwrap_or(0));
    Ok(Some(Classes {
        partial,
        partial_func,
        partial_args,
        c_task: get("asyncio.tasks", "_CTask")?.unwrap_or(0),
        py_task,
        c_future: get("asyncio.futures", "_CFuture")?.unwrap_or(0),
        py_future: get("asyncio.futures", "_PyFuture")?.unwrap_or(0),
        gathering_future: get("asyncio.tasks", "_GatheringFuture")?.unwrap_or(0),
    }))
}

/// Keys of a set object (skipping empty and deleted slots).
fn set_keys(r: &AsyncReader, set: u64) -> io::Result<Vec<u64>> {
    let a = r.a;
    let mask = r.ptr(set + a.set_mask)?;
    if mask > MAX_SET_MASK || !(mask + 1).is_power_of_two() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "implausible set size"));
    }
    let table = r.ptr(set + a.set_table)?;
    let raw = r.mem.read_vec(table, ((mask + 1) * a.setentry_size) as usize)?;
    Ok(raw
        .chunks_exact(a.setentry_size as usize)
        .map(|e| u64::from_le_bytes(e[a.setentry_key as usize..][..8].try_into().unwrap()))
        .filter(|&k| k != 0)
        .collect())
}

pub fn read(r: &AsyncReader, main_interp: u64) -> io::Result<Registry> {
    let g = r.graph();
    let get = |n: &str| module_global_in(&g, main_interp, "asyncio.tasks", n);
    let mut tasks = Vec::new();
    // A WeakSet keeps weak references in `self.data`; the referent is `wr_object` (None once dead).
    let weak = get("_scheduled_tasks")?.or(get("_all_tasks")?);
    if let Some(ws) = weak {
        if let Some(data) = g.get_attr(ws, "data")? {
            for wr in set_keys(r, data)? {
                // The set's dummy entry and dead references fail the task test, as does anything else.
                let Ok(obj) = r.ptr(wr + r.a.weakref_object) else { continue };
                if r.kind(obj).map(|k| k.is_task()).unwrap_or(false) {
                    tasks.push((obj, false));
                }
            }
        }
    }
    if let Some(eager) = get("_eager_tasks")? {
        for obj in set_keys(r, eager)? {
            if r.kind(obj).map(|k| k.is_task()).unwrap_or(false) {
                tasks.push((obj, true));
            }
        }
    }
    tasks.sort_unstable();
    tasks.dedup_by_key(|t| t.0);
    let mut current = Vec::new();
    if let Some(cur) = get("_current_tasks")? {
        current = g.dict_items(cur)?;
    }
    Ok(Registry { tasks, current })
}
