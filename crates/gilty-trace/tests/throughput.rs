//! Event rate at a high GIL switch rate, events lost, the target's slowdown while traced, and that
//! it recovers once the tracer is dropped.

mod common;

use std::time::{Duration, Instant};

use common::*;
use gilty_trace::{resolve, ProbeSpec, Tracer};

/// 1 MiB per thread: 32768 samples of 32 bytes, ~40 ms of the busiest workload here.
const PAGES: usize = 256;

fn rates(t: &Target, skip: usize) -> Vec<f64> {
    t.lines_with("rate ")
        .iter()
        .skip(skip)
        .map(|l| l[5..].parse().unwrap())
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

#[test]
fn throughput_and_overhead() {
    let Some((version, py)) = VERSIONS
        .iter()
        .rev()
        .find_map(|v| python(v).map(|p| (*v, p)))
    else {
        println!("SKIP throughput: no interpreter installed");
        return;
    };
    // Two spinners contending for the GIL with a 20 us switch interval.
    measure(version, &py, 0.00002, "spin");
    // Two threads calling os.sched_yield(): every call drops and retakes the GIL, handing it over.
    measure(version, &py, 0.0, "yield");
    // One thread calling os.sched_yield(): no contention, so the slowdown is the price of the
    // uprobes.
    measure(version, &py, 0.0, "yield_single");
}

fn measure(version: &str, py: &std::path::PathBuf, switch: f64, workload: &str) {
    let target = Target::start_with(py, switch, 30.0, workload);
    let lib = target.libpython(version);
    let take = resolve(target.pid, &lib, "take_gil").unwrap().target;
    let take_byte = target.text_byte(&lib, take.offset);
    let drop_gil = resolve(target.pid, &lib, "drop_gil").unwrap().target;
    let specs = vec![
        ProbeSpec {
            name: "take".into(),
            target: take.clone(),
            ret: false,
            regs: vec![],
        },
        ProbeSpec {
            name: "take_ret".into(),
            target: take,
            ret: true,
            regs: vec![],
        },
        ProbeSpec {
            name: "drop".into(),
            target: drop_gil,
            ret: false,
            regs: vec![],
        },
    ];
    std::thread::sleep(Duration::from_millis(1300));
    let n0 = target.lines_with("rate ").len();
    let before = median(rates(&target, 1));

    let mut tracer = Tracer::attach(target.pid, &specs, PAGES).unwrap();
    let start = Instant::now();
    let mut n = 0usize;
    let mut max_batch = 0usize;
    let mut poll_ns_max = 0u128;
    // 2 s, longer on a busy machine (which slows the target) until 2,000 events came (15 s at
    // most).
    while start.elapsed() < Duration::from_secs(2)
        || (n < 2000 && start.elapsed() < Duration::from_secs(15))
    {
        std::thread::sleep(Duration::from_millis(10));
        let t = Instant::now();
        let b = tracer.poll();
        poll_ns_max = poll_ns_max.max(t.elapsed().as_nanos());
        max_batch = max_batch.max(b.len());
        n += b.len();
    }
    let secs = start.elapsed().as_secs_f64();
    let n1 = target.lines_with("rate ").len();
    let during = median(rates(&target, n0 + 1)[..(n1 - n0).saturating_sub(1)].to_vec());
    let lost = tracer.lost();
    assert_eq!(
        target.text_byte(&lib, specs[0].target.offset),
        0xCC,
        "no breakpoint while traced"
    );
    let t = Instant::now();
    drop(tracer);
    let drop_s = t.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(1300));
    let after = median(rates(&target, n1 + 1));

    println!(
        "{version} {workload}: {n} events in {secs:.2}s = {:.0} events/s (max {max_batch} per 10 ms poll, slowest poll {:.2} ms), \
         lost {lost} ({PAGES} pages per ring); spinner iterations/s before {before:.0}, traced {during:.0} ({:.0}%), after drop {after:.0} \
         ({:.0}%); drop took {drop_s:.2}s",
        n as f64 / secs,
        poll_ns_max as f64 / 1e6,
        100.0 * during / before,
        100.0 * after / before,
    );
    assert!(n >= 2000, "only {n} events in {secs:.1} s");
    // The rates are informative only (the machine may be shared); that the probes are gone is
    // checked exactly: the breakpoint byte is restored.
    assert_eq!(
        target.text_byte(&lib, specs[0].target.offset),
        take_byte,
        "breakpoint left after drop"
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "  (load average during the measurement: {})",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}
