//! `/api/v1/alerts`, `/api/v1/silences` and `/api/v1/rules`: reading alerts for
//! read keys, changing silences and rules for admin keys. Changes are stored in
//! the log before they take effect.

use crate::service::{ChangeError, of};
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use streamsight_core::Millis;
use streamsight_core::alerts::Silence;
use streamsight_core::alerts::rule::Rule;
use streamsight_http::auth::{Caller, unless_admin};
use streamsight_http::body::json_body;
use streamsight_http::{ApiError, ErrorKind};
use streamsight_node::clock;
use streamsight_node::state::Shared;

/// A rule's body is a few KiB at most ([`Rule::validate`]); a silence's less.
const MAX_BODY: usize = 64 * 1024;

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/api/v1/alerts", get(alerts))
        .route(crate::signals::SERIES_PATH, get(series))
        .route("/api/v1/silences", get(silences).post(add_silence))
        .route("/api/v1/silences/{id}", axum::routing::delete(expire_silence))
        .route("/api/v1/rules", get(rules))
        .route("/api/v1/rules/{name}", get(rule).put(set_rule).delete(remove_rule))
}

/// A refused change as the API's error: its kind names what was wrong.
impl From<ChangeError> for ApiError {
    fn from(e: ChangeError) -> Self {
        let kind = match &e {
            ChangeError::Rule(_) => ErrorKind::BadRule,
            ChangeError::TooManyRules => ErrorKind::TooManyRules,
            ChangeError::NotFound(_) => ErrorKind::NotFound,
            ChangeError::Store(store) => return ApiError::from(store.clone()),
        };
        ApiError::new(kind, e.to_string())
    }
}

impl IntoResponse for ChangeError {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

/// A body that is not what it should be: 413 when too large, else `kind`.
/// Alerts that are not quiet (pending, firing, no data, resolved), worst first,
/// with the rules and how the notifiers fare.
async fn alerts(State(shared): State<Arc<Shared>>) -> Response {
    let now = clock::now();
    // A round that could not evaluate (a shard of a sharded log did not
    // answer), or on a shared log no word from a node evaluating: no alert
    // is then not all clear, and those listed are stale.
    let not_evaluated = crate::round::not_evaluated_because(&shared, now);
    Json(json!({
        "now_ms": now.0,
        "evaluated": not_evaluated.is_none(),
        "not_evaluated_because": not_evaluated,
        // On a shared log, whether this node is the one evaluating and
        // notifying now (it holds the rules' lease).
        "evaluates_here": crate::round::holds_the_rules(&shared),
        "alerts": of(&shared).list(now, not_evaluated.is_some()),
        "rules": of(&shared).rule_views(),
        "silences": of(&shared).silences(now),
        "notifiers": of(&shared).notifier_report(),
        "group_signals": *shared.signals.groups(),
    }))
    .into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SeriesQuery {
    shards: String,
}

/// This node's part of every signal the rules read, for the node of a
/// sharded log that evaluates them.
async fn series(
    State(shared): State<Arc<Shared>>,
    query: Result<axum::extract::Query<SeriesQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(axum::extract::Query(query)) = query else {
        return ApiError::new(ErrorKind::BadQuery, "shards= (the shards asked for) is required").into_response();
    };
    let now = clock::now();
    streamsight_http::fanout::part(shared, &query.shards, move |shared, _| {
        of(shared).local_series(shared, now)
    })
    .await
}

async fn silences(State(shared): State<Arc<Shared>>) -> Response {
    Json(json!({ "silences": of(&shared).silences(clock::now()) })).into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewSilence {
    /// Label globs, `alertname` for the rule.
    matchers: std::collections::BTreeMap<String, String>,
    /// How long, e.g. "2h".
    #[serde(with = "humantime_serde")]
    duration: std::time::Duration,
    #[serde(default)]
    comment: String,
}

async fn add_silence(
    State(shared): State<Arc<Shared>>,
    caller: Option<Extension<Caller>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Some(refused) = unless_admin(caller.as_deref(), "silences") {
        return refused;
    }
    let new: NewSilence = match json_body(&shared, &headers, body, MAX_BODY, ErrorKind::BadSilence).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    const MAX_SILENCE: std::time::Duration = std::time::Duration::from_secs(90 * 24 * 3600);
    let bounded = new.matchers.iter().all(|(k, v)| k.len() <= 512 && v.len() <= 512);
    if new.matchers.is_empty()
        || new.matchers.len() > 16
        || !bounded
        || new.duration > MAX_SILENCE
        || new.comment.len() > 1024
    {
        return ApiError::new(
            ErrorKind::BadSilence,
            "a silence needs 1 to 16 matchers of at most 512 bytes, at most 90 days and a comment under 1 KiB",
        )
        .into_response();
    }
    let now = clock::now();
    let mut id = [0u8; 8];
    let _ = getrandom::fill(&mut id);
    let silence = Silence {
        id: streamsight_node::secrets::hex(&id),
        matchers: new.matchers,
        until: Millis(now.0.saturating_add(streamsight_node::clock::time_ms(new.duration))),
        comment: new.comment,
    };
    match of(&shared).silence(silence.clone(), now).await {
        Ok(()) => (StatusCode::CREATED, Json(json!({ "silence": silence }))).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Ends a silence now (`DELETE`): what it covered notifies again from its next change.
async fn expire_silence(
    State(shared): State<Arc<Shared>>,
    caller: Option<Extension<Caller>>,
    Path(id): Path<String>,
) -> Response {
    if let Some(refused) = unless_admin(caller.as_deref(), "silences") {
        return refused;
    }
    match of(&shared).expire_silence(&id, clock::now()).await {
        Ok(silence) => Json(json!({ "silence": silence })).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Every rule, disabled ones included, with where it comes from.
async fn rules(State(shared): State<Arc<Shared>>) -> Response {
    Json(json!({ "rules": of(&shared).rule_views() })).into_response()
}

async fn rule(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    match of(&shared).rule_views().into_iter().find(|r| r.rule.name == name) {
        Some(view) => Json(json!({ "rule": view })).into_response(),
        None => ChangeError::NotFound("rule").into_response(),
    }
}

/// Makes or replaces a rule (over the configuration's or default of that name;
/// `enabled: false` turns one off). The path names it; a name in the body must agree.
async fn set_rule(
    State(shared): State<Arc<Shared>>,
    caller: Option<Extension<Caller>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Some(refused) = unless_admin(caller.as_deref(), "rules") {
        return refused;
    }
    let mut body: serde_json::Map<String, serde_json::Value> =
        match json_body(&shared, &headers, body, MAX_BODY, ErrorKind::BadRule).await {
            Ok(b) => b,
            Err(e) => return e.into_response(),
        };
    match body.get("name") {
        Some(serde_json::Value::String(n)) if *n == name => {}
        None => {
            body.insert("name".into(), serde_json::Value::String(name.clone()));
        }
        Some(_) => {
            return ApiError::new(ErrorKind::BadRule, "the body's name is not the path's").into_response();
        }
    }
    let rule: Rule = match serde_json::from_value(serde_json::Value::Object(body)) {
        Ok(r) => r,
        Err(e) => return ApiError::new(ErrorKind::BadRule, e.to_string()).into_response(),
    };
    match of(&shared).set_rule(rule, clock::now()).await {
        Ok(()) => {
            let view = of(&shared).rule_views().into_iter().find(|r| r.rule.name == name);
            (StatusCode::OK, Json(json!({ "rule": view }))).into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// Removes a rule made through the API: its alerts resolve (or the
/// configuration's rule of that name applies again).
async fn remove_rule(
    State(shared): State<Arc<Shared>>,
    caller: Option<Extension<Caller>>,
    Path(name): Path<String>,
) -> Response {
    if let Some(refused) = unless_admin(caller.as_deref(), "rules") {
        return refused;
    }
    match of(&shared).remove_rule(&name, clock::now()).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => e.into_response(),
    }
}
