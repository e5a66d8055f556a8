//! `/api/v1/alerts`, `/api/v1/silences` and `/api/v1/rules`: reading alerts for
//! read keys, changing silences and rules for admin keys. Changes are stored in
//! the log before they take effect.

use super::ChangeError;
use crate::auth::{Caller, unless_admin};
use crate::clock;
use crate::intake::error_response;
use crate::state::Shared;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
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

/// A rule's body is a few KiB at most ([`Rule::validate`]); a silence's less.
const MAX_BODY: usize = 64 * 1024;

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/api/v1/alerts", get(alerts))
        .route(super::SERIES_PATH, get(series))
        .route("/api/v1/silences", get(silences).post(add_silence))
        .route("/api/v1/silences/{id}", axum::routing::delete(expire_silence))
        .route("/api/v1/rules", get(rules))
        .route("/api/v1/rules/{name}", get(rule).put(set_rule).delete(remove_rule))
        .layer(DefaultBodyLimit::max(MAX_BODY))
}

/// The one place a refused change becomes a status.
impl IntoResponse for ChangeError {
    fn into_response(self) -> Response {
        let (status, kind) = match &self {
            ChangeError::Rule(_) => (StatusCode::BAD_REQUEST, "bad_rule"),
            ChangeError::TooManyRules => (StatusCode::CONFLICT, "too_many_rules"),
            ChangeError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ChangeError::Store(e) => return error_response(e.status(), e.kind().as_str(), &e.to_string()),
        };
        error_response(status, kind, &self.to_string())
    }
}

/// A body that is not what it should be: 413 when too large, else 400.
fn refused(e: &JsonRejection, kind: &str) -> Response {
    match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => {
            error_response(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", &e.body_text())
        }
        _ => error_response(StatusCode::BAD_REQUEST, kind, &e.body_text()),
    }
}

/// Alerts that are not quiet (pending, firing, no data, resolved), worst first,
/// with the rules and how the notifiers fare.
async fn alerts(State(shared): State<Arc<Shared>>) -> Response {
    let now = clock::now();
    Json(json!({
        "now_ms": now.0,
        // A round that could not evaluate (a shard of a sharded log did not
        // answer): no alert is then not all clear.
        "evaluated": shared.alerts.not_evaluated_because().is_none(),
        "not_evaluated_because": shared.alerts.not_evaluated_because(),
        "alerts": shared.alerts.list(now),
        "rules": shared.alerts.rule_views(),
        "silences": shared.alerts.silences(now),
        "notifiers": shared.alerts.notifier_report(),
        "group_signals": *shared.alerts.group_signals(),
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
        return error_response(
            StatusCode::BAD_REQUEST,
            "bad_query",
            "shards= (the shards asked for) is required",
        );
    };
    let now = clock::now();
    crate::fanout::part(shared, &query.shards, move |shared, _| {
        shared.alerts.local_series(shared, now)
    })
    .await
}

async fn silences(State(shared): State<Arc<Shared>>) -> Response {
    Json(json!({ "silences": shared.alerts.silences(clock::now()) })).into_response()
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
    body: Result<Json<NewSilence>, JsonRejection>,
) -> Response {
    if let Some(refused) = unless_admin(caller.as_deref(), "silences") {
        return refused;
    }
    let Json(new) = match body {
        Ok(b) => b,
        Err(e) => return refused(&e, "bad_silence"),
    };
    const MAX_SILENCE: std::time::Duration = std::time::Duration::from_secs(90 * 24 * 3600);
    let bounded = new.matchers.iter().all(|(k, v)| k.len() <= 512 && v.len() <= 512);
    if new.matchers.is_empty()
        || new.matchers.len() > 16
        || !bounded
        || new.duration > MAX_SILENCE
        || new.comment.len() > 1024
    {
        return error_response(
            StatusCode::BAD_REQUEST,
            "bad_silence",
            "a silence needs 1 to 16 matchers of at most 512 bytes, at most 90 days and a comment under 1 KiB",
        );
    }
    let now = clock::now();
    let mut id = [0u8; 8];
    let _ = getrandom::fill(&mut id);
    let silence = Silence {
        id: crate::auth::hex(&id),
        matchers: new.matchers,
        until: Millis(now.0.saturating_add(crate::time_ms(new.duration))),
        comment: new.comment,
    };
    match shared.alerts.silence(silence.clone(), now).await {
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
    match shared.alerts.expire_silence(&id, clock::now()).await {
        Ok(silence) => Json(json!({ "silence": silence })).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Every rule, disabled ones included, with where it comes from.
async fn rules(State(shared): State<Arc<Shared>>) -> Response {
    Json(json!({ "rules": shared.alerts.rule_views() })).into_response()
}

async fn rule(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    match shared.alerts.rule_views().into_iter().find(|r| r.rule.name == name) {
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
    body: Result<Json<serde_json::Map<String, serde_json::Value>>, JsonRejection>,
) -> Response {
    if let Some(refused) = unless_admin(caller.as_deref(), "rules") {
        return refused;
    }
    let mut body = match body {
        Ok(Json(b)) => b,
        Err(e) => return refused(&e, "bad_rule"),
    };
    match body.get("name") {
        Some(serde_json::Value::String(n)) if *n == name => {}
        None => {
            body.insert("name".into(), serde_json::Value::String(name.clone()));
        }
        Some(_) => {
            return error_response(StatusCode::BAD_REQUEST, "bad_rule", "the body's name is not the path's");
        }
    }
    let rule: Rule = match serde_json::from_value(serde_json::Value::Object(body)) {
        Ok(r) => r,
        Err(e) => return error_response(StatusCode::BAD_REQUEST, "bad_rule", &e.to_string()),
    };
    match shared.alerts.set_rule(rule, clock::now()).await {
        Ok(()) => {
            let view = shared.alerts.rule_views().into_iter().find(|r| r.rule.name == name);
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
    match shared.alerts.remove_rule(&name, clock::now()).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => e.into_response(),
    }
}
