//! The open-loop run: one OS thread keeps the schedule (precise sleeps, never waiting for answers),
//! a tokio runtime sends the requests over a keep-alive connection pool and reports each outcome.

use crate::plan::Plan;
use crate::schedule::Schedule;
use crate::stats::{Failure, Outcome, Stats};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long after the schedule ends the run waits for answers still in flight (besides the timeout).
const DRAIN_GRACE: Duration = Duration::from_millis(200);

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

fn classify_error(e: &hyper_util::client::legacy::Error) -> Failure {
    if e.is_connect() {
        Failure::Connect
    } else {
        Failure::Io
    }
}

/// Runs `plan` to its end or until `stop` is set. Errors only for a plan that cannot run at all.
pub fn run(plan: &Plan, stop: &AtomicBool) -> Result<RunResult, String> {
    plan.validate()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(plan.threads.max(1))
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the load generator's runtime: {e}"))?;
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    // Headers and body go out at once: Nagle's algorithm would hold the second write for an ACK.
    connector.set_nodelay(true);
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(plan.connections.max(1))
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector);
    let requests: Vec<(hyper::Method, hyper::Uri, Vec<(hyper::header::HeaderName, hyper::header::HeaderValue)>, Bytes)> = plan
        .requests
        .iter()
        .map(|r| {
            let headers = r
                .headers
                .iter()
                .filter_map(|(k, v)| Some((k.parse().ok()?, hyper::header::HeaderValue::from_str(v).ok()?)))
                .collect();
            (hyper::Method::from_bytes(r.method.as_bytes()).unwrap(), r.url.parse().unwrap(), headers, Bytes::from(r.body.clone()))
        })
        .collect();
    let requests = Arc::new(requests);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel::<Outcome>();
    let mut stats = Stats::new(plan.requests.len());
    let mut schedule = Schedule::new(plan.rate, plan.arrivals, &plan.requests.iter().map(|r| r.weight).collect::<Vec<_>>());
    let duration_s = plan.duration.as_secs_f64();
    let timeout = plan.timeout;
    let cpu0 = process_cpu_s();
    let start = Instant::now();
    let mut stopped = false;
    let mut window_s = duration_s;
    loop {
        let (at, index) = schedule.next();
        if at >= duration_s {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            stopped = true;
            window_s = start.elapsed().as_secs_f64().min(duration_s);
            break;
        }
        let intended = start + Duration::from_secs_f64(at);
        let now = Instant::now();
        if intended > now {
            std::thread::sleep(intended - now);
        }
        while let Ok(o) = rx.try_recv() {
            stats.add(&o);
        }
        let current = in_flight.load(Ordering::Relaxed);
        if current >= plan.max_in_flight {
            stats.note_dropped(at, current);
            continue;
        }
        let lag = Instant::now().saturating_duration_since(intended).as_secs_f64();
        stats.note_sent(at, lag, current);
        in_flight.fetch_add(1, Ordering::Relaxed);
        let (client, requests, in_flight, tx) = (client.clone(), Arc::clone(&requests), Arc::clone(&in_flight), tx.clone());
        runtime.spawn(async move {
            let (method, uri, headers, body) = &requests[index];
            let mut req = hyper::Request::builder().method(method.clone()).uri(uri.clone());
            for (k, v) in headers {
                req = req.header(k, v);
            }
            let req = req.body(Full::new(body.clone())).expect("request parts were validated");
            let sent_s = start.elapsed().as_secs_f64();
            let answer = tokio::time::timeout(timeout, async {
                let resp = client.request(req).await.map_err(|e| classify_error(&e))?;
                let status = resp.status().as_u16();
                resp.into_body().collect().await.map_err(|_| Failure::Io)?;
                if status >= 400 {
                    Err(Failure::Status(status))
                } else {
                    Ok(())
                }
            })
            .await;
            let failure = match answer {
                Ok(Ok(())) => None,
                Ok(Err(f)) => Some(f),
                Err(_) => Some(Failure::Timeout),
            };
            in_flight.fetch_sub(1, Ordering::Relaxed);
            let _ = tx.send(Outcome { request: index, intended_s: at, sent_s, done_s: start.elapsed().as_secs_f64(), failure });
        });
    }
    drop(tx);
    // Wait for answers still due: at most the timeout plus a little, then what is left is abandoned.
    let give_up = Instant::now() + timeout + DRAIN_GRACE;
    let mut abandoned = 0;
    loop {
        match rx.recv_timeout(give_up.saturating_duration_since(Instant::now())) {
            Ok(o) => stats.add(&o),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                abandoned = in_flight.load(Ordering::Relaxed) as u64;
                break;
            }
        }
        if stop.load(Ordering::Relaxed) && in_flight.load(Ordering::Relaxed) == 0 {
            break;
        }
    }
    let wall_s = start.elapsed().as_secs_f64();
    let cpu_s = process_cpu_s() - cpu0;
    runtime.shutdown_timeout(Duration::from_millis(100));
    for _ in 0..abandoned {
        *stats.failures.entry(Failure::Timeout.label()).or_insert(0) += 1;
    }
    Ok(RunResult { stats, window_s, stopped, cpu_s, wall_s, abandoned })
}
