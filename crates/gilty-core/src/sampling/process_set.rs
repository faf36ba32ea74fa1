//! Several processes sampled on one schedule (`--subprocesses`, several `--pid`): one `Sampler` per
//! process, every pass samples them all at the same tick of one clock, and the descendants of the
//! given processes are rescanned every `SCAN_EVERY` so workers that start later are attached and
//! workers that exit are dropped.

use crate::error::{ErrorKind, Result};
use crate::interp::interpreter::attach;
use crate::memory::process_tree::{cmdline, descendants};
use crate::memory::smaps::parse_stat;
use crate::process::procfs;
use crate::sampling::sampler::{Batch, Sampler};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

/// How often descendants are listed (and members checked for exit between passes).
const SCAN_EVERY: Duration = Duration::from_millis(300);
/// How often a process found initialising its interpreter is tried again: a short-lived command
/// must not be missed for a whole `SCAN_EVERY`.
const INIT_POLL: Duration = Duration::from_millis(10);
/// Longest sleep between two checks of the deadline, whatever the sampling period.
const SLICE: Duration = Duration::from_millis(100);
/// A process not (yet) recognisable as Python is reported as skipped after this long: a shell that
/// forks and then execs Python, or an interpreter still initialising, gets that long to become one.
const SKIP_GRACE: Duration = Duration::from_secs(1);
/// A process whose executable looks like Python is retried this long after it was first seen; one
/// whose interpreter is mapped but not initialised yet is retried until it is, or until it exits.
const INIT_RETRY: Duration = Duration::from_secs(5);

/// Something that happened to the set, stamped on the set's clock (seconds since it was created).
#[derive(Debug, Clone)]
pub enum Event {
    Attached {
        pid: i32,
        ppid: i32,
        t: f64,
        cmdline: String,
        python_version: String,
        executable: String,
        switch_interval_s: f64,
    },
    Exited {
        pid: i32,
        t: f64,
    },
    /// Not sampled: a zombie, not Python, an unsupported Python, no permission. Reported once per
    /// pid.
    Skipped {
        pid: i32,
        ppid: i32,
        t: f64,
        reason: String,
    },
}

/// What one `collect` call gathered: a batch per sampled process (exited ones included once, with
/// `exited` set), events in the order they happened, and whether nothing is left to sample.
#[derive(Debug, Default)]
pub struct Collected {
    pub batches: Vec<(i32, Batch)>,
    pub events: Vec<Event>,
    pub finished: bool,
}

/// A descendant (or a root) that is not sampled yet; retried when its executable changes (exec),
/// and on every scan while its interpreter is initialising.
struct Pending {
    ppid: i32,
    exe: Option<String>,
    since: Instant,
    reported: bool,
    reason: String,
    /// The last attempt found a Python interpreter not initialised yet.
    initialising: bool,
}

pub struct ProcessSet {
    roots: Vec<i32>,
    follow: bool,
    rate_hz: f64,
    period: Duration,
    start: Instant,
    next_due: Option<Instant>,
    last_scan: Option<Instant>,
    members: BTreeMap<i32, Sampler>,
    pending: HashMap<i32, Pending>,
    /// Pids never to look at again: exited members, and descendants skipped for good.
    done: HashSet<i32>,
    events: Vec<Event>,
    exited_batches: Vec<(i32, Batch)>,
    late: u64,
    /// Every member reads its asyncio tasks in each pass (`enable_tasks`).
    tasks: bool,
    /// Every member joins native stacks to its samples (`enable_native`).
    native: bool,
}

fn stat_of(pid: i32) -> Option<crate::memory::smaps::Stat> {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| parse_stat(&s))
}

fn looks_like_python(exe: &Option<String>) -> bool {
    exe.as_deref()
        .and_then(|e| e.rsplit('/').next())
        .map(|name| name.starts_with("python"))
        .unwrap_or(false)
}

impl ProcessSet {
    /// Attaches to every root. Without `follow` any root that cannot be attached is an error (as
    /// for a single `--pid`); with `follow` a root that is not Python (a shell wrapper) is only
    /// skipped, but a root that does not exist is still an error.
    pub fn new(roots: &[i32], rate_hz: f64, follow: bool) -> Result<ProcessSet> {
        let rate = rate_hz.clamp(0.01, 20_000.0);
        let mut set = ProcessSet {
            roots: Vec::new(),
            follow,
            rate_hz: rate,
            period: Duration::from_secs_f64(1.0 / rate),
            start: Instant::now(),
            next_due: None,
            last_scan: None,
            members: BTreeMap::new(),
            pending: HashMap::new(),
            done: HashSet::new(),
            events: Vec::new(),
            exited_batches: Vec::new(),
            late: 0,
            tasks: false,
            native: false,
        };
        for &pid in roots {
            if set.roots.contains(&pid) {
                continue;
            }
            set.roots.push(pid);
            let ppid = stat_of(pid).map(|s| s.ppid).unwrap_or(0);
            match attach(pid) {
                Ok(interp) => set.add_member(pid, ppid, interp),
                // The command just started may still be loading or initialising its interpreter, or
                // be a wrapper about to exec one: kept and retried by every scan like a descendant.
                // A wrapper that does not look like Python is said to be skipped at once, as
                // before.
                Err(e)
                    if follow
                        && matches!(
                            e.kind,
                            ErrorKind::NotPython
                                | ErrorKind::UnrecognisedInterpreter
                                | ErrorKind::NotInitialised
                        ) =>
                {
                    let now = Instant::now();
                    set.consider_failure(pid, ppid, e.kind, e.message.clone(), now);
                    if let Some(p) = set
                        .pending
                        .get_mut(&pid)
                        .filter(|p| !p.initialising && !looks_like_python(&p.exe))
                    {
                        p.reported = true;
                        set.events.push(Event::Skipped {
                            pid,
                            ppid,
                            t: 0.0,
                            reason: e.message,
                        });
                    }
                }
                Err(e) if follow && e.kind != ErrorKind::NoSuchProcess => {
                    set.events.push(Event::Skipped {
                        pid,
                        ppid,
                        t: 0.0,
                        reason: e.message,
                    });
                }
                Err(e) => return Err(e),
            }
        }
        // Attach the descendants present now, so they are sampled from the first pass on.
        set.start = Instant::now();
        if follow {
            set.scan();
        }
        Ok(set)
    }

    pub fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Pids being sampled now.
    pub fn pids(&self) -> Vec<i32> {
        self.members.keys().copied().collect()
    }

    fn add_member(&mut self, pid: i32, ppid: i32, interp: crate::interp::interpreter::Interpreter) {
        let event = Event::Attached {
            pid,
            ppid,
            t: self.elapsed(),
            cmdline: cmdline(pid),
            python_version: interp.version_string(),
            executable: interp.executable.clone(),
            switch_interval_s: interp.switch_interval_s().unwrap_or(0.005),
        };
        self.events.push(event);
        self.pending.remove(&pid);
        let mut sampler = Sampler::new(interp, self.rate_hz);
        if self.tasks {
            // A version without an asyncio layout is sampled without its tasks.
            let _ = sampler.enable_tasks();
        }
        if self.native {
            // Perf was permitted for the first members: a later one that fails (it exited while
            // its maps were read) is sampled with its Python stacks alone.
            let _ = sampler.enable_native();
        }
        self.members.insert(pid, sampler);
    }

    /// Every member, now and later, reads its asyncio tasks in each pass (`record --tasks`).
    pub fn enable_tasks(&mut self) {
        self.tasks = true;
        for s in self.members.values_mut() {
            let _ = s.enable_tasks();
        }
    }

    /// Every member, now and later, joins native stacks to its samples (`record -s --native`): each
    /// process has its own kernel events and unwinder, at the same bounded rate as one process
    /// (`native::record`: at most 500 kernel samples per CPU-second of each thread, one unwind per
    /// thread and pass). Err: perf events refused (one line saying what to change).
    pub fn enable_native(&mut self) -> std::result::Result<(), String> {
        self.native = true;
        for s in self.members.values_mut() {
            s.enable_native()?;
        }
        Ok(())
    }

    /// Records why `pid` could not be attached: skipped at once for good, or kept to retry.
    fn consider_failure(
        &mut self,
        pid: i32,
        ppid: i32,
        kind: ErrorKind,
        reason: String,
        now: Instant,
    ) {
        match kind {
            ErrorKind::NoSuchProcess | ErrorKind::TargetExited => {
                self.pending.remove(&pid);
                self.done.insert(pid);
            }
            // Not Python yet (a forked shell about to exec, an interpreter still initialising).
            ErrorKind::NotPython
            | ErrorKind::UnrecognisedInterpreter
            | ErrorKind::NotInitialised => {
                let exe = procfs::exe(pid);
                let entry = self.pending.entry(pid).or_insert(Pending {
                    ppid,
                    exe: exe.clone(),
                    since: now,
                    reported: false,
                    reason: String::new(),
                    initialising: false,
                });
                entry.reason = reason;
                entry.initialising = kind == ErrorKind::NotInitialised;
                if entry.exe != exe {
                    entry.exe = exe;
                    entry.since = now;
                }
            }
            _ => {
                self.pending.remove(&pid);
                self.done.insert(pid);
                let t = self.elapsed();
                self.events.push(Event::Skipped {
                    pid,
                    ppid,
                    t,
                    reason,
                });
            }
        }
    }

    fn try_attach(&mut self, pid: i32, ppid: i32, now: Instant) {
        match attach(pid) {
            Ok(interp) => self.add_member(pid, ppid, interp),
            Err(e) => self.consider_failure(pid, ppid, e.kind, e.message, now),
        }
    }

    /// Lists the descendants of every root and member; attaches new Python ones, skips the rest.
    fn scan(&mut self) {
        let now = Instant::now();
        self.last_scan = Some(now);
        let mut parents: Vec<i32> = self.roots.clone();
        parents.extend(self.members.keys().copied());
        let mut found: Vec<(i32, i32)> = Vec::new();
        let mut seen: HashSet<i32> = parents.iter().copied().collect();
        for p in parents {
            for (pid, ppid) in descendants(p) {
                if seen.insert(pid) {
                    found.push((pid, ppid));
                }
            }
        }
        // Roots not attached yet (a command still starting) are retried like descendants.
        for &root in &self.roots {
            if !self.members.contains_key(&root)
                && !self.done.contains(&root)
                && !procfs::is_gone(root)
            {
                found.push((root, stat_of(root).map(|s| s.ppid).unwrap_or(0)));
            }
        }
        let present: HashSet<i32> = found.iter().map(|&(p, _)| p).collect();
        self.pending.retain(|pid, _| present.contains(pid));
        for (pid, ppid) in found {
            if self.members.contains_key(&pid) || self.done.contains(&pid) {
                continue;
            }
            let Some(stat) = stat_of(pid) else { continue };
            if stat.state == 'Z' {
                let t = self.elapsed();
                self.pending.remove(&pid);
                self.done.insert(pid);
                self.events.push(Event::Skipped {
                    pid,
                    ppid,
                    t,
                    reason: format!("pid {pid} is a zombie (exited, not yet reaped by its parent)"),
                });
                continue;
            }
            let retry = match self.pending.get(&pid) {
                None => true,
                Some(p) => {
                    let exe = procfs::exe(pid);
                    exe != p.exe
                        || p.initialising
                        || (looks_like_python(&p.exe) && now - p.since < INIT_RETRY)
                }
            };
            if retry {
                self.try_attach(pid, ppid, now);
            }
            let t = self.elapsed();
            if let Some(p) = self.pending.get_mut(&pid) {
                let waited = now - p.since
                    >= if looks_like_python(&p.exe) {
                        INIT_RETRY
                    } else {
                        SKIP_GRACE
                    };
                if waited && !p.reported && !p.initialising {
                    p.reported = true;
                    self.events.push(Event::Skipped {
                        pid,
                        ppid: p.ppid,
                        t,
                        reason: p.reason.clone(),
                    });
                }
            }
        }
    }

    /// Drops members that are gone (between passes, so an exit is seen at any sampling rate).
    fn reap(&mut self) {
        let gone: Vec<i32> = self
            .members
            .keys()
            .copied()
            .filter(|&p| procfs::is_gone(p))
            .collect();
        for pid in gone {
            self.drop_member(pid);
        }
    }

    fn drop_member(&mut self, pid: i32) {
        if let Some(mut s) = self.members.remove(&pid) {
            let mut batch = s.take_batch();
            batch.exited = true;
            self.exited_batches.push((pid, batch));
            self.done.insert(pid);
            let t = self.elapsed();
            self.events.push(Event::Exited { pid, t });
        }
    }

    /// Nothing left to sample and nothing that could bring a new process: every root is gone.
    fn finished(&self) -> bool {
        self.members.is_empty() && (!self.follow || self.roots.iter().all(|&r| procfs::is_gone(r)))
    }

    /// Samples every member for `seconds` (returning earlier when nothing is left), sleeping at
    /// most `SLICE` at a time so that exits, new processes and the deadline are seen at any rate.
    pub fn collect(&mut self, seconds: f64) -> Collected {
        let deadline = Instant::now() + Duration::from_secs_f64(seconds.max(0.0));
        let mut finished = false;
        // Unbiased pass times on a busy machine: see crate::sampling::realtime.
        let _realtime = crate::sampling::realtime::RealtimeGuard::enter();
        loop {
            let now = Instant::now();
            let every = if self.pending.values().any(|p| p.initialising) {
                INIT_POLL
            } else {
                SCAN_EVERY
            };
            if self.last_scan.map(|t| now - t >= every).unwrap_or(true) {
                if self.follow {
                    self.scan();
                } else {
                    self.last_scan = Some(now);
                }
                self.reap();
            }
            if self.finished() {
                finished = true;
                break;
            }
            let due = *self.next_due.get_or_insert(now);
            if due >= deadline {
                break;
            }
            if due > now {
                std::thread::sleep(
                    (due - now)
                        .min(SLICE)
                        .min(INIT_POLL.max(self.period))
                        .min(deadline - now),
                );
                continue;
            }
            let t = self.elapsed();
            let pass_started = Instant::now();
            let gone: Vec<i32> = self
                .members
                .iter_mut()
                .filter_map(|(&pid, s)| (!s.sample_at(t)).then_some(pid))
                .collect();
            for pid in gone {
                self.drop_member(pid);
            }
            let mut next = due + self.period;
            let now = Instant::now();
            if next < now {
                // A pass overran its period: skip the missed slots instead of sampling in a burst,
                // and rest a quarter of the pass's time so a real-time sampler never keeps a CPU.
                self.late += ((now - next).as_secs_f64() / self.period.as_secs_f64()).ceil() as u64;
                next = now + (now - pass_started) / 4;
            }
            self.next_due = Some(next);
        }
        let late = std::mem::take(&mut self.late);
        let mut batches = std::mem::take(&mut self.exited_batches);
        for (&pid, s) in self.members.iter_mut() {
            let mut batch = s.take_batch();
            batch.late += late;
            batches.push((pid, batch));
        }
        Collected {
            batches,
            events: std::mem::take(&mut self.events),
            finished,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_root_is_an_error_and_a_non_python_root_is_skipped_when_following() {
        let err = ProcessSet::new(&[i32::MAX - 1], 100.0, true)
            .err()
            .expect("no such process");
        assert_eq!(err.kind, ErrorKind::NoSuchProcess);
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert!(ProcessSet::new(&[pid], 100.0, false).is_err());
        let mut set = ProcessSet::new(&[pid], 100.0, true).expect("following a non-Python root");
        assert!(set.pids().is_empty());
        let _ = child.kill();
        let _ = child.wait();
        let got = set.collect(2.0);
        assert!(got.finished, "the only root is gone");
    }
}
