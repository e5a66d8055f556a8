//! DDSketch, as tracers serialize it: protobuf from sketches-go's `ddsketch.proto`
//! with a logarithmic index mapping (Datadog's default `gamma = 1.015625`).

use std::collections::HashMap;
pub use streamsight_core::sketch::Sketch;

/// The mapping tracers use when the sketch does not carry one.
pub const DEFAULT_GAMMA: f64 = 1.015_625;
pub const DEFAULT_INDEX_OFFSET: f64 = 1.876_128_191_286_170_5;

#[derive(Clone, PartialEq, prost::Message)]
pub struct DdSketch {
    #[prost(message, optional, tag = "1")]
    pub mapping: Option<IndexMapping>,
    #[prost(message, optional, tag = "2")]
    pub positive_values: Option<Store>,
    #[prost(message, optional, tag = "3")]
    pub negative_values: Option<Store>,
    #[prost(double, tag = "4")]
    pub zero_count: f64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct IndexMapping {
    #[prost(double, tag = "1")]
    pub gamma: f64,
    #[prost(double, tag = "2")]
    pub index_offset: f64,
    /// 0 = NONE (a true logarithm); the others approximate it.
    #[prost(int32, tag = "3")]
    pub interpolation: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Store {
    #[prost(map = "sint32, double", tag = "1")]
    pub bin_counts: HashMap<i32, f64>,
    #[prost(double, repeated, tag = "2")]
    pub contiguous_bin_counts: Vec<f64>,
    #[prost(sint32, tag = "3")]
    pub contiguous_bin_index_offset: i32,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SketchError {
    #[error("sketch is not valid protobuf: {0}")]
    Protobuf(String),
    #[error("sketch mapping is invalid: gamma {0} must be a finite number above 1")]
    BadGamma(f64),
    #[error("sketch mapping uses interpolation {0}; only the logarithmic mapping (0) is supported")]
    UnsupportedInterpolation(i32),
    #[error("sketch has a negative, infinite or NaN count, or one beyond 2^53")]
    BadCount,
    #[error("sketch has a bin whose value is infinite or NaN")]
    BadValue,
    #[error("sketch has more than {MAX_BINS} bins")]
    TooManyBins,
}

/// Bins one sketch may hold: DDSketch at 1 % accuracy covers a nanosecond to a
/// year in under 3,000; more is an attack, and merged sketches would keep them.
pub const MAX_BINS: usize = 4_096;

/// Counts beyond this lose integer precision, and sums of them overflow.
const MAX_COUNT: f64 = 9_007_199_254_740_992.0;

/// Decodes a tracer's protobuf DDSketch.
pub fn decode(bytes: &[u8]) -> Result<Sketch, SketchError> {
    use prost::Message;
    let proto = DdSketch::decode(bytes).map_err(|e| SketchError::Protobuf(e.to_string()))?;
    from_proto(&proto)
}

pub fn from_proto(proto: &DdSketch) -> Result<Sketch, SketchError> {
    let (gamma, offset) = match &proto.mapping {
        Some(m) if m.interpolation != 0 => {
            return Err(SketchError::UnsupportedInterpolation(m.interpolation));
        }
        Some(m) if m.gamma == 0.0 && m.index_offset == 0.0 => (DEFAULT_GAMMA, DEFAULT_INDEX_OFFSET),
        Some(m) => (m.gamma, m.index_offset),
        None => (DEFAULT_GAMMA, DEFAULT_INDEX_OFFSET),
    };
    if !(gamma.is_finite() && gamma > 1.0 && offset.is_finite()) {
        return Err(SketchError::BadGamma(gamma));
    }
    let mapping = Mapping::new(gamma, offset);
    let stores = [proto.negative_values.as_ref(), proto.positive_values.as_ref()];
    let declared: usize = stores
        .into_iter()
        .flatten()
        .map(|s| s.bin_counts.len() + s.contiguous_bin_counts.len())
        .sum();
    if declared > MAX_BINS {
        return Err(SketchError::TooManyBins);
    }
    let mut bins = Vec::new();
    let mut push = |value: f64, count: f64| -> Result<(), SketchError> {
        if !(count.is_finite() && (0.0..=MAX_COUNT).contains(&count)) {
            return Err(SketchError::BadCount);
        }
        if count > 0.0 {
            if !value.is_finite() {
                return Err(SketchError::BadValue);
            }
            bins.push((value, count));
        }
        Ok(())
    };
    if let Some(store) = &proto.negative_values {
        for (index, count) in store_bins(store) {
            push(-mapping.value(index), count)?;
        }
    }
    push(0.0, proto.zero_count)?;
    if let Some(store) = &proto.positive_values {
        for (index, count) in store_bins(store) {
            push(mapping.value(index), count)?;
        }
    }
    Ok(Sketch::from_bins(bins))
}

fn store_bins(store: &Store) -> impl Iterator<Item = (i32, f64)> + '_ {
    let contiguous = store
        .contiguous_bin_counts
        .iter()
        .enumerate()
        .map(move |(i, &c)| (store.contiguous_bin_index_offset.saturating_add(i as i32), c));
    store.bin_counts.iter().map(|(&i, &c)| (i, c)).chain(contiguous)
}

/// The logarithmic mapping: bin `i` holds values in `[γ^(i-o), γ^(i+1-o))`.
#[derive(Copy, Clone, Debug)]
pub struct Mapping {
    gamma: f64,
    offset: f64,
    multiplier: f64,
}

impl Default for Mapping {
    fn default() -> Self {
        Self::new(DEFAULT_GAMMA, DEFAULT_INDEX_OFFSET)
    }
}

impl Mapping {
    pub fn new(gamma: f64, offset: f64) -> Self {
        Self {
            gamma,
            offset,
            multiplier: 1.0 / gamma.ln(),
        }
    }

    pub fn index(&self, value: f64) -> i32 {
        (value.ln() * self.multiplier + self.offset).floor() as i32
    }

    /// The bin's representative: its lower bound times `1 + relative accuracy`.
    pub fn value(&self, index: i32) -> f64 {
        let lower = ((f64::from(index) - self.offset) / self.multiplier).exp();
        lower * 2.0 * self.gamma / (1.0 + self.gamma)
    }

    /// A sketch of `values` in the tracers' wire form.
    pub fn encode(&self, values: &[f64]) -> Vec<u8> {
        let mut b = SketchBuilder::with_mapping(*self);
        for &v in values {
            b.add(v);
        }
        b.encode()
    }
}

/// Builds a sketch value by value, as the SDK does on its hot path: adding to a
/// bin that exists allocates nothing.
#[derive(Clone, Debug)]
pub struct SketchBuilder {
    mapping: Mapping,
    positive: HashMap<i32, f64, foldhash::fast::FixedState>,
    zero: f64,
}

impl Default for SketchBuilder {
    fn default() -> Self {
        Self::with_mapping(Mapping::default())
    }
}

impl SketchBuilder {
    pub fn with_mapping(mapping: Mapping) -> Self {
        Self {
            mapping,
            positive: HashMap::default(),
            zero: 0.0,
        }
    }

    /// Adds one value; values at or below 0 (and NaN) count as zero: latencies and
    /// sizes are never negative, a clock that steps back must not make them so.
    pub fn add(&mut self, value: f64) {
        if value > 0.0 && value.is_finite() {
            *self.positive.entry(self.mapping.index(value)).or_default() += 1.0;
        } else {
            self.zero += 1.0;
        }
    }

    pub fn count(&self) -> f64 {
        self.zero + self.positive.values().sum::<f64>()
    }

    pub fn encode(&self) -> Vec<u8> {
        use prost::Message;
        DdSketch {
            mapping: Some(IndexMapping {
                gamma: self.mapping.gamma,
                index_offset: self.mapping.offset,
                interpolation: 0,
            }),
            positive_values: Some(Store {
                bin_counts: self.positive.iter().map(|(&k, &v)| (k, v)).collect(),
                ..Store::default()
            }),
            negative_values: None,
            zero_count: self.zero,
        }
        .encode_to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_within_relative_accuracy() {
        let values: Vec<f64> = (1..=1000).map(|i| f64::from(i) / 100.0).collect();
        let bytes = Mapping::default().encode(&values);
        let s = decode(&bytes).unwrap();
        assert_eq!(s.count(), 1000.0);
        for (q, expected) in [(0.5, 5.0), (0.95, 9.5), (0.99, 9.9)] {
            let got = s.quantile(q).unwrap();
            assert!((got - expected).abs() / expected < 0.02, "q{q}: {got} vs {expected}");
        }
    }

    #[test]
    fn merging_adds_counts() {
        let m = Mapping::default();
        let mut a = decode(&m.encode(&[1.0, 2.0])).unwrap();
        let b = decode(&m.encode(&[2.0, 3.0, 3.0])).unwrap();
        a.merge(&b);
        assert_eq!(a.count(), 5.0);
        assert_eq!(a.bins().len(), 3);
        let median = a.quantile(0.5).unwrap();
        assert!((median - 2.0).abs() < 0.05, "{median}");
    }

    #[test]
    fn empty_and_zero_sketches() {
        let s = decode(&[]).unwrap();
        assert_eq!(s.quantile(0.5), None);
        let s = decode(&Mapping::default().encode(&[0.0, 0.0])).unwrap();
        assert_eq!(s.quantile(0.99), Some(0.0));
    }

    #[test]
    fn bad_sketches_say_why() {
        assert!(matches!(decode(&[0xff, 0xff, 0xff]), Err(SketchError::Protobuf(_))));
        use prost::Message;
        let bad = DdSketch {
            mapping: Some(IndexMapping {
                gamma: 0.5,
                index_offset: 0.0,
                interpolation: 0,
            }),
            ..Default::default()
        };
        assert_eq!(decode(&bad.encode_to_vec()), Err(SketchError::BadGamma(0.5)));
        let nan = DdSketch {
            zero_count: f64::NAN,
            ..Default::default()
        };
        assert_eq!(decode(&nan.encode_to_vec()), Err(SketchError::BadCount));
        let huge = DdSketch {
            zero_count: 1e300,
            ..Default::default()
        };
        assert_eq!(decode(&huge.encode_to_vec()), Err(SketchError::BadCount));
        // A bin index far enough out that its value is infinite.
        let far = DdSketch {
            positive_values: Some(Store {
                bin_counts: HashMap::from([(i32::MAX, 1.0)]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(decode(&far.encode_to_vec()), Err(SketchError::BadValue));
        let wide = DdSketch {
            positive_values: Some(Store {
                contiguous_bin_counts: vec![1.0; MAX_BINS + 1],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(decode(&wide.encode_to_vec()), Err(SketchError::TooManyBins));
    }
}
