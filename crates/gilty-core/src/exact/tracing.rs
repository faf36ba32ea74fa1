//! Attaching the uprobes of exact mode to an interpreter and turning raw probe hits into events.

use super::{ExactRecorder, TraceEvent, TraceKind};
use crate::error::{Error, ErrorKind};
use crate::interpreter::Interpreter;
use gilty_trace::{resolve, ProbeSpec, Reg, Tracer};

/// Data pages per thread's ring buffer: 256 pages (1 MiB) hold ~25k events between two drains.
const RING_PAGES: usize = 256;

/// What each probe means, in the order the probes are attached.
const PROBES: &[(&str, bool, TraceKindTemplate)] = &[
    ("take_gil", false, TraceKindTemplate::TakeEnter),
    ("take_gil", true, TraceKindTemplate::TakeReturn),
    ("drop_gil", false, TraceKindTemplate::DropEnter),
    ("drop_gil", true, TraceKindTemplate::DropReturn),
    ("gc_collect_main", false, TraceKindTemplate::GcEnter),
    ("gc_collect_main", true, TraceKindTemplate::GcReturn),
];

#[derive(Clone, Copy)]
enum TraceKindTemplate {
    TakeEnter,
    TakeReturn,
    DropEnter,
    DropReturn,
    GcEnter,
    GcReturn,
}

pub struct ExactTracing {
    pub(crate) tracer: Tracer,
    kinds: Vec<TraceKindTemplate>,
    pub recorder: ExactRecorder,
    late_seen: usize,
    pub symbols: Vec<String>,
}

impl ExactTracing {
    /// Attaches the probes; the trace starts when they are all in, at `recorder`'s start.
    pub fn attach(interp: &Interpreter) -> Result<ExactTracing, Error> {
        let mut specs = Vec::new();
        let mut kinds = Vec::new();
        let mut symbols = Vec::new();
        for &(name, ret, kind) in PROBES {
            let r = resolve(interp.pid, &interp.binary, name).map_err(|e| Error::new(ErrorKind::ExactUnavailable, e.to_string()))?;
            if !ret {
                symbols.push(match &r.from_debug_file {
                    Some(f) => format!("{} ({f})", r.symbol),
                    None => r.symbol.clone(),
                });
            }
            // The collector's generation is its second argument (int, %esi) in 3.10–3.13's gc_collect_main.
            let regs = match kind {
                TraceKindTemplate::GcEnter => vec![Reg::Si],
                TraceKindTemplate::GcReturn => vec![Reg::Ax],
                _ => vec![],
            };
            specs.push(ProbeSpec { name: format!("{name}{}", if ret { ":return" } else { "" }), target: r.target, ret, regs });
            kinds.push(kind);
        }
        let tracer = Tracer::attach(interp.pid, &specs, RING_PAGES).map_err(|e| Error::new(ErrorKind::ExactUnavailable, e.to_string()))?;
        let recorder = ExactRecorder::new(crate::clock::monotonic_ns());
        Ok(ExactTracing { tracer, kinds, recorder, late_seen: 0, symbols })
    }

    /// Moves every event the kernel has written so far into the recorder.
    pub fn drain(&mut self) {
        let events = self.tracer.poll();
        // Threads that started after the attach are traced from when their probes went in.
        let late = self.tracer.late_threads();
        for &(tid, from_ns) in &late[self.late_seen..] {
            self.recorder.covered_from(tid, from_ns);
        }
        self.late_seen = late.len();
        for e in events {
            let Some(kind) = self.kinds.get(e.probe as usize) else { continue };
            let kind = match kind {
                TraceKindTemplate::TakeEnter => TraceKind::TakeEnter,
                TraceKindTemplate::TakeReturn => TraceKind::TakeReturn,
                TraceKindTemplate::DropEnter => TraceKind::DropEnter,
                TraceKindTemplate::DropReturn => TraceKind::DropReturn,
                // 3.13 passes -1 for an automatic collection whose generation is chosen inside.
                TraceKindTemplate::GcEnter => {
                    let generation = e.regs[0] as u32 as i32 as i64;
                    TraceKind::GcEnter { generation: (generation >= 0).then_some(generation) }
                }
                // Py_ssize_t: objects collected + uncollectable (0 when 3.13 returns early).
                TraceKindTemplate::GcReturn => TraceKind::GcReturn { collected: Some(e.regs[0] as i64) },
            };
            self.recorder.feed(&TraceEvent { tid: e.tid, t_ns: e.time_ns, kind });
        }
    }

    pub fn lost(&self) -> u64 {
        self.tracer.lost()
    }

    pub fn threads_attached(&self) -> usize {
        self.tracer.threads_attached()
    }
}
