//! `record --native`: the sampler's part that joins each pass's Python stacks with the native
//! stacks the kernel sampled (`native::record`), and gives threads without a Python stack their C
//! stack.

use crate::interp::frames::Frame;
use crate::interp::interpreter::Interpreter;
use crate::native::record::{as_frame, Mixed, NativeCounts, NativeRecorder, PyRead};
use crate::process::procfs;
use crate::sampling::stacks::{Interner, Stack};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// One thread's stack read this pass: (start ns, end ns, CPU time before, innermost frame's
/// position).
pub(crate) type PassRead = (u64, u64, Option<u64>, Option<(u64, i64)>);

pub(crate) struct NativeStacks {
    recorder: NativeRecorder,
    /// Per thread read this pass: CLOCK_MONOTONIC ns around its stack read, its CPU time before it,
    /// and where its innermost frame stood.
    pass_reads: HashMap<i32, PassRead>,
    /// Per thread: the last mixed stack and its id (a kept one is not interned again).
    mixed_ids: HashMap<i32, (Arc<Mixed>, u32)>,
    /// Counters already given to a batch.
    given: NativeCounts,
}

impl NativeStacks {
    /// Err: one line saying why (perf events not permitted: what to change).
    pub fn start(interp: &Interpreter, period: Duration) -> Result<NativeStacks, String> {
        let tids =
            procfs::thread_ids(interp.pid).map_err(|e| format!("pid {}: {e}", interp.pid))?;
        Ok(NativeStacks {
            recorder: NativeRecorder::start(interp, &tids, period)?,
            pass_reads: HashMap::new(),
            mixed_ids: HashMap::new(),
            given: NativeCounts::default(),
        })
    }

    /// A new pass over `tids`: the stack reads of the last one are forgotten.
    pub fn clear_reads(&mut self) {
        self.pass_reads.clear();
    }

    pub fn begin_pass(&mut self, tids: &[i32]) {
        self.recorder.threads(tids);
        self.recorder.begin_pass();
    }

    pub fn note_read(&mut self, tid: i32, read: PassRead) {
        self.pass_reads.insert(tid, read);
    }

    /// This pass's stack of one thread with its native part when one matched, else its Python
    /// stack.
    pub fn stack_id(
        &mut self,
        interp: &Interpreter,
        tables: &mut Interner,
        tid: i32,
        stack: &Stack,
        blocked: bool,
    ) -> u32 {
        let Some(&(start_ns, end_ns, run_ns_before, top)) = self.pass_reads.get(&tid) else {
            return stack.id;
        };
        let read = PyRead {
            frames: Arc::clone(&stack.frames),
            ends: Arc::clone(&stack.ends),
            top,
            start_ns,
            end_ns,
            run_ns_before,
            stack_id: stack.id,
        };
        let Some(mixed) = self.recorder.match_thread(interp, tid, read, blocked) else {
            return stack.id;
        };
        self.mixed_id(tables, tid, mixed)
    }

    /// The C stack of a thread without a Python stack this pass, interned, or None. `torn`: threads
    /// whose Python stack could not be read (not threads without one).
    pub fn bare_stack_id(
        &mut self,
        interp: &Interpreter,
        tables: &mut Interner,
        torn: &[i32],
        tid: i32,
        blocked: bool,
    ) -> Option<u32> {
        if torn.contains(&tid) {
            self.recorder.forget(tid);
            return None;
        }
        let mixed = self.recorder.bare_thread(interp, tid, blocked)?;
        Some(self.mixed_id(tables, tid, mixed))
    }

    fn mixed_id(&mut self, tables: &mut Interner, tid: i32, mixed: Arc<Mixed>) -> u32 {
        if let Some((m, id)) = self.mixed_ids.get(&tid) {
            if Arc::ptr_eq(m, &mixed) {
                return *id;
            }
        }
        let frames: Vec<Frame> = mixed.0.iter().map(as_frame).collect();
        let id = tables.stack(&frames, &[]);
        self.mixed_ids.insert(tid, (mixed, id));
        id
    }

    /// The counters grown since the last call: (now, as given before).
    pub fn take_counts(&mut self) -> (NativeCounts, NativeCounts) {
        let now = self.recorder.counts;
        (now, std::mem::replace(&mut self.given, now))
    }
}
