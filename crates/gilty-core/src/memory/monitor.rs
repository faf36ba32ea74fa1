//! `gilty memory`'s measuring loop: a process tree (a prefork master and its workers) measured over
//! time, in two threads of its own so the caller only collects results.
//!
//! - The GC poller (`gc_watch`) reads every Python process's GC state each millisecond and reports
//!   collection windows and configuration changes.
//! - The measuring thread (here) rescans the tree every `tree_scan` (new workers get a page
//!   baseline at once), and every `interval` reads each process's `stat` (minor faults),
//!   `smaps_rollup` and GC state, and rescans its pages (`cow`). When the poller reports that a
//!   collection started or ended in a process, that process's pages are rescanned at once, so the
//!   copies made during the collection fall in an interval of their own; these extra scans are
//!   limited to `trigger_budget` of the wall time per process.
//!
//! The target is only read: /proc files, pagemap, and `process_vm_readv` of the GC state.

use super::cow::{covered_fraction, CowMethod, CowTracker, ScanDelta};
use super::gc_watch::{GcEvent, GcPoller, PollerStats};
use super::pagemap::PagemapReader;
use super::process_tree::{cmdline, descendants};
use super::smaps::{ProcFiles, Rollup};
use crate::error::{from_os, Error, ErrorKind, Result};
use crate::gc_config::{locate, FrozenCount, GcLocation, GcState};
use crate::interpreter::attach;
use crate::process::maps::read_maps;
use crate::process::memory::ProcessMemory;
use crate::process::procfs;
use crate::sampler::monotonic_ns;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub struct MonitorOptions {
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

impl Default for MonitorOptions {
    fn default() -> Self {
        MonitorOptions {
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

/// Everything measured since the last `drain`.
#[derive(Debug, Clone, Default)]
pub struct Output {
    /// New processes, and processes whose information changed (exited); the latest copy wins.
    pub processes: Vec<ProcessInfo>,
    pub samples: Vec<Sample>,
    pub cow_steps: Vec<CowStep>,
    pub gc_windows: Vec<GcWindow>,
    pub gc_snapshots: Vec<GcSnapshot>,
    /// Things the user should know that are not errors ("pid 12 exited before it could be measured").
    pub notes: Vec<String>,
    pub master_exited: Option<f64>,
    pub finished: bool,
}

/// Totals over the run, for the cost report.
#[derive(Debug, Clone, Copy, Default)]
pub struct MonitorStats {
    pub elapsed_s: f64,
    pub passes: u64,
    pub trigger_scans: u64,
    pub trigger_scans_skipped: u64,
    pub tree_scans: u64,
    pub tree_scan_s: f64,
    pub measuring_cpu_s: f64,
    pub poller: PollerStats,
}

struct Proc {
    info: ProcessInfo,
    files: ProcFiles,
    pagemap: Option<PagemapReader>,
    cow: Option<CowTracker>,
    gc: Option<GcLocation>,
    mem: Option<ProcessMemory>,
    /// GC windows (ns); an open window ends at u64::MAX.
    windows: Vec<(u64, u64)>,
    open_window: Option<u64>,
    triggers: VecDeque<(u64, u64)>,
    frozen: FrozenCount,
    /// First and last node of the permanent generation when `frozen` was counted.
    frozen_list: (u64, u64),
    alive: bool,
}

struct Worker {
    opts: MonitorOptions,
    start_ns: u64,
    root: i32,
    procs: HashMap<i32, Proc>,
    order: Vec<i32>,
    poller: Option<GcPoller>,
    events: Receiver<GcEvent>,
    out: Arc<Mutex<Output>>,
    stop: Arc<AtomicBool>,
    stats: MonitorStats,
    /// The master's GC location, found by `Monitor::start` (taken by the first `attach_gc`).
    root_gc: Option<std::result::Result<(GcLocation, String), String>>,
}

pub struct Monitor {
    out: Arc<Mutex<Output>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<MonitorStats>>,
    pub root: i32,
    stats: Option<MonitorStats>,
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Where a process keeps its GC state: the parent's location when the child is a fork of the same
/// program (same executable, same mapping around the GC state), else a full attach.
fn gc_location(pid: i32, parent: Option<(&GcLocation, i32)>) -> std::result::Result<(GcLocation, String), String> {
    if let Some((ploc, ppid)) = parent {
        let same_exe = procfs::exe(pid).is_some() && procfs::exe(pid) == procfs::exe(ppid);
        let around = |p: i32| {
            read_maps(p).ok().and_then(|maps| maps.into_iter().find(|m| m.start <= ploc.gc_addr && ploc.gc_addr < m.end).map(|m| (m.start, m.path)))
        };
        if same_exe && around(pid).is_some() && around(pid) == around(ppid) {
            let loc = ploc.for_pid(pid);
            if let Ok(state) = ProcessMemory::open(pid).and_then(|m| loc.read(&m)) {
                if loc.plausible(&state) {
                    let v = loc.version;
                    return Ok((loc, format!("{}.{}.{}", v.0, v.1, v.2)));
                }
            }
        }
    }
    match attach(pid) {
        Ok(interp) => match locate(&interp) {
            Ok(loc) => Ok((loc, interp.version_string())),
            Err(e) => Err(e.message),
        },
        Err(e) => Err(e.message),
    }
}

impl Monitor {
    /// Checks the root process (exists, readable), measures it and its descendants once, and
    /// starts measuring in the background.
    pub fn start(root: i32, opts: MonitorOptions) -> Result<Monitor> {
        if root <= 0 || !procfs::exists(root) {
            return Err(Error::new(ErrorKind::NoSuchProcess, format!("no process with pid {root}")));
        }
        let mut files = ProcFiles::open(root).map_err(|e| from_os(root, &e, "/proc/PID/smaps_rollup"))?;
        files.read_rollup().map_err(|e| {
            if e.raw_os_error() == Some(libc::ESRCH) && procfs::is_gone(root) {
                Error::new(ErrorKind::NoSuchProcess, format!("pid {root} has exited"))
            } else {
                from_os(root, &e, "/proc/PID/smaps_rollup")
            }
        })?;
        if opts.pagemap {
            // pagemap needs the same access; fail now with one clear message rather than later.
            PagemapReader::open(root).map_err(|e| from_os(root, &e, "/proc/PID/pagemap"))?;
        }
        // A Python master must be readable too (reading its memory needs ptrace access, which
        // /proc/PID/smaps_rollup does not). Attached once here; its GC location is reused below.
        let root_gc = match attach(root) {
            Err(e) if e.kind == ErrorKind::PermissionDenied => return Err(e),
            Err(e) => Err(e.message),
            Ok(interp) => locate(&interp).map(|loc| (loc, interp.version_string())).map_err(|e| e.message),
        };
        let (tx, rx) = channel();
        let poller = GcPoller::start(opts.gc_poll, tx);
        let out = Arc::new(Mutex::new(Output::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut worker = Worker {
            opts,
            start_ns: monotonic_ns(),
            root,
            procs: HashMap::new(),
            order: Vec::new(),
            poller: Some(poller),
            events: rx,
            out: Arc::clone(&out),
            stop: Arc::clone(&stop),
            stats: MonitorStats::default(),
            root_gc: Some(root_gc),
        };
        let mut first = vec![(root, 0, Role::Master)];
        first.extend(descendants(root).into_iter().map(|(pid, ppid)| (pid, ppid, Role::Worker)));
        worker.add_processes(&first);
        if !worker.procs.contains_key(&root) {
            return Err(Error::new(ErrorKind::NoSuchProcess, format!("pid {root} has exited")));
        }
        let handle = std::thread::Builder::new()
            .name("gilty-memory".into())
            .spawn(move || worker.run())
            .map_err(|e| Error::new(ErrorKind::Internal, format!("cannot start the measuring thread: {e}")))?;
        Ok(Monitor { out, stop, handle: Some(handle), root, stats: None })
    }

    /// Takes what was measured since the last call.
    pub fn drain(&self) -> Output {
        std::mem::take(&mut *self.out.lock().unwrap())
    }

    /// The measuring thread has ended (the master exited, or `stop` was called).
    pub fn finished(&self) -> bool {
        self.handle.as_ref().map(|h| h.is_finished()).unwrap_or(true)
    }

    /// Ends the run: one last measurement of every live process, then the totals.
    pub fn stop(&mut self) -> MonitorStats {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            self.stats = h.join().ok();
        }
        self.stats.unwrap_or_default()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Worker {
    fn t(&self, ns: u64) -> f64 {
        ns.saturating_sub(self.start_ns) as f64 / 1e9
    }

    fn now_s(&self) -> f64 {
        self.t(monotonic_ns())
    }

    fn emit(&self, f: impl FnOnce(&mut Output)) {
        f(&mut self.out.lock().unwrap());
    }

    fn run(mut self) -> MonitorStats {
        let cpu0 = thread_cpu_ns();
        let mut next_pass = std::time::Instant::now() + self.opts.interval;
        let mut next_tree = std::time::Instant::now() + self.opts.tree_scan;
        loop {
            if self.stop.load(Ordering::SeqCst) {
                self.final_pass();
                break;
            }
            let now = std::time::Instant::now();
            let wake = next_pass.min(next_tree);
            let timeout = wake.saturating_duration_since(now).min(Duration::from_millis(50));
            match self.events.recv_timeout(timeout) {
                Ok(ev) => self.on_event(ev),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {}
            }
            self.drain_events();
            let now = std::time::Instant::now();
            if now >= next_tree {
                self.scan_tree();
                next_tree = now + self.opts.tree_scan;
                if self.master_gone() {
                    let t = self.now_s();
                    self.final_pass();
                    self.emit(|o| o.master_exited = Some(t));
                    break;
                }
            }
            if std::time::Instant::now() >= next_pass {
                self.pass(ScanReason::Pass);
                next_pass += self.opts.interval;
                let now = std::time::Instant::now();
                if next_pass < now {
                    next_pass = now + self.opts.interval / 2;
                }
            }
        }
        if let Some(p) = self.poller.take() {
            self.stats.poller = p.stop();
        }
        self.stats.elapsed_s = self.now_s();
        self.stats.measuring_cpu_s = thread_cpu_ns().saturating_sub(cpu0) as f64 / 1e9;
        self.emit(|o| o.finished = true);
        self.stats
    }

    fn master_gone(&self) -> bool {
        match self.procs.get(&self.root) {
            Some(p) => !p.alive,
            None => true,
        }
    }

    fn drain_events(&mut self) {
        while let Ok(ev) = self.events.try_recv() {
            self.on_event(ev);
        }
    }

    fn on_event(&mut self, ev: GcEvent) {
        match ev {
            GcEvent::Started { pid, t_ns, .. } => {
                let Some(p) = self.procs.get_mut(&pid) else { return };
                p.open_window = Some(t_ns);
                self.triggered_scan(pid, ScanReason::GcStart);
            }
            GcEvent::Ended { pid, start_ns, end_ns, generation, polls } => {
                let (s, e) = (self.t(start_ns), self.t(end_ns));
                let Some(p) = self.procs.get_mut(&pid) else { return };
                p.open_window = None;
                p.windows.push((start_ns, end_ns));
                self.emit(|o| o.gc_windows.push(GcWindow { pid, start: s, end: e, generation, polls }));
                self.triggered_scan(pid, ScanReason::GcEnd);
            }
            GcEvent::Changed { pid, t_ns, after, before } => {
                let t = self.t(t_ns);
                let Some(p) = self.procs.get_mut(&pid) else { return };
                let list_changed = (after.frozen_next, after.frozen_prev) != (before.frozen_next, before.frozen_prev);
                if list_changed {
                    if let (Some(loc), Some(mem)) = (p.gc, p.mem.as_ref()) {
                        p.frozen = loc.count_frozen(mem, &after, self.opts.frozen_max_objects, self.opts.recount_budget);
                    }
                }
                let frozen = p.frozen;
                // A list change that leaves emptiness and the count alone (an object leaving the
                // permanent generation) is not worth a report.
                if after.config() != before.config() || after.frozen_empty() != before.frozen_empty() || list_changed && frozen.exact {
                    self.emit(|o| o.gc_snapshots.push(GcSnapshot { pid, t, reason: "changed", state: after, frozen }));
                }
            }
            GcEvent::Lost { pid, .. } => {
                if let Some(p) = self.procs.get_mut(&pid) {
                    p.open_window = None;
                }
            }
        }
    }

    /// A page scan of one process right when a collection starts or ends, within the budget.
    fn triggered_scan(&mut self, pid: i32, reason: ScanReason) {
        if !self.opts.pagemap {
            return;
        }
        let now = monotonic_ns();
        let budget_ns = (self.opts.trigger_budget * 1e9) as u64;
        let Some(p) = self.procs.get_mut(&pid) else { return };
        if p.cow.is_none() || !p.alive {
            return;
        }
        while p.triggers.front().map(|&(t, _)| now.saturating_sub(t) > 1_000_000_000).unwrap_or(false) {
            p.triggers.pop_front();
        }
        let spent: u64 = p.triggers.iter().map(|&(_, d)| d).sum();
        if spent >= budget_ns {
            self.stats.trigger_scans_skipped += 1;
            return;
        }
        self.stats.trigger_scans += 1;
        let minflt = p.files.read_stat().map(|s| s.minflt).unwrap_or(0);
        if let Some(step) = self.scan_pages(pid, reason, minflt) {
            if let Some(p) = self.procs.get_mut(&pid) {
                p.triggers.push_back((now, (step.scan_s * 1e9) as u64));
            }
            self.emit(|o| o.cow_steps.push(step));
        }
    }

    /// Rescans one process's watched pages; None when it has no tracker or just exited.
    fn scan_pages(&mut self, pid: i32, reason: ScanReason, minflt: u64) -> Option<CowStep> {
        let start_ns = self.start_ns;
        let p = self.procs.get_mut(&pid)?;
        let (cow, reader) = (p.cow.as_mut()?, p.pagemap.as_mut()?);
        // Windows that may overlap the chunks' intervals (they reach back to the previous scan).
        let mut windows = p.windows.clone();
        if let Some(s) = p.open_window {
            windows.push((s, u64::MAX));
        }
        let frac = |a: u64, b: u64| covered_fraction(&windows, a, b);
        let d: ScanDelta = match cow.scan(reader, &frac, &monotonic_ns) {
            Ok(d) => d,
            Err(_) => return None,
        };
        let ps = cow.page_size;
        let t = monotonic_ns().saturating_sub(start_ns) as f64 / 1e9;
        Some(CowStep {
            pid,
            t,
            reason,
            gc_bytes: d.gc_pages * ps,
            outside_bytes: d.outside_pages * ps,
            ambiguous_bytes: d.ambiguous_pages * ps,
            released_bytes: d.released_pages * ps,
            sole_bytes: d.sole_pages * ps,
            minflt,
            scan_s: d.scan_ns as f64 / 1e9,
            pages_read: d.pages_read,
        })
    }

    /// Drops GC windows that can no longer overlap any chunk interval.
    fn prune_windows(&mut self) {
        let keep_after = monotonic_ns().saturating_sub(2 * self.opts.interval.as_nanos() as u64 + 2_000_000_000);
        for p in self.procs.values_mut() {
            p.windows.retain(|&(_, e)| e >= keep_after);
        }
    }

    fn scan_tree(&mut self) {
        let t0 = monotonic_ns();
        self.stats.tree_scans += 1;
        let found = descendants(self.root);
        let new: Vec<(i32, i32, Role)> =
            found.iter().filter(|(pid, _)| !self.procs.contains_key(pid)).map(|&(pid, ppid)| (pid, ppid, Role::Worker)).collect();
        if !new.is_empty() {
            self.add_processes(&new);
        }
        let now = self.now_s();
        let mut gone = Vec::new();
        for (&pid, p) in self.procs.iter() {
            if !p.alive {
                continue;
            }
            let listed = pid == self.root || found.iter().any(|&(q, _)| q == pid);
            if !listed || procfs::is_gone(pid) {
                gone.push(pid);
            }
        }
        for pid in gone {
            self.mark_exited(pid, now);
        }
        self.stats.tree_scan_s += monotonic_ns().saturating_sub(t0) as f64 / 1e9;
    }

    fn mark_exited(&mut self, pid: i32, t: f64) {
        let Some(p) = self.procs.get_mut(&pid) else { return };
        if !p.alive {
            return;
        }
        p.alive = false;
        p.info.exited = Some(t);
        p.open_window = None;
        let info = p.info.clone();
        if let Some(poller) = &self.poller {
            poller.remove(pid);
        }
        self.emit(|o| o.processes.push(info));
    }

    /// Adds processes in two rounds: first every page baseline (the sooner after a fork, the more
    /// of the shared pages it sees), then GC state, the first measurement, and the report.
    fn add_processes(&mut self, found: &[(i32, i32, Role)]) {
        let mut added = Vec::new();
        for &(pid, ppid, role) in found {
            if let Some(p) = self.open_process(pid, ppid, role) {
                self.procs.insert(pid, p);
                self.order.push(pid);
                added.push(pid);
            }
        }
        for pid in added {
            self.attach_gc(pid);
            if let Some(info) = self.procs.get(&pid).map(|p| p.info.clone()) {
                self.emit(|o| o.processes.push(info));
            }
            self.measure(pid, ScanReason::Pass);
        }
    }

    /// Opens a process's /proc files and takes its page baseline; None if it already exited.
    fn open_process(&mut self, pid: i32, ppid: i32, role: Role) -> Option<Proc> {
        let t = self.now_s();
        let mut files = ProcFiles::open(pid).ok()?;
        let ppid = if ppid == 0 { files.read_stat().map(|s| s.ppid).unwrap_or(0) } else { ppid };
        let mut info = ProcessInfo {
            pid,
            ppid,
            role,
            cmdline: cmdline(pid),
            first_seen: t,
            exited: None,
            python: None,
            gc_note: None,
            baseline: None,
        };
        let (mut pagemap, mut cow) = (None, None);
        if self.opts.pagemap {
            if let (Ok(mut reader), Ok(maps)) = (PagemapReader::open(pid), read_maps(pid)) {
                if let Ok(tracker) = CowTracker::baseline(&mut reader, &maps, &monotonic_ns) {
                    let ps = tracker.page_size;
                    let b = tracker.baseline;
                    info.baseline = Some(BaselineInfo {
                        t: self.t(b.t_ns),
                        present_bytes: b.present_pages * ps,
                        shared_bytes: b.shared_pages * ps,
                        mappings: b.mappings,
                        scan_s: b.scan_ns as f64 / 1e9,
                        method: tracker.method,
                    });
                    pagemap = Some(reader);
                    cow = Some(tracker);
                }
            }
        }
        Some(Proc {
            info,
            files,
            pagemap,
            cow,
            gc: None,
            mem: ProcessMemory::open(pid).ok(),
            windows: Vec::new(),
            open_window: None,
            triggers: VecDeque::new(),
            frozen: FrozenCount::default(),
            frozen_list: (0, 0),
            alive: true,
        })
    }

    /// Finds the process's GC state, counts its frozen objects, and hands it to the poller.
    fn attach_gc(&mut self, pid: i32) {
        let Some(ppid) = self.procs.get(&pid).map(|p| p.info.ppid) else { return };
        let parent = self.procs.get(&ppid).and_then(|p| p.gc.as_ref().map(|l| (*l, p.frozen, p.frozen_list)));
        let located = match (pid == self.root).then(|| self.root_gc.take()).flatten() {
            Some(found) => found,
            None => gc_location(pid, parent.as_ref().map(|(l, _, _)| (l, ppid))),
        };
        let (max_objects, budget) = (self.opts.frozen_max_objects, self.opts.frozen_budget);
        let Some(p) = self.procs.get_mut(&pid) else { return };
        let (loc, version) = match located {
            Ok(found) => found,
            Err(note) => {
                p.info.gc_note = Some(note);
                return;
            }
        };
        p.info.python = Some(version);
        let Some(state) = p.mem.as_ref().and_then(|m| loc.read(m).ok()) else { return };
        p.gc = Some(loc);
        p.frozen_list = (state.frozen_next, state.frozen_prev);
        // A forked worker inherits its parent's permanent generation: the same list (same first
        // and last node) has the same length, so it is not walked again.
        p.frozen = match parent {
            Some((_, pf, plist)) if plist == p.frozen_list => pf,
            _ => p.mem.as_ref().map(|m| loc.count_frozen(m, &state, max_objects, budget)).unwrap_or_default(),
        };
        let frozen = p.frozen;
        if let Some(poller) = &self.poller {
            poller.add(loc, state);
        }
        let snap = GcSnapshot { pid, t: self.now_s(), reason: "initial", state, frozen };
        self.emit(|o| o.gc_snapshots.push(snap));
    }

    /// One full measurement of one process: stat, smaps_rollup, GC state, pages.
    fn measure(&mut self, pid: i32, reason: ScanReason) {
        let t_start = monotonic_ns();
        let Some(p) = self.procs.get_mut(&pid) else { return };
        if !p.alive {
            return;
        }
        let mut cost = Cost::default();
        let stat = p.files.read_stat();
        let t1 = monotonic_ns();
        cost.stat_s = (t1 - t_start) as f64 / 1e9;
        let rollup = p.files.read_rollup();
        let t2 = monotonic_ns();
        cost.smaps_s = (t2 - t1) as f64 / 1e9;
        let (Ok(stat), Ok(rollup)) = (stat, rollup) else {
            let now = self.now_s();
            self.mark_exited(pid, now);
            return;
        };
        let gc = match (p.gc, p.mem.as_ref()) {
            (Some(loc), Some(m)) => loc.read(m).ok(),
            _ => None,
        };
        let t3 = monotonic_ns();
        cost.gc_s = (t3 - t2) as f64 / 1e9;
        // Pages unmapped since the baseline were released, not copied (checked once per pass).
        if let Some(cow) = p.cow.as_mut() {
            if let Ok(maps) = read_maps(pid) {
                cow.forget_unmapped(&maps);
            }
        }
        let step = self.scan_pages(pid, reason, stat.minflt);
        if let Some(s) = &step {
            cost.pagemap_s = (monotonic_ns() - t3) as f64 / 1e9;
            cost.pages_read = s.pages_read;
        }
        let sample = Sample { pid, pass: self.stats.passes, t: self.t(t_start), rollup, minflt: stat.minflt, majflt: stat.majflt, gc, cost };
        self.emit(|o| {
            o.samples.push(sample);
            if let Some(s) = step {
                o.cow_steps.push(s);
            }
        });
    }

    fn pass(&mut self, reason: ScanReason) {
        self.stats.passes += 1;
        let pids: Vec<i32> = self.order.iter().copied().filter(|p| self.procs.get(p).map(|x| x.alive).unwrap_or(false)).collect();
        for pid in pids {
            self.measure(pid, reason);
            // Collections that start meanwhile get their scan now, not after the whole pass.
            self.drain_events();
        }
        self.prune_windows();
    }

    fn final_pass(&mut self) {
        self.drain_events();
        self.pass(ScanReason::Final);
    }
}

/// The parts of one measurement of one process, each timed (seconds): for the cost benchmark.
#[derive(Debug, Clone, Copy, Default)]
pub struct PassCost {
    pub rss: u64,
    pub stat_s: f64,
    pub smaps_s: f64,
    pub maps_s: f64,
    pub gc_s: f64,
    pub pagemap_baseline_s: f64,
    pub pagemap_scan_s: f64,
    pub pages_read: u64,
    pub shared_pages: u64,
}

/// Measures `pid` once the way a pass does (stat, smaps_rollup, maps, GC state when Python, and a
/// page baseline followed by one rescan) and times each part.
pub fn measure_once(pid: i32) -> Result<PassCost> {
    let mut c = PassCost::default();
    let t = || monotonic_ns();
    let secs = |a: u64, b: u64| b.saturating_sub(a) as f64 / 1e9;
    let mut files = ProcFiles::open(pid).map_err(|e| from_os(pid, &e, "/proc/PID/smaps_rollup"))?;
    let t0 = t();
    files.read_stat().map_err(|e| from_os(pid, &e, "/proc/PID/stat"))?;
    let t1 = t();
    c.rss = files.read_rollup().map_err(|e| from_os(pid, &e, "/proc/PID/smaps_rollup"))?.rss;
    let t2 = t();
    let maps = read_maps(pid)?;
    let t3 = t();
    c.stat_s = secs(t0, t1);
    c.smaps_s = secs(t1, t2);
    c.maps_s = secs(t2, t3);
    if let (Ok(loc), Ok(mem)) = (attach(pid).and_then(|i| locate(&i)), ProcessMemory::open(pid)) {
        let t4 = t();
        let _ = loc.read(&mem);
        c.gc_s = secs(t4, t());
    }
    let mut reader = PagemapReader::open(pid).map_err(|e| from_os(pid, &e, "/proc/PID/pagemap"))?;
    let t5 = t();
    let mut cow = CowTracker::baseline(&mut reader, &maps, &monotonic_ns).map_err(|e| from_os(pid, &e, "/proc/PID/pagemap"))?;
    let t6 = t();
    let d = cow.scan(&mut reader, &|_, _| 0.0, &monotonic_ns).map_err(|e| from_os(pid, &e, "/proc/PID/pagemap"))?;
    c.pagemap_baseline_s = secs(t5, t6);
    c.pagemap_scan_s = secs(t6, t());
    c.pages_read = d.pages_read;
    c.shared_pages = cow.baseline.shared_pages;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A master that forks two workers; one runs a full collection (copying the pages of every
    /// list it traverses), the other writes nothing. Skips when the pyenv build is missing.
    #[test]
    fn measures_a_forked_tree() {
        use std::io::{BufRead, BufReader, Write};
        use std::process::{Command, Stdio};
        let python = "/root/.pyenv/versions/3.12.1/bin/python3";
        if !std::path::Path::new(python).exists() {
            eprintln!("skipping: {python} not installed");
            return;
        }
        let script = r#"
import gc, os, sys, time
data = [[i, str(i)] for i in range(300000)]
gc.collect()
kids = []
for k in range(2):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        if k == 0:
            gc.collect()
        time.sleep(30)
        os._exit(0)
    os.close(r)
    kids.append((pid, w))
print(" ".join(str(p) for p, _ in kids), flush=True)
sys.stdin.readline()
for _, w in kids:
    os.write(w, b"x")
sys.stdin.readline()
"#;
        let mut child = Command::new(python).args(["-c", script]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let kids: Vec<i32> = line.split_whitespace().map(|p| p.parse().unwrap()).collect();
        let master = child.id() as i32;
        let opts = MonitorOptions { interval: Duration::from_millis(300), ..MonitorOptions::default() };
        let mut m = Monitor::start(master, opts).unwrap();
        std::thread::sleep(Duration::from_millis(400));
        child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        let stats = m.stop();
        let o = m.drain();
        let _ = child.kill();
        let _ = child.wait();
        for k in &kids {
            // SAFETY: plain kill of our own grandchildren.
            unsafe { libc::kill(*k, libc::SIGKILL) };
        }
        let roles: HashMap<i32, Role> = o.processes.iter().map(|p| (p.pid, p.role)).collect();
        assert_eq!(roles.get(&master), Some(&Role::Master));
        assert!(kids.iter().all(|k| roles.get(k) == Some(&Role::Worker)), "{roles:?}");
        let sum = |pid: i32, f: fn(&CowStep) -> u64| o.cow_steps.iter().filter(|s| s.pid == pid).map(f).sum::<u64>();
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let (gc0, out0) = (sum(kids[0], |s| s.gc_bytes), sum(kids[0], |s| s.outside_bytes));
        let (gc1, out1) = (sum(kids[1], |s| s.gc_bytes), sum(kids[1], |s| s.outside_bytes));
        eprintln!("collecting worker: gc {:.1} MiB outside {:.1} MiB; idle worker: gc {:.1} outside {:.1}; {stats:?}", mib(gc0), mib(out0), mib(gc1), mib(out1));
        assert!(mib(gc0) > 10.0, "the collecting worker's copies should be attributed to GC");
        assert!(gc0 > 4 * out0);
        assert!(mib(gc1 + out1) < 2.0, "the idle worker copied almost nothing");
        assert!(o.gc_windows.iter().any(|w| w.pid == kids[0] && w.generation == Some(2)), "{:?}", o.gc_windows);
        assert!(o.samples.iter().any(|s| s.pid == kids[1] && s.rollup.rss > 0));
    }
}
