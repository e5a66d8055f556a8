//! Offset history of one partition: when the log reached each end offset.
//!
//! A point `(end, at)` says "at time `at` the partition's end offset was `end`", that
//! is records `0..end` existed. Points are kept as a monotone staircase: `at` strictly
//! increasing, `end` non-decreasing, and a run of equal `end`s keeps only its first
//! and last sighting (when the end offset was first seen and last confirmed). The
//! last confirmation matters: it bounds when the next record can have been produced.
//!
//! # Downsampling rule
//!
//! The history holds at most `capacity` points. When it is full it is compacted to
//! three quarters of that, dropping interior points `i` (never the oldest, never the
//! newest) for which the gap between the kept neighbours stays within
//!
//! ```text
//! t(right) - t(left) <= max(min_resolution, precision * (now - t(right)))
//! ```
//!
//! where `now` is the newest point's time. Recent points (small age) therefore stay
//! dense, old points thin out geometrically. If one pass cannot reach the target,
//! the partition's `precision` is raised by half and the pass repeated; it never
//! goes down again until the history is reset.
//!
//! # Worst-case error
//!
//! Any answer interpolated between kept neighbours `l` and `r` lies in
//! `[t(l), t(r)]`, and so does the answer the full history would give, so they
//! differ by at most `t(r) - t(l)`. Both lag values are at least `now - t(r)`, and
//! `now` only grows after a compaction, hence for every query
//!
//! ```text
//! |lag_seconds(downsampled) - lag_seconds(full)| <= max(min_resolution, precision * lag_seconds)
//! ```
//!
//! The newest point (the end offset) and the oldest point (the lower-bound anchor)
//! are never dropped, so `lag_messages` and lower bounds are exact.

use crate::time::Millis;

/// One sighting of a partition's end offset.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Point {
    pub end: i64,
    pub at: Millis,
}

/// When the record at some offset was produced, as far as the history knows.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum ProduceTime {
    /// Interpolated between two sightings, in milliseconds.
    Interpolated(f64),
    /// The record predates the whole history: produced no later than this.
    NotAfter(Millis),
}

/// Limits shared by all histories of an engine.
#[derive(Copy, Clone, Debug)]
pub struct HistoryParams {
    pub capacity: usize,
    pub min_resolution_ms: i64,
    pub initial_precision: f32,
}

impl HistoryParams {
    /// The smallest capacity the compaction can work with.
    pub const MIN_CAPACITY: usize = 8;
}

#[derive(Clone, Debug)]
pub struct OffsetHistory {
    points: Vec<Point>,
    precision: f32,
}

/// Rounds of raising the precision before falling back to dropping every other point.
const MAX_COMPACTION_ROUNDS: usize = 64;

/// How much a sighting says about the end offset.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Sighting {
    /// The end offset was exactly this (a broker's or client's high watermark).
    Exact,
    /// The end offset was at least this (a produce ack: others may have produced more).
    AtLeast,
}

impl OffsetHistory {
    pub const POINT_BYTES: usize = std::mem::size_of::<Point>();

    pub fn new(params: &HistoryParams) -> Self {
        Self {
            points: Vec::new(),
            precision: params.initial_precision,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn points(&self) -> &[Point] {
        &self.points
    }

    /// The relative error bound currently guaranteed (see the module docs).
    pub fn precision(&self) -> f32 {
        self.precision
    }

    /// The newest end offset.
    pub fn end(&self) -> Option<i64> {
        self.points.last().map(|p| p.end)
    }

    pub fn newest(&self) -> Option<Point> {
        self.points.last().copied()
    }

    pub fn oldest(&self) -> Option<Point> {
        self.points.first().copied()
    }

    /// Bytes this history holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.points.capacity() * std::mem::size_of::<Point>()
    }

    /// Forgets everything and starts again from one sighting (a topic reset).
    pub fn reset(&mut self, end: i64, at: Millis, params: &HistoryParams) {
        self.points.clear();
        self.precision = params.initial_precision;
        self.points.push(Point { end, at });
    }

    /// Records that the end offset was `end` at `at`. Returns false when the point
    /// told nothing new (an older or equal end already known at that time).
    ///
    /// Only an exact sighting extends a plateau: "still `end` at `at`" is not
    /// something a produce ack can say.
    pub fn insert(&mut self, end: i64, at: Millis, sighting: Sighting, params: &HistoryParams) -> bool {
        let n = self.points.len();
        let Some(last) = self.points.last().copied() else {
            self.push(Point { end, at }, params);
            return true;
        };
        if at < last.at {
            return self.insert_out_of_order(Point { end, at }, sighting, params);
        }
        if end < last.end || (end == last.end && (at == last.at || sighting == Sighting::AtLeast)) {
            return false;
        }
        if end == last.end {
            if n >= 2 && self.points[n - 2].end == end {
                self.points[n - 1].at = at;
            } else {
                self.push(Point { end, at }, params);
            }
        } else if at == last.at {
            self.points[n - 1].end = end;
        } else {
            self.push(Point { end, at }, params);
        }
        true
    }

    fn push(&mut self, point: Point, params: &HistoryParams) {
        if self.points.len() >= params.capacity {
            self.compact(params);
        }
        if self.points.len() == self.points.capacity() {
            // Grow in steps but never past the budget: doubling would overshoot it.
            let want = (self.points.len() * 2).clamp(4, params.capacity);
            self.points.reserve_exact(want - self.points.len());
        }
        self.points.push(point);
    }

    /// A sighting that arrives after newer ones (delayed buckets, several sources).
    fn insert_out_of_order(&mut self, point: Point, sighting: Sighting, params: &HistoryParams) -> bool {
        let idx = self.points.partition_point(|q| q.at <= point.at);
        if idx > 0 {
            let prev = self.points[idx - 1];
            if point.end < prev.end || (point.end == prev.end && sighting == Sighting::AtLeast) {
                return false;
            }
            if prev.at == point.at {
                self.points[idx - 1].end = point.end;
                self.raise_from(idx, point.end);
                self.normalize();
                return true;
            }
        }
        self.points.insert(idx, point);
        self.raise_from(idx + 1, point.end);
        self.normalize();
        if self.points.len() > params.capacity {
            self.compact(params);
        }
        true
    }

    /// The end offset never goes down: later sightings below `end` were stale.
    fn raise_from(&mut self, from: usize, end: i64) {
        for p in &mut self.points[from..] {
            if p.end >= end {
                break;
            }
            p.end = end;
        }
    }

    /// Keeps only the first and last point of every run of equal end offsets.
    fn normalize(&mut self) {
        let mut keep = Vec::with_capacity(self.points.len());
        let n = self.points.len();
        for i in 0..n {
            let interior = i > 0
                && i + 1 < n
                && self.points[i - 1].end == self.points[i].end
                && self.points[i + 1].end == self.points[i].end;
            if !interior {
                keep.push(self.points[i]);
            }
        }
        if keep.len() != n {
            self.points.clear();
            self.points.extend_from_slice(&keep);
        }
    }

    fn compact(&mut self, params: &HistoryParams) {
        let target = (params.capacity * 3 / 4).max(3);
        let Some(now) = self.points.last().map(|p| p.at) else {
            return;
        };
        for _ in 0..MAX_COMPACTION_ROUNDS {
            self.compaction_pass(now, params.min_resolution_ms);
            if self.points.len() <= target {
                return;
            }
            self.precision *= 1.5;
        }
        // Unreachable for any history of strictly increasing times, kept as a guard.
        let last = self.points.len() - 1;
        let mut i = 0;
        self.points.retain(|_| {
            i += 1;
            i == 1 || i - 1 == last || i % 2 == 0
        });
    }

    fn compaction_pass(&mut self, now: Millis, min_resolution_ms: i64) {
        let n = self.points.len();
        if n < 3 {
            return;
        }
        let precision = f64::from(self.precision);
        let allowed = |right: Millis| -> i64 {
            let by_age = (precision * now.since(right) as f64) as i64;
            by_age.max(min_resolution_ms)
        };
        let mut out = 1; // points[0] always stays
        for i in 1..n - 1 {
            let left = self.points[out - 1];
            let right = self.points[i + 1];
            if right.at.since(left.at) <= allowed(right.at) {
                continue;
            }
            self.points[out] = self.points[i];
            out += 1;
        }
        self.points[out] = self.points[n - 1];
        self.points.truncate(out + 1);
    }

    /// When the record at `offset` was produced: the moment the end offset passed
    /// `offset + 1`. `None` when the history does not reach that far.
    pub fn produce_time(&self, offset: i64) -> Option<ProduceTime> {
        let target = offset.checked_add(1)?;
        let idx = self.points.partition_point(|q| q.end < target);
        if idx == self.points.len() {
            return None;
        }
        if idx == 0 {
            return Some(ProduceTime::NotAfter(self.points[0].at));
        }
        let (p, q) = (self.points[idx - 1], self.points[idx]);
        let fraction = (target - p.end) as f64 / (q.end - p.end) as f64;
        let t = p.at.0 as f64 + fraction * (q.at.0 - p.at.0) as f64;
        Some(ProduceTime::Interpolated(t))
    }

    /// The end offset as last seen at or before `at`.
    pub fn end_at(&self, at: Millis) -> Option<i64> {
        let idx = self.points.partition_point(|q| q.at <= at);
        (idx > 0).then(|| self.points[idx - 1].end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(capacity: usize) -> HistoryParams {
        HistoryParams {
            capacity,
            min_resolution_ms: 1000,
            initial_precision: 0.01,
        }
    }

    fn history(points: &[(i64, i64)], p: &HistoryParams) -> OffsetHistory {
        let mut h = OffsetHistory::new(p);
        for &(end, at) in points {
            h.insert(end, Millis(at), Sighting::Exact, p);
        }
        h
    }

    fn interpolated(h: &OffsetHistory, offset: i64) -> f64 {
        match h.produce_time(offset) {
            Some(ProduceTime::Interpolated(t)) => t,
            other => panic!("expected an interpolated time, got {other:?}"),
        }
    }

    #[test]
    fn interpolates_between_sightings() {
        let p = params(64);
        let h = history(&[(0, 0), (100, 10_000)], &p);
        assert_eq!(interpolated(&h, 49), 5_000.0);
        assert_eq!(interpolated(&h, 99), 10_000.0);
        assert_eq!(h.produce_time(100), None);
    }

    #[test]
    fn records_older_than_the_history_are_a_lower_bound() {
        let p = params(64);
        let h = history(&[(100, 5_000), (200, 10_000)], &p);
        assert_eq!(h.produce_time(99), Some(ProduceTime::NotAfter(Millis(5_000))));
        assert_eq!(h.produce_time(3), Some(ProduceTime::NotAfter(Millis(5_000))));
    }

    #[test]
    fn plateau_keeps_first_and_last_sighting() {
        let p = params(64);
        let h = history(
            &[
                (100, 0),
                (100, 10_000),
                (100, 20_000),
                (100, 3_590_000),
                (102, 3_600_000),
            ],
            &p,
        );
        assert_eq!(
            h.points(),
            &[
                Point {
                    end: 100,
                    at: Millis(0)
                },
                Point {
                    end: 100,
                    at: Millis(3_590_000)
                },
                Point {
                    end: 102,
                    at: Millis(3_600_000)
                },
            ]
        );
        // The idle hour is not smeared over the two records produced at its end.
        assert_eq!(interpolated(&h, 100), 3_595_000.0);
    }

    #[test]
    fn an_ack_never_claims_the_end_stayed_put() {
        let p = params(64);
        let mut h = OffsetHistory::new(&p);
        h.insert(100, Millis(0), Sighting::AtLeast, &p);
        assert!(!h.insert(100, Millis(5_000), Sighting::AtLeast, &p));
        assert!(h.insert(100, Millis(5_000), Sighting::Exact, &p));
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn lower_or_repeated_sightings_change_nothing() {
        let p = params(64);
        let mut h = history(&[(10, 0), (20, 1_000)], &p);
        assert!(!h.insert(15, Millis(2_000), Sighting::Exact, &p));
        assert!(!h.insert(20, Millis(1_000), Sighting::Exact, &p));
        assert_eq!(h.end(), Some(20));
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn out_of_order_sighting_fills_a_gap() {
        let p = params(64);
        let mut h = history(&[(0, 0), (100, 10_000)], &p);
        assert!(h.insert(90, Millis(2_000), Sighting::Exact, &p));
        assert_eq!(interpolated(&h, 44), 1_000.0);
    }

    #[test]
    fn out_of_order_sighting_above_later_ones_raises_them() {
        let p = params(64);
        let mut h = history(&[(0, 0), (50, 5_000), (60, 6_000), (200, 10_000)], &p);
        assert!(h.insert(100, Millis(4_000), Sighting::Exact, &p));
        let ends: Vec<i64> = h.points().iter().map(|q| q.end).collect();
        assert_eq!(ends, vec![0, 100, 100, 200]);
        assert_eq!(h.points()[2].at, Millis(6_000));
    }

    #[test]
    fn out_of_order_sighting_below_an_earlier_one_is_stale() {
        let p = params(64);
        let mut h = history(&[(0, 0), (100, 1_000), (200, 10_000)], &p);
        assert!(!h.insert(50, Millis(2_000), Sighting::Exact, &p));
        assert_eq!(h.len(), 3);
    }

    #[test]
    fn compaction_respects_capacity_and_keeps_both_ends() {
        let p = params(32);
        let mut h = OffsetHistory::new(&p);
        for i in 0..10_000 {
            h.insert(i * 7, Millis(i * 1_000), Sighting::AtLeast, &p);
            assert!(h.len() <= p.capacity);
        }
        assert_eq!(h.oldest(), Some(Point { end: 0, at: Millis(0) }));
        assert_eq!(
            h.newest(),
            Some(Point {
                end: 9_999 * 7,
                at: Millis(9_999_000)
            })
        );
        assert!(h.heap_bytes() <= p.capacity * std::mem::size_of::<Point>());
    }

    #[test]
    fn compaction_keeps_recent_points_denser_than_old_ones() {
        let p = params(64);
        let mut h = OffsetHistory::new(&p);
        for i in 0..100_000 {
            h.insert(i, Millis(i * 1_000), Sighting::AtLeast, &p);
        }
        let pts = h.points();
        let n = pts.len();
        let recent_gap = pts[n - 1].at.since(pts[n - 2].at);
        let old_gap = pts[2].at.since(pts[1].at);
        assert!(recent_gap < old_gap, "recent gap {recent_gap} ms, old gap {old_gap} ms");
    }

    #[test]
    fn linear_production_interpolates_exactly_after_compaction() {
        let p = params(16);
        let mut h = OffsetHistory::new(&p);
        for o in 0..=1000 {
            h.insert(o + 1, Millis(o * 100), Sighting::AtLeast, &p);
        }
        assert!(h.len() <= 16);
        assert!((interpolated(&h, 500) - 50_000.0).abs() < 1e-6);
    }

    #[test]
    fn end_at_looks_back_in_time() {
        let p = params(64);
        let h = history(&[(10, 1_000), (20, 2_000)], &p);
        assert_eq!(h.end_at(Millis(500)), None);
        assert_eq!(h.end_at(Millis(1_500)), Some(10));
        assert_eq!(h.end_at(Millis(9_000)), Some(20));
    }
}
