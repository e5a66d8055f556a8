//! `/metrics` in the Prometheus text format.
//!
//! Lag uses kafka-lag-exporter's names so existing dashboards keep working. Unknown
//! lag has no series at all (never 0), and no series ever carries -1 or
//! `partition="-1"`: the engine never holds such a partition.

mod engine;
mod signals;

pub use engine::{Snapshots, render_engine};

use std::fmt::Write;
use streamsight_core::{Millis, RejectCounts};
use streamsight_http::prometheus::{Family, esc, header};
use streamsight_node::Shared;
use streamsight_node::config::Granularity;
use streamsight_node::pathways::Graph;
use streamsight_node::telemetry::IntakeStats;
use streamsight_node::timings::{BOUNDS_S, EngineHolder, HistogramSnapshot, Stage};

/// On a sharded log: which shards this node holds (every series above is of
/// those only), and how many nobody answers for.
fn render_shards(out: &mut String, shared: &Shared) {
    let Some(directory) = shared.directory.get() else {
        return;
    };
    let held = directory.held();
    let missing = directory.owners().iter().filter(|o| o.is_none()).count();
    header(out, "streamsight_shards", "gauge", "Shards of the log.");
    let _ = writeln!(out, "streamsight_shards {}", directory.shards());
    header(
        out,
        "streamsight_shard_held",
        "gauge",
        "1 for each shard this node holds and has caught up with: its series are this node's.",
    );
    for shard in &held {
        let _ = writeln!(out, "streamsight_shard_held{{shard=\"{shard}\"}} 1");
    }
    header(
        out,
        "streamsight_shards_unowned",
        "gauge",
        "Shards no live node says it holds: their series are on no node's /metrics.",
    );
    let _ = writeln!(out, "streamsight_shards_unowned {missing}");
    header(
        out,
        "streamsight_process_pauses_total",
        "counter",
        "Times this process did not run for longer than a group's session allows (3 s): what it held of shards and leases was let go.",
    );
    let pauses = streamsight_store::pause::PauseWatch::get().pauses();
    let _ = writeln!(out, "streamsight_process_pauses_total {pauses}");
    if let Some(counts) = shared.snapshots.get() {
        render_snapshots(out, counts);
    }
}

fn render_snapshots(out: &mut String, c: &streamsight_store::snapshots::SnapshotCounts) {
    use std::sync::atomic::Ordering::Relaxed;
    let counters = [
        (
            "streamsight_shard_snapshots_written_total",
            "Snapshots of held shards written.",
            &c.written,
        ),
        (
            "streamsight_shard_snapshot_bytes_written_total",
            "Bytes of snapshots written.",
            &c.written_bytes,
        ),
        (
            "streamsight_shard_snapshot_write_failures_total",
            "Snapshots not written (the log refused or did not answer).",
            &c.write_failures,
        ),
        (
            "streamsight_shard_snapshots_restored_total",
            "Gained shards taken in from their snapshot.",
            &c.restored,
        ),
        (
            "streamsight_shard_snapshot_restore_failures_total",
            "Snapshots found but not usable: the shard was read from its start.",
            &c.restore_failures,
        ),
        (
            "streamsight_shard_replayed_messages_total",
            "Log messages read to catch gained shards up (after their snapshot, if any).",
            &c.replayed_messages,
        ),
    ];
    for (name, help, value) in counters {
        header(out, name, "counter", help);
        let _ = writeln!(out, "{name} {}", value.load(Relaxed));
    }
}

/// Everything, rendered at `now`, the lag series at `granularity`.
/// On a shared log: the jobs' leases this node holds, and how often it let
/// them go after not running for longer than the group's session allows.
fn render_leases(out: &mut String, shared: &Shared) {
    let Some(leases) = shared.leases.get() else {
        return;
    };
    let held = leases.held();
    header(
        out,
        "streamsight_leases_held",
        "gauge",
        "Leases of jobs (a cluster's poll, the alert rules) the group assigned this node; none while it waits to rejoin.",
    );
    let _ = writeln!(out, "streamsight_leases_held {}", held.count());
    header(
        out,
        "streamsight_leases_let_go_total",
        "counter",
        "Times this node let go of its leases and rejoined, having not run for longer than the group's session allows (a pause).",
    );
    let _ = writeln!(out, "streamsight_leases_let_go_total {}", held.let_go());
}

pub fn render(shared: &Shared, now: Millis, granularity: Granularity) -> String {
    let mut out = String::with_capacity(1 << 16);
    let topics = {
        let engine = shared.lag.engine();
        render_engine(&mut out, &engine, &shared.clusters.snapshots(), now, granularity);
        render_rejections(&mut out, &engine.stats().rejected);
        render_engine_memory(&mut out, &engine.memory());
        engine_topics(&engine)
    };
    render_failed_sends(&mut out, &topics, &shared.deliveries.view().failures);
    header(
        &mut out,
        "streamsight_group_history_bytes",
        "gauge",
        "Memory held by the groups' recent histories (the group page's chart), within limits.max_history_bytes.",
    );
    let _ = writeln!(out, "streamsight_group_history_bytes {}", shared.lag.history_bytes());
    let intake = shared.telemetry.snapshot();
    render_intake(&mut out, &intake);
    render_tls(&mut out, &intake);
    header(
        &mut out,
        "streamsight_decode_memory_bytes",
        "gauge",
        "Memory held now by requests being read and decoded, of the process's decode_memory_bytes.",
    );
    let _ = writeln!(out, "streamsight_decode_memory_bytes {}", shared.decode_memory.in_use());
    render_limited(&mut out, &shared.limited());
    header(
        &mut out,
        "streamsight_store_corrupt_batches_total",
        "counter",
        "Stored batches replay could not decode and skipped.",
    );
    let _ = writeln!(
        out,
        "streamsight_store_corrupt_batches_total {}",
        shared.telemetry.corrupt_batches()
    );
    let window = streamsight_node::clock::time_ms(shared.config.pathway_window);
    let graph = shared
        .pathways
        .graph(now.0.saturating_sub(window), now.0.saturating_add(1));
    render_pathways(&mut out, &graph);
    render_poller(&mut out, &shared.clusters.view());
    render_deliveries(&mut out, &shared.deliveries.view());
    render_probes(&mut out, &shared.probes.view());
    render_dlq(&mut out, &shared.dlq.view());
    signals::render_signals(&mut out, shared, now);
    for feature in shared.features() {
        feature.metrics(&mut out, now);
    }
    render_shards(&mut out, shared);
    render_leases(&mut out, shared);
    render_timings(&mut out, shared);
    out
}

/// Where writes' time goes (see `streamsight_node::timings`), as histograms.
fn render_timings(out: &mut String, shared: &Shared) {
    let stages: Vec<_> = Stage::ALL
        .iter()
        .map(|s| (format!("stage=\"{}\"", s.as_str()), shared.timings.stage(*s).snapshot()))
        .collect();
    histograms(
        out,
        Family::new(
            "streamsight_intake_stage_seconds",
            "histogram",
            "Time in each stage of a write: read and decode (intake requests), queue, append and apply (every write).",
        ),
        &stages,
    );
    let services: Vec<_> = shared
        .timings
        .services()
        .map(|(name, h)| (format!("service=\"{name}\""), h.snapshot()))
        .collect();
    histograms(
        out,
        Family::new(
            "streamsight_apply_seconds",
            "histogram",
            "Time each service took to apply a stored batch.",
        ),
        &services,
    );
    let waits: Vec<_> = EngineHolder::ALL
        .iter()
        .map(|by| {
            (
                format!("by=\"{}\"", by.as_str()),
                shared.lag.engine_waits().snapshot(*by),
            )
        })
        .collect();
    histograms(
        out,
        Family::new(
            "streamsight_engine_lock_wait_seconds",
            "histogram",
            "Time writers (apply) and readers (intake's translation, the API, housekeeping) waited for the engine.",
        ),
        &waits,
    );
    let listeners: Vec<_> = shared
        .timings
        .listeners()
        .iter()
        .map(|(name, h)| (format!("listener=\"{name}\""), h.snapshot()))
        .collect();
    histograms(
        out,
        Family::new(
            "streamsight_request_seconds",
            "histogram",
            "Time from a request's arrival at its listener to its answer's head, by listener (the collector's side of a client's latency).",
        ),
        &listeners,
    );
}

/// Histograms of one family, each series labelled `labels`: every series'
/// buckets, then their sums, then their counts, so that each sample name
/// stays in one block.
fn histograms(out: &mut String, mut family: Family, series: &[(String, HistogramSnapshot)]) {
    for (labels, h) in series {
        for (bound, n) in BOUNDS_S.iter().zip(h.at_or_below) {
            family.suffixed("_bucket", &format!("{labels},le=\"{bound}\""), n);
        }
        family.suffixed("_bucket", &format!("{labels},le=\"+Inf\""), h.count);
    }
    for (labels, h) in series {
        family.suffixed("_sum", labels, h.sum_seconds);
    }
    for (labels, h) in series {
        family.suffixed("_count", labels, h.count);
    }
    family.write(out);
}

fn render_dlq(out: &mut String, monitors: &[streamsight_dlq::DlqMonitor]) {
    let mut records = Family::new(
        "streamsight_dlq_records",
        "gauge",
        "Records in a dead-letter topic, from the brokers' end offsets.",
    );
    let mut velocity = Family::new(
        "streamsight_dlq_velocity_records_per_second",
        "gauge",
        "Records arriving in a dead-letter topic per second.",
    );
    let mut reasons = Family::new(
        "streamsight_dlq_reasons_total",
        "counter",
        "Dead-lettered records read, by source topic, error class and stage.",
    );
    let mut violations = Family::new(
        "streamsight_schema_violations_total",
        "counter",
        "Records dead-lettered at validation, by source topic, schema and error class.",
    );
    for m in monitors {
        for t in m.report() {
            let base = format!(
                "cluster_name=\"{}\",dlq_topic=\"{}\"",
                esc(&m.config.name),
                esc(&t.dlq_topic)
            );
            if let Some(n) = t.records {
                records.sample(&base, n);
            }
            if let Some(v) = t.velocity {
                velocity.sample(&base, v);
            }
            // Reasons also differ by naming convention: summed to one series per label set.
            let mut by_reason: std::collections::BTreeMap<(&str, &str, &str), u64> = Default::default();
            let mut by_schema: std::collections::BTreeMap<(&str, &str, &str), u64> = Default::default();
            for (r, n) in &t.reasons {
                *by_reason
                    .entry((&r.source_topic, &r.error_class, &r.stage))
                    .or_default() += n;
                if r.stage == "validation" {
                    *by_schema
                        .entry((&r.source_topic, &r.schema, &r.error_class))
                        .or_default() += n;
                }
            }
            for ((source, class, stage), n) in by_reason {
                reasons.sample(
                    &format!(
                        "{base},source_topic=\"{}\",error_class=\"{}\",stage=\"{}\"",
                        esc(source),
                        esc(class),
                        esc(stage)
                    ),
                    n,
                );
            }
            for ((topic, schema, class), n) in by_schema {
                violations.sample(
                    &format!(
                        "cluster_name=\"{}\",topic=\"{}\",schema=\"{}\",class=\"{}\"",
                        esc(&m.config.name),
                        esc(topic),
                        esc(schema),
                        esc(class)
                    ),
                    n,
                );
            }
        }
    }
    for family in [&records, &velocity, &reasons, &violations] {
        family.write(out);
    }
}

/// KMinion's end-to-end metrics, per probe and partition.
fn render_probes(out: &mut String, probes: &[streamsight_probe::Probe]) {
    let counter = |name, help| Family::new(name, "counter", help);
    let mut sent = counter("streamsight_probe_messages_sent_total", "Probe records sent.");
    let mut received = counter("streamsight_probe_messages_received_total", "Probe records read back.");
    let mut lost = counter(
        "streamsight_probe_messages_lost_total",
        "Probe records not read back within the SLA, or jumped over.",
    );
    let mut duplicated = counter(
        "streamsight_probe_messages_duplicated_total",
        "Probe records read twice.",
    );
    let mut errors = counter("streamsight_probe_produce_errors_total", "Probe sends that failed.");
    let mut roundtrip = Family::new(
        "streamsight_probe_roundtrip_latency_seconds",
        "gauge",
        "Produce-to-consume latency of probe records (recent quantiles).",
    );
    let mut produce = Family::new(
        "streamsight_probe_produce_latency_seconds",
        "gauge",
        "Produce-to-acknowledgement latency of probe records (recent quantiles).",
    );
    let mut commit = Family::new(
        "streamsight_probe_commit_latency_seconds",
        "gauge",
        "Latency of the probe consumer's commits (recent quantiles).",
    );
    let mut up = Family::new(
        "streamsight_probe_partition_up",
        "gauge",
        "1 when probe records round-trip within the SLA on the partition.",
    );
    for p in probes {
        let r = p.report();
        let base = format!(
            "cluster_name=\"{}\",topic=\"{}\"",
            esc(&p.config.name),
            esc(&p.config.topic)
        );
        for q in &r.partitions {
            let labels = format!("{base},partition=\"{}\"", q.partition);
            sent.sample(&labels, q.sent);
            received.sample(&labels, q.received);
            lost.sample(&labels, q.lost);
            duplicated.sample(&labels, q.duplicated);
            errors.sample(&labels, q.produce_errors);
            up.sample(&labels, u8::from(q.status == "ok"));
            for (family, summary) in [
                (&mut roundtrip, &q.roundtrip_latency),
                (&mut produce, &q.produce_latency),
            ] {
                if let Some(s) = summary {
                    family.sample(&format!("{labels},quantile=\"0.5\""), s.p50_seconds);
                    family.sample(&format!("{labels},quantile=\"0.99\""), s.p99_seconds);
                }
            }
        }
        if let Some(s) = &r.commit_latency {
            commit.sample(&format!("{base},quantile=\"0.5\""), s.p50_seconds);
            commit.sample(&format!("{base},quantile=\"0.99\""), s.p99_seconds);
        }
    }
    for family in [
        &sent,
        &received,
        &lost,
        &duplicated,
        &errors,
        &roundtrip,
        &produce,
        &commit,
        &up,
    ] {
        family.write(out);
    }
}

/// Every (cluster, topic) the engine has a partition of, copied so that the
/// engine is let go before the deliveries are read.
fn engine_topics(engine: &streamsight_core::Engine) -> std::collections::BTreeSet<(String, String)> {
    let mut seen = std::collections::BTreeSet::new();
    for pid in engine.partitions() {
        let (cluster, topic, _) = engine.partition_names(pid);
        seen.insert((cluster, topic));
    }
    seen.into_iter().map(|(c, t)| (c.to_owned(), t.to_owned())).collect()
}

/// Failed sends per topic since the collector started counting them: every
/// topic the engine knows at 0 until one fails, so a rule's `increase` sees
/// the first failures (the count by error is in the API).
fn render_failed_sends(
    out: &mut String,
    topics: &std::collections::BTreeSet<(String, String)>,
    failures: &streamsight_core::failures::SendFailures,
) {
    let mut family = Family::new(
        "streamsight_failed_sends_total",
        "counter",
        "Sends producers reported failed, per topic: those records are not in Kafka, so no lag counts them.",
    );
    let mut totals: std::collections::BTreeMap<(&str, &str), u64> =
        topics.iter().map(|(c, t)| ((c.as_str(), t.as_str()), 0)).collect();
    for ((cluster, topic), f) in failures.since(Millis(i64::MIN)) {
        totals.insert((cluster, topic), f.total);
    }
    for ((cluster, topic), n) in totals {
        family.sample(
            &format!("cluster_name=\"{}\",topic=\"{}\"", esc(cluster), esc(topic)),
            n,
        );
    }
    family.write(out);
}

fn render_deliveries(out: &mut String, d: &streamsight_node::deliveries::Deliveries) {
    let mut sent = Family::new(
        "streamsight_messages_sent_total",
        "counter",
        "Records producers tried to send, in reconciled windows, per consuming group.",
    );
    let mut received = Family::new(
        "streamsight_messages_received_total",
        "counter",
        "Records the group received, in reconciled windows.",
    );
    let mut delivered = Family::new(
        "streamsight_messages_delivered_total",
        "counter",
        "Records the group received and processed.",
    );
    let mut missing = Family::new(
        "streamsight_messages_missing_total",
        "counter",
        "Records sent but not delivered to the group, by cause.",
    );
    let mut duplicated = Family::new(
        "streamsight_messages_duplicated_total",
        "counter",
        "Records the group received more often than they were acknowledged.",
    );
    for ((cluster, group, topic), t) in d.ledger.totals() {
        let labels = format!(
            "cluster_name=\"{}\",group=\"{}\",topic=\"{}\"",
            esc(cluster),
            esc(group),
            esc(topic)
        );
        sent.sample(&labels, t.sent);
        received.sample(&labels, t.received);
        delivered.sample(&labels, t.delivered);
        duplicated.sample(&labels, t.duplicates);
        for (cause, n) in streamsight_core::delivery::Causes::NAMES.iter().zip(t.missing.values()) {
            missing.sample(&format!("{labels},cause=\"{cause}\""), n);
        }
    }
    for family in [&sent, &received, &delivered, &missing, &duplicated] {
        family.write(out);
    }
}

fn render_poller(
    out: &mut String,
    clusters: &std::collections::BTreeMap<String, streamsight_node::services::ClusterView>,
) {
    let mut polls = Family::new("streamsight_poller_polls_total", "counter", "Polls of the cluster.");
    let mut failed = Family::new(
        "streamsight_poller_failed_polls_total",
        "counter",
        "Polls where no broker answered Metadata.",
    );
    let mut refreshes = Family::new(
        "streamsight_poller_refreshes_total",
        "counter",
        "Refreshes between polls of the partitions where a group lags.",
    );
    let mut requests = Family::new(
        "streamsight_poller_requests_total",
        "counter",
        "Kafka requests the poller sent, handshakes included.",
    );
    let mut seconds = Family::new(
        "streamsight_poller_last_poll_seconds",
        "gauge",
        "How long the last poll of the cluster took.",
    );
    let mut poll_time = Family::new(
        "kafka_consumergroup_poll_time_ms",
        "gauge",
        "How long the last poll of the cluster took, in ms (kafka-lag-exporter's name).",
    );
    let mut members = Family::new(
        "streamsight_consumer_group_members",
        "gauge",
        "Members of a group as its coordinator describes it, by group state; absent while no describe answered (membership unknown, see /api/v1/clusters' error).",
    );
    let mut share_lag = Family::new(
        "streamsight_share_group_lag",
        "gauge",
        "Share-group lag (KIP-932 share groups, not consumer lag): records past the share-partition start offset not yet acknowledged, the broker's own KIP-1226 figure (DescribeShareGroupOffsets v1); where a broker cannot give it, start offset to end offset, an upper bound, marked upper_bound=\"true\".",
    );
    for (name, v) in clusters {
        let labels = format!("cluster_name=\"{}\"", esc(name));
        for l in v.last.iter().flat_map(|s| s.share_lag()) {
            if let Some(lag) = l.lag {
                // The bound label only where it is one: an exact series keeps
                // the labels it always had.
                let bound = if l.upper_bound { ",upper_bound=\"true\"" } else { "" };
                share_lag.sample(
                    &format!(
                        "{labels},group=\"{}\",topic=\"{}\",partition=\"{}\"{bound}",
                        esc(&l.group),
                        esc(&l.topic),
                        l.partition
                    ),
                    lag,
                );
            }
        }
        polls.sample(&labels, v.polls);
        failed.sample(&labels, v.failed_polls);
        refreshes.sample(&labels, v.refreshes);
        requests.sample(&labels, v.requests);
        if let Some(ms) = v.last_poll_ms {
            seconds.sample(&labels, ms / 1000.0);
            poll_time.sample(&labels, ms);
        }
        for g in v
            .last
            .iter()
            .flat_map(|s| &s.groups)
            .filter(|g| g.exists() && g.described)
        {
            let state = g.state.as_deref().unwrap_or("unknown");
            members.sample(
                &format!("{labels},group=\"{}\",state=\"{}\"", esc(&g.name), esc(state)),
                g.members.len(),
            );
        }
    }
    for family in [
        &polls, &failed, &refreshes, &requests, &seconds, &poll_time, &members, &share_lag,
    ] {
        family.write(out);
    }
}

fn render_rejections(out: &mut String, rejected: &RejectCounts) {
    header(
        out,
        "streamsight_rejected_points_total",
        "counter",
        "Points refused before they could move lag, by reason.",
    );
    for (reason, n) in rejected.iter() {
        let _ = writeln!(
            out,
            "streamsight_rejected_points_total{{reason=\"{}\"}} {n}",
            reason.as_str()
        );
    }
}

/// What the engine holds by its own accounting (docs/engine.md's bounds): beside
/// the process's RSS, it tells bounded stores filling from memory that leaks.
fn render_engine_memory(out: &mut String, m: &streamsight_core::MemoryUsage) {
    let mut family = Family::new(
        "streamsight_engine_memory_bytes",
        "gauge",
        "Bytes the lag engine holds, by its own accounting: partitions (with their offset histories) and group-partitions.",
    );
    family.sample("what=\"partitions\"", m.partition_bytes);
    family.sample("what=\"group_partitions\"", m.group_partition_bytes);
    family.write(out);
}

fn render_limited(out: &mut String, limited: &streamsight_core::LimitCounts) {
    let mut family = Family::new(
        "streamsight_limited_total",
        "counter",
        "New names, points, connections and requests refused by a limit, by limit.",
    );
    for (limit, n) in limited.iter() {
        family.sample(&format!("what=\"{}\"", limit.as_str()), n);
    }
    family.write(out);
}

fn render_intake(out: &mut String, s: &IntakeStats) {
    header(
        out,
        "streamsight_intake_payloads_total",
        "counter",
        "Data Streams payloads accepted.",
    );
    let _ = writeln!(out, "streamsight_intake_payloads_total {}", s.payloads);
    header(
        out,
        "streamsight_intake_bytes_total",
        "counter",
        "Bytes of accepted Data Streams payloads, as sent.",
    );
    let _ = writeln!(out, "streamsight_intake_bytes_total {}", s.bytes);
    header(
        out,
        "streamsight_intake_backlogs_total",
        "counter",
        "Backlog points received.",
    );
    let _ = writeln!(out, "streamsight_intake_backlogs_total {}", s.backlogs);
    header(
        out,
        "streamsight_intake_errors_total",
        "counter",
        "Payloads and points refused, by kind.",
    );
    for (kind, n) in &s.errors {
        let _ = writeln!(out, "streamsight_intake_errors_total{{kind=\"{}\"}} {n}", kind.as_str());
    }
    header(
        out,
        "streamsight_intake_dropped_bodies_total",
        "counter",
        "Bodies of agent endpoints answered but not used yet.",
    );
    for (endpoint, n, _) in &s.dropped {
        let _ = writeln!(
            out,
            "streamsight_intake_dropped_bodies_total{{endpoint=\"{}\"}} {n}",
            endpoint.as_str()
        );
    }
    header(
        out,
        "streamsight_failures_total",
        "counter",
        "Work of the collector's own that failed (a store append, a reload, a notification...), by failure.",
    );
    for (failure, n) in &s.failures {
        let _ = writeln!(
            out,
            "streamsight_failures_total{{failure=\"{}\"}} {n}",
            failure.as_str()
        );
    }
    header(
        out,
        "streamsight_refusals_total",
        "counter",
        "Requests answered with an error, by listener and kind, and by key id where the request named a key of this tenant.",
    );
    for r in &s.refusals {
        let key = r
            .key_id
            .as_deref()
            .map_or(String::new(), |id| format!(",key_id=\"{}\"", esc(id)));
        let _ = writeln!(
            out,
            "streamsight_refusals_total{{listener=\"{}\",kind=\"{}\"{key}}} {}",
            r.listener, r.kind, r.count
        );
    }
}

/// Each TLS listener's certificate's end, as Prometheus' blackbox exporter
/// says it (`probe_ssl_earliest_cert_expiry`): a unix time, so an alert reads
/// `streamsight_tls_certificate_expiry_seconds - time() < 14 * 86400`.
fn render_tls(out: &mut String, s: &IntakeStats) {
    if s.tls_expiry.is_empty() {
        return;
    }
    header(
        out,
        "streamsight_tls_certificate_expiry_seconds",
        "gauge",
        "When each TLS listener's served certificate stops being valid, in unix seconds.",
    );
    for (listener, not_after) in &s.tls_expiry {
        let _ = writeln!(
            out,
            "streamsight_tls_certificate_expiry_seconds{{listener=\"{listener}\"}} {not_after}"
        );
    }
}

fn render_pathways(out: &mut String, g: &Graph) {
    let mut pathway = Family::new(
        "streamsight_pathway_latency_seconds",
        "gauge",
        "Pathway latency quantiles per Kafka edge over the pathway window.",
    );
    let mut edge = Family::new(
        "streamsight_edge_latency_seconds",
        "gauge",
        "Edge latency quantiles per Kafka edge over the pathway window.",
    );
    for e in &g.edges {
        let labels = format!(
            "from=\"{}\",to=\"{}\",direction=\"{}\",group=\"{}\",env=\"{}\"",
            esc(&e.from),
            esc(&e.to),
            esc(&e.direction),
            esc(e.group.as_deref().unwrap_or("")),
            esc(&e.env)
        );
        for (family, q) in [
            (&mut pathway, &e.pathway_latency_seconds),
            (&mut edge, &e.edge_latency_seconds),
        ] {
            for (quantile, v) in [("0.5", q.p50), ("0.95", q.p95), ("0.99", q.p99)] {
                if let Some(v) = v {
                    family.sample(&format!("{labels},quantile=\"{quantile}\""), v);
                }
            }
        }
    }
    pathway.write(out);
    edge.write(out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamsight_core::{EngineConfig, Observation, PartitionRef};

    /// The text format wants each family's samples in one block after its header.
    fn assert_families_contiguous(out: &str) {
        let mut seen = std::collections::HashSet::new();
        let mut current = "";
        for line in out.lines() {
            let name = match line.strip_prefix("# TYPE ") {
                Some(rest) => rest.split(' ').next().unwrap_or(""),
                None if line.starts_with('#') => continue,
                None => line.split(['{', ' ']).next().unwrap_or(""),
            };
            if name != current {
                assert!(seen.insert(name.to_owned()), "{name} appears in two blocks:\n{out}");
                current = name;
            }
        }
    }

    #[test]
    fn unknown_lag_has_no_series_and_labels_are_escaped() {
        let mut e = streamsight_core::Engine::new(EngineConfig::default()).unwrap();
        let p = |partition| PartitionRef {
            cluster: "c",
            topic: "we\"ird",
            partition,
        };
        e.observe(
            Millis(0),
            &Observation::Committed {
                group: "g",
                partition: p(0),
                offset: 5,
            },
        )
        .unwrap();
        let _ = e.observe(
            Millis(0),
            &Observation::Produced {
                partition: p(-1),
                offset: -1,
            },
        );
        let mut out = String::new();
        render_engine(&mut out, &e, &Default::default(), Millis(1), Granularity::Partition);
        assert!(!out.contains("kafka_consumergroup_group_lag{"), "{out}");
        assert!(out.contains("topic=\"we\\\"ird\""), "{out}");
        assert!(out.contains("status=\"stale\""), "{out}");
        assert!(!out.contains("partition=\"-1\""), "{out}");
        assert_families_contiguous(&out);
        assert!(!out.contains(" -1\n"), "{out}");
    }

    #[test]
    fn a_coarser_granularity_writes_the_groups_and_not_their_partitions() {
        let mut e = streamsight_core::Engine::new(EngineConfig::default()).unwrap();
        for partition in 0..4 {
            let p = PartitionRef {
                cluster: "c",
                topic: if partition < 2 { "orders" } else { "payments" },
                partition,
            };
            e.observe(
                Millis(0),
                &Observation::Produced {
                    partition: p,
                    offset: 99,
                },
            )
            .unwrap();
            e.observe(
                Millis(0),
                &Observation::Committed {
                    group: "billing",
                    partition: p,
                    offset: 90,
                },
            )
            .unwrap();
        }
        let at = |g| {
            let mut out = String::new();
            render_engine(&mut out, &e, &Default::default(), Millis(1_000), g);
            assert_families_contiguous(&out);
            out
        };
        let (partition, topic, group) = (
            at(Granularity::Partition),
            at(Granularity::Topic),
            at(Granularity::Group),
        );
        let lines = |out: &str, name: &str| out.lines().filter(|l| l.starts_with(&format!("{name}{{"))).count();
        assert_eq!(lines(&partition, "kafka_consumergroup_group_lag"), 4);
        assert_eq!(lines(&partition, "kafka_partition_latest_offset"), 4);
        for coarse in [&topic, &group] {
            assert_eq!(lines(coarse, "kafka_consumergroup_group_lag"), 0, "{coarse}");
            assert_eq!(lines(coarse, "kafka_partition_latest_offset"), 0, "{coarse}");
            assert_eq!(lines(coarse, "streamsight_consumer_status"), 0, "{coarse}");
            assert!(
                coarse.contains("kafka_consumergroup_group_sum_lag{cluster_name=\"c\",group=\"billing\"} 40"),
                "{coarse}"
            );
        }
        assert_eq!(lines(&topic, "kafka_consumergroup_group_topic_sum_lag"), 2);
        assert_eq!(lines(&group, "kafka_consumergroup_group_topic_sum_lag"), 0);
        // The group's status is the same however fine the rest.
        let status = |out: &str| {
            out.lines()
                .find(|l| l.starts_with("streamsight_group_status{"))
                .map(str::to_owned)
        };
        assert!(status(&partition).is_some());
        assert_eq!(status(&partition), status(&topic));
        assert_eq!(status(&partition), status(&group));
        assert!(group.len() < topic.len() && topic.len() < partition.len());
    }
}
