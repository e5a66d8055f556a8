//! A latency or size distribution, as tracers' DDSketches carry it: the
//! representative value and count of every non-empty bin. Decoding the protobuf is
//! the wire crate's; merging and quantiles are here.

use serde::{Deserialize, Serialize};

/// Bins as (representative value, count), ascending by value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sketch {
    bins: Vec<(f64, f64)>,
    count: f64,
}

impl Sketch {
    /// From bins in any order; empty bins are left out.
    pub fn from_bins(mut bins: Vec<(f64, f64)>) -> Self {
        bins.retain(|b| b.1 > 0.0);
        bins.sort_by(|a, b| a.0.total_cmp(&b.0));
        let count = bins.iter().map(|b| b.1).sum();
        Self { bins, count }
    }

    pub fn bins(&self) -> &[(f64, f64)] {
        &self.bins
    }

    pub fn count(&self) -> f64 {
        self.count
    }

    /// Adds another sketch's bins (same mapping: equal values are one bin).
    pub fn merge(&mut self, other: &Sketch) {
        let mut merged = Vec::with_capacity(self.bins.len() + other.bins.len());
        let (mut i, mut j) = (0, 0);
        while i < self.bins.len() || j < other.bins.len() {
            let bin = match (self.bins.get(i), other.bins.get(j)) {
                (Some(x), Some(y)) if x.0 == y.0 => {
                    i += 1;
                    j += 1;
                    (x.0, x.1 + y.1)
                }
                (Some(x), Some(y)) if x.0 < y.0 => {
                    i += 1;
                    *x
                }
                (Some(x), None) => {
                    i += 1;
                    *x
                }
                (_, Some(y)) => {
                    j += 1;
                    *y
                }
                (None, None) => break,
            };
            merged.push(bin);
        }
        self.bins = merged;
        self.count += other.count;
    }

    /// The value at quantile `q` (0..=1), within the sketch's relative accuracy.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count <= 0.0 || !(0.0..=1.0).contains(&q) {
            return None;
        }
        let rank = q * (self.count - 1.0);
        let mut seen = 0.0;
        for &(value, count) in &self.bins {
            seen += count;
            if seen > rank {
                return Some(value);
            }
        }
        self.bins.last().map(|b| b.0)
    }

    /// The approximate sum of the values.
    pub fn sum(&self) -> f64 {
        self.bins.iter().map(|(v, c)| v * c).sum()
    }
}
