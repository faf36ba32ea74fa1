//! A stripped interpreter without its debug file: `resolve` must say so in one actionable line.

use gilty_trace::{resolve, ProbeSpec, TraceError, Tracer};
use std::time::{Duration, Instant};

#[test]
fn debian_python_without_debug_symbols() {
    let path = "/usr/bin/python3.11";
    if !std::path::Path::new(path).exists() {
        println!("SKIP {path}: not installed");
        return;
    }
    let debug_root = "/usr/lib/debug/.build-id";
    let me = std::process::id() as i32;
    match resolve(me, path, "take_gil") {
        Err(e @ TraceError::SymbolNotFound { .. }) => {
            let msg = e.to_string();
            println!("{msg}");
            assert_eq!(
                msg,
                "exact mode needs the symbol take_gil in /usr/bin/python3.11 (stripped, no debug info found); \
                 install debug symbols or use sampling"
            );
            assert!(!msg.contains('\n'));
        }
        Ok(r) => {
            // Only acceptable if someone installed the debug file.
            assert!(
                r.from_debug_file.is_some(),
                "take_gil found in a stripped file? {r:?}"
            );
            println!(
                "SKIP {path}: debug symbols are installed ({:?}, under {debug_root})",
                r.from_debug_file
            );
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
    // A dynamic symbol of the same stripped file still resolves (from .dynsym), non-PIE offsets
    // included.
    let r = resolve(me, path, "PyEval_SaveThread").expect("PyEval_SaveThread is exported");
    assert_eq!(r.symbol, "PyEval_SaveThread");
    assert!(r.from_debug_file.is_none());
    println!(
        "PyEval_SaveThread in {path}: file offset {:#x}",
        r.target.offset
    );

    // End to end on the non-PIE executable (file offset != vaddr): probe it in a live process.
    let mut child = std::process::Command::new(path)
        .args(["-c", "import time\nwhile True: time.sleep(0.005)"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let pid = child.id() as i32;
    let r = resolve(pid, path, "PyEval_SaveThread").unwrap();
    let spec = ProbeSpec {
        name: "save".into(),
        target: r.target,
        ret: false,
        regs: vec![],
    };
    let fds_before = std::fs::read_dir("/proc/self/fd").unwrap().count();
    let mut tracer = Tracer::attach(pid, &[spec], 8).unwrap();
    let start = Instant::now();
    let mut n = 0;
    // 0.3 s, longer on a busy machine until the loop has slept ten times (10 s at most).
    while start.elapsed() < Duration::from_millis(300)
        || (n < 10 && start.elapsed() < Duration::from_secs(10))
    {
        std::thread::sleep(Duration::from_millis(20));
        n += tracer.poll().iter().filter(|e| e.tid == pid).count();
    }
    // The non-blocking teardown: sampling stops at once, the fds close in the background.
    tracer.close_in_background().join().unwrap();
    assert_eq!(
        std::fs::read_dir("/proc/self/fd").unwrap().count(),
        fds_before,
        "fds leaked"
    );
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "PyEval_SaveThread calls seen in {:.2} s: {n}",
        start.elapsed().as_secs_f64()
    );
    assert!(
        n >= 10,
        "only {n} PyEval_SaveThread events from a process sleeping in a loop"
    );
}
