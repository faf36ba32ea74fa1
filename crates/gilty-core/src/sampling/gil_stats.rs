//! Per-thread state counts over sliding windows, for the in-process monitor: one-second buckets in
//! a ring (so the 1 s, 10 s and 60 s windows cost nothing to keep up to date) plus totals.

use crate::sampling::classify::ThreadState;
use std::collections::HashMap;

/// One count per `ThreadState` (cpu_wait, code 6, is the last).
pub const STATES: usize = ThreadState::CpuWait as usize + 1;
/// Seconds of history kept; the longest window reported.
pub const RING_SECONDS: usize = 60;

#[derive(Debug, Clone, Default)]
struct ThreadCounts {
    name: String,
    /// (second index, counts per state) for the last RING_SECONDS seconds, oldest overwritten.
    ring: Vec<(u64, [u32; STATES])>,
    total: [u64; STATES],
    /// Seconds spent per state, from the time each pass stands for (robust to late passes).
    total_s: [f64; STATES],
    /// When a pass last listed the thread.
    last_seen_s: f64,
}

/// Counts of one thread over one window.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowCounts {
    pub samples: u64,
    pub counts: [u64; STATES],
}

#[derive(Debug, Clone)]
pub struct ThreadStats {
    pub tid: i32,
    pub name: String,
    pub total: [u64; STATES],
    pub total_s: [f64; STATES],
    /// (window seconds, counts) for each window asked for.
    pub windows: Vec<(u64, WindowCounts)>,
}

#[derive(Default)]
pub struct GilStats {
    threads: HashMap<i32, ThreadCounts>,
    passes: u64,
}

impl GilStats {
    /// Adds one pass taken at `now_s` (seconds on any monotonic clock) that stands for `weight_s`
    /// seconds.
    pub fn add_pass(&mut self, now_s: f64, weight_s: f64, states: &[(i32, String, ThreadState)]) {
        self.passes += 1;
        let second = now_s.max(0.0) as u64;
        for (tid, name, state) in states {
            let t = self.threads.entry(*tid).or_insert_with(|| ThreadCounts {
                ring: vec![(u64::MAX, [0; STATES]); RING_SECONDS],
                ..Default::default()
            });
            t.last_seen_s = now_s;
            if t.name != *name {
                t.name = name.clone();
            }
            let slot = &mut t.ring[(second % RING_SECONDS as u64) as usize];
            if slot.0 != second {
                *slot = (second, [0; STATES]);
            }
            let i = *state as usize;
            slot.1[i] += 1;
            t.total[i] += 1;
            t.total_s[i] += weight_s;
        }
    }

    /// Forgets threads no pass has listed for longer than the longest window: a thread that just
    /// exited still shows in the windows (and totals) that cover its last seconds.
    pub fn retain(&mut self, now_s: f64) {
        self.threads
            .retain(|_, t| now_s - t.last_seen_s <= RING_SECONDS as f64);
    }

    pub fn passes(&self) -> u64 {
        self.passes
    }

    /// Every thread's totals and its counts over the last `w` whole-or-current seconds for each
    /// `w`.
    pub fn snapshot(&self, now_s: f64, windows: &[u64]) -> Vec<ThreadStats> {
        let now = now_s.max(0.0) as u64;
        let mut out: Vec<ThreadStats> = self
            .threads
            .iter()
            .map(|(tid, t)| {
                let windows = windows
                    .iter()
                    .map(|&w| {
                        let w = w.clamp(1, RING_SECONDS as u64);
                        let mut counts = [0u64; STATES];
                        for (second, c) in &t.ring {
                            // The current (partial) second and the w-1 before it.
                            if *second != u64::MAX && *second <= now && now - *second < w {
                                for i in 0..STATES {
                                    counts[i] += c[i] as u64;
                                }
                            }
                        }
                        (
                            w,
                            WindowCounts {
                                samples: counts.iter().sum(),
                                counts,
                            },
                        )
                    })
                    .collect();
                ThreadStats {
                    tid: *tid,
                    name: t.name.clone(),
                    total: t.total,
                    total_s: t.total_s,
                    windows,
                }
            })
            .collect();
        out.sort_by_key(|t| t.tid);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(stats: &mut GilStats, t: f64, states: &[(i32, ThreadState)]) {
        let named: Vec<(i32, String, ThreadState)> = states
            .iter()
            .map(|(tid, s)| (*tid, format!("t{tid}"), *s))
            .collect();
        stats.add_pass(t, 0.001, &named);
    }

    #[test]
    fn windows_count_only_their_seconds() {
        let mut s = GilStats::default();
        pass(&mut s, 0.5, &[(1, ThreadState::HoldingGil)]);
        pass(&mut s, 5.5, &[(1, ThreadState::WaitingGil)]);
        pass(&mut s, 9.2, &[(1, ThreadState::WaitingGil)]);
        pass(&mut s, 9.7, &[(1, ThreadState::Idle)]);
        let snap = s.snapshot(9.9, &[1, 10, 60]);
        let t = &snap[0];
        assert_eq!(t.windows[0].1.samples, 2);
        assert_eq!(t.windows[0].1.counts[ThreadState::WaitingGil as usize], 1);
        assert_eq!(t.windows[1].1.samples, 4);
        assert_eq!(t.windows[1].1.counts[ThreadState::HoldingGil as usize], 1);
        assert_eq!(t.total.iter().sum::<u64>(), 4);
        assert!((t.total_s.iter().sum::<f64>() - 0.004).abs() < 1e-12);
    }

    #[test]
    fn ring_slots_are_reused_after_a_minute() {
        let mut s = GilStats::default();
        pass(&mut s, 1.0, &[(1, ThreadState::HoldingGil)]);
        // 61 s later the slot of second 1 is reused for second 61: the old count must not leak in.
        pass(&mut s, 61.0, &[(1, ThreadState::Idle)]);
        let snap = s.snapshot(61.0, &[60]);
        assert_eq!(
            snap[0].windows[0].1.counts[ThreadState::HoldingGil as usize],
            0
        );
        assert_eq!(snap[0].windows[0].1.counts[ThreadState::Idle as usize], 1);
        assert_eq!(snap[0].total[ThreadState::HoldingGil as usize], 1);
    }

    #[test]
    fn exited_threads_stay_for_the_longest_window_then_go() {
        let mut s = GilStats::default();
        pass(
            &mut s,
            0.0,
            &[(1, ThreadState::HoldingGil), (2, ThreadState::Idle)],
        );
        pass(&mut s, 1.0, &[(2, ThreadState::Idle)]);
        s.retain(1.0);
        assert_eq!(
            s.snapshot(1.0, &[60]).len(),
            2,
            "thread 1 exited a second ago: its last minute still counts"
        );
        pass(&mut s, 61.0, &[(2, ThreadState::Idle)]);
        s.retain(61.0);
        let snap = s.snapshot(61.0, &[1]);
        assert_eq!(snap.len(), 1);
        assert_eq!(snap[0].tid, 2);
    }
}
