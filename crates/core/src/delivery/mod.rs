//! Drop accounting: what was sent against what each group saw, per partition and
//! one-minute window of record timestamps, and where every missing message went.
//!
//! Producers report acknowledged records (with the offsets they landed at) and
//! failed sends; consumers report what they received, failed to process and
//! dead-lettered, and the offset ranges they skipped; the broker's evidence of
//! retention passing a group comes from the engine's data-loss events. Once a
//! window is closed and the group has caught up past it (or a grace period has
//! passed), [`Ledger::reconcile`] compares and attributes:
//!
//! - `never_reached_kafka`: sends that failed;
//! - `expired_by_retention`: offsets of the window below the log start the group
//!   was found behind;
//! - `skipped`: offsets of the window inside a range the consumer jumped over;
//! - `failed_in_processing`, `dead_lettered`: received, but not delivered;
//! - `unexplained`: acknowledged, never received, and none of the above;
//! - `duplicates`: received more often than acknowledged.
//!
//! Only groups that report their counts are reconciled: a group that says
//! nothing has unknown delivery, never "nothing missing". Pure: no I/O, time is
//! an argument.

mod reconcile;

use crate::time::Millis;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Width of an accounting window, as Confluent's monitoring interceptors use.
pub const WINDOW_MS: i64 = 60_000;
/// Trace ids kept per window and cause, for following a lost message.
const TRACE_IDS_KEPT: usize = 5;

pub fn window_of(timestamp_ms: i64) -> i64 {
    timestamp_ms.saturating_sub(timestamp_ms.rem_euclid(WINDOW_MS))
}

/// One drop-accounting fact, as the log keeps it: an SDK's counts with their
/// cluster resolved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fact {
    Produced {
        cluster: String,
        topic: String,
        partition: i32,
        window_ms: i64,
        count: u64,
        first_offset: i64,
        last_offset: i64,
    },
    FailedSends {
        cluster: String,
        topic: String,
        partition: Option<i32>,
        window_ms: i64,
        count: u64,
        trace_ids: Vec<String>,
        /// The client's error name (absent in logs written before it was kept).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        error: String,
    },
    Consumed {
        cluster: String,
        group: String,
        topic: String,
        partition: i32,
        window_ms: i64,
        received: u64,
        failed: u64,
        dead_lettered: u64,
        trace_ids: Vec<String>,
    },
    Skipped {
        cluster: String,
        group: String,
        topic: String,
        partition: i32,
        first_offset: i64,
        last_offset: i64,
    },
    Started {
        cluster: String,
        group: String,
        topic: String,
        partition: i32,
        first_offset: i64,
        #[serde(default)]
        at_ms: i64,
    },
}

impl Fact {
    /// The topic counted.
    pub fn topic(&self) -> &str {
        match self {
            Fact::Produced { topic, .. }
            | Fact::FailedSends { topic, .. }
            | Fact::Consumed { topic, .. }
            | Fact::Skipped { topic, .. }
            | Fact::Started { topic, .. } => topic,
        }
    }
}

/// When a window is reconciled.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LedgerParams {
    /// After the group caught up past a window, wait this long for the last
    /// telemetry about it (SDKs flush every 10 s).
    pub settle_ms: i64,
    /// Reconcile a window this long after its end even if the group never
    /// caught up past it.
    pub grace_ms: i64,
    /// Reconciled windows kept for the API, per group-partition.
    pub keep_windows: usize,
    /// Open (partition or group-partition, window) counts held at once; new
    /// ones beyond are refused and counted, so a flood of names stays bounded.
    pub max_open_windows: usize,
    /// (cluster, topic) pairs and groups on them that report counts.
    pub max_series: usize,
}

/// Skipped or expired ranges kept per group-partition: the newest.
const RANGES_KEPT: usize = 256;

impl Default for LedgerParams {
    fn default() -> Self {
        Self {
            settle_ms: 30_000,
            grace_ms: 300_000,
            keep_windows: 60,
            max_open_windows: 500_000,
            max_series: 100_000,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PartitionKey {
    pub cluster: String,
    pub topic: String,
    /// `None` for sends that failed before a partition was assigned.
    pub partition: Option<i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Produced {
    acked: u64,
    first_offset: Option<i64>,
    last_offset: Option<i64>,
    failed: u64,
    failed_trace_ids: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Consumed {
    received: u64,
    failed: u64,
    dead_lettered: u64,
    trace_ids: Vec<String>,
}

/// Why missing messages are missing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Causes {
    pub never_reached_kafka: u64,
    pub expired_by_retention: u64,
    pub skipped: u64,
    pub failed_in_processing: u64,
    pub dead_lettered: u64,
    pub unexplained: u64,
}

impl Causes {
    pub const NAMES: [&'static str; 6] = [
        "never_reached_kafka",
        "expired_by_retention",
        "skipped",
        "failed_in_processing",
        "dead_lettered",
        "unexplained",
    ];

    pub fn values(&self) -> [u64; 6] {
        [
            self.never_reached_kafka,
            self.expired_by_retention,
            self.skipped,
            self.failed_in_processing,
            self.dead_lettered,
            self.unexplained,
        ]
    }

    pub fn total(&self) -> u64 {
        self.values().iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    fn add(&mut self, other: &Causes) {
        let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        add(&mut self.never_reached_kafka, other.never_reached_kafka);
        add(&mut self.expired_by_retention, other.expired_by_retention);
        add(&mut self.skipped, other.skipped);
        add(&mut self.failed_in_processing, other.failed_in_processing);
        add(&mut self.dead_lettered, other.dead_lettered);
        add(&mut self.unexplained, other.unexplained);
    }
}

/// One group's accounting of one partition's window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowReport {
    pub cluster: String,
    pub group: String,
    pub topic: String,
    pub partition: Option<i32>,
    pub window_start_ms: i64,
    /// Sends attempted: acknowledged plus failed.
    pub sent: u64,
    pub acked: u64,
    pub received: u64,
    /// Received and processed (neither failed nor dead-lettered).
    pub delivered: u64,
    pub missing: Causes,
    pub duplicates: u64,
    /// The offsets the window's acknowledged records landed at.
    pub first_offset: Option<i64>,
    pub last_offset: Option<i64>,
    pub skipped_ranges: Vec<(i64, i64)>,
    pub expired_ranges: Vec<(i64, i64)>,
    pub trace_ids: Vec<String>,
    pub closed_by: ClosedBy,
    #[serde(rename = "reconciled_at_ms")]
    pub reconciled_at: Millis,
}

/// Why a window was reconciled.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClosedBy {
    /// The group caught up past it and the settle time passed.
    CaughtUp,
    /// Its grace time passed first.
    Grace,
}

type GroupPartition = (String, String, String, i32);

/// The accounting of every instrumented group.
#[derive(Debug, Default)]
pub struct Ledger {
    params: LedgerParams,
    produced: BTreeMap<(PartitionKey, i64), Produced>,
    /// (cluster, group, topic, partition or -1 for unassigned), window.
    consumed: BTreeMap<(GroupPartition, i64), Consumed>,
    /// Groups that report counts, by (cluster, topic): only they are reconciled.
    groups: BTreeMap<(String, String), std::collections::BTreeSet<String>>,
    skipped: BTreeMap<GroupPartition, Vec<(i64, i64)>>,
    expired: BTreeMap<GroupPartition, Vec<(i64, i64)>>,
    /// Windows already reconciled per group, with their reports.
    reports: BTreeMap<GroupPartition, Vec<WindowReport>>,
    done: std::collections::BTreeSet<(GroupPartition, i64)>,
    totals: BTreeMap<(String, String, String), Totals>,
    /// Counts refused by `max_open_windows` or `max_series`.
    limited: u64,
    /// Groups over all (cluster, topic) pairs, against `max_series`.
    series: usize,
}

/// Cumulative counts per (cluster, group, topic), for counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub sent: u64,
    pub received: u64,
    pub delivered: u64,
    pub missing: Causes,
    pub duplicates: u64,
}

/// The counts of a window, opened unless `max` are open already (then counted
/// in `limited`).
fn open_window<'a, K: Ord, V: Default>(
    windows: &'a mut BTreeMap<K, V>,
    key: K,
    max: usize,
    limited: &mut u64,
) -> Option<&'a mut V> {
    if !windows.contains_key(&key) && windows.len() >= max {
        *limited += 1;
        return None;
    }
    Some(windows.entry(key).or_default())
}

fn keep_sample(ids: &mut Vec<String>, id: Option<&str>) {
    if let Some(id) = id.filter(|s| !s.is_empty())
        && ids.len() < TRACE_IDS_KEPT
        && !ids.iter().any(|x| x == id)
    {
        ids.push(id.to_owned());
    }
}

/// The ledger's accounting of some topics (see [`Ledger::export`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LedgerShard {
    produced: Vec<((PartitionKey, i64), Produced)>,
    consumed: Vec<((GroupPartition, i64), Consumed)>,
    groups: Vec<((String, String), std::collections::BTreeSet<String>)>,
    skipped: Vec<(GroupPartition, Vec<(i64, i64)>)>,
    expired: Vec<(GroupPartition, Vec<(i64, i64)>)>,
    reports: Vec<(GroupPartition, Vec<WindowReport>)>,
    done: Vec<(GroupPartition, i64)>,
    totals: Vec<((String, String, String), Totals)>,
}

/// The entries of `map` whose key `topic_of` names a topic `keep` accepts.
fn kept<K: Clone, V: Clone>(
    map: &BTreeMap<K, V>,
    topic_of: impl Fn(&K) -> &str,
    keep: &dyn Fn(&str) -> bool,
) -> Vec<(K, V)> {
    map.iter()
        .filter(|(k, _)| keep(topic_of(k)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl Ledger {
    /// The accounting of the topics `keep` accepts: what a node taking over
    /// their shard needs to go on reconciling them.
    pub fn export(&self, keep: &dyn Fn(&str) -> bool) -> LedgerShard {
        LedgerShard {
            produced: kept(&self.produced, |k| &k.0.topic, keep),
            consumed: kept(&self.consumed, |k| &k.0.2, keep),
            groups: kept(&self.groups, |k| &k.1, keep),
            skipped: kept(&self.skipped, |k| &k.2, keep),
            expired: kept(&self.expired, |k| &k.2, keep),
            reports: kept(&self.reports, |k| &k.2, keep),
            done: self.done.iter().filter(|k| keep(&k.0.2)).cloned().collect(),
            totals: kept(&self.totals, |k| &k.2, keep),
        }
    }

    /// Takes in an exported accounting, within this ledger's limits (what is
    /// over them is counted, as new counts would be).
    pub fn import(&mut self, shard: LedgerShard) {
        for (key, groups) in shard.groups {
            for group in groups {
                self.instrumented(&key.0, &group, &key.1);
            }
        }
        let max = self.params.max_open_windows;
        for (key, p) in shard.produced {
            if let Some(open) = open_window(&mut self.produced, key, max, &mut self.limited) {
                *open = p;
            }
        }
        for (key, c) in shard.consumed {
            if let Some(open) = open_window(&mut self.consumed, key, max, &mut self.limited) {
                *open = c;
            }
        }
        self.skipped.extend(shard.skipped);
        self.expired.extend(shard.expired);
        self.reports.extend(shard.reports);
        self.done.extend(shard.done);
        self.totals.extend(shard.totals);
    }

    pub fn new(params: LedgerParams) -> Self {
        Self {
            params,
            ..Self::default()
        }
    }

    /// `acked` records landed on the partition in the window, between these offsets.
    pub fn produced(&mut self, key: PartitionKey, window: i64, acked: u64, first: i64, last: i64) {
        let Some(p) = self.open_produced(key, window) else {
            return;
        };
        p.acked = p.acked.saturating_add(acked);
        p.first_offset = Some(p.first_offset.map_or(first, |f| f.min(first)));
        p.last_offset = Some(p.last_offset.map_or(last, |l| l.max(last)));
    }

    /// Sends that failed, in the window of their record timestamps.
    pub fn failed_sends(&mut self, key: PartitionKey, window: i64, count: u64, trace_ids: &[String]) {
        let Some(p) = self.open_produced(key, window) else {
            return;
        };
        p.failed = p.failed.saturating_add(count);
        for id in trace_ids {
            keep_sample(&mut p.failed_trace_ids, Some(id));
        }
    }

    /// What a group's consumers did with the partition's records of the window.
    #[allow(clippy::too_many_arguments)]
    pub fn consumed(
        &mut self,
        cluster: &str,
        group: &str,
        topic: &str,
        partition: i32,
        window: i64,
        received: u64,
        failed: u64,
        dead_lettered: u64,
        trace_ids: &[String],
    ) {
        if !self.instrumented(cluster, group, topic) {
            return;
        }
        let key = (gp(cluster, group, topic, partition), window_of(window));
        let Some(c) = open_window(&mut self.consumed, key, self.params.max_open_windows, &mut self.limited) else {
            return;
        };
        c.received = c.received.saturating_add(received);
        c.failed = c.failed.saturating_add(failed);
        c.dead_lettered = c.dead_lettered.saturating_add(dead_lettered);
        for id in trace_ids {
            keep_sample(&mut c.trace_ids, Some(id));
        }
    }

    /// Notes that the group reports counts on the topic; false when that is a
    /// new series over the limit.
    fn instrumented(&mut self, cluster: &str, group: &str, topic: &str) -> bool {
        let key = (cluster.to_owned(), topic.to_owned());
        if self.groups.get(&key).is_some_and(|g| g.contains(group)) {
            return true;
        }
        if self.series >= self.params.max_series {
            self.limited += 1;
            return false;
        }
        self.series += 1;
        self.groups.entry(key).or_default().insert(group.to_owned());
        true
    }

    fn open_produced(&mut self, key: PartitionKey, window: i64) -> Option<&mut Produced> {
        let key = (key, window_of(window));
        open_window(&mut self.produced, key, self.params.max_open_windows, &mut self.limited)
    }

    /// Counts refused by the ledger's limits.
    pub fn limited(&self) -> u64 {
        self.limited
    }

    fn push_range(ranges: &mut BTreeMap<GroupPartition, Vec<(i64, i64)>>, id: GroupPartition, range: (i64, i64)) {
        let kept = ranges.entry(id).or_default();
        if kept.len() >= RANGES_KEPT {
            kept.remove(0);
        }
        kept.push(range);
    }

    /// The consumer jumped over `first..=last` (a reset, a seek).
    pub fn skipped(&mut self, cluster: &str, group: &str, topic: &str, partition: i32, first: i64, last: i64) {
        if first <= last && self.instrumented(cluster, group, topic) {
            Self::push_range(&mut self.skipped, gp(cluster, group, topic, partition), (first, last));
        }
    }

    /// A consumer started reading the partition at `first` while the group had
    /// committed `committed`: anything between was skipped.
    pub fn started(
        &mut self,
        cluster: &str,
        group: &str,
        topic: &str,
        partition: i32,
        first: i64,
        committed: Option<i64>,
    ) {
        self.instrumented(cluster, group, topic);
        if let Some(c) = committed
            && first > c
        {
            self.skipped(cluster, group, topic, partition, c, first - 1);
        }
    }

    /// Retention deleted `first..=last` before the group read them (the engine's
    /// data-loss evidence).
    pub fn expired(&mut self, cluster: &str, group: &str, topic: &str, partition: i32, first: i64, last: i64) {
        if first <= last {
            Self::push_range(&mut self.expired, gp(cluster, group, topic, partition), (first, last));
        }
    }

    /// Reconciled windows of the group-partitions `keep` accepts, newest last.
    pub fn reports(&self, keep: impl Fn(&str, &str, &str) -> bool) -> Vec<&WindowReport> {
        self.reports
            .iter()
            .filter(|((c, g, t, _), _)| keep(c, g, t))
            .flat_map(|(_, r)| r.iter())
            .collect()
    }

    /// Cumulative counts per (cluster, group, topic).
    pub fn totals(&self) -> &BTreeMap<(String, String, String), Totals> {
        &self.totals
    }
}

fn gp(cluster: &str, group: &str, topic: &str, partition: i32) -> GroupPartition {
    (cluster.to_owned(), group.to_owned(), topic.to_owned(), partition)
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: i64 = 600_000;

    fn key(partition: Option<i32>) -> PartitionKey {
        PartitionKey {
            cluster: "c".into(),
            topic: "orders".into(),
            partition,
        }
    }

    fn ledger() -> Ledger {
        Ledger::new(LedgerParams::default())
    }

    fn consumed(l: &mut Ledger, received: u64, failed: u64, dlq: u64) {
        l.consumed("c", "g", "orders", 0, W + 5, received, failed, dlq, &[]);
    }

    #[test]
    fn every_missing_message_is_attributed_to_its_cause() {
        let mut l = ledger();
        // 100 acked at offsets 0..=99, 3 sends failed.
        l.produced(key(Some(0)), W + 1, 100, 0, 99);
        l.failed_sends(key(Some(0)), W + 2, 3, &["abc".into()]);
        consumed(&mut l, 80, 4, 2);
        l.skipped("c", "g", "orders", 0, 10, 19); // 10 skipped
        l.expired("c", "g", "orders", 0, 0, 4); // 5 expired
        // Not due before the window ends.
        assert!(
            l.reconcile(Millis(W + WINDOW_MS - 1), |_, _, _, _| Some(100))
                .is_empty()
        );
        // Caught up, but telemetry may still be on its way.
        assert!(
            l.reconcile(Millis(W + WINDOW_MS + 1), |_, _, _, _| Some(100))
                .is_empty()
        );
        let r = l.reconcile(Millis(W + WINDOW_MS + 30_000), |_, _, _, _| Some(100));
        assert_eq!(r.len(), 1);
        let r = &r[0];
        assert_eq!(
            (r.sent, r.acked, r.received, r.delivered, r.duplicates),
            (103, 100, 80, 74, 0)
        );
        assert_eq!(
            r.missing,
            Causes {
                never_reached_kafka: 3,
                expired_by_retention: 5,
                skipped: 10,
                failed_in_processing: 4,
                dead_lettered: 2,
                unexplained: 5,
            }
        );
        assert_eq!(r.skipped_ranges, vec![(10, 19)]);
        assert_eq!(r.trace_ids, vec!["abc".to_owned()]);
        assert_eq!(r.closed_by, ClosedBy::CaughtUp);
        // Once only.
        assert!(
            l.reconcile(Millis(W + 10 * WINDOW_MS), |_, _, _, _| Some(100))
                .is_empty()
        );
        assert_eq!(
            l.totals()[&("c".into(), "g".into(), "orders".into())].missing.total(),
            29
        );
    }

    #[test]
    fn a_group_that_never_caught_up_is_reconciled_after_the_grace_period() {
        let mut l = ledger();
        l.produced(key(Some(0)), W, 10, 0, 9);
        consumed(&mut l, 4, 0, 0);
        let end = W + WINDOW_MS;
        assert!(l.reconcile(Millis(end + 100_000), |_, _, _, _| Some(4)).is_empty());
        let r = l.reconcile(Millis(end + 300_000), |_, _, _, _| Some(4));
        assert_eq!((r[0].missing.unexplained, r[0].closed_by), (6, ClosedBy::Grace));
    }

    #[test]
    fn duplicates_are_counted_and_silent_groups_are_not_reconciled() {
        let mut l = ledger();
        l.produced(key(Some(0)), W, 10, 0, 9);
        consumed(&mut l, 13, 0, 0);
        let r = l.reconcile(Millis(W + WINDOW_MS + 60_000), |_, _, _, _| Some(10));
        assert_eq!((r[0].duplicates, r[0].missing.total()), (3, 0));
        let mut silent = ledger();
        silent.produced(key(Some(0)), W, 10, 0, 9);
        assert!(
            silent
                .reconcile(Millis(W + 100 * WINDOW_MS), |_, _, _, _| Some(10))
                .is_empty()
        );
    }

    #[test]
    fn a_consumer_starting_past_the_committed_offset_skipped_the_gap() {
        let mut l = ledger();
        l.produced(key(Some(0)), W, 10, 0, 9);
        l.started("c", "g", "orders", 0, 7, Some(2));
        consumed(&mut l, 3, 0, 0);
        let r = l.reconcile(Millis(W + WINDOW_MS + 60_000), |_, _, _, _| Some(10));
        // Offsets 0 and 1 were never received either: unexplained. 7, 8, 9 were read.
        assert_eq!(r[0].missing.skipped, 5);
        assert_eq!(r[0].missing.unexplained, 2);
    }

    #[test]
    fn unassigned_failed_sends_count_for_every_reporting_group() {
        let mut l = ledger();
        l.failed_sends(key(None), W, 4, &[]);
        consumed(&mut l, 0, 0, 0);
        let r = l.reconcile(Millis(W + WINDOW_MS + 60_000), |_, _, _, _| None);
        assert_eq!((r[0].partition, r[0].missing.never_reached_kafka), (None, 4));
    }

    #[test]
    fn extreme_counts_and_times_saturate_and_flood_stays_bounded() {
        let mut l = Ledger::new(LedgerParams {
            max_open_windows: 4,
            max_series: 2,
            ..LedgerParams::default()
        });
        for window in [i64::MIN, i64::MAX, -1, 0] {
            l.produced(key(Some(0)), window, u64::MAX, 0, i64::MAX);
            l.failed_sends(key(Some(0)), window, u64::MAX, &[]);
            l.consumed("c", "g", "orders", 0, window, u64::MAX, u64::MAX, u64::MAX, &[]);
        }
        l.skipped("c", "g", "orders", 0, i64::MIN, i64::MAX);
        for g in ["g2", "g3", "g4"] {
            l.consumed("c", g, "orders", 0, W, 1, 0, 0, &[]);
        }
        l.produced(key(Some(1)), W, 1, 0, 0);
        assert!(l.limited() >= 3, "{}", l.limited());
        let reports = l.reconcile(Millis(i64::MAX), |_, _, _, _| Some(i64::MAX));
        assert!(!reports.is_empty());
        let totals = &l.totals()[&("c".to_owned(), "g".to_owned(), "orders".to_owned())];
        assert_eq!(totals.sent, u64::MAX);
        assert_eq!(totals.missing.never_reached_kafka, u64::MAX, "saturated, not wrapped");
    }
}
