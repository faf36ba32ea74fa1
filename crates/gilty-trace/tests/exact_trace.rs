//! Exact tracing of real interpreters: take_gil / drop_gil / gc_collect_main uprobes on a live
//! target. One #[test] so nothing else in this binary opens fds while the fd count is compared.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use common::*;
use gilty_trace::{resolve, Event, ProbeSpec, Reg, Tracer};

const TAKE: u16 = 0;
const TAKE_RET: u16 = 1;
const DROP: u16 = 2;
const GC: u16 = 3;
const GC_RET: u16 = 4;

#[test]
fn exact_trace_real_interpreters() {
    if !std::path::Path::new("/sys/bus/event_source/devices/uprobe/type").exists() {
        println!("SKIP all: no uprobe PMU");
        return;
    }
    let mut ran = 0;
    for v in VERSIONS {
        match python(v) {
            None => println!("SKIP {v}: not installed"),
            Some(py) => {
                trace_one(v, &py);
                ran += 1;
            }
        }
    }
    println!("exact trace: {ran} interpreters traced");
}

fn trace_one(version: &str, py: &std::path::PathBuf) {
    let mut target = Target::start(py, 0.0, 30.0);
    let pid = target.pid;
    let lib = target.libpython(version);

    let sym = |name: &str| {
        let r = resolve(pid, &lib, name).unwrap_or_else(|e| panic!("{version}: {e}"));
        assert_eq!(r.symbol, name, "{version}: exact symbol expected");
        assert!(r.from_debug_file.is_none());
        r.target
    };
    let take = sym("take_gil");
    let drop_gil = sym("drop_gil");
    let gc = sym("gc_collect_main");
    let spec = |name: &str, t: &gilty_trace::ProbeTarget, ret: bool, regs: Vec<Reg>| ProbeSpec {
        name: name.into(),
        target: t.clone(),
        ret,
        regs,
    };
    let specs = vec![
        spec("take_gil", &take, false, vec![]),
        spec("take_gil_ret", &take, true, vec![]),
        spec("drop_gil", &drop_gil, false, vec![]),
        spec("gc_collect_main", &gc, false, vec![Reg::Si]),
        spec("gc_collect_main_ret", &gc, true, vec![Reg::Ax]),
    ];

    let original_byte = target.text_byte(&lib, take.offset);
    assert_ne!(
        original_byte, 0xCC,
        "{version}: take_gil already has a breakpoint before attach"
    );
    let fds_before = open_fds();
    let t0 = monotonic_ns();
    let started = Instant::now();
    let mut tracer =
        Tracer::attach(pid, &specs, 64).unwrap_or_else(|e| panic!("{version}: attach: {e}"));
    let attach_ms = started.elapsed().as_secs_f64() * 1e3;
    let initial_threads = tracer.threads_attached();
    assert!(
        initial_threads >= 4,
        "{version}: main + 3 threads expected, got {initial_threads}"
    );
    assert_eq!(
        target.text_byte(&lib, take.offset),
        0xCC,
        "{version}: no int3 at take_gil while attached"
    );

    // The late threads start once the marker appears, i.e. after attach: only the rescan can find
    // them.
    target.touch_marker();

    let mut events: Vec<Event> = Vec::new();
    let mut max_lag_ns = 0u64;
    let mut cross_poll_inversions = 0usize;
    let mut max_inversion_ns = 0u64;
    let mut last_delivered = 0u64;
    let mut per_tid_last: HashMap<i32, u64> = HashMap::new();
    let mut per_tid_regressions = 0usize;
    let poll_start = Instant::now();
    // At least 1 s, and until the target's collector (one gc.collect() per 50 ms) has run five
    // times: a busy machine slows the target, so the window follows its work, not the clock (10 s
    // at most).
    let mut gen2_seen = 0usize;
    while poll_start.elapsed() < Duration::from_secs(1)
        || (gen2_seen < 5 && poll_start.elapsed() < Duration::from_secs(10))
    {
        std::thread::sleep(Duration::from_millis(10));
        let batch = tracer.poll();
        let now = monotonic_ns();
        for w in batch.windows(2) {
            assert!(
                w[0].time_ns <= w[1].time_ns,
                "{version}: a poll's events are not sorted"
            );
        }
        for e in &batch {
            assert!(
                e.time_ns >= t0 && e.time_ns <= now,
                "{version}: event time {} outside [{t0}, {now}]",
                e.time_ns
            );
            max_lag_ns = max_lag_ns.max(now - e.time_ns);
            if e.time_ns < last_delivered {
                cross_poll_inversions += 1;
                max_inversion_ns = max_inversion_ns.max(last_delivered - e.time_ns);
            }
            let l = per_tid_last.entry(e.tid).or_insert(0);
            if e.time_ns < *l {
                per_tid_regressions += 1;
            }
            *l = e.time_ns;
        }
        if let Some(last) = batch.last() {
            last_delivered = last_delivered.max(last.time_ns);
        }
        gen2_seen += batch
            .iter()
            .filter(|e| e.probe == GC && e.regs[0] as u32 == 2)
            .count();
        events.extend(batch);
    }
    let traced_s = poll_start.elapsed().as_secs_f64();
    // One more drain so the short thread's exit is seen (it ran 0.1 s right after the marker).
    std::thread::sleep(Duration::from_millis(20));
    events.extend(tracer.poll());

    // ---- threads
    let tids: BTreeSet<i32> = events.iter().map(|e| e.tid).collect();
    assert!(
        tids.len() >= 3,
        "{version}: events from {} tids",
        tids.len()
    );
    let late_tid: i32 = target
        .wait_line("late ", Duration::from_secs(10))
        .expect("late thread started")[5..]
        .parse()
        .unwrap();
    let short_tid: i32 = target.wait_line("short ", Duration::from_secs(10)).unwrap()[6..]
        .parse()
        .unwrap();
    assert!(
        tids.contains(&late_tid),
        "{version}: late thread {late_tid} has no events (rescan failed)"
    );
    assert!(
        tids.contains(&short_tid),
        "{version}: short thread {short_tid} has no events"
    );
    let late: Vec<i32> = tracer.late_threads().iter().map(|(t, _)| *t).collect();
    assert!(
        late.contains(&late_tid) && late.contains(&short_tid),
        "{version}: late_threads {late:?}"
    );
    assert!(target
        .wait_line("short_done", Duration::from_secs(10))
        .is_some());
    // The short thread's exit reaches the tracer at a poll after it: drain until it is retired (a
    // busy machine may finish the thread's exit well after it printed), 5 s at most.
    let retire_start = Instant::now();
    while tracer.threads_live() + 1 != tracer.threads_attached()
        && retire_start.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(20));
        events.extend(tracer.poll());
    }
    assert_eq!(
        tracer.threads_live(),
        tracer.threads_attached() - 1,
        "{version}: the exited short thread should be retired"
    );
    assert_eq!(
        per_tid_regressions, 0,
        "{version}: a thread's (= a buffer's) timestamps went backwards"
    );

    // ---- take_gil pairs per thread
    let mut per_tid: BTreeMap<i32, [u64; 5]> = BTreeMap::new();
    for e in &events {
        per_tid.entry(e.tid).or_default()[e.probe as usize] += 1;
    }
    for (tid, c) in &per_tid {
        let d = c[TAKE as usize] as i64 - c[TAKE_RET as usize] as i64;
        assert!(
            d.abs() <= 1,
            "{version}: tid {tid} take_gil entries {} returns {}",
            c[TAKE as usize],
            c[TAKE_RET as usize]
        );
    }

    // ---- GC: generation in SI at entry (an int: low 32 bits), collected count in AX at return
    let printed: BTreeSet<i64> = target
        .lines_with("gc ")
        .iter()
        .map(|l| l[3..].trim().parse().unwrap())
        .collect();
    let mut gen_hist: BTreeMap<u32, usize> = BTreeMap::new();
    let mut open: HashMap<i32, u32> = HashMap::new();
    let mut gen2_results = Vec::new();
    for e in &events {
        match e.probe {
            GC => {
                let gen = e.regs[0] as u32;
                *gen_hist.entry(gen).or_default() += 1;
                open.insert(e.tid, gen);
            }
            GC_RET if open.remove(&e.tid) == Some(2) => gen2_results.push(e.regs[0] as i64),
            _ => {}
        }
    }
    let gc_entries: usize = gen_hist.values().sum();
    let gc_returns = events.iter().filter(|e| e.probe == GC_RET).count();
    assert!(
        gen_hist.get(&2).copied().unwrap_or(0) >= 5,
        "{version}: generation histogram {gen_hist:?}"
    );
    assert!(
        gc_returns + 1 >= gc_entries && gc_returns > 0,
        "{version}: {gc_entries} GC entries, {gc_returns} returns"
    );
    let matched = gen2_results.iter().filter(|r| printed.contains(r)).count();
    assert!(
        matched == gen2_results.len(),
        "{version}: gc_collect_main returned {gen2_results:?}, gc.collect() printed {printed:?}"
    );
    assert!(
        gen2_results.iter().all(|&r| r >= 100),
        "{version}: 100 self-cycles per call: {gen2_results:?}"
    );

    assert_eq!(tracer.lost(), 0, "{version}: lost events");
    let seen = tracer.events_seen();
    assert_eq!(seen as usize, events.len());

    // ---- teardown: every fd closed, breakpoint gone
    let attached = tracer.threads_attached();
    let started = Instant::now();
    drop(tracer);
    let drop_ms = started.elapsed().as_secs_f64() * 1e3;
    assert_eq!(open_fds(), fds_before, "{version}: fds leaked");
    assert_eq!(
        target.text_byte(&lib, take.offset),
        original_byte,
        "{version}: int3 left at take_gil after drop"
    );

    let count = |p: u16| events.iter().filter(|e| e.probe == p).count();
    println!(
        "{version}: {} events in {traced_s:.2}s ({:.0}/s) from {} tids ({} threads attached, {} late), lost 0; \
         take_gil {} / ret {}, drop_gil {}, gc entries by generation {gen_hist:?}, gen-2 results {:?}...; \
         max poll lag {:.2} ms, cross-poll inversions {cross_poll_inversions} (max {:.1} us); \
         attach {attach_ms:.1} ms, drop {drop_ms:.1} ms",
        events.len(),
        events.len() as f64 / traced_s,
        tids.len(),
        attached,
        late.len(),
        count(TAKE),
        count(TAKE_RET),
        count(DROP),
        &gen2_results[..gen2_results.len().min(3)],
        max_lag_ns as f64 / 1e6,
        max_inversion_ns as f64 / 1e3,
    );
}
