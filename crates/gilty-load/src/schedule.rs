//! Intended start times of the requests and which request each one uses: decided before sending,
//! never by when earlier requests finished (an open model).

use crate::plan::Arrivals;

/// xorshift64*: a small seeded generator, enough for arrival gaps and request choice.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    /// Uniform in (0, 1].
    pub fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        ((x >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
}

pub struct Schedule {
    period_s: f64,
    arrivals: Arrivals,
    rng: Rng,
    next_s: f64,
    count: u64,
    cumulative: Vec<f64>,
}

impl Schedule {
    pub fn new(rate: f64, arrivals: Arrivals, weights: &[f64]) -> Schedule {
        let seed = match arrivals {
            Arrivals::Poisson { seed } => seed,
            Arrivals::Constant => 0x9E37_79B9_7F4A_7C15,
        };
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let cumulative = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        Schedule {
            period_s: 1.0 / rate,
            arrivals,
            rng: Rng::new(seed),
            next_s: 0.0,
            count: 0,
            cumulative,
        }
    }

    /// (seconds after the start, request index) of the next arrival.
    pub fn next_arrival(&mut self) -> (f64, usize) {
        // Constant arrivals are computed, not summed, so rounding never adds or loses one at the
        // end.
        let at = match self.arrivals {
            Arrivals::Constant => self.count as f64 * self.period_s,
            Arrivals::Poisson { .. } => {
                let at = self.next_s;
                self.next_s += -self.rng.next_f64().ln() * self.period_s;
                at
            }
        };
        self.count += 1;
        let pick = if self.cumulative.len() == 1 {
            0
        } else {
            let u = self.rng.next_f64();
            self.cumulative
                .iter()
                .position(|c| u <= *c)
                .unwrap_or(self.cumulative.len() - 1)
        };
        (at, pick)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_arrivals_are_evenly_spaced() {
        let mut s = Schedule::new(100.0, Arrivals::Constant, &[1.0]);
        let times: Vec<f64> = (0..5).map(|_| s.next_arrival().0).collect();
        for (i, t) in times.iter().enumerate() {
            assert!((t - i as f64 * 0.01).abs() < 1e-12);
        }
    }

    #[test]
    fn poisson_gaps_have_the_right_mean_and_weights_are_honoured() {
        let mut s = Schedule::new(1000.0, Arrivals::Poisson { seed: 7 }, &[3.0, 1.0]);
        let n = 100_000;
        let mut last = 0.0;
        let mut first = 0;
        for _ in 0..n {
            let (t, i) = s.next_arrival();
            last = t;
            if i == 0 {
                first += 1;
            }
        }
        let mean_gap = last / (n - 1) as f64;
        assert!((mean_gap - 0.001).abs() < 0.00002, "{mean_gap}");
        let share = first as f64 / n as f64;
        assert!((share - 0.75).abs() < 0.01, "{share}");
    }
}
