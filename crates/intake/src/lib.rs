//! Intake: what instrumented clients send, bounded, decoded off the async
//! workers, translated to records and handed to the writer, answered 2xx only
//! once stored. The Datadog-agent-compatible intake ([`dsm`]: Data Streams
//! payloads, `/v0.4` and `/v0.5` traces) and the OTLP listener ([`spans`]:
//! OTLP traces and logs, Fluent Bit's `json_lines`).

pub mod clusters;
pub mod dsm;
pub mod failed_spans;
pub mod spans;

pub use dsm::{Clusters, Dates, ENDPOINTS, Translated, router, translate};

use streamsight_http::{ApiError, ErrorKind};
use streamsight_node::telemetry::{IntakeEvent, IntakeTelemetry};

/// `refused`, counted and logged as the rejected payload it is when its kind is
/// an intake error (a limit, the memory budget, a body): one place for every
/// intake route's refusals.
pub(crate) fn counted(telemetry: &IntakeTelemetry, refused: ApiError) -> ApiError {
    if let ErrorKind::Intake(error) = refused.kind {
        telemetry.emit(IntakeEvent::PayloadRejected {
            error,
            detail: &refused.message,
        });
    }
    refused
}
