//! Reading a request's body: under a limit, and in an encoding some intake reads.

use crate::error::{ApiError, ErrorKind};
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use streamsight_node::telemetry::IntakeError;

/// The whole body, or 413 `body_too_large` once it passes `limit` bytes.
pub async fn read_limited(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::new(
            ErrorKind::Intake(IntakeError::BodyTooLarge),
            format!("body is larger than {limit} bytes"),
        )
    })
}

/// Whether the body is gzipped; why not, for an encoding no intake reads.
pub fn gzipped(headers: &HeaderMap) -> Result<bool, String> {
    match headers.get(header::CONTENT_ENCODING).map(|v| v.to_str().unwrap_or("?")) {
        None | Some("identity") => Ok(false),
        Some("gzip") => Ok(true),
        Some(other) => Err(format!("content-encoding {other:?} is not gzip or identity")),
    }
}
