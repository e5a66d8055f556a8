//! `GET /api/v1/journeys/{trace_id}` and
//! `GET /api/v1/journeys?cluster=&topic=&partition=&offset=`.

use crate::service::of;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use streamsight_core::journey::{Journey, TraceId};
use streamsight_http::body::json_body;
use streamsight_http::query::with_coverage;
use streamsight_http::{ApiError, ErrorKind, fanout, off_worker};
use streamsight_node::Shared;

/// A trace's spans from every node of a sharded log, at most: far above what
/// the journeys' limits let one trace hold.
const MAX_GATHERED_JOURNEY_BYTES: usize = 16 << 20;

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/api/v1/journeys", get(by_offset))
        .route("/api/v1/journeys/{trace_id}", get(by_trace))
        .route("/api/v1/journeys/{trace_id}/view", axum::routing::post(view_gathered))
}

fn bad_trace_id() -> Response {
    ApiError::new(
        ErrorKind::BadTraceId,
        "a trace id is 32 hex digits (W3C) or a decimal 64-bit id (Datadog)",
    )
    .into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Shards {
    shards: Option<String>,
}

/// The journey of a trace. On a sharded log its spans are in the shards of
/// every topic it touched: they are gathered from every node, and the rest
/// (the message's position for each group, the verdicts) is answered by the
/// node holding the message's topic.
async fn by_trace(
    State(shared): State<Arc<Shared>>,
    Path(text): Path<String>,
    headers: axum::http::HeaderMap,
    query: Result<Query<Shards>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Some(id) = TraceId::parse(&text) else {
        return bad_trace_id();
    };
    let Ok(Query(Shards { shards })) = query else {
        return ApiError::new(ErrorKind::BadQuery, "shards= is the only parameter").into_response();
    };
    if !shared.sharded() {
        return answer(shared, id, None, None).await;
    }
    let local = move |shared: &Shared, _: Option<&std::collections::BTreeSet<u32>>| {
        of(shared).journey(id).into_iter().collect::<Vec<Journey>>()
    };
    if let Some(asked) = shards {
        return fanout::part(shared, &asked, local).await;
    }
    let path = format!("/api/v1/journeys/{}", id.hex());
    let credentials = fanout::credentials(&headers);
    let (parts, coverage) = fanout::gather(&shared, &path, "", &credentials, local).await;
    let gathered = Journey::merge(parts);
    if let Some(journey) = &gathered
        && let Some(answered) = judged_by_holder(&shared, id, journey, &headers).await
    {
        return adding_coverage(answered, &coverage).await;
    }
    answer(shared, id, gathered, Some(coverage)).await
}

/// The answer of the node holding the journey's message's topic, when that
/// is another node (asked once: it does not send it on again).
async fn judged_by_holder(
    shared: &Shared,
    id: TraceId,
    journey: &Journey,
    headers: &axum::http::HeaderMap,
) -> Option<Response> {
    let topic = crate::view::message_span(&journey.spans)?.topic.clone();
    let path = format!("/api/v1/journeys/{}/view", id.hex());
    let body = || serde_json::to_vec(journey).unwrap_or_default();
    fanout::post_to_holder(shared, &topic, &path, headers, &body).await
}

/// A sharded log's node holding the message's topic: the journey of the
/// spans another node gathered.
async fn view_gathered(
    State(shared): State<Arc<Shared>>,
    Path(text): Path<String>,
    headers: axum::http::HeaderMap,
    body: axum::body::Body,
) -> Response {
    let Some(id) = TraceId::parse(&text) else {
        return bad_trace_id();
    };
    let journey: Journey = match json_body(
        &shared,
        &headers,
        body,
        MAX_GATHERED_JOURNEY_BYTES,
        ErrorKind::BadJourney,
    )
    .await
    {
        Ok(j) => j,
        Err(e) => return e.into_response(),
    };
    if let Some(answered) = judged_by_holder(&shared, id, &journey, &headers).await {
        return answered;
    }
    answer(shared, id, Some(journey), None).await
}

async fn answer(
    shared: Arc<Shared>,
    id: TraceId,
    gathered: Option<Journey>,
    coverage: Option<fanout::Coverage>,
) -> Response {
    off_worker(shared, move |shared| match crate::view::view_of(shared, id, gathered) {
        Some(v) => with_coverage(serde_json::to_value(v).unwrap_or_default(), coverage),
        None => ApiError::new(ErrorKind::NotFound, "nothing is known of this trace").into_response(),
    })
    .await
}

/// Adds which shards were asked to a JSON answer another node made.
async fn adding_coverage(answered: Response, coverage: &fanout::Coverage) -> Response {
    let status = answered.status();
    let Ok(bytes) = axum::body::to_bytes(answered.into_body(), MAX_GATHERED_JOURNEY_BYTES).await else {
        return ApiError::new(ErrorKind::BadAnswer, "the node holding the message answered too much").into_response();
    };
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(mut body) if body.is_object() => {
            body["shards"] = json!(coverage);
            (status, Json(body)).into_response()
        }
        _ => (status, [(axum::http::header::CONTENT_TYPE, "application/json")], bytes).into_response(),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AtOffset {
    cluster: Option<String>,
    topic: String,
    partition: i32,
    offset: i64,
}

/// The journeys of the message at an offset (several when several traces touched it).
async fn by_offset(
    State(shared): State<Arc<Shared>>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    query: Result<Query<AtOffset>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(q)) = query else {
        return ApiError::new(
            ErrorKind::BadQuery,
            "give topic, partition and offset (and cluster, optionally)",
        )
        .into_response();
    };
    // The offset's spans are in its topic's shard.
    if let Some(answered) = fanout::forward(&shared, &q.topic, &uri, &headers).await {
        return answered;
    }
    off_worker(shared, move |shared| {
        let mut ids = of(shared).at_offset(q.cluster.as_deref(), &q.topic, q.partition, q.offset);
        ids.extend(crate::view::letters_at(
            shared,
            q.cluster.as_deref(),
            &q.topic,
            q.partition,
            q.offset,
        ));
        // A span that names no cluster is indexed under none; the journey's
        // message then takes the only cluster that has its topic. `cluster`
        // keeps the journeys whose message is on it: never one it cannot say.
        let on_cluster = |j: &crate::view::JourneyView| {
            q.cluster
                .as_deref()
                .is_none_or(|want| j.message.as_ref().is_some_and(|m| m.cluster == want))
        };
        let mut journeys: Vec<_> = ids
            .into_iter()
            .filter_map(|id| crate::view::view(shared, id))
            .filter(on_cluster)
            .collect();
        // A consumer's trace and the producer's it links to are one journey.
        journeys.sort_by_key(|j| j.trace_id);
        journeys.dedup_by_key(|j| j.trace_id);
        if journeys.is_empty() {
            return ApiError::new(ErrorKind::NotFound, "no kept trace touched this offset").into_response();
        }
        Json(json!({ "journeys": journeys })).into_response()
    })
    .await
}
