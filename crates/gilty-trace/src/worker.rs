//! The background thread that does the slow kernel work, so that `Tracer::poll` never waits:
//! - every `RESCAN_INTERVAL` it lists `/proc/PID/task` and attaches threads it has not seen
//!   (perf_event_open of every probe, mmap, SET_OUTPUT, enable) and leaves them for `poll` to take
//!   over;
//! - it closes the fds of threads that exited (handed over by `poll`) and, at shutdown, of all
//!   threads. Each close of a uprobe PMU event takes ~0.1 s in the kernel (named probes: instant);
//!   closing is done one fd at a time with a rescan between fds, so a new thread waits at most
//!   about one close before it is attached.

use std::collections::{HashSet, VecDeque};
use std::os::fd::OwnedFd;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::TraceError;
use crate::keeper::Keeper;
use crate::thread_events::{list_tids, monotonic_ns, open_thread, Probe, ThreadSlot};

/// How often the worker looks for new threads.
pub const RESCAN_INTERVAL: Duration = Duration::from_millis(2);
/// Once the target has exited there is nothing to rescan; just wait for commands.
const IDLE_INTERVAL: Duration = Duration::from_millis(50);

pub(crate) struct NewThread {
    pub tid: i32,
    pub slot: ThreadSlot,
    pub enabled_at_ns: u64,
}

#[derive(Default)]
struct Pending {
    /// Set by shutdown: nothing more may be handed to `poll`.
    stopped: bool,
    new: Vec<NewThread>,
    error: Option<TraceError>,
}

enum Cmd {
    /// The thread exited; `poll` has drained its buffer. Close its fds; its tid may be reused.
    Retire(i32, ThreadSlot),
    /// Close these and everything else, then exit.
    Shutdown(Vec<ThreadSlot>),
}

pub(crate) struct Worker {
    tx: Sender<Cmd>,
    pending: Arc<Mutex<Pending>>,
    handle: JoinHandle<()>,
}

impl Worker {
    /// `keeper` (named probes) is dropped when the worker ends, after it has closed every event.
    pub fn start(
        pid: i32,
        probes: Arc<Vec<Probe>>,
        pages: usize,
        known: HashSet<i32>,
        keeper: Option<Keeper>,
    ) -> Worker {
        let (tx, rx) = channel();
        let pending = Arc::new(Mutex::new(Pending::default()));
        let p2 = pending.clone();
        let handle = std::thread::Builder::new()
            .name("gilty-trace".into())
            .spawn(move || {
                run(pid, &probes, pages, known, &p2, rx);
                drop(keeper); // the target's probes are out: the keeper may close its anchors and delete them
            })
            .expect("spawn gilty-trace worker");
        Worker {
            tx,
            pending,
            handle,
        }
    }

    /// Threads attached since the last call, and the last attach error.
    pub fn take_new(&self) -> (Vec<NewThread>, Option<TraceError>) {
        let mut p = self.pending.lock().unwrap();
        (std::mem::take(&mut p.new), p.error.take())
    }

    pub fn retire(&self, tid: i32, slot: ThreadSlot) {
        // If the worker is gone (it never exits before Shutdown) the slot is dropped here,
        // synchronously.
        let _ = self.tx.send(Cmd::Retire(tid, slot));
    }

    /// Stops attaching; closes `slots` and anything attached but not yet taken; returns the
    /// thread's handle.
    pub fn shutdown(self, slots: Vec<ThreadSlot>) -> JoinHandle<()> {
        self.pending.lock().unwrap().stopped = true;
        let _ = self.tx.send(Cmd::Shutdown(slots));
        self.handle
    }
}

struct State<'a> {
    known: HashSet<i32>,
    to_close: VecDeque<OwnedFd>,
    pending: &'a Mutex<Pending>,
}

impl State<'_> {
    fn queue(&mut self, slot: ThreadSlot) {
        let ThreadSlot { ring, fds, .. } = slot;
        drop(ring); // munmap now: fast, and the buffer is not needed any more
        self.to_close.extend(fds);
    }

    /// Returns true on shutdown.
    fn handle(&mut self, cmd: Cmd) -> bool {
        match cmd {
            Cmd::Retire(tid, slot) => {
                self.known.remove(&tid);
                self.queue(slot);
                false
            }
            Cmd::Shutdown(slots) => {
                for s in slots {
                    self.queue(s);
                }
                true
            }
        }
    }

    /// Closes everything, including threads attached but never taken by `poll`.
    fn finish(mut self) {
        let left = std::mem::take(&mut self.pending.lock().unwrap().new);
        for nt in left {
            nt.slot.disable();
            self.queue(nt.slot);
        }
        // Dropping the queue closes every fd, one by one (the kernel removes the uprobes).
    }

    fn rescan(&mut self, pid: i32, probes: &[Probe], pages: usize) -> bool {
        let Some(tids) = list_tids(pid) else {
            return false;
        };
        for tid in tids {
            if !self.known.insert(tid) {
                continue;
            }
            match open_thread(probes, pages, tid) {
                Ok(Some(slot)) => match slot.enable(probes) {
                    Ok(()) => {
                        let enabled_at_ns = monotonic_ns();
                        let mut p = self.pending.lock().unwrap();
                        if p.stopped {
                            drop(p);
                            slot.disable();
                            self.queue(slot);
                        } else {
                            p.new.push(NewThread {
                                tid,
                                slot,
                                enabled_at_ns,
                            });
                        }
                    }
                    Err(e) => {
                        self.pending.lock().unwrap().error = Some(e);
                        self.queue(slot);
                    }
                },
                // Exited before we got to it.
                Ok(None) => {
                    self.known.remove(&tid);
                }
                // Kept in `known`, so not retried every few ms (e.g. out of fds); poll reports it.
                Err(e) => self.pending.lock().unwrap().error = Some(e),
            }
        }
        true
    }
}

fn run(
    pid: i32,
    probes: &[Probe],
    pages: usize,
    known: HashSet<i32>,
    pending: &Mutex<Pending>,
    rx: Receiver<Cmd>,
) {
    let mut st = State {
        known,
        to_close: VecDeque::new(),
        pending,
    };
    let mut target_alive = true;
    let mut next_scan = Instant::now();
    loop {
        loop {
            match rx.try_recv() {
                Ok(cmd) => {
                    if st.handle(cmd) {
                        return st.finish();
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return st.finish(),
            }
        }
        if target_alive && Instant::now() >= next_scan {
            next_scan = Instant::now() + RESCAN_INTERVAL;
            target_alive = st.rescan(pid, probes, pages);
        }
        if let Some(fd) = st.to_close.pop_front() {
            drop(fd); // ~0.1 s in the kernel; rescan again before the next one
            continue;
        }
        let wait = if target_alive {
            next_scan.saturating_duration_since(Instant::now())
        } else {
            IDLE_INTERVAL
        };
        match rx.recv_timeout(wait) {
            Ok(cmd) => {
                if st.handle(cmd) {
                    return st.finish();
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return st.finish(),
        }
    }
}
