//! Who the instrumented service is and where its telemetry goes.

use std::time::Duration;

/// Who the service is and where its telemetry goes. [`SdkConfig::from_env`]
/// reads the variables Datadog tracers read; [`SdkConfig::new`] reads none.
#[derive(Clone, Debug, PartialEq)]
pub struct SdkConfig {
    /// `DD_SERVICE`: part of every pathway hash.
    pub service: String,
    /// `DD_ENV`, "none" when unset (as ddtrace does, so hashes agree).
    pub env: String,
    /// `DD_VERSION`.
    pub version: String,
    /// Java tracers' primary tag; empty elsewhere.
    pub primary_tag: String,
    /// The collector's agent-compatible intake: `DD_TRACE_AGENT_URL`, else
    /// `http://DD_AGENT_HOST:DD_TRACE_AGENT_PORT`, else `http://127.0.0.1:8126`.
    pub collector_url: String,
    /// How often telemetry is shipped; also the bucket width (10 s, as tracers).
    pub flush_interval: Duration,
    /// Distinct topics, partitions, groups and pathways kept per bucket.
    pub max_keys: usize,
    /// Named on produce and commit points, so the collector needs no guessing
    /// (`STREAMSIGHT_KAFKA_CLUSTER_ID`): the cluster's id as its brokers give
    /// it, which a collector polling the cluster maps to its configured name,
    /// or that name itself.
    pub kafka_cluster_id: Option<String>,
    /// Count records per window for drop accounting (`STREAMSIGHT_COUNT_DELIVERIES=false` turns it off).
    pub count_deliveries: bool,
    /// An ingest key for a collector that asks for one (`STREAMSIGHT_API_KEY`):
    /// sent as `Authorization: Bearer`.
    pub api_key: Option<ApiKey>,
}

/// A key, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(pub String);

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl SdkConfig {
    /// The defaults for `service`, **ignoring the environment** (a test's or
    /// an embedder's choice): env `none`, the collector at
    /// `http://127.0.0.1:8126`, a 10 s flush. Use [`SdkConfig::from_env`] to
    /// read `DD_*` and `STREAMSIGHT_*` as tracers do.
    pub fn new(service: impl Into<String>) -> Self {
        Self {
            service: service.into(),
            env: "none".into(),
            version: String::new(),
            primary_tag: String::new(),
            collector_url: "http://127.0.0.1:8126".into(),
            flush_interval: Duration::from_secs(10),
            max_keys: 10_000,
            kafka_cluster_id: None,
            count_deliveries: true,
            api_key: None,
        }
    }

    /// From the Datadog variables services already set, `default_service` when
    /// `DD_SERVICE` is absent: `DD_SERVICE`, `DD_ENV`, `DD_VERSION`,
    /// `DD_TRACE_AGENT_URL` (else `DD_AGENT_HOST` and `DD_TRACE_AGENT_PORT`),
    /// and `STREAMSIGHT_API_KEY`, `STREAMSIGHT_KAFKA_CLUSTER_ID`,
    /// `STREAMSIGHT_COUNT_DELIVERIES`.
    pub fn from_env(default_service: &str) -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let mut c = Self::new(var("DD_SERVICE").unwrap_or_else(|| default_service.to_owned()));
        if var("STREAMSIGHT_COUNT_DELIVERIES").is_some_and(|v| v == "false" || v == "0") {
            c.count_deliveries = false;
        }
        if let Some(env) = var("DD_ENV") {
            c.env = env;
        }
        c.version = var("DD_VERSION").unwrap_or_default();
        c.api_key = var("STREAMSIGHT_API_KEY").map(ApiKey);
        c.kafka_cluster_id = var("STREAMSIGHT_KAFKA_CLUSTER_ID");
        c.collector_url = match (var("DD_TRACE_AGENT_URL"), var("DD_AGENT_HOST")) {
            (Some(url), _) => url,
            (None, Some(host)) => format!(
                "http://{host}:{}",
                var("DD_TRACE_AGENT_PORT").unwrap_or_else(|| "8126".into())
            ),
            (None, None) => c.collector_url,
        };
        c
    }

    pub(crate) fn bucket_ms(&self) -> i64 {
        i64::try_from(self.flush_interval.as_millis()).unwrap_or(10_000).max(1)
    }
}
