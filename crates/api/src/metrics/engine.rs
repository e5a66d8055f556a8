//! The engine's series: lag per group-partition and partition, and
//! kafka-lag-exporter's aggregates per group and topic.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::sync::Arc;
use streamsight_core::{Engine, GroupFold, Millis};
use streamsight_http::prometheus::{Family, esc, header};
use streamsight_node::config::Granularity;

/// One group's lag, added up over its partitions.
#[derive(Default)]
struct GroupLag<'a> {
    max_lag: Option<i64>,
    max_lag_seconds: Option<f64>,
    sum_lag: i64,
    /// Some partition's lag is unknown: the sums are not written (never a partial sum).
    unknown: bool,
    topics: BTreeMap<&'a str, i64>,
    /// Records retention deleted before the group read them, per topic: every
    /// topic of the group from its first sighting, at 0 while none (a counter
    /// first seen at 100 reads as no increase to Prometheus).
    lost: BTreeMap<&'a str, i64>,
    described: bool,
    /// Its partitions' reports folded as the engine folds a group's: its
    /// status without evaluating every partition a second time.
    fold: GroupFold<()>,
}

/// kafka-lag-exporter's per-group series. Sums are written only when every
/// partition's lag is known; the maxima are over the partitions known.
/// One series per polled group: its type and state as the brokers said, so
/// that a Kafka 4 `consumer` group and a share group are told from a classic one.
fn render_group_info(out: &mut String, snapshots: &Snapshots) {
    let mut info = Family::new(
        "streamsight_group_info",
        "gauge",
        "1 per polled group, with its type (classic, consumer, share) and state as the brokers answered.",
    );
    for (cluster, snap) in snapshots.iter() {
        for g in snap.groups.iter().filter(|g| g.exists()) {
            let labels = format!(
                "cluster_name=\"{}\",group=\"{}\",group_type=\"{}\",state=\"{}\"",
                esc(cluster),
                esc(&g.name),
                esc(g.group_type.as_deref().unwrap_or("unknown")),
                esc(g.state.as_deref().unwrap_or("unknown"))
            );
            info.sample(&labels, 1);
        }
    }
    info.write(out);
}

fn render_group_aggregates(
    out: &mut String,
    groups: &BTreeMap<(&str, &str), GroupLag<'_>>,
    snapshots: &Snapshots,
    granularity: Granularity,
) {
    let mut max_lag = Family::new(
        "kafka_consumergroup_group_max_lag",
        "gauge",
        "The group's largest partition lag, in messages.",
    );
    let mut max_lag_seconds = Family::new(
        "kafka_consumergroup_group_max_lag_seconds",
        "gauge",
        "The group's largest partition lag, in seconds.",
    );
    let mut sum_lag = Family::new(
        "kafka_consumergroup_group_sum_lag",
        "gauge",
        "The group's lag summed over its partitions (absent while any is unknown).",
    );
    let mut topic_sum = Family::new(
        "kafka_consumergroup_group_topic_sum_lag",
        "gauge",
        "The group's lag on one topic, summed over its partitions (absent while any is unknown).",
    );
    for (&(cluster, group), g) in groups {
        // A group no member describes (committing without the group protocol) is simple.
        let simple = snapshots
            .get(cluster)
            .and_then(|s| s.groups.iter().find(|x| x.name == group))
            .map_or(!g.described, |x| x.protocol_type.as_deref().is_none_or(str::is_empty));
        let labels = format!("cluster_name=\"{}\",group=\"{}\"", esc(cluster), esc(group));
        let with_simple = format!("{labels},is_simple_consumer=\"{simple}\"");
        if let Some(v) = g.max_lag {
            max_lag.sample(&with_simple, v);
        }
        if let Some(v) = g.max_lag_seconds {
            max_lag_seconds.sample(&with_simple, v);
        }
        if !g.unknown {
            sum_lag.sample(&labels, g.sum_lag);
            if granularity >= Granularity::Topic {
                for (topic, v) in &g.topics {
                    topic_sum.sample(&format!("{labels},topic=\"{}\"", esc(topic)), v);
                }
            }
        }
    }
    for family in [&max_lag, &max_lag_seconds, &sum_lag, &topic_sum] {
        family.write(out);
    }
}

/// Snapshots of the polled clusters, by name: who owns each partition.
pub type Snapshots = HashMap<String, Arc<streamsight_poller::Snapshot>>;

/// Lag per group-partition and per partition, in kafka-lag-exporter's whole
/// family (reference.md §5) plus streamsight's own series; at a coarser
/// `granularity`, only the per-group (and per-topic) ones. Each
/// group-partition is evaluated once.
pub fn render_engine(out: &mut String, engine: &Engine, snapshots: &Snapshots, now: Millis, granularity: Granularity) {
    let per_partition = granularity == Granularity::Partition;
    let mut lag = Family::new(
        "kafka_consumergroup_group_lag",
        "gauge",
        "Messages the group has not read yet.",
    );
    let mut lag_seconds = Family::new(
        "kafka_consumergroup_group_lag_seconds",
        "gauge",
        "Age of the oldest record the group has not read yet.",
    );
    let mut lower_bound = Family::new(
        "streamsight_lag_seconds_lower_bound",
        "gauge",
        "Present (1) when lag seconds is only a lower bound: the record predates the history.",
    );
    let mut status = Family::new(
        "streamsight_consumer_status",
        "gauge",
        "1 for the group-partition's current status.",
    );
    let mut loss = Family::new(
        "streamsight_data_loss_messages_total",
        "counter",
        "Records retention deleted before the group read them, per group and topic (0 from the group-topic's first sighting).",
    );
    let mut offset = Family::new(
        "kafka_consumergroup_group_offset",
        "gauge",
        "The group's committed offset: the next offset it will read.",
    );
    let mut groups: BTreeMap<(&str, &str), GroupLag<'_>> = BTreeMap::new();
    for id in engine.group_partitions() {
        let (n, r) = (engine.names(id), engine.evaluate(id, now));
        let mut labels = format!(
            "cluster_name=\"{}\",group=\"{}\",topic=\"{}\",partition=\"{}\"",
            esc(n.cluster),
            esc(n.group),
            esc(n.topic),
            n.partition
        );
        let g = groups.entry((n.cluster, n.group)).or_default();
        // kafka-lag-exporter's member labels, where a poller named the member.
        if let Some(c) = snapshots
            .get(n.cluster)
            .and_then(|s| s.consumer(n.group, n.topic, n.partition))
        {
            for (name, value) in [
                ("member_host", &c.host),
                ("consumer_id", &c.member_id),
                ("client_id", &c.client_id),
            ] {
                if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
                    let _ = write!(labels, ",{name}=\"{}\"", esc(v));
                    g.described = true;
                }
            }
        }
        if let Some(v) = r.committed_offset.filter(|_| per_partition) {
            offset.sample(&labels, v);
        }
        if let Some(v) = r.lag_messages {
            if per_partition {
                lag.sample(&labels, v);
            }
            g.max_lag = g.max_lag.max(Some(v));
            g.sum_lag = g.sum_lag.saturating_add(v);
            let t = g.topics.entry(n.topic).or_default();
            *t = t.saturating_add(v);
        } else {
            g.unknown = true;
        }
        if let Some(v) = r.lag_seconds {
            if per_partition {
                lag_seconds.sample(&labels, v);
            }
            g.max_lag_seconds = Some(g.max_lag_seconds.map_or(v, |m| m.max(v)));
        }
        if per_partition {
            // Written only when they say something: at 100,000 group-partitions every
            // line a group-partition costs is megabytes per scrape.
            if r.lag_seconds_lower_bound {
                lower_bound.sample(&labels, 1);
            }
            status.sample(&format!("{labels},status=\"{}\"", r.status.as_str()), 1);
        }
        let lost = g.lost.entry(n.topic).or_default();
        *lost = lost.saturating_add(r.data_loss_messages);
        g.fold.add((), r);
    }
    for (&(cluster, group), g) in &groups {
        for (topic, n) in &g.lost {
            let labels = format!(
                "cluster_name=\"{}\",group=\"{}\",topic=\"{}\"",
                esc(cluster),
                esc(group),
                esc(topic)
            );
            loss.sample(&labels, *n);
        }
    }
    for family in [&lag, &lag_seconds, &offset, &lower_bound, &status, &loss] {
        family.write(out);
    }
    render_group_aggregates(out, &groups, snapshots, granularity);
    header(
        out,
        "streamsight_group_status",
        "gauge",
        "1 for the group's current status: its worst partition.",
    );
    for gid in engine.groups() {
        let (cluster, group) = engine.group_name(gid);
        // Folded above, each group once; a group of no partition is what
        // an empty fold says.
        let status = groups
            .remove(&(cluster, group))
            .map_or_else(GroupFold::<()>::default, |g| g.fold)
            .finish()
            .status;
        let _ = writeln!(
            out,
            "streamsight_group_status{{cluster_name=\"{}\",group=\"{}\",status=\"{}\"}} 1",
            esc(cluster),
            esc(group),
            status.as_str()
        );
    }
    render_group_info(out, snapshots);
    if per_partition {
        render_partitions(out, engine, now);
    }
}

/// The partitions' offsets and producer health.
fn render_partitions(out: &mut String, engine: &Engine, now: Millis) {
    let mut latest = Family::new(
        "kafka_partition_latest_offset",
        "gauge",
        "End offset: the max of what producers acknowledged and brokers reported.",
    );
    let mut produce = Family::new(
        "streamsight_produce_offset",
        "gauge",
        "Offset of the last record producers reported acknowledged.",
    );
    let mut failing = Family::new(
        "streamsight_producer_failing",
        "gauge",
        "1 while failed sends are being reported for the partition.",
    );
    let mut earliest = Family::new(
        "kafka_partition_earliest_offset",
        "gauge",
        "The partition's log start offset: the oldest offset still retained.",
    );
    let mut stable = Family::new(
        "kafka_partition_last_stable_offset",
        "gauge",
        "The partition's last stable offset: read_committed consumers read no further.",
    );
    for pid in engine.partitions() {
        let ((cluster, topic, partition), p) = (engine.partition_names(pid), engine.evaluate_partition(pid, now));
        let labels = format!(
            "cluster_name=\"{}\",topic=\"{}\",partition=\"{partition}\"",
            esc(cluster),
            esc(topic)
        );
        if let Some(end) = p.end_offset {
            latest.sample(&labels, end);
        }
        if let Some(o) = p.produce_offset {
            produce.sample(&labels, o);
        }
        failing.sample(&labels, u8::from(p.producer_failing));
        if let Some(o) = p.log_start_offset {
            earliest.sample(&labels, o);
        }
        if let Some(o) = p.last_stable_offset {
            stable.sample(&labels, o);
        }
    }
    for family in [&latest, &earliest, &stable, &produce, &failing] {
        family.write(out);
    }
}
