//! Spans and log lines in: OTLP/HTTP (`/v1/traces`, `/v1/logs`, protobuf or
//! JSON, gzip) and Fluent Bit's `json_lines` (`/ingest/json_lines`) on the OTLP
//! listener; Datadog tracers' `/v0.4/traces` and `/v0.5/traces` on the intake.
//! Bodies are bounded as the Data Streams intake's are, decoded off the async
//! workers, and answered 2xx only once stored.

use crate::clock;
use crate::intake::error_response;
use crate::state::{Shared, Writer};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;
use std::sync::Arc;
use streamsight_core::Record;
use streamsight_wire::traces::{self, DecodeError, Decoded, Limits};

/// Each tenant's ingest rate, shared by its spans, lines and Data Streams points.
type Rate = Arc<std::sync::Mutex<crate::intake::TokenBucket>>;

#[derive(Clone)]
struct Otlp {
    shared: Arc<Shared>,
    writer: Writer,
    rate: Rate,
}

pub fn router(shared: Arc<Shared>, writer: Writer) -> Router {
    let rate = Arc::new(std::sync::Mutex::new(crate::intake::TokenBucket::new(
        shared.config.limits.ingest_records_per_second,
    )));
    Router::new()
        .route("/v1/traces", post(otlp_traces))
        .route("/v1/logs", post(otlp_logs))
        .route("/ingest/json_lines", post(json_lines))
        .layer(DefaultBodyLimit::disable())
        .fallback(|| async { error_response(StatusCode::NOT_FOUND, "not_found", "no such endpoint") })
        .with_state(Otlp { shared, writer, rate })
}

pub(crate) fn limits(shared: &Shared) -> Limits {
    Limits {
        max_decompressed_bytes: shared.config.limits.payload.max_decompressed_bytes,
        max_items: shared.config.journeys.max_items_per_request,
    }
}

#[derive(Copy, Clone, PartialEq)]
enum Kind {
    Protobuf,
    Json,
    Msgpack,
}

fn kind(headers: &HeaderMap) -> Option<Kind> {
    let t = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    match t.split(';').next()?.trim().to_ascii_lowercase().as_str() {
        "application/x-protobuf" | "application/protobuf" => Some(Kind::Protobuf),
        "application/json" | "application/x-ndjson" => Some(Kind::Json),
        "application/msgpack" | "application/x-msgpack" => Some(Kind::Msgpack),
        _ => None,
    }
}

fn refused(e: &DecodeError) -> Response {
    let (status, kind) = match e {
        DecodeError::Gzip(_) => (StatusCode::BAD_REQUEST, "bad_gzip"),
        DecodeError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "decompressed_too_large"),
        DecodeError::TooMany(_) => (StatusCode::PAYLOAD_TOO_LARGE, "too_many_items"),
        DecodeError::Protobuf(_) => (StatusCode::BAD_REQUEST, "bad_protobuf"),
        DecodeError::Json(_) => (StatusCode::BAD_REQUEST, "bad_json"),
        DecodeError::Msgpack(_) => (StatusCode::BAD_REQUEST, "bad_msgpack"),
    };
    error_response(status, kind, &e.to_string())
}

/// Reads, decodes on a blocking thread and stores; the decoded request, or the answer.
async fn take(
    shared: &Arc<Shared>,
    writer: &Writer,
    rate: &Rate,
    headers: &HeaderMap,
    body: Body,
    decode: impl FnOnce(&[u8], Limits) -> Result<Decoded, DecodeError> + Send + 'static,
) -> Result<Decoded, Response> {
    let gzipped = crate::intake::gzipped(headers)
        .map_err(|why| error_response(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_encoding", &why))?;
    let body: Bytes = crate::intake::read_limited(body, shared.config.limits.max_body_bytes).await?;
    let limits = limits(shared);
    let decoded = tokio::task::spawn_blocking(move || {
        let bytes = traces::body(&body, gzipped, limits)?;
        decode(&bytes, limits)
    })
    .await
    .map_err(|_| error_response(StatusCode::BAD_REQUEST, "bad_body", "the decoder failed"))?
    .map_err(|e| refused(&e))?;
    let at = clock::now();
    let mut decoded = decoded;
    let records: Vec<Record> = std::mem::take(&mut decoded.spans)
        .into_iter()
        .map(|s| Record::Span { at, span: Box::new(s) })
        .chain(
            std::mem::take(&mut decoded.logs)
                .into_iter()
                .map(|l| Record::Log { at, line: Box::new(l) }),
        )
        .collect();
    decoded.accepted = records.len();
    if let Err(retry_after) = crate::services::lock(rate).take(records.len(), std::time::Instant::now()) {
        let response = error_response(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            &format!("over this tenant's ingest rate; retry in {retry_after} s"),
        );
        return Err(crate::intake::with_retry_after(response, retry_after));
    }
    if !records.is_empty() {
        writer
            .append(records)
            .await
            .map_err(|e| error_response(e.status(), e.kind().as_str(), &e.to_string()))?;
    }
    Ok(decoded)
}

/// OTLP's answer: an empty response, or a partial success naming what was left out.
fn otlp_answer(json: bool, d: &Decoded, what: &str) -> Response {
    if json {
        let body = if d.skipped == 0 {
            json!({})
        } else {
            json!({ "partialSuccess": { format!("rejected{what}"): d.skipped, "errorMessage": d.reasons.join("; ") } })
        };
        return (StatusCode::OK, axum::Json(body)).into_response();
    }
    let out = traces::otlp::response(d.skipped, &d.reasons.join("; "));
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/x-protobuf")], out).into_response()
}

async fn otlp_traces(State(o): State<Otlp>, headers: HeaderMap, body: Body) -> Response {
    otlp(o, headers, body, traces::otlp::decode_traces, "Spans").await
}

async fn otlp_logs(State(o): State<Otlp>, headers: HeaderMap, body: Body) -> Response {
    otlp(o, headers, body, traces::otlp::decode_logs, "LogRecords").await
}

/// An OTLP export of spans or logs, protobuf or JSON; `what` names what a
/// partial success left out.
async fn otlp(
    o: Otlp,
    headers: HeaderMap,
    body: Body,
    decode: fn(&[u8], bool, Limits) -> Result<Decoded, DecodeError>,
    what: &str,
) -> Response {
    let json = match kind(&headers) {
        Some(Kind::Protobuf) => false,
        Some(Kind::Json) => true,
        _ => return unsupported(&headers, "application/x-protobuf or application/json"),
    };
    match take(&o.shared, &o.writer, &o.rate, &headers, body, move |b, l| {
        decode(b, json, l)
    })
    .await
    {
        Ok(d) => otlp_answer(json, &d, what),
        Err(r) => r,
    }
}

async fn json_lines(State(o): State<Otlp>, headers: HeaderMap, body: Body) -> Response {
    if kind(&headers) != Some(Kind::Json) {
        return unsupported(&headers, "application/json (Fluent Bit's json_lines)");
    }
    let fields = o.shared.config.journeys.trace_id_fields.clone();
    let received = clock::now();
    let decode = move |b: &[u8], l: Limits| traces::fluentbit::decode(b, &fields, received, l);
    match take(&o.shared, &o.writer, &o.rate, &headers, body, decode).await {
        Ok(d) => (
            StatusCode::OK,
            axum::Json(json!({ "accepted": d.accepted, "skipped": d.skipped, "errors": d.reasons })),
        )
            .into_response(),
        Err(r) => r,
    }
}

fn unsupported(headers: &HeaderMap, wanted: &str) -> Response {
    let got = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    error_response(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_content_type",
        &format!("content-type {got:?} is not {wanted}"),
    )
}

/// `/v0.4/traces` and `/v0.5/traces` on the Datadog intake: decoded and kept
/// (tracers read sampling rates from the answer).
pub(crate) async fn datadog(
    shared: Arc<Shared>,
    writer: Writer,
    rate: Rate,
    v05: bool,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if kind(&headers) != Some(Kind::Msgpack) {
        return unsupported(&headers, "application/msgpack");
    }
    let decode = move |b: &[u8], l: Limits| {
        if v05 {
            traces::datadog::decode_v05(b, l)
        } else {
            traces::datadog::decode_v04(b, l)
        }
    };
    match take(&shared, &writer, &rate, &headers, body, decode).await {
        Ok(_) => axum::Json(json!({ "rate_by_service": {} })).into_response(),
        Err(r) => r,
    }
}
