//! Per-thread uprobe perf events and their ring buffers.
//!
//! For every thread of the target and every probe: `perf_event_open(attr, pid = tid, cpu = -1)`, of
//! the probe's tracepoint when it is named in tracefs, else with the uprobe PMU. The first probe's
//! fd of a thread is mmap'd as that thread's ring buffer; the other probes of the thread are
//! redirected into it with `PERF_EVENT_IOC_SET_OUTPUT`. Samples carry
//! `PERF_SAMPLE_IDENTIFIER | TID | TIME` (and `REGS_USER` when registers are requested); the identifier maps
//! back to the probe through `PERF_EVENT_IOC_ID`.
//!
//! ## Why not `inherit = 1`
//! The brief asked for `inherit = 1` so that threads created later are traced automatically. It
//! cannot be used with the uprobe PMU, for two independent kernel reasons (both measured on Linux
//! 6.18):
//! 1. `perf_mmap()` refuses to map an inherited per-task event (`cpu == -1 && attr.inherit` →
//!    EINVAL): children on other CPUs would write one buffer concurrently.
//! 2. Worse, when a traced thread calls `clone()`, the kernel creates the child's copy of each
//!    event by running the PMU's `event_init` again, and the uprobe PMU's init (`perf_uprobe_init`)
//!    re-reads the path through the *user pointer* in `attr.config1` — now interpreted in the
//!    target's address space. It faults, and `clone()` fails in the target with EFAULT: Python
//!    raises "can't start new thread". (Per-CPU events, which can be mmap'd with inherit, hit the
//!    same failure.) Tracing must never break the target.
//!
//! So events are per thread with `inherit = 0`. A background worker (`worker.rs`) rescans
//! `/proc/PID/task` every few milliseconds and attaches every thread it has not seen (enabled at
//! once); calls a new thread makes before that are not seen — [`Tracer::late_threads`] says from
//! when each late thread is covered. A thread's exit shows as POLLHUP on its ring fd: `poll` drains
//! its buffer one last time and hands its fds to the worker to close (so a reused tid is a new
//! thread, not a stale one).
//!
//! ## Cost of closing
//! Removing a probe is slow: ~0.1 s measured here, and removals from several threads do not overlap
//! (the kernel unregisters the probe and waits for RCU grace periods under the global
//! `event_mutex`). With the uprobe PMU every fd carries its own probe, so every close pays it. With
//! named probes (`tracefs.rs`) only a probe's last event pays it, and the keeper process holds
//! those (`keeper.rs`): every close here is instant. Either way no fd is closed in `poll`; the
//! worker closes retired threads' fds, and `drop` waits for them ([`Tracer::close_in_background`]
//! does not). While the kernel removes a probe, a perf_event_open for a new thread waits for the
//! same mutex — which is why attaching also happens in the worker, never in `poll`.
//!
//! ## Enable order
//! Return probes are enabled before entry probes (first at attach, then for each late thread), so
//! the only boundary artefact is a leading return without its entry (a call in flight at attach),
//! never an entry whose return was missed. The trailing edge is the mirror: an entry whose return
//! has not happened yet.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::attr::{self, PerfEventAttr, UprobePmu};
use crate::error::TraceError;
use crate::keeper::{self, Keeper};
use crate::symbols::ProbeTarget;
use crate::thread_events::{list_tids, open_thread, Probe, ThreadSlot};
use crate::tracefs::{self, Definition, Group};
use crate::worker::Worker;

/// A register captured with each sample of a probe. x86-64 numbering from
/// `arch/x86/include/uapi/asm/perf_regs.h` (`enum perf_event_x86_regs`): AX=0, BX=1, CX=2, DX=3,
/// SI=4, DI=5. At a function entry: Di = 1st integer argument, Si = 2nd, Dx = 3rd (System V). At a
/// return: Ax = the return value. Values are the full 64-bit register: mask to 32 bits for an `int`
/// argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reg {
    Ax,
    Si,
    Di,
    Dx,
}

impl Reg {
    /// Bit index in `sample_regs_user` (`PERF_REG_X86_*`).
    pub fn perf_index(self) -> u32 {
        match self {
            Reg::Ax => 0, // PERF_REG_X86_AX
            Reg::Dx => 3, // PERF_REG_X86_DX
            Reg::Si => 4, // PERF_REG_X86_SI
            Reg::Di => 5, // PERF_REG_X86_DI
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    pub name: String,
    pub target: ProbeTarget,
    /// A return probe (uretprobe) rather than an entry probe.
    pub ret: bool,
    /// Registers to capture, at most 4; they land in `Event::regs` in this order.
    pub regs: Vec<Reg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Index into the specs given to [`Tracer::attach`].
    pub probe: u16,
    pub tid: i32,
    /// CLOCK_MONOTONIC, nanoseconds.
    pub time_ns: u64,
    /// The spec's registers in the spec's order, zero-filled.
    pub regs: [u64; 4],
}

pub struct Tracer {
    pages: usize,
    probes: Arc<Vec<Probe>>,
    threads: HashMap<i32, ThreadSlot>,
    /// Event id (PERF_EVENT_IOC_ID) → probe index.
    ids: HashMap<u64, u16>,
    lost: u64,
    seen: u64,
    attached_total: usize,
    late: Vec<(i32, u64)>,
    last_error: Option<TraceError>,
    worker: Option<Worker>,
    kind: ProbeKind,
    keeper_pid: Option<i32>,
}

/// How the probes were created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeKind {
    /// Named probes in tracefs, anchored by the keeper process: closing is instant (see
    /// `tracefs.rs`).
    Named,
    /// The uprobe PMU, one private probe per perf event (slow to close); the string says why not
    /// named.
    Pmu(String),
}

const SAMPLE_BASE: u64 =
    attr::PERF_SAMPLE_IDENTIFIER | attr::PERF_SAMPLE_TID | attr::PERF_SAMPLE_TIME;

impl Tracer {
    /// Opens every probe for every current thread of `pid`, then enables them all (return probes
    /// first). `pages` = data pages per thread's ring buffer (a power of two). Starts the
    /// background worker that attaches threads created later and closes the events of threads that
    /// exit.
    pub fn attach(pid: i32, probes: &[ProbeSpec], pages: usize) -> Result<Tracer, TraceError> {
        if probes.is_empty() || probes.len() > u16::MAX as usize {
            return Err(TraceError::Io(format!(
                "need 1..=65535 probes, got {}",
                probes.len()
            )));
        }
        if pages == 0 || !pages.is_power_of_two() {
            return Err(TraceError::Io(format!(
                "ring buffer pages must be a power of two, got {pages}"
            )));
        }
        // Declared before the threads' events, so dropped after them on an early return: the keeper
        // must outlive every event of its probes.
        let (sources, keeper, kind): (Vec<Source>, Option<Keeper>, ProbeKind) =
            match named_probes(probes) {
                Ok((ids, keeper)) => (
                    ids.into_iter().map(Source::Tracepoint).collect(),
                    Some(keeper),
                    ProbeKind::Named,
                ),
                Err(why) => (
                    vec![Source::Pmu(UprobePmu::from_sysfs()?); probes.len()],
                    None,
                    ProbeKind::Pmu(why),
                ),
            };
        let probes = Arc::new(
            probes
                .iter()
                .zip(&sources)
                .map(|(s, src)| build_probe(src, s))
                .collect::<Result<Vec<_>, _>>()?,
        );
        let mut threads: HashMap<i32, ThreadSlot> = HashMap::new();
        let gone = || TraceError::TargetGone(format!("process {pid} exited"));
        // Two passes: threads started while the first pass was opening events are caught by the
        // second. On error the slots opened so far are dropped here, synchronously (rare; slow but
        // correct).
        for _ in 0..2 {
            for tid in list_tids(pid).ok_or_else(gone)? {
                if threads.contains_key(&tid) {
                    continue;
                }
                if let Some(slot) = open_thread(&probes, pages, tid)? {
                    threads.insert(tid, slot);
                }
            }
        }
        if threads.is_empty() {
            return Err(gone());
        }
        // Enable all return probes of all threads, then all entry probes, as close together as
        // possible.
        for want_ret in [true, false] {
            for slot in threads.values() {
                for (p, fd) in probes.iter().zip(&slot.fds) {
                    if p.ret == want_ret {
                        attr::ioctl_enable(fd.as_raw_fd()).map_err(|e| {
                            TraceError::Io(format!("PERF_EVENT_IOC_ENABLE on {}: {e}", p.what))
                        })?;
                    }
                }
            }
        }
        let known = threads.keys().copied().collect();
        let keeper_pid = keeper.as_ref().map(|k| k.pid);
        let worker = Worker::start(pid, probes.clone(), pages, known, keeper);
        let mut t = Tracer {
            pages,
            probes,
            threads: HashMap::new(),
            ids: HashMap::new(),
            lost: 0,
            seen: 0,
            attached_total: 0,
            late: Vec::new(),
            last_error: None,
            worker: Some(worker),
            kind,
            keeper_pid,
        };
        for (tid, slot) in threads {
            t.insert(tid, slot);
        }
        Ok(t)
    }

    /// Drains every ring buffer. Takes over threads the worker attached since the last call; hands
    /// threads that exited to the worker for closing. Never blocks (no perf_event_open or close
    /// here). Events are sorted by time (stable: equal times keep buffer order).
    pub fn poll(&mut self) -> Vec<Event> {
        if let Some(w) = &self.worker {
            let (new, err) = w.take_new();
            if err.is_some() {
                self.last_error = err;
            }
            for nt in new {
                self.late.push((nt.tid, nt.enabled_at_ns));
                self.insert(nt.tid, nt.slot);
            }
        }
        let mut out = Vec::new();
        let mut dead = Vec::new();
        {
            let Tracer {
                threads,
                ids,
                probes,
                lost,
                seen,
                ..
            } = self;
            for (&tid, slot) in threads.iter_mut() {
                // Check for exit *before* draining: after POLLHUP nothing more is written.
                let hup = is_hup(slot.ring_fd());
                slot.ring.drain(|rtype, rec| {
                    parse_record(rtype, rec, ids, probes, &mut out, lost, seen)
                });
                if hup {
                    dead.push(tid);
                }
            }
        }
        for tid in dead {
            if let Some(slot) = self.threads.remove(&tid) {
                for id in &slot.ids {
                    self.ids.remove(id);
                }
                match &self.worker {
                    Some(w) => w.retire(tid, slot),
                    None => drop(slot),
                }
            }
        }
        out.sort_by_key(|e| e.time_ns);
        out
    }

    /// Samples the kernel dropped because a ring buffer was full.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Samples delivered so far.
    pub fn events_seen(&self) -> u64 {
        self.seen
    }

    /// Threads attached since `attach` (initial and late), including ones that have exited since.
    pub fn threads_attached(&self) -> usize {
        self.attached_total
    }

    /// Threads currently traced (attached, handed to `poll`, not seen to exit).
    pub fn threads_live(&self) -> usize {
        self.threads.len()
    }

    /// Threads attached after `attach` by the rescan: (tid, CLOCK_MONOTONIC ns when their probes
    /// were enabled). Their calls before that time were not seen.
    pub fn late_threads(&self) -> &[(i32, u64)] {
        &self.late
    }

    /// The last error the background rescan hit while attaching a new thread (poll itself cannot
    /// fail).
    pub fn last_error(&self) -> Option<&TraceError> {
        self.last_error.as_ref()
    }

    /// Stops sampling at once and closes the events in a background thread; returns its handle.
    /// Named probes: instant (the keeper pays the removals later). Uprobe PMU: ~0.1 s per event in
    /// the kernel (synchronous RCU grace periods under a global mutex, so closes do not overlap),
    /// threads × probes × ~0.1 s in all. `drop` does the same but waits.
    pub fn close_in_background(mut self) -> JoinHandle<()> {
        self.shutdown().expect("worker present until shutdown")
    }

    /// How the probes were created (named in tracefs, or the uprobe PMU and why).
    pub fn probe_kind(&self) -> &ProbeKind {
        &self.kind
    }

    /// The process holding the named probes' anchors (None with the uprobe PMU). It exits once this
    /// tracer is closed (or its process dead) and the probes are deleted.
    pub fn keeper_pid(&self) -> Option<i32> {
        self.keeper_pid
    }

    /// Data pages per ring buffer.
    pub fn pages(&self) -> usize {
        self.pages
    }

    fn insert(&mut self, tid: i32, slot: ThreadSlot) {
        for (i, id) in slot.ids.iter().enumerate() {
            self.ids.insert(*id, i as u16);
        }
        self.threads.insert(tid, slot);
        self.attached_total += 1;
    }

    fn shutdown(&mut self) -> Option<JoinHandle<()>> {
        let worker = self.worker.take()?;
        for slot in self.threads.values() {
            slot.disable();
        }
        let slots: Vec<ThreadSlot> = self.threads.drain().map(|(_, s)| s).collect();
        self.ids.clear();
        Some(worker.shutdown(slots))
    }
}

impl Drop for Tracer {
    /// Disables every event at once, then closes every fd and waits for that (~0.1 s per thread per
    /// probe with the uprobe PMU). Use [`Tracer::close_in_background`] not to wait.
    fn drop(&mut self) {
        if let Some(h) = self.shutdown() {
            let _ = h.join();
        }
    }
}

/// Where a probe's perf events come from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// The uprobe PMU: the event carries the path and offset, and its own probe.
    Pmu(UprobePmu),
    /// A named probe's tracepoint id.
    Tracepoint(u64),
}

/// Set to force the uprobe PMU (e.g. to compare with it).
pub const FORCE_PMU_ENV: &str = "GILTY_TRACE_PMU";

/// Defines the probes in tracefs and starts their keeper: (tracepoint ids, keeper), or why not.
fn named_probes(specs: &[ProbeSpec]) -> Result<(Vec<u64>, Keeper), String> {
    if std::env::var_os(FORCE_PMU_ENV).is_some_and(|v| !v.is_empty()) {
        return Err(format!("{FORCE_PMU_ENV} is set"));
    }
    let root = tracefs::root().ok_or("no tracefs (not mounted and not root)")?;
    tracefs::remove_stale(&root);
    let defs: Vec<Definition> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| Definition {
            name: tracefs::event_name(i, &s.name),
            ret: s.ret,
            path: s.target.path.clone(),
            offset: s.target.offset,
        })
        .collect();
    let group = Group::define(&root, &defs)?;
    match keeper::start(&root, &group.ids, &group.remove_lines()) {
        Ok(k) => {
            let ids = group.ids.clone();
            group.hand_over();
            Ok((ids, k))
        }
        Err(e) => {
            if e.keeper_removes {
                group.hand_over();
            }
            Err(e.message)
        }
    }
}

fn build_probe(source: &Source, spec: &ProbeSpec) -> Result<Probe, TraceError> {
    if spec.regs.len() > 4 {
        return Err(TraceError::Io(format!(
            "probe {}: at most 4 registers",
            spec.name
        )));
    }
    let path = CString::new(spec.target.path.as_bytes())
        .map_err(|_| TraceError::Io(format!("probe {}: path contains NUL", spec.name)))?;
    let mask: u64 = spec.regs.iter().fold(0, |m, r| m | 1u64 << r.perf_index());
    let reg_pos = spec
        .regs
        .iter()
        .map(|r| (mask & ((1u64 << r.perf_index()) - 1)).count_ones() as usize)
        .collect();
    // config1 points into `path`'s heap buffer, which stays put when the CString is moved into the
    // Probe.
    let (type_, config, config1, config2) = match *source {
        Source::Pmu(pmu) => (
            pmu.type_,
            if spec.ret {
                1u64 << pmu.retprobe_bit
            } else {
                0
            },
            path.as_ptr() as u64,
            spec.target.offset,
        ),
        // The probe (and whether it is a return probe) is the tracepoint's definition.
        Source::Tracepoint(id) => (keeper::PERF_TYPE_TRACEPOINT, id, 0, 0),
    };
    let a = PerfEventAttr {
        type_,
        size: attr::PERF_ATTR_SIZE_VER7,
        config,
        sample_period: 1,
        sample_type: SAMPLE_BASE
            | if mask != 0 {
                attr::PERF_SAMPLE_REGS_USER
            } else {
                0
            },
        flags: attr::FLAG_DISABLED | attr::FLAG_USE_CLOCKID,
        config1,
        config2,
        sample_regs_user: mask,
        clockid: libc::CLOCK_MONOTONIC,
        ..Default::default()
    };
    Ok(Probe {
        attr: a,
        _path: path,
        reg_pos,
        nregs: mask.count_ones() as usize,
        ret: spec.ret,
        what: format!(
            "{} ({}{}:{:#x})",
            spec.name,
            if spec.ret { "return of " } else { "" },
            spec.target.path,
            spec.target.offset
        ),
    })
}

fn rd64(b: &[u8], off: usize) -> Option<u64> {
    b.get(off..off + 8)
        .map(|s| u64::from_ne_bytes(s.try_into().unwrap()))
}

fn parse_record(
    rtype: u32,
    rec: &[u8],
    ids: &HashMap<u64, u16>,
    probes: &[Probe],
    out: &mut Vec<Event>,
    lost: &mut u64,
    seen: &mut u64,
) {
    match rtype {
        attr::PERF_RECORD_SAMPLE => {
            // { u64 id; } IDENTIFIER, { u32 pid, tid; } TID, { u64 time; } TIME,
            // { u64 abi; u64 regs[weight(mask)]; } REGS_USER — in this order (perf_event.h,
            // PERF_RECORD_SAMPLE).
            let (Some(id), Some(pidtid), Some(time)) = (rd64(rec, 8), rd64(rec, 16), rd64(rec, 24))
            else {
                return;
            };
            let Some(&pi) = ids.get(&id) else { return };
            let p = &probes[pi as usize];
            let tid = (pidtid >> 32) as u32 as i32;
            let mut regs = [0u64; 4];
            if p.nregs > 0 {
                if let Some(abi) = rd64(rec, 32) {
                    if abi != attr::PERF_SAMPLE_REGS_ABI_NONE {
                        for (j, &pos) in p.reg_pos.iter().enumerate() {
                            regs[j] = rd64(rec, 40 + 8 * pos).unwrap_or(0);
                        }
                    }
                }
            }
            *seen += 1;
            out.push(Event {
                probe: pi,
                tid,
                time_ns: time,
                regs,
            });
        }
        // { u64 id; u64 lost; }
        attr::PERF_RECORD_LOST => *lost += rd64(rec, 16).unwrap_or(0),
        // { u64 lost; }
        attr::PERF_RECORD_LOST_SAMPLES => *lost += rd64(rec, 8).unwrap_or(0),
        _ => {}
    }
}

/// The thread behind this perf fd has exited (perf_poll reports EPOLLHUP for an event in EXIT
/// state).
fn is_hup(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLHUP | libc::POLLERR) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracer_is_send() {
        fn assert_send<T: Send>() {}
        assert_send::<Tracer>();
    }

    #[test]
    fn register_positions_follow_bit_order() {
        let pmu = UprobePmu {
            type_: 8,
            retprobe_bit: 0,
        };
        let spec = ProbeSpec {
            name: "x".into(),
            target: ProbeTarget {
                path: "/bin/true".into(),
                offset: 0x10,
            },
            ret: true,
            regs: vec![Reg::Di, Reg::Ax, Reg::Si],
        };
        let p = build_probe(&Source::Pmu(pmu), &spec).unwrap();
        assert_eq!(p.attr.sample_regs_user, 0b110001);
        assert_eq!(p.reg_pos, vec![2, 0, 1]);
        assert_eq!(p.attr.config, 1);
        assert_eq!(
            p.attr.sample_type,
            SAMPLE_BASE | attr::PERF_SAMPLE_REGS_USER
        );
        // A sample: header, id, pid/tid, time, abi, AX, SI, DI.
        let mut rec = Vec::new();
        rec.extend_from_slice(&attr::PERF_RECORD_SAMPLE.to_ne_bytes());
        rec.extend_from_slice(&0u16.to_ne_bytes());
        rec.extend_from_slice(&64u16.to_ne_bytes());
        for v in [77u64, (5u64 << 32) | 4, 123, 2, 10, 20, 30] {
            rec.extend_from_slice(&v.to_ne_bytes());
        }
        let ids = HashMap::from([(77u64, 0u16)]);
        let (mut out, mut lost, mut seen) = (Vec::new(), 0, 0);
        parse_record(
            attr::PERF_RECORD_SAMPLE,
            &rec,
            &ids,
            std::slice::from_ref(&p),
            &mut out,
            &mut lost,
            &mut seen,
        );
        assert_eq!(
            out,
            vec![Event {
                probe: 0,
                tid: 5,
                time_ns: 123,
                regs: [30, 10, 20, 0]
            }]
        );
        assert_eq!(seen, 1);
    }
}
