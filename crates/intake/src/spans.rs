//! Spans and log lines in: OTLP/HTTP (`/v1/traces`, `/v1/logs`, protobuf or
//! JSON, gzip) and Fluent Bit's `json_lines` (`/ingest/json_lines`) on the OTLP
//! listener; Datadog tracers' `/v0.4/traces` and `/v0.5/traces` on the intake.
//! Bodies are bounded as the Data Streams intake's are, decoded off the async
//! workers, and answered 2xx only once stored.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;
use std::sync::Arc;
use streamsight_core::Record;
use streamsight_http::body::{gzipped, read_metered};
use streamsight_http::rate::SharedRate as Rate;
use streamsight_http::{ApiError, ErrorKind};
use streamsight_node::clock;
use streamsight_node::sync::lock;
use streamsight_node::telemetry::IntakeError;
use streamsight_node::timings::Stage;
use streamsight_node::{Shared, Writer};
use streamsight_wire::budget;
use streamsight_wire::traces::{self, DecodeError, Decoded, Limits};

#[derive(Clone)]
struct Otlp {
    shared: Arc<Shared>,
    writer: Writer,
    rate: Rate,
}

pub fn router(shared: Arc<Shared>, writer: Writer) -> Router {
    let rate = streamsight_http::rate::shared(shared.config.limits.ingest_records_per_second);
    Router::new()
        .route("/v1/traces", post(otlp_traces))
        .route("/v1/logs", post(otlp_logs))
        .route("/ingest/json_lines", post(json_lines))
        .layer(DefaultBodyLimit::disable())
        .fallback(|| async { ApiError::new(ErrorKind::NotFound, "no such endpoint").into_response() })
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
    match streamsight_http::body::media_type(headers)?.as_str() {
        "application/x-protobuf" | "application/protobuf" => Some(Kind::Protobuf),
        "application/json" | "application/x-ndjson" => Some(Kind::Json),
        "application/msgpack" | "application/x-msgpack" => Some(Kind::Msgpack),
        _ => None,
    }
}

fn refused(e: &DecodeError) -> ApiError {
    let kind = match e {
        DecodeError::Memory(spent) => return ApiError::from(*spent),
        DecodeError::Gzip(_) => ErrorKind::BadGzip,
        DecodeError::TooLarge(_) => ErrorKind::DecompressedTooLarge,
        DecodeError::TooMany(_) => ErrorKind::TooManyItems,
        DecodeError::Protobuf(_) => ErrorKind::BadProtobuf,
        DecodeError::Json(_) => ErrorKind::BadJson,
        DecodeError::Msgpack(_) => ErrorKind::BadMsgpack,
    };
    ApiError::new(kind, e.to_string())
}

/// Reads, decodes on a blocking thread and stores; the decoded request, or the
/// answer (an intake error counted and logged as the Data Streams intake's are).
async fn take(
    shared: &Arc<Shared>,
    writer: &Writer,
    rate: &Rate,
    headers: &HeaderMap,
    body: Body,
    decode: impl FnOnce(&[u8], Limits) -> Result<Decoded, DecodeError> + Send + 'static,
) -> Result<Decoded, ApiError> {
    take_uncounted(shared, writer, rate, headers, body, decode)
        .await
        .map_err(|refused| crate::counted(&shared.telemetry, refused))
}

async fn take_uncounted(
    shared: &Arc<Shared>,
    writer: &Writer,
    rate: &Rate,
    headers: &HeaderMap,
    body: Body,
    decode: impl FnOnce(&[u8], Limits) -> Result<Decoded, DecodeError> + Send + 'static,
) -> Result<Decoded, ApiError> {
    let gzipped =
        gzipped(headers).map_err(|why| ApiError::new(ErrorKind::Intake(IntakeError::UnsupportedEncoding), why))?;
    // Charged from the first byte read to the last record stored: the body,
    // the body decompressed, what decoding builds (see `streamsight_wire::budget`).
    let mut meter = shared.meter();
    let began = std::time::Instant::now();
    let body: Bytes = read_metered(body, shared.config.limits.max_body_bytes, &mut meter).await?;
    shared.timings.stage(Stage::Read).observe(began.elapsed());
    let limits = limits(shared);
    let began = std::time::Instant::now();
    // Off the async workers, when one of the process's decoders is free.
    let Some(_turn) = shared.decode_memory.turn().await else {
        return Err(ApiError::new(
            ErrorKind::Intake(IntakeError::Overloaded),
            "shutting down",
        ));
    };
    let (decoded, _meter) = tokio::task::spawn_blocking(move || {
        let decoded = budget::metered(&mut meter, || {
            let bytes = traces::body(&body, gzipped, limits)?;
            decode(&bytes, limits)
        });
        (decoded, meter)
    })
    .await
    .map_err(|_| ApiError::new(ErrorKind::BadBody, "the decoder failed"))?;
    shared.timings.stage(Stage::Decode).observe(began.elapsed());
    let decoded = decoded.map_err(|e| refused(&e))?;
    let at = clock::now();
    let mut decoded = decoded;
    // Failed sends the tracers traced (and no longer report to Data Streams).
    let failed = {
        let by_id = shared.clusters.names_by_id();
        let engine = shared.lag.engine();
        let default = shared.config.default_cluster.as_str();
        let by_topic = |topic: &str| crate::clusters::the_one_named(engine.clusters_of(topic), default);
        let clusters = crate::failed_spans::Clusters {
            by_id: &by_id,
            by_topic: &by_topic,
            default,
        };
        crate::failed_spans::failed_sends(&mut decoded.spans, &clusters, at)
    };
    let failures = failed.len();
    let records: Vec<Record> = failed
        .into_iter()
        .chain(
            std::mem::take(&mut decoded.spans)
                .into_iter()
                .map(|s| Record::Span { at, span: Box::new(s) }),
        )
        .chain(
            std::mem::take(&mut decoded.logs)
                .into_iter()
                .map(|l| Record::Log { at, line: Box::new(l) }),
        )
        .collect();
    decoded.accepted = records.len() - failures;
    if let Err(retry_after) = lock(rate).take(records.len(), std::time::Instant::now()) {
        return Err(ApiError::new(
            ErrorKind::Intake(IntakeError::RateLimited),
            format!("over this tenant's ingest rate; retry in {retry_after} s"),
        )
        .retry_after(retry_after));
    }
    if !records.is_empty() {
        writer.append(records).await.map_err(ApiError::from)?;
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
        Err(e) => e.into_response(),
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
        Err(e) => e.into_response(),
    }
}

fn unsupported(headers: &HeaderMap, wanted: &str) -> Response {
    ApiError::new(
        ErrorKind::Intake(IntakeError::UnsupportedContentType),
        streamsight_http::body::wrong_content_type(headers, wanted),
    )
    .into_response()
}

/// `/v0.4/traces` and `/v0.5/traces` on the Datadog intake: decoded and kept
/// (tracers read sampling rates from the answer).
pub async fn datadog(
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
        Err(e) => e.into_response(),
    }
}
