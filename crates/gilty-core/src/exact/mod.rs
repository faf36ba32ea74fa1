//! Exact GIL and GC accounting from traced events (uprobes on take_gil, drop_gil and the
//! collector): every wait and hold interval per thread, their distributions, who held the GIL
//! during each wait, and every garbage collection. Pure: fed events in time order, it never touches
//! the target.

pub mod histogram;
pub mod tracing;

use histogram::{distribution, Distribution};
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceKind {
    /// A thread entered take_gil: it starts waiting (or takes a free GIL at once).
    TakeEnter,
    /// take_gil returned: the thread holds the GIL.
    TakeReturn,
    /// drop_gil entered: the thread's hold ends.
    DropEnter,
    /// drop_gil returned. A holder asked to drop waits inside until the requester has the GIL
    /// (FORCE_SWITCHING in Python/ceval_gil.c): entry to return is that handoff.
    DropReturn,
    /// The entry of a copy of drop_gil inlined into a caller (PyEval_SaveThread in LTO builds): the
    /// hold ends; such a copy has no return to time the handoff by.
    DropInlined,
    GcEnter {
        generation: Option<i64>,
    },
    GcReturn {
        collected: Option<i64>,
    },
}

#[derive(Debug, Clone, Copy)]
pub struct TraceEvent {
    pub tid: i32,
    pub t_ns: u64,
    pub kind: TraceKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    pub tid: i32,
    pub start: u64,
    pub end: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcCollection {
    pub tid: i32,
    pub generation: Option<i64>,
    pub start_ns: u64,
    pub end_ns: u64,
    pub collected: Option<i64>,
    /// Still running when the record ended.
    pub open: bool,
}

#[derive(Debug, Clone, Default)]
pub struct BlameEntry {
    pub holder_tid: i32,
    pub wait_ns: u64,
    /// (frame id of the holder's innermost frame in samples taken during the overlap, count).
    pub functions: Vec<(u32, u64)>,
}

#[derive(Debug, Clone, Default)]
pub struct ThreadExact {
    pub tid: i32,
    pub hold: Distribution,
    pub wait: Distribution,
    /// Time inside drop_gil (handing the GIL over), total ns.
    pub handoff_ns: u64,
    /// Time inside take_gil while no other thread held the GIL, total ns: not a wait for the GIL
    /// but for a CPU to run on (or the hand-over itself). Left out of `wait`.
    pub wait_unheld_ns: u64,
    pub acquisitions: u64,
    pub forced_switches: u64,
    pub blame: Vec<BlameEntry>,
}

#[derive(Debug, Clone, Default)]
pub struct ExactSummary {
    pub wall_ns: u64,
    pub start_ns: u64,
    pub events: u64,
    pub threads: Vec<ThreadExact>,
    pub collections: Vec<GcCollection>,
    pub gc_by_generation: Vec<(Option<i64>, Distribution)>,
}

#[derive(Default)]
struct OpenState {
    seen: bool,
    /// When tracing of this thread began, if after the recorder's start (a thread found late).
    covered_from: Option<u64>,
    wait_start: Option<u64>,
    hold_start: Option<u64>,
    drop_start: Option<u64>,
    handoff_ns: u64,
    gc: Option<(u64, Option<i64>)>,
    acquisitions: u64,
}

/// Accumulates intervals from events as they arrive.
pub struct ExactRecorder {
    start_ns: u64,
    threads: HashMap<i32, OpenState>,
    waits: Vec<Interval>,
    holds: Vec<Interval>,
    acquisitions: Vec<u64>,
    collections: Vec<GcCollection>,
    holder_samples: Vec<(u64, i32, u32)>,
    events: u64,
    /// The thread that held the GIL when the probes went in (read from the GIL struct).
    holder_at_start: Option<i32>,
}

impl ExactRecorder {
    pub fn new(start_ns: u64) -> Self {
        ExactRecorder {
            start_ns,
            threads: HashMap::new(),
            waits: Vec::new(),
            holds: Vec::new(),
            acquisitions: Vec::new(),
            collections: Vec::new(),
            holder_samples: Vec::new(),
            events: 0,
            holder_at_start: None,
        }
    }

    /// Tracing starts now (the probes are in); `holder` held the GIL at that moment, if anyone did.
    pub fn start_at(&mut self, start_ns: u64, holder: Option<i32>) {
        self.start_ns = start_ns;
        self.holder_at_start = holder;
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    /// The thread's probes went in at `t_ns`: an interval open at its first event began no earlier.
    pub fn covered_from(&mut self, tid: i32, t_ns: u64) {
        self.threads.entry(tid).or_default().covered_from = Some(t_ns);
    }

    pub fn feed(&mut self, ev: &TraceEvent) {
        self.events += 1;
        // The probes are enabled just before the start is read: their first events may be a little
        // older.
        self.start_ns = self.start_ns.min(ev.t_ns);
        let held_at_start = self.holder_at_start == Some(ev.tid);
        let st = self.threads.entry(ev.tid).or_default();
        let start = st.covered_from.unwrap_or(self.start_ns).max(self.start_ns);
        // A thread's first event may end an interval that began before the probes went in. A return
        // probe only fires for calls entered after it was armed, so a thread that was inside
        // take_gil at attach shows up first with drop_gil: its hold began at an unknown time. Only
        // the thread seen holding the GIL at attach is known to have held it since the start.
        let first = !st.seen;
        st.seen = true;
        match ev.kind {
            TraceKind::TakeEnter => {
                if let Some(h) = st.hold_start.take() {
                    // A drop_gil event was lost; the hold ended no later than now.
                    self.holds.push(Interval {
                        tid: ev.tid,
                        start: h,
                        end: ev.t_ns,
                    });
                }
                st.wait_start = Some(ev.t_ns);
            }
            TraceKind::TakeReturn => {
                if let Some(ws) = st.wait_start.take() {
                    self.waits.push(Interval {
                        tid: ev.tid,
                        start: ws,
                        end: ev.t_ns,
                    });
                }
                st.hold_start = Some(ev.t_ns);
                st.acquisitions += 1;
                self.acquisitions.push(ev.t_ns);
            }
            TraceKind::DropEnter => {
                let hs = st.hold_start.take().or(if first && held_at_start {
                    Some(start)
                } else {
                    None
                });
                if let Some(hs) = hs {
                    self.holds.push(Interval {
                        tid: ev.tid,
                        start: hs,
                        end: ev.t_ns,
                    });
                }
                st.drop_start = Some(ev.t_ns);
            }
            TraceKind::DropInlined => {
                let hs = st.hold_start.take().or(if first && held_at_start {
                    Some(start)
                } else {
                    None
                });
                if let Some(hs) = hs {
                    self.holds.push(Interval {
                        tid: ev.tid,
                        start: hs,
                        end: ev.t_ns,
                    });
                }
            }
            TraceKind::DropReturn => {
                if let Some(ds) = st.drop_start.take() {
                    st.handoff_ns += ev.t_ns.saturating_sub(ds);
                }
            }
            TraceKind::GcEnter { generation } => st.gc = Some((ev.t_ns, generation)),
            TraceKind::GcReturn { collected } => {
                let started = st.gc.take().or(if first && held_at_start {
                    Some((start, None))
                } else {
                    None
                });
                if let Some((s, generation)) = started {
                    self.collections.push(GcCollection {
                        tid: ev.tid,
                        generation,
                        start_ns: s,
                        end_ns: ev.t_ns,
                        collected,
                        open: false,
                    });
                }
            }
        }
    }

    /// Records which thread held the GIL in a sample and its innermost frame (for blame by
    /// function).
    pub fn note_holder_sample(&mut self, t_ns: u64, tid: i32, frame: u32) {
        self.holder_samples.push((t_ns, tid, frame));
    }

    /// Summary of everything up to `end_ns`; recording goes on from there with the open waits,
    /// holds and collections carried over (for a live view that shows one window at a time).
    pub fn take_window(&mut self, end_ns: u64, switch_interval_ns: u64) -> ExactSummary {
        let mut next = ExactRecorder::new(end_ns);
        for (&tid, st) in &self.threads {
            let carried = OpenState {
                seen: true,
                covered_from: None,
                wait_start: st.wait_start.map(|_| end_ns),
                hold_start: st.hold_start.map(|_| end_ns),
                drop_start: st.drop_start.map(|_| end_ns),
                handoff_ns: 0,
                gc: st.gc.map(|(_, g)| (end_ns, g)),
                acquisitions: 0,
            };
            next.threads.insert(tid, carried);
        }
        std::mem::replace(self, next).finish(end_ns, switch_interval_ns)
    }

    pub fn finish(mut self, end_ns: u64, switch_interval_ns: u64) -> ExactSummary {
        let mut per_thread: BTreeMap<i32, ThreadExact> = BTreeMap::new();
        for (&tid, st) in self.threads.iter_mut() {
            if let Some(h) = st.hold_start.take() {
                self.holds.push(Interval {
                    tid,
                    start: h,
                    end: end_ns.max(h),
                });
            }
            if let Some(w) = st.wait_start.take() {
                self.waits.push(Interval {
                    tid,
                    start: w,
                    end: end_ns.max(w),
                });
            }
            if let Some((s, generation)) = st.gc.take() {
                self.collections.push(GcCollection {
                    tid,
                    generation,
                    start_ns: s,
                    end_ns: end_ns.max(s),
                    collected: None,
                    open: true,
                });
            }
            if let Some(d) = st.drop_start.take() {
                st.handoff_ns += end_ns.saturating_sub(d);
            }
            per_thread.insert(
                tid,
                ThreadExact {
                    tid,
                    acquisitions: st.acquisitions,
                    handoff_ns: st.handoff_ns,
                    ..Default::default()
                },
            );
        }
        self.holds.sort_by_key(|i| (i.start, i.end));
        self.waits.sort_by_key(|i| (i.start, i.end));
        self.acquisitions.sort_unstable();
        self.holder_samples.sort_unstable_by_key(|s| s.0);
        self.collections.sort_by_key(|c| c.start_ns);

        let mut holds_by: HashMap<i32, Vec<u64>> = HashMap::new();
        for h in &self.holds {
            holds_by.entry(h.tid).or_default().push(h.end - h.start);
        }
        // A wait counts while another thread holds the GIL: time in take_gil with the GIL free is
        // the waiter not yet running (no CPU for it), which on a starved host can be most of the
        // wait.
        let mut waits_by: HashMap<i32, Vec<u64>> = HashMap::new();
        let mut unheld_by: HashMap<i32, u64> = HashMap::new();
        for w in &self.waits {
            let held = held_by_others(w, &self.holds);
            waits_by.entry(w.tid).or_default().push(held);
            *unheld_by.entry(w.tid).or_default() += (w.end - w.start).saturating_sub(held);
        }
        let blame = blame(&self.waits, &self.holds, &self.holder_samples);
        let forced = forced_switches(&self.waits, &self.acquisitions, switch_interval_ns);
        for (tid, t) in per_thread.iter_mut() {
            t.hold = distribution(holds_by.remove(tid).unwrap_or_default());
            t.wait = distribution(waits_by.remove(tid).unwrap_or_default());
            t.wait_unheld_ns = unheld_by.get(tid).copied().unwrap_or(0);
            t.forced_switches = forced.get(tid).copied().unwrap_or(0);
            t.blame = blame.get(tid).cloned().unwrap_or_default();
        }
        let mut by_gen: BTreeMap<Option<i64>, Vec<u64>> = BTreeMap::new();
        for c in &self.collections {
            by_gen
                .entry(c.generation)
                .or_default()
                .push(c.end_ns - c.start_ns);
        }
        ExactSummary {
            wall_ns: end_ns.saturating_sub(self.start_ns),
            start_ns: self.start_ns,
            events: self.events,
            threads: per_thread.into_values().collect(),
            collections: self.collections,
            gc_by_generation: by_gen
                .into_iter()
                .map(|(g, d)| (g, distribution(d)))
                .collect(),
        }
    }
}

/// Time within `w` during which another thread held the GIL (`holds` sorted, not overlapping).
fn held_by_others(w: &Interval, holds: &[Interval]) -> u64 {
    let mut i = holds.partition_point(|h| h.end <= w.start);
    let mut total = 0;
    while i < holds.len() && holds[i].start < w.end {
        let h = holds[i];
        i += 1;
        if h.tid != w.tid {
            total += w.end.min(h.end).saturating_sub(w.start.max(h.start));
        }
    }
    total
}

/// For every wait interval, the time each other thread held the GIL within it, and that holder's
/// sampled innermost frames during the overlap. `holds` sorted by start (they do not overlap).
fn blame(
    waits: &[Interval],
    holds: &[Interval],
    samples: &[(u64, i32, u32)],
) -> HashMap<i32, Vec<BlameEntry>> {
    // waiter -> holder -> (overlap ns, holder frame -> samples)
    type PerHolder = HashMap<i32, (u64, HashMap<u32, u64>)>;
    let mut acc: HashMap<i32, PerHolder> = HashMap::new();
    for w in waits {
        // First hold that ends after the wait starts (ends are ordered as holds do not overlap).
        let mut i = holds.partition_point(|h| h.end <= w.start);
        while i < holds.len() && holds[i].start < w.end {
            let h = holds[i];
            i += 1;
            if h.tid == w.tid {
                continue;
            }
            let (a, b) = (w.start.max(h.start), w.end.min(h.end));
            if b <= a {
                continue;
            }
            let entry = acc.entry(w.tid).or_default().entry(h.tid).or_default();
            entry.0 += b - a;
            let lo = samples.partition_point(|s| s.0 < a);
            let hi = samples.partition_point(|s| s.0 < b);
            for s in &samples[lo..hi] {
                if s.1 == h.tid {
                    *entry.1.entry(s.2).or_default() += 1;
                }
            }
        }
    }
    acc.into_iter()
        .map(|(waiter, holders)| {
            let mut v: Vec<BlameEntry> = holders
                .into_iter()
                .map(|(holder_tid, (wait_ns, fns))| {
                    let mut functions: Vec<(u32, u64)> = fns.into_iter().collect();
                    functions.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                    BlameEntry {
                        holder_tid,
                        wait_ns,
                        functions,
                    }
                })
                .collect();
            v.sort_by(|a, b| {
                b.wait_ns
                    .cmp(&a.wait_ns)
                    .then(a.holder_tid.cmp(&b.holder_tid))
            });
            (waiter, v)
        })
        .collect()
}

/// Forced switches a waiter asked for: take_gil waits on the GIL's condition for one switch
/// interval and, if the GIL did not change hands meanwhile, sets the drop request
/// (Python/ceval_gil.c). So each stretch of a wait at least one interval long without any
/// acquisition counts one request.
fn forced_switches(
    waits: &[Interval],
    acquisitions: &[u64],
    interval_ns: u64,
) -> HashMap<i32, u64> {
    let mut out: HashMap<i32, u64> = HashMap::new();
    if interval_ns == 0 {
        return out;
    }
    // Timed waits start a little after take_gil is entered; allow 2% for that.
    let threshold = interval_ns - interval_ns / 50;
    for w in waits {
        let lo = acquisitions.partition_point(|&a| a <= w.start);
        // A wait of no length whose acquisition is stamped at its start would give lo > hi.
        let hi = acquisitions.partition_point(|&a| a < w.end).max(lo);
        let mut last = w.start;
        let mut n = 0;
        for &a in &acquisitions[lo..hi] {
            n += (a - last) / threshold.max(1);
            last = a;
        }
        n += (w.end - last) / threshold.max(1);
        if n > 0 {
            *out.entry(w.tid).or_default() += n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(tid: i32, t: u64, kind: TraceKind) -> TraceEvent {
        TraceEvent { tid, t_ns: t, kind }
    }

    #[test]
    fn intervals_blame_and_forced_switches() {
        use TraceKind::*;
        let mut r = ExactRecorder::new(0);
        r.start_at(0, Some(1));
        // Thread 1 holds from before the trace until 10 ms; thread 2 waits 2..10 ms, holds 10..11
        // ms.
        for e in [
            ev(2, 2_000_000, TakeEnter),
            ev(1, 10_000_000, DropEnter),
            ev(2, 10_000_000, TakeReturn),
            ev(1, 10_500_000, TakeEnter),
            ev(2, 11_000_000, DropEnter),
            ev(1, 11_000_000, TakeReturn),
        ] {
            r.feed(&e);
        }
        r.note_holder_sample(5_000_000, 1, 7);
        r.note_holder_sample(6_000_000, 1, 7);
        r.note_holder_sample(6_500_000, 2, 9); // a sample that disagrees: not counted for holder 1
        let s = r.finish(12_000_000, 5_000_000);
        let t1 = s.threads.iter().find(|t| t.tid == 1).unwrap();
        let t2 = s.threads.iter().find(|t| t.tid == 2).unwrap();
        // Thread 1: holds 0..10 and 11..12 (open at the end); waits 10.5..11.
        assert_eq!(t1.hold.total_ns, 11_000_000);
        assert_eq!(t1.wait.total_ns, 500_000);
        assert_eq!(t1.acquisitions, 1);
        assert_eq!(t2.wait.total_ns, 8_000_000);
        assert_eq!(t2.hold.total_ns, 1_000_000);
        // Thread 2 waited 8 ms with no switch: one forced-switch request (5 ms interval).
        assert_eq!(t2.forced_switches, 1);
        assert_eq!(t1.forced_switches, 0);
        assert_eq!(t2.blame.len(), 1);
        assert_eq!(t2.blame[0].holder_tid, 1);
        assert_eq!(t2.blame[0].wait_ns, 8_000_000);
        assert_eq!(t2.blame[0].functions, vec![(7, 2)]);
        assert_eq!(t1.blame[0].holder_tid, 2);
        assert_eq!(t1.blame[0].wait_ns, 500_000);
    }

    #[test]
    fn time_in_take_gil_with_the_gil_free_is_not_a_wait_for_it() {
        use TraceKind::*;
        let mut r = ExactRecorder::new(0);
        r.start_at(0, None);
        // One thread: it drops the GIL at 1 ms, enters take_gil at 2 ms and, with no CPU, gets it
        // at 9 ms. Nobody else held it: no wait for the GIL.
        for e in [
            ev(1, 0, TakeEnter),
            ev(1, 0, TakeReturn),
            ev(1, 1_000_000, DropEnter),
            ev(1, 1_000_100, DropReturn),
            ev(1, 2_000_000, TakeEnter),
            ev(1, 9_000_000, TakeReturn),
        ] {
            r.feed(&e);
        }
        let s = r.finish(10_000_000, 5_000_000);
        let t1 = s.threads.iter().find(|t| t.tid == 1).unwrap();
        assert_eq!(t1.wait.total_ns, 0);
        assert_eq!(t1.wait.max_ns, 0);
        assert_eq!(t1.wait_unheld_ns, 7_000_000);
    }

    #[test]
    fn no_hold_is_invented_for_a_thread_that_was_waiting_at_attach() {
        use TraceKind::*;
        let mut r = ExactRecorder::new(0);
        r.start_at(0, Some(1));
        // Thread 2 was inside take_gil at attach: its first event is drop_gil after a 1 ms hold.
        r.feed(&ev(1, 5_000_000, DropEnter));
        r.feed(&ev(2, 6_000_000, DropEnter));
        r.feed(&ev(2, 6_000_100, DropReturn));
        let s = r.finish(10_000_000, 5_000_000);
        let t1 = s.threads.iter().find(|t| t.tid == 1).unwrap();
        let t2 = s.threads.iter().find(|t| t.tid == 2).unwrap();
        assert_eq!(t1.hold.total_ns, 5_000_000);
        assert_eq!(t2.hold.total_ns, 0);
        assert_eq!(t2.handoff_ns, 100);
    }

    #[test]
    fn an_inlined_drop_ends_the_hold_without_a_handoff() {
        use TraceKind::*;
        let mut r = ExactRecorder::new(0);
        r.start_at(0, None);
        // A blocking call releases through the copy of drop_gil inlined into PyEval_SaveThread.
        for e in [
            ev(1, 0, TakeEnter),
            ev(1, 100, TakeReturn),
            ev(1, 1_000, DropInlined),
            ev(1, 5_000, TakeEnter),
            ev(1, 5_100, TakeReturn),
        ] {
            r.feed(&e);
        }
        let s = r.finish(6_000, 5_000_000);
        let t1 = &s.threads[0];
        assert_eq!(t1.hold.total_ns, 900 + 900);
        assert_eq!(t1.hold.count, 2);
        assert_eq!(t1.handoff_ns, 0);
        assert_eq!(t1.acquisitions, 2);
    }

    #[test]
    fn windows_carry_open_intervals_over() {
        use TraceKind::*;
        let mut r = ExactRecorder::new(0);
        r.feed(&ev(1, 0, TakeEnter));
        r.feed(&ev(1, 1_000, TakeReturn));
        let w1 = r.take_window(10_000, 5_000_000);
        r.feed(&ev(1, 15_000, DropEnter));
        let w2 = r.take_window(20_000, 5_000_000);
        assert_eq!(w1.threads[0].hold.total_ns, 9_000);
        // Its 1 µs in take_gil had nobody holding the GIL: not a wait for it.
        assert_eq!(w1.threads[0].wait.total_ns, 0);
        assert_eq!(w1.threads[0].wait_unheld_ns, 1_000);
        assert_eq!(w2.threads[0].hold.total_ns, 5_000);
        assert_eq!(w2.wall_ns, 10_000);
    }

    #[test]
    fn gc_collections_by_generation() {
        use TraceKind::*;
        let mut r = ExactRecorder::new(0);
        r.feed(&ev(
            3,
            100,
            GcEnter {
                generation: Some(0),
            },
        ));
        r.feed(&ev(3, 300, GcReturn { collected: Some(5) }));
        r.feed(&ev(
            3,
            1000,
            GcEnter {
                generation: Some(2),
            },
        ));
        let s = r.finish(5000, 5_000_000);
        assert_eq!(s.collections.len(), 2);
        assert_eq!(s.collections[0].collected, Some(5));
        assert_eq!(s.collections[0].end_ns - s.collections[0].start_ns, 200);
        assert!(s.collections[1].open);
        assert_eq!(s.gc_by_generation.len(), 2);
        assert_eq!(s.gc_by_generation[1].0, Some(2));
        assert_eq!(s.gc_by_generation[1].1.total_ns, 4000);
    }
}
