//! `record --tasks`: the sampler's part that reads every asyncio task in a pass and charges it with
//! the state and stack its thread was read in (`task_record`).

use crate::interp::interpreter::Interpreter;
use crate::interp::threads::PyThread;
use crate::sampling::stacks::{Interner, Observed};
use crate::sampling::task_record::{self, TaskAggregate, TaskRecorder, ThreadSeen};
use std::time::{Duration, Instant};

#[derive(Default)]
pub(crate) struct TaskPart {
    recorder: TaskRecorder,
    /// The main interpreter and thread states of the pass's thread read.
    pub last_threads: (u64, Vec<PyThread>),
}

impl TaskPart {
    /// The pass's tasks, when due, charged with the states and stacks its thread read found.
    pub fn sample(
        &mut self,
        interp: &Interpreter,
        tables: &mut Interner,
        period: Duration,
        t: f64,
        snapshot: &[Observed],
    ) {
        let rec = &mut self.recorder;
        if !rec.due() {
            return;
        }
        let started = Instant::now();
        let samples = {
            let (main, pythreads) = &self.last_threads;
            let threads: Vec<ThreadSeen> = snapshot
                .iter()
                .map(|(tid, state, _, stack, _, _)| ThreadSeen {
                    tid: *tid,
                    ident: pythreads
                        .iter()
                        .find(|p| p.tid == Some(*tid))
                        .map(|p| p.ident),
                    state: *state,
                    frames: stack.as_ref().map(|s| s.frames.as_slice()),
                })
                .collect();
            task_record::observe(interp, *main, &threads, &mut rec.batch.errors)
        };
        rec.after_read(
            started.elapsed().as_nanos() as u64,
            period.as_nanos() as u64,
        );
        let ids: Vec<(u32, Option<u32>)> = samples
            .iter()
            .map(|s| {
                (
                    tables.stack(&s.frames, &[]),
                    s.awaiting.as_ref().map(|(_, site)| tables.frame(site)),
                )
            })
            .collect();
        rec.add_pass(t, &samples, &ids);
    }

    pub fn take_batch(&mut self) -> TaskAggregate {
        self.recorder.take_batch()
    }
}
