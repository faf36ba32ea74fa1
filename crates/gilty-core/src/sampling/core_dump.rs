//! `gilty dump --core`: the snapshot a live `dump` takes, read from a core file instead. The
//! threads, their syscalls and stack pointers come from the core's notes; everything Python (the
//! GIL, thread states, stacks, locals, what each handles) from its memory, through the same
//! readers. What a core does not keep (scheduler counters, the previous pass a live sampler
//! compares with) is not guessed: a thread's state comes from the GIL and its syscall alone.
//!
//! On top of the snapshot, what a hung process's threads wait for: the lock each thread blocked in
//! a lock's `acquire` waits on (`interp::lock_wait`), and a verdict for the two hangs a core is
//! usually taken for: a deadlock (every Python thread waits on a lock, none holds the GIL) and the
//! GIL held by a thread that does not run Python (blocked in a system call or in C code) while
//! others wait for it.

use crate::interp::exceptions::handled_by_tid;
use crate::interp::frames::{CodeCache, Frame, FrameWalker, WalkError};
use crate::interp::interpreter::Interpreter;
use crate::interp::locals::{locals_for_threads, Want};
use crate::interp::lock_wait::{lock_waited, LockWait};
use crate::interp::thread_names::python_thread_names;
use crate::interp::threads::{python_threads, PyThread, TidResolver};
use crate::native::snapshot::{core_thread, NativeThread};
use crate::native::unwind::{ProcessUnwinder, Regs};
use crate::process::memory::Memory;
use crate::process::procfs::SyscallState;
use crate::process::syscalls::FUTEX;
use crate::sampling::classify::{classify, Observation, ThreadState};
use crate::sampling::dump::{Dump, DumpThread, NativeStack};
use crate::sampling::sampler::{read_gil, ThreadSnapshot};
use crate::{Error, ErrorKind};
use std::collections::HashMap;

pub struct CoreDump {
    pub dump: Dump,
    /// Per tid, the lock it waits to acquire.
    pub locks: HashMap<i32, LockWait>,
    /// Per lock owner ident (an RLock's), the tid of that thread.
    pub owner_tids: HashMap<u64, i32>,
    /// What the threads together say: a deadlock, a GIL held outside Python. Empty: nothing.
    pub diagnosis: Vec<String>,
    /// Per tid, why a thread with a thread state has no stack (a core has one moment: no read
    /// again).
    pub stack_errors: HashMap<i32, String>,
}

/// Why a thread's frames could not be walked in the core.
fn stack_error(e: &WalkError) -> String {
    match e {
        WalkError::Torn => {
            "its frames do not chain up to a thread's first frame in the core (a core \
            writer that zero-filled the thread's stack? see docs/core-files.md)"
                .to_owned()
        }
        WalkError::Io(e) => format!("reading its frames from the core failed: {e}"),
    }
}

fn unreadable(interp: &Interpreter, e: &std::io::Error) -> Error {
    Error::new(
        ErrorKind::NotPython,
        format!(
            "core of pid {}: could not read its threads: {e}",
            interp.pid
        ),
    )
}

/// Reads the snapshot out of the core `interp` was attached to (`attach_core`).
/// With `native`, each thread's C stack is unwound from the core's registers and stack memory and
/// merged with its Python stack as `dump --native` does live.
pub fn dump_core(interp: &Interpreter, want: Want, native: bool) -> crate::Result<CoreDump> {
    let core = interp
        .mem
        .core()
        .ok_or_else(|| Error::new(ErrorKind::Internal, "dump_core on a live process"))?;
    let mut os_threads = core.threads.clone();
    os_threads.sort_by_key(|t| t.tid);
    let tids: Vec<i32> = os_threads.iter().map(|t| t.tid).collect();
    let main = interp.main_interp()?;
    let pythreads = python_threads(interp, &mut TidResolver::default(), &tids)
        .map_err(|e| unreadable(interp, &e))?;
    let gil = read_gil(interp).map_err(|e| unreadable(interp, &e))?;
    let l = &interp.layout;
    let gc = interp
        .mem
        .read_i32(main + l.interp_gc + l.gc_collecting)
        .map(|v| v != 0)
        .unwrap_or(false);
    let names = python_thread_names(interp).unwrap_or_default();
    let range = interp.gil_futex_range();
    let walker = FrameWalker::new(&interp.mem, &interp.layout, interp.code_type);
    let mut cache = CodeCache::default();
    let mut snaps = Vec::new();
    let mut locks = HashMap::new();
    let mut unwinder = native.then(|| ProcessUnwinder::for_core(core));
    let mut mixed: HashMap<i32, NativeThread> = HashMap::new();
    let mut stack_errors = HashMap::new();
    for t in &os_threads {
        let py = thread_state_of(&pythreads, t.tid, gil.locked, gil.last_holder, &walker);
        let tstate = py.map_or(0, |p| p.tstate);
        let stack: Vec<Frame> = if tstate != 0 {
            let walked = if interp.version.1 >= 11 {
                walker
                    .walk_with_positions(tstate, None, false, &mut cache)
                    .map(|(w, _)| w)
            } else {
                walker.walk_from(tstate, None, false, &mut cache)
            };
            match walked {
                Ok((frames, _)) => frames,
                Err(e) => {
                    stack_errors.insert(t.tid, stack_error(&e));
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        if let Some(u) = unwinder.as_mut() {
            let regs = Regs {
                ip: t.pc,
                sp: t.sp,
                bp: t.bp,
            };
            let ts = (tstate != 0).then_some(tstate);
            mixed.insert(t.tid, core_thread(interp, u, &mut cache, t.tid, regs, ts));
        }
        let state = classify(
            &Observation {
                tstate,
                syscall: t.syscall,
                in_handoff: false,
                ran_since_idle: None,
                cpu_wait: false,
                owns_gil_mutex: gil.mutex_owners.contains(&t.tid),
                gil_requested: py.and_then(|p| p.gil_flags.requested),
            },
            &gil,
            gc,
            range,
            None,
        );
        let nr = match t.syscall {
            SyscallState::Blocked { nr, arg0 } => {
                if nr == FUTEX && !(range.0..range.1).contains(&arg0) && tstate != 0 {
                    if let Some(w) = lock_waited(&interp.mem, l, interp.version.1, arg0, t.sp) {
                        locks.insert(t.tid, w);
                    }
                }
                nr
            }
            _ => -1,
        };
        let name = py
            .and_then(|p| names.get(&p.ident).cloned())
            .or_else(|| {
                // The process's own name (NT_PRPSINFO) for its main thread, as /proc would give it.
                (t.tid == core.pid)
                    .then(|| core.command.as_deref().map(command_name))
                    .flatten()
            })
            .unwrap_or_else(|| format!("thread-{}", t.tid));
        snaps.push(ThreadSnapshot {
            tid: t.tid,
            name,
            state,
            syscall: nr,
            stack,
        });
    }
    let mut vars = if want.variables || want.positions {
        let stacks: Vec<(i32, &[Frame])> =
            snaps.iter().map(|t| (t.tid, t.stack.as_slice())).collect();
        Some(locals_for_threads(interp, &stacks, want).map_err(|e| unreadable(interp, &e))?)
    } else {
        None
    };
    let mut handled = handled_by_tid(interp).unwrap_or_default();
    let owner_tids: HashMap<u64, i32> = pythreads
        .iter()
        .filter_map(|p| Some((p.ident, p.tid?)))
        .collect();
    let diagnosis = diagnose(&snaps, &locks, &owner_tids);
    let threads = snaps
        .into_iter()
        .map(|th| DumpThread {
            handling: handled.remove(&th.tid),
            native: mixed.remove(&th.tid).map(|n| {
                let partial = n.partial;
                n.stack.map(|frames| NativeStack { frames, partial })
            }),
            frames: vars.as_mut().and_then(|v| v.remove(&th.tid)),
            snapshot: th,
        })
        .collect();
    Ok(CoreDump {
        dump: Dump { t: 0.0, threads },
        locks,
        owner_tids,
        diagnosis,
        stack_errors,
    })
}

/// The first word of a command line, without its directory (what /proc's `comm` shows, at most 15
/// bytes).
fn command_name(cmd: &str) -> String {
    let first = cmd.split_whitespace().next().unwrap_or(cmd);
    first
        .rsplit('/')
        .next()
        .unwrap_or(first)
        .chars()
        .take(15)
        .collect()
}

/// As the live sampler picks it: among several thread states of one OS thread the GIL holder, then
/// one with a Python frame.
fn thread_state_of(
    pythreads: &[PyThread],
    tid: i32,
    locked: bool,
    last_holder: u64,
    walker: &FrameWalker,
) -> Option<PyThread> {
    let mine: Vec<PyThread> = pythreads
        .iter()
        .filter(|p| p.tid == Some(tid))
        .copied()
        .collect();
    if mine.len() <= 1 {
        return mine.first().copied();
    }
    mine.iter()
        .find(|p| locked && p.tstate == last_holder)
        .or_else(|| {
            mine.iter()
                .find(|p| walker.top_frame(p.tstate).is_ok_and(|f| f != 0))
        })
        .or(mine.first())
        .copied()
}

fn where_(t: &ThreadSnapshot) -> String {
    match t.stack.first() {
        Some(f) => format!("{} ({}:{})", f.function, f.file, f.line),
        None => "no Python frame".to_owned(),
    }
}

/// Innermost frame in `Thread.join` (3.13+: it parks on the thread's exit event, not a lock).
fn in_join(t: &ThreadSnapshot) -> bool {
    t.stack.first().is_some_and(|f| {
        f.function == "Thread.join" || f.function == "Thread._wait_for_tstate_lock"
    })
}

/// A cycle of threads each waiting for a lock the next one holds (only `RLock`s record their
/// holder): a deadlock whatever the other threads do.
fn owner_cycle(
    threads: &[ThreadSnapshot],
    locks: &HashMap<i32, LockWait>,
    owner_tids: &HashMap<u64, i32>,
) -> Option<String> {
    let next = |tid: i32| -> Option<i32> {
        locks
            .get(&tid)?
            .owner_ident
            .and_then(|o| owner_tids.get(&o).copied())
    };
    for start in threads.iter().map(|t| t.tid) {
        let mut path = vec![start];
        let mut at = start;
        while let Some(n) = next(at) {
            if n == start && path.len() >= 2 {
                let steps = path
                    .iter()
                    .map(|&t| {
                        let w = &locks[&t];
                        let th = threads.iter().find(|x| x.tid == t);
                        format!(
                            "thread {t} at {} waits for {} {:#x} held by thread {}",
                            th.map(where_).unwrap_or_default(),
                            w.kind,
                            w.address,
                            next(t).unwrap_or(0)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                return Some(format!(
                    "deadlock: a cycle of {} threads: {steps}",
                    path.len()
                ));
            }
            if path.contains(&n) || path.len() > threads.len() {
                break;
            }
            path.push(n);
            at = n;
        }
    }
    None
}

/// The verdicts (see the module's comment), each one line.
fn diagnose(
    threads: &[ThreadSnapshot],
    locks: &HashMap<i32, LockWait>,
    owner_tids: &HashMap<u64, i32>,
) -> Vec<String> {
    let mut out = Vec::new();
    let python: Vec<&ThreadSnapshot> = threads.iter().filter(|t| !t.stack.is_empty()).collect();
    let holder = threads
        .iter()
        .find(|t| matches!(t.state, ThreadState::HoldingGil | ThreadState::Gc));
    let waiting_gil: Vec<i32> = threads
        .iter()
        .filter(|t| t.state == ThreadState::WaitingGil)
        .map(|t| t.tid)
        .collect();
    if let Some(h) = holder {
        // Holding the GIL inside a system call (other than the GIL's own futex): C code that keeps
        // the GIL while it blocks. Running in user space: C code or Python, which a core cannot
        // tell apart from a busy loop; said only when others wait.
        let blocked = h.syscall >= 0;
        if blocked || !waiting_gil.is_empty() {
            let doing = if blocked {
                format!(
                    "blocked in {} without releasing it",
                    crate::process::syscalls::name(h.syscall)
                )
            } else {
                "running".to_owned()
            };
            out.push(format!(
                "GIL held: thread {} '{}' holds the GIL, {doing}, at {}; {} thread(s) wait for it{}",
                h.tid,
                h.name,
                where_(h),
                waiting_gil.len(),
                if waiting_gil.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({})",
                        waiting_gil
                            .iter()
                            .map(|t| t.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ));
        }
    }
    if let Some(cycle) = owner_cycle(threads, locks, owner_tids) {
        out.push(cycle);
    }
    // Every Python thread stuck: on a lock, or joining a thread (which, stuck too, never ends).
    let on_locks: Vec<&&ThreadSnapshot> = python
        .iter()
        .filter(|t| locks.contains_key(&t.tid))
        .collect();
    let joining = python
        .iter()
        .filter(|t| !locks.contains_key(&t.tid) && t.syscall >= 0 && in_join(t))
        .count();
    if holder.is_none()
        && on_locks.len() >= 2
        && on_locks.len() + joining == python.len()
        && out.is_empty()
    {
        let each = on_locks
            .iter()
            .map(|t| {
                let w = &locks[&t.tid];
                let by = w
                    .owner_ident
                    .and_then(|o| owner_tids.get(&o))
                    .map(|o| format!(", held by thread {o}"))
                    .unwrap_or_default();
                format!(
                    "thread {} at {} waits for {} {:#x}{by}",
                    t.tid,
                    where_(t),
                    w.kind,
                    w.address
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let who = if joining == 0 {
            format!(
                "all {} Python threads wait to acquire locks",
                on_locks.len()
            )
        } else {
            format!(
                "all {} Python threads wait ({} to acquire locks, {joining} in Thread.join)",
                python.len(),
                on_locks.len()
            )
        };
        out.push(format!("deadlock: {who} and none holds the GIL: {each}"));
    }
    out
}
