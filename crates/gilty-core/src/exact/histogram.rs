//! Duration distributions: log2 histograms (the shape of SystemTap's @hist_log) and exact
//! percentiles.

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Distribution {
    pub count: u64,
    pub total_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// (bucket lower bound in ns = 2^k, count); bucket k holds durations in [2^k, 2^(k+1)); 0 ns
    /// goes to bucket 0.
    pub log2_hist_ns: Vec<(u64, u64)>,
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn log2_bucket(ns: u64) -> u64 {
    if ns == 0 {
        0
    } else {
        1u64 << (63 - ns.leading_zeros())
    }
}

pub fn distribution(mut durations: Vec<u64>) -> Distribution {
    durations.sort_unstable();
    let mut hist: Vec<(u64, u64)> = Vec::new();
    for &d in &durations {
        let b = log2_bucket(d);
        match hist.last_mut() {
            Some((lo, n)) if *lo == b => *n += 1,
            _ => hist.push((b, 1)),
        }
    }
    Distribution {
        count: durations.len() as u64,
        total_ns: durations.iter().sum(),
        p50_ns: percentile(&durations, 50.0),
        p90_ns: percentile(&durations, 90.0),
        p99_ns: percentile(&durations, 99.0),
        max_ns: durations.last().copied().unwrap_or(0),
        log2_hist_ns: hist,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_and_percentiles() {
        assert_eq!(log2_bucket(1), 1);
        assert_eq!(log2_bucket(1023), 512);
        assert_eq!(log2_bucket(1024), 1024);
        let d = distribution((1..=100).collect());
        assert_eq!(d.count, 100);
        assert_eq!(d.p50_ns, 50);
        assert_eq!(d.p90_ns, 90);
        assert_eq!(d.p99_ns, 99);
        assert_eq!(d.max_ns, 100);
        assert_eq!(d.total_ns, 5050);
        assert_eq!(
            d.log2_hist_ns,
            vec![(1, 1), (2, 2), (4, 4), (8, 8), (16, 16), (32, 32), (64, 37)]
        );
        assert_eq!(distribution(vec![]), Distribution::default());
    }
}
