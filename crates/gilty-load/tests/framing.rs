//! The generator's HTTP/1.1 reading against hand-written servers: chunked bodies, bodies that end
//! with the connection, keep-alive connections the server closes between requests, and the hard cap
//! on open connections.

mod common;

use common::{quantile_ms, within_server_time, Pressure, TRANSPORT_MS};
use gilty_load::{run, Arrivals, Plan, RequestSpec};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Reads one request head (and no body: the plans here send GETs).
fn read_request(reader: &mut BufReader<TcpStream>) -> bool {
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) if line == "\r\n" => return true,
            Ok(_) => {}
        }
    }
}

/// A server answering every request on a connection with `answer`; after `per_connection` answers
/// it closes the connection. Counts connections open at once (the most seen), and keeps its own
/// time per request (from the request read to the answer written).
fn serve(
    answer: &'static [u8],
    per_connection: usize,
    delay: Duration,
) -> (u16, Arc<AtomicUsize>, Arc<Mutex<Vec<Duration>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (open, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let most_seen = Arc::clone(&most);
    let served = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&served);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let (open, most, record) = (Arc::clone(&open), Arc::clone(&most), Arc::clone(&record));
            std::thread::spawn(move || {
                let now = open.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                stream.set_nodelay(true).unwrap();
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                for _ in 0..per_connection {
                    if !read_request(&mut reader) {
                        break;
                    }
                    let received = Instant::now();
                    std::thread::sleep(delay);
                    if writer.write_all(answer).is_err() {
                        break;
                    }
                    record.lock().unwrap().push(received.elapsed());
                }
                open.fetch_sub(1, Ordering::SeqCst);
                // Dropping both halves closes the connection; drain first so the close is a FIN.
                let _ = writer.shutdown(std::net::Shutdown::Write);
                let mut rest = Vec::new();
                let _ = reader
                    .get_mut()
                    .set_read_timeout(Some(Duration::from_millis(50)));
                let _ = reader.read_to_end(&mut rest);
            });
        }
    });
    (port, most_seen, served)
}

fn plan(port: u16, rate: f64, seconds: f64, connections: usize) -> Plan {
    Plan {
        requests: vec![RequestSpec {
            method: "GET".into(),
            url: format!("http://127.0.0.1:{port}/x"),
            headers: vec![],
            body: vec![],
            weight: 1.0,
        }],
        rate,
        duration: Duration::from_secs_f64(seconds),
        arrivals: Arrivals::Constant,
        max_in_flight: 10_000,
        timeout: Duration::from_secs(5),
        connections,
        threads: 1,
    }
}

fn all_answered(answer: &'static [u8], per_connection: usize) {
    let (port, _, _) = serve(answer, per_connection, Duration::ZERO);
    let r = run(&plan(port, 200.0, 0.5, 4), &AtomicBool::new(false)).unwrap();
    assert_eq!(r.stats.sent, 100);
    assert_eq!(
        r.stats.ok,
        100,
        "{:?} for {}",
        r.stats.failures,
        String::from_utf8_lossy(answer)
    );
}

#[test]
fn chunked_bodies_with_and_without_trailers() {
    all_answered(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;ext=1\r\n, w\r\n0\r\n\r\n", usize::MAX);
    all_answered(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Trailer: 1\r\n\r\n", usize::MAX);
}

#[test]
fn a_body_that_ends_with_the_connection() {
    all_answered(
        b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nthe whole body",
        1,
    );
}

#[test]
fn keep_alive_connections_the_server_closes_are_reopened() {
    // Every third answer is the connection's last, without saying so: the next request sent on it
    // finds it closed and goes again on a new one, never as an error.
    all_answered(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 3);
    all_answered(b"HTTP/1.1 204 No Content\r\n\r\n", usize::MAX);
}

#[test]
fn errors_by_status() {
    let (port, _, _) = serve(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy",
        usize::MAX,
        Duration::ZERO,
    );
    let r = run(&plan(port, 100.0, 0.3, 2), &AtomicBool::new(false)).unwrap();
    assert_eq!(r.stats.ok, 0);
    assert_eq!(
        r.stats.failures.get("http_503").copied(),
        Some(r.stats.sent)
    );
}

#[test]
fn connections_are_a_hard_cap_and_waiting_counts_as_latency() {
    // 100 rps of 50 ms answers needs 5 connections; with 2, at most 2 are open, throughput is about
    // 40 rps and the arrivals' latency (from their intended start) grows with the queue.
    let (port, most, served) = serve(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        usize::MAX,
        Duration::from_millis(50),
    );
    let pressure = Pressure::start();
    let r = run(&plan(port, 100.0, 1.0, 2), &AtomicBool::new(false)).unwrap();
    let pressure = pressure.share();
    assert!(
        most.load(Ordering::SeqCst) <= 2,
        "{} connections open at once",
        most.load(Ordering::SeqCst)
    );
    assert_eq!(r.stats.sent, 100);
    let max_ms = r.stats.latency.max() as f64 / 1000.0;
    assert!(max_ms > 500.0, "max latency {max_ms} ms");
    // The time from send to answer is the server's own (its 50 ms sleep and what the scheduler
    // adds) plus the loopback: the wait for a connection is not in it.
    let service_p50 = r.stats.service.value_at_quantile(0.5) as f64 / 1000.0;
    std::thread::sleep(Duration::from_millis(10)); // the server notes its time after writing the answer
    let served = served.lock().unwrap().clone();
    within_server_time(
        "service p50",
        service_p50,
        quantile_ms(&served, 0.5),
        TRANSPORT_MS,
        pressure,
    );
}
