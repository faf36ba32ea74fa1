//! What each task awaits, and who awaits whom.
//!
//! Before 3.14 CPython keeps no "awaited by" links, so they are rebuilt from what the objects hold:
//! - a task whose `_fut_waiter` is another task awaits it directly;
//! - a task whose `_fut_waiter` is a gather's `_GatheringFuture` awaits each of its `_children`;
//! - a task's done-callbacks name who waits for it: the wakeup of a task awaiting it (a builtin
//!   method bound to a C task, a bound method of a Python task), `TaskGroup._on_task_done` (the
//!   group's `_parent_task`), or a closure holding a future some task awaits (shield's outer
//!   future, wait_for's waiter on 3.10/3.11).

use super::objects::{AsyncReader, Chain, Kind, TaskFields};
use super::pages::{AddrMap, AddrSet};
use super::Awaiting;
use crate::interp::frames::Frame;
use std::io;

pub struct ReadTask {
    pub id: u64,
    pub eager: bool,
    pub fields: TaskFields,
    pub chain: Chain,
    pub awaiting: Option<Awaiting>,
}

pub fn read_task(r: &AsyncReader, task: u64, eager: bool) -> io::Result<ReadTask> {
    let kind = r.kind(task)?;
    let fields = r.task_fields(task, kind)?;
    let chain = if fields.state == 0 && fields.coro != 0 {
        r.chain(fields.coro)?
    } else {
        Chain::default()
    };
    if fields.state == 0 && chain.links.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "pending task without a coroutine",
        ));
    }
    let awaiting = if fields.state == 0 {
        awaiting(r, &fields, &chain)?
    } else {
        None
    };
    Ok(ReadTask {
        id: task,
        eager,
        fields,
        chain,
        awaiting,
    })
}

/// asyncio functions whose await says what the task waits for (innermost asyncio frame decides).
fn kind_of_site(function: &str) -> Option<&'static str> {
    let last = |suffix: &str| function == suffix || function.ends_with(&format!(".{suffix}"));
    Some(match () {
        _ if function == "sleep" => "sleep",
        _ if last("Lock.acquire") => "lock",
        _ if last("Event.wait") => "event",
        _ if last("Condition.wait") => "condition",
        _ if last("Semaphore.acquire") || last("BoundedSemaphore.acquire") => "semaphore",
        _ if function.starts_with("Queue.") || function.contains("Queue.") => "queue",
        _ if function.starts_with("StreamReader.") => "stream",
        _ if function.starts_with("TaskGroup.") => "taskgroup",
        _ if function == "wait_for" => "wait_for",
        _ if function == "wait" || function == "_wait" => "wait",
        _ if function.starts_with("BaseSelectorEventLoop.sock_")
            || function.starts_with("_SelectorSocketTransport") =>
        {
            "socket"
        }
        _ => return None,
    })
}

fn in_asyncio(f: &Frame) -> bool {
    f.file.contains("/asyncio/")
}

fn awaiting(r: &AsyncReader, fields: &TaskFields, chain: &Chain) -> io::Result<Option<Awaiting>> {
    let running = chain.links.last().map(|l| l.running).unwrap_or(false);
    let obj = if fields.fut_waiter != 0 {
        fields.fut_waiter
    } else {
        chain.bottom
    };
    if obj == 0 || running {
        return Ok(None);
    }
    let type_name = r.type_name(obj)?;
    let k = r.kind(obj)?;
    let kind = if k.is_task() {
        "task"
    } else if r.is_gathering(obj) {
        "gather"
    } else if k.is_future() {
        // A pure-Python future's own `__await__` (no `_asyncio`, as on 3.14+ without it) is not the
        // site.
        let site = chain
            .links
            .iter()
            .rev()
            .filter_map(|l| l.frame.as_ref())
            .find(|f| in_asyncio(f) && f.function != "Future.__await__")
            .and_then(|f| kind_of_site(&f.function));
        match site {
            Some(s) => s,
            None => callback_kind(r, obj, k).unwrap_or("future"),
        }
    } else {
        "other"
    };
    Ok(Some(Awaiting {
        kind: kind.to_owned(),
        type_name,
        address: obj,
    }))
}

/// What made a plain future, told by the callbacks asyncio put on it: `run_in_executor`
/// (`wrap_future` chains it with `_chain_future`'s callbacks) or `shield` (its outer future).
fn callback_kind(r: &AsyncReader, fut: u64, kind: Kind) -> Option<&'static str> {
    let cbs = r.callbacks(fut, kind).ok()?;
    cbs.iter().find_map(|&cb| match function_qualname(r, cb) {
        Some(q) if q.starts_with("_chain_future.") => Some("executor"),
        Some(q) if q.starts_with("shield.") => Some("shield"),
        _ => None,
    })
}

fn function_qualname(r: &AsyncReader, f: u64) -> Option<String> {
    if r.kind(f).ok()? != Kind::Function {
        return None;
    }
    r.graph()
        .read_str(r.ptr(f + r.a.function_qualname).ok()?)
        .ok()
}

/// child task -> (parent task, how).
pub fn parents(r: &AsyncReader, tasks: &[ReadTask]) -> AddrMap<(u64, &'static str)> {
    let mut out: AddrMap<(u64, &'static str)> = AddrMap::default();
    let is_task: AddrSet = tasks.iter().map(|t| t.id).collect();
    let mut waiter_of: AddrMap<u64> = AddrMap::default();
    for t in tasks {
        let w = t.fields.fut_waiter;
        if t.fields.state != 0 || w == 0 {
            continue;
        }
        waiter_of.insert(w, t.id);
        if is_task.contains(&w) {
            out.insert(w, (t.id, "await"));
        } else if r.is_gathering(w) {
            for c in gather_children(r, w) {
                if is_task.contains(&c) {
                    out.entry(c).or_insert((t.id, "gather"));
                }
            }
        }
    }
    for t in tasks {
        if out.contains_key(&t.id) {
            continue;
        }
        let Ok(cbs) = r.callbacks(t.id, t.fields.kind) else {
            continue;
        };
        for cb in cbs {
            if let Some(edge) = callback_parent(r, cb, &is_task, &waiter_of) {
                if edge.0 != t.id {
                    out.insert(t.id, edge);
                    break;
                }
            }
        }
    }
    out
}

/// Gathers nested in a gather followed this deep (a torn read can make them a cycle).
const MAX_GATHER_NESTING: usize = 8;

/// task -> the tasks it waits for: the task it awaits, or every task of the gather it awaits
/// (gathers of gathers followed). With the parent edges, the graph `dump --tasks` looks for await
/// cycles in.
pub fn waits_for(r: &AsyncReader, tasks: &[ReadTask]) -> AddrMap<Vec<u64>> {
    let is_task: AddrSet = tasks.iter().map(|t| t.id).collect();
    let mut out: AddrMap<Vec<u64>> = AddrMap::default();
    for t in tasks {
        let w = t.fields.fut_waiter;
        if t.fields.state != 0 || w == 0 {
            continue;
        }
        let mut found = Vec::new();
        let mut pending = vec![(w, 0usize)];
        let mut seen = AddrSet::default();
        while let Some((obj, depth)) = pending.pop() {
            if !seen.insert(obj) {
                continue;
            }
            if is_task.contains(&obj) {
                found.push(obj);
            } else if depth < MAX_GATHER_NESTING && r.is_gathering(obj) {
                pending.extend(gather_children(r, obj).into_iter().map(|c| (c, depth + 1)));
            }
        }
        if !found.is_empty() {
            found.sort_unstable();
            out.insert(t.id, found);
        }
    }
    out
}

fn gather_children(r: &AsyncReader, gathering: u64) -> Vec<u64> {
    let Ok(Some(list)) = r.graph().get_attr(gathering, "_children") else {
        return Vec::new();
    };
    r.list_items(list).unwrap_or_default()
}

fn callback_parent(
    r: &AsyncReader,
    cb: u64,
    is_task: &AddrSet,
    waiter_of: &AddrMap<u64>,
) -> Option<(u64, &'static str)> {
    match r.kind(cb).ok()? {
        Kind::BuiltinMethod => {
            let s = r.ptr(cb + r.a.cfunction_self).ok()?;
            is_task.contains(&s).then_some((s, "await"))
        }
        Kind::Method => {
            let s = r.ptr(cb + r.a.method_self).ok()?;
            if is_task.contains(&s) {
                return Some((s, "await"));
            }
            let p = r.graph().get_attr(s, "_parent_task").ok()??;
            is_task.contains(&p).then_some((p, "taskgroup"))
        }
        Kind::Partial => {
            // wait_for (3.10, 3.11): partial(_release_waiter, waiter), waiter awaited by the
            // caller.
            let c = r.classes;
            let func = r.ptr(cb + c.partial_func).ok()?;
            let args = r.ptr(cb + c.partial_args).ok()?;
            if r.type_name(args).ok()? != "tuple" {
                return None;
            }
            let n = r.mem.read_i64(args + r.l.varobject_size).ok()?;
            let via = if function_qualname(r, func).as_deref() == Some("_release_waiter") {
                "wait_for"
            } else {
                "callback"
            };
            (0..n.clamp(0, 16) as u64).find_map(|i| {
                let v = r.ptr(args + r.l.tuple_item + 8 * i).ok()?;
                waiter_of.get(&v).map(|&p| (p, via))
            })
        }
        Kind::Function => {
            let qualname = function_qualname(r, cb)?;
            let closure = r.ptr(cb + r.a.function_closure).ok()?;
            if closure == 0 || r.type_name(closure).ok()? != "tuple" {
                return None;
            }
            let n = r.mem.read_i64(closure + r.l.varobject_size).ok()?;
            for i in 0..n.clamp(0, 64) as u64 {
                let cell = r.ptr(closure + r.l.tuple_item + 8 * i).ok()?;
                let Ok(v) = r.ptr(cell + r.a.cell_ref) else {
                    continue;
                };
                if let Some(&p) = waiter_of.get(&v) {
                    let via = if qualname.starts_with("shield.") {
                        "shield"
                    } else if qualname.contains("wait_for") || qualname.contains("_release_waiter")
                    {
                        "wait_for"
                    } else if qualname.starts_with("gather.") {
                        "gather"
                    } else {
                        "callback"
                    };
                    return Some((p, via));
                }
            }
            None
        }
        _ => None,
    }
}
