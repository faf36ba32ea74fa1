//! Garbage-collection windows of several processes, from their `collecting` flag read at a high
//! rate (every millisecond by default) in a thread of its own.
//!
//! Each poll reads one process's whole GC state block (one `pread` of `/proc/PID/mem`, ~220 bytes,
//! see `gc_config` and `process::memory`), so besides the windows it sees the enabled flag, the
//! thresholds and the permanent generation change, and which generation a finished collection was
//! (the generation whose `collections` counter went up). A window is placed halfway between the
//! last poll that saw the flag clear and the first that saw it set (and likewise at its end), so
//! its ends are off by at most half a poll period; a collection shorter than the period can be
//! missed entirely (the collection counters show how many were).

use crate::clock::monotonic_ns;
use crate::clock::thread_cpu_ns;
use crate::interp::gc_config::{GcLocation, GcState};
use crate::process::memory::ProcessMemory;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

// `Changed` carries two states (~2x the other variants); events are few, so boxing would not pay.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcEvent {
    /// A collection started around `t_ns` (between the previous poll and `seen_ns`).
    Started { pid: i32, t_ns: u64, seen_ns: u64 },
    /// A collection ended. `generation` is the generation whose collection count went up.
    Ended {
        pid: i32,
        start_ns: u64,
        end_ns: u64,
        generation: Option<u8>,
        polls: u32,
    },
    /// The enabled flag, a threshold, or the permanent generation's list changed.
    Changed {
        pid: i32,
        t_ns: u64,
        before: GcState,
        after: GcState,
    },
    /// The GC state stopped being readable (the process exited).
    Lost { pid: i32, t_ns: u64 },
}

/// What the poller did, for the measurement-cost report.
#[derive(Debug, Clone, Copy, Default)]
pub struct PollerStats {
    pub period_ns: u64,
    pub passes: u64,
    pub reads: u64,
    pub read_errors: u64,
    /// Passes that started later than one period after the previous one.
    pub late_passes: u64,
    pub max_gap_ns: u64,
    pub elapsed_ns: u64,
    /// CPU time of the polling thread.
    pub cpu_ns: u64,
    pub windows: u64,
}

#[allow(clippy::large_enum_variant)]
enum Cmd {
    Add(GcLocation, GcState),
    Remove(i32),
}

struct Watched {
    loc: GcLocation,
    mem: ProcessMemory,
    last: GcState,
    last_poll_ns: u64,
    /// (start estimate, collections when it started, polls that saw it).
    window: Option<(u64, Option<[i64; 3]>, u32)>,
}

pub struct GcPoller {
    cmds: Sender<Cmd>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<PollerStats>>,
}

/// The generation whose collection counter went up the most (the oldest on a tie: a full
/// collection also counts as the collection of no other generation in 3.10–3.13).
fn collected_generation(before: Option<[i64; 3]>, after: Option<[i64; 3]>) -> Option<u8> {
    let (b, a) = (before?, after?);
    (0..3).rev().find(|&g| a[g] > b[g]).map(|g| g as u8)
}

impl GcPoller {
    /// Starts the polling thread; events go to `events`.
    pub fn start(period: Duration, events: Sender<GcEvent>) -> GcPoller {
        let (tx, rx) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("gilty-gc-poll".into())
            .spawn(move || poll_loop(period, rx, events, stop2))
            .expect("cannot start the GC polling thread");
        GcPoller {
            cmds: tx,
            stop,
            handle: Some(handle),
        }
    }

    /// Starts watching a process, whose GC state was just read as `initial`.
    pub fn add(&self, loc: GcLocation, initial: GcState) {
        let _ = self.cmds.send(Cmd::Add(loc, initial));
    }

    pub fn remove(&self, pid: i32) {
        let _ = self.cmds.send(Cmd::Remove(pid));
    }

    pub fn stop(mut self) -> PollerStats {
        self.finish()
    }

    fn finish(&mut self) -> PollerStats {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for GcPoller {
    fn drop(&mut self) {
        self.finish();
    }
}

fn poll_loop(
    period: Duration,
    cmds: Receiver<Cmd>,
    events: Sender<GcEvent>,
    stop: Arc<AtomicBool>,
) -> PollerStats {
    let started = Instant::now();
    let cpu0 = thread_cpu_ns();
    let mut stats = PollerStats {
        period_ns: period.as_nanos() as u64,
        ..PollerStats::default()
    };
    let mut watched: Vec<Watched> = Vec::new();
    let mut next = Instant::now();
    let mut last_pass: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        while let Ok(cmd) = cmds.try_recv() {
            match cmd {
                Cmd::Add(loc, initial) => {
                    watched.retain(|w| w.loc.pid != loc.pid);
                    let now = monotonic_ns();
                    let Ok(mem) = ProcessMemory::open(loc.pid) else {
                        let _ = events.send(GcEvent::Lost {
                            pid: loc.pid,
                            t_ns: now,
                        });
                        continue;
                    };
                    let window = initial.collecting.then_some((now, initial.collections, 1));
                    if initial.collecting {
                        let _ = events.send(GcEvent::Started {
                            pid: loc.pid,
                            t_ns: now,
                            seen_ns: now,
                        });
                    }
                    watched.push(Watched {
                        loc,
                        mem,
                        last: initial,
                        last_poll_ns: now,
                        window,
                    });
                }
                Cmd::Remove(pid) => watched.retain(|w| w.loc.pid != pid),
            }
        }
        let pass_start = Instant::now();
        if let Some(prev) = last_pass {
            let gap = (pass_start - prev).as_nanos() as u64;
            stats.max_gap_ns = stats.max_gap_ns.max(gap);
        }
        last_pass = Some(pass_start);
        stats.passes += 1;
        let mut lost = Vec::new();
        for w in watched.iter_mut() {
            stats.reads += 1;
            let state = match w.loc.read(&w.mem) {
                Ok(s) => s,
                Err(_) => {
                    stats.read_errors += 1;
                    lost.push(w.loc.pid);
                    continue;
                }
            };
            let now = monotonic_ns();
            let pid = w.loc.pid;
            let mid = w.last_poll_ns + (now - w.last_poll_ns.min(now)) / 2;
            match (w.last.collecting, state.collecting) {
                (false, true) => {
                    w.window = Some((mid, w.last.collections, 1));
                    let _ = events.send(GcEvent::Started {
                        pid,
                        t_ns: mid,
                        seen_ns: now,
                    });
                }
                (true, true) => {
                    if let Some(win) = w.window.as_mut() {
                        win.2 += 1;
                    }
                }
                (true, false) => {
                    let (start, before, polls) =
                        w.window.take().unwrap_or((mid, w.last.collections, 0));
                    stats.windows += 1;
                    let generation = collected_generation(before, state.collections);
                    let _ = events.send(GcEvent::Ended {
                        pid,
                        start_ns: start,
                        end_ns: mid,
                        generation,
                        polls,
                    });
                }
                (false, false) => {}
            }
            let list_changed =
                (state.frozen_next, state.frozen_prev) != (w.last.frozen_next, w.last.frozen_prev);
            if state.config() != w.last.config() || list_changed {
                let _ = events.send(GcEvent::Changed {
                    pid,
                    t_ns: now,
                    before: w.last,
                    after: state,
                });
            }
            w.last = state;
            w.last_poll_ns = now;
        }
        for pid in lost {
            watched.retain(|w| w.loc.pid != pid);
            let _ = events.send(GcEvent::Lost {
                pid,
                t_ns: monotonic_ns(),
            });
        }
        next += period;
        let now = Instant::now();
        if next < now {
            stats.late_passes += 1;
            next = now;
        } else {
            std::thread::sleep(next - now);
        }
    }
    stats.elapsed_ns = started.elapsed().as_nanos() as u64;
    stats.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_from_counters() {
        assert_eq!(
            collected_generation(Some([5, 2, 1]), Some([5, 2, 2])),
            Some(2)
        );
        assert_eq!(
            collected_generation(Some([5, 2, 1]), Some([6, 2, 1])),
            Some(0)
        );
        assert_eq!(collected_generation(Some([5, 2, 1]), Some([5, 2, 1])), None);
        assert_eq!(collected_generation(None, Some([5, 2, 1])), None);
    }

    /// A live interpreter that collects in a loop: the poller sees windows whose generation is the
    /// one collected, and a change of thresholds.
    #[test]
    fn sees_collections_of_a_live_interpreter() {
        use std::io::{BufRead, BufReader, Write};
        use std::process::{Command, Stdio};
        let python = "/root/.pyenv/versions/3.12.1/bin/python3";
        if !std::path::Path::new(python).exists() {
            eprintln!("skipping: {python} not installed");
            return;
        }
        // 200k lists make a full collection take several ms: long enough to be seen at 1 kHz.
        let script = "import gc, sys, time\nkeep = [[i] for i in range(200000)]\nprint('ready', flush=True)\n\
                      sys.stdin.readline()\nfor _ in range(5):\n    gc.collect(); time.sleep(0.02)\n\
                      gc.set_threshold(999, 10, 10)\nprint('done', flush=True)\nsys.stdin.read()\n";
        let mut child = Command::new(python)
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let pid = child.id() as i32;
        let interp = crate::interp::interpreter::attach(pid).unwrap();
        let loc = crate::interp::gc_config::locate(&interp).unwrap();
        let initial = loc.read(&interp.mem).unwrap();
        let (tx, rx) = channel();
        let poller = GcPoller::start(Duration::from_millis(1), tx);
        poller.add(loc, initial);
        std::thread::sleep(Duration::from_millis(20));
        child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
        line.clear();
        out.read_line(&mut line).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let stats = poller.stop();
        drop(child.stdin.take());
        let _ = child.kill();
        let _ = child.wait();
        let events: Vec<GcEvent> = rx.try_iter().collect();
        let full: Vec<&GcEvent> = events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    GcEvent::Ended {
                        generation: Some(2),
                        ..
                    }
                )
            })
            .collect();
        assert!(
            full.len() >= 4,
            "expected the 5 full collections, saw {events:?}"
        );
        assert!(
            events.iter().any(
                |e| matches!(e, GcEvent::Changed { after, .. } if after.thresholds == [999, 10, 10])
            ),
            "{events:?}"
        );
        assert!(stats.passes > 10 && stats.read_errors == 0, "{stats:?}");
    }
}
