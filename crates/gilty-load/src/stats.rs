//! Results of a run: latency histograms (from the intended start, and from the actual send), per
//! second and per request, errors by kind, dropped arrivals, and how late the generator itself was.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;

/// Latencies are recorded in microseconds, up to an hour, with 3 significant digits.
const MAX_US: u64 = 3_600_000_000;

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds")
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Failure {
    /// The connection could not be made.
    Connect,
    /// No complete answer within the timeout.
    Timeout,
    /// The connection broke while sending or reading.
    Io,
    /// An answer with status 4xx or 5xx.
    Status(u16),
}

impl Failure {
    pub fn label(&self) -> String {
        match self {
            Failure::Connect => "connect".into(),
            Failure::Timeout => "timeout".into(),
            Failure::Io => "io".into(),
            Failure::Status(s) => format!("http_{s}"),
        }
    }
}

/// One finished request; times in seconds since the run's start.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub request: usize,
    pub intended_s: f64,
    pub sent_s: f64,
    pub done_s: f64,
    pub failure: Option<Failure>,
}

pub struct Second {
    pub sent: u64,
    pub completed: u64,
    pub errors: u64,
    pub dropped: u64,
    pub latency: Histogram<u64>,
}

impl Second {
    fn new() -> Second {
        Second {
            sent: 0,
            completed: 0,
            errors: 0,
            dropped: 0,
            latency: histogram(),
        }
    }
}

pub struct Stats {
    pub latency: Histogram<u64>,
    pub service: Histogram<u64>,
    pub per_request: Vec<Histogram<u64>>,
    pub per_request_errors: Vec<u64>,
    pub seconds: Vec<Second>,
    pub failures: BTreeMap<String, u64>,
    pub sent: u64,
    pub completed: u64,
    pub ok: u64,
    pub dropped: u64,
    /// Sum and count of the in-flight count seen at each arrival (a time average for Poisson
    /// arrivals).
    pub in_flight_sum: u64,
    pub in_flight_seen: u64,
    /// How late the generator started requests past the moment it could have (see `note_lag`).
    pub lag: Histogram<u64>,
    pub last_done_s: f64,
    /// Sum over answered requests of the time they were in flight (send to answer): divided by the
    /// window, the time-average number in flight.
    pub in_system_s: f64,
}

fn us(seconds: f64) -> u64 {
    (seconds * 1e6).round().clamp(1.0, MAX_US as f64) as u64
}

impl Stats {
    pub fn new(requests: usize) -> Stats {
        Stats {
            latency: histogram(),
            service: histogram(),
            per_request: (0..requests).map(|_| histogram()).collect(),
            per_request_errors: vec![0; requests],
            seconds: Vec::new(),
            failures: BTreeMap::new(),
            sent: 0,
            completed: 0,
            ok: 0,
            dropped: 0,
            in_flight_sum: 0,
            in_flight_seen: 0,
            lag: histogram(),
            last_done_s: 0.0,
            in_system_s: 0.0,
        }
    }

    /// Adds another part of the same run (another generator thread's connections, the schedule's
    /// own counts) into this one.
    pub fn merge(&mut self, other: Stats) {
        self.latency.add(&other.latency).ok();
        self.service.add(&other.service).ok();
        self.lag.add(&other.lag).ok();
        for (mine, theirs) in self.per_request.iter_mut().zip(&other.per_request) {
            mine.add(theirs).ok();
        }
        for (mine, theirs) in self
            .per_request_errors
            .iter_mut()
            .zip(&other.per_request_errors)
        {
            *mine += theirs;
        }
        for (i, sec) in other.seconds.into_iter().enumerate() {
            let mine = self.second(i as f64);
            mine.sent += sec.sent;
            mine.completed += sec.completed;
            mine.errors += sec.errors;
            mine.dropped += sec.dropped;
            mine.latency.add(&sec.latency).ok();
        }
        for (k, n) in other.failures {
            *self.failures.entry(k).or_insert(0) += n;
        }
        self.sent += other.sent;
        self.completed += other.completed;
        self.ok += other.ok;
        self.dropped += other.dropped;
        self.in_flight_sum += other.in_flight_sum;
        self.in_flight_seen += other.in_flight_seen;
        self.last_done_s = self.last_done_s.max(other.last_done_s);
        self.in_system_s += other.in_system_s;
    }

    fn second(&mut self, t: f64) -> &mut Second {
        let i = t.max(0.0) as usize;
        while self.seconds.len() <= i {
            self.seconds.push(Second::new());
        }
        &mut self.seconds[i]
    }

    pub fn note_sent(&mut self, intended_s: f64, in_flight: usize) {
        self.sent += 1;
        self.second(intended_s).sent += 1;
        self.in_flight_sum += in_flight as u64;
        self.in_flight_seen += 1;
    }

    /// How late the generator itself was with one request: from when it could first have been sent
    /// (its intended start, or when a connection became free for it) to when it was.
    pub fn note_lag(&mut self, lag_s: f64) {
        let _ = self.lag.record(us(lag_s));
    }

    pub fn note_dropped(&mut self, intended_s: f64, in_flight: usize) {
        self.dropped += 1;
        self.second(intended_s).dropped += 1;
        self.in_flight_sum += in_flight as u64;
        self.in_flight_seen += 1;
    }

    /// Latency is counted from the intended start: a stalled server delays the requests that should
    /// have been sent meanwhile, and that delay is part of what their users would see.
    pub fn add(&mut self, o: &Outcome) {
        self.completed += 1;
        self.last_done_s = self.last_done_s.max(o.done_s);
        self.in_system_s += (o.done_s - o.sent_s).max(0.0);
        let latency = us(o.done_s - o.intended_s);
        let second = self.second(o.intended_s);
        second.completed += 1;
        match &o.failure {
            None => {
                second.latency.record(latency).ok();
                self.ok += 1;
                self.latency.record(latency).ok();
                self.service.record(us(o.done_s - o.sent_s)).ok();
                if let Some(h) = self.per_request.get_mut(o.request) {
                    h.record(latency).ok();
                }
            }
            Some(f) => {
                second.errors += 1;
                *self.failures.entry(f.label()).or_insert(0) += 1;
                if let Some(e) = self.per_request_errors.get_mut(o.request) {
                    *e += 1;
                }
            }
        }
    }
}
