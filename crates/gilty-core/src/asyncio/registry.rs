//! Where the target keeps its tasks: `asyncio.tasks._all_tasks` (3.10, 3.11), `_scheduled_tasks`
//! and `_eager_tasks` (3.12+), and the running task per loop in `_current_tasks`. Both the C
//! `_asyncio` module and the pure-Python fallback keep these objects as `asyncio.tasks` globals, so
//! they are found through `sys.modules` the same way whichever implementation runs.
//!
//! 3.14+ keeps C tasks (`_asyncio.Task` and subclasses) out of those: each thread state holds a
//! circular list of its thread's tasks and its running loop and task; a thread that exits hands its
//! list to the interpreter state. The module-level registries then hold pure-Python tasks only (a
//! program that blocks `_asyncio`).

use super::objects::{AsyncReader, Classes};
use crate::interp::object_graph::module_global_in;
use std::io;

/// Largest set table read (2**22 slots: millions of tasks).
const MAX_SET_MASK: u64 = (1 << 22) - 1;
/// Longest task list followed (3.14+); longer is taken as a list changed under us.
const MAX_LIST_TASKS: usize = 1 << 22;
/// Thread states followed (3.14+).
const MAX_THREADS: usize = 1 << 16;

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
    let Some(py_task) = get("asyncio.tasks", "_PyTask")? else {
        return Ok(None);
    };
    let partial = get("functools", "partial")?.unwrap_or(0);
    let member = |n: &str| {
        if partial == 0 {
            Ok(None)
        } else {
            r.member_offset(partial, n)
        }
    };
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
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "implausible set size",
        ));
    }
    let table = r.ptr(set + a.set_table)?;
    let raw = r
        .mem
        .read_vec(table, ((mask + 1) * a.setentry_size) as usize)?;
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
                // The set's dummy entry and dead references fail the task test, as does anything
                // else.
                let Ok(obj) = r.ptr(wr + r.a.weakref_object) else {
                    continue;
                };
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
    if r.a.task_node.is_some() {
        thread_lists(r, main_interp, &mut tasks, &mut current)?;
        tasks.sort_unstable();
        tasks.dedup_by_key(|t| t.0);
    }
    Ok(Registry { tasks, current })
}

/// 3.14+: the C tasks on every thread state's list and on the interpreter's (exited threads'), and
/// each thread's running (loop, task).
fn thread_lists(
    r: &AsyncReader,
    interp: u64,
    tasks: &mut Vec<(u64, bool)>,
    current: &mut Vec<(u64, u64)>,
) -> io::Result<()> {
    let a = r.a;
    let l = r.l;
    let (Some(ts_head), Some(ts_loop), Some(ts_task), Some(is_head)) = (
        a.tstate_asyncio_tasks_head,
        a.tstate_asyncio_running_loop,
        a.tstate_asyncio_running_task,
        a.interp_asyncio_tasks_head,
    ) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "no task-list offsets for this version",
        ));
    };
    list_tasks(r, interp + is_head, tasks)?;
    let mut ts = r.ptr(interp + l.interp_threads_head)?;
    for _ in 0..MAX_THREADS {
        if ts == 0 {
            return Ok(());
        }
        list_tasks(r, ts + ts_head, tasks)?;
        let (lp, task) = (r.ptr(ts + ts_loop)?, r.ptr(ts + ts_task)?);
        if lp != 0 && task != 0 {
            current.push((lp, task));
        }
        ts = r.ptr(ts + l.tstate_next)?;
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "implausibly many thread states",
    ))
}

/// The tasks on one circular list (`head` is the list's own node, not a task's).
fn list_tasks(r: &AsyncReader, head: u64, tasks: &mut Vec<(u64, bool)>) -> io::Result<()> {
    let (Some(node_off), Some(next_off)) = (r.a.task_node, r.a.llist_next) else {
        return Ok(());
    };
    let mut node = r.ptr(head + next_off)?;
    if node == 0 {
        // a list not set up yet (a thread state being made)
        return Ok(());
    }
    for _ in 0..MAX_LIST_TASKS {
        // an empty list points at itself
        if node == head {
            return Ok(());
        }
        if node == 0 || node < node_off {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "task list changed under us",
            ));
        }
        let task = node - node_off;
        if !r.kind(task).map(|k| k.is_task()).unwrap_or(false) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "task list changed under us",
            ));
        }
        tasks.push((task, false));
        node = r.ptr(node + next_off)?;
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "implausibly long task list",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::memory::{BufferMemory, Garbage};

    const BASE: u64 = 0x10000;

    fn put(m: &mut BufferMemory, addr: u64, v: u64) {
        let off = (addr - BASE) as usize;
        m.bytes[off..off + 8].copy_from_slice(&v.to_le_bytes());
    }

    /// An interpreter with one thread state: two tasks on the thread's list (one running on a
    /// loop), one on the interpreter's (its thread exited). The lists are read whole, with the
    /// running pair.
    #[test]
    fn thread_and_interpreter_lists() {
        for minor in [14u8, 15] {
            let l = gilty_layouts::layout_for(3, minor).unwrap();
            let a = gilty_layouts::asyncio_layout_for(3, minor).unwrap();
            let (node, next) = (a.task_node.unwrap(), a.llist_next.unwrap());
            let mut m = BufferMemory {
                base: BASE,
                bytes: vec![0; 1 << 16],
            };
            let (interp, ts, task_type, name) = (BASE, BASE + 0x4000, BASE + 0x8000, BASE + 0x9000);
            let tasks = [BASE + 0xa000, BASE + 0xa400, BASE + 0xa800];
            m.bytes[(name - BASE) as usize..][..5].copy_from_slice(b"Task\0");
            put(&mut m, task_type + l.type_name, name);
            for &t in &tasks {
                put(&mut m, t + l.object_type, task_type);
            }
            // circular lists: head -> t0 -> t1 -> head on the thread, head -> t2 -> head on the
            // interpreter
            let th = ts + a.tstate_asyncio_tasks_head.unwrap();
            put(&mut m, th + next, tasks[0] + node);
            put(&mut m, tasks[0] + node + next, tasks[1] + node);
            put(&mut m, tasks[1] + node + next, th);
            let ih = interp + a.interp_asyncio_tasks_head.unwrap();
            put(&mut m, ih + next, tasks[2] + node);
            put(&mut m, tasks[2] + node + next, ih);
            put(&mut m, interp + l.interp_threads_head, ts);
            put(
                &mut m,
                ts + a.tstate_asyncio_running_loop.unwrap(),
                BASE + 0xc000,
            );
            put(
                &mut m,
                ts + a.tstate_asyncio_running_task.unwrap(),
                tasks[1],
            );
            let classes = Classes {
                c_task: task_type,
                ..Default::default()
            };
            let r = AsyncReader::new(&m, l, a, classes, None);
            let (mut got, mut current) = (Vec::new(), Vec::new());
            thread_lists(&r, interp, &mut got, &mut current).unwrap();
            got.sort_unstable();
            assert_eq!(
                got,
                tasks.iter().map(|&t| (t, false)).collect::<Vec<_>>(),
                "3.{minor}"
            );
            assert_eq!(current, vec![(BASE + 0xc000, tasks[1])]);
            // a node whose next was cleared under us (the task finished) is an error, not a short
            // list
            put(&mut m, tasks[0] + node + next, 0);
            let r = AsyncReader::new(&m, l, a, classes, None);
            assert!(thread_lists(&r, interp, &mut Vec::new(), &mut Vec::new()).is_err());
        }
    }

    /// Garbage memory: an error or a bounded list, never a hang.
    #[test]
    fn garbage_lists_are_bounded() {
        let mut garbage = Garbage::new(0x9e37_79b9_7f4a_7c15);
        for minor in [14u8, 15] {
            let l = gilty_layouts::layout_for(3, minor).unwrap();
            let a = gilty_layouts::asyncio_layout_for(3, minor).unwrap();
            for _ in 0..20 {
                let m = garbage.buffer();
                let classes = Classes {
                    c_task: Garbage::BASE + 0x100,
                    ..Default::default()
                };
                let r = AsyncReader::new(&m, l, a, classes, None);
                for _ in 0..50 {
                    let addr = Garbage::BASE + garbage.next_word() % Garbage::LEN / 8 * 8;
                    let mut got = Vec::new();
                    let _ = thread_lists(&r, addr, &mut got, &mut Vec::new());
                    assert!(got.len() <= MAX_LIST_TASKS * 2);
                }
            }
        }
    }
}
