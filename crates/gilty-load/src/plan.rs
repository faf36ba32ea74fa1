//! What to send: requests (method, URL, headers, body, weight), the arrival process and the limits.

use std::time::Duration;

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
    /// Idle keep-alive connections kept per host.
    pub connections: usize,
    pub threads: usize,
}

impl Plan {
    /// Checks what can be checked before sending anything; the error is one line for the user.
    pub fn validate(&self) -> Result<(), String> {
        if self.requests.is_empty() {
            return Err("no URL to load".into());
        }
        if !(self.rate > 0.0 && self.rate.is_finite()) {
            return Err(format!("rate must be a positive number, not {}", self.rate));
        }
        for r in &self.requests {
            if !r.url.starts_with("http://") {
                return Err(format!("{}: only http:// URLs are supported", r.url));
            }
            r.url.parse::<hyper::Uri>().map_err(|e| format!("{}: not a valid URL ({e})", r.url))?;
            hyper::Method::from_bytes(r.method.as_bytes()).map_err(|_| format!("{}: not an HTTP method", r.method))?;
            if !(r.weight > 0.0) {
                return Err(format!("{}: weight must be positive", r.url));
            }
        }
        Ok(())
    }
}
