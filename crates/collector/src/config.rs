//! `[serve]`: where the collector listens, stores and how much it accepts.

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;
use streamsight_poller::ClusterConfig;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// The Datadog-agent-compatible intake (tracers' `DD_TRACE_AGENT_URL`).
    pub intake_listen: SocketAddr,
    /// `/api/v1`, `/metrics`, `/healthz`, `/readyz`.
    pub api_listen: SocketAddr,
    /// `sqlite://PATH` (durable) or `memory://`.
    pub storage: String,
    /// Stored records older than this are deleted, and not replayed on start.
    #[serde(with = "humantime_serde")]
    pub retention: Duration,
    /// Largest request body, as sent (compressed).
    pub max_body_bytes: usize,
    /// Largest request body once decompressed.
    pub max_decompressed_bytes: usize,
    /// The cluster of points that do not name one (`kafka_cluster_id`).
    pub default_cluster: String,
    /// The span of traffic the pathway graph and its metrics summarize.
    #[serde(with = "humantime_serde")]
    pub pathway_window: Duration,
    /// How often each group's lag is sampled for its recent history.
    #[serde(with = "humantime_serde")]
    pub history_interval: Duration,
    /// Samples kept per group.
    pub history_samples: usize,
    /// Kafka clusters to poll (`[[serve.clusters]]`): lag and health for every
    /// group, instrumented or not. See `docs/poller.md`.
    pub clusters: Vec<ClusterConfig>,
    /// End-to-end probes (`[[serve.probes]]`): see `docs/drops.md`.
    pub probes: Vec<streamsight_probe::ProbeConfig>,
    /// Where a trace is shown, `{trace_id}` replaced (e.g. your tracing UI's
    /// trace page): DLQ records link to their trace. Empty: no links.
    pub trace_url: String,
    /// Dead-letter queue monitors (`[[serve.dlq]]`): see `docs/dlq.md`.
    pub dlq: Vec<streamsight_dlq::DlqConfig>,
    /// Groups and topics of clusters nobody polls are forgotten after this long
    /// without a word about them (polled clusters expire their own, sooner).
    #[serde(with = "humantime_serde")]
    pub forget_idle_after: Duration,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            intake_listen: SocketAddr::from(([127, 0, 0, 1], 8126)),
            api_listen: SocketAddr::from(([127, 0, 0, 1], 7411)),
            storage: "sqlite://streamsight-data/streamsight.db".into(),
            retention: Duration::from_secs(7 * 24 * 3600),
            max_body_bytes: 16 << 20,
            max_decompressed_bytes: 64 << 20,
            default_cluster: "default".into(),
            pathway_window: Duration::from_secs(300),
            history_interval: Duration::from_secs(10),
            history_samples: 360,
            clusters: Vec::new(),
            probes: Vec::new(),
            dlq: Vec::new(),
            trace_url: String::new(),
            forget_idle_after: Duration::from_secs(7 * 24 * 3600),
        }
    }
}
