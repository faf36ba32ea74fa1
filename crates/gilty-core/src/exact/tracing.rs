//! Attaching the uprobes of exact mode to an interpreter and turning raw probe hits into events.

use super::{ExactRecorder, ExactSummary, TraceEvent, TraceKind};
use crate::clock::monotonic_ns;
use crate::error::{Error, ErrorKind};
use crate::interp::interpreter::Interpreter;
use gilty_trace::{inlined_sites, resolve, ProbeSpec, Reg, Tracer};
use std::thread::JoinHandle;

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
    DropInlined,
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
            let r = resolve(interp.pid, &interp.binary, name)
                .map_err(|e| Error::new(ErrorKind::ExactUnavailable, e.to_string()))?;
            if !ret {
                symbols.push(match &r.from_debug_file {
                    Some(f) => format!("{} ({f})", r.symbol),
                    None => r.symbol.clone(),
                });
            }
            // The collector's generation is its second argument (int, %esi) in 3.10–3.13's
            // gc_collect_main.
            let regs = match kind {
                TraceKindTemplate::GcEnter => vec![Reg::Si],
                TraceKindTemplate::GcReturn => vec![Reg::Ax],
                _ => vec![],
            };
            specs.push(ProbeSpec {
                name: format!("{name}{}", if ret { ":return" } else { "" }),
                target: r.target,
                ret,
                regs,
            });
            kinds.push(kind);
        }
        add_inlined_copies(interp, &mut specs, &mut kinds, &mut symbols)?;
        let tracer = Tracer::attach(interp.pid, &specs, RING_PAGES)
            .map_err(|e| Error::new(ErrorKind::ExactUnavailable, e.to_string()))?;
        let recorder = ExactRecorder::new(crate::clock::monotonic_ns());
        Ok(ExactTracing {
            tracer,
            kinds,
            recorder,
            late_seen: 0,
            symbols,
        })
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
            let Some(kind) = self.kinds.get(e.probe as usize) else {
                continue;
            };
            let kind = match kind {
                TraceKindTemplate::TakeEnter => TraceKind::TakeEnter,
                TraceKindTemplate::TakeReturn => TraceKind::TakeReturn,
                TraceKindTemplate::DropEnter => TraceKind::DropEnter,
                TraceKindTemplate::DropReturn => TraceKind::DropReturn,
                TraceKindTemplate::DropInlined => TraceKind::DropInlined,
                // 3.13 passes -1 for an automatic collection whose generation is chosen inside.
                TraceKindTemplate::GcEnter => {
                    let generation = e.regs[0] as u32 as i32 as i64;
                    TraceKind::GcEnter {
                        generation: (generation >= 0).then_some(generation),
                    }
                }
                // Py_ssize_t: objects collected + uncollectable (0 when 3.13 returns early).
                TraceKindTemplate::GcReturn => TraceKind::GcReturn {
                    collected: Some(e.regs[0] as i64),
                },
            };
            self.recorder.feed(&TraceEvent {
                tid: e.tid,
                t_ns: e.time_ns,
                kind,
            });
        }
    }

    pub fn lost(&self) -> u64 {
        self.tracer.lost()
    }

    pub fn threads_attached(&self) -> usize {
        self.tracer.threads_attached()
    }

    /// Figures since the previous window (or the start), tracing going on, and events lost.
    pub fn window(&mut self, interp: &Interpreter) -> (ExactSummary, u64) {
        let interval_ns = switch_interval_ns(interp);
        self.drain();
        (
            self.recorder.take_window(monotonic_ns(), interval_ns),
            self.lost(),
        )
    }

    /// Ends the trace: (summary, events lost by the kernel, threads attached), and the thread
    /// removing the probes (the kernel takes ~0.1 s each: that happens while the report is
    /// written).
    pub fn finish(mut self, interp: &Interpreter) -> ((ExactSummary, u64, usize), JoinHandle<()>) {
        self.drain();
        let interval_ns = switch_interval_ns(interp);
        let lost = self.lost();
        let threads = self.threads_attached();
        let end = monotonic_ns();
        let ExactTracing {
            tracer, recorder, ..
        } = self;
        let closing = tracer.close_in_background();
        ((recorder.finish(end, interval_ns), lost, threads), closing)
    }
}

/// The target's switch interval (5 ms when it cannot be read): what a hold is measured against.
fn switch_interval_ns(interp: &Interpreter) -> u64 {
    interp
        .switch_interval_s()
        .map(|s| (s * 1e9) as u64)
        .unwrap_or(5_000_000)
}

/// Entry probes on the copies of drop_gil that an LTO build inlined into its callers (Debian's 3.14
/// and 3.15 inline it into PyEval_SaveThread, the eval breaker's slow path, os.stat ...): without
/// them every release by a blocking call is missed. A take_gil or collector that was inlined cannot
/// be timed (no return to probe): refused, naming the callers. Without DWARF nothing is known of
/// inlining and the symbols alone are used, as they always were.
fn add_inlined_copies(
    interp: &Interpreter,
    specs: &mut Vec<ProbeSpec>,
    kinds: &mut Vec<TraceKindTemplate>,
    symbols: &mut [String],
) -> Result<(), Error> {
    let Ok(report) = inlined_sites(
        interp.pid,
        &interp.binary,
        &["take_gil", "drop_gil", "gc_collect_main"],
    ) else {
        return Ok(());
    };
    let callers = |f: &str| -> Vec<String> {
        let mut v: Vec<String> = report
            .sites
            .iter()
            .filter(|s| s.function == f)
            .map(|s| s.caller.clone())
            .collect();
        v.dedup();
        v
    };
    for f in ["take_gil", "gc_collect_main"] {
        let c = callers(f);
        if !c.is_empty() {
            return Err(Error::new(
                ErrorKind::ExactUnavailable,
                format!("exact mode needs {f}'s entry and return; in {} it is inlined into {} caller(s) ({}), which have no return to probe", interp.binary, c.len(), c.join(", ")),
            ));
        }
    }
    let drops: Vec<_> = report
        .sites
        .iter()
        .filter(|s| s.function == "drop_gil")
        .collect();
    if drops.is_empty() {
        return Ok(());
    }
    for s in &drops {
        specs.push(ProbeSpec {
            name: format!("drop_gil@{}", s.caller),
            target: s.target.clone(),
            ret: false,
            regs: vec![],
        });
        kinds.push(TraceKindTemplate::DropInlined);
    }
    if let Some(sym) = symbols.iter_mut().find(|s| s.starts_with("drop_gil")) {
        sym.push_str(&format!(
            " + {} inlined copies ({})",
            drops.len(),
            callers("drop_gil").join(", ")
        ));
    }
    Ok(())
}
