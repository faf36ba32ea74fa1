//! asyncio tasks read from outside: every task of every loop, its coroutine stack down to the
//! innermost suspended frame, what it awaits, and who awaits whom (docs/asyncio.md).
//!
//! The target runs while we read, and tasks come and go by the thousand per second. The whole
//! picture is therefore read twice, each time through a fresh page cache: a task is reported only
//! if both reads agree on everything reported about it (state, stack, what it awaits, its parent);
//! others are dropped and counted. A task seen by one read only started or ended in between.

mod objects;
pub mod pages;
mod registry;
mod tree;

use crate::interp::frames::{Frame, WalkError};
use crate::interp::interpreter::Interpreter;
use crate::interp::pyobjects::read_small_int;
use crate::process::memory::Memory;
use gilty_layouts::asyncio_layout_for;
use objects::{AsyncReader, Kind};
use pages::AddrMap;
use pages::PageCache;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Awaiting {
    /// task, gather, taskgroup, sleep, lock, event, condition, semaphore, queue, executor,
    /// stream, future (anything else), or coroutine (a non-future at the bottom of the chain).
    pub kind: String,
    /// The awaited object's type name.
    pub type_name: String,
    pub address: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    pub id: u64,
    pub name: String,
    /// running, pending, cancelling, done, cancelled.
    pub state: &'static str,
    pub loop_addr: u64,
    /// A pure-Python `asyncio.Task` (or subclass) rather than the C one.
    pub python_impl: bool,
    pub eager: bool,
    /// The coroutine chain, innermost first (the innermost suspended frame is `stack[0]`).
    pub stack: Vec<Frame>,
    pub awaiting: Option<Awaiting>,
    pub parent: Option<u64>,
    /// How the parent awaits this task: await, gather, taskgroup, shield, wait_for, callback.
    pub parent_via: Option<&'static str>,
    /// The tasks this one waits for (`tree::waits_for`), by id, ascending: a task waiting on itself
    /// through them, or through parent edges, is in an await cycle (a deadlock).
    pub waits_for: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopInfo {
    pub address: u64,
    pub type_name: String,
    /// `threading.get_ident()` of the thread running the loop (the loop's `_thread_id`).
    pub thread_ident: Option<u64>,
    /// The OS thread id of that thread, when it is a Python thread of the target.
    pub tid: Option<i32>,
    pub running_task: Option<u64>,
}

#[derive(Debug, Clone, Default)]
pub struct TaskErrors {
    /// Tasks the two reads disagreed on.
    pub torn_dropped: u64,
    /// Tasks that could not be read at all (freed under us, or an unexpected object).
    pub unreadable: u64,
    /// Tasks present in one read only (started or finished during the dump).
    pub changed: u64,
}

#[derive(Debug, Clone, Default)]
pub struct TasksSnapshot {
    /// False when the target never imported asyncio.
    pub asyncio_imported: bool,
    pub loops: Vec<LoopInfo>,
    pub tasks: Vec<TaskInfo>,
    pub errors: TaskErrors,
    /// Pages read from the target, both reads together.
    pub pages_read: u64,
    /// Other async frameworks the target imported (trio, gevent, curio): their tasks are not read.
    pub other_frameworks: Vec<String>,
}

/// Frameworks with their own scheduler, whose tasks are not asyncio tasks.
const OTHER_FRAMEWORKS: [&str; 3] = ["trio", "gevent", "curio"];

/// Reads every task of the target twice and keeps what both reads agree on.
pub fn read_tasks(interp: &Interpreter) -> crate::Result<TasksSnapshot> {
    let a = asyncio_layout_for(interp.version.0, interp.version.1).ok_or_else(|| {
        crate::Error::new(
            crate::ErrorKind::UnsupportedVersion,
            format!("no asyncio layout for Python {}", interp.version_string()),
        )
    })?;
    let main = interp.main_interp()?;
    let mut snap = read_agreed(interp, a, main, pages::DUMP_CHUNK_PAGES, Retry::Settle)?;
    for name in OTHER_FRAMEWORKS {
        if matches!(interp.module_global(name, "__name__"), Ok(Some(_))) {
            snap.other_frameworks.push(name.to_owned());
        }
    }
    // Which OS thread runs each loop: the loop's `_thread_id` is a thread state's `thread_id`.
    let threads = crate::interp::threads::python_threads_settled(
        interp,
        &mut crate::interp::threads::TidResolver::default(),
    )
    .map(|(_, t)| t)
    .unwrap_or_default();
    for l in snap.loops.iter_mut() {
        l.tid = l
            .thread_ident
            .and_then(|i| threads.iter().find(|t| t.ident == i))
            .and_then(|t| t.tid);
    }
    Ok(snap)
}

/// The tasks as two reads agree on them, without the extras of a dump (other frameworks, loop
/// threads): what a sampling pass reads (`crate::sampling::task_record`). Reads of `chunk_pages`
/// pages at a time: a pass over a thousand tasks costs least in small chunks, a dump of ten
/// thousand in large.
pub fn read_tasks_agreed(
    interp: &Interpreter,
    main: u64,
    chunk_pages: u64,
) -> crate::Result<TasksSnapshot> {
    let a = asyncio_layout_for(interp.version.0, interp.version.1).ok_or_else(|| {
        crate::Error::new(
            crate::ErrorKind::UnsupportedVersion,
            format!("no asyncio layout for Python {}", interp.version_string()),
        )
    })?;
    read_agreed(interp, a, main, chunk_pages, Retry::AtOnce)
}

fn read_agreed(
    interp: &Interpreter,
    a: &gilty_layouts::AsyncLayout,
    main: u64,
    chunk_pages: u64,
    retry: Retry,
) -> crate::Result<TasksSnapshot> {
    let failed = |e: std::io::Error| {
        let pid = interp.pid;
        if crate::process::procfs::is_gone(pid) {
            return crate::Error::new(crate::ErrorKind::TargetExited, format!("pid {pid} exited"));
        }
        crate::Error::new(
            crate::ErrorKind::UnrecognisedInterpreter,
            format!("pid {pid}: cannot read its asyncio tasks: {e}"),
        )
    };
    let mut first = read_retrying(interp, a, main, chunk_pages, retry).map_err(failed)?;
    // A sampling pass takes the first pair: the next pass reads again. A dump has one chance: a
    // loop that runs between two reads (between blocking calls, say) moves its tasks, so a dump
    // reads again until two reads in a row agree on every task, and keeps the pair that disagreed
    // least.
    let pairs = match retry {
        Retry::AtOnce => 1,
        Retry::Settle => DUMP_PAIRS,
    };
    let mut best: Option<(TasksSnapshot, (u64, u64))> = None;
    for pair in 0..pairs {
        let second = read_retrying(interp, a, main, chunk_pages, retry).map_err(failed)?;
        // Kept as the next pair's first read; a sampling pass (one pair) never copies it.
        let next = (pair + 1 < pairs).then(|| second.clone());
        let merged = merge(first, second);
        // Tasks that moved first; then tasks unreadable (in every read alike, they do not make a
        // dump read on).
        let score = (
            merged.errors.torn_dropped + merged.errors.changed,
            merged.errors.unreadable,
        );
        if best.as_ref().is_none_or(|(_, b)| score < *b) {
            best = Some((merged, score));
        }
        match next {
            Some(read) if score.0 > 0 => first = read,
            _ => break,
        }
    }
    Ok(best.expect("at least one pair is read").0)
}

/// Pairs of reads a dump tries before it keeps the best (each read of a few hundred tasks takes
/// 5-15 ms).
const DUMP_PAIRS: usize = 8;

/// Reads of the registries themselves (a set or dict resized under us) are tried again a few times.
const REGISTRY_TRIES: usize = 5;

/// How a failed registry read is tried again.
#[derive(Clone, Copy)]
enum Retry {
    /// At once, `REGISTRY_TRIES` times: a sampling pass must not stall, and the next pass reads
    /// again.
    AtOnce,
    /// After `threads::settle_pause`, `threads::SETTLE_TRIES` times: a dump has one chance, and a
    /// target preempted in the middle of a resize stays torn until it runs again (seen beside eight
    /// CPU hogs).
    Settle,
}

fn read_retrying(
    interp: &Interpreter,
    a: &gilty_layouts::AsyncLayout,
    main: u64,
    chunk_pages: u64,
    retry: Retry,
) -> std::io::Result<OneRead> {
    let mut last = None;
    let tries = match retry {
        Retry::AtOnce => REGISTRY_TRIES,
        Retry::Settle => crate::interp::threads::SETTLE_TRIES,
    };
    for attempt in 0..tries {
        if let Retry::Settle = retry {
            crate::interp::threads::settle_pause(attempt);
        }
        match one_read(interp, a, main, chunk_pages) {
            Ok(r) => return Ok(r),
            Err(e) if crate::process::procfs::is_gone(interp.pid) => return Err(e),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap())
}

#[derive(Clone)]
struct OneRead {
    snap: TasksSnapshot,
}

fn merge(first: OneRead, second: OneRead) -> TasksSnapshot {
    let mut out = second.snap;
    out.pages_read += first.snap.pages_read;
    // A task unreadable in both reads is one task left out, not two.
    out.errors.unreadable = out.errors.unreadable.max(first.snap.errors.unreadable);
    let before: AddrMap<&TaskInfo> = first.snap.tasks.iter().map(|t| (t.id, t)).collect();
    let after_ids: pages::AddrSet = out.tasks.iter().map(|t| t.id).collect();
    out.errors.changed += first
        .snap
        .tasks
        .iter()
        .filter(|t| !after_ids.contains(&t.id))
        .count() as u64;
    let mut kept = Vec::with_capacity(out.tasks.len());
    for t in out.tasks.drain(..) {
        match before.get(&t.id) {
            None => out.errors.changed += 1,
            // The running task moves between the reads; what else is reported about it must agree.
            Some(b)
                if t.state == "running"
                    && b.state == "running"
                    && b.name == t.name
                    && b.parent == t.parent =>
            {
                kept.push(t)
            }
            Some(b) if **b == t => kept.push(t),
            // Another task at a freed one's address: one ended and one started, nothing was torn.
            Some(b) if b.name != t.name => out.errors.changed += 2,
            Some(_) => out.errors.torn_dropped += 1,
        }
    }
    let kept_ids: pages::AddrSet = kept.iter().map(|t| t.id).collect();
    // A parent that was dropped leaves its children without a parent rather than with a stale one.
    for t in kept.iter_mut() {
        if t.parent.is_some_and(|p| !kept_ids.contains(&p)) {
            t.parent = None;
            t.parent_via = None;
        }
    }
    out.tasks = kept;
    out
}

fn one_read(
    interp: &Interpreter,
    a: &gilty_layouts::AsyncLayout,
    main: u64,
    chunk_pages: u64,
) -> std::io::Result<OneRead> {
    let cache = PageCache::with_chunk(&interp.mem, chunk_pages);
    let mem: &dyn Memory = &cache;
    let probe = AsyncReader::new(mem, &interp.layout, a, Default::default(), interp.code_type);
    let Some(classes) = registry::classes(&probe, main)? else {
        return Ok(OneRead {
            snap: TasksSnapshot {
                pages_read: cache.pages() as u64,
                ..Default::default()
            },
        });
    };
    let r = AsyncReader::new(mem, &interp.layout, a, classes, interp.code_type);
    check_sizes(&r)?;
    // The registries change with every task step (`_current_tasks` is resized every few): they are
    // read through a cache of their own, so that a dict's keys are read moments after the dict, not
    // after all that finding the classes read into the shared cache (stale by then on a loaded
    // host).
    let fresh = PageCache::with_chunk(&interp.mem, 1);
    let reg = registry::read(
        &AsyncReader::new(&fresh, &interp.layout, a, classes, interp.code_type),
        main,
    )?;
    let current: AddrMap<u64> = reg.current.iter().map(|&(l, t)| (l, t)).collect();
    let mut snap = TasksSnapshot {
        asyncio_imported: true,
        ..Default::default()
    };
    let mut read = Vec::with_capacity(reg.tasks.len());
    for &(task, eager) in &reg.tasks {
        match tree::read_task(&r, task, eager) {
            Ok(t) => read.push(t),
            Err(_) => snap.errors.unreadable += 1,
        }
    }
    let parents = tree::parents(&r, &read);
    let mut waits = tree::waits_for(&r, &read);
    let mut loops: AddrMap<LoopInfo> = AddrMap::default();
    for t in read {
        let running = current.get(&t.fields.loop_addr) == Some(&t.id);
        let state = match t.fields.state {
            1 => "cancelled",
            2 => "done",
            _ if running => "running",
            _ if t.fields.cancelling => "cancelling",
            _ => "pending",
        };
        let loop_addr = t.fields.loop_addr;
        loops
            .entry(loop_addr)
            .or_insert_with(|| loop_info(&r, loop_addr, current.get(&loop_addr).copied()));
        let (parent, via) = parents
            .get(&t.id)
            .copied()
            .map(|(p, v)| (Some(p), Some(v)))
            .unwrap_or((None, None));
        snap.tasks.push(TaskInfo {
            id: t.id,
            name: t.fields.name.clone(),
            state,
            loop_addr,
            python_impl: t.fields.kind == Kind::PyTask,
            eager: t.eager,
            stack: t
                .chain
                .links
                .iter()
                .rev()
                .filter_map(|l| l.frame.clone())
                .collect(),
            awaiting: t.awaiting.clone(),
            parent,
            parent_via: via,
            waits_for: waits.remove(&t.id).unwrap_or_default(),
        });
    }
    snap.tasks.sort_by_key(|t| t.id);
    let mut loops: Vec<LoopInfo> = loops.into_values().collect();
    loops.sort_by_key(|l| l.address);
    snap.loops = loops;
    snap.pages_read = (cache.pages() + fresh.pages()) as u64;
    Ok(OneRead { snap })
}

/// The C classes in the target must have the sizes the table was generated for (a build whose
/// `_asyncio` differs is refused rather than misread).
fn check_sizes(r: &AsyncReader) -> std::io::Result<()> {
    for (cls, want, what) in [
        (r.classes.c_task, r.a.task_size, "Task"),
        (r.classes.c_future, r.a.future_size, "Future"),
    ] {
        if cls == 0 {
            continue;
        }
        let got = r.mem.read_i64(cls + r.l.type_basicsize)?;
        if got as u64 != want {
            return Err(std::io::Error::other(format!(
                "_asyncio.{what} is {got} bytes in the target but {want} in gilty's table for this version (a modified build?)"
            )));
        }
    }
    Ok(())
}

fn loop_info(r: &AsyncReader, address: u64, running_task: Option<u64>) -> LoopInfo {
    let type_name = r.type_name(address).unwrap_or_default();
    let thread_ident = r
        .graph()
        .get_attr(address, "_thread_id")
        .ok()
        .flatten()
        .and_then(|v| read_small_int(r.mem, r.l, v).ok())
        .filter(|&v| v > 0)
        .map(|v| v as u64);
    LoopInfo {
        address,
        type_name,
        thread_ident,
        tid: None,
        running_task,
    }
}

impl From<WalkError> for std::io::Error {
    fn from(e: WalkError) -> Self {
        match e {
            WalkError::Torn => std::io::Error::new(std::io::ErrorKind::InvalidData, "torn read"),
            WalkError::Io(e) => e,
        }
    }
}

#[cfg(test)]
mod merge_tests {
    use super::*;

    fn task(id: u64, name: &str, line: i32) -> TaskInfo {
        TaskInfo {
            id,
            name: name.into(),
            state: "pending",
            loop_addr: 7,
            python_impl: false,
            eager: false,
            stack: vec![Frame {
                function: "handler".into(),
                file: "/app/app.py".into(),
                line,
            }],
            awaiting: None,
            parent: None,
            parent_via: None,
            waits_for: Vec::new(),
        }
    }

    fn read(tasks: Vec<TaskInfo>, unreadable: u64) -> OneRead {
        OneRead {
            snap: TasksSnapshot {
                tasks,
                errors: TaskErrors {
                    unreadable,
                    ..Default::default()
                },
                ..Default::default()
            },
        }
    }

    #[test]
    fn a_freed_tasks_address_reused_is_a_change_not_a_tear() {
        // Task-1 ended between the reads and Task-9 was built where it was; Task-2 moved to another
        // line.
        let first = read(
            vec![
                task(0x10, "Task-1", 5),
                task(0x20, "Task-2", 5),
                task(0x30, "Task-3", 5),
            ],
            1,
        );
        let second = read(
            vec![
                task(0x10, "Task-9", 7),
                task(0x20, "Task-2", 6),
                task(0x30, "Task-3", 5),
            ],
            1,
        );
        let out = merge(first, second);
        assert_eq!(
            out.tasks
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>(),
            vec!["Task-3"]
        );
        assert_eq!(out.errors.changed, 2);
        assert_eq!(out.errors.torn_dropped, 1);
        // The same task unreadable in both reads is one task left out.
        assert_eq!(out.errors.unreadable, 1);
    }
}
