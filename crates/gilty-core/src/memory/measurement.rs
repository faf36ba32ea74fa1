//! What `gilty memory`'s monitor hands over: its options, each process's identity and baseline, the
//! samples, copy-on-write steps and GC windows of one measurement, and the run's totals.

use super::cow::CowMethod;
use super::fork_share::ForkShare;
use super::gc_watch::PollerStats;
use super::smaps::Rollup;
use crate::interp::gc_config::{FrozenCount, GcState};
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub struct TreeWatchOptions {
    /// Period of the full passes (smaps_rollup, stat, GC state, pages).
    pub interval: Duration,
    /// Period of the GC flag polls.
    pub gc_poll: Duration,
    /// How often the process tree is rescanned for new and exited processes.
    pub tree_scan: Duration,
    /// Track copy-on-write page by page (pagemap).
    pub pagemap: bool,
    /// Share of wall time each process's GC-triggered page scans may take (over the last second).
    pub trigger_budget: f64,
    /// Bounds of the walk that counts frozen objects: when a process is found, and when its
    /// permanent generation changes during the run (the measuring thread waits for the walk).
    pub frozen_max_objects: u64,
    pub frozen_budget: Duration,
    pub recount_budget: Duration,
}

impl Default for TreeWatchOptions {
    fn default() -> Self {
        TreeWatchOptions {
            interval: Duration::from_secs(1),
            gc_poll: Duration::from_millis(1),
            tree_scan: Duration::from_millis(25),
            pagemap: true,
            trigger_budget: 0.05,
            frozen_max_objects: 5_000_000,
            frozen_budget: Duration::from_millis(300),
            recount_budget: Duration::from_millis(30),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Master,
    Worker,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Worker => "worker",
        }
    }
}

/// Page baseline of one process (bytes).
#[derive(Debug, Clone)]
pub struct BaselineInfo {
    pub t: f64,
    pub present_bytes: u64,
    pub shared_bytes: u64,
    pub mappings: u64,
    pub scan_s: f64,
    pub method: CowMethod,
}

#[derive(Debug, Clone)]
pub struct ProcessInfo {
    pub pid: i32,
    pub ppid: i32,
    pub role: Role,
    pub cmdline: String,
    pub first_seen: f64,
    pub exited: Option<f64>,
    /// Python version, when the process is a supported Python.
    pub python: Option<String>,
    /// Why there is no GC information, when there is none.
    pub gc_note: Option<String>,
    pub baseline: Option<BaselineInfo>,
}

/// Cost of one measurement of one process, in seconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cost {
    pub stat_s: f64,
    pub smaps_s: f64,
    pub gc_s: f64,
    pub pagemap_s: f64,
    pub pages_read: u64,
}

#[derive(Debug, Clone)]
pub struct Sample {
    pub pid: i32,
    /// The pass this sample belongs to (0: measured when the process was found).
    pub pass: u64,
    pub t: f64,
    pub rollup: Rollup,
    pub minflt: u64,
    pub majflt: u64,
    pub gc: Option<GcState>,
    pub cost: Cost,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanReason {
    Pass,
    GcStart,
    GcEnd,
    Final,
}

impl ScanReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ScanReason::Pass => "pass",
            ScanReason::GcStart => "gc_start",
            ScanReason::GcEnd => "gc_end",
            ScanReason::Final => "final",
        }
    }
}

/// Pages found copied (or released) by one scan of one process, in bytes.
#[derive(Debug, Clone)]
pub struct CowStep {
    pub pid: i32,
    pub t: f64,
    pub reason: ScanReason,
    pub gc_bytes: u64,
    pub outside_bytes: u64,
    pub ambiguous_bytes: u64,
    pub released_bytes: u64,
    pub sole_bytes: u64,
    pub minflt: u64,
    pub scan_s: f64,
    pub pages_read: u64,
}

#[derive(Debug, Clone)]
pub struct GcWindow {
    pub pid: i32,
    pub start: f64,
    pub end: f64,
    pub generation: Option<u8>,
    pub polls: u32,
}

#[derive(Debug, Clone)]
pub struct GcSnapshot {
    pub pid: i32,
    pub t: f64,
    /// "initial" or "changed".
    pub reason: &'static str,
    pub state: GcState,
    pub frozen: FrozenCount,
}

/// A process against its parent since the fork, and the modules it has imported; taken when the
/// process is found and again at the end of the run.
#[derive(Debug, Clone)]
pub struct ForkFacts {
    pub pid: i32,
    pub t: f64,
    /// "found" or "final".
    pub when: &'static str,
    pub parent: i32,
    /// Pages against the parent's (workers whose parent is still measured; None otherwise).
    pub share: Option<ForkShare>,
    /// `sys.modules` names (Python processes forked from the master's executable).
    pub modules: Option<Vec<String>>,
}

/// Everything measured since the last `drain`.
#[derive(Debug, Clone, Default)]
pub struct Output {
    /// New processes, and processes whose information changed (exited); the latest copy wins.
    pub processes: Vec<ProcessInfo>,
    pub samples: Vec<Sample>,
    pub cow_steps: Vec<CowStep>,
    pub gc_windows: Vec<GcWindow>,
    pub gc_snapshots: Vec<GcSnapshot>,
    pub fork_facts: Vec<ForkFacts>,
    /// Things the user should know that are not errors ("pid 12 exited before it could be
    /// measured").
    pub notes: Vec<String>,
    pub master_exited: Option<f64>,
    pub finished: bool,
}

/// Totals over the run, for the cost report.
#[derive(Debug, Clone, Copy, Default)]
pub struct TreeWatchStats {
    pub elapsed_s: f64,
    pub passes: u64,
    pub trigger_scans: u64,
    pub trigger_scans_skipped: u64,
    pub tree_scans: u64,
    pub tree_scan_s: f64,
    pub measuring_cpu_s: f64,
    pub poller: PollerStats,
}
