//! The generator against an in-process HTTP server whose answers take a fixed time: latency from
//! the intended start equals the service time when the server keeps up; arrivals beyond the
//! in-flight limit are dropped, not queued; a refused connection is a connect error.

mod common;

use common::{quantile_ms, within_server_time, Pressure, TRANSPORT_MS};
use gilty_load::{run, Arrivals, Plan, RequestSpec};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A keep-alive HTTP/1.1 server, a thread per connection, answering each request after `delay`. It
/// keeps its own time per request, from the request read to the answer written.
struct Server {
    port: u16,
    served: Arc<Mutex<Vec<Duration>>>,
}

impl Server {
    /// The server's times for `n` requests: a thread notes its time after writing the answer, so
    /// the last may come a moment after the generator has read it.
    fn served(&self, n: usize) -> Vec<Duration> {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let served = self.served.lock().unwrap().clone();
            if served.len() >= n || Instant::now() > deadline {
                return served;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn serve(delay: Duration) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&served);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let record = Arc::clone(&record);
            std::thread::spawn(move || answer_each(stream, delay, &record));
        }
    });
    Server { port, served }
}

/// Answers every request head on the connection (GETs: no body) in one write, until it closes.
fn answer_each(mut stream: TcpStream, delay: Duration, record: &Mutex<Vec<Duration>>) {
    stream.set_nodelay(true).unwrap();
    let mut pending = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let head_end = loop {
            if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => pending.extend_from_slice(&chunk[..n]),
            }
        };
        let received = Instant::now();
        pending.drain(..head_end);
        std::thread::sleep(delay);
        if stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .is_err()
        {
            return;
        }
        record.lock().unwrap().push(received.elapsed());
    }
}

fn plan(port: u16, rate: f64, seconds: f64, max_in_flight: usize) -> Plan {
    Plan {
        requests: vec![RequestSpec {
            method: "GET".into(),
            url: format!("http://127.0.0.1:{port}/"),
            headers: vec![],
            body: vec![],
            weight: 1.0,
        }],
        rate,
        duration: Duration::from_secs_f64(seconds),
        arrivals: Arrivals::Constant,
        max_in_flight,
        timeout: Duration::from_secs(5),
        connections: 64,
        threads: 1,
    }
}

#[test]
fn latency_is_the_service_time_when_the_server_keeps_up() {
    // The reference is the server's own time for the same requests, not the 20 ms it was asked for:
    // its sleep overshoots by what the machine's scheduler allows. Latency adds to it the loopback
    // and the wake-ups on both sides, and how late the generator itself was (its own lag).
    let server = serve(Duration::from_millis(20));
    let pressure = Pressure::start();
    let r = run(
        &plan(server.port, 100.0, 2.0, 1000),
        &AtomicBool::new(false),
    )
    .unwrap();
    let pressure = pressure.share();
    assert_eq!(r.stats.sent, 200);
    assert_eq!(r.stats.ok, 200, "failures: {:?}", r.stats.failures);
    let served = server.served(200);
    assert_eq!(served.len(), 200);
    let p50 = r.stats.latency.value_at_quantile(0.5) as f64 / 1000.0;
    let lag_p99 = r.stats.lag.value_at_quantile(0.99) as f64 / 1000.0;
    within_server_time(
        "latency p50",
        p50,
        quantile_ms(&served, 0.5),
        TRANSPORT_MS + lag_p99,
        pressure,
    );
}

#[test]
fn arrivals_over_the_in_flight_limit_are_dropped() {
    // 200 rps of 100 ms requests needs 20 in flight; with 5 allowed, about three quarters are
    // dropped.
    let port = serve(Duration::from_millis(100)).port;
    let r = run(&plan(port, 200.0, 1.0, 5), &AtomicBool::new(false)).unwrap();
    assert_eq!(r.stats.sent + r.stats.dropped, 200);
    assert!(r.stats.dropped >= 120, "dropped {}", r.stats.dropped);
    assert!(r.stats.in_flight_sum as f64 / r.stats.in_flight_seen as f64 <= 5.0);
}

#[test]
fn a_closed_port_is_a_connect_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let r = run(&plan(port, 50.0, 0.2, 100), &AtomicBool::new(false)).unwrap();
    assert_eq!(r.stats.ok, 0);
    assert_eq!(
        r.stats.failures.get("connect").copied().unwrap_or(0),
        r.stats.sent
    );
}

#[test]
fn a_bad_plan_is_one_line() {
    let mut p = plan(1, 10.0, 1.0, 10);
    p.requests[0].url = "https://example.invalid/".into();
    let err = run(&p, &AtomicBool::new(false)).err().unwrap();
    assert!(err.contains("only http:// URLs"), "{err}");
}
