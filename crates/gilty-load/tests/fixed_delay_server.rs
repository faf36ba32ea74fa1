//! The generator against an in-process HTTP server whose answers take a fixed time: latency from the
//! intended start equals the service time when the server keeps up; arrivals beyond the in-flight
//! limit are dropped, not queued; a refused connection is a connect error.

use gilty_load::{run, Arrivals, Plan, RequestSpec};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

fn serve(delay: Duration) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let svc = service_fn(move |_req| async move {
                        tokio::time::sleep(delay).await;
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from_static(b"ok"))))
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
                });
            }
        });
    });
    port
}

fn plan(port: u16, rate: f64, seconds: f64, max_in_flight: usize) -> Plan {
    Plan {
        requests: vec![RequestSpec { method: "GET".into(), url: format!("http://127.0.0.1:{port}/"), headers: vec![], body: vec![], weight: 1.0 }],
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
    let port = serve(Duration::from_millis(20));
    let r = run(&plan(port, 100.0, 2.0, 1000), &AtomicBool::new(false)).unwrap();
    assert_eq!(r.stats.sent, 200);
    assert_eq!(r.stats.ok, 200, "failures: {:?}", r.stats.failures);
    let p50 = r.stats.latency.value_at_quantile(0.5) as f64 / 1000.0;
    assert!((20.0..23.0).contains(&p50), "p50 {p50} ms");
}

#[test]
fn arrivals_over_the_in_flight_limit_are_dropped() {
    // 200 rps of 100 ms requests needs 20 in flight; with 5 allowed, about three quarters are dropped.
    let port = serve(Duration::from_millis(100));
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
    assert_eq!(r.stats.failures.get("connect").copied().unwrap_or(0), r.stats.sent);
}

#[test]
fn a_bad_plan_is_one_line() {
    let mut p = plan(1, 10.0, 1.0, 10);
    p.requests[0].url = "https://example.invalid/".into();
    let err = run(&p, &AtomicBool::new(false)).err().unwrap();
    assert!(err.contains("only http:// URLs"), "{err}");
}
