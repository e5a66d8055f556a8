//! Burrow's HTTP API (`/v3/kafka/...`, linkedin/Burrow `core/internal/httpserver`),
//! so that Burrow dashboards and alerting keep working, with streamsight's own
//! fields alongside under `streamsight`.
//!
//! Where Burrow has no word for a state streamsight knows, the nearest one that is
//! never healthy is used: `stale` reads as WARN, data loss as ERR. An unknown lag
//! is `null`, never 0.

use crate::clock;
use crate::state::Shared;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use streamsight_core::window::WINDOW;
use streamsight_core::{Engine, GroupPartitionId, Millis, Status};

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/v3/kafka", get(clusters))
        .route("/v3/kafka/{cluster}", get(cluster))
        .route("/v3/kafka/{cluster}/consumer", get(consumers))
        .route("/v3/kafka/{cluster}/consumer/{group}", get(consumer))
        .route("/v3/kafka/{cluster}/consumer/{group}/status", get(status))
        .route("/v3/kafka/{cluster}/consumer/{group}/lag", get(lag))
        .route("/v3/kafka/{cluster}/topic", get(topics))
        .route("/v3/kafka/{cluster}/topic/{topic}", get(topic))
}

fn request(uri: &Uri, headers: &HeaderMap) -> Value {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    json!({ "url": uri.path(), "host": host })
}

fn ok(message: &str, uri: &Uri, headers: &HeaderMap, key: &str, value: Value) -> Response {
    let mut body = json!({ "error": false, "message": message, "request": request(uri, headers) });
    body[key] = value;
    axum::Json(body).into_response()
}

fn not_found(message: &str, uri: &Uri, headers: &HeaderMap) -> Response {
    let body = json!({ "error": true, "message": message, "request": request(uri, headers) });
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

/// Clusters the engine knows of, and those configured for polling.
fn cluster_names(shared: &Shared) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = shared.clusters.view().keys().cloned().collect();
    let engine = shared.lag.engine();
    names.extend(engine.partitions().map(|p| engine.partition_names(p).0.to_owned()));
    names.extend(engine.groups().map(|g| engine.group_name(g).0.to_owned()));
    names
}

async fn clusters(State(shared): State<Arc<Shared>>, uri: Uri, headers: HeaderMap) -> Response {
    crate::server::off_worker(shared, move |shared| {
        let names: Vec<_> = cluster_names(shared).into_iter().collect();
        ok("cluster list returned", &uri, &headers, "clusters", json!(names))
    })
    .await
}

async fn cluster(
    State(shared): State<Arc<Shared>>,
    Path(cluster): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    crate::server::off_worker(shared, move |shared| {
        if !cluster_names(shared).contains(&cluster) {
            return not_found("cluster not found", &uri, &headers);
        }
        let view = shared.clusters.view().get(&cluster).cloned();
        let module = match view {
            Some(v) => json!({
                "class-name": "kafka",
                "servers": v.bootstrap,
                "client-profile": { "name": "streamsight", "client-id": "streamsight-poller", "kafka-version": "" },
                "topic-refresh": v.poll_interval_ms / 1000,
                "offset-refresh": v.poll_interval_ms / 1000,
                "streamsight": {
                    "polls": v.polls,
                    "failed_polls": v.failed_polls,
                    "requests": v.requests,
                    "last_poll_ms": v.last_poll_ms,
                    "brokers": v.last.as_ref().map(|s| &s.brokers),
                    "errors": v.last.as_ref().map(|s| &s.errors),
                },
            }),
            // Known only from instrumented clients: nothing polls it.
            None => json!({ "class-name": "streamsight-intake", "servers": [], "streamsight": { "polled": false } }),
        };
        ok("cluster module detail returned", &uri, &headers, "module", module)
    })
    .await
}

async fn consumers(
    State(shared): State<Arc<Shared>>,
    Path(cluster): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    crate::server::off_worker(shared, move |shared| {
        if !cluster_names(shared).contains(&cluster) {
            return not_found("cluster not found", &uri, &headers);
        }
        let mut groups: BTreeSet<String> = {
            let engine = shared.lag.engine();
            engine
                .groups()
                .map(|g| engine.group_name(g))
                .filter(|(c, _)| *c == cluster)
                .map(|(_, g)| g.to_owned())
                .collect()
        };
        // Groups with no committed offsets yet are still groups.
        if let Some(snap) = shared.clusters.snapshot(&cluster) {
            groups.extend(snap.groups.iter().filter(|g| g.exists()).map(|g| g.name.clone()));
        }
        ok("consumer list returned", &uri, &headers, "consumers", json!(groups))
    })
    .await
}

/// Who owns a partition, from the poller's last DescribeGroups.
fn owner(shared: &Shared, cluster: &str, group: &str, topic: &str, partition: i32) -> (String, String) {
    let snap = shared.clusters.snapshot(cluster);
    let consumer = snap
        .and_then(|s| s.consumer(group, topic, partition))
        .unwrap_or_default();
    (
        consumer.host.unwrap_or_default(),
        consumer.client_id.unwrap_or_default(),
    )
}

fn group_state(shared: &Shared, cluster: &str, group: &str) -> Option<(Option<String>, usize)> {
    let snap = shared.clusters.snapshot(cluster)?;
    let g = snap.group(group)?;
    Some((g.state.clone(), g.members.len()))
}

fn partition_status(s: Status) -> &'static str {
    match s {
        Status::Ok => "OK",
        Status::Stale | Status::Warn => "WARN",
        Status::Rewind => "REWIND",
        Status::Stall => "STALL",
        Status::Stop => "STOP",
        Status::DataLoss => "ERR",
    }
}

fn group_status(s: Status) -> &'static str {
    match s {
        Status::Ok => "OK",
        Status::Stale | Status::Warn => "WARN",
        Status::Rewind | Status::Stall | Status::Stop | Status::DataLoss => "ERR",
    }
}

fn offset_json(c: streamsight_core::window::Commit) -> Value {
    json!({
        "offset": c.offset,
        "timestamp": c.at.0,
        "observedAt": c.at.0,
        "lag": (c.lag != u32::MAX).then_some(c.lag),
    })
}

fn partition_json(shared: &Shared, engine: &Engine, gp: GroupPartitionId, now: Millis) -> (Value, Status, Option<i64>) {
    let n = engine.names(gp);
    let r = engine.evaluate(gp, now);
    let commits: Vec<_> = engine.commits(gp).collect();
    let (owner, client_id) = owner(shared, n.cluster, n.group, n.topic, n.partition);
    let value = json!({
        "topic": n.topic,
        "partition": n.partition,
        "owner": owner,
        "client_id": client_id,
        "status": partition_status(r.status),
        "start": commits.first().map(|&c| offset_json(c)),
        "end": commits.last().map(|&c| offset_json(c)),
        "current_lag": r.lag_messages,
        "complete": commits.len() as f64 / WINDOW as f64,
        "streamsight": {
            "status": r.status,
            "lag_messages": r.lag_messages,
            "lag_seconds": r.lag_seconds,
            "lag_seconds_lower_bound": r.lag_seconds_lower_bound,
            "end_offset": r.end_offset,
            "log_start_offset": r.log_start_offset,
            "data_loss_messages": r.data_loss_messages,
            "broker_unreachable": r.broker_unreachable,
            "producer_failing": r.producer_failing,
        },
    });
    (value, r.status, r.lag_messages)
}

fn group_status_json(shared: &Shared, cluster: &str, group: &str, all: bool) -> Option<Value> {
    let now = clock::now();
    let state = group_state(shared, cluster, group);
    let engine = shared.lag.engine();
    let Some(gid) = engine.find_group(cluster, group) else {
        // A group the brokers list but with nothing committed: known, lag unknown.
        let (state, members) = state?;
        return Some(json!({
            "cluster": cluster, "group": group, "status": "WARN", "complete": 0.0,
            "partitions": [], "partition_count": 0, "maxlag": null, "totallag": 0,
            "streamsight": { "status": Status::Stale, "state": state, "members": members },
        }));
    };
    let g = engine.evaluate_group(gid, now);
    let mut partitions = Vec::new();
    let mut maxlag: Option<(i64, Value)> = None;
    let mut complete = 0.0;
    let members = engine.group_members(gid);
    for &gp in members {
        let (value, status, lag) = partition_json(shared, &engine, gp, now);
        complete += value["complete"].as_f64().unwrap_or(0.0);
        if let Some(lag) = lag
            && maxlag.as_ref().is_none_or(|(m, _)| lag > *m)
        {
            maxlag = Some((lag, value.clone()));
        }
        if all || status != Status::Ok {
            partitions.push(value);
        }
    }
    let max_lag_seconds = g.max_lag.and_then(|(gp, _)| engine.evaluate(gp, now).lag_seconds);
    Some(json!({
        "cluster": cluster,
        "group": group,
        "status": group_status(g.status),
        "complete": if members.is_empty() { 0.0 } else { complete / members.len() as f64 },
        "partitions": partitions,
        "partition_count": g.partitions,
        "maxlag": maxlag.map(|(_, v)| v),
        "totallag": g.total_lag,
        "streamsight": {
            "status": g.status,
            "lag_complete": g.complete,
            "max_lag_seconds": max_lag_seconds,
            "state": state.as_ref().and_then(|s| s.0.clone()),
            "members": state.map(|s| s.1),
        },
    }))
}

async fn status(
    State(shared): State<Arc<Shared>>,
    Path((cluster, group)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    crate::server::off_worker(shared, move |shared| {
        status_response(shared, &cluster, &group, false, &uri, &headers)
    })
    .await
}

async fn lag(
    State(shared): State<Arc<Shared>>,
    Path((cluster, group)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    crate::server::off_worker(shared, move |shared| {
        status_response(shared, &cluster, &group, true, &uri, &headers)
    })
    .await
}

/// `/status` lists the partitions that are not OK, `/lag` all of them.
fn status_response(shared: &Shared, cluster: &str, group: &str, all: bool, uri: &Uri, headers: &HeaderMap) -> Response {
    match group_status_json(shared, cluster, group, all) {
        Some(s) => ok("consumer status returned", uri, headers, "status", s),
        None => not_found("cluster or consumer not found", uri, headers),
    }
}

async fn consumer(
    State(shared): State<Arc<Shared>>,
    Path((cluster, group)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    crate::server::off_worker(shared, move |shared| {
        let now = clock::now();
        let engine = shared.lag.engine();
        let Some(gid) = engine.find_group(&cluster, &group) else {
            return not_found("cluster or consumer not found", &uri, &headers);
        };
        let mut topics = serde_json::Map::new();
        for &gp in engine.group_members(gid) {
            let n = engine.names(gp);
            let r = engine.evaluate(gp, now);
            let (owner, client_id) = owner(shared, n.cluster, n.group, n.topic, n.partition);
            let list = topics.entry(n.topic.to_owned()).or_insert_with(|| json!([]));
            let Some(list) = list.as_array_mut() else { continue };
            // Burrow's lists are indexed by partition. The engine refuses ids at or
            // above `max_partitions_per_topic`, so the gaps a list may need are
            // bounded by configuration, never by an id a client sent.
            let index = usize::try_from(n.partition).unwrap_or(0);
            if list.len() <= index {
                list.resize(index + 1, Value::Null);
            }
            list[index] = json!({
                "offsets": engine.commits(gp).map(offset_json).collect::<Vec<_>>(),
                "owner": owner,
                "client_id": client_id,
                "current-lag": r.lag_messages,
            });
        }
        ok(
            "consumer detail returned",
            &uri,
            &headers,
            "topics",
            Value::Object(topics),
        )
    })
    .await
}

fn topic_offsets(engine: &Engine, cluster: &str) -> std::collections::BTreeMap<String, Vec<Option<i64>>> {
    let mut topics: std::collections::BTreeMap<String, Vec<Option<i64>>> = std::collections::BTreeMap::new();
    let now = Millis(0);
    for pid in engine.partitions() {
        let (c, topic, partition) = engine.partition_names(pid);
        if c != cluster {
            continue;
        }
        let offsets = topics.entry(topic.to_owned()).or_default();
        let index = usize::try_from(partition).unwrap_or(0);
        if offsets.len() <= index {
            offsets.resize(index + 1, None);
        }
        offsets[index] = engine.evaluate_partition(pid, now).end_offset;
    }
    topics
}

async fn topics(
    State(shared): State<Arc<Shared>>,
    Path(cluster): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    crate::server::off_worker(shared, move |shared| {
        if !cluster_names(shared).contains(&cluster) {
            return not_found("cluster not found", &uri, &headers);
        }
        let names: Vec<String> = topic_offsets(&shared.lag.engine(), &cluster).into_keys().collect();
        ok("topic list returned", &uri, &headers, "topics", json!(names))
    })
    .await
}

async fn topic(
    State(shared): State<Arc<Shared>>,
    Path((cluster, topic)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    crate::server::off_worker(shared, move |shared| {
        match topic_offsets(&shared.lag.engine(), &cluster).remove(&topic) {
            Some(offsets) => ok("topic offsets returned", &uri, &headers, "offsets", json!(offsets)),
            None => not_found("topic not found", &uri, &headers),
        }
    })
    .await
}
