//! `POST /api/v1/groups/{cluster}/{group}/reset`: a dry run unless
//! `"dry_run": false`, which needs an admin key and is recorded in the log.
//! `GET /api/v1/records/…`: one record, for `payloads` keys.
//! `POST /api/v1/dlq/{cluster}/{topic}/redrive`: a dry run unless
//! `"dry_run": false` (admin), which starts a run; `GET /api/v1/redrives[/{run}]`
//! its progress.

use crate::record;
use crate::redrive::{self, Selection};
use crate::reset::{self, ResetRequest, TopicSelection};
use crate::{ActError, ActService};
use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use streamsight_core::redrive::DlqTopic;
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
        .route("/api/v1/dlq/{cluster}/{topic}/redrive", post(redrive))
        .route("/api/v1/redrives", get(list_redrives))
        .route("/api/v1/redrives/{run}", get(redrive_status))
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
        return ApiError::new(
            ErrorKind::BadQuery,
            format!("partition {partition:?} and offset {offset:?}: both are whole numbers, 0 or more"),
        )
        .into_response();
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RedriveBody {
    #[serde(default)]
    selection: Selection,
    /// Absent: a dry run. Only `false` executes.
    #[serde(default = "yes")]
    dry_run: bool,
}

/// Redrive dry runs at once in this process.
static PLANS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();

/// A redrive's body: a thousand named letters fit.
const MAX_REDRIVE_BODY: usize = 256 << 10;

async fn redrive(
    State(shared): State<Arc<Shared>>,
    Path((cluster, dlq)): Path<(String, String)>,
    caller: Option<Extension<Caller>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let body: RedriveBody = match json_body(&shared, &headers, body, MAX_REDRIVE_BODY, ErrorKind::BadBody).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    if !body.dry_run
        && let Some(refused) = unless_admin(caller.as_deref(), "executing a dead-letter redrive")
    {
        return refused;
    }
    let config = match polled(&shared, &cluster) {
        Ok(c) => c.clone(),
        Err(e) => return ApiError::from(e).into_response(),
    };
    // A dry run reads the whole topic (up to `redrive::MAX_SCANNED` records): of a
    // DLQ this collector watches, a read key's question; of any other topic, a
    // load on the cluster only an admin key may put.
    if body.dry_run
        && !is_known_dlq(&shared, &cluster, &dlq)
        && let Some(refused) = unless_admin(
            caller.as_deref(),
            &format!(
                "a redrive dry run of {dlq}, which is not a DLQ this collector watches on {cluster} (it reads the whole topic)"
            ),
        )
    {
        return refused;
    }
    let refused = body.selection.check(&dlq).err().or_else(|| {
        [Some(&dlq), body.selection.to_topic.as_ref()]
            .into_iter()
            .flatten()
            .find(|t| shared.config.is_log_topic(t))
            .map(|t| ActError::Refused(format!("{t} is this collector's own log: never redriven by it")))
    });
    if let Some(e) = refused {
        return ApiError::from(e).into_response();
    }
    if body.dry_run {
        // Each dry run reads a DLQ: a few at a time, the rest wait their turn.
        let plans = PLANS.get_or_init(|| tokio::sync::Semaphore::new(2));
        let Ok(_turn) = plans.acquire().await else {
            return ApiError::new(ErrorKind::Overloaded, "shutting down").into_response();
        };
        let selection = body.selection;
        let shared = Arc::clone(&shared);
        let planned = tokio::task::spawn_blocking(move || redrive::plan(&shared, &config, &dlq, &selection)).await;
        return match planned {
            Ok(Ok(plan)) => axum::Json(json!({ "dry_run": true, "plan": plan })).into_response(),
            Ok(Err(e)) => ApiError::from(e).into_response(),
            Err(_) => ApiError::new(ErrorKind::Internal, "the redrive planner failed").into_response(),
        };
    }
    let Some(act) = shared.feature::<ActService>() else {
        return ApiError::new(ErrorKind::Internal, "this node acts on nothing").into_response();
    };
    let of = DlqTopic {
        cluster: cluster.clone(),
        dlq: dlq.clone(),
    };
    let run = streamsight_node::secrets::new_secret()[..16].to_owned();
    let status = match act.redrives.start(&of, &run) {
        Ok(s) => s,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let key = caller.as_deref().map(|c| c.key_id.clone()).unwrap_or_default();
    let runtime = tokio::runtime::Handle::current();
    let (shared2, run2, selection) = (Arc::clone(&shared), run.clone(), body.selection);
    // Its own thread, not the runtime's blocking pool: a run may outlast a
    // shutdown, which must not wait for it (what it did is in the log).
    let spawned = std::thread::Builder::new()
        .name(format!("redrive-{run}"))
        .spawn(move || {
            let this = redrive::Run {
                shared: &shared2,
                runtime: &runtime,
                cluster: &config,
                of: of.clone(),
                id: run2.clone(),
                key,
            };
            let result = redrive::run::execute(&this, &selection, &status);
            if let Err(e) = &result {
                tracing::warn!(run = %run2, dlq, error = %e, "redrive stopped");
            }
            if let Some(act) = shared2.feature::<ActService>() {
                act.redrives.finish(&of, &run2, result);
            }
        });
    if let Err(e) = spawned {
        return ApiError::new(ErrorKind::Internal, format!("could not start the redrive: {e}")).into_response();
    }
    (
        axum::http::StatusCode::ACCEPTED,
        axum::Json(json!({ "dry_run": false, "run": run, "status": format!("/api/v1/redrives/{run}") })),
    )
        .into_response()
}

/// Whether `topic` of `cluster` is a DLQ this collector was told of
/// (`[[serve.dlq]]`'s topics, or a conventional name where it finds DLQs by
/// name) or found (its DLQ monitors' topics).
fn is_known_dlq(shared: &Shared, cluster: &str, topic: &str) -> bool {
    let configured = shared.config.dlq.iter().filter(|d| d.name == cluster).any(|d| {
        d.topics.iter().any(|t| t == topic)
            || (d.by_convention && streamsight_wire::dlq::source_of_dlq_name(topic).is_some())
    });
    configured
        || shared
            .dlq
            .view()
            .iter()
            .filter(|m| m.config.name == cluster)
            .any(|m| m.report().iter().any(|t| t.dlq_topic == topic))
}

/// A run as the log has it, and as this process runs it.
fn run_view(shared: &Shared, run: &str) -> Option<serde_json::Value> {
    let logged = shared.redrives.view().run(run).cloned();
    let act = shared.feature::<ActService>();
    let live = act.and_then(|a| a.redrives.status(run));
    let running = act.is_some_and(|a| a.redrives.is_running(run));
    if logged.is_none() && live.is_none() {
        return None;
    }
    // Not running here and never finished: its process stopped mid-run.
    let interrupted = !running && logged.as_ref().is_some_and(|l| l.finished_ms.is_none()) && live.is_none();
    Some(json!({ "run": run, "running": running, "interrupted": interrupted, "logged": logged, "live": live }))
}

async fn redrive_status(State(shared): State<Arc<Shared>>, Path(run): Path<String>) -> Response {
    match run_view(&shared, &run) {
        Some(v) => axum::Json(v).into_response(),
        None => ApiError::new(ErrorKind::NotFound, format!("no redrive {run} is known here")).into_response(),
    }
}

async fn list_redrives(State(shared): State<Arc<Shared>>) -> Response {
    let runs: Vec<String> = shared.redrives.view().runs().map(|r| r.run.clone()).collect();
    let views: Vec<_> = runs.iter().rev().filter_map(|r| run_view(&shared, r)).collect();
    axum::Json(json!({ "redrives": views })).into_response()
}
