//! Message journeys: spans and log lines from OTLP clients, Datadog tracers and
//! Fluent Bit, kept in the log and indexed by the core ([`streamsight_core::journey`]);
//! a journey joins them with the collector's own facts (dead letters, failed
//! sends, each group's position, drop accounting) into a path and a verdict.

pub mod api;
pub mod service;
pub mod view;

pub use service::{JourneyService, of};
pub use streamsight_node::config::journeys::JourneysConfig;
pub use view::{JourneyView, housekeep, view, view_of};
