//! One mixed (native + Python) stack per Python thread, for `gilty dump --native`, never stopping
//! the target.
//!
//! Per thread, in this order: a blocked thread's registers and stack (`blocked.rs`), its Python stack
//! (first read), then kernel samples of every thread for up to `wait` (a running thread is sampled
//! within a millisecond of CPU time), then its Python stack again (second read). A kernel sample was
//! taken between the two reads; it is merged only when both reads are the same stack, the innermost
//! frame at the same instruction, and the native stack's evaluation-loop frames match the Python
//! stack's calls (`merge.rs`). A blocked thread's copy is merged when its context-switch count did not
//! move from before its registers to after the second read. Anything else keeps the Python stack
//! and says why the native part is missing.

use super::blocked::{read_blocked, switches, BlockedStack};
use super::merge::{merge, MixedFrame};
use super::perf::{permission_hint, PerfSample, PerfSampler, DEFAULT_STACK_BYTES};
use super::unwind::{NativeFrame, ProcessUnwinder, Regs};
use crate::frames::{CodeCache, Frame, FrameWalker};
use crate::interpreter::Interpreter;
use crate::process::procfs;
use crate::threads::{python_threads, TidResolver};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Kernel sampling period while a dump waits for running threads.
const DUMP_PERIOD_NS: u64 = 1_000_000;

#[derive(Debug, Clone)]
pub struct NativeThread {
    pub tid: i32,
    /// The mixed stack, innermost first, or why there is none.
    pub stack: Result<Vec<MixedFrame>, String>,
}

type Walk = (Vec<Frame>, Vec<bool>, Option<(u64, i64)>);

fn walk(interp: &Interpreter, cache: &mut CodeCache, tstate: u64) -> Option<Walk> {
    let walker = FrameWalker::new(&interp.mem, &interp.layout, interp.code_type);
    let (frames, top) = walker.walk(tstate, cache).ok()?;
    let ends = walker.call_ends.take();
    Some((frames, ends, top))
}

/// Unwinds a copied stack and names its frames, innermost first; None if the walk stopped before
/// the stack's end with no frame at all.
pub fn native_frames(unwinder: &mut ProcessUnwinder, regs: Regs, stack: &[u8]) -> Vec<NativeFrame> {
    let (addrs, _complete) = unwinder.unwind(regs, regs.sp, stack);
    let raw: Vec<u64> = addrs.iter().map(|a| a.address()).collect();
    unwinder.ensure_known(&raw);
    addrs.into_iter().map(|a| unwinder.symbolize(a)).collect()
}

/// Mixed stacks of every Python thread. Err: kernel sampling is not permitted (what to change).
pub fn take(interp: &Interpreter, cache: &mut CodeCache, resolver: &mut TidResolver, wait: Duration) -> Result<Vec<NativeThread>, String> {
    let pid = interp.pid;
    let gone = |e: std::io::Error| format!("pid {pid}: {e}");
    let tids = procfs::thread_ids(pid).map_err(gone)?;
    let threads = python_threads(interp, resolver, &tids).map_err(gone)?;
    let mut unwinder = ProcessUnwinder::new(pid).map_err(|e| e.message)?;
    let mut perf = PerfSampler::new(DUMP_PERIOD_NS, DEFAULT_STACK_BYTES);

    struct Per {
        tid: i32,
        tstate: u64,
        blocked: Option<BlockedStack>,
        first: Option<Walk>,
    }
    let mut per = Vec::new();
    for t in &threads {
        let Some(tid) = t.tid else { continue };
        if let Err(e) = perf.add_thread(tid) {
            if !matches!(e.raw_os_error(), Some(libc::ESRCH)) {
                return Err(permission_hint(&e));
            }
        }
        cache.new_pass();
        let blocked = read_blocked(pid, tid, &interp.mem);
        let first = walk(interp, cache, t.tstate);
        per.push(Per { tid, tstate: t.tstate, blocked, first });
    }
    // Wait until every thread not seen blocked has a sample, or `wait` passes.
    let start = Instant::now();
    let mut samples: Vec<PerfSample> = Vec::new();
    loop {
        perf.drain(&mut samples);
        let missing = per.iter().any(|p| p.blocked.is_none() && !samples.iter().any(|s| s.tid == p.tid));
        if !missing || start.elapsed() >= wait {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    perf.retain(&[]);
    let mut first_sample: HashMap<i32, PerfSample> = HashMap::new();
    for s in samples {
        first_sample.entry(s.tid).or_insert(s);
    }
    let interp_path = interp.binary.clone();
    let mut out = Vec::new();
    for p in per {
        cache.new_pass();
        let second = walk(interp, cache, p.tstate);
        let switches_after = switches(pid, p.tid);
        let stack = match (&p.first, &second) {
            (Some(a), Some(b)) if a == b => {
                let (py, ends, _) = a;
                let source = if let Some(s) = first_sample.get(&p.tid) {
                    Ok((s.regs, &s.stack[..]))
                } else if let Some(bl) = p.blocked.as_ref().filter(|bl| Some(bl.switches_before) == switches_after) {
                    Ok((bl.regs, &bl.stack[..]))
                } else if p.blocked.is_some() {
                    Err("the thread ran while its blocked stack was read".to_owned())
                } else {
                    Err(format!("no kernel sample of the thread within {} ms (not running, not in a system call)", wait.as_millis()))
                };
                source.and_then(|(regs, stack)| {
                    let native = native_frames(&mut unwinder, regs, stack);
                    merge(&native, py, ends, &interp_path).map_err(|e| e.to_string())
                })
            }
            (Some(_), Some(_)) => Err("the Python stack changed around the native sample".to_owned()),
            _ => Err("the Python stack could not be read".to_owned()),
        };
        out.push(NativeThread { tid: p.tid, stack });
    }
    Ok(out)
}
