//! Processes joining and leaving a measured tree: rescanning it for new workers, opening each one's
//! files and page baseline, finding its GC state (from its parent's when it is a fork of the same
//! program), and marking exits.

use super::cow::CowTracker;
use super::fork_share::fork_share;
use super::measurement::{BaselineInfo, ForkFacts, GcSnapshot, ProcessInfo, Role, ScanReason};
use super::module_names::module_names;
use super::pagemap::PagemapReader;
use super::process_tree::{cmdline, descendants};
use super::smaps::ProcFiles;
use super::tree_watch::{Proc, Worker};
use crate::clock::monotonic_ns;
use crate::interp::gc_config::{locate, FrozenCount, GcLocation};
use crate::interp::interpreter::attach;
use crate::process::maps::read_maps;
use crate::process::memory::ProcessMemory;
use crate::process::procfs;
use std::collections::VecDeque;

/// Where a process keeps its GC state: the parent's location when the child is a fork of the same
/// program (same executable, same mapping around the GC state), else a full attach.
fn gc_location(
    pid: i32,
    parent: Option<(&GcLocation, i32)>,
) -> std::result::Result<(GcLocation, String), String> {
    if let Some((ploc, ppid)) = parent {
        let same_exe = procfs::exe(pid).is_some() && procfs::exe(pid) == procfs::exe(ppid);
        let around = |p: i32| {
            read_maps(p).ok().and_then(|maps| {
                maps.into_iter()
                    .find(|m| m.start <= ploc.gc_addr && ploc.gc_addr < m.end)
                    .map(|m| (m.start, m.path))
            })
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

/// `pid` is a fork of `root`'s program: same executable, and the mapping that holds `addr` starts
/// at the same address in both (a spawned interpreter, laid out anew, is not).
fn same_image(pid: i32, root: i32, addr: u64) -> bool {
    let around = |p: i32| {
        read_maps(p).ok().and_then(|maps| {
            maps.into_iter()
                .find(|m| m.start <= addr && addr < m.end)
                .map(|m| (m.start, m.path))
        })
    };
    procfs::exe(pid).is_some()
        && procfs::exe(pid) == procfs::exe(root)
        && around(pid).is_some()
        && around(pid) == around(root)
}

impl Worker {
    pub(super) fn scan_tree(&mut self) {
        let t0 = monotonic_ns();
        self.stats.tree_scans += 1;
        let found = descendants(self.root);
        let new: Vec<(i32, i32, Role)> = found
            .iter()
            .filter(|(pid, _)| !self.procs.contains_key(pid))
            .map(|&(pid, ppid)| (pid, ppid, Role::Worker))
            .collect();
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

    pub(super) fn mark_exited(&mut self, pid: i32, t: f64) {
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
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
    pub(super) fn add_processes(&mut self, found: &[(i32, i32, Role)]) {
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
            self.fork_facts(pid, "found");
        }
    }

    /// A process against its parent since fork (workers) and its imported modules (Python forks
    /// of the master's executable).
    pub(super) fn fork_facts(&mut self, pid: i32, when: &'static str) {
        let Some(p) = self.procs.get(&pid) else {
            return;
        };
        if !p.alive {
            return;
        }
        let parent = p.info.ppid;
        let parent_alive = self.procs.get(&parent).map(|q| q.alive).unwrap_or(false);
        let share = if p.info.role == Role::Worker && parent_alive && self.opts.pagemap {
            fork_share(pid, parent).ok()
        } else {
            None
        };
        let modules = match (&self.modules_at, p.mem.as_ref()) {
            (Some(at), Some(mem))
                if p.info.python.is_some()
                    && (pid == self.root || same_image(pid, self.root, at.main_interp)) =>
            {
                module_names(mem, at).ok()
            }
            _ => None,
        };
        let t = self.now_s();
        self.emit(|o| {
            o.fork_facts.push(ForkFacts {
                pid,
                t,
                when,
                parent,
                share,
                modules,
            })
        });
    }

    /// Opens a process's /proc files and takes its page baseline; None if it already exited.
    fn open_process(&mut self, pid: i32, ppid: i32, role: Role) -> Option<Proc> {
        let t = self.now_s();
        let mut files = ProcFiles::open(pid).ok()?;
        let ppid = if ppid == 0 {
            files.read_stat().map(|s| s.ppid).unwrap_or(0)
        } else {
            ppid
        };
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
        let Some(ppid) = self.procs.get(&pid).map(|p| p.info.ppid) else {
            return;
        };
        let parent = self
            .procs
            .get(&ppid)
            .and_then(|p| p.gc.as_ref().map(|l| (*l, p.frozen, p.frozen_list)));
        let located = match (pid == self.root).then(|| self.root_gc.take()).flatten() {
            Some(found) => found,
            None => gc_location(pid, parent.as_ref().map(|(l, _, _)| (l, ppid))),
        };
        let (max_objects, budget) = (self.opts.frozen_max_objects, self.opts.frozen_budget);
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        let (loc, version) = match located {
            Ok(found) => found,
            Err(note) => {
                p.info.gc_note = Some(note);
                return;
            }
        };
        p.info.python = Some(version);
        let Some(state) = p.mem.as_ref().and_then(|m| loc.read(m).ok()) else {
            return;
        };
        p.gc = Some(loc);
        p.frozen_list = (state.frozen_next, state.frozen_prev);
        // A forked worker inherits its parent's permanent generation: the same list (same first
        // and last node) has the same length, so it is not walked again.
        p.frozen = match parent {
            Some((_, pf, plist)) if plist == p.frozen_list => pf,
            _ => p
                .mem
                .as_ref()
                .map(|m| loc.count_frozen(m, &state, max_objects, budget))
                .unwrap_or_default(),
        };
        let frozen = p.frozen;
        if let Some(poller) = &self.poller {
            poller.add(loc, state);
        }
        let snap = GcSnapshot {
            pid,
            t: self.now_s(),
            reason: "initial",
            state,
            frozen,
        };
        self.emit(|o| o.gc_snapshots.push(snap));
    }
}
