//! The HTTP API: `/api/v1/...` JSON, `/metrics`, `/healthz`, `/readyz`.

mod burrow;
mod estate;
mod filters;
mod groups;
pub mod metrics;

use crate::filters::ShardsOnly;
use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use streamsight_http::fanout;
use streamsight_http::query::{ApiQuery, with_coverage};
use streamsight_http::{ApiError, ErrorKind};
use streamsight_node::Shared;
use streamsight_node::clock;

/// The API's own routes; the collector adds the features' and a fallback.
pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/healthz", get(|| async { axum::Json(json!({ "status": "ok" })) }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(prometheus))
        .route("/api/v1/lag", get(groups::lag))
        .route("/api/v1/groups", get(groups::groups))
        .route("/api/v1/groups/{cluster}/{group}", get(groups::group))
        .route("/api/v1/partitions", get(estate::partitions))
        .route("/api/v1/pathways", get(estate::pathways))
        .route("/api/v1/rejections", get(rejections))
        .route("/api/v1/intake", get(intake))
        .route("/api/v1/events", get(events))
        .route("/api/v1/clusters", get(clusters))
        .route("/api/v1/deliveries", get(estate::deliveries))
        .route("/api/v1/probes", get(probes))
        .route("/api/v1/dlq", get(dlq))
        .route("/api/v1/audit", get(audit))
        .route("/api/v1/nodes", get(nodes))
        .merge(burrow::routes())
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

/// The last append failed and nothing since shows the log takes appends: on
/// a sharded log, an announcement this node made after the failure and read
/// back does (it was appended to the log and read from it).
fn storage_failing(shared: &Shared) -> bool {
    let failed_at = shared.storage_failed_at_ms.load(Ordering::Acquire);
    let echoed_since = shared
        .directory
        .get()
        .is_some_and(|d| d.echoed_sent_at_ms() > failed_at);
    shared.storage_failing.load(Ordering::Acquire) && !echoed_since
}

async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    if !shared.ready.load(Ordering::Acquire) {
        ApiError::new(ErrorKind::NotReady, "replaying stored data").into_response()
    } else if let Some(age) = shared.directory.get().and_then(|d| d.unreachable_for()) {
        ApiError::new(ErrorKind::LogUnreachable, format!(
                "this node's announcements have not come back from the log for {} s: it cannot reach the log, and the other nodes no longer ask it",
                age.as_secs()
            )).into_response()
    } else if storage_failing(&shared) {
        ApiError::new(
            ErrorKind::StorageUnavailable,
            "the last append to storage failed: intake answers 503 until one succeeds",
        )
        .into_response()
    } else {
        axum::Json(json!({ "status": "ready" })).into_response()
    }
}

/// `/metrics`'s query: a granularity other than the configured one (an
/// unknown one is refused, 400 `bad_query`, naming the valid ones).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct MetricsQuery {
    granularity: Option<streamsight_node::config::Granularity>,
}

async fn prometheus(State(shared): State<Arc<Shared>>, ApiQuery(query): ApiQuery<MetricsQuery>) -> Response {
    let granularity = query.granularity.unwrap_or(shared.config.metrics.granularity);
    streamsight_http::off_worker(shared, move |shared| {
        let body = metrics::render(shared, clock::now(), granularity);
        (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
            body,
        )
            .into_response()
    })
    .await
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

/// Recent resets and data losses; on a sharded log, of every shard, in time order.
async fn events(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    ApiQuery(query): ApiQuery<ShardsOnly>,
) -> Response {
    let local = |s: &Shared, shards: Option<&std::collections::BTreeSet<u32>>| {
        let mut events = s.lag.events();
        events.retain(|e| fanout::in_shards(s, shards, e.topic()));
        events
    };
    fanout::answer(
        shared,
        "/api/v1/events",
        query.shards,
        None,
        &headers,
        local,
        |mut events, coverage| {
            if coverage.is_some() {
                events.sort_by_key(streamsight_core::EngineEvent::at);
            }
            with_coverage(json!({ "events": events }), coverage)
        },
    )
    .await
}

/// Polled clusters: brokers, the last poll's errors, and each group's state
/// and members as the brokers describe them. On a sharded log each cluster is
/// polled by one node at a time: each node is asked, and a cluster's newest
/// poll is shown, whoever made it.
async fn clusters(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    ApiQuery(query): ApiQuery<ShardsOnly>,
) -> Response {
    let local = |s: &Shared, _: Option<&std::collections::BTreeSet<u32>>| cluster_rows(s);
    fanout::answer(
        shared,
        "/api/v1/clusters",
        query.shards,
        None,
        &headers,
        local,
        |rows, coverage| {
            let newest = |v: &serde_json::Value| v["last_poll"]["at_ms"].as_i64().unwrap_or(i64::MIN);
            let mut clusters = serde_json::Map::new();
            for (name, view) in rows {
                let newer = clusters.get(&name).is_none_or(|kept| newest(&view) > newest(kept));
                if newer {
                    clusters.insert(name, view);
                }
            }
            with_coverage(json!({ "clusters": clusters }), coverage)
        },
    )
    .await
}

/// This node's view of each configured cluster: its poller's counters and last poll.
fn cluster_rows(shared: &Shared) -> Vec<(String, serde_json::Value)> {
    shared
        .clusters
        .view()
        .iter()
        .map(|(name, v)| {
            let last = v.last.as_ref().map(|s| {
                // Share groups' lag, summed per group: share-group lag, an upper
                // bound if any partition's is (no DescribeShareGroupOffsets v1).
                let mut share: std::collections::HashMap<String, (usize, Option<i64>, bool)> = Default::default();
                for l in s.share_lag() {
                    let e = share.entry(l.group).or_insert((0, Some(0), false));
                    e.0 += 1;
                    e.1 = e.1.zip(l.lag).map(|(a, b)| a + b);
                    e.2 |= l.upper_bound;
                }
                let groups: Vec<_> = s
                    .groups
                    .iter()
                    .map(|g| {
                        let (share_partitions, share_lag, upper_bound) = share
                            .get(&g.name)
                            .copied()
                            .map_or((None, None, None), |(n, lag, bound)| (Some(n), lag, Some(bound)));
                        json!({
                            "group": g.name,
                            "state": g.state,
                            "group_type": g.group_type,
                            "group_epoch": g.group_epoch,
                            "protocol_type": g.protocol_type,
                            // Unknown (null) unless a describe answered: never "none".
                            "members": g.described.then_some(&g.members),
                            "committed_partitions": g.offsets.len(),
                            "share_partitions": share_partitions,
                            "share_lag": share_lag,
                            "share_lag_upper_bound": upper_bound,
                            "streams": g.streams,
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
        .collect()
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
                "sla_ms": streamsight_node::clock::time_ms(p.config.sla),
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
    let ledger = shared.redrives.view();
    let clusters: Vec<_> = shared
        .dlq
        .view()
        .iter()
        .map(|m| {
            let mut topics = json!(m.report());
            // Each recent record links to its journey, and to its trace where a
            // trace UI is configured; a redriven one says where it went.
            for t in topics.as_array_mut().into_iter().flatten() {
                let dlq_topic = t["dlq_topic"].as_str().unwrap_or_default().to_owned();
                for r in t["recent"].as_array_mut().into_iter().flatten() {
                    let (p, o) = (r["partition"].as_i64(), r["offset"].as_i64());
                    if let (Some(p), Some(o)) = (p.and_then(|p| i32::try_from(p).ok()), o)
                        && let Some((_, to, at, run)) = ledger.sent(&m.config.name, &dlq_topic, p, o)
                    {
                        r["redriven"] = json!({ "to": to, "at_ms": at.0, "run": run });
                    }
                }
            }
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
async fn audit(
    State(shared): State<Arc<Shared>>,
    caller: Option<axum::Extension<streamsight_http::auth::Caller>>,
) -> Response {
    if let Some(refused) = streamsight_http::auth::unless_admin(caller.as_deref(), "the audit log") {
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
