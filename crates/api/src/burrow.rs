//! Burrow's HTTP API (`/v3/kafka/...`, linkedin/Burrow `core/internal/httpserver`),
//! so that Burrow dashboards and alerting keep working, with streamsight's own
//! fields alongside under `streamsight`.
//!
//! Where Burrow has no word for a state streamsight knows, the nearest one that is
//! never healthy is used: `stale` reads as WARN, data loss as ERR. An unknown lag
//! is `null`, never 0.

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
use streamsight_http::query::ApiQuery;
use streamsight_http::{ApiError, ErrorKind};
use streamsight_node::Shared;
use streamsight_node::clock;

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
    covered(message, uri, headers, key, value, None)
}

/// The same, saying which shards it covers on a sharded log (under `streamsight`).
fn covered(
    message: &str,
    uri: &Uri,
    headers: &HeaderMap,
    key: &str,
    value: Value,
    coverage: Option<streamsight_http::fanout::Coverage>,
) -> Response {
    let mut body = json!({ "error": false, "message": message, "request": request(uri, headers) });
    body[key] = value;
    if let Some(coverage) = coverage {
        body["streamsight"] = json!({ "shards": coverage });
    }
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

async fn clusters(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<Shards>,
) -> Response {
    // Clusters are named by records of every shard: each node names those of
    // its own (and the configured ones).
    let local = |s: &Shared, _: Option<&BTreeSet<u32>>| cluster_names(s).into_iter().collect::<Vec<_>>();
    gathered(
        shared,
        uri,
        headers,
        q.shards,
        local,
        move |names, coverage, uri, caller| {
            let names: BTreeSet<String> = names.into_iter().collect();
            covered("cluster list returned", uri, caller, "clusters", json!(names), coverage)
        },
    )
    .await
}

async fn cluster(
    State(shared): State<Arc<Shared>>,
    Path(cluster): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    streamsight_http::off_worker(shared, move |shared| {
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

/// Groups of `cluster` with partitions in `shards`, and those the poller
/// lists with no committed offsets yet (still groups).
fn group_names(shared: &Shared, cluster: &str, shards: Option<&BTreeSet<u32>>) -> Vec<String> {
    let mut groups: BTreeSet<String> = {
        let engine = shared.lag.engine();
        engine
            .groups()
            .filter(|&g| engine.group_name(g).0 == cluster)
            .filter(|&g| {
                engine
                    .group_members(g)
                    .iter()
                    .any(|&gp| streamsight_http::fanout::in_shards(shared, shards, engine.names(gp).topic))
            })
            .map(|g| engine.group_name(g).1.to_owned())
            .collect()
    };
    if let Some(snap) = shared.clusters.snapshot(cluster) {
        groups.extend(snap.groups.iter().filter(|g| g.exists()).map(|g| g.name.clone()));
    }
    groups.into_iter().collect()
}

async fn consumers(
    State(shared): State<Arc<Shared>>,
    Path(cluster): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<Shards>,
) -> Response {
    let known = {
        let shared = shared.clone();
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || cluster_names(&shared).contains(&cluster))
            .await
            .unwrap_or(false)
    };
    // A cluster another node knows of is one this node may not: asked for its
    // part, a node answers what it has.
    if !known && q.shards.is_none() && !shared.sharded() {
        return not_found("cluster not found", &uri, &headers);
    }
    let c = cluster.clone();
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| group_names(s, &c, shards);
    gathered(
        shared,
        uri,
        headers,
        q.shards,
        local,
        move |names, coverage, uri, caller| {
            let complete = coverage.as_ref().is_none_or(|c| c.missing.is_empty());
            if names.is_empty() && !known && complete {
                return not_found("cluster not found", uri, caller);
            }
            let names: BTreeSet<String> = names.into_iter().collect();
            covered(
                "consumer list returned",
                uri,
                caller,
                "consumers",
                json!(names),
                coverage,
            )
        },
    )
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

/// What the last poll said of a group: its state, type and member count.
struct Described {
    state: Option<String>,
    group_type: Option<String>,
    /// `None` while no describe answered: unknown, never 0.
    members: Option<usize>,
    /// Why the membership is unknown.
    membership_error: Option<String>,
    /// A share group's share-group lag summed over its share-partitions
    /// (`None` while any is unknown), and whether it is an upper bound.
    share_lag: Option<(Option<i64>, bool)>,
}

fn group_state(shared: &Shared, cluster: &str, group: &str) -> Option<Described> {
    let snap = shared.clusters.snapshot(cluster)?;
    let g = snap.group(group)?;
    Some(Described {
        state: g.state.clone(),
        group_type: g.group_type.clone(),
        members: g.described.then_some(g.members.len()),
        membership_error: if g.described { None } else { g.error.clone() },
        share_lag: g.is_share().then(|| {
            let parts: Vec<_> = snap.share_lag().into_iter().filter(|l| l.group == group).collect();
            let sum = parts.iter().try_fold(0i64, |a, l| Some(a.saturating_add(l.lag?)));
            (sum, parts.iter().any(|l| l.upper_bound))
        }),
    })
}

fn partition_status(s: Status) -> &'static str {
    match s {
        Status::Ok => "OK",
        // Blocked by an open transaction: degraded, but not the consumer's fault.
        Status::Stale | Status::Blocked | Status::Warn => "WARN",
        Status::Rewind => "REWIND",
        Status::Stall => "STALL",
        Status::Stop => "STOP",
        Status::DataLoss => "ERR",
    }
}

fn group_status(s: Status) -> &'static str {
    match s {
        Status::Ok => "OK",
        // Blocked by an open transaction: degraded, but not the consumer's fault.
        Status::Stale | Status::Blocked | Status::Warn => "WARN",
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

/// The group's partitions of `shards` (all when None), in Burrow's shape.
fn group_partitions(shared: &Shared, cluster: &str, group: &str, shards: Option<&BTreeSet<u32>>) -> Vec<Value> {
    let now = clock::now();
    let engine = shared.lag.engine();
    let Some((_, members)) = streamsight_http::fanout::group_in_shards(shared, &engine, cluster, group, shards) else {
        return Vec::new();
    };
    members
        .into_iter()
        .map(|gp| partition_json(shared, &engine, gp, now).0)
        .collect()
}

fn status_of(partition: &Value) -> Status {
    serde_json::from_value(partition["streamsight"]["status"].clone()).unwrap_or(Status::Stale)
}

/// A group's status from its partitions, however many nodes they came from.
fn group_status_json(shared: &Shared, cluster: &str, group: &str, all: bool, partitions: Vec<Value>) -> Option<Value> {
    let state = group_state(shared, cluster, group);
    if partitions.is_empty() {
        // A group the brokers list but with nothing committed: known, lag
        // unknown. A share group commits nothing by design: its totallag is
        // its share-group lag (the backlog a Burrow reader alerts on), said
        // so under `streamsight`.
        let d = state?;
        let (share_lag, upper_bound) = d.share_lag.map_or((None, None), |(sum, bound)| (sum, Some(bound)));
        return Some(json!({
            "cluster": cluster, "group": group, "status": "WARN", "complete": 0.0,
            "partitions": [], "partition_count": 0, "maxlag": null, "totallag": share_lag.unwrap_or(0),
            "streamsight": { "status": Status::Stale, "state": d.state, "group_type": d.group_type, "members": d.members,
                             "membership_error": d.membership_error, "share_lag": share_lag, "share_lag_upper_bound": upper_bound },
        }));
    }
    let count = partitions.len();
    let mut status = Status::Ok;
    let (mut total, mut lag_complete, mut complete) = (0i64, true, 0.0);
    let mut maxlag: Option<(i64, &Value)> = None;
    for p in &partitions {
        status = status.max(status_of(p));
        complete += p["complete"].as_f64().unwrap_or(0.0);
        match p["current_lag"].as_i64() {
            Some(lag) => {
                total = total.saturating_add(lag);
                if maxlag.is_none_or(|(m, _)| lag > m) {
                    maxlag = Some((lag, p));
                }
            }
            None => lag_complete = false,
        }
    }
    let max_lag_seconds = maxlag.and_then(|(_, p)| p["streamsight"]["lag_seconds"].as_f64());
    let maxlag = maxlag.map(|(_, p)| p.clone());
    let shown: Vec<&Value> = partitions
        .iter()
        .filter(|p| all || status_of(p) != Status::Ok)
        .collect();
    Some(json!({
        "cluster": cluster,
        "group": group,
        "status": group_status(status),
        "complete": complete / count as f64,
        "partitions": shown,
        "partition_count": count,
        "maxlag": maxlag,
        "totallag": total,
        "streamsight": {
            "status": status,
            "lag_complete": lag_complete,
            "max_lag_seconds": max_lag_seconds,
            "state": state.as_ref().and_then(|s| s.state.clone()),
            "group_type": state.as_ref().and_then(|s| s.group_type.clone()),
            "members": state.as_ref().and_then(|s| s.members),
            "membership_error": state.and_then(|s| s.membership_error),
        },
    }))
}

async fn status(
    State(shared): State<Arc<Shared>>,
    Path((cluster, group)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<Shards>,
) -> Response {
    status_response(shared, cluster, group, false, uri, headers, q.shards).await
}

async fn lag(
    State(shared): State<Arc<Shared>>,
    Path((cluster, group)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<Shards>,
) -> Response {
    status_response(shared, cluster, group, true, uri, headers, q.shards).await
}

/// `/status` lists the partitions that are not OK, `/lag` all of them; on a
/// sharded log the group's partitions are gathered from every shard.
async fn status_response(
    shared: Arc<Shared>,
    cluster: String,
    group: String,
    all: bool,
    uri: Uri,
    headers: HeaderMap,
    asked: Option<String>,
) -> Response {
    let (c, g) = (cluster.clone(), group.clone());
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| group_partitions(s, &c, &g, shards);
    let build_shared = shared.clone();
    gathered(
        shared,
        uri,
        headers,
        asked,
        local,
        move |partitions, coverage, uri, caller| {
            let complete = coverage.as_ref().is_none_or(|c| c.missing.is_empty());
            match group_status_json(&build_shared, &cluster, &group, all, partitions) {
                Some(mut s) => {
                    if let Some(coverage) = coverage {
                        s["streamsight"]["shards"] = json!(coverage);
                    }
                    ok("consumer status returned", uri, caller, "status", s)
                }
                None if complete => not_found("cluster or consumer not found", uri, caller),
                None => ApiError::new(
                    ErrorKind::ShardUnavailable,
                    "the group is in no shard that answered, and some shards did not",
                )
                .into_response(),
            }
        },
    )
    .await
}

/// A read of every shard: `local` answers for this node's, `build` puts the
/// rows together with the coverage and the request (Burrow echoes it).
async fn gathered<T, F, B>(
    shared: Arc<Shared>,
    uri: Uri,
    headers: HeaderMap,
    asked: Option<String>,
    local: F,
    build: B,
) -> Response
where
    T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
    F: FnOnce(&Shared, Option<&BTreeSet<u32>>) -> Vec<T> + Send + 'static,
    B: FnOnce(Vec<T>, Option<streamsight_http::fanout::Coverage>, &Uri, &HeaderMap) -> Response,
{
    let path = uri.path().to_owned();
    let caller = headers.clone();
    streamsight_http::fanout::answer(shared, &path, asked, None, &caller, local, move |rows, coverage| {
        build(rows, coverage, &uri, &headers)
    })
    .await
}

/// Only `shards=` (another node of a sharded log asking for its part).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Shards {
    shards: Option<String>,
}

/// The group's partitions of `shards` as Burrow's consumer detail lists them:
/// (topic, partition, entry).
fn consumer_entries(
    shared: &Shared,
    cluster: &str,
    group: &str,
    shards: Option<&BTreeSet<u32>>,
) -> Vec<(String, i32, Value)> {
    let now = clock::now();
    let engine = shared.lag.engine();
    let Some((_, members)) = streamsight_http::fanout::group_in_shards(shared, &engine, cluster, group, shards) else {
        return Vec::new();
    };
    members
        .into_iter()
        .map(|gp| {
            let n = engine.names(gp);
            let r = engine.evaluate(gp, now);
            let (owner, client_id) = owner(shared, n.cluster, n.group, n.topic, n.partition);
            let entry = json!({
                "offsets": engine.commits(gp).map(offset_json).collect::<Vec<_>>(),
                "owner": owner,
                "client_id": client_id,
                "current-lag": r.lag_messages,
            });
            (n.topic.to_owned(), n.partition, entry)
        })
        .collect()
}

async fn consumer(
    State(shared): State<Arc<Shared>>,
    Path((cluster, group)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<Shards>,
) -> Response {
    let (c, g) = (cluster.clone(), group.clone());
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| consumer_entries(s, &c, &g, shards);
    gathered(
        shared,
        uri,
        headers,
        q.shards,
        local,
        move |entries, coverage, uri, caller| {
            if entries.is_empty() && coverage.as_ref().is_none_or(|c| c.missing.is_empty()) {
                return not_found("cluster or consumer not found", uri, caller);
            }
            let mut topics = serde_json::Map::new();
            for (topic, partition, entry) in entries {
                let list = topics.entry(topic).or_insert_with(|| json!([]));
                let Some(list) = list.as_array_mut() else { continue };
                // Burrow's lists are indexed by partition. The engine refuses ids at or
                // above `max_partitions_per_topic`, so the gaps a list may need are
                // bounded by configuration, never by an id a client sent.
                let index = usize::try_from(partition).unwrap_or(0);
                if list.len() <= index {
                    list.resize(index + 1, Value::Null);
                }
                list[index] = entry;
            }
            covered(
                "consumer detail returned",
                uri,
                caller,
                "topics",
                Value::Object(topics),
                coverage,
            )
        },
    )
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
    ApiQuery(q): ApiQuery<Shards>,
) -> Response {
    let c = cluster.clone();
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| -> Vec<String> {
        topic_offsets(&s.lag.engine(), &c)
            .into_keys()
            .filter(|t| streamsight_http::fanout::in_shards(s, shards, t))
            .collect()
    };
    let build_shared = shared.clone();
    gathered(
        shared,
        uri,
        headers,
        q.shards,
        local,
        move |names, coverage, uri, caller| {
            let complete = coverage.as_ref().is_none_or(|c| c.missing.is_empty());
            if names.is_empty() && complete && !cluster_names(&build_shared).contains(&cluster) {
                return not_found("cluster not found", uri, caller);
            }
            let names: BTreeSet<String> = names.into_iter().collect();
            covered("topic list returned", uri, caller, "topics", json!(names), coverage)
        },
    )
    .await
}

async fn topic(
    State(shared): State<Arc<Shared>>,
    Path((cluster, topic)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Some(answered) = streamsight_http::fanout::forward(&shared, &topic, &uri, &headers).await {
        return answered;
    }
    streamsight_http::off_worker(shared, move |shared| {
        match topic_offsets(&shared.lag.engine(), &cluster).remove(&topic) {
            Some(offsets) => ok("topic offsets returned", &uri, &headers, "offsets", json!(offsets)),
            None => not_found("topic not found", &uri, &headers),
        }
    })
    .await
}
