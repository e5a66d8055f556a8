//! Datadog Data Streams Monitoring payloads (reference.md §3).

pub mod backlog;
pub mod payload;
pub mod sketch;
