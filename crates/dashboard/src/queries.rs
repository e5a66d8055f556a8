//! The two answers the dashboard needs that no other endpoint gives in one read:
//! the overview (incidents first, then every group, sorted, filtered and paged
//! on the server so that 10,000 groups cost the browser one page) and a topic.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;
use streamsight_core::{Millis, Status};
use streamsight_http::{ApiError, ErrorKind};
use streamsight_node::Shared;
use streamsight_node::clock;
use streamsight_node::services::GroupSummary;

/// Rows per overview page at most.
const MAX_PER_PAGE: usize = 500;
/// Incidents of each kind listed at most (the count says how many there are).
const MAX_INCIDENTS: usize = 100;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OverviewQuery {
    /// Comma-separated statuses to keep.
    status: Option<String>,
    /// Substring of the cluster or group name.
    q: Option<String>,
    /// `status` (worst first, the default), `lag_seconds`, `lag`, `name`.
    sort: Option<String>,
    page: Option<usize>,
    per_page: Option<usize>,
    /// Another node of a sharded log asks for these shards' part.
    shards: Option<String>,
}

fn bad_query(e: &impl std::fmt::Display) -> Response {
    ApiError::new(ErrorKind::BadQuery, e.to_string()).into_response()
}

pub(crate) async fn overview(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    streamsight_http::query::ApiQuery(query): streamsight_http::query::ApiQuery<OverviewQuery>,
) -> Response {
    if shared.sharded() {
        return sharded_overview(shared, query, &headers).await;
    }
    streamsight_http::off_worker(shared, move |shared| {
        let now = clock::now();
        let refresh_ms = shared.config.refresh_ms();
        let summaries = shared.lag.summaries(now, refresh_ms);
        let (producers, data_loss) = shard_incidents(shared, now, None);
        let incidents = incidents(shared, now, producers, data_loss);
        match overview_json(
            shared,
            &query,
            now,
            summaries.groups.iter().collect(),
            summaries.at,
            incidents,
        ) {
            Ok(v) => axum::Json(v).into_response(),
            Err(e) => bad_query(&e),
        }
    })
    .await
}

/// What the overview needs of one part of a sharded log.
#[derive(Debug, serde::Serialize, Deserialize)]
#[serde(tag = "row", rename_all = "snake_case")]
enum OverviewRow {
    Group(GroupSummary),
    ProducersFailing(Value),
    DataLoss(Value),
}

fn overview_rows(shared: &Shared, now: Millis, shards: Option<&std::collections::BTreeSet<u32>>) -> Vec<OverviewRow> {
    // This node's cached summaries are of every shard it holds: used when
    // those are the shards asked for.
    let held = shared.directory.get().map(|d| d.held());
    let groups: Vec<GroupSummary> = if shards.is_none() || shards == held.as_ref() {
        shared.lag.summaries(now, shared.config.refresh_ms()).groups.clone()
    } else {
        shared
            .lag
            .summaries_where(now, &|topic| streamsight_http::fanout::in_shards(shared, shards, topic))
    };
    let (producers, data_loss) = shard_incidents(shared, now, shards);
    groups
        .into_iter()
        .map(OverviewRow::Group)
        .chain(producers.into_iter().map(OverviewRow::ProducersFailing))
        .chain(data_loss.into_iter().map(OverviewRow::DataLoss))
        .collect()
}

/// The overview of every shard: groups folded from their parts, the shards'
/// incidents gathered, this node's own (its DLQ monitors, probes, pollers).
async fn sharded_overview(shared: Arc<Shared>, query: OverviewQuery, headers: &axum::http::HeaderMap) -> Response {
    let now = clock::now();
    let local = move |s: &Shared, shards: Option<&std::collections::BTreeSet<u32>>| overview_rows(s, now, shards);
    let build_shared = shared.clone();
    streamsight_http::fanout::answer(
        shared,
        "/api/v1/overview",
        query.shards.clone(),
        None,
        headers,
        local,
        move |rows, coverage| {
            let mut parts: BTreeMap<(String, String), Vec<GroupSummary>> = BTreeMap::new();
            let (mut producers, mut data_loss) = (Vec::new(), Vec::new());
            for row in rows {
                match row {
                    OverviewRow::Group(g) => parts.entry((g.cluster.clone(), g.group.clone())).or_default().push(g),
                    OverviewRow::ProducersFailing(p) => producers.push(p),
                    OverviewRow::DataLoss(d) => data_loss.push(d),
                }
            }
            let mut groups: Vec<GroupSummary> = parts.into_values().filter_map(GroupSummary::merge).collect();
            // A missing shard may hold more of any group: every sum is a lower bound.
            if coverage.as_ref().is_some_and(|c| !c.missing.is_empty()) {
                for g in &mut groups {
                    g.complete = false;
                }
            }
            producers.truncate(MAX_INCIDENTS);
            data_loss.truncate(MAX_INCIDENTS);
            let incidents = incidents(&build_shared, now, producers, data_loss);
            match overview_json(&build_shared, &query, now, groups.iter().collect(), now, incidents) {
                Ok(mut v) => {
                    v["shards"] = json!(coverage);
                    axum::Json(v).into_response()
                }
                Err(e) => bad_query(&e),
            }
        },
    )
    .await
}

fn statuses(list: &str) -> Result<Vec<Status>, String> {
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| serde_json::from_value::<Status>(json!(s)).map_err(|_| format!("unknown status {s:?}")))
        .collect()
}

type Order = fn(&GroupSummary, &GroupSummary) -> Ordering;

fn by_name(a: &GroupSummary, b: &GroupSummary) -> Ordering {
    (&a.cluster, &a.group).cmp(&(&b.cluster, &b.group))
}

/// Unknown lag seconds sort as the worst: missing data is never healthy.
fn seconds(g: &GroupSummary) -> f64 {
    g.max_lag_seconds.unwrap_or(f64::INFINITY)
}

/// A group's lag for ordering: unknown sorts as the largest.
fn lag(g: &GroupSummary) -> i64 {
    g.total_lag.unwrap_or(i64::MAX)
}

fn order(sort: &str) -> Result<Order, String> {
    Ok(match sort {
        "status" => |a, b| {
            b.status
                .cmp(&a.status)
                .then(seconds(b).total_cmp(&seconds(a)))
                .then(by_name(a, b))
        },
        "lag_seconds" => |a, b| seconds(b).total_cmp(&seconds(a)).then(by_name(a, b)),
        "lag" => |a, b| lag(b).cmp(&lag(a)).then(by_name(a, b)),
        "name" => by_name,
        other => return Err(format!("unknown sort {other:?}: status, lag_seconds, lag or name")),
    })
}

/// The overview's page of `groups`, with the incidents.
fn overview_json(
    shared: &Shared,
    query: &OverviewQuery,
    now: Millis,
    groups: Vec<&GroupSummary>,
    summarized_at: Millis,
    incidents: Value,
) -> Result<Value, String> {
    let refresh_ms = shared.config.refresh_ms();
    let keep = query.status.as_deref().map(statuses).transpose()?;
    let q = query.q.as_deref().unwrap_or("").to_lowercase();
    let cmp = order(query.sort.as_deref().unwrap_or("status"))?;
    let per_page = query.per_page.unwrap_or(50).clamp(1, MAX_PER_PAGE);

    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for g in &groups {
        *counts.entry(g.status.as_str()).or_default() += 1;
    }
    let total_groups = groups.len();
    let mut rows: Vec<&GroupSummary> = groups
        .into_iter()
        .filter(|g| keep.as_ref().is_none_or(|k| k.contains(&g.status)))
        .filter(|g| q.is_empty() || g.group.to_lowercase().contains(&q) || g.cluster.to_lowercase().contains(&q))
        .collect();
    let total = rows.len();
    let pages = total.div_ceil(per_page).max(1);
    let page = query.page.unwrap_or(1).clamp(1, pages);
    // Only the page is sorted in full: select it, then order what is shown.
    let start = (page - 1) * per_page;
    let end = (start + per_page).min(total);
    if start < total {
        if start > 0 {
            rows.select_nth_unstable_by(start, |a, b| cmp(a, b));
        }
        let tail = &mut rows[start..];
        if end - start < tail.len() {
            tail.select_nth_unstable_by(end - start, |a, b| cmp(a, b));
        }
        rows[start..end].sort_by(|a, b| cmp(a, b));
    }
    let page_rows: Vec<&GroupSummary> = rows.get(start..end).unwrap_or_default().to_vec();

    Ok(json!({
        "now_ms": now.0,
        "summarized_at_ms": summarized_at.0,
        "refresh_ms": refresh_ms,
        "counts": counts,
        "total_groups": total_groups,
        "incidents": incidents,
        "groups": { "total": total, "page": page, "pages": pages, "per_page": per_page, "rows": page_rows },
    }))
}

/// The incidents a shard holds: producers failing on its topics, messages
/// missing from them.
fn shard_incidents(
    shared: &Shared,
    now: Millis,
    shards: Option<&std::collections::BTreeSet<u32>>,
) -> (Vec<Value>, Vec<Value>) {
    let failing_ms = shared.lag.engine().producer_failing_window_ms();
    let d = shared.deliveries.view();
    let producers: Vec<Value> = d
        .failures
        .since(Millis(now.0.saturating_sub(failing_ms)))
        .filter(|((_, topic), _)| streamsight_http::fanout::in_shards(shared, shards, topic))
        .take(MAX_INCIDENTS)
        .map(|((cluster, topic), f)| json!({ "cluster": cluster, "topic": topic, "failures": f }))
        .collect();
    let data_loss: Vec<Value> = d
        .ledger
        .totals()
        .iter()
        .filter(|((_, _, t), totals)| {
            totals.missing.total() > 0 && streamsight_http::fanout::in_shards(shared, shards, t)
        })
        .take(MAX_INCIDENTS)
        .map(|((c, g, t), totals)| json!({ "cluster": c, "group": g, "topic": t, "totals": totals }))
        .collect();
    (producers, data_loss)
}

/// What is wrong besides group health: failing producers, lost messages, DLQs
/// filling, probes down, clusters the poller cannot reach.
fn incidents(shared: &Shared, now: Millis, producers: Vec<Value>, data_loss: Vec<Value>) -> Value {
    let dlq: Vec<Value> = shared
        .dlq
        .view()
        .iter()
        .flat_map(|m| {
            let cluster = m.config.name.clone();
            m.report().into_iter().map(move |t| (cluster.clone(), t))
        })
        .filter(|(_, t)| t.velocity.is_some_and(|v| v > 0.0) || t.records.is_some_and(|r| r > 0))
        .take(MAX_INCIDENTS)
        .map(|(cluster, t)| {
            json!({
                "cluster": cluster, "dlq_topic": t.dlq_topic, "source_topic": t.source_topic,
                "velocity": t.velocity, "records": t.records,
                "top_reason": t.reasons.first().map(|(r, n)| json!({ "reason": r, "count": n })),
            })
        })
        .collect();
    let probes_down: Vec<Value> = shared
        .probes
        .view()
        .iter()
        .filter_map(|p| {
            let report = p.report();
            let down: Vec<i32> = report
                .partitions
                .iter()
                .filter(|r| r.status != "ok")
                .map(|r| r.partition)
                .collect();
            (!down.is_empty() || p.last_error().is_some()).then(|| {
                json!({ "cluster": p.config.name, "topic": p.config.topic, "partitions": down, "last_error": p.last_error() })
            })
        })
        .collect();
    let unreachable: Vec<Value> = shared
        .clusters
        .view()
        .iter()
        .filter_map(|(name, v)| match &v.last {
            Some(s) if !s.metadata_ok => Some(json!({ "cluster": name, "errors": s.errors, "at_ms": s.at.0 })),
            None if v.polls > 0 => Some(json!({ "cluster": name, "errors": ["no answer yet"] })),
            _ => None,
        })
        .collect();
    // Nobody evaluating the rules is an incident of its own: alerts listed
    // are then stale, and a quiet list is not all clear.
    let not_evaluated = streamsight_alerts::round::not_evaluated_because(shared, now);
    let alerts: Vec<Value> = streamsight_alerts::of(shared)
        .list(now, not_evaluated.is_some())
        .into_iter()
        .filter(|a| {
            matches!(
                a.alert.state,
                streamsight_core::alerts::AlertState::Firing | streamsight_core::alerts::AlertState::NoData
            )
        })
        .take(MAX_INCIDENTS)
        .map(|a| json!({ "rule": a.alert.rule, "state": a.alert.state, "summary": a.summary, "silenced": a.silenced, "stale": a.stale }))
        .collect();
    json!({
        "alerts_not_evaluated": not_evaluated,
        "alerts": alerts,
        "producers_failing": producers,
        "data_loss": data_loss,
        "dlq": dlq,
        "probes_down": probes_down,
        "clusters_unreachable": unreachable,
    })
}

pub(crate) async fn topic(
    State(shared): State<Arc<Shared>>,
    Path((cluster, topic)): Path<(String, String)>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
) -> Response {
    if let Some(answered) = streamsight_http::fanout::forward(&shared, &topic, &uri, &headers).await {
        return answered;
    }
    streamsight_http::off_worker(shared, move |shared| {
        match topic_json(shared, &cluster, &topic, clock::now()) {
            Some(v) => axum::Json(v).into_response(),
            None => ApiError::new(
                ErrorKind::UnknownTopic,
                format!("no topic {topic:?} in cluster {cluster:?}"),
            )
            .into_response(),
        }
    })
    .await
}

fn topic_json(shared: &Shared, cluster: &str, topic: &str, now: Millis) -> Option<Value> {
    let (partitions, groups) = {
        let engine = shared.lag.engine();
        let partitions: Vec<Value> = engine
            .partitions()
            .filter(|&pid| {
                let (c, t, _) = engine.partition_names(pid);
                c == cluster && t == topic
            })
            .map(|pid| {
                let (_, _, partition) = engine.partition_names(pid);
                json!({
                    "partition": partition,
                    "report": engine.evaluate_partition(pid, now),
                    "produce_rate_per_second": engine.produce_rate(pid, now, streamsight_core::Engine::RATE_WINDOW_MS),
                })
            })
            .collect();
        let mut groups: BTreeMap<&str, (Status, i64)> = BTreeMap::new();
        for gp in engine.group_partitions() {
            let n = engine.names(gp);
            if n.cluster == cluster && n.topic == topic {
                let r = engine.evaluate(gp, now);
                let e = groups.entry(n.group).or_insert((Status::Ok, 0));
                e.0 = e.0.max(r.status);
                e.1 = e.1.saturating_add(r.lag_messages.unwrap_or(0));
            }
        }
        let groups: Vec<Value> = groups
            .into_iter()
            .map(|(g, (status, lag))| json!({ "group": g, "status": status, "lag": lag }))
            .collect();
        (partitions, groups)
    };
    let (failures, drops, windows) = {
        let d = shared.deliveries.view();
        let failures = d.failures.get(cluster, topic).cloned();
        let drops: Vec<Value> = d
            .ledger
            .totals()
            .iter()
            .filter(|((c, _, t), _)| c == cluster && t == topic)
            .map(|((_, g, _), totals)| json!({ "group": g, "totals": totals }))
            .collect();
        let windows: Vec<Value> = d
            .events
            .iter()
            .rev()
            .filter(|w| w.cluster == cluster && w.topic == topic)
            .take(50)
            .map(|w| json!(w))
            .collect();
        (failures, drops, windows)
    };
    if partitions.is_empty() && failures.is_none() && drops.is_empty() {
        return None;
    }
    let dlq: Vec<Value> = shared
        .dlq
        .view()
        .iter()
        .filter(|m| m.config.name == cluster)
        .flat_map(|m| m.report())
        .filter(|t| t.source_topic.as_deref() == Some(topic) || t.dlq_topic == format!("{topic}.dlq"))
        .map(|t| json!(t))
        .collect();
    Some(json!({
        "now_ms": now.0,
        "refresh_ms": shared.config.refresh_ms(),
        "cluster": cluster,
        "topic": topic,
        "partitions": partitions,
        "groups": groups,
        "failures": failures,
        "drops": drops,
        "drop_windows": windows,
        "dlq": dlq,
    }))
}
