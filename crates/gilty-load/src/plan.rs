//! What to send: requests (method, URL, headers, body, weight), the arrival process and the limits.

use std::time::Duration;

/// Requests started per second, at most.
pub const MAX_RATE: f64 = 1e6;

#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Relative share of the arrivals that use this request.
    pub weight: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// Exactly 1/rate apart.
    Constant,
    /// Exponential gaps with mean 1/rate (a Poisson process), from a seeded generator.
    Poisson { seed: u64 },
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub requests: Vec<RequestSpec>,
    pub rate: f64,
    pub duration: Duration,
    pub arrivals: Arrivals,
    /// Arrivals beyond this many requests in flight are not sent and are counted as dropped.
    pub max_in_flight: usize,
    pub timeout: Duration,
    /// Connections per host, a hard cap: an arrival waits for a free one (and its wait is latency).
    pub connections: usize,
    pub threads: usize,
}

impl Plan {
    /// Checks what can be checked before sending anything; the error is one line for the user.
    pub fn validate(&self) -> Result<(), String> {
        if self.requests.is_empty() {
            return Err("no URL to load".into());
        }
        // Above a million arrivals a second the schedule only counts drops and timeouts, and one
        // that dense takes longer to walk than the run lasts (the CLI refuses it first).
        if !(self.rate > 0.0 && self.rate <= MAX_RATE) {
            return Err(format!(
                "rate must be a number greater than 0 and at most {MAX_RATE}, not {}",
                self.rate
            ));
        }
        for r in &self.requests {
            crate::http1::parse_url(&r.url)?;
            if !crate::http1::is_token(&r.method) {
                return Err(format!("{}: not an HTTP method", r.method));
            }
            for (k, v) in &r.headers {
                if !crate::http1::is_token(k)
                    || v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0)
                {
                    return Err(format!("{k}: {v}: not a valid header"));
                }
            }
            // NaN is not positive either.
            if r.weight.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
                return Err(format!("{}: weight must be positive", r.url));
            }
        }
        Ok(())
    }
}
