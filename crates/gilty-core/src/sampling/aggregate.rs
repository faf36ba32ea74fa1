//! Folding sampling passes into compact data as they are taken: per-thread runs of one state,
//! sample counts per (thread, state, stack), GIL blame counts, and one flag byte per pass. Nothing
//! per (pass, thread) is kept, so an hour of samples costs what its state changes cost, not its
//! samples (at most one run per thread per pass).
//!
//! An `Aggregate` covers one batch. `close()` ends every open run at the batch end, so a batch is
//! self-contained; the Python side merges a run that goes on across the boundary
//! (`Session.add_batch`): runs are sorted by (tid, first_pass) and `thread_slices` says where each
//! thread's runs are, so the merge looks at one run per thread, never at every run.
//! `python/gilty/aggregate.py` is the pure-Python twin of this module and must stay in step with
//! it.

use crate::sampling::classify::ThreadState;
use std::collections::HashMap;
use std::hash::Hash;

/// `stack` of a thread without a Python stack (or a torn one), and `holder_tid` of a pass without a
/// holder.
pub const NONE: i32 = -1;

/// Run state of a stretch of passes in which a thread was not seen (between two runs of it), so
/// that a thread's runs tile its passes and need no first-pass column.
pub const ABSENT: u8 = 255;

/// Pass flag: some thread held the GIL (running Python or collecting garbage).
pub const PASS_GIL_HELD: u8 = 1;
/// Pass flag: some thread was collecting garbage.
pub const PASS_IN_GC: u8 = 2;
/// Pass flag: the thread holding the GIL was waiting for a CPU (`cpu_wait`); PASS_GIL_HELD is set
/// too.
pub const PASS_HOLDER_CPU_WAIT: u8 = 4;

/// One thread in one pass, as classified.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    pub tid: i32,
    pub state: ThreadState,
    pub stack: i32,
    pub syscall: i32,
    /// The thread holds the GIL: `holding_gil`, `gc`, or `cpu_wait` while holding it.
    pub holds: bool,
    /// The thread was handling an exception (in an `except` block, or a `finally` block run by
    /// one).
    pub handling: bool,
}

/// Sample counts keyed in first-seen order, so that the Python side's dicts keep that order.
#[derive(Debug)]
pub struct OrderedCounts<K> {
    index: HashMap<K, usize>,
    pub entries: Vec<(K, u64)>,
}

impl<K> Default for OrderedCounts<K> {
    fn default() -> Self {
        OrderedCounts {
            index: HashMap::new(),
            entries: Vec::new(),
        }
    }
}

impl<K: Hash + Eq + Copy> OrderedCounts<K> {
    pub fn add(&mut self, key: K) {
        self.add_n(key, 1);
    }

    pub fn add_n(&mut self, key: K, n: u64) {
        match self.index.get(&key) {
            Some(&i) => self.entries[i].1 += n,
            None => {
                self.index.insert(key, self.entries.len());
                self.entries.push((key, n));
            }
        }
    }
}

/// Closed runs, column-wise (one vector per field) so they cross to Python as flat buffers.
#[derive(Debug, Default)]
pub struct Runs {
    pub tid: Vec<i32>,
    pub first_pass: Vec<u32>,
    pub passes: Vec<u32>,
    pub state: Vec<u8>,
    pub stack: Vec<i32>,
    /// Syscall numbers fit in 16 bits on every Linux ABI but x32; a larger one is kept as i16::MAX.
    pub syscall: Vec<i16>,
}

impl Runs {
    pub fn len(&self) -> usize {
        self.tid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tid.is_empty()
    }

    fn push(&mut self, tid: i32, run: &OpenRun) {
        self.push_fields(
            tid,
            run.first_pass,
            run.passes,
            run.state as u8,
            run.stack,
            run.syscall,
        );
    }

    fn push_fields(
        &mut self,
        tid: i32,
        first_pass: u32,
        passes: u32,
        state: u8,
        stack: i32,
        syscall: i32,
    ) {
        self.tid.push(tid);
        self.first_pass.push(first_pass);
        self.passes.push(passes);
        self.state.push(state);
        self.stack.push(stack);
        self.syscall
            .push(syscall.clamp(i16::MIN as i32, i16::MAX as i32) as i16);
    }

    /// Reordered by (tid, first_pass).
    fn sorted(self) -> Runs {
        let mut order: Vec<usize> = (0..self.len()).collect();
        order.sort_unstable_by_key(|&i| (self.tid[i], self.first_pass[i]));
        let pick_u32 = |v: &[u32]| order.iter().map(|&i| v[i]).collect();
        let pick_i32 = |v: &[i32]| order.iter().map(|&i| v[i]).collect();
        Runs {
            tid: pick_i32(&self.tid),
            first_pass: pick_u32(&self.first_pass),
            passes: pick_u32(&self.passes),
            state: order.iter().map(|&i| self.state[i]).collect(),
            stack: pick_i32(&self.stack),
            syscall: order.iter().map(|&i| self.syscall[i]).collect(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct OpenRun {
    first_pass: u32,
    passes: u32,
    state: ThreadState,
    stack: i32,
    syscall: i32,
}

/// Everything one batch's passes fold into.
#[derive(Debug, Default)]
pub struct Aggregate {
    /// Passes added so far; pass indices count from 0 at the batch start.
    pub passes: u32,
    /// Closed runs; after `close()`, every run of the batch, by (tid, first_pass).
    pub runs: Runs,
    /// After `close()`: (tid, start, end, first pass) of each thread's runs in `runs`, by tid.
    /// Within a slice the runs tile the passes (gaps are ABSENT runs).
    pub thread_slices: Vec<(i32, usize, usize, u32)>,
    /// (tid, state, stack) -> samples.
    pub counts: OrderedCounts<(i32, u8, i32)>,
    /// (waiter tid, holder tid or NONE, holder stack or NONE) -> waiting_gil samples.
    pub blame: OrderedCounts<(i32, i32, i32)>,
    /// One byte per pass: PASS_GIL_HELD | PASS_IN_GC | PASS_HOLDER_CPU_WAIT.
    pub pass_flags: Vec<u8>,
    /// tid -> passes in which that thread held the GIL while waiting for a CPU (`cpu_wait`): still
    /// a hold in the GIL's sense, so hold shares can be compared with exact tracing's.
    pub held_cpu_wait: OrderedCounts<i32>,
    /// (tid, state, stack) -> samples in which the thread was handling an exception (a part of
    /// `counts`).
    pub handling: OrderedCounts<(i32, u8, i32)>,
    open: HashMap<i32, OpenRun>,
}

impl Aggregate {
    /// Folds in one pass: every thread seen in it, in the order they were read.
    pub fn add_pass(&mut self, threads: &[Seen]) {
        let pass = self.passes;
        self.passes += 1;
        // Two holders in one pass would be a torn read; the first one seen is kept.
        let holder = threads.iter().find(|t| t.holds);
        let mut flags = if holder.is_some() { PASS_GIL_HELD } else { 0 };
        if threads.iter().any(|t| t.state == ThreadState::Gc) {
            flags |= PASS_IN_GC;
        }
        if let Some(h) = holder.filter(|h| h.state == ThreadState::CpuWait) {
            flags |= PASS_HOLDER_CPU_WAIT;
            self.held_cpu_wait.add(h.tid);
        }
        self.pass_flags.push(flags);
        let (holder_tid, holder_stack) = holder.map(|h| (h.tid, h.stack)).unwrap_or((NONE, NONE));
        for t in threads {
            self.counts.add((t.tid, t.state as u8, t.stack));
            if t.handling {
                self.handling.add((t.tid, t.state as u8, t.stack));
            }
            if t.state == ThreadState::WaitingGil {
                self.blame.add((t.tid, holder_tid, holder_stack));
            }
            self.extend_run(pass, t);
        }
    }

    /// A thread's run goes on while it is seen in consecutive passes in one (state, syscall).
    fn extend_run(&mut self, pass: u32, t: &Seen) {
        if let Some(run) = self.open.get_mut(&t.tid) {
            let end = run.first_pass + run.passes;
            if end == pass && run.state == t.state && run.syscall == t.syscall {
                run.passes += 1;
                return;
            }
            self.runs.push(t.tid, run);
            if end < pass {
                self.runs
                    .push_fields(t.tid, end, pass - end, ABSENT, NONE, NONE);
            }
        }
        let run = OpenRun {
            first_pass: pass,
            passes: 1,
            state: t.state,
            stack: t.stack,
            syscall: t.syscall,
        };
        self.open.insert(t.tid, run);
    }

    /// Ends the batch: closes every open run and orders the runs for the Python side's merge.
    pub fn close(&mut self) {
        for (tid, run) in std::mem::take(&mut self.open) {
            self.runs.push(tid, &run);
        }
        self.runs = std::mem::take(&mut self.runs).sorted();
        self.thread_slices.clear();
        let tids = &self.runs.tid;
        let mut start = 0;
        for i in 1..=tids.len() {
            if i == tids.len() || tids[i] != tids[start] {
                self.thread_slices
                    .push((tids[start], start, i, self.runs.first_pass[start]));
                start = i;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ThreadState::*;

    fn seen(tid: i32, state: ThreadState, stack: i32, syscall: i32) -> Seen {
        Seen {
            tid,
            state,
            stack,
            syscall,
            holds: matches!(state, HoldingGil | Gc),
            handling: false,
        }
    }

    fn runs_of(a: &Aggregate) -> Vec<(i32, u32, u32, u8, i32, i16)> {
        let r = &a.runs;
        (0..r.len())
            .map(|i| {
                (
                    r.tid[i],
                    r.first_pass[i],
                    r.passes[i],
                    r.state[i],
                    r.stack[i],
                    r.syscall[i],
                )
            })
            .collect()
    }

    #[test]
    fn runs_break_on_state_syscall_and_absence() {
        // The scenario of tests/unit/test_session.py::test_reading_api_runs_and_stack_counts, in
        // one batch.
        let (outer, inner, futex) = (101, 100, 202);
        let (n, f) = (NONE as i16, futex as i16);
        let mut a = Aggregate::default();
        a.add_pass(&[seen(1, HoldingGil, outer, NONE), seen(2, Idle, NONE, futex)]);
        a.add_pass(&[seen(1, HoldingGil, inner, NONE), seen(2, Idle, NONE, futex)]);
        a.add_pass(&[seen(1, WaitingGil, inner, futex)]);
        a.add_pass(&[seen(1, WaitingGil, inner, futex)]);
        a.add_pass(&[seen(1, HoldingGil, NONE, NONE), seen(2, Idle, NONE, futex)]);
        a.close();
        assert_eq!(
            runs_of(&a),
            vec![
                (1, 0, 2, HoldingGil as u8, outer, n),
                (1, 2, 2, WaitingGil as u8, inner, f),
                (1, 4, 1, HoldingGil as u8, NONE, n),
                (2, 0, 2, Idle as u8, NONE, f),
                (2, 2, 2, ABSENT, NONE, n),
                (2, 4, 1, Idle as u8, NONE, f),
            ]
        );
        assert_eq!(a.thread_slices, vec![(1, 0, 3, 0), (2, 3, 6, 0)]);
        assert_eq!(
            a.counts
                .entries
                .iter()
                .filter(|(k, _)| k.0 == 2)
                .map(|e| e.1)
                .sum::<u64>(),
            3
        );
        assert_eq!(a.counts.entries[0], ((1, HoldingGil as u8, outer), 1));
        assert_eq!(
            a.pass_flags,
            vec![PASS_GIL_HELD, PASS_GIL_HELD, 0, 0, PASS_GIL_HELD]
        );
        // Thread 1 waited twice with nobody holding the GIL.
        assert_eq!(a.blame.entries, vec![((1, NONE, NONE), 2)]);
    }

    #[test]
    fn blame_names_the_first_holder_of_the_same_pass_wherever_it_was_read() {
        let mut a = Aggregate::default();
        a.add_pass(&[
            seen(3, WaitingGil, 7, 202),
            seen(1, Gc, 9, NONE),
            seen(2, HoldingGil, 8, NONE),
        ]);
        a.add_pass(&[seen(3, WaitingGil, 7, 202), seen(2, HoldingGil, 8, NONE)]);
        a.close();
        assert_eq!(a.blame.entries, vec![((3, 1, 9), 1), ((3, 2, 8), 1)]);
        assert_eq!(
            a.pass_flags,
            vec![PASS_GIL_HELD | PASS_IN_GC, PASS_GIL_HELD]
        );
    }

    #[test]
    fn a_holder_waiting_for_a_cpu_still_holds_the_gil() {
        let mut a = Aggregate::default();
        a.add_pass(&[
            seen(3, WaitingGil, 7, 202),
            Seen {
                holds: true,
                ..seen(2, CpuWait, 8, NONE)
            },
        ]);
        a.add_pass(&[seen(3, CpuWait, 7, NONE)]);
        a.close();
        assert_eq!(a.blame.entries, vec![((3, 2, 8), 1)]);
        assert_eq!(a.pass_flags, vec![PASS_GIL_HELD | PASS_HOLDER_CPU_WAIT, 0]);
        // Thread 3's cpu_wait in the second pass was not a hold.
        assert_eq!(a.held_cpu_wait.entries, vec![(2, 1)]);
    }

    #[test]
    fn samples_handling_an_exception_are_counted_apart_by_thread_state_and_stack() {
        let mut a = Aggregate::default();
        let handling = |s: Seen| Seen {
            handling: true,
            ..s
        };
        a.add_pass(&[
            handling(seen(1, Idle, 5, 230)),
            seen(2, HoldingGil, 6, NONE),
        ]);
        a.add_pass(&[
            handling(seen(1, Idle, 5, 230)),
            handling(seen(2, HoldingGil, 7, NONE)),
        ]);
        a.close();
        assert_eq!(
            a.handling.entries,
            vec![((1, Idle as u8, 5), 2), ((2, HoldingGil as u8, 7), 1)]
        );
        assert_eq!(
            a.counts.entries.len(),
            3,
            "the handling flag does not split the counts"
        );
    }
}
