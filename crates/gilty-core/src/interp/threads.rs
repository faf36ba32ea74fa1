//! Enumerating the target's Python thread states and mapping them to OS thread ids.

use crate::interp::interpreter::Interpreter;
use crate::process::memory::Memory;
use std::collections::HashMap;
use std::io;

/// Longer lists are taken as a cycle read from memory that changed under us.
const MAX_THREADS: usize = 4096;

#[derive(Debug, Clone, Copy)]
pub struct PyThread {
    pub tstate: u64,
    /// pthread_t, which is also `threading.get_ident()`.
    pub ident: u64,
    /// OS thread id, when known.
    pub tid: Option<i32>,
    /// 3.11+: the thread state's frame pointer, `datastack_chunk` and `datastack_top`, from the
    /// same read (a walk can start from them instead of reading the thread state again).
    pub head: Option<WalkHead>,
    /// `exc_info` and the bottom level's exception (`exc_state`, inside the thread state), from the
    /// same read: while `exc_info` points at that level, whether the thread handles an exception is
    /// known without another read (`exceptions::HandlingCheck`).
    pub exc: ExcHead,
    /// The thread state's own GIL flags, from the same read (see `GilFlags`).
    pub gil_flags: GilFlags,
}

/// What the thread state itself says about the GIL: 3.14+ `holds_gil`, 3.15+ `gil_requested` (set
/// while the thread is inside take_gil). None where the version has no such field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GilFlags {
    pub holds: Option<bool>,
    pub requested: Option<bool>,
}

/// A thread state's exception-info pointer and its bottom level's exception field, as read with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExcHead {
    pub info: u64,
    pub bottom_exc: u64,
}

/// Where a 3.11+ walk starts: the frame pointer field (3.11/3.12 `cframe`, 3.13 `current_frame`)
/// and the bounds of the data-stack chunk in use, as read together from the thread state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkHead {
    pub frame_ptr: u64,
    pub chunk: u64,
    pub top: u64,
}

/// Offset of the kernel tid inside glibc's `struct pthread`, found once by looking for known tids
/// (3.10 thread states carry only the pthread_t).
#[derive(Default)]
pub struct TidResolver {
    offset: Option<u64>,
    /// Whether the target runs in a PID namespace of its own, once known (see `NsTids`).
    namespaced: Option<bool>,
    /// Host tid -> the tid inside the target's namespace, for the threads seen so far.
    ns_tids: HashMap<i32, i32>,
}

/// A target in a PID namespace of its own (a container) stores and reports the tids of that
/// namespace (`native_thread_id`, glibc's `struct pthread`); /proc out here lists host tids. The
/// pairs, read from each thread's `NSpid` once, let thread states be matched in the target's
/// numbering.
struct NsTids {
    /// (host, inside), in the order of the /proc list.
    pairs: Vec<(i32, i32)>,
}

impl NsTids {
    fn inside(&self) -> Vec<i32> {
        self.pairs.iter().map(|p| p.1).collect()
    }

    fn host(&self, inside: i32) -> Option<i32> {
        self.pairs.iter().find(|p| p.1 == inside).map(|p| p.0)
    }
}

impl TidResolver {
    /// None when the target shares our PID namespace (then tids need no mapping).
    fn ns_tids(&mut self, pid: i32, tids: &[i32]) -> Option<NsTids> {
        if self.namespaced == Some(false) {
            return None;
        }
        if self.namespaced.is_none() {
            // Known only once a thread's status could be read (the process may be exiting).
            let ids = tids
                .iter()
                .find_map(|&t| crate::process::procfs::ns_tids(pid, t))?;
            self.namespaced = Some(ids.len() > 1);
            if ids.len() <= 1 {
                return None;
            }
        }
        // Tids are not reused while the thread lives; an exited thread's entry goes with it.
        self.ns_tids.retain(|host, _| tids.contains(host));
        let mut pairs = Vec::with_capacity(tids.len());
        for &t in tids {
            let inside = match self.ns_tids.get(&t) {
                Some(&i) => i,
                None => {
                    let Some(i) =
                        crate::process::procfs::ns_tids(pid, t).and_then(|v| v.last().copied())
                    else {
                        continue;
                    };
                    self.ns_tids.insert(t, i);
                    i
                }
            };
            pairs.push((t, inside));
        }
        Some(NsTids { pairs })
    }
}

/// glibc 2.36 on x86-64 keeps `tid` here; tried first, then the rest of the struct is searched.
const GLIBC_TID_OFFSET: u64 = 0x2d0;

impl TidResolver {
    fn resolve_offset(&mut self, mem: &dyn Memory, idents: &[u64], tids: &[i32]) -> Option<u64> {
        if let Some(o) = self.offset {
            return Some(o);
        }
        let fits = |off: u64| {
            idents.iter().all(|&p| {
                mem.read_i32(p + off)
                    .map(|t| tids.contains(&t))
                    .unwrap_or(false)
            })
        };
        let candidates = std::iter::once(GLIBC_TID_OFFSET).chain((0..0x800u64).step_by(4));
        for off in candidates {
            if fits(off) {
                self.offset = Some(off);
                return Some(off);
            }
        }
        None
    }
}

/// Walks of the thread list a one-shot reader (dump, locals, exceptions, tasks) tries before giving
/// up.
pub const SETTLE_TRIES: usize = 10;

/// The pause before a one-shot reader's try `attempt` (0: none): 1, 2, 4, 8 ms, then 16 ms each,
/// about 0.1 s in all. A target preempted in the middle of a change (a thread exiting, a dict
/// resized) stays half-changed until it gets a CPU again, which on a loaded host takes tens of
/// milliseconds.
pub fn settle_pause(attempt: usize) {
    if attempt > 0 {
        std::thread::sleep(std::time::Duration::from_millis(1 << (attempt - 1).min(4)));
    }
}

/// A one-shot reader's failed read as an error: the target exited, or (still there) what went
/// wrong; never "exited" for a process that is still running.
pub fn unreadable(pid: i32, e: &io::Error) -> crate::Error {
    if crate::process::procfs::is_gone(pid) {
        crate::Error::new(crate::ErrorKind::TargetExited, format!("pid {pid} exited"))
    } else {
        crate::Error::new(
            crate::ErrorKind::Internal,
            format!("pid {pid}: could not read its threads: {e}"),
        )
    }
}

/// The process's OS threads and Python threads, for a one-shot reader. A thread that exits while
/// the list is walked frees its thread state, and the walk can then read freed or unmapped memory:
/// that says nothing about the target, so the threads are listed and walked again (after a pause,
/// so the exit can finish: `settle_pause`), up to `SETTLE_TRIES` times. Returns at once if the
/// process is gone.
pub fn python_threads_settled(
    interp: &Interpreter,
    resolver: &mut TidResolver,
) -> io::Result<(Vec<i32>, Vec<PyThread>)> {
    let mut last = None;
    for attempt in 0..SETTLE_TRIES {
        settle_pause(attempt);
        let tids = interp.thread_ids()?;
        match python_threads(interp, resolver, &tids) {
            Ok(threads) => return Ok((tids, threads)),
            Err(e)
                if interp.mem.core().is_some() || crate::process::procfs::is_gone(interp.pid) =>
            {
                return Err(e)
            }
            Err(e) => last = Some(e),
        }
    }
    let e = last.expect("at least one try");
    Err(io::Error::new(
        e.kind(),
        format!("the thread list changed under every one of {SETTLE_TRIES} reads (last: {e})"),
    ))
}

/// Reads every thread state of every interpreter. `tids` is the current /proc task list (for 3.10);
/// the threads' `tid`s are host tids, whatever PID namespace the target runs in.
pub fn python_threads(
    interp: &Interpreter,
    resolver: &mut TidResolver,
    tids: &[i32],
) -> io::Result<Vec<PyThread>> {
    // A core holds the tids its threads had; the process it was taken from may be gone.
    let ns = match interp.mem.core() {
        Some(_) => None,
        None => resolver.ns_tids(interp.pid, tids),
    };
    let Some(ns) = ns else {
        return python_threads_in(interp, resolver, tids);
    };
    let mut out = python_threads_in(interp, resolver, &ns.inside())?;
    for t in out.iter_mut() {
        t.tid = t.tid.and_then(|inside| ns.host(inside));
    }
    Ok(out)
}

/// `python_threads` with `tids` in the target's own numbering.
fn python_threads_in(
    interp: &Interpreter,
    resolver: &mut TidResolver,
    tids: &[i32],
) -> io::Result<Vec<PyThread>> {
    let l = &interp.layout;
    let mem = &interp.mem;
    let mut out = Vec::new();
    let mut is = mem.read_u64(interp.runtime + l.runtime_interpreters_head)?;
    let mut interps = 0;
    let frame_off = l.tstate_current_frame.or(l.tstate_cframe);
    let head_offs = match (frame_off, l.tstate_datastack_chunk, l.tstate_datastack_top) {
        (Some(f), Some(c), Some(t)) => Some((f, c, t)),
        _ => None,
    };
    // One read per thread state serves the list and the start of the walk (all within ~320 bytes).
    let bottom_exc = l.tstate_exc_state + l.err_stackitem_exc;
    let read_len = [
        Some(l.tstate_next),
        Some(l.tstate_thread_id),
        l.tstate_native_thread_id,
        head_offs.map(|h| h.0.max(h.1).max(h.2)),
        Some(l.tstate_exc_info),
        Some(bottom_exc),
        l.tstate_holds_gil,
        l.tstate_gil_requested,
    ]
    .iter()
    .flatten()
    .max()
    .copied()
    .unwrap() as usize
        + 8;
    let mut buf = vec![0u8; read_len];
    while is != 0 && interps < 64 {
        let mut ts = mem.read_u64(is + l.interp_threads_head)?;
        while ts != 0 {
            if out.len() >= MAX_THREADS {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "thread list too long",
                ));
            }
            mem.read(ts, &mut buf)?;
            let at = |off: u64| {
                u64::from_le_bytes(buf[off as usize..off as usize + 8].try_into().unwrap())
            };
            let ident = at(l.tstate_thread_id);
            let tid = l
                .tstate_native_thread_id
                .map(|o| at(o) as i32)
                .filter(|&t| t > 0);
            let head = head_offs.map(|(f, c, t)| WalkHead {
                frame_ptr: at(f),
                chunk: at(c),
                top: at(t),
            });
            let exc = ExcHead {
                info: at(l.tstate_exc_info),
                bottom_exc: at(bottom_exc),
            };
            let flag =
                |off: Option<u64>| off.map(|o| buf[o as usize..o as usize + 4] != [0, 0, 0, 0]);
            let gil_flags = GilFlags {
                holds: flag(l.tstate_holds_gil),
                requested: flag(l.tstate_gil_requested),
            };
            out.push(PyThread {
                tstate: ts,
                ident,
                tid,
                head,
                exc,
                gil_flags,
            });
            let next = at(l.tstate_next);
            if next == ts {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "thread list cycle",
                ));
            }
            ts = next;
        }
        is = mem.read_u64(is + l.interp_next)?;
        interps += 1;
    }
    // 3.11+: `native_thread_id` is set when the thread state is bound to its thread, and again in a
    // forked child only by `PyOS_AfterFork_Child`, which an embedding server may not call (uWSGI
    // does not unless told to): a worker's main thread state then carries its master's id. Such a
    // state, and 3.10's (no native id), are mapped through glibc's `struct pthread` instead, which
    // the child's glibc keeps right.
    let stale = |t: &PyThread| t.ident != 0 && !t.tid.is_some_and(|x| tids.contains(&x));
    if l.tstate_native_thread_id.is_some() && out.iter().any(stale) && !tids.is_empty() {
        let idents: Vec<u64> = out
            .iter()
            .filter(|t| t.ident != 0 && t.tid.is_some_and(|x| tids.contains(&x)))
            .map(|t| t.ident)
            .collect();
        let off = if idents.is_empty() {
            Some(GLIBC_TID_OFFSET)
        } else {
            resolver.resolve_offset(mem, &idents, tids)
        };
        if let Some(off) = off {
            for t in out
                .iter_mut()
                .filter(|t| t.ident != 0 && !t.tid.is_some_and(|x| tids.contains(&x)))
            {
                t.tid = mem
                    .read_i32(t.ident + off)
                    .ok()
                    .filter(|x| tids.contains(x));
            }
        }
    }
    if l.tstate_native_thread_id.is_none() {
        let idents: Vec<u64> = out.iter().map(|t| t.ident).filter(|&p| p != 0).collect();
        if let Some(off) = resolver.resolve_offset(mem, &idents, tids) {
            for t in out.iter_mut() {
                if t.ident != 0 {
                    t.tid = mem
                        .read_i32(t.ident + off)
                        .ok()
                        .filter(|x| tids.contains(x));
                }
            }
        }
    }
    Ok(out)
}
