//! Where a write's time goes: a histogram per stage of an intake request, per
//! service that applies a stored batch, and of the waits for the engine's
//! lock. On `/metrics`, so that a slow tail can be traced to its stage from
//! outside (the soak reads them every minute; see RELIABILITY.md).
//!
//! Counting is a few relaxed atomic adds per observation: cheap enough to be
//! always on.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The buckets' upper bounds, in seconds: 50 µs to 2.5 s, closer together
/// where intake's tail lives (1-10 ms).
pub const BOUNDS_S: [f64; 17] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002, 0.003, 0.005, 0.007_5, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5,
];

/// Durations counted by bucket, and their sum.
#[derive(Debug, Default)]
pub struct Histogram {
    /// One per bound, and the last for what is above every bound.
    buckets: [AtomicU64; BOUNDS_S.len() + 1],
    sum_ns: AtomicU64,
}

/// A histogram as read at one time.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramSnapshot {
    /// Observations at or below each bound of [`BOUNDS_S`] (Prometheus'
    /// cumulative `le` buckets).
    pub at_or_below: [u64; BOUNDS_S.len()],
    pub count: u64,
    pub sum_seconds: f64,
}

impl Histogram {
    pub fn observe(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let bucket = BOUNDS_S.partition_point(|&bound| bound < seconds);
        self.buckets[bucket].fetch_add(1, Relaxed);
        self.sum_ns
            .fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    /// Times `f` into this histogram.
    pub fn time<T>(&self, f: impl FnOnce() -> T) -> T {
        let began = std::time::Instant::now();
        let out = f();
        self.observe(began.elapsed());
        out
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut at_or_below = [0u64; BOUNDS_S.len()];
        let mut running = 0u64;
        for (i, slot) in at_or_below.iter_mut().enumerate() {
            running += self.buckets[i].load(Relaxed);
            *slot = running;
        }
        HistogramSnapshot {
            at_or_below,
            count: running + self.buckets[BOUNDS_S.len()].load(Relaxed),
            sum_seconds: self.sum_ns.load(Relaxed) as f64 / 1e9,
        }
    }
}

impl HistogramSnapshot {
    /// The upper bound of the bucket the `q` quantile falls in (None when
    /// nothing was counted, infinite when it is past every bound): what a
    /// test can say of a histogram without interpolating.
    pub fn quantile_bound(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * self.count as f64).ceil().max(1.0) as u64;
        let i = self.at_or_below.partition_point(|&n| n < rank);
        Some(BOUNDS_S.get(i).copied().unwrap_or(f64::INFINITY))
    }
}

/// A stage of an intake request, in the order it is met.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The body read from the connection.
    Read,
    /// Waiting for a decoder, then decompressing, decoding and translating
    /// to records (on a blocking thread; includes waiting for the engine,
    /// which translation reads).
    Decode,
    /// A write handed to the writer thread and not yet taken: the writes
    /// before it being stored and applied. Every write, from every source.
    Queue,
    /// The store's append of a batch (on disk, or acknowledged by the log).
    Append,
    /// Applying a stored batch to every service ([`Timings::service`] says
    /// which took it).
    Apply,
}

impl Stage {
    pub const ALL: [Stage; 5] = [Stage::Read, Stage::Decode, Stage::Queue, Stage::Append, Stage::Apply];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Read => "read",
            Stage::Decode => "decode",
            Stage::Queue => "queue",
            Stage::Append => "append",
            Stage::Apply => "apply",
        }
    }
}

/// Who waited for the engine's lock.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EngineHolder {
    /// The writer, applying a batch (a chunk at a time).
    Apply,
    /// Everything that reads it: intake's translation, the API, the
    /// dashboard, housekeeping, alert rounds (a piece at a time in a walk).
    Read,
}

impl EngineHolder {
    pub const ALL: [EngineHolder; 2] = [EngineHolder::Apply, EngineHolder::Read];

    pub fn as_str(self) -> &'static str {
        match self {
            EngineHolder::Apply => "apply",
            EngineHolder::Read => "read",
        }
    }
}

/// The waits for the engine's lock, by who waited.
#[derive(Debug, Default)]
pub struct EngineWaits {
    waits: [Histogram; EngineHolder::ALL.len()],
}

impl EngineWaits {
    pub fn waited(&self, by: EngineHolder, took: Duration) {
        self.waits[by as usize].observe(took);
    }

    pub fn snapshot(&self, by: EngineHolder) -> HistogramSnapshot {
        self.waits[by as usize].snapshot()
    }
}

/// Every stage's histogram, each applying service's, and each listener's
/// requests'.
#[derive(Debug)]
pub struct Timings {
    stages: [Histogram; Stage::ALL.len()],
    /// By service name: the base's, then each feature's, in the order they
    /// apply.
    services: Vec<(&'static str, Histogram)>,
    /// By listener name (`intake`, `otlp`, `api`): the collector's own names,
    /// a fixed few, never a client's.
    listeners: std::sync::Mutex<Vec<(&'static str, Arc<Histogram>)>>,
}

impl Timings {
    /// Timings for services named `services` (the order they apply in).
    pub fn new(services: impl IntoIterator<Item = &'static str>) -> Self {
        Self {
            stages: Default::default(),
            services: services.into_iter().map(|s| (s, Histogram::default())).collect(),
            listeners: std::sync::Mutex::default(),
        }
    }

    /// The histogram of `listener`'s requests (from the request's arrival at
    /// its guard to the answer's head: body read, work, refusals alike);
    /// listeners of one name share it.
    pub fn listener(&self, listener: &'static str) -> Arc<Histogram> {
        let mut listeners = crate::sync::lock(&self.listeners);
        if let Some((_, h)) = listeners.iter().find(|(name, _)| *name == listener) {
            return h.clone();
        }
        let h = Arc::new(Histogram::default());
        listeners.push((listener, h.clone()));
        h
    }

    /// Each listener's name and requests' histogram, in the order they started.
    pub fn listeners(&self) -> Vec<(&'static str, Arc<Histogram>)> {
        crate::sync::lock(&self.listeners).clone()
    }

    pub fn stage(&self, stage: Stage) -> &Histogram {
        &self.stages[stage as usize]
    }

    /// The `i`th service's histogram, in the order given to [`Self::new`].
    pub fn service(&self, i: usize) -> Option<&Histogram> {
        self.services.get(i).map(|(_, h)| h)
    }

    /// Each service's name and histogram, in the order they apply.
    pub fn services(&self) -> impl Iterator<Item = (&'static str, &Histogram)> {
        self.services.iter().map(|(name, h)| (*name, h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_land_in_the_bucket_whose_bound_holds_them() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(50)); // on a bound: that bucket
        h.observe(Duration::from_micros(51));
        h.observe(Duration::from_millis(4));
        h.observe(Duration::from_secs(10)); // past every bound
        let s = h.snapshot();
        assert_eq!(s.count, 4);
        assert_eq!(s.at_or_below[0], 1);
        assert_eq!(s.at_or_below[1], 2);
        assert_eq!(s.at_or_below[BOUNDS_S.iter().position(|&b| b == 0.005).unwrap()], 3);
        assert_eq!(*s.at_or_below.last().unwrap(), 3);
        assert!((s.sum_seconds - 10.004_101).abs() < 1e-9, "{}", s.sum_seconds);
        assert_eq!(s.quantile_bound(0.5), Some(0.000_1));
        assert_eq!(s.quantile_bound(0.75), Some(0.005));
        assert_eq!(s.quantile_bound(0.99), Some(f64::INFINITY));
        assert_eq!(Histogram::default().snapshot().quantile_bound(0.99), None);
    }

    #[test]
    fn listeners_of_one_name_share_their_histogram() {
        let t = Timings::new([]);
        t.listener("intake").observe(Duration::from_millis(1));
        t.listener("api").observe(Duration::from_millis(1));
        t.listener("intake").observe(Duration::from_millis(2));
        let counts: Vec<(&str, u64)> = t.listeners().iter().map(|(n, h)| (*n, h.snapshot().count)).collect();
        assert_eq!(counts, [("intake", 2), ("api", 1)]);
    }

    #[test]
    fn bounds_rise_and_names_are_in_declaration_order() {
        assert!(BOUNDS_S.windows(2).all(|w| w[0] < w[1]));
        for (i, s) in Stage::ALL.iter().enumerate() {
            assert_eq!(*s as usize, i);
        }
        for (i, h) in EngineHolder::ALL.iter().enumerate() {
            assert_eq!(*h as usize, i);
        }
    }
}
