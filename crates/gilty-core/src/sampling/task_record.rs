//! `record --tasks`: every sampling pass also reads every asyncio task, so wall time is counted per
//! task and not only per thread (docs/asyncio.md, "Recording tasks").
//!
//! A pass's tasks are read as a dump reads them, twice, keeping what both reads agree on
//! (`asyncio::read_tasks_agreed`), through a page cache of small chunks (a pass reads a few hundred
//! scattered pages, not a heap). Each kept task becomes one sample keyed by its *task stack*:
//! - the task tree path, outermost awaiting task first, by name;
//! - its coroutine chain (innermost first, as thread stacks are kept);
//! - a suspended task: what it awaits (kind) and where (the innermost frame outside asyncio);
//! - a running task: its thread's state in this pass and its thread's Python stack, cut at the
//!   task's outermost coroutine. A running task whose thread's stack does not hold that coroutine
//!   moved between the thread read and the task read: it is dropped and counted.
//!
//! Separate from the sampler's own fold (`aggregate.rs`) so that the thread view is untouched.

use crate::asyncio::{read_tasks_agreed, TaskInfo, TasksSnapshot};
use crate::interp::frames::Frame;
use crate::interp::interpreter::Interpreter;
use crate::sampling::aggregate::OrderedCounts;
use crate::sampling::classify::ThreadState;
use std::collections::HashMap;

/// Task-sample state of a task suspended in an await (running tasks take their thread's state).
pub const TASK_AWAITING: u8 = 100;
/// Task-sample state of a pending task that awaits nothing: scheduled, waiting for its turn.
pub const TASK_READY: u8 = 101;
/// `await_id` of a sample that awaits nothing.
pub const NO_AWAIT: i32 = -1;

/// Pages per read of a pass's page cache: a pass over a thousand tasks cost 12 ms in single pages,
/// 17 ms in 4-page and 22 ms in 32-page chunks (bench/asyncio_record_tasks.py, 3.12).
pub const PASS_CHUNK_PAGES: u64 = 1;
/// Share of the sampling period the task reads may take on average: with more tasks than that
/// allows, tasks are read every Nth pass and each read stands for N passes
/// (`TaskRecorder::stride`).
pub const PERIOD_BUDGET: f64 = 0.25;
/// Longest stride: tasks are read at least every 50 passes (every half second at 100 Hz).
pub const MAX_STRIDE: u32 = 50;

/// Deepest task tree path kept (a longer parent chain is taken as stale edges).
const MAX_PATH: usize = 64;

/// One thread as the pass saw it: what a running task on it is charged with.
pub struct ThreadSeen<'a> {
    pub tid: i32,
    /// `threading.get_ident()`, for Python threads.
    pub ident: Option<u64>,
    pub state: ThreadState,
    /// Its Python stack, innermost first (None: no Python stack, or a torn read).
    pub frames: Option<&'a [Frame]>,
}

/// One task in one pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSample {
    pub id: u64,
    pub name: String,
    /// Task names from the outermost awaiting task down to this one.
    pub path: Vec<String>,
    /// Innermost first.
    pub frames: Vec<Frame>,
    /// A `ThreadState` number for a running task, else TASK_AWAITING or TASK_READY.
    pub state: u8,
    /// (kind, site) of a suspended task.
    pub awaiting: Option<(String, Frame)>,
    /// The thread running it (running tasks only).
    pub tid: Option<i32>,
}

#[derive(Debug, Clone, Default)]
pub struct TaskPassErrors {
    /// Tasks the two reads of a pass disagreed on.
    pub torn_dropped: u64,
    /// Tasks that could not be read.
    pub unreadable: u64,
    /// Tasks seen by one read of a pass only (started or finished in between).
    pub changed: u64,
    /// Running tasks whose thread's stack of the same pass did not hold them.
    pub running_unmatched: u64,
    /// Passes whose tasks could not be read at all.
    pub read_failed: u64,
}

impl TaskPassErrors {
    fn add_snapshot(&mut self, snap: &TasksSnapshot) {
        self.torn_dropped += snap.errors.torn_dropped;
        self.unreadable += snap.errors.unreadable;
        self.changed += snap.errors.changed;
    }
}

/// Reads every task once (two agreeing reads) and turns each into a sample of this pass.
pub fn observe(
    interp: &Interpreter,
    main: u64,
    threads: &[ThreadSeen],
    errors: &mut TaskPassErrors,
) -> Vec<TaskSample> {
    let snap = match read_tasks_agreed(interp, main, PASS_CHUNK_PAGES) {
        Ok(s) => s,
        Err(_) => {
            errors.read_failed += 1;
            return Vec::new();
        }
    };
    errors.add_snapshot(&snap);
    samples_of(&snap, threads, errors)
}

/// The innermost frame outside asyncio's own modules: where the program awaits.
fn await_site(stack: &[Frame]) -> Option<&Frame> {
    stack
        .iter()
        .find(|f| !f.file.contains("/asyncio/"))
        .or(stack.first())
}

fn path_of(t: &TaskInfo, by_id: &HashMap<u64, &TaskInfo>) -> Vec<String> {
    let mut path = vec![t.name.clone()];
    let mut ids = vec![t.id];
    let mut at = t;
    while let Some(p) = at.parent.and_then(|p| by_id.get(&p)) {
        // A task of an await cycle is its own ancestor: the path ends before it repeats.
        if path.len() >= MAX_PATH || ids.contains(&p.id) {
            break;
        }
        path.push(p.name.clone());
        ids.push(p.id);
        at = p;
    }
    path.reverse();
    path
}

/// Where a running task's outermost coroutine stands in its thread's stack (innermost first).
fn cut_at_task(thread: &[Frame], task: &[Frame]) -> Option<usize> {
    let outer = task.last()?;
    thread
        .iter()
        .rposition(|f| f.function == outer.function && f.file == outer.file)
}

/// The samples of one pass from an agreed snapshot and the threads of the same pass.
pub fn samples_of(
    snap: &TasksSnapshot,
    threads: &[ThreadSeen],
    errors: &mut TaskPassErrors,
) -> Vec<TaskSample> {
    let by_id: HashMap<u64, &TaskInfo> = snap.tasks.iter().map(|t| (t.id, t)).collect();
    let mut out = Vec::with_capacity(snap.tasks.len());
    for t in &snap.tasks {
        if matches!(t.state, "done" | "cancelled") {
            continue;
        }
        let path = path_of(t, &by_id);
        if t.state == "running" {
            let lp = snap.loops.iter().find(|l| l.address == t.loop_addr);
            // The loop's own thread when known (uvloop keeps it where it cannot be read): else the
            // thread whose stack holds the task.
            let by_ident = lp
                .and_then(|l| l.thread_ident)
                .and_then(|i| threads.iter().find(|th| th.ident == Some(i)));
            let thread = match by_ident {
                Some(th) => Some(th),
                None => threads
                    .iter()
                    .find(|th| th.frames.and_then(|f| cut_at_task(f, &t.stack)).is_some()),
            };
            let found = thread.and_then(|th| {
                th.frames
                    .and_then(|f| cut_at_task(f, &t.stack))
                    .map(|at| (th, &th.frames.unwrap()[..=at]))
            });
            match found {
                Some((th, frames)) => out.push(TaskSample {
                    id: t.id,
                    name: t.name.clone(),
                    path,
                    frames: frames.to_vec(),
                    state: th.state as u8,
                    awaiting: None,
                    tid: Some(th.tid),
                }),
                None => errors.running_unmatched += 1,
            }
            continue;
        }
        let awaiting = t
            .awaiting
            .as_ref()
            .and_then(|a| await_site(&t.stack).map(|site| (a.kind.clone(), site.clone())));
        let state = if awaiting.is_some() {
            TASK_AWAITING
        } else {
            TASK_READY
        };
        out.push(TaskSample {
            id: t.id,
            name: t.name.clone(),
            path,
            frames: t.stack.clone(),
            state,
            awaiting,
            tid: None,
        });
    }
    out
}

/// What one batch's task samples fold into (the task view's part of a `Batch`).
#[derive(Debug, Default)]
pub struct TaskAggregate {
    /// Passes the task reads stand for (a read every Nth pass stands for N).
    pub passes: u32,
    /// Task reads made.
    pub reads: u32,
    /// (path id, stack id, state, await id or NO_AWAIT) -> samples.
    pub counts: OrderedCounts<(u32, i32, u8, i32)>,
    /// Path ids first used in this batch: (id, names outermost first).
    pub new_paths: Vec<(u32, Vec<String>)>,
    /// Await ids first used in this batch: (id, kind, frame id of the site).
    pub new_awaits: Vec<(u32, String, u32)>,
    /// Every task seen in the batch: (id, name, first seen s, last seen s, samples); the Python
    /// side joins a task seen in several batches.
    pub lifetimes: Vec<(u64, String, f64, f64, u64)>,
    pub errors: TaskPassErrors,
}

/// Interning tables kept across batches (ids are sent once, in the batch where first used), and
/// the batch being filled.
#[derive(Default)]
pub struct TaskRecorder {
    path_ids: HashMap<Vec<String>, u32>,
    await_ids: HashMap<(String, u32), u32>,
    lifetimes: HashMap<(u64, String), (f64, f64, u64)>,
    pub batch: TaskAggregate,
    /// Passes each task read stands for (1: every pass), and passes left until the next read.
    stride: u32,
    skip: u32,
    /// Mean CPU-side cost of a task read (ns).
    cost_ns: f64,
}

impl TaskRecorder {
    /// Whether this pass reads the tasks (see `PERIOD_BUDGET`).
    pub fn due(&mut self) -> bool {
        if self.skip > 0 {
            self.skip -= 1;
            return false;
        }
        true
    }

    /// After a read that took `cost_ns`: how many passes the next reads stand for, so that task
    /// reads take at most `PERIOD_BUDGET` of the sampling period on average.
    pub fn after_read(&mut self, cost_ns: u64, period_ns: u64) {
        self.cost_ns = if self.cost_ns > 0.0 {
            0.8 * self.cost_ns + 0.2 * cost_ns as f64
        } else {
            cost_ns as f64
        };
        let allowed = PERIOD_BUDGET * period_ns.max(1) as f64;
        self.stride = ((self.cost_ns / allowed).ceil() as u32).clamp(1, MAX_STRIDE);
        self.skip = self.stride - 1;
    }

    /// Passes the current read stands for.
    pub fn weight(&self) -> u32 {
        self.stride.max(1)
    }

    fn path_id(&mut self, path: &[String]) -> u32 {
        if let Some(&id) = self.path_ids.get(path) {
            return id;
        }
        let id = self.path_ids.len() as u32;
        self.path_ids.insert(path.to_vec(), id);
        self.batch.new_paths.push((id, path.to_vec()));
        id
    }

    fn await_id(&mut self, kind: &str, site_frame: u32) -> i32 {
        let key = (kind.to_owned(), site_frame);
        if let Some(&id) = self.await_ids.get(&key) {
            return id as i32;
        }
        let id = self.await_ids.len() as u32;
        self.await_ids.insert(key, id);
        self.batch
            .new_awaits
            .push((id, kind.to_owned(), site_frame));
        id as i32
    }

    /// Folds one pass's samples in; `ids` holds, per sample, its stack's id and its await site's
    /// frame id in the sampler's tables.
    pub fn add_pass(&mut self, t: f64, samples: &[TaskSample], ids: &[(u32, Option<u32>)]) {
        let weight = self.weight();
        self.batch.passes += weight;
        self.batch.reads += 1;
        for (s, &(stack, site)) in samples.iter().zip(ids) {
            let path = self.path_id(&s.path);
            let stack = stack as i32;
            let await_id = match (&s.awaiting, site) {
                (Some((kind, _)), Some(f)) => self.await_id(kind, f),
                _ => NO_AWAIT,
            };
            self.batch
                .counts
                .add_n((path, stack, s.state, await_id), weight as u64);
            let life = self
                .lifetimes
                .entry((s.id, s.name.clone()))
                .or_insert((t, t, 0));
            life.1 = t;
            life.2 += weight as u64;
        }
    }

    /// Ends the batch: its lifetimes are handed over and the next batch starts empty.
    pub fn take_batch(&mut self) -> TaskAggregate {
        let mut batch = std::mem::take(&mut self.batch);
        batch.lifetimes = self
            .lifetimes
            .drain()
            .map(|((id, name), (first, last, n))| (id, name, first, last, n))
            .collect();
        batch.lifetimes.sort_by(|a, b| a.2.total_cmp(&b.2));
        batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asyncio::{Awaiting, LoopInfo};

    fn frame(function: &str, file: &str, line: i32) -> Frame {
        Frame {
            function: function.into(),
            file: file.into(),
            line,
        }
    }

    fn task(
        id: u64,
        name: &str,
        state: &'static str,
        stack: Vec<Frame>,
        awaiting: Option<&str>,
        parent: Option<u64>,
    ) -> TaskInfo {
        TaskInfo {
            id,
            name: name.into(),
            state,
            loop_addr: 7,
            python_impl: false,
            eager: false,
            stack,
            awaiting: awaiting.map(|k| Awaiting {
                kind: k.into(),
                type_name: "Future".into(),
                address: 1,
            }),
            parent,
            parent_via: parent.map(|_| "await"),
            waits_for: Vec::new(),
        }
    }

    #[test]
    fn suspended_running_and_unmatched_tasks() {
        let sleep = frame("sleep", "/py/asyncio/tasks.py", 600);
        let helper = frame("helper", "/app/app.py", 12);
        let handler = frame("handler", "/app/app.py", 20);
        let run = frame("Handle._run", "/py/asyncio/events.py", 80);
        let snap = TasksSnapshot {
            asyncio_imported: true,
            loops: vec![LoopInfo {
                address: 7,
                type_name: "L".into(),
                thread_ident: Some(99),
                tid: None,
                running_task: Some(3),
            }],
            tasks: vec![
                task(
                    1,
                    "main",
                    "pending",
                    vec![frame("main", "/app/app.py", 30)],
                    Some("task"),
                    None,
                ),
                task(
                    2,
                    "req",
                    "pending",
                    vec![sleep.clone(), helper.clone(), handler.clone()],
                    Some("sleep"),
                    Some(1),
                ),
                task(
                    3,
                    "busy",
                    "running",
                    vec![frame("busy", "/app/app.py", 40)],
                    None,
                    Some(1),
                ),
                task(4, "gone", "done", vec![], None, None),
                task(
                    5,
                    "other",
                    "running",
                    vec![frame("elsewhere", "/app/x.py", 1)],
                    None,
                    None,
                ),
            ],
            ..Default::default()
        };
        let thread_stack = vec![
            frame("compute", "/app/app.py", 50),
            frame("busy", "/app/app.py", 41),
            run,
            frame("run_forever", "/py/asyncio/base_events.py", 600),
        ];
        let threads = [ThreadSeen {
            tid: 10,
            ident: Some(99),
            state: ThreadState::HoldingGil,
            frames: Some(&thread_stack),
        }];
        let mut errors = TaskPassErrors::default();
        let samples = samples_of(&snap, &threads, &mut errors);
        let names: Vec<&str> = samples.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["main", "req", "busy"]);
        let req = &samples[1];
        assert_eq!(req.path, ["main", "req"]);
        assert_eq!(req.state, TASK_AWAITING);
        // The site is the program's line, not asyncio's.
        assert_eq!(req.awaiting, Some(("sleep".into(), helper)));
        let busy = &samples[2];
        assert_eq!(busy.state, ThreadState::HoldingGil as u8);
        // The thread's stack down to the task's coroutine, the loop's frames cut off.
        assert_eq!(busy.frames, thread_stack[..2].to_vec());
        assert_eq!(busy.tid, Some(10));
        // "other" claims to run but no thread's stack holds it.
        assert_eq!(errors.running_unmatched, 1);
    }

    /// Tasks of an await cycle (a awaits b awaits a; s gathers itself) are each sampled once, their
    /// paths ending before a task repeats.
    #[test]
    fn await_cycles_give_one_sample_each_and_short_paths() {
        let at = |f: &str| vec![frame(f, "/app/app.py", 1)];
        let snap = TasksSnapshot {
            asyncio_imported: true,
            tasks: vec![
                task(1, "a", "pending", at("a"), Some("task"), Some(2)),
                task(2, "b", "pending", at("b"), Some("task"), Some(1)),
                task(3, "s", "pending", at("s"), Some("gather"), Some(3)),
            ],
            ..Default::default()
        };
        let samples = samples_of(&snap, &[], &mut TaskPassErrors::default());
        let paths: Vec<Vec<String>> = samples.iter().map(|s| s.path.clone()).collect();
        assert_eq!(paths, [vec!["b", "a"], vec!["a", "b"], vec!["s"]]);
    }

    #[test]
    fn recorder_interns_paths_awaits_and_lifetimes() {
        let site = frame("helper", "/app/app.py", 12);
        let s = TaskSample {
            id: 1,
            name: "a".into(),
            path: vec!["a".into()],
            frames: vec![site.clone()],
            state: TASK_AWAITING,
            awaiting: Some(("sleep".into(), site)),
            tid: None,
        };
        let mut r = TaskRecorder::default();
        r.add_pass(0.0, std::slice::from_ref(&s), &[(5, Some(9))]);
        r.add_pass(0.01, std::slice::from_ref(&s), &[(5, Some(9))]);
        let b = r.take_batch();
        assert_eq!((b.passes, b.reads), (2, 2));
        assert_eq!(b.counts.entries, vec![((0, 5, TASK_AWAITING, 0), 2)]);
        assert_eq!(b.new_paths, vec![(0, vec!["a".to_owned()])]);
        assert_eq!(b.new_awaits, vec![(0, "sleep".to_owned(), 9)]);
        assert_eq!(b.lifetimes, vec![(1, "a".to_owned(), 0.0, 0.01, 2)]);
        r.add_pass(0.02, &[s], &[(5, Some(9))]);
        let b = r.take_batch();
        // Ids are sent once.
        assert!(b.new_paths.is_empty() && b.new_awaits.is_empty());
        assert_eq!(b.counts.entries, vec![((0, 5, TASK_AWAITING, 0), 1)]);
    }

    #[test]
    fn reads_that_cost_more_than_the_budget_are_spread_over_passes() {
        let mut r = TaskRecorder::default();
        assert!(r.due());
        // A read of 10 ms at a 10 ms period: a quarter of the period allows one read every 4
        // passes.
        r.after_read(10_000_000, 10_000_000);
        assert_eq!(r.weight(), 4);
        let due: Vec<bool> = (0..8).map(|_| r.due()).collect();
        assert_eq!(due, [false, false, false, true, true, true, true, true]);
        let site = frame("f", "/a.py", 1);
        let s = TaskSample {
            id: 1,
            name: "a".into(),
            path: vec!["a".into()],
            frames: vec![site.clone()],
            state: TASK_READY,
            awaiting: None,
            tid: None,
        };
        r.add_pass(0.0, &[s], &[(0, None)]);
        let b = r.take_batch();
        // That read stands for four passes.
        assert_eq!((b.passes, b.reads), (4, 1));
        assert_eq!(b.counts.entries, vec![((0, 0, TASK_READY, NO_AWAIT), 4)]);
        // Cheap reads bring the stride back to 1.
        for _ in 0..40 {
            r.after_read(100_000, 10_000_000);
        }
        assert_eq!(r.weight(), 1);
    }
}
