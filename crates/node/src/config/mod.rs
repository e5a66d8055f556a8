//! `[serve]`: where the collector listens, stores and how much it accepts.

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;
use streamsight_poller::ClusterConfig;

pub mod alerts;
pub mod journeys;
pub mod records;
pub mod tls;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// The Datadog-agent-compatible intake (tracers' `DD_TRACE_AGENT_URL`).
    pub intake_listen: SocketAddr,
    /// `/api/v1`, `/metrics`, `/healthz`, `/readyz`.
    pub api_listen: SocketAddr,
    /// TLS on the intake (`[serve.intake_tls]`), with optional client certificates.
    pub intake_tls: Option<tls::ListenerTls>,
    /// TLS on the API (`[serve.api_tls]`).
    pub api_tls: Option<tls::ListenerTls>,
    /// API keys (`streamsight keys create`). While it holds none, nothing asks
    /// for a key; once it does, every request but `/healthz` and `/readyz` must
    /// carry `Authorization: Bearer KEY` with a scope that allows it. Read again
    /// on SIGHUP and when it changes.
    pub keys_file: std::path::PathBuf,
    /// Intake requests without a key belong to this tenant: for Datadog tracers,
    /// which cannot send one. Unset: the intake needs a key like the API.
    pub intake_tenant: Option<String>,
    /// Serve a non-loopback address with no keys at all (refused otherwise).
    pub insecure_no_auth: bool,
    /// More intake listeners, each bound to one tenant (`[[serve.intake_listeners]]`):
    /// for Datadog tracers, which cannot send a key, of several tenants.
    pub intake_listeners: Vec<BoundIntake>,
    /// Gateways whose `X-Scope-OrgID` header names the tenant of a request
    /// without a key (they authenticated the caller). From any other address
    /// the header is ignored.
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Tenants besides `default` (`[[serve.tenants]]`): each has its own engine,
    /// store, pathways, drop accounting, pollers, probes and DLQ monitors, and
    /// sees only its own data; names may repeat across tenants. The top-level
    /// `clusters`, `probes` and `dlq` are the `default` tenant's.
    pub tenants: Vec<TenantConfig>,
    /// `sqlite://PATH` (durable), `kafka://HOSTS/TOPIC` (shared by several
    /// nodes, see `docs/scale-out.md`) or `memory://`.
    pub storage: String,
    /// On a sharded log (`kafka://…?mode=sharded`): where the other nodes reach
    /// this node's API, e.g. `http://10.0.0.5:7411`. Unset: the API's own
    /// address, which must then not be 0.0.0.0 or [::].
    pub advertise_api: Option<String>,
    /// Stored records older than this are deleted, and not replayed on start.
    #[serde(with = "humantime_serde")]
    pub retention: Duration,
    /// Besides `retention`: the oldest stored records are deleted once the store
    /// is larger than this (0: no cap).
    pub max_storage_bytes: u64,
    /// What one request, connection or name may cost (`[serve.limits]`).
    pub limits: Limits,
    /// The cluster of points that do not name one (`kafka_cluster_id`).
    pub default_cluster: String,
    /// The span of traffic the pathway graph and its metrics summarize.
    #[serde(with = "humantime_serde")]
    pub pathway_window: Duration,
    /// How often each group's lag is sampled for its recent history.
    #[serde(with = "humantime_serde")]
    pub history_interval: Duration,
    /// Samples kept per group (1 to 100,000; fewer at large estates: see
    /// `limits.max_history_bytes`).
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
    /// Alert rules and notifiers (`[serve.alerts]`): see `docs/alerts.md`.
    pub alerts: alerts::AlertsConfig,
    /// Message journeys (`[serve.journeys]`): the OTLP listener, sampling and
    /// bounds; see `docs/journeys.md`.
    pub journeys: journeys::JourneysConfig,
    /// Reading a record (`[serve.records]`): sizes shown and fields masked;
    /// see `docs/act.md`.
    pub records: records::RecordsConfig,
    /// What `/metrics` writes (`[serve.metrics]`).
    pub metrics: MetricsConfig,
}

/// `[serve.metrics]`: how fine the Prometheus series are, so that a scrape of
/// a large estate stays bounded (KMinion's and kafka-lag-exporter's choice).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// `partition` (every series), `topic` (per group and topic, no
    /// group-partition or partition series) or `group` (per group only).
    /// A scrape may ask for another with `/metrics?granularity=`.
    pub granularity: Granularity,
}

/// How fine the lag series of `/metrics` are.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    /// Per group and its topics only.
    Group,
    /// Per group and topic; no series per partition.
    Topic,
    /// Every series, per group-partition and partition.
    #[default]
    Partition,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            intake_listen: SocketAddr::from(([127, 0, 0, 1], 8126)),
            api_listen: SocketAddr::from(([127, 0, 0, 1], 7411)),
            intake_tls: None,
            api_tls: None,
            keys_file: "streamsight-data/keys.json".into(),
            intake_tenant: None,
            insecure_no_auth: false,
            trusted_proxies: Vec::new(),
            intake_listeners: Vec::new(),
            tenants: Vec::new(),
            storage: "sqlite://streamsight-data/streamsight.db".into(),
            advertise_api: None,
            retention: Duration::from_secs(7 * 24 * 3600),
            max_storage_bytes: 0,
            limits: Limits::default(),
            default_cluster: "default".into(),
            pathway_window: Duration::from_secs(300),
            history_interval: Duration::from_secs(10),
            history_samples: 360,
            clusters: Vec::new(),
            probes: Vec::new(),
            dlq: Vec::new(),
            trace_url: String::new(),
            forget_idle_after: Duration::from_secs(7 * 24 * 3600),
            alerts: alerts::AlertsConfig::default(),
            journeys: journeys::JourneysConfig::default(),
            records: records::RecordsConfig::default(),
            metrics: MetricsConfig::default(),
        }
    }
}

impl ServeConfig {
    /// How often pages and summaries refresh, in ms: the history interval,
    /// between 1 and 10 s, so that a long interval never leaves a page (or a
    /// summary made before the data arrived) stale for long.
    pub fn refresh_ms(&self) -> i64 {
        crate::clock::time_ms(self.history_interval).clamp(1_000, 10_000)
    }
}

impl ServeConfig {
    /// The defaults with every listener on a free loopback port: for tests,
    /// benchmarks and demos that run beside other collectors.
    pub fn ephemeral() -> Self {
        let free = SocketAddr::from(([127, 0, 0, 1], 0));
        Self {
            intake_listen: free,
            api_listen: free,
            journeys: journeys::JourneysConfig {
                otlp_listen: free,
                ..journeys::JourneysConfig::default()
            },
            ..Self::default()
        }
    }
}

/// `[serve.limits]`: what one request, one connection and one new name may cost.
/// Over a limit a request is refused whole (nothing stored) or a new name is
/// refused and counted (`streamsight_limited_total`); nothing known is evicted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body, as sent (compressed).
    pub max_body_bytes: usize,
    /// What one Data Streams payload may hold, checked while decoding
    /// (`[serve.limits.payload]`; its `max_decompressed_bytes` stops gzip bombs).
    pub payload: streamsight_wire::dsm::payload::Limits,
    /// Open connections per listener; more are answered 503 and closed.
    pub max_connections: usize,
    /// Requests being handled at once per listener; more are answered 503
    /// with `Retry-After` rather than queued.
    pub max_in_flight: usize,
    /// A request's headers must arrive within this, and an idle kept-alive
    /// connection is closed after it.
    #[serde(with = "humantime_serde")]
    pub header_timeout: Duration,
    /// A request's body must arrive, and its answer be ready, within this (408).
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// Records waiting for the writer; appends beyond are answered 503.
    pub max_queued_records: usize,
    /// Records one tenant may send per second, with bursts of ten seconds' worth
    /// (0: no limit). Beyond, 429 with `Retry-After`; each tenant has its own.
    pub ingest_records_per_second: u64,
    /// Bytes pathway statistics may hold in memory; new points beyond are
    /// refused and counted until retention frees room.
    pub max_pathway_bytes: usize,
    /// Services sending pathway statistics; new ones beyond are refused and counted.
    pub max_services: usize,
    /// Bytes the groups' recent histories (the group page's chart) may hold
    /// together: each group keeps `history_samples`, fewer when that many
    /// over every group would pass this (at least 12 each).
    pub max_history_bytes: usize,
    /// Points dated further ahead of the collector's clock than this are refused.
    #[serde(with = "humantime_serde")]
    pub max_clock_skew: Duration,
    /// Host names the API answers besides loopback ones, when bound to loopback:
    /// any other `Host` is refused (a web page cannot rebind its name to us).
    pub api_hosts: Vec<String>,
    /// Memory one request may take to be read and decoded: its body, the body
    /// decompressed, and what decoding builds, each charged before it is
    /// built. Over it, 413 (`request_memory_exceeded`): send less at a time.
    pub request_memory_bytes: usize,
    /// Memory every request in flight may take together, on every listener
    /// and tenant of the process (the default tenant's setting holds). When
    /// it is spent, 503 (`decode_memory_busy`) with `Retry-After`.
    pub decode_memory_bytes: usize,
}

impl Limits {
    /// What cannot serve at all: a request budget of nothing, or a shared
    /// budget smaller than one request's (a large request would be told to
    /// retry, for ever).
    pub fn validate(&self) -> Result<(), String> {
        if self.request_memory_bytes == 0 {
            return Err("request_memory_bytes is 0: no request could be read".into());
        }
        if self.decode_memory_bytes < self.request_memory_bytes {
            return Err(format!(
                "decode_memory_bytes ({}) is less than request_memory_bytes ({}): it is what every \
                 request in flight shares, so it must hold at least one",
                self.decode_memory_bytes, self.request_memory_bytes
            ));
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 16 << 20,
            payload: streamsight_wire::dsm::payload::Limits::default(),
            max_connections: 1024,
            max_in_flight: 256,
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_queued_records: 1_000_000,
            ingest_records_per_second: 0,
            max_pathway_bytes: 256 << 20,
            max_services: 10_000,
            max_history_bytes: 128 << 20,
            max_clock_skew: Duration::from_secs(600),
            api_hosts: Vec::new(),
            request_memory_bytes: 48 << 20,
            decode_memory_bytes: 192 << 20,
        }
    }
}

/// `[[serve.tenants]]`: one team's part of a shared collector.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// 1 to 64 of `a-z`, `0-9`, `-`, `_`; its keys name it (`keys create --tenant`).
    pub name: String,
    #[serde(default)]
    pub clusters: Vec<ClusterConfig>,
    #[serde(default)]
    pub probes: Vec<streamsight_probe::ProbeConfig>,
    #[serde(default)]
    pub dlq: Vec<streamsight_dlq::DlqConfig>,
}

/// The implicit tenant: everything when no tenants are configured.
pub const DEFAULT_TENANT: &str = "default";

impl ServeConfig {
    /// Whether other collectors share this one's log (`kafka://`): they know
    /// only what is in it.
    pub fn log_is_shared(&self) -> bool {
        self.storage.starts_with("kafka://")
    }

    /// Whether this node holds only some of the shared log's shards
    /// (`kafka://…?mode=sharded`): queries then ask the other nodes.
    pub fn log_is_sharded(&self) -> bool {
        self.log_is_shared() && streamsight_store::KafkaUrl::parse(&self.storage).is_ok_and(|url| url.sharded)
    }

    /// Whether `topic` is one of this collector's own log topics (the
    /// `kafka://…/TOPIC` log and the topics named after it): never acted on.
    pub fn is_log_topic(&self, topic: &str) -> bool {
        streamsight_store::KafkaUrl::parse(&self.storage).is_ok_and(|url| {
            topic == url.topic
                || topic
                    .strip_prefix(url.topic.as_str())
                    .is_some_and(|rest| rest.starts_with('-'))
        })
    }

    /// Every tenant's own configuration, `default` first: the shared settings
    /// with that tenant's clusters, probes and DLQ monitors and its own store.
    pub fn per_tenant(&self) -> Result<Vec<(String, ServeConfig)>, String> {
        let mut out = vec![(
            DEFAULT_TENANT.to_owned(),
            ServeConfig {
                tenants: Vec::new(),
                ..self.clone()
            },
        )];
        for t in &self.tenants {
            let valid = (1..=64).contains(&t.name.len())
                && t.name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
            if !valid {
                return Err(format!("tenant name {:?} is not 1-64 of a-z, 0-9, - and _", t.name));
            }
            if out.iter().any(|(n, _)| *n == t.name) {
                return Err(format!("tenant {:?} is configured twice", t.name));
            }
            let config = ServeConfig {
                storage: tenant_storage(&self.storage, &t.name),
                clusters: t.clusters.clone(),
                probes: t.probes.clone(),
                dlq: t.dlq.clone(),
                tenants: Vec::new(),
                ..self.clone()
            };
            out.push((t.name.clone(), config));
        }
        for (name, config) in &mut out {
            config.reach_clusters().map_err(|e| {
                if name == DEFAULT_TENANT {
                    e
                } else {
                    format!("tenant {name:?}: {e}")
                }
            })?;
        }
        Ok(out)
    }

    /// Probes and DLQ monitors that name a cluster (`cluster = "NAME"`)
    /// reach it as its poller does: its bootstrap where theirs is empty, its
    /// security settings unless their `client` sets `security.protocol`.
    /// Without either a bootstrap or a cluster, or naming an unknown one, the
    /// configuration is refused, saying which.
    pub fn reach_clusters(&mut self) -> Result<(), String> {
        let clusters = &self.clusters;
        let reach = |what: &str,
                     name: &str,
                     cluster: &Option<String>,
                     bootstrap: &mut String,
                     client: &mut std::collections::BTreeMap<String, String>|
         -> Result<(), String> {
            let Some(cluster) = cluster else {
                if bootstrap.is_empty() {
                    return Err(format!(
                        "{what} {name:?}: set bootstrap, or cluster to one of [[serve.clusters]]"
                    ));
                }
                return Ok(());
            };
            let Some(c) = clusters.iter().find(|c| c.name == *cluster) else {
                return Err(format!(
                    "{what} {name:?}: cluster {cluster:?} is not among [[serve.clusters]] ({})",
                    clusters.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
                ));
            };
            if bootstrap.is_empty() {
                *bootstrap = c.bootstrap.join(",");
            }
            if !client.contains_key("security.protocol") {
                for (k, v) in c.librdkafka_security().map_err(|e| format!("{what} {name:?}: {e}"))? {
                    client.entry(k.to_owned()).or_insert(v);
                }
            }
            Ok(())
        };
        for p in &mut self.probes {
            reach("probe", &p.name, &p.cluster, &mut p.bootstrap, &mut p.client)?;
        }
        for d in &mut self.dlq {
            reach("DLQ monitor", &d.name, &d.cluster, &mut d.bootstrap, &mut d.client)?;
        }
        Ok(())
    }
}

/// A tenant's store beside the default one: `sqlite://dir/x.db` becomes
/// `sqlite://dir/tenants/NAME.db`, `kafka://hosts/log?q` becomes
/// `kafka://hosts/log-NAME?q&create=true` (a tenant's topic is named by the
/// configuration, not typed, and is made the first time the tenant is
/// served); `memory://` stays.
fn tenant_storage(storage: &str, tenant: &str) -> String {
    if storage.starts_with("kafka://") {
        return match storage.split_once('?') {
            Some((log, query)) => format!("{log}-{tenant}?{query}&create=true"),
            None => format!("{storage}-{tenant}?create=true"),
        };
    }
    match storage.strip_prefix("sqlite://") {
        Some(path) => {
            let dir = std::path::Path::new(path).parent().unwrap_or(std::path::Path::new(""));
            format!(
                "sqlite://{}",
                dir.join("tenants").join(format!("{tenant}.db")).display()
            )
        }
        None => storage.to_owned(),
    }
}

/// An intake listener whose every request belongs to one tenant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundIntake {
    /// `HOST:PORT`, or `unix:PATH` for a Unix socket (created; an old one removed).
    pub listen: String,
    pub tenant: String,
}

#[cfg(test)]
mod tests {
    use super::Limits;

    #[test]
    fn memory_limits_that_could_not_serve_are_refused() {
        assert_eq!(Limits::default().validate(), Ok(()));
        let none = Limits {
            request_memory_bytes: 0,
            ..Limits::default()
        };
        assert!(none.validate().unwrap_err().contains("request_memory_bytes is 0"));
        let smaller = Limits {
            decode_memory_bytes: 1 << 20,
            ..Limits::default()
        };
        assert!(smaller.validate().unwrap_err().contains("must hold at least one"));
    }

    use super::{ServeConfig, tenant_storage};

    #[test]
    fn probes_and_dlq_monitors_reach_a_named_cluster_as_its_poller_does() {
        let mut secured = streamsight_poller::ClusterConfig::new("prod", "k1:9093");
        secured.security_protocol = streamsight_poller::SecurityProtocol::SaslSsl;
        secured.sasl = Some(streamsight_poller::sasl::SaslConfig {
            mechanism: streamsight_poller::sasl::Mechanism::ScramSha512,
            username: "alice".into(),
            password: "secret".into(),
        });
        let mut config = ServeConfig {
            clusters: vec![secured],
            ..ServeConfig::default()
        };
        let mut dlq = streamsight_dlq::DlqConfig::new("letters", "");
        dlq.cluster = Some("prod".into());
        let mut probe = streamsight_probe::ProbeConfig::new("probe", "other:9092");
        probe.cluster = Some("prod".into());
        probe.client.insert("security.protocol".into(), "plaintext".into());
        config.dlq.push(dlq);
        config.probes.push(probe);
        config.reach_clusters().unwrap();
        let d = &config.dlq[0];
        assert_eq!(d.bootstrap, "k1:9093");
        assert_eq!(
            (
                d.client["security.protocol"].as_str(),
                d.client["sasl.mechanism"].as_str(),
                d.client["sasl.password"].as_str()
            ),
            ("sasl_ssl", "SCRAM-SHA-512", "secret")
        );
        // Its own bootstrap and security settings are kept.
        let p = &config.probes[0];
        assert_eq!((p.bootstrap.as_str(), p.client.len()), ("other:9092", 1));
        // An unknown cluster, or nothing to reach, is refused, saying which.
        config.dlq[0].cluster = Some("staging".into());
        let err = config.reach_clusters().unwrap_err();
        assert!(
            err.contains("DLQ monitor \"letters\": cluster \"staging\" is not among [[serve.clusters]] (prod)"),
            "{err}"
        );
        config.dlq[0] = streamsight_dlq::DlqConfig::new("letters", "");
        let err = config.reach_clusters().unwrap_err();
        assert!(err.contains("set bootstrap, or cluster"), "{err}");
    }

    #[test]
    fn each_tenant_has_a_store_of_its_own() {
        assert_eq!(tenant_storage("sqlite://d/x.db", "acme"), "sqlite://d/tenants/acme.db");
        assert_eq!(
            tenant_storage("kafka://a:9092/log", "acme"),
            "kafka://a:9092/log-acme?create=true"
        );
        assert_eq!(
            tenant_storage("kafka://a:9092,b:9092/log?partitions=6", "acme"),
            "kafka://a:9092,b:9092/log-acme?partitions=6&create=true"
        );
        assert_eq!(tenant_storage("memory://", "acme"), "memory://");
    }
}
