//! The two ways a full history is compacted to three quarters of its capacity.
//!
//! Both keep the first and the newest point and guarantee, for every query,
//!
//! ```text
//! |lag_seconds(compacted) - lag_seconds(full)| <= max(min_resolution, precision * lag_seconds)
//! ```
//!
//! by only merging a segment `(l, r)` whose error bound `b` satisfies
//! `b <= max(min_resolution, precision * (now - t(r)))`, `now` being the newest
//! point's time: every lag answered inside the segment is at least `now - t(r)`, and
//! `now` only grows afterwards. When no such merge is left before the target is
//! reached, `precision` is raised by half and the search goes on; it never goes down
//! again until the history is reset.

use super::{OffsetHistory, Point, UNBOUNDED};
use crate::time::Millis;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How a full history chooses the points it drops.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compaction {
    /// Drop first the points whose removal changes interpolated produce times least
    /// (Visvalingam–Whyatt on the offset→time curve, with the error of every merged
    /// segment tracked against the full history). Steady stretches collapse to their
    /// ends; bursts and idle edges stay, whatever their age. 4 bytes more per point.
    #[default]
    ByError,
    /// Drop points by spacing: recent points dense, older ones geometrically
    /// thinner, the error bound being a merged segment's whole span. Error grows with
    /// the lag (2-5 % at hours). Kept for comparison and as a fallback.
    ByAge,
}

/// Rounds of raising the precision before giving up on the error rule.
const MAX_ROUNDS: usize = 64;

/// What a segment may be off by and still be merged (see the module docs).
fn allowed_ms(precision: f32, min_resolution_ms: i64, now: Millis, right: Millis) -> f64 {
    (f64::from(precision) * now.since(right) as f64).max(min_resolution_ms as f64)
}

/// Error-driven compaction: a greedy Visvalingam–Whyatt over a linked list of the
/// points, cheapest removal first, with the bound of each merged segment carried
/// along. Removing `i` between its kept neighbours `l` and `r` bounds the new
/// segment by `min(span(l, r), max(err(l, i), err(i, r)) + dev(i))`, where `dev(i)`
/// is how far `i` lies from the line `l`-`r`: the two lines it replaces differ from
/// that line by at most `dev(i)`, and each differs from the full history by at most
/// its own bound.
pub(super) fn by_error(h: &mut OffsetHistory, target: usize, min_resolution_ms: i64) {
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        by_error_with(h, target, min_resolution_ms, &mut scratch);
    });
}

/// Buffers a compaction needs, kept per thread so that compacting allocates nothing.
#[derive(Debug, Default)]
struct Scratch {
    nodes: Vec<Node>,
    heap: Vec<Reverse<u64>>,
    deferred: Vec<u32>,
}

/// A point in the linked list of those still kept.
#[derive(Copy, Clone, Debug)]
struct Node {
    prev: u32,
    next: u32,
    /// Priority of dropping it; entries in the heap with another value are stale.
    cost: u32,
    /// The merged segment's bound if it is dropped, computed with `cost`.
    bound: u32,
    removed: bool,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

fn by_error_with(h: &mut OffsetHistory, target: usize, min_resolution_ms: i64, scratch: &mut Scratch) {
    let n = h.points.len();
    let now = h.points[n - 1].at;
    let key = |c: u32, i: usize| Reverse((u64::from(c) << 32) | i as u64);
    let nodes = &mut scratch.nodes;
    nodes.clear();
    nodes.extend((0..n).map(|i| Node {
        prev: (i as u32).saturating_sub(1),
        next: i as u32 + 1,
        cost: UNBOUNDED,
        bound: UNBOUNDED,
        removed: false,
    }));
    let mut entries = std::mem::take(&mut scratch.heap);
    entries.clear();
    for (i, node) in nodes.iter_mut().enumerate().take(n - 1).skip(1) {
        (node.cost, node.bound) = removal(&h.points, &h.errs, i - 1, i, i + 1);
        entries.push(key(node.cost, i));
    }
    let mut heap = BinaryHeap::from(entries);
    let mut to_remove = n - target;
    scratch.deferred.clear();
    for round in 0..=MAX_ROUNDS {
        // Past the last round every merge is taken, cheapest first: the bounds stay
        // true, only the precision no longer holds (times years apart, not seen yet).
        let force = round == MAX_ROUNDS;
        while to_remove > 0 {
            let Some(Reverse(k)) = heap.pop() else { break };
            let (c, i) = ((k >> 32) as u32, (k & 0xFFFF_FFFF) as usize);
            let Node {
                prev,
                next,
                cost,
                bound,
                removed,
            } = nodes[i];
            if removed || cost != c {
                continue; // superseded by a later entry
            }
            let (l, r) = (prev as usize, next as usize);
            let allowed = allowed_ms(h.precision, min_resolution_ms, now, h.points[r].at);
            if !force && (bound == UNBOUNDED || f64::from(bound) > allowed) {
                scratch.deferred.push(i as u32);
                continue;
            }
            nodes[i].removed = true;
            nodes[l].next = r as u32;
            nodes[r].prev = l as u32;
            h.errs[r] = bound;
            to_remove -= 1;
            for j in [l, r] {
                if j != 0 && j != n - 1 {
                    let (p, q) = (nodes[j].prev as usize, nodes[j].next as usize);
                    (nodes[j].cost, nodes[j].bound) = removal(&h.points, &h.errs, p, j, q);
                    heap.push(key(nodes[j].cost, j));
                }
            }
        }
        if to_remove == 0 {
            break;
        }
        h.precision *= 1.5;
        for i in scratch.deferred.drain(..) {
            let node = nodes[i as usize];
            if !node.removed {
                heap.push(key(node.cost, i as usize));
            }
        }
    }
    let mut out = 0;
    for (i, node) in nodes.iter().enumerate() {
        if !node.removed {
            h.points[out] = h.points[i];
            h.errs[out] = h.errs[i];
            out += 1;
        }
    }
    h.points.truncate(out);
    h.errs.truncate(out);
    scratch.heap = heap.into_vec();
}

/// What dropping `i` between `l` and `r` costs, in whole ms: how far `i` lies from
/// the line `l`-`r` (the greedy's priority), and the bound the merged segment then
/// has against the full history.
///
/// Queries are whole offsets, and the two lines `i` joins differ from the line
/// `l`-`r` most at the last offset left of `i` (by `i`'s distance `d` from the line)
/// or the first right of it (by `d` scaled down). Only when no offset lies left of
/// `i` (the last sighting of a plateau) is the right one the larger: dropping it
/// costs nothing when a single record follows.
fn removal(points: &[Point], errs: &[u32], l: usize, i: usize, r: usize) -> (u32, u32) {
    let (pl, pi, pr) = (points[l], points[i], points[r]);
    let span = pr.at.since(pl.at) as f64;
    let dev = if pr.end == pl.end {
        span
    } else {
        let offsets = (pr.end - pl.end) as f64;
        let d = (pi.at.since(pl.at) as f64 * offsets - (pi.end - pl.end) as f64 * span).abs() / offsets;
        if pi.end == pl.end {
            let right = (pr.end - pi.end) as f64;
            d * (right - 1.0) / right
        } else {
            d
        }
    };
    let segment = |k: usize| match errs[k] {
        UNBOUNDED => points[k].at.since(points[k - 1].at) as f64,
        e => f64::from(e),
    };
    let bound = (segment(i).max(segment(r)) + dev).min(span);
    (whole_ms(dev), whole_ms(bound))
}

/// Rounded up, so that a bound stays one; [`UNBOUNDED`] past `u32`.
fn whole_ms(ms: f64) -> u32 {
    if ms >= f64::from(UNBOUNDED - 1) {
        return UNBOUNDED;
    }
    let whole = ms as u32;
    if f64::from(whole) < ms { whole + 1 } else { whole }
}

/// Spacing compaction: an interior point is dropped while the gap between its kept
/// neighbours stays within `max(min_resolution, precision * (now - t(right)))`.
pub(super) fn by_age(h: &mut OffsetHistory, target: usize, min_resolution_ms: i64) {
    let now = h.points[h.points.len() - 1].at;
    for _ in 0..MAX_ROUNDS {
        by_age_pass(h, now, min_resolution_ms);
        if h.points.len() <= target {
            return;
        }
        h.precision *= 1.5;
    }
    // Unreachable for any history of strictly increasing times, kept as a guard.
    let last = h.points.len() - 1;
    let mut i = 0;
    h.points.retain(|_| {
        i += 1;
        i == 1 || i - 1 == last || i % 2 == 0
    });
}

fn by_age_pass(h: &mut OffsetHistory, now: Millis, min_resolution_ms: i64) {
    let n = h.points.len();
    if n < 3 {
        return;
    }
    let mut out = 1; // points[0] always stays
    for i in 1..n - 1 {
        let left = h.points[out - 1];
        let right = h.points[i + 1];
        if right.at.since(left.at) as f64 <= allowed_ms(h.precision, min_resolution_ms, now, right.at) {
            continue;
        }
        h.points[out] = h.points[i];
        out += 1;
    }
    h.points[out] = h.points[n - 1];
    h.points.truncate(out + 1);
}
