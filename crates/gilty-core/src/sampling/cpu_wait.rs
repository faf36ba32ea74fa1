//! Whether a runnable thread has a CPU, from its scheduler counters
//! (`/proc/PID/task/TID/schedstat`: CPU time, run-queue delay, times switched in) read from outside
//! in successive passes.
//!
//! The kernel says "running" for a thread on a CPU and for one queued for a CPU alike, and it adds
//! a run-queue wait to the delay counter only when the wait ends. So a pass decides in two steps:
//! - *Known off a CPU*: the thread has been switched out as many times as in (`process::switches`,
//!   read by the caller: exact, the wait going on included), or it has not been switched in since a
//!   reading at which it was off a CPU (blocked in a syscall, or already known off), or its CPU
//!   time and switch count have not moved for longer than the scheduler tick could leave a running
//!   thread's CPU time unchanged (`STILL_NS`).
//! - *Likely off a CPU*: runnable now and at the last reading, and on a CPU for less than a tenth
//!   of the time between them. Taken as waiting only while the debt below is not already more than
//!   `PREPAID` passes below zero, so a thread that sleeps between passes (not runnable, not owed)
//!   can be over-counted by at most that many passes.
//! - Otherwise the run-queue delay the kernel has added since the last reading is owed to the
//!   thread as passes (delay ÷ the mean interval between passes, less the part of the time since
//!   the last reading beyond that interval: the sampler paused, no pass could see it) and paid by
//!   its next runnable passes.
//!   Passes known off a CPU are paid at once, before their delay is added (the debt goes below zero
//!   until it is), so each wait is counted once; a wait begun before the first reading owes only
//!   the part after it.
//!
//! The share of passes in `cpu_wait` thus follows the kernel's run delay for the thread; a pass
//! paid from the debt may lie a few intervals after the wait it stands for.

use crate::process::procfs::Schedstat;

/// A running thread's CPU time is brought up to date at least every scheduler tick (10 ms at
/// HZ=100, the slowest common setting). Unchanged for longer than this while runnable: not running.
pub const STILL_NS: u64 = 12_000_000;

/// Debt is bounded: a thread that waited long and then went to sleep has no passes left to pay
/// with, and its debt must not land on passes of a later, unrelated stretch.
const MAX_OWED: f64 = 256.0;

/// Passes taken as waiting ahead of the kernel's word for it (see "likely off a CPU").
const PREPAID: f64 = 2.0;

#[derive(Debug, Default, Clone)]
pub struct CpuWaitTrack {
    last: Option<Schedstat>,
    /// When the last reading was taken (ns), and whether the thread was runnable then.
    last_at: Option<(u64, bool)>,
    /// When the first reading was taken (ns): waits are counted from there.
    first_ns: Option<u64>,
    /// The reading from which the counters have not moved, and when it was taken (ns).
    still_since: Option<(Schedstat, u64)>,
    /// Switch count at a reading where the thread was known off a CPU.
    off_cpu_pcount: Option<u64>,
    owed: f64,
    /// The thread was blocked in a syscall at the last pass.
    pub last_blocked: bool,
    /// Runnable at this pass and the last, and on a CPU for at least two thirds of the time between
    /// that it was not queued for one: it has been executing, not blocked waiting for anything.
    pub busy: bool,
}

impl CpuWaitTrack {
    /// Takes one pass's reading (None when none was taken this pass) and whether the thread is
    /// runnable (a GIL holder, or its syscall file says "running"). `now_ns` is a monotonic time
    /// and `period_ns` the mean interval between passes. True: this pass is `cpu_wait`.
    pub fn observe(
        &mut self,
        reading: Option<Schedstat>,
        now_ns: u64,
        period_ns: u64,
        runnable: bool,
    ) -> bool {
        self.observe_switches(reading, now_ns, period_ns, runnable, None)
    }

    /// `observe`, told by `off_cpu` (Some(switch-in count)) that the thread was switched out as
    /// many times as in at a reading after `reading`: off a CPU now, whatever the other counters
    /// say.
    pub fn observe_switches(
        &mut self,
        reading: Option<Schedstat>,
        now_ns: u64,
        period_ns: u64,
        runnable: bool,
        off_cpu: Option<u64>,
    ) -> bool {
        self.last_blocked = !runnable;
        self.busy = false;
        let Some(now) = reading else {
            return false;
        };
        let first = *self.first_ns.get_or_insert(now_ns);
        let mut ran_little = false;
        if let Some(last) = self.last {
            let wait = now
                .delay_ns
                .saturating_sub(last.delay_ns)
                .min(now_ns.saturating_sub(first));
            // Passes are `period_ns` apart, unless the sampler paused (between batches, or itself
            // short of a CPU) since the last one: the part of the wait that fell in the pause had
            // no passes to count it.
            let span = self
                .last_at
                .map(|(at, _)| now_ns.saturating_sub(at))
                .unwrap_or(0);
            // Ordinary jitter (a pass late by less than a period) is no pause: subtracting it would
            // bias every thread's share down.
            let paused = if span > 2 * period_ns {
                span - period_ns
            } else {
                0
            };
            let counted = wait.saturating_sub(paused);
            self.owed = (self.owed + counted as f64 / period_ns.max(1) as f64).min(MAX_OWED);
            if let Some((at, was_runnable)) = self.last_at {
                let (ran, span) = (
                    now.run_ns.saturating_sub(last.run_ns),
                    now_ns.saturating_sub(at),
                );
                ran_little = was_runnable && ran * 10 < span;
                // Of the time it was not queued for a CPU, it ran at least two thirds: it did not
                // block.
                let queued = now.delay_ns.saturating_sub(last.delay_ns);
                self.busy = was_runnable
                    && runnable
                    && ran > 0
                    && ran * 3 >= 2 * span.saturating_sub(queued);
            }
        }
        self.last = Some(now);
        self.last_at = Some((now_ns, runnable));
        let still = match self.still_since {
            Some((s, since)) if s.run_ns == now.run_ns && s.pcount == now.pcount => {
                now_ns.saturating_sub(since)
            }
            _ => {
                self.still_since = Some((now, now_ns));
                0
            }
        };
        if !runnable {
            // Off a CPU now: any later run must be switched in first.
            self.off_cpu_pcount = Some(now.pcount);
            return false;
        }
        let not_switched_in = self.off_cpu_pcount == Some(now.pcount);
        if not_switched_in || off_cpu.is_some() || still > STILL_NS {
            self.off_cpu_pcount = Some(off_cpu.unwrap_or(now.pcount).max(now.pcount));
            self.owed = (self.owed - 1.0).max(-MAX_OWED);
            return true;
        }
        self.off_cpu_pcount = None;
        if ran_little && self.owed > -PREPAID {
            self.owed -= 1.0;
            return true;
        }
        if self.owed >= 0.5 {
            self.owed -= 1.0;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(run_ns: u64, delay_ns: u64, pcount: u64) -> Option<Schedstat> {
        Some(Schedstat {
            run_ns,
            delay_ns,
            pcount,
        })
    }
    const MS: u64 = 1_000_000;

    #[test]
    fn woken_and_not_switched_in_is_waiting_for_a_cpu() {
        let mut t = CpuWaitTrack::default();
        assert!(!t.observe(st(10 * MS, 0, 5), 0, MS, false)); // blocked in a sleep
        assert!(t.observe(st(10 * MS, 0, 5), MS, MS, true)); // woken, not switched in
        assert!(t.observe(st(10 * MS, 0, 5), 2 * MS, MS, true));
        // Switched in: the 2 ms it waited are credited now, and were already paid by two passes.
        assert!(!t.observe(st(10 * MS + 500_000, 2 * MS, 6), 3 * MS, MS, true));
        assert!(!t.observe(st(11 * MS, 2 * MS, 6), 4 * MS, MS, true));
    }

    #[test]
    fn credited_delay_is_paid_by_the_next_runnable_passes() {
        let mut t = CpuWaitTrack::default();
        for i in 0..4u64 {
            assert!(!t.observe(st(MS + i * MS, 0, 1 + i), i * MS, MS, true));
        }
        // Preempted and back: 3 ms of waiting credited, counters moving throughout.
        let got: Vec<bool> = (4..=8)
            .map(|i| t.observe(st(MS + i * MS, 3 * MS, 1 + i), i * MS, MS, true))
            .collect();
        assert_eq!(got, vec![true, true, true, false, false]);
        // A wait begun before the first reading owes only the part after it.
        let mut u = CpuWaitTrack::default();
        assert!(!u.observe(st(MS, 0, 1), 0, MS, true));
        assert!(u.observe(st(2 * MS, 50 * MS, 2), MS, MS, true));
        assert!(!u.observe(st(3 * MS, 50 * MS, 3), 2 * MS, MS, true));
    }

    #[test]
    fn runnable_at_both_ends_and_barely_run_is_taken_as_waiting_ahead_of_the_kernel() {
        let mut t = CpuWaitTrack::default();
        assert!(!t.observe(st(MS, 0, 1), 0, 5 * MS, true));
        // 50 µs of CPU in 5 ms, switched in once: waiting, before the kernel credits the wait.
        assert!(t.observe(st(MS + 50_000, 0, 2), 5 * MS, 5 * MS, true));
        // The credit that follows pays for it instead of landing on a later pass.
        assert!(!t.observe(st(6 * MS, 4 * MS, 3), 10 * MS, 5 * MS, true));
        // A thread that sleeps between passes is not owed: at most PREPAID passes are taken ahead.
        let mut u = CpuWaitTrack::default();
        let got: Vec<bool> = (0..8u64)
            .map(|i| u.observe(st(MS + i * 10_000, 0, 1 + i), i * 5 * MS, MS, true))
            .collect();
        assert_eq!(got.iter().filter(|&&w| w).count(), 2);
    }

    #[test]
    fn counters_standing_still_past_a_tick_mean_no_cpu() {
        let mut t = CpuWaitTrack::default();
        assert!(!t.observe(st(MS, 0, 1), 0, MS, true));
        // Not run for 5 ms while runnable: taken as waiting ahead of the kernel; past a tick:
        // known.
        assert!(t.observe(st(MS, 0, 1), 5 * MS, MS, true));
        assert!(t.observe(st(MS, 0, 1), 13 * MS, MS, true));
    }

    #[test]
    fn switched_out_as_often_as_in_is_waiting_at_once() {
        let mut t = CpuWaitTrack::default();
        assert!(!t.observe(st(MS, 0, 1), 0, MS, false)); // asleep
                                                         // Woken, run a little (switched in: the
                                                         // count moved), preempted: no rule above
                                                         // sees it, the switch counts do, and the
                                                         // wait is paid now rather than from a
                                                         // later credit.
        assert!(t.observe_switches(st(MS + 20_000, 0, 2), MS, MS, true, Some(2)));
        assert!(!t.observe(st(2 * MS, MS, 3), 2 * MS, MS, true));
        assert!(!t.observe(st(3 * MS, MS, 3), 3 * MS, MS, true));
    }

    #[test]
    fn a_thread_that_runs_all_along_is_never_waiting() {
        let mut t = CpuWaitTrack::default();
        for i in 0..100u64 {
            assert!(!t.observe(st(MS + i * MS, 0, 1), i * MS, MS, true));
        }
        // Nor is a blocked one, nor one whose counters cannot be read.
        assert!(!t.observe(st(200 * MS, 50 * MS, 2), 101 * MS, MS, false));
        assert!(!t.observe(None, 102 * MS, MS, true));
    }
}
