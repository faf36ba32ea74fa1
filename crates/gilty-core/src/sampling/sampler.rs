//! The sampling loop: at a fixed rate, read the GIL, the GC flag, every thread's syscall and Python
//! stack, classify each thread, intern stacks, and fold the pass into the batch's `Aggregate`.
//! Never stops the target.

use crate::clock::monotonic_ns;
use crate::exact::tracing::ExactTracing;
use crate::exact::ExactSummary;
use crate::interp::exceptions::HandlingCheck;
use crate::interp::frames::{CodeCache, Frame, FrameWalker, WalkError};
use crate::interp::interpreter::Interpreter;
use crate::interp::linetable::Position;
use crate::interp::threads::{python_threads, PyThread, WalkHead};
use crate::process::memory::Memory;
use crate::process::procfs::{self, Schedstat, SyscallState};
use crate::sampling::aggregate::{Aggregate, Seen, NONE};
use crate::sampling::classify::{classify, GilView, History, Observation, ThreadState};
use crate::sampling::native_part::NativeStacks;
use crate::sampling::sched_marks::{read_mark, SchedMarks, SchedTotals};
use crate::sampling::stacks::{Interner, Observed, Stack};
use crate::sampling::task_part::TaskPart;
use crate::sampling::task_record::TaskAggregate;
use crate::sampling::thread_list::ThreadList;
use crate::sampling::thread_track::{Kept, ThreadPass, Track};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Walks of one thread's stack per pass before it is dropped as torn. Each walk already compares up
/// to `frames::SNAPSHOT_ROUNDS` further copies of a stack that moved (see
/// `FrameWalker::read_chain`).
const READ_ATTEMPTS: usize = 1;

#[derive(Debug, Clone, Default)]
pub struct Errors {
    /// Stacks that read inconsistently at first and were read again successfully.
    pub torn_retried: u64,
    /// Stacks that read inconsistently on every attempt; the thread's state is kept, its stack
    /// dropped.
    pub torn_dropped: u64,
    /// Stacks whose inner frames moved on every copy: kept as the outer frames that held still
    /// under `frames::MOVING_FRAMES` (`FrameWalker::outer_part`).
    pub torn_partial: u64,
    /// Samples in which the GIL or thread list could not be read at all.
    pub read_failed: u64,
    /// `record --native` (see `native::record`): samples with a native part, those of them cut
    /// short (`[unknown]` below where the unwind stopped), samples of a thread with a Python stack
    /// whose native part could not be matched (kept Python-only), and kernel samples the kernel
    /// dropped.
    pub native_matched: u64,
    pub native_partial: u64,
    pub native_missing: u64,
    pub native_lost: u64,
    /// The missing ones by why (`native::record::NativeCounts`), and samples of threads without a
    /// Python stack that got their C stack.
    pub native_missing_moved: u64,
    pub native_missing_no_sample: u64,
    pub native_missing_unmatched: u64,
    pub native_bare: u64,
    /// 3.14+: Python threads whose own `holds_gil` flag was compared with the GIL struct (locked
    /// and last holder, which the states come from), and those where the two disagreed. The flag is
    /// set just after the struct changes hands and cleared just before, so a few disagree in any
    /// case.
    pub gil_flag_checked: u64,
    pub gil_flag_disagreed: u64,
}

/// Everything collected since the previous batch.
#[derive(Debug, Default)]
pub struct Batch {
    pub times: Vec<f64>,
    /// The passes folded into runs, counts, blame and pass flags (closed by `Sampler::take_batch`).
    pub aggregate: Aggregate,
    pub new_stacks: Vec<(u32, Vec<u32>)>,
    pub new_frames: Vec<(u32, Frame)>,
    /// (frame id, instruction position, walks that found the frame there) (3.11+). Kept beside the
    /// frames, not in them, so that stacks differing only in a column are one stack.
    pub positions: Vec<(u32, Position, u64)>,
    pub threads: Vec<(i32, String)>,
    pub errors: Errors,
    pub exited: bool,
    pub late: u64,
    /// What the kernel's scheduler counted over the batch (None for an empty batch).
    pub sched: Option<SchedTotals>,
    /// The asyncio task view of the batch's passes (`record --tasks`; None when not asked).
    pub tasks: Option<TaskAggregate>,
}

/// One thread as seen in one snapshot (for `dump`).
#[derive(Debug, Clone)]
pub struct ThreadSnapshot {
    pub tid: i32,
    pub name: String,
    pub state: ThreadState,
    pub syscall: i64,
    pub stack: Vec<Frame>,
}

/// `Sampler::read_stack`: (frames unless torn, their positions, innermost frame's position, per
/// frame the outermost of its evaluation-loop call).
type StackRead = (
    Option<Vec<Frame>>,
    Vec<Option<Position>>,
    Option<(u64, i64)>,
    Vec<bool>,
);

/// What a pass reads once for all its threads.
struct PassStart {
    pythreads: Vec<PyThread>,
    gil: GilView,
    gc: bool,
    range: (u64, u64),
    now_ns: u64,
    period_ns: u64,
    /// Stacks are walked this pass (else states only).
    stacks: bool,
}

pub struct Sampler {
    pub interp: Interpreter,
    period: Duration,
    start: Instant,
    next_due: Option<Instant>,
    code_cache: CodeCache,
    /// The OS threads, their names and thread states.
    threads: ThreadList,
    tracks: HashMap<i32, Track>,
    /// Passes observed so far (paces the scheduler-counter probes).
    passes: u64,
    /// A thread never observed: the in-process monitor's own (reading its syscall costs a read a
    /// pass).
    ignored_tid: Option<i32>,
    /// Frame and stack ids, and what the batch gains.
    tables: Interner,
    handling_check: HandlingCheck,
    batch: Batch,
    handoff_opcodes: &'static [u8],
    start_mono_ns: u64,
    exact: Option<ExactTracing>,
    /// Probe file descriptors being closed in the background (joined on drop).
    closing: Vec<std::thread::JoinHandle<()>>,
    /// When the previous pass observed the threads, and the mean interval between passes (ns).
    last_observe_ns: Option<u64>,
    mean_interval_ns: f64,
    /// Scheduler counters at the batch's start.
    marks: SchedMarks,
    /// Asyncio tasks read in every pass (`enable_tasks`).
    tasks: Option<TaskPart>,
    /// Native stacks joined to each pass's Python stacks (`record --native`).
    native: Option<NativeStacks>,
    /// Threads whose stack walks all tore in the last pass (a dump reads them again).
    torn_tids: Vec<i32>,
}

impl Drop for Sampler {
    fn drop(&mut self) {
        for h in self.closing.drain(..) {
            let _ = h.join();
        }
    }
}

impl Sampler {
    pub fn new(interp: Interpreter, rate_hz: f64) -> Sampler {
        let rate = rate_hz.clamp(0.1, 20_000.0);
        let interp_version = interp.version;
        Sampler {
            interp,
            period: Duration::from_secs_f64(1.0 / rate),
            start: Instant::now(),
            next_due: None,
            code_cache: CodeCache::default(),
            threads: ThreadList::default(),
            tracks: HashMap::new(),
            passes: 0,
            ignored_tid: None,
            tables: Interner::default(),
            handling_check: HandlingCheck::default(),
            batch: Batch::default(),
            handoff_opcodes: gilty_layouts::handoff_opcodes(interp_version.0, interp_version.1),
            start_mono_ns: monotonic_ns(),
            exact: None,
            closing: Vec::new(),
            marks: SchedMarks::default(),
            last_observe_ns: None,
            mean_interval_ns: 0.0,
            tasks: None,
            native: None,
            torn_tids: Vec::new(),
        }
    }

    /// Joins native stacks to the Python stacks of every pass from now on (`record --native`). Call
    /// after `set_rate`. Err: one line saying why (perf events not permitted: what to change).
    pub fn enable_native(&mut self) -> Result<(), String> {
        self.native = Some(NativeStacks::start(&self.interp, self.period)?);
        Ok(())
    }

    /// Stops joining native stacks (a later `Sampler` of the same target without `--native`).
    pub fn disable_native(&mut self) {
        self.native = None;
    }

    /// Reads every asyncio task in every pass from now on (`record --tasks`).
    pub fn enable_tasks(&mut self) -> crate::Result<()> {
        let (major, minor, _) = self.interp.version;
        if gilty_layouts::asyncio_layout_for(major, minor).is_none() {
            return Err(crate::Error::new(
                crate::ErrorKind::UnsupportedVersion,
                format!(
                    "no asyncio layout for Python {}",
                    self.interp.version_string()
                ),
            ));
        }
        if self.tasks.is_none() {
            self.tasks = Some(TaskPart::default());
        }
        Ok(())
    }

    /// Stops reading tasks (a later `Sampler` of the same target without tasks).
    pub fn disable_tasks(&mut self) {
        self.tasks = None;
    }

    /// Starts a new recording at `rate_hz`: the clock restarts at 0; caches carry over.
    pub fn set_rate(&mut self, rate_hz: f64) {
        self.period = Duration::from_secs_f64(1.0 / rate_hz.clamp(0.1, 20_000.0));
        self.next_due = None;
        self.start = Instant::now();
        self.start_mono_ns = monotonic_ns();
        self.marks.restart();
    }

    pub fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Samples for `seconds` (or until the target exits) and returns what was collected.
    pub fn collect(&mut self, seconds: f64) -> Batch {
        let deadline = Instant::now() + Duration::from_secs_f64(seconds.max(0.0));
        let _realtime = crate::sampling::realtime::RealtimeGuard::enter();
        loop {
            let now = Instant::now();
            let due = *self.next_due.get_or_insert(now);
            if due >= deadline {
                break;
            }
            if due > now {
                std::thread::sleep(due - now);
            }
            let pass_started = Instant::now();
            if !self.sample_once() {
                self.batch.exited = true;
                break;
            }
            let mut next = due + self.period;
            let now = Instant::now();
            if next < now {
                // A pass overran its period: skip the missed slots instead of sampling in a burst,
                // and rest a quarter of the pass's time so a real-time sampler never holds a CPU
                // for good.
                let behind = (now - next).as_secs_f64() / self.period.as_secs_f64();
                self.batch.late += behind.ceil() as u64;
                next = now + (now - pass_started) / 4;
            }
            self.next_due = Some(next);
        }
        self.take_batch()
    }

    /// Ends the current batch (closing its open runs) and starts the next one.
    pub fn take_batch(&mut self) -> Batch {
        self.batch.threads = self
            .threads
            .names
            .iter()
            .map(|(t, n)| (*t, n.clone()))
            .collect();
        if let Some(native) = self.native.as_mut() {
            let (now, given) = native.take_counts();
            let e = &mut self.batch.errors;
            e.native_matched = now.matched - given.matched;
            e.native_partial = now.partial - given.partial;
            e.native_missing = now.missing - given.missing;
            e.native_lost = now.lost.saturating_sub(given.lost);
            e.native_missing_moved = now.missing_moved - given.missing_moved;
            e.native_missing_no_sample = now.missing_no_sample - given.missing_no_sample;
            e.native_missing_unmatched = now.missing_unmatched - given.missing_unmatched;
            e.native_bare = now.bare - given.bare;
        }
        let (stacks, frames, positions) = self.tables.take();
        self.batch.new_stacks = stacks;
        self.batch.new_frames = frames;
        self.batch.positions = positions;
        self.batch.aggregate.close();
        self.batch.tasks = self.tasks.as_mut().map(|r| r.take_batch());
        let pid = self.interp.pid;
        self.batch.sched = self
            .marks
            .end_batch(|| read_mark(pid, &self.threads.os_tids, &mut self.tracks));
        std::mem::take(&mut self.batch)
    }

    /// One pass stamped `t` seconds on the caller's clock (a `ProcessSet` samples several processes
    /// at one tick); false when the target is gone. The schedule is the caller's.
    pub fn sample_at(&mut self, t: f64) -> bool {
        self.sample_pass(t)
    }

    /// The thread list and names re-read when due; the tracks of threads gone are dropped.
    fn refresh(&mut self, pythreads: &[PyThread]) {
        if self.threads.refresh(&self.interp, pythreads) {
            let os_tids = &self.threads.os_tids;
            self.tracks.retain(|tid, _| os_tids.contains(tid));
        }
    }

    /// Reads the GIL struct's first fields (see `read_gil`).
    fn read_gil(&self) -> std::io::Result<GilView> {
        read_gil(&self.interp)
    }

    fn gc_collecting(&self, main_interp: u64) -> std::io::Result<bool> {
        let l = &self.interp.layout;
        Ok(self
            .interp
            .mem
            .read_i32(main_interp + l.interp_gc + l.gc_collecting)?
            != 0)
    }

    /// One observation of every thread; false when the target is gone.
    fn sample_once(&mut self) -> bool {
        self.sample_pass(self.elapsed())
    }

    fn sample_pass(&mut self, t: f64) -> bool {
        let pid = self.interp.pid;
        let snapshot = match self.observe() {
            Ok(s) => s,
            Err(_) => {
                if procfs::is_gone(pid) {
                    return false;
                }
                self.batch.errors.read_failed += 1;
                return true;
            }
        };
        if self.batch.times.is_empty() {
            self.marks
                .begin_batch(|| read_mark(pid, &self.threads.os_tids, &mut self.tracks));
        }
        self.batch.times.push(t);
        let t_ns = self.start_mono_ns + (t * 1e9) as u64;
        if let Some(tasks) = self.tasks.as_mut() {
            tasks.sample(&self.interp, &mut self.tables, self.period, t, &snapshot);
        }
        if let Some(native) = self.native.as_mut() {
            native.begin_pass(&self.threads.os_tids);
        }
        let mut seen = Vec::with_capacity(snapshot.len());
        for (tid, state, syscall, stack, holds, handling) in snapshot {
            let blocked = syscall >= 0;
            let stack_id = match (&stack, self.native.as_mut()) {
                (Some(s), Some(native)) => {
                    native.stack_id(&self.interp, &mut self.tables, tid, s, blocked) as i32
                }
                (Some(s), None) => s.id as i32,
                // No Python stack: with `--native`, its C stack is all it has (a library's pool
                // thread).
                (None, Some(native)) => native
                    .bare_stack_id(
                        &self.interp,
                        &mut self.tables,
                        &self.torn_tids,
                        tid,
                        blocked,
                    )
                    .map_or(NONE, |id| id as i32),
                (None, None) => NONE,
            };
            if let (Some(exact), true) = (self.exact.as_mut(), holds) {
                let top = stack.as_ref().and_then(|s| s.frames.first());
                let frame = top
                    .and_then(|f| self.tables.frame_id(f))
                    .unwrap_or(u32::MAX);
                exact.recorder.note_holder_sample(t_ns, tid, frame);
            }
            seen.push(Seen {
                tid,
                state,
                stack: stack_id,
                syscall: syscall as i32,
                holds,
                handling: handling.unwrap_or(false),
            });
        }
        self.batch.aggregate.add_pass(&seen);
        if let Some(exact) = self.exact.as_mut() {
            exact.drain();
        }
        true
    }

    /// Starts exact tracing (uprobes on the GIL and the collector) alongside sampling.
    pub fn enable_exact(&mut self) -> crate::Result<Vec<String>> {
        let mut tracing = ExactTracing::attach(&self.interp)?;
        // Who holds the GIL now: the one thread whose first drop_gil ends a hold begun before the
        // trace.
        let start = monotonic_ns();
        let holder = self.current_holder_tid();
        tracing.recorder.start_at(start, holder);
        let symbols = tracing.symbols.clone();
        self.exact = Some(tracing);
        Ok(symbols)
    }

    fn current_holder_tid(&mut self) -> Option<i32> {
        let gil = self.read_gil().ok()?;
        if !gil.locked {
            return None;
        }
        let tids = procfs::thread_ids(self.interp.pid).ok()?;
        let threads = python_threads(&self.interp, &mut self.threads.tid_resolver, &tids).ok()?;
        threads
            .iter()
            .find(|t| t.tstate == gil.last_holder)
            .and_then(|t| t.tid)
    }

    /// Ends exact tracing: (summary, events lost by the kernel, threads attached). None if not
    /// enabled.
    pub fn finish_exact(&mut self) -> Option<(ExactSummary, u64, usize)> {
        let (figures, closing) = self.exact.take()?.finish(&self.interp);
        self.closing.push(closing);
        Some(figures)
    }

    /// Exact figures since the previous window (or the start), tracing going on. None if not
    /// enabled.
    pub fn exact_window(&mut self) -> Option<(ExactSummary, u64)> {
        Some(self.exact.as_mut()?.window(&self.interp))
    }

    /// CLOCK_MONOTONIC time of `times` = 0 (the clock perf events are stamped with).
    pub fn start_mono_ns(&self) -> u64 {
        self.start_mono_ns
    }

    /// Classifies every thread once. Stacks are `None` for threads without Python frames or torn
    /// reads.
    fn observe(&mut self) -> std::io::Result<Vec<Observed>> {
        self.observe_with(true)
    }

    /// Leaves thread `tid` out of every pass from now on (the in-process monitor's own thread).
    pub fn ignore_thread(&mut self, tid: i32) {
        self.ignored_tid = Some(tid);
    }

    /// Every thread's (tid, name, state) once, reading no stacks: only where a running thread
    /// without the GIL stands, which classification needs (the in-process monitor's pass).
    pub fn states_once(&mut self) -> std::io::Result<Vec<(i32, String, ThreadState)>> {
        let obs = self.observe_with(false)?;
        Ok(obs
            .into_iter()
            .map(|(tid, state, _, _, _, _)| (tid, self.threads.name(tid), state))
            .collect())
    }

    /// Every thread once: its stack walked (unless kept) when `stacks`, else its state only.
    fn observe_with(&mut self, stacks: bool) -> std::io::Result<Vec<Observed>> {
        let pass = self.begin_pass(stacks)?;
        let mut out = Vec::with_capacity(self.threads.os_tids.len());
        let os_tids = self.threads.os_tids.clone();
        for tid in os_tids {
            if Some(tid) == self.ignored_tid {
                continue;
            }
            out.push(self.observe_thread(&pass, tid));
        }
        Ok(out)
    }

    /// What a pass reads once for all its threads: the thread list, the GIL and the GC flag, and
    /// the interval between passes.
    fn begin_pass(&mut self, stacks: bool) -> std::io::Result<PassStart> {
        self.code_cache.new_pass();
        self.torn_tids.clear();
        if let Some(native) = self.native.as_mut() {
            native.clear_reads();
        }
        self.passes += 1;
        let (main, pythreads) = self.threads.interpreter_threads(&self.interp, stacks)?;
        if let Some(tasks) = self.tasks.as_mut() {
            tasks.last_threads = (main, pythreads.clone());
        }
        let gil = self.read_gil()?;
        let gc = self.gc_collecting(main)?;
        self.refresh(&pythreads);
        let now_ns = monotonic_ns();
        Ok(PassStart {
            pythreads,
            gil,
            gc,
            range: self.interp.gil_futex_range(),
            now_ns,
            period_ns: self.pass_interval_ns(now_ns),
            stacks,
        })
    }

    /// The mean interval between passes, this one included (turns run-queue delay into passes: see
    /// `cpu_wait`); the period until there is one.
    fn pass_interval_ns(&mut self, now_ns: u64) -> u64 {
        if let Some(prev) = self.last_observe_ns {
            let interval = now_ns.saturating_sub(prev) as f64;
            self.mean_interval_ns = if self.mean_interval_ns > 0.0 {
                0.95 * self.mean_interval_ns + 0.05 * interval
            } else {
                interval
            };
        }
        self.last_observe_ns = Some(now_ns);
        if self.mean_interval_ns > 0.0 {
            self.mean_interval_ns as u64
        } else {
            self.period.as_nanos() as u64
        }
    }

    /// One thread in one pass: its reads (`Track::read`), its stack, whether it is in the GIL
    /// handoff or handling an exception, and its state from all of them.
    fn observe_thread(&mut self, pass: &PassStart, tid: i32) -> Observed {
        let gil = &pass.gil;
        let pid = self.interp.pid;
        let py = self.thread_state_of(&pass.pythreads, tid, gil);
        let tstate = py.map(|p| p.tstate).unwrap_or(0);
        let track = self
            .tracks
            .entry(tid)
            .or_insert_with(|| Track::open(pid, tid));
        let holds = tstate != 0 && gil.locked && gil.last_holder == tstate;
        // Only from a thread list read this pass (a states-only pass may reuse an older one).
        let gil_flags = py
            .filter(|_| pass.stacks)
            .map(|p| p.gil_flags)
            .unwrap_or_default();
        if let Some(flag) = gil_flags.holds.filter(|_| tstate != 0) {
            self.batch.errors.gil_flag_checked += 1;
            self.batch.errors.gil_flag_disagreed += u64::from(flag != holds);
        }
        let p = ThreadPass {
            pid,
            tid,
            tstate,
            holds,
            stacks: pass.stacks,
            gil,
            range: pass.range,
            now_ns: pass.now_ns,
            period_ns: pass.period_ns,
        };
        let reads = track.read(&p);
        let owns_gil_mutex = gil.mutex_owners.contains(&tid);
        let syscall = reads.syscall;
        let (stack, top) = self.thread_stack(&p, py, reads.kept, syscall, reads.sched);
        let in_handoff = self.in_handoff(&p, reads.history, syscall, top);
        let handling = self.handling(&p, py, reads.kept_handling);
        let state = classify(
            &Observation {
                tstate,
                syscall,
                in_handoff,
                ran_since_idle: reads.ran_since_idle,
                cpu_wait: reads.cpu_wait,
                owns_gil_mutex,
                gil_requested: gil_flags.requested,
            },
            gil,
            pass.gc,
            pass.range,
            reads.history,
        );
        if let Some(track) = self.tracks.get_mut(&tid) {
            track.remember(&p, state, syscall, reads.sched, &stack, top, handling);
        }
        let nr = match syscall {
            SyscallState::Blocked { nr, .. } => nr,
            _ => -1,
        };
        (tid, state, nr, stack, holds, handling)
    }

    /// The thread's stack this pass (kept, walked, or none on a states-only pass) and where its
    /// innermost frame stands.
    fn thread_stack(
        &mut self,
        p: &ThreadPass,
        py: Option<PyThread>,
        kept: Option<Kept>,
        syscall: SyscallState,
        sched: Option<Schedstat>,
    ) -> (Option<Stack>, Option<(u64, i64)>) {
        let (tstate, holds) = (p.tstate, p.holds);
        let read_start = if self.native.is_some() {
            monotonic_ns()
        } else {
            0
        };
        let (stack, top) = match (tstate != 0, p.stacks, kept) {
            (false, _, _) => (None, None),
            (true, true, Some((stack, top))) => (Some(stack), top),
            (true, true, None) => {
                // A thread without the GIL rarely moves its stack between the thread list and its
                // walk (the recheck catches it if it did); the holder's moves all the time.
                let head = if holds { None } else { py.and_then(|p| p.head) };
                // Released GIL: whoever takes it next may move its stack during the walk.
                let (frames, positions, top, ends) =
                    self.read_stack(tstate, head, holds || !p.gil.locked);
                if frames.is_none() {
                    self.torn_tids.push(p.tid);
                }
                let stack = frames.map(|f| Stack {
                    id: self.tables.stack(&f, &positions),
                    frames: Arc::new(f),
                    ends: Arc::new(ends),
                });
                (stack, top)
            }
            // Only a running thread without the GIL needs to know where it stands.
            (true, false, _) if !holds && syscall == SyscallState::Running => {
                (None, self.top_position(tstate))
            }
            (true, false, _) => (None, None),
        };
        if let (Some(native), Some(_)) = (self.native.as_mut(), &stack) {
            native.note_read(
                p.tid,
                (read_start, monotonic_ns(), sched.map(|s| s.run_ns), top),
            );
        }
        (stack, top)
    }

    /// Running without the GIL in the eval loop itself (not in C code) is the GIL handoff: seen
    /// from the instruction (a backward jump or RESUME calls no C code) or, on 3.10, where the
    /// eval breaker also runs after calls and on entering a frame, from the recursion counter.
    fn in_handoff(
        &self,
        p: &ThreadPass,
        history: Option<History>,
        syscall: SyscallState,
        top: Option<(u64, i64)>,
    ) -> bool {
        let (gil, tstate) = (p.gil, p.tstate);
        if p.holds || tstate == 0 || syscall != SyscallState::Running {
            return false;
        }
        let at_handoff_opcode = top
            .and_then(|(code, instr)| self.opcode_at(code, instr))
            .map(|op| self.handoff_opcodes.contains(&op))
            .unwrap_or(false);
        if at_handoff_opcode {
            return true;
        }
        // The 3.10 counter check walks the frame chain again, so it is skipped where the answer
        // cannot matter or is known: a waiter the history already keeps waiting, a thread just
        // woken from a blocking call (it is in the C function that made it), and one found in C
        // code last pass that cannot have had the GIL since (no handoff, not the last holder).
        let settled = history
            .map(|h| {
                let changes = gil.switch_number.wrapping_sub(h.switch_number);
                match h.state {
                    ThreadState::WaitingGil => changes <= 1 && gil.last_holder != tstate,
                    ThreadState::Native => changes == 0 && gil.last_holder != tstate,
                    ThreadState::Idle => true,
                    _ => false,
                }
            })
            .unwrap_or(false);
        // 3.10's recursion counter misses C calls made through a type's own vectorcall (a NumPy
        // ufunc such as an FFT): such a thread runs C code without the GIL at a CALL with the
        // counter at 0. A thread in the handoff does not run for long; one that was running
        // without the GIL at the last pass, has been on a CPU most of the time since, and cannot
        // have taken the GIL from anyone since (switch_number unchanged) has been running C code.
        let in_c_code = self.tracks.get(&p.tid).map(|t| t.busy()).unwrap_or(false)
            && history
                .map(|h| {
                    matches!(
                        h.state,
                        ThreadState::Native | ThreadState::WaitingGil | ThreadState::CpuWait
                    ) && h.switch_number == gil.switch_number
                })
                .unwrap_or(false);
        // The handoff hands the GIL to another thread: with nobody holding it, a running thread
        // outside the GIL's mutexes is not in one (an FFT thread alone with a sleeping main
        // thread).
        let other_holds = gil.locked && gil.last_holder != tstate;
        !settled && !in_c_code && other_holds && self.no_call_in_progress(tstate)
    }

    /// Handling an exception: free while no generator runs on the thread (the thread list's read
    /// has it), else kept with a kept stack, else read level by level. None on a states-only pass.
    fn handling(
        &mut self,
        p: &ThreadPass,
        py: Option<PyThread>,
        kept_handling: Option<bool>,
    ) -> Option<bool> {
        let tstate = p.tstate;
        match (p.stacks, py) {
            (true, Some(t)) if tstate != 0 => {
                let at_bottom = t.exc.info == tstate + self.interp.layout.tstate_exc_state;
                match kept_handling {
                    Some(h) if !at_bottom => Some(h),
                    _ => self
                        .handling_check
                        .handling(&self.interp.mem, &self.interp.layout, tstate, t.exc)
                        .ok(),
                }
            }
            _ => None,
        }
    }

    /// The thread state an OS thread runs Python code in. Usually its only one; but an embedding
    /// program can leave a thread more than one carrying its id (one it made and one the
    /// interpreter made, or a stale one mapped through glibc after a fork: `threads.rs`), so among
    /// several the GIL holder wins, then one with a Python frame.
    fn thread_state_of(&self, pythreads: &[PyThread], tid: i32, gil: &GilView) -> Option<PyThread> {
        let mut found = pythreads.iter().filter(|p| p.tid == Some(tid));
        let first = *found.next()?;
        let others: Vec<PyThread> = found.copied().collect();
        if others.is_empty() {
            return Some(first);
        }
        let all = std::iter::once(first).chain(others);
        let candidates: Vec<PyThread> = all.collect();
        if let Some(holder) = candidates
            .iter()
            .find(|p| gil.locked && gil.last_holder == p.tstate)
        {
            return Some(*holder);
        }
        let walker = FrameWalker::new(&self.interp.mem, &self.interp.layout, self.interp.code_type);
        candidates
            .iter()
            .find(|p| walker.top_frame(p.tstate).is_ok_and(|f| f != 0))
            .copied()
            .or(Some(first))
    }

    fn top_position(&self, tstate: u64) -> Option<(u64, i64)> {
        FrameWalker::new(&self.interp.mem, &self.interp.layout, self.interp.code_type)
            .top_position(tstate)
            .ok()
            .flatten()
    }

    /// 3.10: the thread is in no C function, by its recursion counter (see
    /// `FrameWalker::calls_in_progress`). False when unknown and on other versions, whose
    /// specialised calls skip the counter.
    fn no_call_in_progress(&self, tstate: u64) -> bool {
        let walker = FrameWalker::new(&self.interp.mem, &self.interp.layout, self.interp.code_type);
        matches!(walker.calls_in_progress(tstate), Ok(Some(0)))
    }

    fn opcode_at(&self, code: u64, instr: i64) -> Option<u8> {
        FrameWalker::new(&self.interp.mem, &self.interp.layout, self.interp.code_type)
            .opcode_at(code, instr)
    }

    /// The stack (None when torn on every attempt), its frames' positions (3.11+) and where its
    /// innermost frame stands.
    /// With `record --native`, also each frame's evaluation-loop call end
    /// (`FrameWalker::call_ends`).
    fn read_stack(&mut self, tstate: u64, head: Option<WalkHead>, moving: bool) -> StackRead {
        let mut walker =
            FrameWalker::new(&self.interp.mem, &self.interp.layout, self.interp.code_type);
        walker.keep_outer_part = true;
        for attempt in 0..READ_ATTEMPTS {
            // Only the first attempt may start from the earlier head: a retry reads everything
            // anew.
            let from = if attempt == 0 { head } else { None };
            // 3.10's line table has no columns: nothing to collect.
            let walked = if self.interp.version.1 >= 11 {
                walker.walk_with_positions(tstate, from, moving, &mut self.code_cache)
            } else {
                walker
                    .walk_from(tstate, from, moving, &mut self.code_cache)
                    .map(|w| (w, Vec::new()))
            };
            match walked {
                Ok(((frames, top), positions)) => {
                    if walker.outer_only.get() {
                        self.batch.errors.torn_partial += 1;
                    } else if attempt > 0 || walker.rounds.get() > 0 {
                        self.batch.errors.torn_retried += 1;
                    }
                    let ends = if self.native.is_some() {
                        walker.call_ends.take()
                    } else {
                        Vec::new()
                    };
                    return (Some(frames), positions, top, ends);
                }
                Err(WalkError::Torn) => continue,
                Err(WalkError::Io(_)) => break,
            }
        }
        self.batch.errors.torn_dropped += 1;
        (None, Vec::new(), None, Vec::new())
    }

    /// One snapshot of every thread with its stack (for `dump`).
    /// A torn read (a thread exiting while the list is walked) is read again, with the threads
    /// listed afresh, up to `SETTLE_TRIES` times: only a gone process, or a list that never held
    /// still, fails.
    pub fn snapshot(&mut self) -> std::io::Result<Vec<ThreadSnapshot>> {
        let mut obs = self.observe_settled()?;
        self.read_moving_again(&mut obs);
        Ok(obs
            .into_iter()
            .map(|(tid, state, syscall, stack, _, _)| ThreadSnapshot {
                tid,
                name: self.threads.name(tid),
                state,
                syscall,
                stack: stack.map(|s| (*s.frames).clone()).unwrap_or_default(),
            })
            .collect())
    }
}

/// Reads the GIL struct's first fields (interval, last_holder, locked, switch_number) and its
/// mutexes' owners.
pub fn read_gil(interp: &Interpreter) -> std::io::Result<GilView> {
    let l = &interp.layout;
    let g = interp.gil.address();
    // The whole struct in one read: its mutexes say who is inside take_gil()/drop_gil().
    let mut buf = [0u8; 256];
    let size = (l.gil_size as usize).clamp(32, buf.len());
    interp.mem.read(g, &mut buf[..size])?;
    let u64_at = |o: u64| u64::from_le_bytes(buf[o as usize..o as usize + 8].try_into().unwrap());
    let i32_at = |o: u64| {
        if o as usize + 4 <= size {
            i32::from_le_bytes(buf[o as usize..o as usize + 4].try_into().unwrap())
        } else {
            0
        }
    };
    let locked = i32_at(l.gil_locked);
    // glibc's pthread_mutex_t records its owner's tid at offset 8 (`__data.__owner`, x86-64 and
    // aarch64); 0 when free. Only compared with the target's tids, so another libc reads as
    // "nobody".
    const MUTEX_OWNER: u64 = 8;
    let owners = [
        i32_at(l.gil_mutex + MUTEX_OWNER),
        i32_at(l.gil_switch_mutex + MUTEX_OWNER),
    ]
    .map(|t| if t > 0 { t } else { -1 });
    Ok(GilView {
        locked: locked != 0,
        last_holder: u64_at(l.gil_last_holder),
        switch_number: u64_at(l.gil_switch_number),
        mutex_owners: owners,
    })
}

/// How long a dump reads again the threads whose stacks kept moving under every walk.
const SNAPSHOT_SETTLE: Duration = Duration::from_millis(250);

impl Sampler {
    /// `observe`, read again with the threads listed afresh while the list does not hold still.
    fn observe_settled(&mut self) -> std::io::Result<Vec<Observed>> {
        let mut tries = 0;
        loop {
            match self.observe() {
                Ok(obs) => return Ok(obs),
                Err(e)
                    if tries + 1 >= crate::interp::threads::SETTLE_TRIES
                        || procfs::is_gone(self.interp.pid) =>
                {
                    return Err(e)
                }
                Err(_) => {
                    tries += 1;
                    crate::interp::threads::settle_pause(tries);
                    self.threads.os_tids.clear();
                }
            }
        }
    }

    /// A dump's threads whose walks all tore (a stack calling and returning all the time: on 3.10
    /// every frame is a heap object read on its own) or gave only their outer frames, read again
    /// for up to `SNAPSHOT_SETTLE`: each walk that gets a stack leaves its frames for the next to
    /// keep the outer part by (`FrameWalker::read_chain`'s prior, as `record`'s passes do), so a
    /// torn thread gets at least its outer frames and most get a whole stack. A thread keeps the
    /// first whole stack read (one moment per thread, as ever).
    fn read_moving_again(&mut self, obs: &mut [Observed]) {
        let deadline = Instant::now() + SNAPSHOT_SETTLE;
        let mut torn = self.torn_tids.clone();
        while obs.iter().any(|o| unsettled(o, &torn)) && Instant::now() < deadline {
            let Ok(again) = self.observe() else { return };
            for o in again {
                let Some(i) = obs.iter().position(|p| p.0 == o.0) else {
                    continue;
                };
                let better = match (&obs[i].3, &o.3) {
                    (None, Some(_)) => torn.contains(&o.0),
                    (Some(a), Some(b)) => outer_only(a) && !outer_only(b),
                    _ => false,
                };
                if better {
                    torn.retain(|&t| t != o.0);
                    obs[i] = o;
                }
            }
        }
    }
}

/// A stack of which only the outer frames were read (under `MOVING_FRAMES`).
fn outer_only(s: &Stack) -> bool {
    s.frames
        .first()
        .is_some_and(|f| f.function == crate::interp::frames::MOVING_FRAMES)
}

/// A thread of a dump still without its whole stack: every walk tore (`torn`), or only the outer
/// part.
fn unsettled(o: &Observed, torn: &[i32]) -> bool {
    match &o.3 {
        None => torn.contains(&o.0),
        Some(s) => outer_only(s),
    }
}

impl Sampler {
    /// Every Python thread's mixed native + Python stack, for `dump --native` (see
    /// `native::snapshot`). Err: kernel sampling is not permitted here (one line saying what to
    /// change).
    pub fn native_snapshot(
        &mut self,
        wait: Duration,
    ) -> crate::Result<Vec<crate::native::snapshot::NativeThread>> {
        crate::native::snapshot::take(
            &self.interp,
            &mut self.code_cache,
            &mut self.threads.tid_resolver,
            wait,
        )
    }
}
