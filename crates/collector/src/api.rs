//! The HTTP API: `/api/v1/...` JSON, `/metrics`, `/healthz`, `/readyz`.

use crate::fanout;
use crate::intake::error_response;
use crate::state::Shared;
use crate::{clock, metrics};
use axum::Router;
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use streamsight_core::{GroupFold, LagRow, Millis, PartitionReport};

/// A query string as `T`, or 400 `bad_query` saying what is wrong: the one
/// place a malformed query becomes an answer.
#[derive(Debug)]
pub(crate) struct ApiQuery<T>(pub T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> axum::extract::FromRequestParts<S> for ApiQuery<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, Response> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(q)) => Ok(ApiQuery(q)),
            Err(e) => Err(error_response(StatusCode::BAD_REQUEST, "bad_query", &e.body_text())),
        }
    }
}

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { axum::Json(json!({ "status": "ok" })) }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(prometheus))
        .route("/api/v1/lag", get(lag))
        .route("/api/v1/groups", get(groups))
        .route("/api/v1/groups/{cluster}/{group}", get(group))
        .route("/api/v1/partitions", get(partitions))
        .route("/api/v1/pathways", get(pathways))
        .route("/api/v1/rejections", get(rejections))
        .route("/api/v1/intake", get(intake))
        .route("/api/v1/events", get(events))
        .route("/api/v1/clusters", get(clusters))
        .route("/api/v1/deliveries", get(deliveries))
        .route("/api/v1/probes", get(probes))
        .route("/api/v1/dlq", get(dlq))
        .route("/api/v1/audit", get(audit))
        .route("/api/v1/nodes", get(nodes))
        .merge(crate::alerts::api::routes())
        .merge(crate::journeys::api::routes())
        .merge(crate::burrow::routes())
        .merge(crate::dashboard::routes())
        .fallback(|| async { error_response(StatusCode::NOT_FOUND, "not_found", "no such endpoint") })
        .with_state(shared)
}

/// The nodes of a sharded log: this one, the others, and who holds each shard.
async fn nodes(State(shared): State<Arc<Shared>>) -> Response {
    let Some(directory) = shared.directory.get() else {
        return axum::Json(json!({ "sharded": false })).into_response();
    };
    let owners: Vec<serde_json::Value> = directory
        .owners()
        .into_iter()
        .enumerate()
        .map(|(shard, owner)| match owner {
            Some(streamsight_store::directory::Owner::Local) => json!({ "shard": shard, "node": directory.node() }),
            Some(streamsight_store::directory::Owner::Peer { node, .. }) => json!({ "shard": shard, "node": node }),
            None => json!({ "shard": shard, "node": null }),
        })
        .collect();
    axum::Json(json!({
        "sharded": true,
        "node": directory.node(),
        "shards": directory.shards(),
        "held": directory.held(),
        "peers": directory.peers(),
        "owners": owners,
    }))
    .into_response()
}

async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    if !shared.ready.load(Ordering::Acquire) {
        error_response(StatusCode::SERVICE_UNAVAILABLE, "not_ready", "replaying stored data")
    } else if shared.storage_failing.load(Ordering::Acquire) {
        error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "storage_unavailable",
            "the last append to storage failed: intake answers 503 until one succeeds",
        )
    } else {
        axum::Json(json!({ "status": "ready" })).into_response()
    }
}

async fn prometheus(State(shared): State<Arc<Shared>>) -> Response {
    crate::server::off_worker(shared, move |shared| {
        let body = metrics::render(shared, clock::now());
        (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
            body,
        )
            .into_response()
    })
    .await
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LagFilter {
    cluster: Option<String>,
    group: Option<String>,
    topic: Option<String>,
    /// Another node of a sharded log asks for these shards' rows (see [`fanout`]).
    shards: Option<String>,
}

impl LagFilter {
    fn keeps(&self, cluster: &str, group: &str, topic: &str) -> bool {
        let wants = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        wants(&self.cluster, cluster) && wants(&self.group, group) && wants(&self.topic, topic)
    }
}

fn lag_rows(shared: &Shared, now: Millis, filter: &LagFilter, shards: Option<&BTreeSet<u32>>) -> Vec<LagRow> {
    let snapshots = shared.clusters.snapshots();
    let engine = shared.lag.engine();
    engine
        .reports(now, |n| {
            filter.keeps(n.cluster, n.group, n.topic) && fanout::in_shards(shared, shards, n.topic)
        })
        .into_iter()
        .map(|(n, report)| LagRow {
            consumer: snapshots
                .get(n.cluster)
                .and_then(|s| s.consumer(n.group, n.topic, n.partition)),
            ..n.row(report)
        })
        .collect()
}

/// Every group-partition's lag, of every shard on a sharded log.
async fn lag(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    ApiQuery(filter): ApiQuery<LagFilter>,
) -> Response {
    let now = clock::now();
    let asked = filter.shards.clone();
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| lag_rows(s, now, &filter, shards);
    fanout::answer(
        shared,
        "/api/v1/lag",
        asked,
        query,
        &headers,
        local,
        |mut rows, coverage| {
            if coverage.is_some() {
                rows.sort_by(|a, b| {
                    (&a.cluster, &a.group, &a.topic, a.partition).cmp(&(&b.cluster, &b.group, &b.topic, b.partition))
                });
            }
            with_coverage(json!({ "now_ms": now.0, "rows": rows }), coverage)
        },
    )
    .await
}

/// The answer, with which shards it covers on a sharded log.
fn with_coverage(mut body: serde_json::Value, coverage: Option<fanout::Coverage>) -> Response {
    if let Some(coverage) = coverage {
        body["shards"] = json!(coverage);
    }
    axum::Json(body).into_response()
}

#[derive(Debug, Serialize)]
struct GroupRow {
    cluster: String,
    group: String,
    status: streamsight_core::Status,
    partitions: usize,
    total_lag: i64,
    complete: bool,
    max_lag: Option<MaxLag>,
}

#[derive(Debug, Serialize)]
struct MaxLag {
    topic: String,
    partition: i32,
    lag_messages: i64,
}

/// A group's row from its partitions' rows, wherever they were held: the
/// same fold as the engine's for a group it holds whole.
fn fold_groups(rows: Vec<LagRow>) -> Vec<GroupRow> {
    let mut groups: BTreeMap<(String, String), GroupFold<(String, i32)>> = BTreeMap::new();
    for row in rows {
        groups
            .entry((row.cluster, row.group))
            .or_default()
            .add((row.topic, row.partition), row.report);
    }
    groups
        .into_iter()
        .map(|((cluster, group), fold)| {
            let fold = fold.finish();
            GroupRow {
                cluster,
                group,
                status: fold.status,
                partitions: fold.partitions,
                total_lag: fold.total_lag,
                complete: fold.complete,
                max_lag: fold.max_lag.map(|((topic, partition), lag_messages)| MaxLag {
                    topic,
                    partition,
                    lag_messages,
                }),
            }
        })
        .collect()
}

/// Every group, by cluster and name. On a sharded log a group's partitions
/// may be in several shards: their rows are gathered, then folded here.
async fn groups(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let now = clock::now();
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| lag_rows(s, now, &LagFilter::default(), shards);
    fanout::answer(shared, "/api/v1/lag", None, None, &headers, local, |rows, coverage| {
        let mut groups = fold_groups(rows);
        // A missing shard may hold more of any group: every sum is a lower bound.
        if coverage.as_ref().is_some_and(|c| !c.missing.is_empty()) {
            for g in &mut groups {
                g.complete = false;
            }
        }
        with_coverage(json!({ "groups": groups }), coverage)
    })
    .await
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Range {
    /// Keep history samples from this time on (ms since the epoch).
    from_ms: Option<i64>,
    shards: Option<String>,
}

/// A group's partitions of some shards, and that part's recent samples.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "row", rename_all = "snake_case")]
enum GroupDetailRow {
    Partition {
        topic: String,
        partition: i32,
        reason: String,
        lag: Box<streamsight_core::LagReport>,
        consumer: Option<streamsight_core::Consumer>,
        recent_commits: Vec<serde_json::Value>,
    },
    /// A sample of the group's partitions that `part` (a node) holds.
    Sample {
        part: String,
        sample: crate::state::GroupSample,
    },
}

fn group_detail_rows(
    shared: &Shared,
    cluster: &str,
    group: &str,
    from_ms: i64,
    now: Millis,
    shards: Option<&BTreeSet<u32>>,
) -> Vec<GroupDetailRow> {
    let snapshots = shared.clusters.snapshots();
    let engine = shared.lag.engine();
    let Some(gid) = engine.find_group(cluster, group) else {
        return Vec::new();
    };
    let mut rows: Vec<GroupDetailRow> = engine
        .group_members(gid)
        .iter()
        .filter(|&&gp| fanout::in_shards(shared, shards, engine.names(gp).topic))
        .map(|&gp| {
            let n = engine.names(gp);
            let lag = engine.evaluate(gp, now);
            GroupDetailRow::Partition {
                topic: n.topic.to_owned(),
                partition: n.partition,
                reason: engine.reason(gp, &lag, now),
                consumer: snapshots
                    .get(n.cluster)
                    .and_then(|s| s.consumer(n.group, n.topic, n.partition)),
                recent_commits: engine.commits(gp).map(|c| json!(c)).collect(),
                lag: Box::new(lag),
            }
        })
        .collect();
    drop(engine);
    let part = shared.directory.get().map_or("local", |d| d.node()).to_owned();
    rows.extend(
        shared
            .lag
            .group_history(gid)
            .into_iter()
            .filter(|s| s.at_ms >= from_ms)
            .map(|sample| GroupDetailRow::Sample {
                part: part.clone(),
                sample,
            }),
    );
    rows
}

/// A group's samples from the nodes holding its parts, one per housekeeping
/// interval: sums and worsts of the parts', incomplete where a part has none.
fn merge_history(
    samples: Vec<(String, crate::state::GroupSample)>,
    interval_ms: i64,
) -> Vec<crate::state::GroupSample> {
    let parts: BTreeSet<&str> = samples.iter().map(|(p, _)| p.as_str()).collect();
    if parts.len() <= 1 {
        return samples.into_iter().map(|(_, s)| s).collect();
    }
    let mut buckets: BTreeMap<i64, BTreeMap<&str, &crate::state::GroupSample>> = BTreeMap::new();
    for (part, sample) in &samples {
        buckets
            .entry(sample.at_ms.div_euclid(interval_ms.max(1)))
            .or_default()
            .insert(part, sample);
    }
    buckets
        .into_values()
        .map(|of| {
            let mut merged = crate::state::GroupSample {
                at_ms: 0,
                status: streamsight_core::Status::Ok,
                total_lag: 0,
                complete: of.len() == parts.len(),
                max_lag_seconds: None,
                lag_seconds_lower_bound: false,
                producer_failing: false,
            };
            for s in of.values() {
                merged.at_ms = merged.at_ms.max(s.at_ms);
                merged.status = merged.status.max(s.status);
                merged.total_lag = merged.total_lag.saturating_add(s.total_lag);
                merged.complete &= s.complete;
                if s.max_lag_seconds > merged.max_lag_seconds {
                    merged.max_lag_seconds = s.max_lag_seconds;
                    merged.lag_seconds_lower_bound = s.lag_seconds_lower_bound;
                }
                merged.producer_failing |= s.producer_failing;
            }
            merged
        })
        .collect()
}

async fn group(
    State(shared): State<Arc<Shared>>,
    Path((cluster, group)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    ApiQuery(range): ApiQuery<Range>,
) -> Response {
    let now = clock::now();
    let from = range.from_ms.unwrap_or(i64::MIN);
    let path = format!(
        "/api/v1/groups/{}/{}",
        fanout::segment(&cluster),
        fanout::segment(&group)
    );
    let (c, g) = (cluster.clone(), group.clone());
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| group_detail_rows(s, &c, &g, from, now, shards);
    let refresh_ms = crate::dashboard::refresh_ms(&shared.config);
    let interval_ms = crate::time_ms(shared.config.history_interval);
    let query = query.map(|q| {
        q.split('&')
            .filter(|p| !p.starts_with("shards="))
            .collect::<Vec<_>>()
            .join("&")
    });
    fanout::answer(shared, &path, range.shards, query, &headers, local, |rows, coverage| {
        let mut fold = GroupFold::default();
        let (mut partitions, mut samples) = (Vec::new(), Vec::new());
        for row in rows {
            match row {
                GroupDetailRow::Partition {
                    topic,
                    partition,
                    reason,
                    lag,
                    consumer,
                    recent_commits,
                } => {
                    fold.add((), (*lag).clone());
                    partitions.push(json!({
                        "topic": topic,
                        "partition": partition,
                        "reason": reason,
                        "lag": lag,
                        "consumer": consumer,
                        "recent_commits": recent_commits,
                    }));
                }
                GroupDetailRow::Sample { part, sample } => samples.push((part, sample)),
            }
        }
        if partitions.is_empty() && coverage.as_ref().is_none_or(|c| c.missing.is_empty()) {
            return error_response(
                StatusCode::NOT_FOUND,
                "unknown_group",
                &format!("no group {group:?} in cluster {cluster:?}"),
            );
        }
        partitions.sort_by(|a, b| {
            (a["topic"].as_str(), a["partition"].as_i64()).cmp(&(b["topic"].as_str(), b["partition"].as_i64()))
        });
        let body = json!({
            "now_ms": now.0,
            "refresh_ms": refresh_ms,
            "cluster": cluster,
            "group": group,
            "status": fold.finish().status,
            "partitions": partitions,
            "history": merge_history(samples, interval_ms),
        });
        with_coverage(body, coverage)
    })
    .await
}

#[derive(Debug, Serialize, Deserialize)]
struct PartitionRow {
    cluster: String,
    topic: String,
    partition: i32,
    #[serde(flatten)]
    report: PartitionReport,
}

/// Only `shards=` (another node of a sharded log asking for its part).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardsOnly {
    shards: Option<String>,
}

fn partition_rows(shared: &Shared, now: Millis, shards: Option<&BTreeSet<u32>>) -> Vec<PartitionRow> {
    let engine = shared.lag.engine();
    engine
        .partitions()
        .filter_map(|pid| {
            let (cluster, topic, partition) = engine.partition_names(pid);
            fanout::in_shards(shared, shards, topic).then(|| PartitionRow {
                cluster: cluster.to_owned(),
                topic: topic.to_owned(),
                partition,
                report: engine.evaluate_partition(pid, now),
            })
        })
        .collect()
}

async fn partitions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<ShardsOnly>,
) -> Response {
    let now = clock::now();
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| partition_rows(s, now, shards);
    fanout::answer(
        shared,
        "/api/v1/partitions",
        query.shards,
        None,
        &headers,
        local,
        |rows, coverage| with_coverage(json!({ "now_ms": now.0, "partitions": rows }), coverage),
    )
    .await
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Window {
    window_seconds: Option<u64>,
    shards: Option<String>,
}

/// One service or topic of the pathway graph, or one edge with its health.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "element", rename_all = "snake_case")]
enum GraphRow {
    Node(serde_json::Value),
    Edge(serde_json::Value),
}

/// The graph's nodes and the edges of `shards`' topics (an edge's topic is
/// its `topic:` end; one between services is shard 0's, as its points are).
fn graph_rows(shared: &Shared, span_ms: i64, now: Millis, shards: Option<&BTreeSet<u32>>) -> Vec<GraphRow> {
    let mut graph = shared.pathways.graph(now.0.saturating_sub(span_ms), now.0 + 1);
    let topic_of = |e: &crate::pathways::Edge| {
        [&e.from, &e.to]
            .into_iter()
            .find_map(|end| end.strip_prefix("topic:"))
            .map(str::to_owned)
    };
    graph.edges.retain(|e| match topic_of(e) {
        Some(topic) => fanout::in_shards(shared, shards, &topic),
        None => shards.is_none_or(|s| s.contains(&0)),
    });
    let health = edge_health(shared, &graph, now);
    let nodes = graph.nodes.iter().map(|n| GraphRow::Node(json!(n)));
    let edges = graph.edges.iter().zip(health).map(|(e, status)| {
        let mut edge = json!(e);
        edge["status"] = json!(status);
        GraphRow::Edge(edge)
    });
    nodes.chain(edges).collect()
}

async fn pathways(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    ApiQuery(window): ApiQuery<Window>,
) -> Response {
    let now = clock::now();
    let span = window
        .window_seconds
        .map_or(crate::time_ms(shared.config.pathway_window), |s| {
            i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX)
        });
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| graph_rows(s, span, now, shards);
    fanout::answer(
        shared,
        "/api/v1/pathways",
        window.shards,
        query,
        &headers,
        local,
        |rows, coverage| {
            // A service is a node of every shard it touches: listed once.
            let mut nodes = BTreeMap::new();
            let mut edges = Vec::new();
            for row in rows {
                match row {
                    GraphRow::Node(n) => {
                        nodes
                            .entry(n["id"].as_str().unwrap_or_default().to_owned())
                            .or_insert(n);
                    }
                    GraphRow::Edge(e) => edges.push(e),
                }
            }
            let graph = json!({
                "from_ms": now.0.saturating_sub(span),
                "to_ms": now.0 + 1,
                "nodes": nodes.into_values().collect::<Vec<_>>(),
                "edges": edges,
            });
            with_coverage(graph, coverage)
        },
    )
    .await
}

/// Each edge's health: a consuming edge has its group's worst status, a
/// producing edge `producer_failing` while its topic's sends fail; `None` where
/// nothing is known of it.
fn edge_health(shared: &Shared, graph: &crate::pathways::Graph, now: Millis) -> Vec<Option<&'static str>> {
    let refresh_ms = crate::dashboard::refresh_ms(&shared.config);
    let summaries = shared.lag.summaries(now, refresh_ms);
    let mut groups: std::collections::HashMap<&str, streamsight_core::Status> = std::collections::HashMap::new();
    for g in &summaries.groups {
        let e = groups.entry(g.group.as_str()).or_insert(g.status);
        *e = (*e).max(g.status);
    }
    let failing_ms = shared.lag.engine().producer_failing_window_ms();
    let deliveries = shared.deliveries.view();
    let failing: std::collections::HashSet<&str> = deliveries
        .failures
        .since(Millis(now.0.saturating_sub(failing_ms)))
        .map(|((_, topic), _)| topic.as_str())
        .collect();
    graph
        .edges
        .iter()
        .map(|e| match (e.direction.as_str(), &e.group) {
            ("in", Some(g)) => groups.get(g.as_str()).map(|s| s.as_str()),
            ("out", _) => {
                let topic = e.to.strip_prefix("topic:").unwrap_or(&e.to);
                Some(if failing.contains(topic) {
                    "producer_failing"
                } else {
                    "ok"
                })
            }
            _ => None,
        })
        .collect()
}

async fn rejections(State(shared): State<Arc<Shared>>) -> Response {
    let engine = shared.lag.engine();
    let rejected = &engine.stats().rejected;
    let by_reason: serde_json::Map<String, serde_json::Value> = rejected
        .iter()
        .map(|(r, n)| (r.as_str().to_owned(), json!(n)))
        .collect();
    axum::Json(json!({ "total": rejected.total(), "by_reason": by_reason })).into_response()
}

async fn intake(State(shared): State<Arc<Shared>>) -> Response {
    let stats = engine_stats(&shared);
    axum::Json(json!({ "intake": shared.telemetry.snapshot(), "engine": stats })).into_response()
}

fn engine_stats(shared: &Shared) -> serde_json::Value {
    let engine = shared.lag.engine();
    let s = engine.stats();
    let m = engine.memory();
    json!({
        "accepted": s.accepted,
        "redundant": s.redundant,
        "rejected": s.rejected.total(),
        "resets": s.resets,
        "partitions": m.partitions,
        "group_partitions": m.group_partitions,
        "partition_bytes": m.partition_bytes,
        "group_partition_bytes": m.group_partition_bytes,
    })
}

async fn events(State(shared): State<Arc<Shared>>) -> Response {
    let events: Vec<_> = shared.lag.events();
    axum::Json(json!({ "events": events })).into_response()
}

/// Polled clusters: brokers, the last poll's errors, and each group's state
/// and members as the brokers describe them.
async fn clusters(State(shared): State<Arc<Shared>>) -> Response {
    let clusters: serde_json::Map<String, serde_json::Value> = shared
        .clusters
        .view()
        .iter()
        .map(|(name, v)| {
            let last = v.last.as_ref().map(|s| {
                let groups: Vec<_> = s
                    .groups
                    .iter()
                    .map(|g| {
                        json!({
                            "group": g.name,
                            "state": g.state,
                            "protocol_type": g.protocol_type,
                            "members": g.members,
                            "committed_partitions": g.offsets.len(),
                            "error": g.error,
                        })
                    })
                    .collect();
                json!({
                    "at_ms": s.at.0,
                    "metadata_ok": s.metadata_ok,
                    "groups_listed": s.groups_listed,
                    "brokers": s.brokers,
                    "topics": s.topics.len(),
                    "partitions": s.partition_count(),
                    "requests": s.requests,
                    "errors": s.errors,
                    "groups": groups,
                })
            });
            (name.clone(), json!({ "poller": v, "last_poll": last }))
        })
        .collect();
    axum::Json(json!({ "clusters": clusters })).into_response()
}

/// Drop accounting: reconciled windows with the cause of every missing message,
/// cumulative totals per group and topic, and the recent problem windows.
/// One row of the drop accounting, tagged with the list it belongs to.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "list", rename_all = "snake_case")]
enum DeliveryRow {
    Window(serde_json::Value),
    Total(serde_json::Value),
    Event(serde_json::Value),
}

fn delivery_rows(shared: &Shared, filter: &LagFilter, shards: Option<&BTreeSet<u32>>) -> Vec<DeliveryRow> {
    let keep = |c: &str, g: &str, t: &str| filter.keeps(c, g, t) && fanout::in_shards(shared, shards, t);
    let d = shared.deliveries.view();
    let windows = d
        .ledger
        .reports(keep)
        .into_iter()
        .map(|w| DeliveryRow::Window(json!(w)));
    let totals = d
        .ledger
        .totals()
        .iter()
        .filter(|((c, g, t), _)| keep(c, g, t))
        .map(|((c, g, t), totals)| {
            DeliveryRow::Total(json!({ "cluster": c, "group": g, "topic": t, "totals": totals }))
        });
    let events = d
        .events
        .iter()
        .filter(|r| keep(&r.cluster, &r.group, &r.topic))
        .map(|e| DeliveryRow::Event(json!(e)));
    windows.chain(totals).chain(events).collect()
}

async fn deliveries(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    ApiQuery(filter): ApiQuery<LagFilter>,
) -> Response {
    let asked = filter.shards.clone();
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| delivery_rows(s, &filter, shards);
    fanout::answer(
        shared,
        "/api/v1/deliveries",
        asked,
        query,
        &headers,
        local,
        |rows, coverage| {
            let (mut windows, mut totals, mut events) = (Vec::new(), Vec::new(), Vec::new());
            for row in rows {
                match row {
                    DeliveryRow::Window(w) => windows.push(w),
                    DeliveryRow::Total(t) => totals.push(t),
                    DeliveryRow::Event(e) => events.push(e),
                }
            }
            with_coverage(
                json!({ "windows": windows, "totals": totals, "events": events }),
                coverage,
            )
        },
    )
    .await
}

/// End-to-end probes: per partition of each probe topic.
async fn probes(State(shared): State<Arc<Shared>>) -> Response {
    let probes: Vec<_> = shared
        .probes
        .view()
        .iter()
        .map(|p| {
            json!({
                "cluster": p.config.name,
                "topic": p.config.topic,
                "sla_ms": crate::time_ms(p.config.sla),
                "last_error": p.last_error(),
                "report": p.report(),
            })
        })
        .collect();
    axum::Json(json!({ "probes": probes })).into_response()
}

/// Dead-letter queues: velocity, totals, reasons and recent records per DLQ topic.
async fn dlq(State(shared): State<Arc<Shared>>) -> Response {
    let template = &shared.config.trace_url;
    let clusters: Vec<_> = shared
        .dlq
        .view()
        .iter()
        .map(|m| {
            let mut topics = json!(m.report());
            // Each recent record links to its journey, and to its trace where a
            // trace UI is configured.
            for r in topics
                .as_array_mut()
                .into_iter()
                .flatten()
                .flat_map(|t| t["recent"].as_array_mut())
                .flatten()
            {
                if let Some(id) = r["provenance"]["trace_id"].as_str()
                    && streamsight_wire::dlq::is_trace_id(id)
                {
                    let id = id.to_owned();
                    r["journey_url"] = json!(format!("/journeys/{id}"));
                    if !template.is_empty() {
                        r["trace_url"] = json!(template.replace("{trace_id}", &id));
                    }
                }
            }
            json!({ "cluster": m.config.name, "topics": topics })
        })
        .collect();
    axum::Json(json!({ "clusters": clusters })).into_response()
}

/// Administrative actions of the caller's tenant: for admin keys only (open,
/// like everything, while no key exists).
async fn audit(State(shared): State<Arc<Shared>>, caller: Option<axum::Extension<crate::auth::Caller>>) -> Response {
    if let Some(refused) = crate::auth::unless_admin(caller.as_deref(), "the audit log") {
        return refused;
    }
    let events: Vec<serde_json::Value> = shared
        .audit
        .events()
        .into_iter()
        .map(|(at, event)| json!({ "at_ms": at.0, "event": event }))
        .collect();
    axum::Json(json!({ "events": events })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::GroupSample;

    fn sample(at_ms: i64, lag: i64, status: streamsight_core::Status) -> GroupSample {
        GroupSample {
            at_ms,
            status,
            total_lag: lag,
            complete: true,
            max_lag_seconds: Some(lag as f64),
            lag_seconds_lower_bound: false,
            producer_failing: false,
        }
    }

    #[test]
    fn parts_samples_merge_per_interval_and_a_missing_part_is_incomplete() {
        use streamsight_core::Status::{Ok, Warn};
        let merged = merge_history(
            vec![
                ("a".into(), sample(10_100, 5, Ok)),
                ("b".into(), sample(10_900, 7, Warn)),
                ("a".into(), sample(20_100, 6, Ok)),
            ],
            1_000 * 10,
        );
        assert_eq!(merged.len(), 2);
        assert_eq!(
            (merged[0].at_ms, merged[0].total_lag, merged[0].status),
            (10_900, 12, Warn)
        );
        assert!(merged[0].complete);
        assert!(!merged[1].complete, "b has no sample in the second interval");
        // One part: its samples as they are.
        assert_eq!(merge_history(vec![("a".into(), sample(1, 1, Ok))], 10).len(), 1);
    }
}
