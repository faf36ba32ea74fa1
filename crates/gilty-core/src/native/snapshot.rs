//! One mixed (native + Python) stack per Python thread, for `gilty dump --native`, never stopping
//! the target. What makes a native stack and a Python stack one moment:
//!
//! - a thread blocked in a system call: its registers and stack memory from `/proc`, then its
//!   Python stack, with its context-switch count unchanged from before the first read to after the
//!   last (it did not run, so nothing moved);
//! - a running thread: a kernel sample (`perf.rs`) taken between two reads of its Python stack
//!   `BRACKET` apart that are the same frames with the innermost at the same instruction;
//! - and in both, the native stack's evaluation-loop frames match the Python stack's calls
//!   (`merge.rs`).
//!
//! Anything else keeps the Python stack and says why the native part is missing.
//!
//! A thread with no Python thread state (a C library's pool thread) has only its C stack, nothing
//! to match: its `/proc` registers while blocked (not switched meanwhile), else a kernel sample.

use super::blocked::{read_blocked, switches};
use super::merge::{merge, merge_truncated, MixedFrame};
use super::perf::{permission_hint, PerfSampler, DEFAULT_STACK_BYTES};
use super::unwind::{reached_thread_start, NativeFrame, ProcessUnwinder, Regs};
use crate::clock::monotonic_ns;
use crate::error::{Error, ErrorKind};
use crate::interp::frames::{CodeCache, Frame, FrameWalker};
use crate::interp::interpreter::Interpreter;
use crate::interp::threads::{python_threads_settled, TidResolver};
use crate::process::memory::Memory;
use std::time::{Duration, Instant};

/// Kernel sampling period (CPU time) while a dump looks at one running thread.
const DUMP_PERIOD_NS: u64 = 200_000;
/// Time between the two Python reads that bracket a kernel sample: about two sampling periods, so a
/// running thread is sampled in it, and short, so the thread has little time to move.
const BRACKET: Duration = Duration::from_micros(400);

#[derive(Debug, Clone)]
pub struct NativeThread {
    pub tid: i32,
    /// The mixed stack, innermost first, or why there is none.
    pub stack: Result<Vec<MixedFrame>, String>,
    /// With a stack: why part of it is `[unknown]` (the unwind stopped early), if it is.
    pub partial: Option<String>,
}

type Walk = (Vec<Frame>, Vec<bool>, Option<(u64, i64)>);

fn walk(interp: &Interpreter, cache: &mut CodeCache, tstate: u64) -> Option<Walk> {
    let walker = FrameWalker::new(&interp.mem, &interp.layout, interp.code_type);
    cache.new_pass();
    let (frames, top) = walker.walk(tstate, cache).ok()?;
    let ends = walker.call_ends.take();
    Some((frames, ends, top))
}

/// Unwinds a copied stack and names its frames, innermost first; and whether the unwind reached
/// the stack's end.
pub fn native_frames(
    unwinder: &mut ProcessUnwinder,
    regs: Regs,
    stack: &[u8],
) -> (Vec<NativeFrame>, bool) {
    let (addrs, complete) = unwinder.unwind(regs, regs.sp, stack);
    let raw: Vec<u64> = addrs.iter().map(|a| a.address()).collect();
    unwinder.ensure_known(&raw);
    (
        addrs.into_iter().map(|a| unwinder.symbolize(a)).collect(),
        complete,
    )
}

/// A native stack and the Python stack of the same moment, or why there is none.
type Matched = Result<(Regs, Vec<u8>, Walk), String>;

/// A thread blocked in a system call: registers and stack from /proc, the Python stack read after
/// them, and the context-switch count unchanged from before the registers to after the Python read.
fn blocked_moment(
    interp: &Interpreter,
    cache: &mut CodeCache,
    tid: i32,
    tstate: u64,
) -> Option<Matched> {
    let b = read_blocked(interp.pid, tid, &interp.mem)?;
    let py = walk(interp, cache, tstate);
    let after = switches(interp.pid, tid);
    Some(match py {
        Some(py) if after == Some(b.switches_before) => Ok((b.regs, b.stack, py)),
        Some(_) => Err("the thread ran while its blocked stack was read".to_owned()),
        None => Err("the Python stack could not be read".to_owned()),
    })
}

/// A running thread: a kernel sample taken between two Python reads `BRACKET` apart that agree
/// (same frames, innermost at the same instruction), tried until `deadline`.
fn sampled_moment(
    interp: &Interpreter,
    cache: &mut CodeCache,
    perf: &mut PerfSampler,
    tid: i32,
    tstate: u64,
    deadline: Instant,
) -> Matched {
    let mut samples = Vec::new();
    let mut moved = 0;
    let mut unreadable = 0;
    loop {
        samples.clear();
        perf.drain(&mut samples); // older samples: not bracketed
        let t0 = monotonic_ns();
        let first = walk(interp, cache, tstate);
        std::thread::sleep(BRACKET);
        let second = walk(interp, cache, tstate);
        let t1 = monotonic_ns();
        samples.clear();
        perf.drain(&mut samples);
        let inside = samples
            .iter()
            .find(|s| s.tid == tid && s.time_ns >= t0 && s.time_ns <= t1);
        match (first, second, inside) {
            (Some(a), Some(b), Some(s)) if a == b => return Ok((s.regs, s.stack.clone(), a)),
            (Some(a), Some(b), _) if a != b => moved += 1,
            // A walk of a running thread can meet its stack mid-change: tried again, as a move is.
            (None, _, _) | (_, None, _) => unreadable += 1,
            _ => {}
        }
        if Instant::now() >= deadline {
            return Err(if unreadable > 0 && moved == 0 {
                format!("the Python stack could not be read ({unreadable} tries)")
            } else if moved > 0 {
                format!("the Python stack moved around every kernel sample ({moved} tries)")
            } else {
                "no kernel sample of the thread (not running, not in a system call)".to_owned()
            });
        }
    }
}

/// The merged stack of one matched moment, and why its native part is cut short, if it is.
fn merged(
    unwinder: &mut ProcessUnwinder,
    matched: Matched,
    interp_files: &[&str],
) -> (Result<Vec<MixedFrame>, String>, Option<String>) {
    let mut partial = None;
    let stack = matched.and_then(|(regs, stack, (py, ends, _))| {
        let (native, complete) = native_frames(unwinder, regs, &stack);
        match merge(&native, &py, &ends, interp_files) {
            Ok(m) => Ok(m),
            Err(_) if !complete => {
                let at = native
                    .last()
                    .map(|f| f.label())
                    .unwrap_or_else(|| "[unknown]".into());
                partial = Some(format!(
                    "the native unwind stopped after {at} (no unwind information there)"
                ));
                merge_truncated(&native, &py, &ends, interp_files).map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        }
    });
    (stack, partial)
}

/// Mixed stacks of every Python thread, each looked at for at most `wait`. Err: kernel sampling is
/// not permitted (what to change), the target exited, or its thread list could not be read.
pub fn take(
    interp: &Interpreter,
    cache: &mut CodeCache,
    resolver: &mut TidResolver,
    wait: Duration,
) -> crate::Result<Vec<NativeThread>> {
    let pid = interp.pid;
    let (_, threads) = python_threads_settled(interp, resolver)
        .map_err(|e| crate::interp::threads::unreadable(pid, &e))?;
    let mut unwinder = ProcessUnwinder::new(pid)?;
    let interp_files = [interp.binary.as_str(), interp.executable.as_str()];
    let mut out = Vec::new();
    for t in &threads {
        let Some(tid) = t.tid else { continue };
        let (stack, partial) = match blocked_moment(interp, cache, tid, t.tstate) {
            Some(m) => merged(&mut unwinder, m, &interp_files),
            None => {
                // One thread at a time: its events exist only while it is looked at.
                let mut perf = PerfSampler::new(DUMP_PERIOD_NS, DEFAULT_STACK_BYTES);
                match perf.add_thread(tid) {
                    Ok(()) => {
                        let deadline = Instant::now() + wait;
                        loop {
                            let m =
                                sampled_moment(interp, cache, &mut perf, tid, t.tstate, deadline);
                            let got = merged(&mut unwinder, m, &interp_files);
                            // A count mismatch means the sample and the reads were not the same
                            // moment after all (the thread left and re-entered a call in between):
                            // looked at again while time remains, else said.
                            if got.0.is_ok() || got.1.is_some() || Instant::now() >= deadline {
                                break got;
                            }
                        }
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                        (Err("the thread exited".to_owned()), None)
                    }
                    Err(e) => {
                        return Err(Error::new(ErrorKind::PermissionDenied, permission_hint(&e)))
                    }
                }
            }
        };
        out.push(NativeThread {
            tid,
            stack,
            partial,
        });
    }
    let python: Vec<i32> = threads.iter().filter_map(|t| t.tid).collect();
    let others: Vec<i32> = crate::process::procfs::thread_ids(pid)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| !python.contains(t))
        .collect();
    for tid in others {
        out.push(bare_thread(interp, &mut unwinder, tid, wait)?);
    }
    Ok(out)
}

/// The C stack of a thread without a Python thread state: its registers from `/proc` while blocked,
/// else the first kernel sample within `wait`. Err: perf refused.
fn bare_thread(
    interp: &Interpreter,
    unwinder: &mut ProcessUnwinder,
    tid: i32,
    wait: Duration,
) -> crate::Result<NativeThread> {
    let copied = match read_blocked(interp.pid, tid, &interp.mem) {
        Some(b) if switches(interp.pid, tid) == Some(b.switches_before) => Ok((b.regs, b.stack)),
        Some(_) => Err("the thread ran while its blocked stack was read".to_owned()),
        None => {
            let mut perf = PerfSampler::new(DUMP_PERIOD_NS, DEFAULT_STACK_BYTES);
            match perf.add_thread(tid) {
                Ok(()) => first_sample(&mut perf, tid, Instant::now() + wait),
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                    Err("the thread exited".to_owned())
                }
                Err(e) => return Err(Error::new(ErrorKind::PermissionDenied, permission_hint(&e))),
            }
        }
    };
    let mut partial = None;
    let stack = copied.map(|(regs, stack)| {
        let (frames, why) = bare_frames(unwinder, regs, &stack);
        partial = why;
        frames
    });
    Ok(NativeThread {
        tid,
        stack,
        partial,
    })
}

/// A C stack alone, and why it is cut short, if it is.
fn bare_frames(
    unwinder: &mut ProcessUnwinder,
    regs: Regs,
    stack: &[u8],
) -> (Vec<MixedFrame>, Option<String>) {
    let (native, complete) = native_frames(unwinder, regs, stack);
    let mut partial = None;
    if !complete && !reached_thread_start(&native) {
        let at = native
            .last()
            .map(|f| f.label())
            .unwrap_or_else(|| "[unknown]".into());
        partial = Some(format!(
            "the native unwind stopped after {at} (no unwind information there)"
        ));
    }
    (
        native.into_iter().map(MixedFrame::Native).collect(),
        partial,
    )
}

/// A thread of a core file: registers and stack memory from the core, its Python stack (when it
/// has a thread state) from the same memory, so one moment by construction.
pub fn core_thread(
    interp: &Interpreter,
    unwinder: &mut ProcessUnwinder,
    cache: &mut CodeCache,
    tid: i32,
    regs: Regs,
    tstate: Option<u64>,
) -> NativeThread {
    let interp_files = [interp.binary.as_str(), interp.executable.as_str()];
    // As much of `STACK_BYTES` as the core holds above the stack pointer (the stack's top page
    // ends the segment).
    let stack = [super::blocked::STACK_BYTES, 8192, 4096]
        .iter()
        .find_map(|&n| interp.mem.read_vec(regs.sp, n).ok());
    let (stack, partial) = match (regs.ip, stack) {
        (0, _) => (
            Err("the core has no registers for this thread".to_owned()),
            None,
        ),
        (_, None) => (
            Err("the core does not hold the thread's stack".to_owned()),
            None,
        ),
        (_, Some(bytes)) => match tstate {
            Some(ts) => {
                let matched = walk(interp, cache, ts)
                    .map(|py| (regs, bytes, py))
                    .ok_or_else(|| "the Python stack could not be read".to_owned());
                merged(unwinder, matched, &interp_files)
            }
            None => {
                let (frames, why) = bare_frames(unwinder, regs, &bytes);
                (Ok(frames), why)
            }
        },
    };
    NativeThread {
        tid,
        stack,
        partial,
    }
}

/// The registers and stack of the first kernel sample of `tid` before `deadline`.
fn first_sample(
    perf: &mut PerfSampler,
    tid: i32,
    deadline: Instant,
) -> Result<(Regs, Vec<u8>), String> {
    let mut samples = Vec::new();
    loop {
        perf.drain(&mut samples);
        if let Some(s) = samples.iter_mut().rev().find(|s| s.tid == tid) {
            return Ok((s.regs, std::mem::take(&mut s.stack)));
        }
        if Instant::now() >= deadline {
            return Err(
                "no kernel sample of the thread (not running, not in a system call)".to_owned(),
            );
        }
        std::thread::sleep(BRACKET);
    }
}
