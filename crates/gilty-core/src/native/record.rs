//! Native stacks during `gilty record --native`: each sampler pass, every Python thread's stack as
//! read in the pass is joined with a native stack of the same moment, or keeps its Python stack
//! alone and is counted as missing. The same-moment rules are those of `snapshot.rs`, with the
//! sampler's own passes as the reads:
//!
//! - a running thread: a kernel sample (`perf.rs`, one task-clock event per thread, opened as
//!   threads appear) stamped between the start of the thread's read in the previous pass and the
//!   end of its read in this one, both reads giving the same frames, the same evaluation-loop calls
//!   and the innermost frame at the same instruction (or, while every read since gave that stack, a
//!   sample since the first of them); with no new sample, the run's last one while the thread has
//!   had less than a sampling period of CPU time since it (the kernel samples per CPU time: none is
//!   due);
//! - a thread blocked in a system call: its registers and stack memory from `/proc` (`blocked.rs`),
//!   with its CPU time unchanged from before its Python read to after the native read (it did not
//!   run in between). Kept while its CPU time and Python stack stay the same: nothing can have
//!   moved.
//!
//! A thread without a Python stack (a C library's pool thread, such as OpenBLAS's) has only its C
//! stack, nothing to match: the latest kernel sample of the pass (or, with none, the last one while
//! it has had less than a sampling period of CPU time since), or its `/proc` registers while
//! blocked.
//!
//! A sample left Python-only is counted by why (`Miss`), so a report can say what held it back.
//!
//! The unwinder (its modules' unwind tables and symbols) lives as long as the recording; the module
//! list is read again when an address falls in no known module and every `MAPS_EVERY`, so a library
//! unloaded or replaced is dropped.

use super::blocked::read_blocked;
use super::merge::{merge, merge_truncated, MixedFrame};
use super::perf::{permission_hint, PerfSample, PerfSampler};
use super::unwind::{reached_thread_start, NativeFrame, ProcessUnwinder, Regs};
use crate::interp::frames::Frame;
use crate::interp::interpreter::Interpreter;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The module list is read again this often even when every address is known (a library replaced at
/// the same address, one unloaded).
const MAPS_EVERY: Duration = Duration::from_secs(1);
/// Bytes of user stack the kernel copies per sample, the most it copies: a 3.10 evaluation loop
/// takes a few hundred bytes a Python call, so deep recursion may be cut (then the unwind ends
/// early and the frames below are `[unknown]`, counted as partial), and a NumPy ufunc calling
/// OpenBLAS's dgemm takes more than 32 KiB below its Python frame (32 KiB cut 153 of 160 such
/// samples, this none). A 16 KiB copy cost the target no less CPU than 32 KiB in
/// bench/record_native.py (the sample's interrupt is the cost, not the copy), so the deepest one is
/// taken.
const STACK_BYTES: u32 = 65528;
/// Shortest kernel sampling period (of a thread's CPU time): each kernel sample is an interrupt in
/// the target, and 1,000 per CPU-second cost it 5-8 % of its CPU time; 500 cost it no more than the
/// noise (docs/benchmarks.md). Above 500 Hz a running thread has a fresh sample every other pass or
/// so; a pass without one takes the run's last while the stack has not moved (`running`).
const MIN_PERIOD_NS: u64 = 2_000_000;

/// A native frame's `Frame::line`: `-2 - offset`, so at most -2 (a Python frame's line is at least
/// -1, its "no line"). The offset is the function's start in its file, or the address's own where
/// the file has no symbol.
pub fn native_line(offset: u64) -> i32 {
    -2 - (offset.min(i32::MAX as u64 - 2) as i32)
}

pub fn is_native(f: &Frame) -> bool {
    f.line <= -2
}

/// A Python stack as one pass read it, with what the same-moment checks compare.
#[derive(Clone)]
pub struct PyRead {
    pub frames: Arc<Vec<Frame>>,
    /// Per frame: the outermost of its evaluation-loop call (`FrameWalker::call_ends`).
    pub ends: Arc<Vec<bool>>,
    /// The innermost frame's (code object, instruction).
    pub top: Option<(u64, i64)>,
    /// CLOCK_MONOTONIC ns around the read (for a kept stack: its pass's start and end).
    pub start_ns: u64,
    pub end_ns: u64,
    /// The thread's CPU time read before its stack (None when not read this pass).
    pub run_ns_before: Option<u64>,
    /// The interned Python stack.
    pub stack_id: u32,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct NativeCounts {
    /// Samples whose stack has its native part.
    pub matched: u64,
    /// ... of which the unwind stopped early: `[unknown]` stands for the frames it could not reach.
    pub partial: u64,
    /// Samples of a thread with a Python stack whose native part could not be matched: kept
    /// Python-only.
    pub missing: u64,
    /// ... of which its Python stack differed from the read before (or there was none): no two
    /// equal reads bracket a kernel sample.
    pub missing_moved: u64,
    /// ... two equal reads, but no kernel sample between them, and the thread had run a sampling
    /// period or more since its last one (the sample was not written yet, or the ring was full).
    pub missing_no_sample: u64,
    /// ... a kernel sample whose unwound C stack did not agree with the Python stack (the unwind
    /// stopped or strayed, a stack copy too short for the recursion).
    pub missing_unmatched: u64,
    /// Samples of threads without a Python stack that got their C stack.
    pub bare: u64,
    /// Kernel samples dropped by the kernel (ring full).
    pub lost: u64,
}

/// What a match gives: the mixed stack and whether its unwind stopped early.
pub type Mixed = (Vec<MixedFrame>, bool);

/// Why a sample kept its Python stack alone (see `NativeCounts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Miss {
    Moved,
    NoSample,
    Unmatched,
}

/// A run of passes whose reads of one thread gave the same stack, and the last mixed stack joined
/// in it with the thread's CPU time at the read that took it.
struct Run {
    start_ns: u64,
    last: Option<(Arc<Mixed>, u64)>,
}

struct BlockedKept {
    run_ns: u64,
    py_stack: u32,
    mixed: Arc<Mixed>,
}

pub struct NativeRecorder {
    pid: i32,
    perf: PerfSampler,
    unwinder: ProcessUnwinder,
    interp_files: Vec<String>,
    samples: HashMap<i32, Vec<PerfSample>>,
    drained: Vec<PerfSample>,
    prev: HashMap<i32, PyRead>,
    kept: HashMap<i32, BlockedKept>,
    runs: HashMap<i32, Run>,
    /// Threads without a Python stack: their last C stack and CPU time at its sample.
    bare: HashMap<i32, (Arc<Mixed>, u64)>,
    period_ns: u64,
    tids: Vec<i32>,
    last_maps: Instant,
    pub counts: NativeCounts,
}

impl NativeRecorder {
    /// Opens a sampling event on each of `tids`. Err: one line saying what to change (perf
    /// refused).
    pub fn start(
        interp: &Interpreter,
        tids: &[i32],
        period: Duration,
    ) -> Result<NativeRecorder, String> {
        let pid = interp.pid;
        let unwinder = ProcessUnwinder::new(pid).map_err(|e| e.message)?;
        // About one kernel sample per pass of a thread running all the time, up to 500 per
        // CPU-second (each is a timer interrupt in the target: its cost); a pass that finds none
        // takes the run's last (`running`).
        let period_ns = (period.as_nanos() as u64).max(MIN_PERIOD_NS);
        let mut r = NativeRecorder {
            pid,
            perf: PerfSampler::new(period_ns, STACK_BYTES),
            unwinder,
            interp_files: vec![interp.binary.clone(), interp.executable.clone()],
            samples: HashMap::new(),
            drained: Vec::new(),
            prev: HashMap::new(),
            kept: HashMap::new(),
            runs: HashMap::new(),
            bare: HashMap::new(),
            period_ns,
            tids: Vec::new(),
            last_maps: Instant::now(),
            counts: NativeCounts::default(),
        };
        for &tid in tids {
            match r.perf.add_thread(tid) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => return Err(permission_hint(&e)),
            }
        }
        r.tids = tids.to_vec();
        Ok(r)
    }

    /// Follows the thread list: events for new threads, closed for gone ones.
    pub fn threads(&mut self, tids: &[i32]) {
        if tids == self.tids.as_slice() {
            return;
        }
        for &tid in tids {
            // A thread that exits before its event opens is simply not sampled.
            let _ = self.perf.add_thread(tid);
        }
        self.perf.retain(tids);
        self.prev.retain(|t, _| tids.contains(t));
        self.kept.retain(|t, _| tids.contains(t));
        self.runs.retain(|t, _| tids.contains(t));
        self.bare.retain(|t, _| tids.contains(t));
        self.tids = tids.to_vec();
    }

    /// Starts a pass: takes every kernel sample written since the last one.
    pub fn begin_pass(&mut self) {
        for v in self.samples.values_mut() {
            v.clear();
        }
        self.drained.clear();
        self.perf.drain(&mut self.drained);
        self.counts.lost = self.perf.lost;
        for s in self.drained.drain(..) {
            self.samples.entry(s.tid).or_default().push(s);
        }
        if self.last_maps.elapsed() >= MAPS_EVERY {
            self.last_maps = Instant::now();
            let _ = self.unwinder.refresh();
        }
    }

    /// A thread without a Python stack this pass: its last read no longer brackets anything.
    pub fn forget(&mut self, tid: i32) {
        self.prev.remove(&tid);
        self.runs.remove(&tid);
    }

    /// The mixed stack of `tid` at this pass's read, or None (counted as missing).
    pub fn match_thread(
        &mut self,
        interp: &Interpreter,
        tid: i32,
        read: PyRead,
        blocked: bool,
    ) -> Option<Arc<Mixed>> {
        let got = if blocked {
            self.blocked(interp, tid, &read).ok_or(Miss::Unmatched)
        } else {
            Err(Miss::Unmatched)
        };
        let got = got.or_else(|_| self.running(tid, &read));
        self.prev.insert(tid, read);
        match got {
            Ok(m) => {
                self.counts.matched += 1;
                if m.1 {
                    self.counts.partial += 1;
                }
                Some(m)
            }
            Err(why) => {
                self.counts.missing += 1;
                match why {
                    Miss::Moved => self.counts.missing_moved += 1,
                    Miss::NoSample => self.counts.missing_no_sample += 1,
                    Miss::Unmatched => self.counts.missing_unmatched += 1,
                }
                None
            }
        }
    }

    /// The C stack of a thread without a Python stack this pass, or None (not counted: such a
    /// thread had no stack before `--native` either).
    pub fn bare_thread(
        &mut self,
        interp: &Interpreter,
        tid: i32,
        blocked: bool,
    ) -> Option<Arc<Mixed>> {
        self.forget(tid);
        let got = self.bare_stack(interp, tid, blocked);
        if let Some(m) = &got {
            self.counts.bare += 1;
            if m.1 {
                self.counts.partial += 1;
            }
        }
        got
    }

    fn bare_stack(&mut self, interp: &Interpreter, tid: i32, blocked: bool) -> Option<Arc<Mixed>> {
        let cpu = run_ns(self.pid, tid)?;
        if let Some((m, then)) = self.bare.get(&tid) {
            // Blocked all along (no CPU time since), or less than a period of it: no newer sample
            // is due, the last one stands.
            if cpu == *then
                || (!blocked
                    && cpu.saturating_sub(*then) < self.period_ns
                    && self.samples.get(&tid).is_none_or(|v| v.is_empty()))
            {
                return Some(Arc::clone(m));
            }
        }
        let (regs, stack) = if blocked {
            let b = read_blocked(self.pid, tid, &interp.mem)?;
            if run_ns(self.pid, tid)? != cpu {
                return None; // it ran while its registers were read
            }
            (b.regs, b.stack)
        } else {
            let v = self.samples.get_mut(&tid)?;
            let s = v.last_mut()?;
            (s.regs, std::mem::take(&mut s.stack))
        };
        let (native, complete) = self.unwound(regs, &stack);
        if native.is_empty() {
            return None;
        }
        let complete = complete || reached_thread_start(&native);
        let m = Arc::new((
            native.into_iter().map(MixedFrame::Native).collect(),
            !complete,
        ));
        self.bare.insert(tid, (Arc::clone(&m), cpu));
        Some(m)
    }

    fn running(&mut self, tid: i32, read: &PyRead) -> Result<Arc<Mixed>, Miss> {
        let same = self.prev.get(&tid).filter(|prev| {
            read.top.is_some()
                && prev.top == read.top
                && prev.ends == read.ends
                && (Arc::ptr_eq(&prev.frames, &read.frames) || prev.frames == read.frames)
        });
        let Some(prev) = same else {
            self.runs.remove(&tid);
            return Err(Miss::Moved);
        };
        // Every read since the run's start gave this stack: a sample anywhere in it lies between
        // two equal reads.
        let run = self.runs.entry(tid).or_insert(Run {
            start_ns: prev.start_ns,
            last: None,
        });
        let (from, to) = (run.start_ns, read.end_ns);
        // The latest sample inside the bracket: the nearest to the stack the pass reports.
        let fresh = self.samples.get_mut(&tid).and_then(|v| {
            let i = v
                .iter()
                .rposition(|s| s.time_ns >= from && s.time_ns <= to)?;
            Some((v[i].regs, std::mem::take(&mut v[i].stack)))
        });
        if let Some((regs, stack)) = fresh {
            let got = self.merged(regs, &stack, read).map(Arc::new);
            if let (Some(m), Some(run)) = (&got, self.runs.get_mut(&tid)) {
                run.last = read.run_ns_before.map(|cpu| (Arc::clone(m), cpu));
            }
            return got.ok_or(Miss::Unmatched);
        }
        // No sample since the last pass: the kernel samples every `period_ns` of the thread's CPU
        // time, so a thread that has run less than that since the run's last sample (it waited for
        // a CPU) has none newer; that one, of the same Python stack, stands for it.
        let last = self.runs.get(&tid).and_then(|run| run.last.as_ref());
        match (last, read.run_ns_before) {
            (Some((m, cpu_then)), Some(cpu_now))
                if cpu_now.saturating_sub(*cpu_then) < self.period_ns =>
            {
                Ok(Arc::clone(m))
            }
            _ => Err(Miss::NoSample),
        }
    }

    fn blocked(&mut self, interp: &Interpreter, tid: i32, read: &PyRead) -> Option<Arc<Mixed>> {
        let before = match read.run_ns_before {
            Some(r) => r,
            None => run_ns(self.pid, tid)?,
        };
        if let Some(k) = self.kept.get(&tid) {
            if k.run_ns == before && k.py_stack == read.stack_id {
                return Some(Arc::clone(&k.mixed));
            }
        }
        let b = read_blocked(self.pid, tid, &interp.mem)?;
        if run_ns(self.pid, tid)? != before {
            return None; // it ran: the native and Python reads may be different moments
        }
        let mixed = Arc::new(self.merged(b.regs, &b.stack, read)?);
        self.kept.insert(
            tid,
            BlockedKept {
                run_ns: before,
                py_stack: read.stack_id,
                mixed: Arc::clone(&mixed),
            },
        );
        Some(mixed)
    }

    /// The named C frames of a copied stack, innermost first, and whether the unwind reached its
    /// end.
    fn unwound(&mut self, regs: Regs, stack: &[u8]) -> (Vec<NativeFrame>, bool) {
        let (addrs, complete) = self.unwinder.unwind(regs, regs.sp, stack);
        let raw: Vec<u64> = addrs.iter().map(|a| a.address()).collect();
        self.unwinder.ensure_known(&raw);
        let mut native: Vec<NativeFrame> = addrs
            .into_iter()
            .map(|a| self.unwinder.symbolize_function(a))
            .collect();
        let mut complete = complete;
        if native.first().is_some_and(|f| f.library.is_none()) {
            // The thread runs code in no file (JIT-like anonymous memory, a library gone): the
            // frames framehop finds beyond it are a frame-pointer guess, not trusted.
            native.truncate(1);
            complete = false;
        }
        (native, complete)
    }

    fn merged(&mut self, regs: Regs, stack: &[u8], read: &PyRead) -> Option<Mixed> {
        let (native, complete) = self.unwound(regs, stack);
        let files: Vec<&str> = self.interp_files.iter().map(|s| s.as_str()).collect();
        match merge(&native, &read.frames, &read.ends, &files) {
            Ok(m) => Some((m, false)),
            Err(_) if !complete => merge_truncated(&native, &read.frames, &read.ends, &files)
                .ok()
                .map(|m| (m, true)),
            Err(_) => None,
        }
    }

    pub fn thread_count(&self) -> usize {
        self.perf.thread_count()
    }
}

/// A thread's CPU time so far (`/proc/PID/task/TID/schedstat`, first field).
fn run_ns(pid: i32, tid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// A mixed frame as an aggregate frame: Python frames as they are; a native one named by its label,
/// its file's base name, and `native_line` of its offset. A native frame with a source line has
/// `library/source-path:line` as its file: a base name holds no `/`, so the first one splits them,
/// and frames of one function at different lines stay apart, as Python frames do.
pub fn as_frame(f: &MixedFrame) -> Frame {
    match f {
        MixedFrame::Python(p) => p.clone(),
        MixedFrame::Native(n) => {
            let lib = n.library_name().unwrap_or("");
            let file = match (&n.file, n.line) {
                (Some(src), Some(line)) if !lib.is_empty() => format!("{lib}/{src}:{line}"),
                _ => lib.to_owned(),
            };
            Frame {
                function: n.label(),
                file,
                line: native_line(if n.library.is_some() { n.offset } else { 0 }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_lines_are_negative_and_reversible() {
        assert_eq!(native_line(0), -2);
        assert_eq!(native_line(0x1181), -2 - 0x1181);
        assert!(native_line(u64::MAX) < 0);
        let f = as_frame(&MixedFrame::Native(NativeFrame {
            function: Some("inner_spin".into()),
            library: Some("/tmp/x/ext.so".into()),
            offset: 0x1181,
            ..Default::default()
        }));
        assert_eq!(
            (f.function.as_str(), f.file.as_str(), f.line),
            ("inner_spin", "ext.so", -2 - 0x1181)
        );
        assert!(is_native(&f));
        let unknown = as_frame(&MixedFrame::Native(NativeFrame {
            function: None,
            library: None,
            offset: 0x7fff_0000_1234,
            ..Default::default()
        }));
        assert_eq!(
            (
                unknown.function.as_str(),
                unknown.file.as_str(),
                unknown.line
            ),
            ("[unknown]", "", -2)
        );
        let with_line = NativeFrame {
            function: Some("inner_spin".into()),
            library: Some("/tmp/x/ext.so".into()),
            offset: 0x1181,
            file: Some("/src/native_chain.c".into()),
            line: Some(42),
        };
        let f = as_frame(&MixedFrame::Native(with_line));
        assert_eq!(
            (f.file.as_str(), f.line),
            ("ext.so//src/native_chain.c:42", -2 - 0x1181)
        );
    }
}
