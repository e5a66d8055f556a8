//! `[serve.journeys]`: the OTLP listener and how many traces are kept.

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;
use streamsight_core::journey::JourneyLimits;

/// `[serve.journeys]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JourneysConfig {
    /// The OTLP/HTTP listener (`/v1/traces`, `/v1/logs`) and Fluent Bit's
    /// `json_lines` (`/ingest/json_lines`); the OTLP/HTTP port by default.
    pub otlp_listen: SocketAddr,
    /// Share of healthy traces kept (every trace with an error, a failed send
    /// or a dead letter is kept).
    pub healthy_share: f64,
    /// How long after its first span a trace is decided (tail sampling).
    #[serde(with = "humantime_serde")]
    pub decision_wait: Duration,
    /// How long a trace nothing was heard of is kept (the log's retention bounds it too).
    #[serde(with = "humantime_serde")]
    pub retention: Duration,
    pub max_traces: usize,
    pub max_spans: usize,
    /// Fields of a Fluent Bit line that may hold its trace id (a flat key or a dotted path).
    pub trace_id_fields: Vec<String>,
    /// Spans or lines in one request, at most.
    pub max_items_per_request: usize,
}

impl Default for JourneysConfig {
    fn default() -> Self {
        let limits = JourneyLimits::default();
        Self {
            otlp_listen: SocketAddr::from(([127, 0, 0, 1], 4318)),
            healthy_share: limits.healthy_share,
            decision_wait: Duration::from_millis(limits.decision_wait_ms as u64),
            retention: Duration::from_millis(limits.retention_ms as u64),
            max_traces: limits.max_traces,
            max_spans: limits.max_spans,
            trace_id_fields: ["trace_id", "dd.trace_id", "traceId"].map(String::from).to_vec(),
            max_items_per_request: 100_000,
        }
    }
}

impl JourneysConfig {
    pub fn limits(&self) -> JourneyLimits {
        JourneyLimits {
            max_traces: self.max_traces,
            max_spans: self.max_spans,
            retention_ms: crate::clock::time_ms(self.retention),
            decision_wait_ms: crate::clock::time_ms(self.decision_wait),
            healthy_share: self.healthy_share,
            ..JourneyLimits::default()
        }
    }
}
