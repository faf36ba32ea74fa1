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

use super::cow::{covered_fraction, CowTracker, ScanDelta};
use super::gc_watch::{GcEvent, GcPoller};
use super::measurement::{
    Cost, CowStep, GcSnapshot, GcWindow, Output, ProcessInfo, Role, Sample, ScanReason,
    TreeWatchOptions, TreeWatchStats,
};
use super::module_names::ModulesLocation;
use super::pagemap::PagemapReader;
use super::process_tree::descendants;
use super::smaps::ProcFiles;
use crate::clock::monotonic_ns;
use crate::clock::thread_cpu_ns;
use crate::error::{from_os, Error, ErrorKind, Result};
use crate::interp::gc_config::{locate, FrozenCount, GcLocation};
use crate::interp::interpreter::attach;
use crate::process::maps::read_maps;
use crate::process::memory::ProcessMemory;
use crate::process::procfs;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub(super) struct Proc {
    pub(super) info: ProcessInfo,
    pub(super) files: ProcFiles,
    pub(super) pagemap: Option<PagemapReader>,
    pub(super) cow: Option<CowTracker>,
    pub(super) gc: Option<GcLocation>,
    pub(super) mem: Option<ProcessMemory>,
    /// GC windows (ns); an open window ends at u64::MAX.
    pub(super) windows: Vec<(u64, u64)>,
    pub(super) open_window: Option<u64>,
    pub(super) triggers: VecDeque<(u64, u64)>,
    pub(super) frozen: FrozenCount,
    /// First and last node of the permanent generation when `frozen` was counted.
    pub(super) frozen_list: (u64, u64),
    pub(super) alive: bool,
}

pub(super) struct Worker {
    pub(super) opts: TreeWatchOptions,
    pub(super) start_ns: u64,
    pub(super) root: i32,
    pub(super) procs: HashMap<i32, Proc>,
    pub(super) order: Vec<i32>,
    pub(super) poller: Option<GcPoller>,
    pub(super) events: Receiver<GcEvent>,
    pub(super) out: Arc<Mutex<Output>>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) stats: TreeWatchStats,
    /// The master's GC location, found by `TreeWatch::start` (taken by the first `attach_gc`).
    pub(super) root_gc: Option<std::result::Result<(GcLocation, String), String>>,
    /// Where the master keeps `sys.modules` (valid in its forks too).
    pub(super) modules_at: Option<ModulesLocation>,
}

pub struct TreeWatch {
    pub(super) out: Arc<Mutex<Output>>,
    pub(super) stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<TreeWatchStats>>,
    pub root: i32,
    stats: Option<TreeWatchStats>,
}

impl TreeWatch {
    /// Checks the root process (exists, readable), measures it and its descendants once, and
    /// starts measuring in the background.
    pub fn start(root: i32, opts: TreeWatchOptions) -> Result<TreeWatch> {
        if root <= 0 || !procfs::exists(root) {
            return Err(Error::new(
                ErrorKind::NoSuchProcess,
                format!("no process with pid {root}"),
            ));
        }
        let unreadable = |e: std::io::Error| {
            if e.raw_os_error() == Some(libc::ESRCH) && procfs::is_gone(root) {
                Error::new(ErrorKind::NoSuchProcess, format!("pid {root} has exited"))
            } else if e.raw_os_error() == Some(libc::ESRCH)
                && read_maps(root).is_ok_and(|m| m.is_empty())
            {
                // A live process without an address space (its smaps_rollup fails to open or reads
                // empty): a kernel thread, such as kthreadd (pid 2). Not "exited".
                Error::new(ErrorKind::NotPython, format!("pid {root} is not a Python process (it has no memory maps: a kernel thread?)"))
            } else {
                from_os(root, &e, "/proc/PID/smaps_rollup")
            }
        };
        let mut files = ProcFiles::open(root).map_err(unreadable)?;
        files.read_rollup().map_err(unreadable)?;
        if opts.pagemap {
            // pagemap needs the same access; fail now with one clear message rather than later.
            PagemapReader::open(root).map_err(|e| from_os(root, &e, "/proc/PID/pagemap"))?;
        }
        // A Python master must be readable too (reading its memory needs ptrace access, which
        // /proc/PID/smaps_rollup does not). Attached once here; its GC location is reused below.
        let mut modules_at = None;
        let root_gc = match attach(root) {
            Err(e) if e.kind == ErrorKind::PermissionDenied => return Err(e),
            Err(e) => Err(e.message),
            Ok(interp) => {
                modules_at = interp
                    .main_interp()
                    .ok()
                    .map(|main_interp| ModulesLocation {
                        layout: interp.layout,
                        main_interp,
                    });
                locate(&interp)
                    .map(|loc| (loc, interp.version_string()))
                    .map_err(|e| e.message)
            }
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
            stats: TreeWatchStats::default(),
            root_gc: Some(root_gc),
            modules_at,
        };
        let mut first = vec![(root, 0, Role::Master)];
        first.extend(
            descendants(root)
                .into_iter()
                .map(|(pid, ppid)| (pid, ppid, Role::Worker)),
        );
        worker.add_processes(&first);
        if !worker.procs.contains_key(&root) {
            return Err(Error::new(
                ErrorKind::NoSuchProcess,
                format!("pid {root} has exited"),
            ));
        }
        let handle = std::thread::Builder::new()
            .name("gilty-memory".into())
            .spawn(move || worker.run())
            .map_err(|e| {
                Error::new(
                    ErrorKind::Internal,
                    format!("cannot start the measuring thread: {e}"),
                )
            })?;
        Ok(TreeWatch {
            out,
            stop,
            handle: Some(handle),
            root,
            stats: None,
        })
    }

    /// Takes what was measured since the last call.
    pub fn drain(&self) -> Output {
        std::mem::take(&mut *self.out.lock().unwrap())
    }

    /// The measuring thread has ended (the master exited, or `stop` was called).
    pub fn finished(&self) -> bool {
        self.handle
            .as_ref()
            .map(|h| h.is_finished())
            .unwrap_or(true)
    }

    /// Ends the run: one last measurement of every live process, then the totals.
    pub fn stop(&mut self) -> TreeWatchStats {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            self.stats = h.join().ok();
        }
        self.stats.unwrap_or_default()
    }
}

impl Drop for TreeWatch {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Worker {
    pub(super) fn t(&self, ns: u64) -> f64 {
        ns.saturating_sub(self.start_ns) as f64 / 1e9
    }

    pub(super) fn now_s(&self) -> f64 {
        self.t(monotonic_ns())
    }

    pub(super) fn emit(&self, f: impl FnOnce(&mut Output)) {
        f(&mut self.out.lock().unwrap());
    }

    fn run(mut self) -> TreeWatchStats {
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
            let timeout = wake
                .saturating_duration_since(now)
                .min(Duration::from_millis(50));
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
                let Some(p) = self.procs.get_mut(&pid) else {
                    return;
                };
                p.open_window = Some(t_ns);
                self.triggered_scan(pid, ScanReason::GcStart);
            }
            GcEvent::Ended {
                pid,
                start_ns,
                end_ns,
                generation,
                polls,
            } => {
                let (s, e) = (self.t(start_ns), self.t(end_ns));
                let Some(p) = self.procs.get_mut(&pid) else {
                    return;
                };
                p.open_window = None;
                p.windows.push((start_ns, end_ns));
                self.emit(|o| {
                    o.gc_windows.push(GcWindow {
                        pid,
                        start: s,
                        end: e,
                        generation,
                        polls,
                    })
                });
                self.triggered_scan(pid, ScanReason::GcEnd);
            }
            GcEvent::Changed {
                pid,
                t_ns,
                after,
                before,
            } => {
                let t = self.t(t_ns);
                let Some(p) = self.procs.get_mut(&pid) else {
                    return;
                };
                let list_changed = (after.frozen_next, after.frozen_prev)
                    != (before.frozen_next, before.frozen_prev);
                if list_changed {
                    if let (Some(loc), Some(mem)) = (p.gc, p.mem.as_ref()) {
                        p.frozen = loc.count_frozen(
                            mem,
                            &after,
                            self.opts.frozen_max_objects,
                            self.opts.recount_budget,
                        );
                    }
                }
                let frozen = p.frozen;
                // A list change that leaves emptiness and the count alone (an object leaving the
                // permanent generation) is not worth a report.
                if after.config() != before.config()
                    || after.frozen_empty() != before.frozen_empty()
                    || list_changed && frozen.exact
                {
                    self.emit(|o| {
                        o.gc_snapshots.push(GcSnapshot {
                            pid,
                            t,
                            reason: "changed",
                            state: after,
                            frozen,
                        })
                    });
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
    pub(super) fn triggered_scan(&mut self, pid: i32, reason: ScanReason) {
        if !self.opts.pagemap {
            return;
        }
        let now = monotonic_ns();
        let budget_ns = (self.opts.trigger_budget * 1e9) as u64;
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        if p.cow.is_none() || !p.alive {
            return;
        }
        while p
            .triggers
            .front()
            .map(|&(t, _)| now.saturating_sub(t) > 1_000_000_000)
            .unwrap_or(false)
        {
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
    pub(super) fn scan_pages(
        &mut self,
        pid: i32,
        reason: ScanReason,
        minflt: u64,
    ) -> Option<CowStep> {
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
        let keep_after =
            monotonic_ns().saturating_sub(2 * self.opts.interval.as_nanos() as u64 + 2_000_000_000);
        for p in self.procs.values_mut() {
            p.windows.retain(|&(_, e)| e >= keep_after);
        }
    }

    /// One full measurement of one process: stat, smaps_rollup, GC state, pages.
    pub(super) fn measure(&mut self, pid: i32, reason: ScanReason) {
        let t_start = monotonic_ns();
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
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
        let sample = Sample {
            pid,
            pass: self.stats.passes,
            t: self.t(t_start),
            rollup,
            minflt: stat.minflt,
            majflt: stat.majflt,
            gc,
            cost,
        };
        self.emit(|o| {
            o.samples.push(sample);
            if let Some(s) = step {
                o.cow_steps.push(s);
            }
        });
    }

    fn pass(&mut self, reason: ScanReason) {
        self.stats.passes += 1;
        let pids: Vec<i32> = self
            .order
            .iter()
            .copied()
            .filter(|p| self.procs.get(p).map(|x| x.alive).unwrap_or(false))
            .collect();
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
        let pids: Vec<i32> = self.order.clone();
        for pid in pids {
            self.fork_facts(pid, "final");
        }
    }
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
        let mut child = Command::new(python)
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let kids: Vec<i32> = line
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        let master = child.id() as i32;
        let opts = TreeWatchOptions {
            interval: Duration::from_millis(300),
            ..TreeWatchOptions::default()
        };
        let mut m = TreeWatch::start(master, opts).unwrap();
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
        assert!(
            kids.iter().all(|k| roles.get(k) == Some(&Role::Worker)),
            "{roles:?}"
        );
        let sum = |pid: i32, f: fn(&CowStep) -> u64| {
            o.cow_steps
                .iter()
                .filter(|s| s.pid == pid)
                .map(f)
                .sum::<u64>()
        };
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let (gc0, out0) = (
            sum(kids[0], |s| s.gc_bytes),
            sum(kids[0], |s| s.outside_bytes),
        );
        let (gc1, out1) = (
            sum(kids[1], |s| s.gc_bytes),
            sum(kids[1], |s| s.outside_bytes),
        );
        eprintln!("collecting worker: gc {:.1} MiB outside {:.1} MiB; idle worker: gc {:.1} outside {:.1}; {stats:?}", mib(gc0), mib(out0), mib(gc1), mib(out1));
        assert!(
            mib(gc0) > 10.0,
            "the collecting worker's copies should be attributed to GC"
        );
        assert!(gc0 > 4 * out0);
        assert!(
            mib(gc1 + out1) < 2.0,
            "the idle worker copied almost nothing"
        );
        assert!(
            o.gc_windows
                .iter()
                .any(|w| w.pid == kids[0] && w.generation == Some(2)),
            "{:?}",
            o.gc_windows
        );
        assert!(o
            .samples
            .iter()
            .any(|s| s.pid == kids[1] && s.rollup.rss > 0));
    }
}
