//! Intake: what instrumented clients send, bounded, decoded off the async
//! workers, translated to records and handed to the writer, answered 2xx only
//! once stored. The Datadog-agent-compatible intake ([`dsm`]: Data Streams
//! payloads, `/v0.4` and `/v0.5` traces) and the OTLP listener ([`spans`]:
//! OTLP traces and logs, Fluent Bit's `json_lines`).

pub mod dsm;
pub mod spans;

pub use dsm::{Dates, ENDPOINTS, Translated, router, translate};
