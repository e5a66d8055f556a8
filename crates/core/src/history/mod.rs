//! Offset history of one partition: when the log reached each end offset.
//!
//! A point `(end, at)` says "at time `at` the partition's end offset was `end`", that
//! is records `0..end` existed. Points are kept as a monotone staircase: `at` strictly
//! increasing, `end` non-decreasing, and a run of equal `end`s keeps only its first
//! and last sighting (when the end offset was first seen and last confirmed). The
//! last confirmation matters: it bounds when the next record can have been produced.
//!
//! The history holds at most `capacity` points; when it is full it is compacted to
//! three quarters of that (see [`Compaction`] for the two strategies and the error
//! each one guarantees). The newest point (the end offset) and the oldest point (the
//! lower-bound anchor) are never dropped, so `lag_messages` and lower bounds are
//! exact, and every answer satisfies
//!
//! ```text
//! |lag_seconds(compacted) - lag_seconds(full history)| <= max(min_resolution, precision * lag_seconds)
//! ```
//!
//! where `precision` starts at the configured value and only grows when the
//! budget cannot hold the history at that precision.

mod compaction;

pub use compaction::Compaction;

use crate::time::Millis;

/// One sighting of a partition's end offset.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    pub compaction: Compaction,
}

impl HistoryParams {
    /// The smallest capacity the compaction can work with.
    pub const MIN_CAPACITY: usize = 8;
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct OffsetHistory {
    points: Vec<Point>,
    /// Under [`Compaction::ByError`], `errs[i]` bounds (in ms, [`UNBOUNDED`] meaning
    /// "only by the segment's span") how far the full history's produce time for an
    /// offset in `(points[i-1].end, points[i].end]` can be from this one's; `errs[0]`
    /// is 0. Empty under [`Compaction::ByAge`], which bounds errors by spacing.
    errs: Vec<u32>,
    /// Slopes (ms per offset) of the lines from `points[n-2]` that stay within the
    /// streaming tolerance of every sighting merged into the newest segment; empty
    /// (`lo > hi`) when that segment is not one streaming built.
    door: Door,
    precision: f32,
}

/// A swinging door (the trend compression of process historians): the slopes
/// still open to the newest segment.
#[derive(Copy, Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Door {
    lo: f64,
    hi: f64,
}

impl Door {
    const OPEN: Door = Door {
        lo: f64::NEG_INFINITY,
        hi: f64::INFINITY,
    };
    const SHUT: Door = Door {
        lo: f64::INFINITY,
        hi: f64::NEG_INFINITY,
    };
}

/// An error bound too large for `u32` milliseconds: the segment's span bounds it.
const UNBOUNDED: u32 = u32::MAX;

/// How much a sighting says about the end offset.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Sighting {
    /// The end offset was exactly this (a broker's or client's high watermark).
    Exact,
    /// The end offset was at least this (a produce ack: others may have produced more).
    AtLeast,
}

impl OffsetHistory {
    /// Heap bytes one point costs under `compaction`.
    pub const fn point_bytes(compaction: Compaction) -> usize {
        match compaction {
            Compaction::ByAge => std::mem::size_of::<Point>(),
            Compaction::ByError => std::mem::size_of::<Point>() + std::mem::size_of::<u32>(),
        }
    }

    pub fn new(params: &HistoryParams) -> Self {
        Self {
            points: Vec::new(),
            errs: Vec::new(),
            door: Door::SHUT,
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
        self.points.capacity() * std::mem::size_of::<Point>() + self.errs.capacity() * std::mem::size_of::<u32>()
    }

    /// Forgets everything and starts again from one sighting (a topic reset).
    pub fn reset(&mut self, end: i64, at: Millis, params: &HistoryParams) {
        self.points.clear();
        self.errs.clear();
        self.door = Door::SHUT;
        self.precision = params.initial_precision;
        self.push(Point { end, at }, params);
    }

    /// Forgets the sightings above `end` (offsets a broker says do not exist);
    /// true when there were any. Histories rise, so they are a suffix.
    pub fn truncate_above(&mut self, end: i64) -> bool {
        let keep = self.points.partition_point(|p| p.end <= end);
        if keep == self.points.len() {
            return false;
        }
        self.points.truncate(keep);
        self.errs.truncate(keep);
        self.door = Door::SHUT;
        true
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
                // A plateau's segment holds no offset: its error bound stays as it is.
                self.points[n - 1].at = at;
            } else {
                self.push(Point { end, at }, params);
            }
        } else if at == last.at {
            self.points[n - 1].end = end;
            self.door = Door::SHUT;
            // Points dropped from the segment were bounded against the old line only.
            if self.errs.get(n - 1).is_some_and(|&e| e != 0) {
                self.errs[n - 1] = self.span_bound(n - 1);
            }
        } else if !self.swing(Point { end, at }, params) {
            self.push(Point { end, at }, params);
        }
        true
    }

    /// Merges a sighting that continues the newest segment's line within
    /// `min_resolution / 4`: the newest point moves to it and no point is added. The
    /// segment's bound is that tolerance whatever the number of merged sightings,
    /// since the door keeps every one of them within it.
    fn swing(&mut self, p: Point, params: &HistoryParams) -> bool {
        let n = self.points.len();
        if !Self::tracks_errors(params) || n < 2 || self.door.lo > self.door.hi {
            return false;
        }
        let (l, q) = (self.points[n - 2], self.points[n - 1]);
        if l.end == q.end {
            return false;
        }
        let tolerance = params.min_resolution_ms as f64 / 4.0;
        let offsets = (q.end - l.end) as f64;
        let rise = q.at.since(l.at) as f64;
        let door = Door {
            lo: self.door.lo.max((rise - tolerance) / offsets),
            hi: self.door.hi.min((rise + tolerance) / offsets),
        };
        let slope = p.at.since(l.at) as f64 / (p.end - l.end) as f64;
        if !(door.lo <= slope && slope <= door.hi) {
            return false;
        }
        self.points[n - 1] = p;
        self.errs[n - 1] = self.errs[n - 1].max(tolerance.ceil() as u32);
        self.door = door;
        true
    }

    fn tracks_errors(params: &HistoryParams) -> bool {
        params.compaction == Compaction::ByError
    }

    /// Appends a point; the segment that ends at it is exact (nothing lies between).
    fn push(&mut self, point: Point, params: &HistoryParams) {
        if self.points.len() >= params.capacity {
            self.compact(params);
        }
        let tracks = Self::tracks_errors(params);
        if self.points.len() == self.points.capacity() {
            // Grow in steps but never past the budget: doubling would overshoot it.
            let want = (self.points.len() * 2).clamp(4, params.capacity);
            self.points.reserve_exact(want - self.points.len());
            if tracks {
                self.errs.reserve_exact(want.saturating_sub(self.errs.len()));
            }
        }
        self.points.push(point);
        if tracks {
            self.errs.push(0);
        }
        self.door = Door::OPEN;
    }

    /// A sighting that arrives after newer ones (delayed buckets, several sources).
    fn insert_out_of_order(&mut self, point: Point, sighting: Sighting, params: &HistoryParams) -> bool {
        self.door = Door::SHUT;
        let idx = self.points.partition_point(|q| q.at <= point.at);
        let tracks = Self::tracks_errors(params);
        if idx > 0 {
            let prev = self.points[idx - 1];
            if point.end < prev.end || (point.end == prev.end && sighting == Sighting::AtLeast) {
                return false;
            }
            if prev.at == point.at {
                self.points[idx - 1].end = point.end;
                let stop = self.raise_from(idx, point.end);
                if tracks {
                    self.bound_by_span(idx - 1, stop);
                }
                self.normalize(idx.saturating_sub(2), stop);
                return true;
            }
        }
        self.points.insert(idx, point);
        if tracks {
            self.errs.insert(idx, 0);
        }
        let stop = self.raise_from(idx + 1, point.end);
        if tracks {
            self.bound_by_span(idx, stop);
        }
        self.normalize(idx.saturating_sub(1), stop);
        if self.points.len() > params.capacity {
            self.compact(params);
        }
        true
    }

    /// The end offset never goes down: later sightings below `end` were stale.
    /// Returns the index of the first point left as it was.
    fn raise_from(&mut self, from: usize, end: i64) -> usize {
        for (i, p) in self.points.iter_mut().enumerate().skip(from) {
            if p.end >= end {
                return i;
            }
            p.end = end;
        }
        self.points.len()
    }

    /// Segments `from..=to` changed shape: only their spans bound them now.
    fn bound_by_span(&mut self, from: usize, to: usize) {
        for i in from.max(1)..=to.min(self.points.len() - 1) {
            self.errs[i] = self.span_bound(i);
        }
    }

    /// The bound every segment has: both answers lie between its two points' times.
    fn span_bound(&self, i: usize) -> u32 {
        let span = self.points[i].at.since(self.points[i - 1].at);
        u32::try_from(span).unwrap_or(UNBOUNDED)
    }

    /// Keeps only the first and last point of every run of equal end offsets.
    /// The history was so before a change to points `lo..=hi`, so only they can
    /// have become the middle of a run: a late sighting costs its neighbourhood,
    /// not a scan of the whole history.
    fn normalize(&mut self, lo: usize, hi: usize) {
        let n = self.points.len();
        let interior = |points: &[Point], i: usize| {
            i > 0 && i + 1 < n && points[i - 1].end == points[i].end && points[i + 1].end == points[i].end
        };
        let window = lo..=hi.min(n.saturating_sub(1));
        if !window.clone().any(|i| interior(&self.points, i)) {
            return;
        }
        let keep: Vec<bool> = (0..n)
            .map(|i| !(window.contains(&i) && interior(&self.points, i)))
            .collect();
        let tracks = !self.errs.is_empty();
        let (mut out, mut dropped_before) = (0, false);
        for (i, &kept) in keep.iter().enumerate() {
            if !kept {
                dropped_before = true;
                continue;
            }
            self.points[out] = self.points[i];
            if tracks {
                self.errs[out] = self.errs[i];
            }
            if tracks && dropped_before {
                // A plateau's segment holds no offset; its span bounds it anyway.
                self.errs[out] = self.span_bound(out);
            }
            dropped_before = false;
            out += 1;
        }
        self.points.truncate(out);
        if tracks {
            self.errs.truncate(out);
        }
    }

    fn compact(&mut self, params: &HistoryParams) {
        let target = (params.capacity * 3 / 4).max(3);
        if self.points.len() <= target {
            return;
        }
        self.door = Door::SHUT;
        match params.compaction {
            Compaction::ByError => compaction::by_error(self, target, params.min_resolution_ms),
            Compaction::ByAge => compaction::by_age(self, target, params.min_resolution_ms),
        }
    }

    /// When the record at `offset` was produced: the moment the end offset passed
    /// `offset + 1`. `None` when the history does not reach that far.
    pub fn produce_time(&self, offset: i64) -> Option<ProduceTime> {
        let (target, idx) = self.first_reaching(offset)?;
        if idx == 0 {
            return Some(ProduceTime::NotAfter(self.points[0].at));
        }
        let (p, q) = (self.points[idx - 1], self.points[idx]);
        let fraction = (target - p.end) as f64 / (q.end - p.end) as f64;
        let t = p.at.0 as f64 + fraction * (q.at.0 - p.at.0) as f64;
        Some(ProduceTime::Interpolated(t))
    }

    /// How far (in ms) the produce time of `offset` can be from the full history's,
    /// as this history's compaction guarantees it; `None` outside the history.
    pub fn error_bound_ms(&self, offset: i64) -> Option<f64> {
        let (_, idx) = self.first_reaching(offset)?;
        if idx == 0 {
            return Some(0.0);
        }
        let span = self.points[idx].at.since(self.points[idx - 1].at) as f64;
        Some(match self.errs.get(idx) {
            Some(&e) if e != UNBOUNDED => f64::from(e).min(span),
            _ => span,
        })
    }

    /// `offset + 1` and the first point whose end reaches it; `None` when none does.
    fn first_reaching(&self, offset: i64) -> Option<(i64, usize)> {
        let target = offset.checked_add(1)?;
        let idx = self.points.partition_point(|q| q.end < target);
        (idx < self.points.len()).then_some((target, idx))
    }

    /// The end offset at `at` on the line between the sightings around it (the
    /// line produce times are read from), or the newest sighting's after it;
    /// `None` before the history.
    pub fn end_interpolated(&self, at: Millis) -> Option<f64> {
        let idx = self.points.partition_point(|q| q.at <= at);
        let p = self.points.get(idx.checked_sub(1)?)?;
        Some(match self.points.get(idx) {
            Some(q) => {
                p.end as f64 + q.end.saturating_sub(p.end) as f64 * at.since(p.at) as f64 / q.at.since(p.at) as f64
            }
            None => p.end as f64,
        })
    }

    /// The end offset as last seen at or before `at`.
    pub fn end_at(&self, at: Millis) -> Option<i64> {
        let idx = self.points.partition_point(|q| q.at <= at);
        (idx > 0).then(|| self.points[idx - 1].end)
    }
}

#[cfg(test)]
mod tests;
