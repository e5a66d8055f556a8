//! `POST /api/v1/groups/{cluster}/{group}/reset`: a dry run unless
//! `"dry_run": false`, which needs an admin key and is recorded in the log.
//! `GET /api/v1/records/…`: one record, for `payloads` keys.

use crate::ActError;
use crate::record;
use crate::reset::{self, ResetRequest, TopicSelection};
use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use streamsight_core::reset::ResetTo;
use streamsight_http::auth::{Caller, Scope, unless_admin, unless_scope};
use streamsight_http::body::json_body;
use streamsight_http::{ApiError, ErrorKind};
use streamsight_node::{Shared, clock};

/// A reset request's body: a plan of 100,000 named partitions fits.
const MAX_BODY: usize = 2 << 20;

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/api/v1/groups/{cluster}/{group}/reset", post(reset_group))
        .route(
            "/api/v1/records/{cluster}/{topic}/{partition}/{offset}",
            get(read_record),
        )
}

/// Record reads at once in this process: each is a Kafka client of its own.
static READS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();

/// `GET /api/v1/records/{cluster}/{topic}/{partition}/{offset}`: for keys of
/// the `payloads` scope (or admin), on polled clusters, never the
/// collector's own log.
async fn read_record(
    State(shared): State<Arc<Shared>>,
    Path((cluster, topic, partition, offset)): Path<(String, String, String, String)>,
    caller: Option<Extension<Caller>>,
) -> Response {
    if let Some(refused) = unless_scope(caller.as_deref(), Scope::Payloads, "reading a record") {
        return refused;
    }
    let (Ok(partition), Ok(offset)) = (partition.parse::<i32>(), offset.parse::<i64>()) else {
        return ApiError::new(ErrorKind::BadQuery, "a partition and an offset are numbers").into_response();
    };
    let config = match polled(&shared, &cluster) {
        Ok(c) => c.clone(),
        Err(e) => return ApiError::from(e).into_response(),
    };
    if shared.config.is_log_topic(&topic) {
        return ApiError::from(ActError::Refused(format!(
            "{topic} is this collector's own log: not read through it"
        )))
        .into_response();
    }
    let limits = shared.config.records.clone();
    let reads = READS.get_or_init(|| tokio::sync::Semaphore::new(limits.max_concurrent_reads.max(1)));
    let Ok(_turn) = reads.acquire().await else {
        return ApiError::new(ErrorKind::Overloaded, "shutting down").into_response();
    };
    let read = tokio::task::spawn_blocking(move || record::read(&config, &topic, partition, offset, &limits)).await;
    match read {
        Ok(Ok(r)) => axum::Json(r).into_response(),
        Ok(Err(e)) => ApiError::from(e).into_response(),
        Err(_) => ApiError::new(ErrorKind::Internal, "the record reader failed").into_response(),
    }
}

/// The tenant's polled cluster named `name`: nothing else is acted on.
fn polled<'a>(shared: &'a Shared, name: &str) -> Result<&'a streamsight_poller::ClusterConfig, ActError> {
    shared.config.clusters.iter().find(|c| c.name == name).ok_or_else(|| {
        ActError::UnknownCluster(format!(
            "{name} is not a cluster this collector polls: only polled clusters are acted on"
        ))
    })
}

impl From<ActError> for ApiError {
    /// The one place an action's failure becomes a status.
    fn from(e: ActError) -> Self {
        let kind = match &e {
            ActError::BadRequest(_) => ErrorKind::BadBody,
            ActError::UnknownCluster(_) => ErrorKind::UnknownCluster,
            ActError::UnknownTopic(_) => ErrorKind::UnknownTopic,
            ActError::NotFound(_) => ErrorKind::NotFound,
            ActError::Refused(_) => ErrorKind::Refused,
            ActError::Broker(_) => ErrorKind::BrokerFailed,
        };
        ApiError::new(kind, e.to_string())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResetBody {
    #[serde(default)]
    topics: Vec<TopicSelection>,
    to: ResetTo,
    /// Absent: a dry run. Only `false` executes.
    #[serde(default = "yes")]
    dry_run: bool,
}

fn yes() -> bool {
    true
}

async fn reset_group(
    State(shared): State<Arc<Shared>>,
    Path((cluster, group)): Path<(String, String)>,
    caller: Option<Extension<Caller>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let body: ResetBody = match json_body(&shared, &headers, body, MAX_BODY, ErrorKind::BadBody).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    if !body.dry_run
        && let Some(refused) = unless_admin(caller.as_deref(), "executing an offset reset")
    {
        return refused;
    }
    let request = ResetRequest {
        group,
        topics: body.topics,
        to: body.to,
    };
    let key = caller.as_deref().map(|c| c.key_id.clone()).unwrap_or_default();
    match run(&shared, &cluster, &request, body.dry_run, &key).await {
        Ok(answer) => axum::Json(answer).into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// Plans, and unless a dry run executes and records. Only this tenant's
/// polled clusters, never the collector's own log topics.
async fn run(
    shared: &Shared,
    cluster: &str,
    request: &ResetRequest,
    dry_run: bool,
    key: &str,
) -> Result<serde_json::Value, ActError> {
    let config = polled(shared, cluster)?;
    let mut planned = reset::plan(config, request, clock::now()).await?;
    if let Some(p) = planned
        .plan
        .partitions
        .iter()
        .find(|p| shared.config.is_log_topic(&p.topic))
    {
        return Err(ActError::Refused(format!(
            "{} is this collector's own log: never reset by it",
            p.topic
        )));
    }
    let would_refuse = planned.plan.refusal();
    if dry_run {
        return Ok(json!({ "dry_run": true, "would_refuse": would_refuse, "plan": planned.plan }));
    }
    reset::execute(&mut planned).await?;
    let at = clock::now();
    tracing::info!(cluster, group = %request.group, to = %request.to, skipped = planned.plan.skip, reread = planned.plan.reread, "offsets reset");
    // Committed on the broker: a log that fails to take it is said, not hidden.
    let recorded = match shared.writer() {
        Some(w) => w
            .append(reset::records(&planned.plan, key, at))
            .await
            .map_err(|e| e.to_string()),
        None => Err("this node has no writer".to_owned()),
    };
    Ok(json!({
        "dry_run": false,
        "executed": true,
        "recorded": recorded.is_ok(),
        "record_error": recorded.err(),
        "plan": planned.plan,
    }))
}
