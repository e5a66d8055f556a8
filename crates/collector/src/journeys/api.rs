//! `GET /api/v1/journeys/{trace_id}` and
//! `GET /api/v1/journeys?cluster=&topic=&partition=&offset=`.

use crate::intake::error_response;
use crate::state::Shared;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use streamsight_core::journey::TraceId;

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/api/v1/journeys", get(by_offset))
        .route("/api/v1/journeys/{trace_id}", get(by_trace))
}

async fn by_trace(State(shared): State<Arc<Shared>>, Path(trace_id): Path<String>) -> Response {
    let Some(id) = TraceId::parse(&trace_id) else {
        return error_response(
            StatusCode::BAD_REQUEST,
            "bad_trace_id",
            "a trace id is 32 hex digits (W3C) or a decimal 64-bit id (Datadog)",
        );
    };
    crate::server::off_worker(shared, move |shared| match super::view(shared, id) {
        Some(v) => Json(v).into_response(),
        None => error_response(StatusCode::NOT_FOUND, "not_found", "nothing is known of this trace"),
    })
    .await
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
        return error_response(
            StatusCode::BAD_REQUEST,
            "bad_query",
            "give topic, partition and offset (and cluster, optionally)",
        );
    };
    // The offset's spans are in its topic's shard.
    if let Some(answered) = crate::fanout::forward(&shared, &q.topic, &uri, &headers).await {
        return answered;
    }
    crate::server::off_worker(shared, move |shared| {
        let ids = shared
            .journeys
            .at_offset(q.cluster.as_deref(), &q.topic, q.partition, q.offset);
        let mut journeys: Vec<_> = ids.into_iter().filter_map(|id| super::view(shared, id)).collect();
        // A consumer's trace and the producer's it links to are one journey.
        journeys.sort_by_key(|j| j.trace_id);
        journeys.dedup_by_key(|j| j.trace_id);
        if journeys.is_empty() {
            return error_response(StatusCode::NOT_FOUND, "not_found", "no kept trace touched this offset");
        }
        Json(json!({ "journeys": journeys })).into_response()
    })
    .await
}
