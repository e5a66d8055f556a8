//! The values rules compare: one series per group, topic, DLQ, probe partition,
//! cluster or service, read from the services at one time.

use crate::state::Shared;
use std::collections::BTreeMap;
use streamsight_core::alerts::rule::{Rule, Signal};
use streamsight_core::alerts::{SharedLabels, glob_match};
use streamsight_core::{Millis, Status};

/// Problem windows reconciled this recently count as missing messages now.
const MISSING_WINDOW_MS: i64 = 600_000;

fn labels(pairs: &[(&str, &str)]) -> SharedLabels {
    SharedLabels::new(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())
}

/// One value per series, labels shared.
pub(super) type Series = Vec<(SharedLabels, Option<f64>)>;

/// Every series of `rule`'s signal at `now`, before its scope: computed once per
/// cycle for all the rules that share the signal (see [`scoped`]).
pub(super) fn all(shared: &Shared, rule: &Rule, derived: &[super::derived::GroupSignals], now: Millis) -> Series {
    let per_group = |value: fn(&super::derived::GroupSignals) -> Option<f64>| {
        derived
            .iter()
            .map(|g| (labels(&[("cluster", &g.cluster), ("group", &g.group)]), value(g)))
            .collect()
    };
    match rule.signal {
        Signal::RetentionMarginSeconds => per_group(|g| g.retention_margin_seconds),
        Signal::CatchUpSeconds => per_group(|g| g.catch_up_seconds),
        Signal::PartitionsNotCommitting => per_group(|g| Some(f64::from(g.partitions_not_committing))),
        Signal::GroupLagSeconds | Signal::GroupLagMessages | Signal::GroupStatus => groups(shared, rule, now),
        Signal::ProducerFailing => producer_failing(shared, now),
        Signal::MissingMessages => missing(shared, now),
        Signal::DlqVelocity => dlq(shared),
        Signal::ProbeFailing => probes(shared),
        Signal::ClusterUnreachable => clusters(shared),
        Signal::ServiceReporting => services(shared, now),
        Signal::ProduceRate => produce_rates(shared, now),
        Signal::ConsumeRate => consume_rates(shared),
    }
}

/// `all` sorted by labels with one value per label set, its labels replaced by
/// the equal ones of the signal's previous cycle (`previous`, sorted): alerts
/// keep those, so the rules' walks compare pointers, not strings. Returns the
/// labels to pass as `previous` next cycle.
pub(super) fn settle(mut all: Series, previous: &[SharedLabels]) -> (Series, Vec<SharedLabels>) {
    if !all.is_sorted_by(|a, b| a.0 <= b.0) {
        all.sort_by(|a, b| a.0.cmp(&b.0));
    }
    all.dedup_by(|later, first| later.0 == first.0);
    let mut old = previous.iter().peekable();
    for (labels, _) in &mut all {
        while old.next_if(|o| ***o < **labels).is_some() {}
        if let Some(o) = old.next_if(|o| ***o == **labels) {
            *labels = o.clone();
        }
    }
    let labels = all.iter().map(|(l, _)| l.clone()).collect();
    (all, labels)
}

/// What makes two rules' signals the same series.
pub(super) type Key = (Signal, Vec<Status>);

pub(super) fn key(rule: &Rule) -> Key {
    let statuses = if rule.signal == Signal::GroupStatus {
        rule.statuses.clone()
    } else {
        Vec::new()
    };
    (rule.signal, statuses)
}

/// The series of `all` in `rule`'s scope, with the rule's labels added (which
/// keeps them sorted unless a rule label replaces one of the series').
pub(super) fn scoped(all: &[(SharedLabels, Option<f64>)], rule: &Rule) -> Series {
    all.iter()
        .filter(|(l, _)| {
            rule.scope
                .iter()
                .all(|(k, pattern)| l.get(k).is_some_and(|v| glob_match(pattern, v)))
        })
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

fn groups(shared: &Shared, rule: &Rule, now: Millis) -> Series {
    let summaries = shared.lag.summaries(now, crate::dashboard::refresh_ms(&shared.config));
    summaries
        .groups
        .iter()
        .map(|g| {
            let value = match rule.signal {
                Signal::GroupLagSeconds => g.max_lag_seconds,
                Signal::GroupLagMessages => g.complete.then_some(g.total_lag as f64),
                // Stale is missing data: unknown, never "not stalled".
                _ if g.status == Status::Stale && !rule.statuses.contains(&Status::Stale) => None,
                _ => Some(f64::from(u8::from(rule.statuses.contains(&g.status)))),
            };
            (labels(&[("cluster", &g.cluster), ("group", &g.group)]), value)
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

/// A topic's entry, its names copied only the first time.
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

fn probes(shared: &Shared) -> Series {
    shared
        .probes
        .view()
        .iter()
        .flat_map(|p| {
            let (cluster, topic) = (p.config.name.clone(), p.config.topic.clone());
            p.report().partitions.into_iter().map(move |r| {
                let partition = r.partition.to_string();
                let l = labels(&[("cluster", &cluster), ("topic", &topic), ("partition", &partition)]);
                (l, Some(f64::from(u8::from(r.status != "ok"))))
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
    let span = crate::time_ms(shared.config.pathway_window);
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
        (labels(&[("cluster", cluster), ("group", group)]), total)
    })
}
