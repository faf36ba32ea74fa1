//! Named probes (tracefs + keeper): the int3s leave the target as soon as the tracer is dropped,
//! the drop does not wait for the kernel's slow probe removal (compared with the uprobe PMU path on
//! the same target, in the same test), and the keeper deletes the definitions and exits afterwards
//! (or the tracer does, when the keeper was killed).
//! One #[test]: it sets the environment variable that forces the PMU path.

mod common;

use std::time::{Duration, Instant};

use common::*;
use gilty_trace::{resolve, ProbeKind, ProbeSpec, Tracer, FORCE_PMU_ENV};

const UPROBE_EVENTS: &str = "/sys/kernel/tracing/uprobe_events";
/// A hang, not a measure: failing deadline only.
const HANG: Duration = Duration::from_secs(60);

fn my_definitions() -> usize {
    let prefix = format!("gilty_{}_", std::process::id());
    std::fs::read_to_string(UPROBE_EVENTS)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.get(2..).is_some_and(|r| r.starts_with(&prefix)))
        .count()
}

/// Alive and not a zombie (the keeper is reparented to init, which reaps it in its own time).
fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().next())
            .is_some_and(|st| st != "Z" && st != "X"),
        Err(_) => false,
    }
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(t.elapsed() < HANG, "{what}: not within {HANG:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn named_probes_leave_at_once_and_are_deleted_by_the_keeper() {
    if !std::path::Path::new("/sys/bus/event_source/devices/uprobe/type").exists()
        || unsafe { libc::geteuid() } != 0
    {
        println!("SKIP: needs root and the uprobe PMU");
        return;
    }
    let Some(py) = python("3.12.1") else {
        println!("SKIP: pyenv 3.12.1 not installed");
        return;
    };
    let target = Target::start(&py, 0.0, 60.0);
    let lib = target.libpython("3.12.1");
    let take = resolve(target.pid, &lib, "take_gil")
        .expect("take_gil")
        .target;
    let drop_gil = resolve(target.pid, &lib, "drop_gil")
        .expect("drop_gil")
        .target;
    let specs = vec![
        ProbeSpec {
            name: "take_gil".into(),
            target: take.clone(),
            ret: false,
            regs: vec![],
        },
        ProbeSpec {
            name: "take_gil:return".into(),
            target: take.clone(),
            ret: true,
            regs: vec![],
        },
        ProbeSpec {
            name: "drop_gil".into(),
            target: drop_gil.clone(),
            ret: false,
            regs: vec![],
        },
    ];
    let original = (
        target.text_byte(&lib, take.offset),
        target.text_byte(&lib, drop_gil.offset),
    );
    assert_ne!(original.0, 0xCC);

    // Reference: the uprobe PMU, one private probe per event.
    std::env::set_var(FORCE_PMU_ENV, "1");
    let tracer = Tracer::attach(target.pid, &specs, 16).expect("attach (PMU)");
    std::env::remove_var(FORCE_PMU_ENV);
    assert!(matches!(tracer.probe_kind(), ProbeKind::Pmu(_)));
    let events = tracer.threads_attached() * specs.len();
    let t = Instant::now();
    drop(tracer);
    let pmu_drop = t.elapsed();

    let mut tracer = Tracer::attach(target.pid, &specs, 16).expect("attach (named)");
    if let ProbeKind::Pmu(why) = tracer.probe_kind() {
        assert!(
            !std::path::Path::new(UPROBE_EVENTS).exists(),
            "tracefs is there, yet the uprobe PMU was used: {why}"
        );
        println!("SKIP: no named probes here: {why}");
        return;
    }
    let keeper = tracer.keeper_pid().expect("a keeper with named probes");
    assert!(running(keeper));
    assert_eq!(
        my_definitions(),
        specs.len(),
        "{}",
        std::fs::read_to_string(UPROBE_EVENTS).unwrap()
    );
    assert_eq!(target.text_byte(&lib, take.offset), 0xCC);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !tracer.poll().is_empty() || tracer.events_seen() > 0,
        "no event from a spinning target"
    );
    let t = Instant::now();
    drop(tracer);
    let named_drop = t.elapsed();
    // The target's breakpoints are gone once the drop returns, with no wait for the kernel.
    assert_eq!(
        (
            target.text_byte(&lib, take.offset),
            target.text_byte(&lib, drop_gil.offset)
        ),
        original
    );
    let per_event = pmu_drop / events as u32;
    println!(
        "drop: PMU {pmu_drop:?} for {events} events ({per_event:?} each), named {named_drop:?}"
    );
    assert!(
        named_drop < per_event * (events / specs.len()) as u32,
        "named drop {named_drop:?}; PMU {per_event:?} an event"
    );
    // The keeper then removes the probes (one slow removal each) and exits.
    wait_for("definitions deleted", || my_definitions() == 0);
    wait_for("keeper exited", || !running(keeper));

    // A killed keeper: the tracer deletes the definitions itself when dropped.
    let tracer = Tracer::attach(target.pid, &specs, 16).expect("attach (named, second)");
    let keeper = tracer.keeper_pid().expect("a keeper");
    assert_eq!(my_definitions(), specs.len());
    unsafe { libc::kill(keeper, libc::SIGKILL) };
    wait_for("keeper killed", || !running(keeper));
    drop(tracer);
    assert_eq!(
        my_definitions(),
        0,
        "{}",
        std::fs::read_to_string(UPROBE_EVENTS).unwrap()
    );
    assert_eq!(
        (
            target.text_byte(&lib, take.offset),
            target.text_byte(&lib, drop_gil.offset)
        ),
        original
    );
}
