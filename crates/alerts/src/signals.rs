//! What the rules do with the read model's series ([`streamsight_node::signals`]):
//! settle them against the last cycle's labels, turn counters into rates, and
//! keep a rule's scope.

use streamsight_core::Millis;
use streamsight_core::alerts::rule::Rule;
use streamsight_core::alerts::{SharedLabels, glob_match};
pub use streamsight_node::signals::{KeyedSeries, Query, Series, merge, read};

/// Where a node of a sharded log answers with its part of the signals.
pub const SERIES_PATH: &str = "/api/v1/alerts/series";

/// What a rule reads.
pub fn key(rule: &Rule) -> Query {
    Query::for_rule(rule)
}

/// A signal's series sorted by labels with one value per label set, its labels replaced by
/// the equal ones of the signal's previous cycle (`previous`, sorted): alerts
/// keep those, so the rules' walks compare pointers, not strings. Returns the
/// labels to pass as `previous` next cycle.
pub fn settle(mut all: Series, previous: &[SharedLabels]) -> (Series, Vec<SharedLabels>) {
    if !all.is_sorted_by(|a, b| a.0 <= b.0) {
        all.sort_by(|a, b| a.0.cmp(&b.0));
    }
    all.dedup_by(|later, first| later.0 == first.0);
    let mut old = previous.iter().peekable();
    // Mostly the same `Arc` (a group's labels are kept from read to read:
    // `GroupLabels`): compared by pointer before by content.
    let same = |o: &SharedLabels, l: &SharedLabels| std::sync::Arc::ptr_eq(o, l);
    for (labels, _) in &mut all {
        while old.next_if(|o| !same(o, labels) && ***o < **labels).is_some() {}
        if let Some(o) = old.next_if(|o| same(o, labels) || ***o == **labels) {
            *labels = o.clone();
        }
    }
    let labels = all.iter().map(|(l, _)| l.clone()).collect();
    (all, labels)
}

/// Counters are compared with their reading of about a minute before.
const RATE_WINDOW_MS: i64 = 60_000;
/// Readings kept per series at most: one per sixth of the window.
const READINGS_KEPT: usize = 8;

/// A counter's recent readings per series (oldest first), for [`per_minute`].
pub type Readings = Vec<(SharedLabels, std::collections::VecDeque<(Millis, f64)>)>;

/// Counters (sorted, as [`settle`] leaves them) turned into increases per
/// minute over about the last minute of `previous` readings (sorted; `None`
/// at the signal's first reading since the collector started): at the first
/// reading every series is unknown (its count may be years old); after it, a
/// series first seen counts from 0 a window ago (a burst of a reason never
/// seen before is a burst, not a baseline), and a counter that went down (its
/// source restarted) counts from zero. A series that vanished is dropped.
pub fn per_minute(counts: Series, previous: Option<Readings>, now: Millis) -> (Series, Readings) {
    let first_reading = previous.is_none();
    let mut old = previous.unwrap_or_default().into_iter().peekable();
    let mut readings = Vec::with_capacity(counts.len());
    let rates = counts
        .into_iter()
        .map(|(labels, count)| {
            while old.next_if(|o| *o.0 < *labels).is_some() {}
            let mut kept = old.next_if(|o| *o.0 == *labels).map(|o| o.1).unwrap_or_default();
            let Some(count) = count else { return (labels, None) };
            if kept.is_empty() && !first_reading {
                kept.push_back((Millis(now.0.saturating_sub(RATE_WINDOW_MS)), 0.0));
            }
            if kept.back().is_some_and(|&(_, was)| count < was) {
                kept.clear();
                kept.push_back((Millis(now.0.saturating_sub(1)), 0.0));
            }
            // The base: the newest reading at least a window old, else the oldest.
            while kept.len() > 1 && now.since(kept[1].0) >= RATE_WINDOW_MS {
                kept.pop_front();
            }
            let rate = kept.front().and_then(|&(at, was)| {
                let minutes = now.since(at) as f64 / 60_000.0;
                (minutes > 0.0).then(|| (count - was).max(0.0) / minutes)
            });
            let spaced = kept
                .back()
                .is_none_or(|&(at, _)| now.since(at) >= RATE_WINDOW_MS / (READINGS_KEPT as i64 - 2));
            if spaced {
                if kept.len() >= READINGS_KEPT {
                    kept.pop_front();
                }
                kept.push_back((now, count));
            }
            readings.push((labels.clone(), kept));
            (labels, rate)
        })
        .collect();
    (rates, readings)
}

/// Where in `all` the series in `scope` are (every label the scope names
/// matches its glob).
pub fn in_scope(all: &[(SharedLabels, Option<f64>)], scope: &std::collections::BTreeMap<String, String>) -> Vec<usize> {
    all.iter()
        .enumerate()
        .filter(|(_, (l, _))| {
            scope
                .iter()
                .all(|(k, pattern)| l.get(k).is_some_and(|v| glob_match(pattern, v)))
        })
        .map(|(i, _)| i)
        .collect()
}

/// The series of a signal at `kept` (what [`in_scope`] found for `rule`'s
/// scope), with the rule's labels added (which keeps them sorted unless a rule
/// label replaces one of the series').
pub fn scoped(all: &[(SharedLabels, Option<f64>)], kept: &[usize], rule: &Rule) -> Series {
    kept.iter()
        .filter_map(|&i| all.get(i))
        .map(|(l, v)| {
            if rule.labels.is_empty() {
                return (l.clone(), *v);
            }
            let mut l = (**l).clone();
            l.extend(rule.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
            (SharedLabels::new(l), *v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> SharedLabels {
        streamsight_node::signals::labels(pairs)
    }

    fn series(n: f64) -> Series {
        vec![(labels(&[("topic", "orders")]), Some(n))]
    }

    #[test]
    fn counters_become_rates_over_about_a_minute() {
        let (r, kept) = per_minute(series(5.0), None, Millis(0));
        assert_eq!(r[0].1, None, "unknown at the first reading");
        // Read every 10 s: 6 more each time, 36 a minute.
        let mut kept = kept;
        let mut rate = None;
        for i in 1..=12 {
            let (r, k) = per_minute(
                series(5.0 + 6.0 * f64::from(i)),
                Some(kept),
                Millis(i64::from(i) * 10_000),
            );
            kept = k;
            rate = r[0].1;
        }
        assert_eq!(rate, Some(36.0));
        assert!(kept[0].1.len() <= READINGS_KEPT);
        // Read every 200 ms: still compared with a reading a while back.
        let (r, kept) = per_minute(series(77.0), Some(kept), Millis(120_200));
        assert!(r[0].1.is_some_and(|x| x > 0.0), "{r:?}");
        // The counter restarted: counted from zero.
        let (r, _) = per_minute(series(2.0), Some(kept), Millis(130_000));
        assert!(r[0].1.is_some_and(|x| x > 0.0), "{r:?}");
        // Gone: forgotten.
        let (_, kept) = per_minute(Vec::new(), Some(Vec::new()), Millis(140_000));
        assert!(kept.is_empty());
    }

    #[test]
    fn a_series_first_seen_after_the_first_reading_counts_from_zero() {
        let other = |n: f64| vec![(labels(&[("topic", "audit")]), Some(n))];
        let (_, kept) = per_minute(other(40.0), None, Millis(0));
        // 150 letters of a reason never seen before: 150 a minute, not a baseline.
        let mut both = other(40.0);
        both.extend(series(150.0));
        both.sort_by(|a, b| a.0.cmp(&b.0));
        let (r, kept) = per_minute(both.clone(), Some(kept), Millis(10_000));
        let orders = r
            .iter()
            .find(|(l, _)| l.get("topic").is_some_and(|t| t == "orders"))
            .unwrap();
        assert_eq!(orders.1, Some(150.0));
        // And it fades as it stops: a minute later, nothing new.
        let mut kept = kept;
        let mut rate = None;
        for i in 2..=9 {
            let (r, k) = per_minute(both.clone(), Some(kept), Millis(i * 10_000));
            kept = k;
            rate = r
                .iter()
                .find(|(l, _)| l.get("topic").is_some_and(|t| t == "orders"))
                .unwrap()
                .1;
        }
        assert_eq!(rate, Some(0.0));
        // Even a signal that had no series at all before.
        let (_, kept) = per_minute(Vec::new(), None, Millis(0));
        let (r, _) = per_minute(series(30.0), Some(kept), Millis(5_000));
        assert_eq!(r[0].1, Some(30.0));
    }
}
