//! What the timing tests compare with: the test server's own measured time per request, and whether
//! the machine could hold it (CPU pressure over the same run). A timing test asserts against the
//! server's measurement; only when the machine demonstrably could not hold it does it print what it
//! measured and return early (a Rust test cannot skip).

use std::time::{Duration, Instant};

/// Loopback, the server thread's wake-up on the request and the generator's on the answer: what the
/// generator may add to the server's own time per request on a quiet machine.
pub const TRANSPORT_MS: f64 = 1.0;

/// Share of a run during which some task waited for a CPU (the kernel's CPU pressure, "some") from
/// which the machine is too busy to hold a millisecond. A quiet 2-CPU machine running these tests
/// alone reads up to about a quarter (the tests' own threads), 8 busy loops on it read 95-100 %.
pub const BUSY_PRESSURE: f64 = 0.5;

/// The value of rank ceil(q * n) among `values` (HdrHistogram's `value_at_quantile` convention), in
/// ms.
pub fn quantile_ms(values: &[Duration], q: f64) -> f64 {
    let mut v: Vec<Duration> = values.to_vec();
    v.sort();
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1].as_secs_f64() * 1e3
}

/// Total time in which some task waited for a CPU since boot (/proc/pressure/cpu), if the kernel
/// says.
fn cpu_pressure_total() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let some = text.lines().find(|l| l.starts_with("some "))?;
    let total = some
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?;
    Some(Duration::from_micros(total.parse().ok()?))
}

/// CPU pressure over an interval of the test: started before the run, read after it.
pub struct Pressure {
    start: Instant,
    total: Option<Duration>,
}

impl Pressure {
    pub fn start() -> Pressure {
        Pressure {
            start: Instant::now(),
            total: cpu_pressure_total(),
        }
    }

    /// Share of the interval during which some task waited for a CPU (None: the kernel does not
    /// say).
    pub fn share(&self) -> Option<f64> {
        let wall = self.start.elapsed().as_secs_f64();
        let waited = cpu_pressure_total()?.checked_sub(self.total?)?;
        Some(waited.as_secs_f64() / wall)
    }
}

/// Whether the machine was too busy, in words with the numbers ("" when it was not or cannot be
/// told).
pub fn busy(pressure: Option<f64>) -> String {
    match pressure {
        Some(p) if p >= BUSY_PRESSURE => format!(
            "other tasks waited for a CPU during {:.0} % of the run",
            p * 100.0
        ),
        _ => String::new(),
    }
}

/// A generator's figure against the server's own for the same requests: never below it (each
/// request's time at the generator contains its time at the server), and at most `allowed_ms` above
/// it. Past that, on a machine that was busy during the run, says what it measured and returns
/// false (the caller returns: a Rust test cannot skip); otherwise the assertion fails.
#[track_caller]
pub fn within_server_time(
    what: &str,
    generator_ms: f64,
    server_ms: f64,
    allowed_ms: f64,
    pressure: Option<f64>,
) -> bool {
    let gap = generator_ms - server_ms;
    let measured = format!(
        "{what}: generator {generator_ms:.3} ms, server's own {server_ms:.3} ms, gap {gap:.3} ms (allowed {allowed_ms:.3} ms), CPU pressure {}",
        pressure.map_or("unknown".into(), |p| format!("{:.1} %", p * 100.0))
    );
    assert!(
        generator_ms >= server_ms,
        "shorter than the server's own time: {measured}"
    );
    if gap > allowed_ms {
        let why = busy(pressure);
        if !why.is_empty() {
            eprintln!("not judged, the machine cannot hold a millisecond ({why}): {measured}");
            return false;
        }
    }
    assert!(gap <= allowed_ms, "{measured}");
    eprintln!("{measured}");
    true
}
