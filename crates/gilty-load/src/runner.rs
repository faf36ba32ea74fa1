//! The open-loop run. Arrivals are released on schedule as tickets into their host's queue (or
//! dropped when `max_in_flight` tickets are already out): by a release task on the first generator
//! thread that a timerfd wakes at each arrival's time (tokio's own timers round to 1 ms), and by
//! any connection looking for work, whichever runs first. The calling thread only watches for the
//! end and for a stop. A fixed set of connections per host (`connections`, a hard cap) serves the
//! queue: each is a long-lived task owning its TCP stream that takes the next ticket, writes the
//! request's pre-serialized bytes and reads the answer. A ticket that waits for a free connection
//! keeps its intended start, so its latency includes the wait (coordinated omission corrected).
//! Each generator thread records into its own statistics; they are merged at the end.

use crate::http1::{self, Connection, ExchangeError};
use crate::plan::Plan;
use crate::schedule::Schedule;
use crate::stats::{Failure, Outcome, Stats};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, Notify};

/// How long after the schedule ends the run waits for answers still in flight (besides the
/// timeout).
const DRAIN_GRACE: Duration = Duration::from_millis(200);
/// How often the schedule thread looks whether the last answers are in.
const DRAIN_POLL: Duration = Duration::from_millis(1);
/// While every connection is busy, each releases what is due when it looks for work, so the release
/// task need not wake for every arrival: it sleeps at least this long, until a connection goes
/// idle.
const BUSY_SLEEP: Duration = Duration::from_micros(500);
/// How often the calling thread looks for a stop request or the schedule's end.
const WATCH: Duration = Duration::from_millis(2);

pub struct RunResult {
    pub stats: Stats,
    /// Seconds the schedule ran (shorter than planned when stopped).
    pub window_s: f64,
    pub stopped: bool,
    /// CPU seconds this process used during the run (user + system), and its wall time.
    pub cpu_s: f64,
    pub wall_s: f64,
    /// Requests still unanswered when the run gave up waiting (counted as timeouts).
    pub abandoned: u64,
}

fn process_cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// An arrival released to the connections: when it should have started and which request it sends.
#[derive(Clone, Copy)]
struct Ticket {
    intended_s: f64,
    request: usize,
}

/// The tickets of one host (address) and its idle connections waiting for them.
struct HostQueue {
    addr: SocketAddr,
    tickets: Mutex<VecDeque<Ticket>>,
    ready: Notify,
    /// Connections waiting on `ready`: the schedule wakes at most this many per batch.
    idle: AtomicUsize,
}

struct Prepared {
    host: usize,
    bytes: Vec<u8>,
    head: bool,
}

/// The schedule's side: the next arrival and the counts of what was released or dropped.
struct Release {
    schedule: Schedule,
    next: (f64, usize),
    /// Arrivals at or after this many seconds are not released (the duration, or where a stop
    /// came).
    end_s: f64,
    released: u64,
    stats: Stats,
    max_in_flight: usize,
    batches: Vec<Vec<Ticket>>,
}

struct Shared {
    start: Instant,
    release: Mutex<Release>,
    hosts: Vec<HostQueue>,
    requests: Vec<Prepared>,
    timeout: Duration,
    /// Tickets finished (answered, failed or timed out); released minus this is in flight.
    finished: AtomicU64,
    closing: AtomicBool,
    /// Whether the release task is in a long (busy) sleep that a connection going idle must end.
    long_sleep: AtomicBool,
    rearm: Notify,
}

impl Shared {
    fn now_s(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Releases every arrival due by now; returns when the next one is due (None: the schedule is
    /// over). Whoever finds the lock taken leaves it to the holder.
    fn release_due(&self, wait: bool) -> Option<f64> {
        let mut r = if wait {
            self.release.lock().unwrap()
        } else {
            match self.release.try_lock() {
                Ok(r) => r,
                Err(_) => return None,
            }
        };
        let now_s = self.now_s();
        if r.next.0 > now_s || r.next.0 >= r.end_s {
            return (r.next.0 < r.end_s).then_some(r.next.0);
        }
        // Everything due by now goes out in one batch: one lock and one wake-up per host, however
        // many arrivals a late wake-up let accumulate.
        let r = &mut *r;
        while r.next.0 <= now_s && r.next.0 < r.end_s {
            let (intended_s, request) = r.next;
            let in_flight = (r.released - self.finished.load(Ordering::Acquire)) as usize;
            if in_flight >= r.max_in_flight {
                r.stats.note_dropped(intended_s, in_flight);
            } else {
                r.stats.note_sent(intended_s, in_flight);
                r.released += 1;
                r.batches[self.requests[request].host].push(Ticket {
                    intended_s,
                    request,
                });
            }
            r.next = r.schedule.next_arrival();
        }
        for (host, batch) in r.batches.iter_mut().enumerate() {
            if batch.is_empty() {
                continue;
            }
            let q = &self.hosts[host];
            let n = batch.len();
            q.tickets.lock().unwrap().extend(batch.drain(..));
            // The connection idle the shortest time first: at low rates a few warm connections
            // carry the load (as a browser's or a pool's would), not every one in turn.
            for _ in 0..n.min(q.idle.load(Ordering::SeqCst)) {
                q.ready.notify_last();
            }
        }
        (r.next.0 < r.end_s).then_some(r.next.0)
    }

    /// The next ticket for `host`, waiting while there is none; None once the run is closing.
    async fn next_ticket(&self, host: usize) -> Option<Ticket> {
        let q = &self.hosts[host];
        loop {
            if self.closing.load(Ordering::Acquire) {
                return None;
            }
            self.release_due(false);
            if let Some(t) = q.tickets.lock().unwrap().pop_front() {
                return Some(t);
            }
            // Registered as a waiter and counted idle before looking again: a ticket pushed after
            // this look finds the count and wakes us.
            let notified = q.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            q.idle.fetch_add(1, Ordering::SeqCst);
            if self.long_sleep.load(Ordering::SeqCst) {
                self.rearm.notify_one();
            }
            let found = q.tickets.lock().unwrap().pop_front();
            if found.is_none() && !self.closing.load(Ordering::Acquire) {
                notified.await;
            }
            q.idle.fetch_sub(1, Ordering::SeqCst);
            if found.is_some() {
                return found;
            }
        }
    }
}

/// The schedule's reference point as an Instant plus seconds.
fn at(start: Instant, s: f64) -> Instant {
    start + Duration::from_secs_f64(s.max(0.0))
}

/// One connection slot: serves tickets until the run closes, reconnecting whenever the server
/// closes.
async fn connection_task(shared: Arc<Shared>, host: usize, stats: Rc<RefCell<Stats>>) {
    let addr = shared.hosts[host].addr;
    let mut conn: Option<Connection> = None;
    // One timer per connection, re-armed lazily: it only has to fire no later than the current
    // request's deadline, and deadlines rise with the schedule, so it is rarely reset.
    let timer = tokio::time::sleep(Duration::from_secs(3600));
    tokio::pin!(timer);
    // Since when this connection could have sent: a ticket older than that waited for a connection
    // (the server's doing), a ticket newer than that waited for the generator.
    let mut free_since_s = 0.0f64;
    while let Some(ticket) = shared.next_ticket(host).await {
        let deadline = at(shared.start, ticket.intended_s) + shared.timeout;
        let deadline_t = tokio::time::Instant::from_std(deadline);
        let sent_s = shared.now_s();
        stats
            .borrow_mut()
            .note_lag(sent_s - ticket.intended_s.max(free_since_s));
        let request = &shared.requests[ticket.request];
        let failure = if Instant::now() >= deadline {
            Some(Failure::Timeout) // waited for a connection longer than the timeout
        } else {
            if timer.is_elapsed() || timer.deadline() > deadline_t {
                timer.as_mut().reset(deadline_t);
            }
            let answer = {
                let exchange = exchange(&mut conn, addr, request);
                tokio::pin!(exchange);
                loop {
                    tokio::select! {
                        biased;
                        a = &mut exchange => break Some(a),
                        _ = &mut timer => {
                            if Instant::now() >= deadline {
                                break None;
                            }
                            timer.as_mut().reset(deadline_t);
                        }
                    }
                }
            };
            match answer {
                Some(Ok(status)) if status < 400 => None,
                Some(Ok(status)) => Some(Failure::Status(status)),
                Some(Err(f)) => Some(f),
                None => {
                    conn = None; // the answer may still come: this connection cannot be reused
                    Some(Failure::Timeout)
                }
            }
        };
        let done_s = shared.now_s();
        free_since_s = done_s;
        stats.borrow_mut().add(&Outcome {
            request: ticket.request,
            intended_s: ticket.intended_s,
            sent_s,
            done_s,
            failure,
        });
        shared.finished.fetch_add(1, Ordering::Release);
    }
}

/// Sends one request on the slot's connection (opening it if needed) and reads the status. A
/// request that found an idle keep-alive connection closed by the server is sent once more on a new
/// one.
async fn exchange(
    conn: &mut Option<Connection>,
    addr: SocketAddr,
    request: &Prepared,
) -> Result<u16, Failure> {
    let mut retried = false;
    loop {
        let reused = conn.is_some();
        if conn.is_none() {
            *conn = Some(Connection::open(addr).await.map_err(|_| Failure::Connect)?);
        }
        let c = conn.as_mut().expect("opened above");
        match c.exchange(&request.bytes, request.head).await {
            Ok(answer) => {
                if !answer.keep_alive {
                    *conn = None;
                }
                return Ok(answer.status);
            }
            Err(e) => {
                *conn = None;
                if reused && !retried && matches!(e, ExchangeError::Broken { fresh: true }) {
                    retried = true;
                    continue;
                }
                return Err(Failure::Io);
            }
        }
    }
}

/// A CLOCK_MONOTONIC timerfd in the runtime's epoll set: wakes the runtime at a given instant to
/// the microsecond.
struct PreciseTimer {
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
}

impl PreciseTimer {
    fn new() -> std::io::Result<PreciseTimer> {
        use std::os::fd::FromRawFd;
        // SAFETY: timerfd_create has no preconditions; a valid descriptor is owned from here on.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        // SAFETY: the OwnedFd is the AsyncFd's for its whole life and always the same descriptor.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(owned, tokio::io::Interest::READABLE)
        }?;
        Ok(PreciseTimer { fd })
    }

    /// Fires once, `after` from now (zero would disarm it: at least 1 ns).
    fn arm(&self, after: Duration) {
        use std::os::fd::AsRawFd;
        let after = after.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a timerfd we own and a spec on the stack.
        unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    }

    async fn expired(&self) {
        use std::os::fd::AsRawFd;
        loop {
            let Ok(mut guard) = self.fd.readable().await else {
                return;
            };
            let mut count = [0u8; 8];
            // SAFETY: reads the expiry count into our buffer.
            let n =
                unsafe { libc::read(self.fd.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
            // Not re-armed until we return, so no expiry can slip between this read and the clear.
            guard.clear_ready();
            if n == 8 {
                return;
            }
        }
    }
}

/// Releases arrivals at their times: sleeps on the timer until the next is due (at least BUSY_SLEEP
/// while no connection is idle: busy connections release as they finish), until the schedule ends.
async fn release_task(shared: Arc<Shared>, timer: PreciseTimer) {
    let any_idle = |shared: &Shared| {
        shared
            .hosts
            .iter()
            .any(|q| q.idle.load(Ordering::SeqCst) > 0)
    };
    while let Some(due_s) = shared.release_due(true) {
        let until_due = Duration::from_secs_f64((due_s - shared.now_s()).max(0.0));
        let mut wait = until_due;
        if until_due < BUSY_SLEEP && !any_idle(&shared) {
            // Announced before looking again: a connection going idle after this look re-arms us.
            shared.long_sleep.store(true, Ordering::SeqCst);
            if !any_idle(&shared) {
                wait = BUSY_SLEEP;
            }
        }
        timer.arm(wait);
        tokio::select! {
            _ = timer.expired() => {}
            _ = shared.rearm.notified(), if wait > until_due => {}
        }
        shared.long_sleep.store(false, Ordering::SeqCst);
    }
}

/// One generator thread: a single-threaded runtime running its share of the connections until told
/// to stop; hands back what they recorded.
fn generator_thread(
    shared: Arc<Shared>,
    slots: Vec<usize>,
    requests: usize,
    releases: bool,
    stop: oneshot::Receiver<()>,
) -> std::io::Result<Stats> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let stats = Rc::new(RefCell::new(Stats::new(requests)));
    let local = tokio::task::LocalSet::new();
    if releases {
        let timer = runtime.block_on(async { PreciseTimer::new() })?;
        local.spawn_local(release_task(Arc::clone(&shared), timer));
    }
    for host in slots {
        local.spawn_local(connection_task(
            Arc::clone(&shared),
            host,
            Rc::clone(&stats),
        ));
    }
    runtime.block_on(local.run_until(async move {
        let _ = stop.await;
    }));
    drop(local); // cancels requests still waiting for an answer
    drop(runtime);
    Ok(Rc::try_unwrap(stats)
        .map(RefCell::into_inner)
        .unwrap_or_else(|rc| std::mem::replace(&mut rc.borrow_mut(), Stats::new(requests))))
}

fn prepare(plan: &Plan) -> Result<(Vec<SocketAddr>, Vec<Prepared>), String> {
    let mut addrs: Vec<SocketAddr> = Vec::new();
    let mut prepared = Vec::new();
    for r in &plan.requests {
        let target = http1::parse_url(&r.url)?;
        let addr = (target.host.as_str(), target.port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| format!("{}: cannot resolve {}", r.url, target.host))?;
        let host = addrs.iter().position(|a| *a == addr).unwrap_or_else(|| {
            addrs.push(addr);
            addrs.len() - 1
        });
        prepared.push(Prepared {
            host,
            bytes: http1::serialize(&r.method, &target, &r.headers, &r.body),
            head: r.method == "HEAD",
        });
    }
    Ok((addrs, prepared))
}

/// Runs `plan` to its end or until `stop` is set. Errors only for a plan that cannot run at all.
pub fn run(plan: &Plan, stop: &AtomicBool) -> Result<RunResult, String> {
    plan.validate()?;
    let (addrs, requests) = prepare(plan)?;
    let threads = plan.threads.max(1);
    let connections = plan.connections.max(1);
    let mut schedule = Schedule::new(
        plan.rate,
        plan.arrivals,
        &plan.requests.iter().map(|r| r.weight).collect::<Vec<_>>(),
    );
    let duration_s = plan.duration.as_secs_f64();
    let next = schedule.next_arrival();
    let n_requests = plan.requests.len();
    let shared = Arc::new(Shared {
        start: Instant::now(),
        release: Mutex::new(Release {
            schedule,
            next,
            end_s: duration_s,
            released: 0,
            stats: Stats::new(n_requests),
            max_in_flight: plan.max_in_flight,
            batches: vec![Vec::new(); addrs.len()],
        }),
        hosts: addrs
            .iter()
            .map(|&addr| HostQueue {
                addr,
                tickets: Mutex::new(VecDeque::new()),
                ready: Notify::new(),
                idle: AtomicUsize::new(0),
            })
            .collect(),
        requests,
        timeout: plan.timeout,
        finished: AtomicU64::new(0),
        closing: AtomicBool::new(false),
        long_sleep: AtomicBool::new(false),
        rearm: Notify::new(),
    });
    let cpu0 = process_cpu_s();
    // The connection slots, every host's, dealt to the generator threads in turn.
    let mut slots: Vec<Vec<usize>> = vec![Vec::new(); threads];
    for (i, (host, _)) in (0..addrs.len())
        .flat_map(|h| (0..connections).map(move |c| (h, c)))
        .enumerate()
    {
        slots[i % threads].push(host);
    }
    let mut stoppers = Vec::new();
    let mut workers = Vec::new();
    for (i, mine) in slots.into_iter().enumerate() {
        let (tx, rx) = oneshot::channel();
        let shared = Arc::clone(&shared);
        let worker = std::thread::Builder::new()
            .name(format!("gilty-load-{i}"))
            .spawn(move || generator_thread(shared, mine, n_requests, i == 0, rx))
            .map_err(|e| format!("cannot start the load generator's threads: {e}"))?;
        stoppers.push(tx);
        workers.push(worker);
    }

    let start = shared.start;
    let mut stopped = false;
    let mut window_s = duration_s;
    loop {
        if stop.load(Ordering::Relaxed) {
            stopped = true;
            window_s = shared.now_s().min(duration_s);
            shared.release.lock().unwrap().end_s = window_s;
            break;
        }
        let (over, end_s) = {
            let r = shared.release.lock().unwrap();
            (r.next.0 >= r.end_s, r.end_s)
        };
        // The release task's thread ending early (it could not start) must not leave us waiting.
        if over || workers[0].is_finished() || shared.now_s() > end_s + plan.timeout.as_secs_f64() {
            break;
        }
        std::thread::sleep(WATCH);
    }
    let released = shared.release.lock().unwrap().released;
    // Wait for answers still due: at most the timeout plus a little, then what is left is
    // abandoned.
    let give_up = Instant::now() + plan.timeout + DRAIN_GRACE;
    while shared.finished.load(Ordering::Acquire) < released && Instant::now() < give_up {
        std::thread::sleep(DRAIN_POLL);
    }
    shared.closing.store(true, Ordering::Release);
    for q in &shared.hosts {
        q.ready.notify_waiters();
    }
    for tx in stoppers {
        let _ = tx.send(());
    }
    let wall_s = start.elapsed().as_secs_f64();
    let cpu_s = process_cpu_s() - cpu0;
    let mut own = std::mem::replace(&mut shared.release.lock().unwrap().stats, Stats::new(0));
    for worker in workers {
        match worker.join() {
            Ok(Ok(stats)) => own.merge(stats),
            Ok(Err(e)) => return Err(format!("cannot start the load generator's runtime: {e}")),
            Err(_) => return Err("the load generator's thread failed".into()),
        }
    }
    let abandoned = released.saturating_sub(shared.finished.load(Ordering::Acquire));
    if abandoned > 0 {
        *own.failures.entry(Failure::Timeout.label()).or_insert(0) += abandoned;
    }
    Ok(RunResult {
        stats: own,
        window_s,
        stopped,
        cpu_s,
        wall_s,
        abandoned,
    })
}
