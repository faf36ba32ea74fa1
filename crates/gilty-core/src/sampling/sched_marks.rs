//! What the kernel's scheduler counted over a batch: every thread's CPU time and run-queue delay,
//! and the target cgroup's CPU bandwidth counters, read at the batch's first pass and at its end.

use crate::process::procfs::{self, CgroupCpu, SchedstatReader};
use crate::sampling::thread_track::Track;
use std::collections::HashMap;
use std::time::Instant;

/// Scheduler figures over one batch, from counters read at its first pass and at its end.
#[derive(Debug, Clone, Default)]
pub struct SchedTotals {
    pub seconds: f64,
    /// (tid, CPU time ns, run-queue delay ns) grown over the batch, for threads read at both ends.
    pub threads: Vec<(i32, u64, u64)>,
    /// The target's cgroup CPU bandwidth counters grown over the batch (None without a CPU
    /// controller).
    pub cgroup: Option<CgroupCpu>,
}

/// Counters at one instant: when, per thread (run ns, delay ns), and the cgroup's.
pub(crate) struct SchedMark {
    at: Instant,
    threads: HashMap<i32, (u64, u64)>,
    cgroup: Option<CgroupCpu>,
}

/// The counters at the batch's start: its first pass, or the end of the batch before.
#[derive(Default)]
pub(crate) struct SchedMarks {
    batch: Option<SchedMark>,
    next: Option<SchedMark>,
}

impl SchedMarks {
    /// A new recording: the next batch counts from its own first pass.
    pub fn restart(&mut self) {
        self.next = None;
    }

    /// The batch's first pass: its start is the end of the batch before, else `read()` now.
    pub fn begin_batch(&mut self, read: impl FnOnce() -> SchedMark) {
        self.batch = Some(match self.next.take() {
            Some(mark) => mark,
            None => read(),
        });
    }

    /// The batch's end (`read()` now, when it had a first pass): what grew over it.
    pub fn end_batch(&mut self, read: impl FnOnce() -> SchedMark) -> Option<SchedTotals> {
        let start = self.batch.take()?;
        let end = read();
        // The next batch counts from here, so that a wait the kernel adds to a thread's delay in a
        // batch but which began in the pause between batches has its time counted too.
        let next = SchedMark {
            at: end.at,
            threads: end.threads.clone(),
            cgroup: end.cgroup,
        };
        let totals = SchedTotals {
            seconds: (end.at - start.at).as_secs_f64(),
            threads: end
                .threads
                .iter()
                .filter_map(|(tid, &(run, delay))| {
                    let &(run0, delay0) = start.threads.get(tid)?;
                    Some((*tid, run.saturating_sub(run0), delay.saturating_sub(delay0)))
                })
                .collect(),
            cgroup: match (start.cgroup, end.cgroup) {
                (Some(a), Some(b)) => Some(CgroupCpu {
                    nr_periods: b.nr_periods.saturating_sub(a.nr_periods),
                    nr_throttled: b.nr_throttled.saturating_sub(a.nr_throttled),
                    throttled_ns: b.throttled_ns.saturating_sub(a.throttled_ns),
                }),
                _ => None,
            },
        };
        self.next = Some(next);
        Some(totals)
    }
}

/// Every known thread's scheduler counters and the target cgroup's, now (a read per thread: taken
/// at a batch's ends only).
pub(crate) fn read_mark(pid: i32, tids: &[i32], tracks: &mut HashMap<i32, Track>) -> SchedMark {
    let mut threads = HashMap::new();
    for &tid in tids {
        let reader = tracks.get_mut(&tid).and_then(|t| t.sched_reader(pid, tid));
        let reading = match reader {
            Some(r) => r.read(),
            None => SchedstatReader::open(pid, tid)
                .ok()
                .and_then(|mut r| r.read()),
        };
        if let Some(s) = reading {
            threads.insert(tid, (s.run_ns, s.delay_ns));
        }
    }
    let cgroup = procfs::cgroup_cpu_stat_path(pid).and_then(|p| procfs::read_cgroup_cpu(&p));
    SchedMark {
        at: Instant::now(),
        threads,
        cgroup,
    }
}
