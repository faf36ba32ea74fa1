//! Who copies the pages a worker shares with its master: every worker thread's minor page faults
//! sampled by the kernel (one `PERF_COUNT_SW_PAGE_FAULTS_MIN` event per thread, its samples carrying
//! the faulting instruction, address and CLOCK_MONOTONIC time), each joined with the Python stack of
//! that thread read from memory nearest in time. The stacks are read continuously (every
//! `READ_EVERY`, with the GC's `collecting` flag), while the threads run on: a burst of faults (a
//! full collection copies thousands of pages in milliseconds) is joined with the stacks of its own
//! moments, however long the samples wait in the ring.
//!
//! A fault counts as a copy of a shared page when, just after it, the worker's page at the faulting
//! address is not the master's page at the same address while the master maps one there (fork keeps
//! addresses): the write that faulted copied the master's page. A first touch of memory the worker
//! allocated itself (the master maps nothing there) or a read of a file page both map is not one.
//! Frame numbers need root; without them the worker's exclusive bit stands in (`fork_share.rs`).
//!
//! The join's error is the time between a fault and the middle of the stack read joined with it
//! (`lag`, reported as percentiles): a fault is joined with the wrong code only if the thread moved
//! to other code within that time.

use super::pagemap::{PagemapReader, EXCLUSIVE, PFN_MASK, PRESENT};
use super::process_tree::descendants;
use crate::clock::monotonic_ns;
use crate::clock::thread_cpu_ns;
use crate::interp::frames::{CodeCache, Frame, FrameWalker};
use crate::interp::gc_config::{locate, GcLocation};
use crate::interp::interpreter::{attach, Interpreter};
use crate::interp::threads::{python_threads, TidResolver};
use crate::native::unwind::ProcessUnwinder;
use gilty_trace::attr::{self, PerfEventAttr};
use gilty_trace::ring::Ring;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `PERF_COUNT_SW_PAGE_FAULTS_MIN` (enum perf_sw_ids): counted after a fault was handled without I/O.
const PERF_COUNT_SW_PAGE_FAULTS_MIN: u64 = 5;
/// `PERF_SAMPLE_ADDR = 1U << 3`: the faulting address.
const PERF_SAMPLE_ADDR: u64 = 1 << 3;
/// Ring data pages per thread: 40-byte records, room for ~26,000 between two drains.
const RING_PAGES: usize = 256;
/// Time between two reads of every worker thread's stack.
pub const READ_EVERY: Duration = Duration::from_micros(250);
/// Stack reads kept per thread (a few seconds' worth) for samples still in the rings.
const HISTORY: usize = 16_384;
/// The process tree and each worker's threads are listed again this often.
const REFRESH: Duration = Duration::from_millis(100);
/// A fault further than this from its joined stack read is counted as late.
pub const LATE_NS: u64 = 1_000_000;

/// One fault sample: `PERF_RECORD_SAMPLE` with `IP | TID | TIME | ADDR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultSample {
    pub ip: u64,
    pub tid: i32,
    pub time_ns: u64,
    pub addr: u64,
}

/// Parses a sample record, header included (`{ header; u64 ip; u32 pid, tid; u64 time; u64 addr; }`).
pub fn parse_fault(rec: &[u8]) -> Option<FaultSample> {
    let u64_at = |off: usize| {
        rec.get(off..off + 8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
    };
    Some(FaultSample {
        ip: u64_at(8)?,
        tid: rec
            .get(20..24)
            .map(|b| i32::from_ne_bytes(b.try_into().unwrap()))?,
        time_ns: u64_at(24)?,
        addr: u64_at(32)?,
    })
}

fn fault_attr(period: u64, exclude_kernel: bool) -> PerfEventAttr {
    let mut a = PerfEventAttr {
        type_: attr::PERF_TYPE_SOFTWARE,
        size: attr::PERF_ATTR_SIZE_VER7,
        config: PERF_COUNT_SW_PAGE_FAULTS_MIN,
        sample_period: period.max(1),
        sample_type: attr::PERF_SAMPLE_IP
            | attr::PERF_SAMPLE_TID
            | attr::PERF_SAMPLE_TIME
            | PERF_SAMPLE_ADDR,
        flags: attr::FLAG_USE_CLOCKID,
        // No wake-ups: the rings are drained on the stack reader's own schedule.
        wakeup_events: 0,
        clockid: libc::CLOCK_MONOTONIC,
        ..Default::default()
    };
    if exclude_kernel {
        a.flags |= attr::FLAG_EXCLUDE_KERNEL | attr::FLAG_EXCLUDE_HV;
    }
    a
}

/// What a sampled fault did to the page at its address, seen just after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageKind {
    /// The worker now has its own page where the master still maps one: a shared page copied.
    Copied,
    /// Anything else: a page new to the worker, a file page read, a page already gone.
    Other,
}

/// The worker's and the master's pagemap entries at one address.
pub fn page_kind(worker: u64, master: u64, by_pfn: bool) -> PageKind {
    if worker & PRESENT == 0 || master & PRESENT == 0 {
        return PageKind::Other;
    }
    let own = if by_pfn {
        worker & PFN_MASK != master & PFN_MASK
    } else {
        worker & EXCLUSIVE != 0
    };
    if own {
        PageKind::Copied
    } else {
        PageKind::Other
    }
}

/// One aggregated row: the faults of one worker with one Python stack, GC flag and C function.
#[derive(Debug, Clone)]
pub struct FaultRow {
    pub pid: i32,
    /// Innermost first; empty when the stack could not be read.
    pub frames: Vec<Frame>,
    pub gc: bool,
    /// The function holding the faulting instruction (None: not named).
    pub c_function: Option<String>,
    pub samples: u64,
}

/// What a run sampled, and what it cost.
#[derive(Debug, Clone, Default)]
pub struct FaultReport {
    pub period: u64,
    pub page_size: u64,
    pub by_pfn: bool,
    pub rows: Vec<FaultRow>,
    /// Samples seen, by page kind, and those without a readable Python stack.
    pub samples: u64,
    pub copied: u64,
    pub other: u64,
    pub no_stack: u64,
    /// Records the kernel dropped (a ring full before it was drained).
    pub lost: u64,
    /// Time between each copied sample and the middle of the stack read joined with it (ns):
    /// median, 99th percentile, max, and how many were over `LATE_NS`.
    pub lag_p50_ns: u64,
    pub lag_p99_ns: u64,
    pub lag_max_ns: u64,
    pub late: u64,
    pub elapsed_ns: u64,
    /// CPU time of the reading thread.
    pub cpu_ns: u64,
    /// Stack reads done, and how many tore or failed.
    pub stack_reads: u64,
    pub stack_failures: u64,
    pub workers: Vec<i32>,
    /// Workers whose events could not be opened or whose interpreter could not be read, and why.
    pub errors: Vec<(i32, String)>,
}

struct Worker {
    interp: Interpreter,
    gc: Option<GcLocation>,
    own_map: PagemapReader,
    master_map: PagemapReader,
    resolver: TidResolver,
    tstates: HashMap<i32, u64>,
    events: HashMap<i32, (OwnedFd, Ring)>,
    cache: CodeCache,
    /// Per thread: (time of the read's middle, stack, collecting), oldest first.
    history: HashMap<i32, std::collections::VecDeque<Read>>,
    /// Copied samples waiting for a stack read after them.
    pending: Vec<FaultSample>,
}

#[derive(Clone)]
struct Read {
    t_ns: u64,
    frames: Arc<Vec<Frame>>,
    gc: bool,
}

type Key = (i32, Vec<Frame>, bool, u64);

struct State {
    master: i32,
    period: u64,
    exclude_kernel: bool,
    by_pfn: Option<bool>,
    workers: HashMap<i32, Worker>,
    failed: HashMap<i32, String>,
    counts: HashMap<Key, u64>,
    lags: Vec<u64>,
    report: FaultReport,
}

impl State {
    /// Finds new workers (descendants of the master running Python) and their new threads.
    fn refresh(&mut self) {
        let tree = descendants(self.master);
        let alive: Vec<i32> = tree.iter().map(|&(p, _)| p).collect();
        self.workers.retain(|pid, _| alive.contains(pid));
        for (pid, parent) in tree {
            if self.workers.contains_key(&pid) || self.failed.contains_key(&pid) {
                continue;
            }
            match self.open_worker(pid, parent) {
                Ok(w) => {
                    self.workers.insert(pid, w);
                    self.report.workers.push(pid);
                }
                Err(e) => {
                    self.failed.insert(pid, e);
                }
            }
        }
        let (period, mut exclude_kernel) = (self.period, self.exclude_kernel);
        let mut errors = Vec::new();
        for (&pid, w) in self.workers.iter_mut() {
            let Ok(tids) = crate::process::procfs::thread_ids(pid) else {
                continue;
            };
            w.events.retain(|t, _| tids.contains(t));
            for &tid in &tids {
                if w.events.contains_key(&tid) {
                    continue;
                }
                match open_event(tid, period, &mut exclude_kernel) {
                    Ok(ev) => {
                        w.events.insert(tid, ev);
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                    Err(e) => errors.push((pid, crate::native::perf::permission_hint(&e))),
                }
            }
            if tids.iter().any(|t| !w.tstates.contains_key(t)) {
                w.refresh_threads(&tids);
            }
        }
        self.exclude_kernel = exclude_kernel;
        for (pid, e) in errors {
            if !self.report.errors.iter().any(|(p, _)| *p == pid) {
                self.report.errors.push((pid, e));
            }
        }
    }

    fn open_worker(&mut self, pid: i32, parent: i32) -> Result<Worker, String> {
        let interp = attach(pid).map_err(|e| e.message.clone())?;
        let gc = locate(&interp).ok();
        let own_map = PagemapReader::open(pid).map_err(|e| e.to_string())?;
        let master_map = PagemapReader::open(parent).map_err(|e| e.to_string())?;
        Ok(Worker {
            interp,
            gc,
            own_map,
            master_map,
            resolver: TidResolver::default(),
            tstates: HashMap::new(),
            events: HashMap::new(),
            cache: CodeCache::default(),
            history: HashMap::new(),
            pending: Vec::new(),
        })
    }

    /// Drains every ring; each sample is classified and, when it copied a shared page, joined with
    /// its thread's Python stack read now.
    fn drain(&mut self) {
        let mut samples = Vec::new();
        let pids: Vec<i32> = self.workers.keys().copied().collect();
        for pid in pids {
            samples.clear();
            let w = self.workers.get_mut(&pid).unwrap();
            let mut lost = 0;
            for (_, ring) in w.events.values_mut() {
                ring.drain(|rtype, rec| match rtype {
                    attr::PERF_RECORD_SAMPLE => {
                        if let Some(s) = parse_fault(rec) {
                            samples.push(s);
                        }
                    }
                    attr::PERF_RECORD_LOST => {
                        lost += rec
                            .get(16..24)
                            .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
                            .unwrap_or(0)
                    }
                    _ => {}
                });
            }
            self.report.lost += lost;
            for s in &samples {
                self.take(pid, s);
            }
        }
    }

    /// Classifies a sample by its page; a copy waits in `pending` for its stack.
    fn take(&mut self, pid: i32, s: &FaultSample) {
        self.report.samples += 1;
        let w = self.workers.get_mut(&pid).unwrap();
        let page = s.addr / w.own_map.page_size;
        let (mut a, mut b) = (Vec::with_capacity(1), Vec::with_capacity(1));
        if w.own_map.read(page, 1, &mut a).is_err() || w.master_map.read(page, 1, &mut b).is_err() {
            self.report.other += 1;
            return;
        }
        let by_pfn = *self
            .by_pfn
            .get_or_insert_with(|| a[0] & PRESENT == 0 || a[0] & PFN_MASK != 0);
        if page_kind(a[0], b[0], by_pfn) != PageKind::Copied {
            self.report.other += 1;
            return;
        }
        self.report.copied += 1;
        w.pending.push(*s);
    }

    /// Reads every worker thread's Python stack and GC flag once.
    fn read_stacks(&mut self) {
        for w in self.workers.values_mut() {
            let gc =
                w.gc.as_ref()
                    .and_then(|g| g.read(&w.interp.mem).ok())
                    .is_some_and(|st| st.collecting);
            let tids: Vec<i32> = w.tstates.keys().copied().collect();
            for tid in tids {
                let t0 = monotonic_ns();
                let frames = w.stack(tid);
                let t1 = monotonic_ns();
                self.report.stack_reads += 1;
                let Some(frames) = frames else {
                    self.report.stack_failures += 1;
                    continue;
                };
                let h = w.history.entry(tid).or_default();
                // The same stack as the last read shares its frames.
                let frames = match h.back() {
                    Some(last) if *last.frames == frames => Arc::clone(&last.frames),
                    _ => Arc::new(frames),
                };
                h.push_back(Read {
                    t_ns: t0 + (t1 - t0) / 2,
                    frames,
                    gc,
                });
                if h.len() > HISTORY {
                    h.pop_front();
                }
            }
        }
    }

    /// Joins the pending samples that have a stack read after them (or all, at the end) with the
    /// read nearest in time.
    fn join(&mut self, all: bool) {
        for (&pid, w) in self.workers.iter_mut() {
            let pending = std::mem::take(&mut w.pending);
            for s in pending {
                let h = w.history.get(&s.tid);
                let last = h.and_then(|h| h.back()).map(|r| r.t_ns);
                if !all && last.is_none_or(|t| t < s.time_ns) {
                    if last.is_none() && !w.tstates.contains_key(&s.tid) {
                        // Not a Python thread: no stack will come.
                        self.report.no_stack += 1;
                        *self
                            .counts
                            .entry((pid, Vec::new(), false, s.ip))
                            .or_default() += 1;
                    } else {
                        w.pending.push(s);
                    }
                    continue;
                }
                let Some(h) = h.filter(|h| !h.is_empty()) else {
                    self.report.no_stack += 1;
                    *self
                        .counts
                        .entry((pid, Vec::new(), false, s.ip))
                        .or_default() += 1;
                    continue;
                };
                let i = h.partition_point(|r| r.t_ns < s.time_ns);
                let best = [i.checked_sub(1), (i < h.len()).then_some(i)]
                    .into_iter()
                    .flatten()
                    .min_by_key(|&j| h[j].t_ns.abs_diff(s.time_ns))
                    .unwrap();
                let r = &h[best];
                self.lags.push(r.t_ns.abs_diff(s.time_ns));
                *self
                    .counts
                    .entry((pid, (*r.frames).clone(), r.gc, s.ip))
                    .or_default() += 1;
            }
        }
    }

    fn finish(mut self, elapsed_ns: u64, cpu_ns: u64) -> FaultReport {
        let mut r = std::mem::take(&mut self.report);
        r.period = self.period;
        r.page_size = super::pagemap::page_size();
        r.by_pfn = self.by_pfn.unwrap_or(false);
        r.elapsed_ns = elapsed_ns;
        r.cpu_ns = cpu_ns;
        self.lags.sort_unstable();
        let q = |f: f64| -> u64 {
            if self.lags.is_empty() {
                0
            } else {
                self.lags[((self.lags.len() - 1) as f64 * f).round() as usize]
            }
        };
        r.lag_p50_ns = q(0.5);
        r.lag_p99_ns = q(0.99);
        r.lag_max_ns = self.lags.last().copied().unwrap_or(0);
        r.late = self.lags.iter().filter(|&&l| l > LATE_NS).count() as u64;
        // The faulting instruction named by its function, once per worker (the unwinder parses
        // each module's symbols once).
        let mut unwinders: HashMap<i32, Option<ProcessUnwinder>> = HashMap::new();
        let mut rows: HashMap<(i32, Vec<Frame>, bool, Option<String>), u64> = HashMap::new();
        for ((pid, frames, gc, ip), n) in self.counts.drain() {
            let u = unwinders
                .entry(pid)
                .or_insert_with(|| ProcessUnwinder::new(pid).ok());
            let name = u.as_mut().and_then(|u| {
                u.ensure_known(&[ip]);
                u.symbolize_function(framehop::FrameAddress::from_instruction_pointer(ip))
                    .function
            });
            *rows.entry((pid, frames, gc, name)).or_default() += n;
        }
        r.rows = rows
            .into_iter()
            .map(|((pid, frames, gc, c_function), samples)| FaultRow {
                pid,
                frames,
                gc,
                c_function,
                samples,
            })
            .collect();
        r.rows.sort_by_key(|r| std::cmp::Reverse(r.samples));
        for (pid, e) in self.failed {
            r.errors.push((pid, e));
        }
        r
    }
}

fn open_event(tid: i32, period: u64, exclude_kernel: &mut bool) -> io::Result<(OwnedFd, Ring)> {
    let fd = match attr::perf_event_open(&fault_attr(period, *exclude_kernel), tid, -1) {
        Ok(fd) => fd,
        // Unprivileged under perf_event_paranoid 2 may still sample user mode only.
        Err(e)
            if !*exclude_kernel
                && matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) =>
        {
            *exclude_kernel = true;
            attr::perf_event_open(&fault_attr(period, true), tid, -1)?
        }
        Err(e) => return Err(e),
    };
    let ring = Ring::map(fd.as_raw_fd(), RING_PAGES)?;
    Ok((fd, ring))
}

impl Worker {
    fn refresh_threads(&mut self, tids: &[i32]) {
        if let Ok(threads) = python_threads(&self.interp, &mut self.resolver, tids) {
            self.tstates = threads
                .iter()
                .filter_map(|t| Some((t.tid?, t.tstate)))
                .collect();
        }
    }

    /// The thread's Python stack now (None: not a Python thread, or the walk tore).
    fn stack(&mut self, tid: i32) -> Option<Vec<Frame>> {
        let tstate = *self.tstates.get(&tid)?;
        let walker = FrameWalker::new(&self.interp.mem, &self.interp.layout, self.interp.code_type);
        self.cache.new_pass();
        walker
            .walk(tstate, &mut self.cache)
            .ok()
            .map(|(frames, _)| frames)
    }
}

/// Samples the minor page faults of every worker below `master` in a thread of its own until
/// `stop`.
pub struct FaultWatch {
    stop: Arc<AtomicBool>,
    ready: Arc<AtomicBool>,
    started: Arc<std::sync::Mutex<Started>>,
    handle: Option<JoinHandle<FaultReport>>,
}

/// What the first look at the tree found: events opened, and why some could not be.
#[derive(Debug, Clone, Default)]
pub struct Started {
    pub events: usize,
    pub errors: Vec<(i32, String)>,
}

impl FaultWatch {
    /// Starts sampling: every `period`-th minor fault of each worker thread is a sample.
    pub fn start(master: i32, period: u64) -> FaultWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let ready = Arc::new(AtomicBool::new(false));
        let started = Arc::new(std::sync::Mutex::new(Started::default()));
        let (s2, r2, st2) = (Arc::clone(&stop), Arc::clone(&ready), Arc::clone(&started));
        let handle = std::thread::Builder::new()
            .name("gilty-faults".into())
            .spawn(move || run(master, period, s2, r2, st2))
            .expect("cannot start the page-fault thread");
        FaultWatch {
            stop,
            ready,
            started,
            handle: Some(handle),
        }
    }

    /// The workers found at the start have their events open.
    pub fn ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// What the first look found (valid once `ready`).
    pub fn started(&self) -> Started {
        self.started.lock().unwrap().clone()
    }

    pub fn stop(mut self) -> FaultReport {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for FaultWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn run(
    master: i32,
    period: u64,
    stop: Arc<AtomicBool>,
    ready: Arc<AtomicBool>,
    started_out: Arc<std::sync::Mutex<Started>>,
) -> FaultReport {
    let started = Instant::now();
    let cpu0 = thread_cpu_ns();
    let mut st = State {
        master,
        period: period.max(1),
        exclude_kernel: false,
        by_pfn: None,
        workers: HashMap::new(),
        failed: HashMap::new(),
        counts: HashMap::new(),
        lags: Vec::new(),
        report: FaultReport::default(),
    };
    st.refresh();
    *started_out.lock().unwrap() = Started {
        events: st.workers.values().map(|w| w.events.len()).sum(),
        errors: st.report.errors.clone(),
    };
    ready.store(true, Ordering::SeqCst);
    let mut last_refresh = Instant::now();
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        st.read_stacks();
        st.drain();
        st.join(false);
        if last_refresh.elapsed() >= REFRESH {
            st.refresh();
            last_refresh = Instant::now();
        }
        next += READ_EVERY;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    st.read_stacks();
    st.drain();
    st.join(true);
    st.finish(
        started.elapsed().as_nanos() as u64,
        thread_cpu_ns().saturating_sub(cpu0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_fault_record() {
        let mut rec = vec![0u8; 8];
        rec[0..4].copy_from_slice(&attr::PERF_RECORD_SAMPLE.to_ne_bytes());
        rec.extend_from_slice(&0x4000_1234u64.to_ne_bytes()); // ip
        rec.extend_from_slice(&77i32.to_ne_bytes()); // pid
        rec.extend_from_slice(&78i32.to_ne_bytes()); // tid
        rec.extend_from_slice(&999u64.to_ne_bytes()); // time
        rec.extend_from_slice(&0x7f00_0000_1008u64.to_ne_bytes()); // addr
        let s = parse_fault(&rec).unwrap();
        assert_eq!(
            s,
            FaultSample {
                ip: 0x4000_1234,
                tid: 78,
                time_ns: 999,
                addr: 0x7f00_0000_1008
            }
        );
        assert!(parse_fault(&rec[..39]).is_none());
    }

    #[test]
    fn a_copy_is_a_page_of_its_own_where_the_master_has_one() {
        let p = PRESENT;
        assert_eq!(page_kind(p | 6, p | 5, true), PageKind::Copied);
        assert_eq!(page_kind(p | 5, p | 5, true), PageKind::Other);
        assert_eq!(page_kind(p | 6, 0, true), PageKind::Other); // new to the worker
        assert_eq!(page_kind(0, p | 5, true), PageKind::Other); // gone again
        assert_eq!(page_kind(p | EXCLUSIVE, p, false), PageKind::Copied);
        assert_eq!(page_kind(p, p, false), PageKind::Other);
    }

    /// A forked child of this test process writes half of an inherited mapping and fills a fresh
    /// one: the sampled copies are the inherited half's pages, the fresh pages are not copies.
    #[test]
    fn counts_the_copies_of_a_forked_child() {
        use crate::process::forked::{Forked, Mapping};
        let pages = 512;
        let mapping = Mapping::new(pages, 1);
        let forked = Forked::spawn(|| {
            mapping.fill(0..pages / 2, 2);
            std::mem::forget(Mapping::new(300, 3));
        });
        let me = std::process::id() as i32;
        let mut st = State {
            master: me,
            period: 1,
            exclude_kernel: false,
            by_pfn: None,
            workers: HashMap::new(),
            failed: HashMap::new(),
            counts: HashMap::new(),
            lags: Vec::new(),
            report: FaultReport::default(),
        };
        let mut exclude = false;
        let ev = match open_event(forked.pid, 1, &mut exclude) {
            Ok(ev) => ev,
            Err(e) => {
                eprintln!("skipped: {}", crate::native::perf::permission_hint(&e));
                return;
            }
        };
        let mut events = HashMap::new();
        events.insert(forked.pid, ev);
        // Not a Python process: only the page classification and the rings are exercised.
        let mut own_map = PagemapReader::open(forked.pid).unwrap();
        let mut master_map = PagemapReader::open(me).unwrap();
        let mut samples = Vec::new();
        forked.step();
        for (_, ring) in events.values_mut() {
            ring.drain(|t, rec| {
                if t == attr::PERF_RECORD_SAMPLE {
                    samples.extend(parse_fault(rec));
                }
            });
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut copied = 0;
        let lo = mapping.start();
        let hi = lo + (pages as u64) * own_map.page_size;
        for s in samples.iter().filter(|s| (lo..hi).contains(&s.addr)) {
            let page = s.addr / own_map.page_size;
            own_map.read(page, 1, &mut a).unwrap();
            master_map.read(page, 1, &mut b).unwrap();
            let by_pfn = *st.by_pfn.get_or_insert(a[0] & PFN_MASK != 0);
            if page_kind(a[0], b[0], by_pfn) == PageKind::Copied {
                copied += 1;
            }
        }
        drop(forked);
        assert!(
            (pages / 2 - 2..=pages / 2).contains(&copied),
            "{copied} copies of {} samples",
            samples.len()
        );
        st.report.samples = samples.len() as u64;
        assert!(st.report.samples as usize >= pages / 2 + 300);
    }
}
