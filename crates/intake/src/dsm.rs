//! The Datadog-agent-compatible intake: what tracers with Data Streams Monitoring
//! enabled send to `DD_TRACE_AGENT_URL`.

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use streamsight_core::Millis;
use streamsight_core::pathway::PathwayPoint;
use streamsight_core::{Observation, PartitionRef, Record, SharedNames};
use streamsight_http::body::{drain_limited, gzipped, media_type, read_metered, wrong_content_type};
use streamsight_http::rate::SharedRate;
use streamsight_http::{ApiError, ErrorKind};
use streamsight_node::clock;
use streamsight_node::sync::lock;
use streamsight_node::telemetry::{DroppedEndpoint, IntakeError, IntakeEvent};
use streamsight_node::timings::Stage;
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

/// What tracers ask first. `receiver_port` is the port this request came
/// in on (0 on a Unix socket), not the agent's usual 8126.
async fn info(local: Option<axum::Extension<streamsight_http::server::Local>>) -> impl IntoResponse {
    let port = local.and_then(|l| l.0.0).map_or(0, |a| a.port());
    axum::Json(json!({
        "version": concat!("streamsight-", env!("CARGO_PKG_VERSION")),
        "endpoints": ENDPOINTS,
        "feature_flags": [],
        "client_drop_p0s": false,
        "span_meta_structs": false,
        "long_running_spans": false,
        "config": { "statsd_port": 0, "receiver_port": port },
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
    if !media_type(&headers).is_some_and(|t| MSGPACK_TYPES.contains(&t.as_str())) {
        return reject(
            IntakeError::UnsupportedContentType,
            wrong_content_type(&headers, "application/msgpack"),
        )
        .into_response();
    }
    // Charged from the first byte read to the last record stored.
    let mut meter = shared.meter();
    let began = std::time::Instant::now();
    let body = match read_metered(body, limits.max_body_bytes, &mut meter).await {
        Ok(b) => b,
        Err(refused) => {
            return crate::counted(telemetry, refused).into_response();
        }
    };
    shared.timings.stage(Stage::Read).observe(began.elapsed());
    let gzipped = match gzipped(&headers) {
        Ok(g) => g,
        Err(why) => {
            return reject(IntakeError::UnsupportedEncoding, why).into_response();
        }
    };
    let began = std::time::Instant::now();
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
    shared.timings.stage(Stage::Decode).observe(began.elapsed());
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
    let accepted = translated
        .records
        .len()
        .saturating_sub(translated.rejected + translated.forgotten);
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
    let errors: Vec<&String> = translated
        .dropped
        .iter()
        .map(|(_, d)| d)
        .chain(&translated.rejected_why)
        .take(SAID)
        .collect();
    let body = json!({
        "accepted": accepted,
        "rejected": translated.rejected,
        "dropped": translated.dropped.len(),
        "errors": errors,
    });
    (StatusCode::ACCEPTED, axum::Json(body)).into_response()
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
    let by_id = shared.clusters.names_by_id();
    let engine = shared.lag.engine();
    let default = shared.config.default_cluster.as_str();
    let by_topic = |topic: &str| crate::clusters::the_one_named(engine.clusters_of(topic), default);
    let held_in = |topic: &str, cluster: &str| engine.clusters_of(topic).any(|c| c == cluster);
    let clusters = Clusters {
        default,
        by_id: &by_id,
        by_topic: &by_topic,
        held_in: &held_in,
    };
    Ok(translate(&payload, dates, &clusters))
}

/// How a payload's points find their cluster.
pub struct Clusters<'a> {
    /// Where points that name no cluster and whose topic no named cluster
    /// holds are kept: `DEFAULT/ENV`, the unknown cluster of their env.
    pub default: &'a str,
    /// A polled cluster's configured name by the id its brokers give: what a
    /// tracer sends as `kafka_cluster_id` is that cluster.
    pub by_id: &'a HashMap<String, String>,
    /// The one named cluster that holds a topic, where exactly one does.
    pub by_topic: &'a dyn Fn(&str) -> Option<String>,
    /// Whether the engine holds `topic` in `cluster`.
    pub held_in: &'a dyn Fn(&str, &str) -> bool,
}

impl std::fmt::Debug for Clusters<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clusters")
            .field("default", &self.default)
            .field("by_id", &self.by_id)
            .finish_non_exhaustive()
    }
}

impl Clusters<'_> {
    /// Clusters known by nothing but the default.
    pub fn none(default: &str) -> Clusters<'_> {
        static EMPTY: std::sync::LazyLock<HashMap<String, String>> = std::sync::LazyLock::new(HashMap::new);
        Clusters {
            default,
            by_id: &EMPTY,
            by_topic: &|_| None,
            held_in: &|_, _| false,
        }
    }

    /// A tracer's `kafka_cluster_id` as the cluster's name here.
    fn named<'n>(&'n self, id: &'n str) -> &'n str {
        self.by_id.get(id).map_or(id, String::as_str)
    }
}

/// What a payload becomes: records for the log, and what could not be used.
#[derive(Debug, Default)]
pub struct Translated {
    pub records: Vec<Record>,
    pub backlogs: usize,
    pub pathway_points: usize,
    pub failed_sends: usize,
    pub dropped: Vec<(IntakeError, String)>,
    /// Backlogs written but refused by the engine: counted in
    /// `/api/v1/rejections`, and never as accepted.
    pub rejected: usize,
    /// Why, for the first [`SAID`] of them.
    pub rejected_why: Vec<String>,
    /// Unknown-cluster copies of topics forgotten (records of their own,
    /// not the payload's points).
    pub forgotten: usize,
}

/// How many refusals an answer says why for.
pub const SAID: usize = 10;

impl Translated {
    /// One more backlog the engine refuses; `why` is said for the first few.
    fn reject(&mut self, why: impl FnOnce() -> String) {
        self.rejected += 1;
        if self.rejected_why.len() < SAID {
            self.rejected_why.push(why());
        }
    }
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
/// A `kafka_cluster_id` that is a polled cluster's id is that cluster, by
/// its configured name. A backlog without one (ddtrace's commits) belongs to
/// the cluster the same payload names for its topic, else to the one named
/// cluster holding the topic, else to `clusters.default` — qualified by the
/// payload's `Env`, so that staging's `orders` is not production's.
pub fn translate<S: AsRef<str>>(p: &Payload<S>, dates: Dates, clusters: &Clusters<'_>) -> Translated {
    let received = dates.received;
    let mut out = Translated::default();
    let points: usize = p.stats.iter().map(|b| b.backlogs.len() + b.stats.len()).sum();
    out.records.reserve(points + p.failed_sends.len());
    let mut names = SharedNames::default();
    let env_cluster;
    let default_cluster = if p.env.as_ref().is_empty() {
        clusters.default
    } else {
        env_cluster = format!("{}/{}", clusters.default, p.env.as_ref());
        &env_cluster
    };
    // The clusters this payload names for each topic: its commits, which
    // name none, are on the one its produces name.
    let mut named_here: HashMap<&str, Option<&str>> = HashMap::new();
    let backlogs = || p.stats.iter().flat_map(|bucket| &bucket.backlogs);
    // Only a payload with a backlog that names no cluster needs them.
    let unnamed = backlogs().any(|b| backlog::tag(&b.tags, "kafka_cluster_id").is_none_or(str::is_empty));
    for b in backlogs().filter(|_| unnamed) {
        if let (Some(topic), Some(id)) = (
            backlog::tag(&b.tags, "topic"),
            backlog::tag(&b.tags, "kafka_cluster_id").filter(|id| !id.is_empty()),
        ) {
            let cluster = clusters.named(id);
            named_here
                .entry(topic)
                .and_modify(|c| *c = c.filter(|c| *c == cluster))
                .or_insert(Some(cluster));
        }
    }
    // Topics whose unknown-cluster copy is forgotten, once per payload.
    let (mut forgotten, mut ghosts): (std::collections::HashSet<&str>, Vec<&str>) = Default::default();
    // When each partition's acknowledged sends are dated: a failure the
    // sender says was followed by a success is dated before them (kept only
    // when the payload has such a failure).
    let recovered = p.failed_sends.iter().any(|f| f.recovered);
    let mut produced_at: HashMap<(&str, i32), Millis> = HashMap::new();
    // A topic's earliest, for a failure with no partition.
    let mut topic_produced_at: HashMap<&str, Millis> = HashMap::new();
    let resolve = |topic: &str| match named_here.get(topic) {
        Some(Some(one)) => Some((*one).to_owned()),
        Some(None) => None,
        None => (clusters.by_topic)(topic),
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
        for (i, b) in bucket.backlogs.iter().enumerate() {
            out.backlogs += 1;
            let resolved;
            let cluster = match backlog::tag(&b.tags, "kafka_cluster_id").filter(|id| !id.is_empty()) {
                Some(id) => clusters.named(id),
                None => {
                    let topic = backlog::tag(&b.tags, "topic");
                    resolved = topic.and_then(resolve);
                    // Points that came before the topic's cluster was known
                    // were kept in the unknown cluster: now that it is, that
                    // copy is a ghost of the live one, and is forgotten.
                    if let (Some(topic), Some(_)) = (topic, &resolved)
                        && !forgotten.contains(topic)
                        && (clusters.held_in)(topic, default_cluster)
                    {
                        forgotten.insert(topic);
                        ghosts.push(topic);
                    }
                    resolved.as_deref().unwrap_or(default_cluster)
                }
            };
            let record = match backlog::parse_in(&b.tags, b.value, cluster) {
                Ok(observation) => {
                    if recovered
                        && let Observation::Produced { partition, offset } = observation
                        && offset >= 0
                        && let Some(topic) = backlog::tag(&b.tags, "topic")
                    {
                        let when = produced_at.entry((topic, partition.partition)).or_insert(at);
                        *when = (*when).max(at);
                        let first = topic_produced_at.entry(topic).or_insert(at);
                        *first = (*first).min(at);
                    }
                    if let Err(reason) = observation.check() {
                        out.reject(|| format!("bucket {start_ms} backlog {i}: {reason}"));
                    }
                    // Written even so: the engine counts what it refuses, and a
                    // failed send's placeholder marks its producer failing.
                    Record::Observation {
                        at,
                        observation: observation.to_owned_in(&mut names),
                    }
                }
                Err(e) => {
                    out.reject(|| format!("bucket {start_ms} backlog {i}: {e}"));
                    Record::Rejected { at, reason: e.reason() }
                }
            };
            out.records.push(record);
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
        let resolved;
        let cluster = if f.cluster.as_ref().is_empty() {
            resolved = resolve(f.topic.as_ref());
            resolved.as_deref().unwrap_or(default_cluster)
        } else {
            clusters.named(f.cluster.as_ref())
        };
        // A failure followed by a success (in the sender's order) comes
        // before the success; otherwise after everything in the payload.
        let topic = f.topic.as_ref();
        let succeeded_at = if f.partition >= 0 {
            produced_at.get(&(topic, f.partition)).copied()
        } else {
            topic_produced_at.get(topic).copied()
        };
        let at = match succeeded_at {
            Some(ok) if f.recovered => Millis(ok.0.saturating_sub(1)),
            _ => received,
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
            at,
            observation: failed.to_owned_in(&mut names),
        });
    }
    let cluster_of = |named: &str, topic: &str| {
        if named.is_empty() {
            resolve(topic).unwrap_or_else(|| default_cluster.to_owned())
        } else {
            clusters.named(named).to_owned()
        }
    };
    out.forgotten = ghosts.len();
    for topic in ghosts {
        let forget = Observation::TopicDeleted {
            cluster: default_cluster,
            topic,
        };
        out.records.push(Record::Observation {
            at: received,
            observation: forget.to_owned_in(&mut names),
        });
    }
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
