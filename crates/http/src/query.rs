//! Query strings and what an answer says of its coverage.

use crate::error::{ApiError, ErrorKind};
use crate::fanout::Coverage;
use axum::extract::Query;
use axum::response::{IntoResponse, Response};

/// A query string as `T`, or 400 `bad_query` saying what is wrong: the one
/// place a malformed query becomes an answer.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> axum::extract::FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(q)) => Ok(ApiQuery(q)),
            Err(e) => Err(ApiError::new(ErrorKind::BadQuery, e.body_text())),
        }
    }
}

/// The answer, with which shards it covers on a sharded log.
pub fn with_coverage(mut body: serde_json::Value, coverage: Option<Coverage>) -> Response {
    if let Some(coverage) = coverage {
        body["shards"] = serde_json::json!(coverage);
    }
    axum::Json(body).into_response()
}
