//! The API listener's routes: the API's own, then each feature's, and one
//! answer for what none of them serves.

use axum::Router;
use axum::response::IntoResponse;
use std::sync::Arc;
use streamsight_http::{ApiError, ErrorKind};
use streamsight_node::Shared;

/// Everything the API listener answers for one tenant.
pub fn api(shared: Arc<Shared>) -> Router {
    streamsight_api::routes()
        .merge(streamsight_alerts::api::routes())
        .merge(streamsight_journeys::api::routes())
        .merge(streamsight_act::api::routes())
        .merge(streamsight_dashboard::routes())
        .fallback(|| async { ApiError::new(ErrorKind::NotFound, "no such endpoint").into_response() })
        .with_state(shared)
}
