//! The one read model of signals: every signal's series — one value per
//! group, topic, partition, DLQ, probe partition, cluster or service — read
//! from the services at one time. The alert rules, `/metrics`, the API and the
//! dashboard read a signal here and nowhere else; a new signal is added here
//! once. The per-group signals the engine does not keep are derived once per
//! housekeeping round ([`crate::services::derived`]) and read here too.

use crate::Shared;
use crate::services::derived::GroupSignals;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use streamsight_core::alerts::SharedLabels;
use streamsight_core::alerts::rule::{Aggregate, Rule, Signal};
use streamsight_core::{Millis, Status};

/// Problem windows reconciled this recently count as missing messages now.
const MISSING_WINDOW_MS: i64 = 600_000;

/// Labels from pairs.
pub fn labels(pairs: &[(&str, &str)]) -> SharedLabels {
    SharedLabels::new(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())
}

/// Names from the network as keys: foldhash, seeded per map (as the engine's).
type NameMap<V> = std::collections::HashMap<String, V, foldhash::fast::RandomState>;

/// Each group's labels (`cluster`, `group`), made once and kept from one read
/// to the next: every per-group signal's series of a group share one `Arc`,
/// so a read makes no labels for a group it has seen and the alert rules
/// compare pointers, not strings. Bounded by the groups still named
/// somewhere: once the map has doubled since it was last swept, labels that
/// nothing else holds any more (a group gone from every signal and alert)
/// are let go.
#[derive(Debug, Default)]
pub struct GroupLabels {
    map: NameMap<NameMap<SharedLabels>>,
    len: usize,
    swept_at: usize,
}

impl GroupLabels {
    /// The labels of `group` of `cluster`.
    pub fn of(&mut self, cluster: &str, group: &str) -> SharedLabels {
        if let Some(l) = self.map.get(cluster).and_then(|m| m.get(group)) {
            return l.clone();
        }
        let l = labels(&[("cluster", cluster), ("group", group)]);
        self.map
            .entry(cluster.to_owned())
            .or_default()
            .insert(group.to_owned(), l.clone());
        self.len += 1;
        l
    }

    /// Lets go of labels nothing else holds, once the map has doubled since
    /// the last sweep (amortized: a sweep walks what the map holds).
    pub fn sweep(&mut self) {
        if self.len <= 2 * self.swept_at + 1_024 {
            return;
        }
        for groups in self.map.values_mut() {
            groups.retain(|_, l| SharedLabels::strong_count(l) > 1);
        }
        self.map.retain(|_, groups| !groups.is_empty());
        self.len = self.map.values().map(NameMap::len).sum();
        self.swept_at = self.len;
    }

    /// Labels held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One value per series, labels shared.
pub type Series = Vec<(SharedLabels, Option<f64>)>;

/// Which series a reader asks for: a signal, the statuses a group-status
/// signal counts, and how a per-group sum aggregates. Two readers asking the
/// same query read the same series.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Query {
    pub signal: Signal,
    pub statuses: Vec<Status>,
    pub aggregate: Option<Aggregate>,
}

impl Query {
    /// A signal with no statuses and its default aggregate.
    pub fn of(signal: Signal) -> Self {
        Self {
            signal,
            statuses: Vec::new(),
            aggregate: signal.aggregates().then_some(Aggregate::Sum),
        }
    }

    /// What a rule reads: its statuses only where the signal has them.
    pub fn for_rule(rule: &Rule) -> Self {
        Self {
            signal: rule.signal,
            statuses: if rule.signal == Signal::GroupStatus {
                rule.statuses.clone()
            } else {
                Vec::new()
            },
            aggregate: rule
                .signal
                .aggregates()
                .then(|| rule.aggregate.unwrap_or(Aggregate::Sum)),
        }
    }
}

/// Every series of `query`'s signal at `now`, on this node.
pub fn read(shared: &Shared, query: &Query, now: Millis) -> Series {
    crate::sync::lock(&shared.group_labels).sweep();
    let per_group = |value: fn(&GroupSignals) -> Option<f64>| {
        let groups = shared.signals.groups();
        let mut names = crate::sync::lock(&shared.group_labels);
        groups
            .iter()
            .map(|g| (names.of(&g.cluster, &g.group), value(g)))
            .collect()
    };
    match query.signal {
        Signal::RetentionMarginSeconds => per_group(|g| g.retention_margin_seconds),
        Signal::CatchUpSeconds => per_group(|g| g.catch_up_seconds),
        Signal::PartitionsNotCommitting => per_group(|g| Some(f64::from(g.partitions_not_committing))),
        Signal::GroupLagMessages if query.aggregate == Some(Aggregate::Max) => lag(shared, query, now),
        Signal::GroupLagSeconds | Signal::GroupLagMessages | Signal::GroupStatus => groups(shared, query, now),
        Signal::TopicLagSeconds
        | Signal::TopicLagMessages
        | Signal::PartitionLagSeconds
        | Signal::PartitionLagMessages => lag(shared, query, now),
        Signal::FailedSends => failed_sends(shared),
        Signal::MissingMessagesByCause => missing_by_cause(shared, now),
        Signal::DeadLetters | Signal::SchemaViolations => dead_letters(shared, query.signal),
        // Records lost so far: a counter.
        Signal::ProbeLost => per_probe_partition(shared, |r| r.lost as f64),
        Signal::ProducerFailing => producer_failing(shared, now),
        Signal::MissingMessages => missing(shared, now),
        Signal::DlqVelocity => dlq(shared),
        Signal::ProbeFailing => per_probe_partition(shared, |r| f64::from(u8::from(r.status != "ok"))),
        Signal::ClusterUnreachable => clusters(shared),
        Signal::ServiceReporting => services(shared, now),
        Signal::ProduceRate => produce_rates(shared, now),
        Signal::ConsumeRate => consume_rates(shared),
        Signal::OpenTransactionSeconds => open_transactions(shared, now),
        Signal::RebalancesPerHour => {
            let rebalances = shared.clusters.all_rebalances(now);
            let mut names = crate::sync::lock(&shared.group_labels);
            rebalances
                .into_iter()
                .map(|(c, g, r)| (names.of(&c, &g), Some(r.last_hour as f64)))
                .collect()
        }
    }
}

/// A signal's series as one node of a sharded log sees them: its part.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyedSeries {
    pub signal: Signal,
    pub statuses: Vec<Status>,
    pub aggregate: Option<Aggregate>,
    pub series: Series,
}

impl KeyedSeries {
    pub fn new(query: Query, series: Series) -> Self {
        let Query {
            signal,
            statuses,
            aggregate,
        } = query;
        Self {
            signal,
            statuses,
            aggregate,
            series,
        }
    }

    pub fn query(&self) -> Query {
        Query {
            signal: self.signal,
            statuses: self.statuses.clone(),
            aggregate: self.aggregate,
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq)]
enum Merge {
    Sum,
    Max,
    Min,
}

/// How the parts of a series on several nodes make the whole: a group's sums
/// add up (an unknown part makes the whole unknown), its margin is its
/// smallest, anything else its largest (a group's worst part; a series only
/// one node has, a topic's or a partition's, is that node's; one every node
/// sees alike, a DLQ's or a probe's, counts once).
/// (A group's derived signals merge alike: [`GroupSignals::merge`].)
fn merge_of(query: &Query) -> Merge {
    match query.signal {
        Signal::GroupLagMessages if query.aggregate != Some(Aggregate::Max) => Merge::Sum,
        Signal::ConsumeRate | Signal::PartitionsNotCommitting => Merge::Sum,
        Signal::RetentionMarginSeconds => Merge::Min,
        _ => Merge::Max,
    }
}

fn combine(merge: Merge, a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (merge, a, b) {
        (Merge::Sum, Some(a), Some(b)) => Some(a + b),
        (Merge::Sum, _, _) => None,
        (Merge::Max, Some(a), Some(b)) => Some(a.max(b)),
        (Merge::Min, Some(a), Some(b)) => Some(a.min(b)),
        (_, Some(x), None) | (_, None, Some(x)) => Some(x),
        (_, None, None) => None,
    }
}

/// Every signal's whole series from the nodes' parts, by key.
pub fn merge(parts: Vec<KeyedSeries>) -> BTreeMap<Query, Series> {
    let mut whole: BTreeMap<Query, BTreeMap<SharedLabels, Option<f64>>> = BTreeMap::new();
    for part in parts {
        let key = part.query();
        let merge = merge_of(&key);
        let series = whole.entry(key).or_default();
        for (labels, value) in part.series {
            match series.entry(labels) {
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(value);
                }
                std::collections::btree_map::Entry::Occupied(mut e) => {
                    let v = e.get_mut();
                    *v = combine(merge, *v, value);
                }
            }
        }
    }
    whole.into_iter().map(|(k, s)| (k, s.into_iter().collect())).collect()
}

fn groups(shared: &Shared, rule: &Query, now: Millis) -> Series {
    let summaries = shared.lag.summaries(now, shared.config.refresh_ms());
    let mut names = crate::sync::lock(&shared.group_labels);
    summaries
        .groups
        .iter()
        .map(|g| {
            let value = match rule.signal {
                Signal::GroupLagSeconds => g.max_lag_seconds,
                Signal::GroupLagMessages => g.total_lag.map(|lag| lag as f64),
                // Stale is missing data: unknown, never "not stalled".
                _ if g.status == Status::Stale && !rule.statuses.contains(&Status::Stale) => None,
                _ => Some(f64::from(u8::from(rule.statuses.contains(&g.status)))),
            };
            (names.of(&g.cluster, &g.group), value)
        })
        .collect()
}

fn producer_failing(shared: &Shared, now: Millis) -> Series {
    let mut topics: BTreeMap<(String, String), bool> = BTreeMap::new();
    shared.lag.each_partition(|engine, pid| {
        let (cluster, topic, _) = engine.partition_names(pid);
        let failing = engine.evaluate_partition(pid, now).producer_failing;
        *entry(&mut topics, cluster, topic, false) |= failing;
    });
    topics
        .into_iter()
        .map(|((c, t), failing)| {
            (
                labels(&[("cluster", &c), ("topic", &t)]),
                Some(f64::from(u8::from(failing))),
            )
        })
        .collect()
}

fn open_transactions(shared: &Shared, now: Millis) -> Series {
    let mut out = Series::new();
    shared.lag.each_partition(|engine, pid| {
        let report = engine.evaluate_partition(pid, now);
        if report.last_stable_offset.is_none() {
            return;
        }
        let (cluster, topic, partition) = engine.partition_names(pid);
        let held = report
            .open_transaction_since
            .map_or(0.0, |t| now.since(t) as f64 / 1000.0);
        let partition = partition.to_string();
        out.push((
            labels(&[("cluster", cluster), ("topic", topic), ("partition", &partition)]),
            Some(held),
        ));
    });
    out
}

/// A topic's entry (its names copied for the lookup: a few small allocations
/// per partition, with the engine let go between pieces of the walk).
fn entry<'a, V>(map: &'a mut BTreeMap<(String, String), V>, cluster: &str, topic: &str, first: V) -> &'a mut V {
    let key = (cluster.to_owned(), topic.to_owned());
    map.entry(key).or_insert(first)
}

fn missing(shared: &Shared, now: Millis) -> Series {
    let d = shared.deliveries.view();
    let mut recent: BTreeMap<(&str, &str, &str), u64> = BTreeMap::new();
    for w in d
        .events
        .iter()
        .filter(|w| now.since(w.reconciled_at) <= MISSING_WINDOW_MS)
    {
        *recent.entry((&w.cluster, &w.group, &w.topic)).or_default() += w.missing.total();
    }
    d.ledger
        .totals()
        .keys()
        .map(|(c, g, t)| {
            let n = recent.get(&(c.as_str(), g.as_str(), t.as_str())).copied().unwrap_or(0);
            (labels(&[("cluster", c), ("group", g), ("topic", t)]), Some(n as f64))
        })
        .collect()
}

fn dlq(shared: &Shared) -> Series {
    shared
        .dlq
        .view()
        .iter()
        .flat_map(|m| {
            let cluster = m.config.name.clone();
            m.report()
                .into_iter()
                .map(move |t| (labels(&[("cluster", &cluster), ("topic", &t.dlq_topic)]), t.velocity))
        })
        .collect()
}

/// One value per probe partition.
fn per_probe_partition(shared: &Shared, value: fn(&streamsight_core::probe::PartitionProbeReport) -> f64) -> Series {
    shared
        .probes
        .view()
        .iter()
        .flat_map(|p| {
            let (cluster, topic) = (p.config.name.clone(), p.config.topic.clone());
            p.report().partitions.into_iter().map(move |r| {
                let partition = r.partition.to_string();
                let l = labels(&[("cluster", &cluster), ("topic", &topic), ("partition", &partition)]);
                (l, Some(value(&r)))
            })
        })
        .collect()
}

fn clusters(shared: &Shared) -> Series {
    shared
        .clusters
        .view()
        .iter()
        .map(|(name, v)| {
            let value = v.last.as_ref().map(|s| f64::from(u8::from(!s.metadata_ok)));
            (labels(&[("cluster", name)]), value)
        })
        .collect()
}

fn services(shared: &Shared, now: Millis) -> Series {
    let span = crate::clock::time_ms(shared.config.pathway_window);
    let graph = shared.pathways.graph(now.0.saturating_sub(span), now.0 + 1);
    graph
        .nodes
        .iter()
        .filter(|n| n.kind == "service")
        .map(|n| (labels(&[("service", &n.name)]), Some(1.0)))
        .collect()
}

fn produce_rates(shared: &Shared, now: Millis) -> Series {
    let mut topics: BTreeMap<(String, String), Option<f64>> = BTreeMap::new();
    shared.lag.each_partition(|engine, pid| {
        let (cluster, topic, _) = engine.partition_names(pid);
        let rate = engine.produce_rate(pid, now, streamsight_core::Engine::RATE_WINDOW_MS);
        let e = entry(&mut topics, cluster, topic, Some(0.0));
        // Unknown for one partition: unknown for the topic (never a partial sum).
        *e = match (*e, rate) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    });
    topics
        .into_iter()
        .map(|((c, t), v)| (labels(&[("cluster", &c), ("topic", &t)]), v))
        .collect()
}

/// Offsets committed per second over each partition's recent commits, summed
/// (unknown while any partition's is).
fn consume_rates(shared: &Shared) -> Series {
    shared.lag.each_group(|engine, gid| {
        let (cluster, group) = engine.group_name(gid);
        let total = engine
            .group_members(gid)
            .iter()
            .try_fold(0.0, |sum, &gp| engine.consume_rate(gp).map(|r| sum + r));
        (crate::sync::lock(&shared.group_labels).of(cluster, group), total)
    })
}

/// Lag per topic or partition of each group (and per group with `max`), from
/// the engine's report of each group-partition, the engine taken a few groups
/// at a time.
fn lag(shared: &Shared, rule: &Query, now: Millis) -> Series {
    let seconds = matches!(rule.signal, Signal::TopicLagSeconds | Signal::PartitionLagSeconds);
    let max = seconds || rule.aggregate == Some(Aggregate::Max);
    let per_group = shared.lag.each_group(|engine, gid| {
        let (cluster, group) = engine.group_name(gid);
        // Per topic (and partition, when the signal is per partition): the
        // combined value, `None` once unknown for good.
        let mut acc: BTreeMap<(&str, Option<i32>), Option<f64>> = BTreeMap::new();
        for &gp in engine.group_members(gid) {
            let names = engine.names(gp);
            let r = engine.evaluate(gp, now);
            let key = match rule.signal {
                Signal::PartitionLagSeconds | Signal::PartitionLagMessages => (names.topic, Some(names.partition)),
                Signal::GroupLagMessages => ("", None),
                _ => (names.topic, None),
            };
            let value = if seconds {
                r.lag_seconds
            } else {
                r.lag_messages.map(|m| m as f64)
            };
            let slot = acc.entry(key).or_insert(if seconds { None } else { Some(0.0) });
            *slot = match (seconds, *slot, value) {
                // Seconds: the worst known partition's (unknown ones cannot lower it).
                (true, a, Some(v)) => Some(a.map_or(v, |a: f64| a.max(v))),
                (true, a, None) => a,
                // Messages: unknown while any partition's is, never a partial sum.
                (false, Some(a), Some(v)) => Some(if max { a.max(v) } else { a + v }),
                (false, _, _) => None,
            };
        }
        acc.into_iter()
            .map(|((topic, partition), v)| {
                let l = match (rule.signal, partition) {
                    (Signal::GroupLagMessages, _) => crate::sync::lock(&shared.group_labels).of(cluster, group),
                    (_, Some(p)) => labels(&[
                        ("cluster", cluster),
                        ("group", group),
                        ("topic", topic),
                        ("partition", &p.to_string()),
                    ]),
                    (_, None) => labels(&[("cluster", cluster), ("group", group), ("topic", topic)]),
                };
                (l, v)
            })
            .collect::<Vec<_>>()
    });
    per_group.into_iter().flatten().collect()
}

/// Failed sends so far per (cluster, topic, error): a counter.
fn failed_sends(shared: &Shared) -> Series {
    let d = shared.deliveries.view();
    d.failures
        .since(Millis(i64::MIN))
        .flat_map(|((c, t), f)| {
            f.by_error
                .iter()
                .map(move |(e, n)| (labels(&[("cluster", c), ("topic", t), ("error", e)]), Some(*n as f64)))
        })
        .collect()
}

fn missing_by_cause(shared: &Shared, now: Millis) -> Series {
    use streamsight_core::delivery::Causes;
    let d = shared.deliveries.view();
    let mut recent: BTreeMap<(&str, &str, &str), [u64; 6]> = BTreeMap::new();
    for w in d
        .events
        .iter()
        .filter(|w| now.since(w.reconciled_at) <= MISSING_WINDOW_MS)
    {
        let sums = recent.entry((&w.cluster, &w.group, &w.topic)).or_default();
        for (sum, n) in sums.iter_mut().zip(w.missing.values()) {
            *sum = sum.saturating_add(n);
        }
    }
    d.ledger
        .totals()
        .keys()
        .flat_map(|(c, g, t)| {
            let sums = recent
                .get(&(c.as_str(), g.as_str(), t.as_str()))
                .copied()
                .unwrap_or_default();
            Causes::NAMES.iter().zip(sums).map(move |(cause, n)| {
                (
                    labels(&[("cluster", c), ("group", g), ("topic", t), ("cause", cause)]),
                    Some(n as f64),
                )
            })
        })
        .collect()
}

/// Dead letters read so far per reason, or those at validation per schema: counters.
fn dead_letters(shared: &Shared, signal: Signal) -> Series {
    let mut counts: BTreeMap<Vec<(&str, String)>, u64> = BTreeMap::new();
    let monitors = shared.dlq.view();
    for m in monitors.iter() {
        for t in m.report() {
            // Counted from when the monitor first read the topic to its end:
            // letters written before it watched are not a burst.
            let Some(reasons) = &t.since_caught_up else { continue };
            for (r, n) in reasons {
                let key = if signal == Signal::SchemaViolations {
                    if r.stage != "validation" {
                        continue;
                    }
                    vec![
                        ("cluster", m.config.name.clone()),
                        ("topic", r.source_topic.clone()),
                        ("schema", r.schema.clone()),
                        ("error_class", r.error_class.clone()),
                    ]
                } else {
                    vec![
                        ("cluster", m.config.name.clone()),
                        ("topic", t.dlq_topic.clone()),
                        ("source_topic", r.source_topic.clone()),
                        ("error_class", r.error_class.clone()),
                        ("stage", r.stage.clone()),
                    ]
                };
                *counts.entry(key).or_default() += n;
            }
        }
    }
    counts
        .into_iter()
        .map(|(pairs, n)| {
            let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
            (labels(&pairs), Some(n as f64))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    type Pairs<'a> = &'a [(&'a str, &'a str)];

    fn part(signal: Signal, aggregate: Option<Aggregate>, series: &[(Pairs<'_>, Option<f64>)]) -> KeyedSeries {
        KeyedSeries {
            signal,
            statuses: Vec::new(),
            aggregate,
            series: series.iter().map(|(l, v)| (labels(l), *v)).collect(),
        }
    }

    #[test]
    fn a_groups_labels_are_made_once_and_let_go_once_nothing_holds_them() {
        let mut names = GroupLabels::default();
        let a = names.of("prod", "billing");
        assert!(
            SharedLabels::ptr_eq(&a, &names.of("prod", "billing")),
            "one Arc per group"
        );
        assert_eq!(*a, *labels(&[("cluster", "prod"), ("group", "billing")]));
        assert!(!SharedLabels::ptr_eq(&a, &names.of("staging", "billing")));
        // 5,000 groups seen once and held by nothing else: let go by a sweep,
        // while the held one stays the same Arc.
        for g in 0..5_000 {
            names.of("prod", &format!("g{g}"));
        }
        assert_eq!(names.len(), 5_002);
        names.sweep();
        assert_eq!(names.len(), 1, "only billing of prod is still held");
        assert!(SharedLabels::ptr_eq(&a, &names.of("prod", "billing")));
        // Below double the last sweep's size, no sweep (amortized).
        names.of("prod", "once");
        names.sweep();
        assert_eq!(names.len(), 2);
    }

    #[test]
    fn parts_of_a_group_on_several_nodes_make_the_whole() {
        let billing: &[(&str, &str)] = &[("cluster", "c"), ("group", "billing")];
        let audit: &[(&str, &str)] = &[("cluster", "c"), ("group", "audit")];
        let sum = Some(Aggregate::Sum);
        let merged = merge(vec![
            part(
                Signal::GroupLagMessages,
                sum,
                &[(billing, Some(2_404.0)), (audit, Some(5.0))],
            ),
            part(
                Signal::GroupLagMessages,
                sum,
                &[(billing, Some(2_404.0)), (audit, None)],
            ),
            part(Signal::GroupLagSeconds, None, &[(billing, Some(30.0))]),
            part(Signal::GroupLagSeconds, None, &[(billing, Some(90.0)), (audit, None)]),
            part(Signal::RetentionMarginSeconds, None, &[(billing, Some(600.0))]),
            part(Signal::RetentionMarginSeconds, None, &[(billing, Some(60.0))]),
        ]);
        let value = |signal, aggregate, l: &[(&str, &str)]| {
            let key = Query {
                signal,
                statuses: Vec::new(),
                aggregate,
            };
            merged[&key].iter().find(|(x, _)| *x == labels(l)).map(|(_, v)| *v)
        };
        // Sums add up; a part unknown makes the whole unknown, never smaller.
        assert_eq!(value(Signal::GroupLagMessages, sum, billing), Some(Some(4_808.0)));
        assert_eq!(value(Signal::GroupLagMessages, sum, audit), Some(None));
        // The group is as far behind as its worst part; its margin its least.
        assert_eq!(value(Signal::GroupLagSeconds, None, billing), Some(Some(90.0)));
        assert_eq!(value(Signal::RetentionMarginSeconds, None, billing), Some(Some(60.0)));
    }

    #[test]
    fn a_series_every_node_sees_alike_counts_once() {
        let dlq: &[(&str, &str)] = &[("cluster", "c"), ("topic", "orders.dlq")];
        let orders: &[(&str, &str)] = &[("cluster", "c"), ("topic", "orders")];
        let merged = merge(vec![
            part(Signal::DlqVelocity, None, &[(dlq, Some(3.0))]),
            part(Signal::DlqVelocity, None, &[(dlq, Some(3.0))]),
            part(Signal::FailedSends, None, &[(orders, Some(7.0))]),
            part(Signal::FailedSends, None, &[]),
        ]);
        assert_eq!(merged[&Query::of(Signal::DlqVelocity)], vec![(labels(dlq), Some(3.0))]);
        assert_eq!(
            merged[&Query::of(Signal::FailedSends)],
            vec![(labels(orders), Some(7.0))]
        );
    }

    #[test]
    fn a_groups_derived_signals_merge_as_their_series_do() {
        let parts = [
            GroupSignals {
                cluster: "c".into(),
                group: "billing".into(),
                retention_margin_seconds: Some(600.0),
                catch_up_seconds: None,
                partitions_not_committing: 1,
            },
            GroupSignals {
                cluster: "c".into(),
                group: "billing".into(),
                retention_margin_seconds: Some(60.0),
                catch_up_seconds: Some(30.0),
                partitions_not_committing: 2,
            },
        ];
        let mut whole = parts[0].clone();
        whole.merge(&parts[1]);
        let billing: &[(&str, &str)] = &[("cluster", "c"), ("group", "billing")];
        for (signal, value) in [
            (Signal::RetentionMarginSeconds, whole.retention_margin_seconds),
            (Signal::CatchUpSeconds, whole.catch_up_seconds),
            (
                Signal::PartitionsNotCommitting,
                Some(f64::from(whole.partitions_not_committing)),
            ),
        ] {
            let of = |g: &GroupSignals| match signal {
                Signal::RetentionMarginSeconds => g.retention_margin_seconds,
                Signal::CatchUpSeconds => g.catch_up_seconds,
                _ => Some(f64::from(g.partitions_not_committing)),
            };
            let merged = merge(parts.iter().map(|g| part(signal, None, &[(billing, of(g))])).collect());
            assert_eq!(merged[&Query::of(signal)], vec![(labels(billing), value)], "{signal:?}");
        }
        assert_eq!(whole.retention_margin_seconds, Some(60.0));
        assert_eq!(whole.catch_up_seconds, Some(30.0));
        assert_eq!(whole.partitions_not_committing, 3);
    }
}
