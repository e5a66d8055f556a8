//! The Datadog-agent-compatible intake: what tracers with Data Streams Monitoring
//! enabled send to `DD_TRACE_AGENT_URL`.

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde_json::json;
use std::sync::Arc;
use streamsight_core::Millis;
use streamsight_core::pathway::PathwayPoint;
use streamsight_core::{Observation, PartitionRef, Record, SharedNames};
use streamsight_http::body::{drain_limited, gzipped, read_metered};
use streamsight_http::rate::SharedRate;
use streamsight_http::{ApiError, ErrorKind};
use streamsight_node::clock;
use streamsight_node::sync::lock;
use streamsight_node::telemetry::{DroppedEndpoint, IntakeError, IntakeEvent};
use streamsight_node::{AppendError, Shared, Writer};
use streamsight_wire::budget;
use streamsight_wire::dsm::backlog;
use streamsight_wire::dsm::payload::{self, Payload, PayloadError};
use streamsight_wire::dsm::sketch;

/// Endpoints listed in `/info`: the ones this intake answers.
pub const ENDPOINTS: [&str; 7] = [
    "/v0.1/pipeline_stats",
    "/v0.4/traces",
    "/v0.5/traces",
    "/v0.7/traces",
    "/v0.6/stats",
    "/telemetry/proxy/",
    "/info",
];

#[derive(Clone)]
struct Intake {
    shared: Arc<Shared>,
    writer: Writer,
    /// This tenant's ingest rate.
    rate: SharedRate,
}

pub fn router(shared: Arc<Shared>, writer: Writer) -> Router {
    let rate = shared.config.limits.ingest_records_per_second;
    Router::new()
        .route("/info", get(info))
        .route("/v0.1/pipeline_stats", post(pipeline_stats))
        .route("/v0.4/traces", any(traces_v04))
        .route("/v0.5/traces", any(traces_v05))
        .route("/v0.7/traces", any(traces))
        .route("/v0.6/stats", any(stats))
        .route("/telemetry/proxy/{*rest}", any(telemetry))
        // Bodies are read under our own limit so that the refusal is a JSON error.
        .layer(DefaultBodyLimit::disable())
        .with_state(Intake {
            shared,
            writer,
            rate: streamsight_http::rate::shared(rate),
        })
}

async fn info() -> impl IntoResponse {
    axum::Json(json!({
        "version": concat!("streamsight-", env!("CARGO_PKG_VERSION")),
        "endpoints": ENDPOINTS,
        "feature_flags": [],
        "client_drop_p0s": false,
        "span_meta_structs": false,
        "long_running_spans": false,
        "config": { "statsd_port": 0, "receiver_port": 8126 },
    }))
}

/// Content types tracers send. Anything else is refused, so that a web page's
/// no-cors POST (text/plain, forms, or no type at all) never reaches the engine.
const MSGPACK_TYPES: [&str; 2] = ["application/msgpack", "application/x-msgpack"];

async fn pipeline_stats(State(intake): State<Intake>, headers: HeaderMap, body: Body) -> Response {
    let shared = &intake.shared;
    let telemetry = &shared.telemetry;
    let limits = &shared.config.limits;
    let reject = |error: IntakeError, message: String| {
        telemetry.emit(IntakeEvent::PayloadRejected {
            error,
            detail: &message,
        });
        ApiError::new(ErrorKind::Intake(error), message)
    };
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let essence = content_type.map(|t| t.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
    if !essence.as_deref().is_some_and(|t| MSGPACK_TYPES.contains(&t)) {
        return reject(
            IntakeError::UnsupportedContentType,
            format!("content-type {content_type:?} is not application/msgpack"),
        )
        .into_response();
    }
    // Charged from the first byte read to the last record stored.
    let mut meter = shared.meter();
    let body = match read_metered(body, limits.max_body_bytes, &mut meter).await {
        Ok(b) => b,
        Err(refused) => {
            return crate::counted(telemetry, refused).into_response();
        }
    };
    let gzipped = match gzipped(&headers) {
        Ok(g) => g,
        Err(why) => {
            return reject(IntakeError::UnsupportedEncoding, why).into_response();
        }
    };
    let decoded = {
        // Off the async workers, when one of the process's decoders is free.
        let Some(_turn) = shared.decode_memory.turn().await else {
            return reject(IntakeError::Overloaded, "shutting down".into()).into_response();
        };
        let (body, shared) = (body.clone(), shared.clone());
        tokio::task::spawn_blocking(move || {
            let decoded = budget::metered(&mut meter, || decode_and_translate(&shared, &body, gzipped));
            (decoded, meter)
        })
        .await
    };
    let Ok((decoded, _meter)) = decoded else {
        return reject(IntakeError::BadMsgpack, "the decoder failed".into()).into_response();
    };
    let translated = match decoded {
        Ok(t) => t,
        Err(e) => {
            let error = match &e {
                PayloadError::Gzip(_) => IntakeError::BadGzip,
                PayloadError::TooLarge { .. } => IntakeError::DecompressedTooLarge,
                PayloadError::Msgpack(_) => IntakeError::BadMsgpack,
                PayloadError::OverLimit { what, .. } => IntakeError::TooMany(*what),
                PayloadError::Memory(spent) => {
                    return crate::counted(telemetry, ApiError::from(*spent)).into_response();
                }
            };
            return reject(error, e.to_string()).into_response();
        }
    };
    for (error, detail) in &translated.dropped {
        telemetry.emit(IntakeEvent::PointDropped { error: *error, detail });
    }
    let allowed = lock(&intake.rate).take(translated.records.len(), std::time::Instant::now());
    if let Err(retry_after) = allowed {
        telemetry.emit(IntakeEvent::Limited {
            limit: streamsight_core::Limit::IngestRate,
            listener: "intake",
        });
        return reject(
            IntakeError::RateLimited,
            format!("over this tenant's ingest rate; retry in {retry_after} s"),
        )
        .retry_after(retry_after)
        .into_response();
    }
    let accepted = translated.records.len();
    if let Err(e) = intake.writer.append(translated.records).await {
        if matches!(e, AppendError::Busy(_)) {
            telemetry.emit(IntakeEvent::Limited {
                limit: streamsight_core::Limit::QueuedRecords,
                listener: "intake",
            });
        }
        return reject(e.kind(), e.to_string()).into_response();
    }
    telemetry.emit(IntakeEvent::PayloadAccepted {
        bytes: body.len(),
        backlogs: translated.backlogs,
        pathway_points: translated.pathway_points,
        failed_sends: translated.failed_sends,
    });
    let dropped: Vec<&String> = translated.dropped.iter().take(10).map(|(_, d)| d).collect();
    (
        StatusCode::ACCEPTED,
        axum::Json(json!({ "accepted": accepted, "dropped": translated.dropped.len(), "errors": dropped })),
    )
        .into_response()
}

/// The CPU-heavy part of a request, for a blocking thread: decompress, decode
/// under the payload limits, and translate to records.
fn decode_and_translate(shared: &Shared, body: &[u8], gzipped: bool) -> Result<Translated, PayloadError> {
    let limits = &shared.config.limits;
    let raw = payload::inflate(body, gzipped, limits.payload)?;
    let payload: Payload<&str> = payload::decode_msgpack(&raw, limits.payload)?;
    let now = clock::now();
    let dates = Dates {
        received: now,
        oldest: Millis(now.0.saturating_sub(clock::time_ms(shared.config.retention))),
        newest: Millis(now.0.saturating_add(clock::time_ms(limits.max_clock_skew))),
    };
    let engine = shared.lag.engine();
    let default = shared.config.default_cluster.as_str();
    // Only a cluster a tracer named counts: never a default one, whichever env.
    let resolve = |topic: &str| {
        let mut named = engine.clusters_of(topic).filter(|c| !is_default_cluster(c, default));
        match (named.next(), named.next()) {
            (Some(only), None) => Some(only.to_owned()),
            _ => None,
        }
    };
    Ok(translate(&payload, dates, default, &resolve))
}

/// What a payload becomes: records for the log, and what could not be used.
#[derive(Debug, Default)]
pub struct Translated {
    pub records: Vec<Record>,
    pub backlogs: usize,
    pub pathway_points: usize,
    pub failed_sends: usize,
    pub dropped: Vec<(IntakeError, String)>,
}

pub use streamsight_node::deliveries::Dates;

const NANOS_PER_MILLI: u64 = 1_000_000;
const DEFAULT_BUCKET_MS: i64 = 10_000;
/// Tracers flush 10 s buckets; an hour is already far beyond any of them.
const MAX_BUCKET_MS: i64 = 3_600_000;

/// Turns a decoded payload into records. A bucket's points are dated at the
/// bucket's end, but never later than their arrival: a tracer's clock that runs
/// ahead must not put points in the future. Buckets dated outside `dates` are
/// dropped and counted, as are empty stats points (no hash, no tags).
///
/// A backlog without `kafka_cluster_id` (ddtrace's commits) belongs to the
/// cluster `resolve` names for its topic, else to `default_cluster` — qualified by
/// the payload's `Env`, so that staging's `orders` is not production's.
pub fn translate<S: AsRef<str>>(
    p: &Payload<S>,
    dates: Dates,
    default_cluster: &str,
    resolve: &dyn Fn(&str) -> Option<String>,
) -> Translated {
    let received = dates.received;
    let mut out = Translated::default();
    let points: usize = p.stats.iter().map(|b| b.backlogs.len() + b.stats.len()).sum();
    out.records.reserve(points + p.failed_sends.len());
    let mut names = SharedNames::default();
    let env_cluster;
    let default_cluster = if p.env.as_ref().is_empty() {
        default_cluster
    } else {
        env_cluster = format!("{default_cluster}/{}", p.env.as_ref());
        &env_cluster
    };
    for bucket in &p.stats {
        let start_ms = i64::try_from(bucket.start / NANOS_PER_MILLI).unwrap_or(i64::MAX);
        let bucket_ms = match i64::try_from(bucket.duration / NANOS_PER_MILLI).unwrap_or(0) {
            0 => DEFAULT_BUCKET_MS,
            d => d.min(MAX_BUCKET_MS),
        };
        if !dates.contains(start_ms) {
            let points = bucket.backlogs.len() + bucket.stats.len();
            out.dropped.push((
                IntakeError::TimeOutOfRange,
                format!("bucket {start_ms}: {points} points dated outside the accepted range"),
            ));
            continue;
        }
        let at = Millis(start_ms.saturating_add(bucket_ms).min(received.0));
        for b in &bucket.backlogs {
            out.backlogs += 1;
            let cluster = match backlog::tag(&b.tags, "kafka_cluster_id") {
                Some(_) => None,
                None => backlog::tag(&b.tags, "topic").and_then(resolve),
            };
            let cluster = cluster.as_deref().unwrap_or(default_cluster);
            out.records.push(match backlog::parse(&b.tags, b.value, cluster) {
                Ok(observation) => Record::Observation {
                    at,
                    observation: observation.to_owned_in(&mut names),
                },
                Err(e) => Record::Rejected { at, reason: e.reason() },
            });
        }
        for (i, s) in bucket.stats.iter().enumerate() {
            if s.hash == 0 && s.edge_tags.is_empty() {
                continue;
            }
            let sketch = |bytes: &[u8], what: &str| {
                sketch::decode(bytes).map_err(|e| format!("bucket {start_ms} point {i}: {what}: {e}"))
            };
            let point = (|| {
                Ok::<_, String>(PathwayPoint {
                    bucket_start_ms: start_ms,
                    bucket_ms,
                    hash: s.hash,
                    parent_hash: s.parent_hash,
                    service: p.service.as_ref().to_owned(),
                    env: p.env.as_ref().to_owned(),
                    edge_tags: s.edge_tags.iter().map(|t| t.as_ref().to_owned()).collect(),
                    edge_latency: sketch(&s.edge_latency, "EdgeLatency")?,
                    pathway_latency: sketch(&s.pathway_latency, "PathwayLatency")?,
                    payload_size: sketch(&s.payload_size, "PayloadSize")?,
                })
            })();
            match point {
                Ok(point) => {
                    out.pathway_points += 1;
                    out.records.push(Record::Pathway {
                        at: Millis(start_ms.min(received.0)),
                        point: Box::new(point),
                    });
                }
                Err(e) => out.dropped.push((IntakeError::BadSketch, e)),
            }
        }
    }
    for f in &p.failed_sends {
        out.failed_sends += 1;
        let cluster = if f.cluster.as_ref().is_empty() {
            default_cluster
        } else {
            f.cluster.as_ref()
        };
        let failed = Observation::ProduceFailed {
            partition: PartitionRef {
                cluster,
                topic: f.topic.as_ref(),
                partition: f.partition,
            },
            error: f.error.as_ref(),
        };
        out.records.push(Record::Observation {
            at: received,
            observation: failed.to_owned_in(&mut names),
        });
    }
    let cluster_of = |named: &str, topic: &str| {
        if named.is_empty() {
            resolve(topic).unwrap_or_else(|| default_cluster.to_owned())
        } else {
            named.to_owned()
        }
    };
    let facts = streamsight_node::deliveries::facts(p, dates, &cluster_of);
    if facts.out_of_range > 0 {
        out.dropped.push((
            IntakeError::TimeOutOfRange,
            format!(
                "{} delivery counts dated outside the accepted range",
                facts.out_of_range
            ),
        ));
    }
    out.records.extend(facts.records);
    out
}

fn is_default_cluster(cluster: &str, default_cluster: &str) -> bool {
    cluster
        .strip_prefix(default_cluster)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

async fn drop_body(intake: &Intake, endpoint: DroppedEndpoint, body: Body) -> Response {
    // Read and thrown away as it arrives: a dropped body costs no memory.
    match drain_limited(body, intake.shared.config.limits.max_body_bytes).await {
        Ok(bytes) => {
            intake
                .shared
                .telemetry
                .emit(IntakeEvent::BodyDropped { endpoint, bytes });
            match endpoint {
                // Tracers read sampling rates from the traces response.
                DroppedEndpoint::Traces => axum::Json(json!({ "rate_by_service": {} })).into_response(),
                _ => StatusCode::ACCEPTED.into_response(),
            }
        }
        Err(refused) => refused.into_response(),
    }
}

async fn traces_v04(State(intake): State<Intake>, headers: HeaderMap, body: Body) -> Response {
    crate::spans::datadog(intake.shared, intake.writer, intake.rate, false, headers, body).await
}

async fn traces_v05(State(intake): State<Intake>, headers: HeaderMap, body: Body) -> Response {
    crate::spans::datadog(intake.shared, intake.writer, intake.rate, true, headers, body).await
}

async fn traces(State(intake): State<Intake>, body: Body) -> Response {
    drop_body(&intake, DroppedEndpoint::Traces, body).await
}

async fn stats(State(intake): State<Intake>, body: Body) -> Response {
    drop_body(&intake, DroppedEndpoint::Stats, body).await
}

async fn telemetry(State(intake): State<Intake>, body: Body) -> Response {
    drop_body(&intake, DroppedEndpoint::Telemetry, body).await
}
