//! `[[poller.clusters]]`: which clusters to poll and how.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One cluster to poll.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The name lag is reported under. Use the name tracers send as
    /// `kafka_cluster_id` so that their points and the poller's merge.
    pub name: String,
    /// `host:port` of brokers to start from.
    pub bootstrap: Vec<String>,
    #[serde(default = "default_client_id")]
    pub client_id: String,
    /// `plaintext`, `ssl`, `sasl_plaintext` or `sasl_ssl`, as Kafka names them.
    #[serde(default)]
    pub security_protocol: SecurityProtocol,
    /// Credentials for `sasl_plaintext` and `sasl_ssl`.
    #[serde(default)]
    pub sasl: Option<crate::sasl::SaslConfig>,
    /// Trust for `ssl` and `sasl_ssl` (Mozilla's roots when absent).
    #[serde(default)]
    pub tls: Option<crate::tls::TlsConfig>,
    #[serde(default = "default_poll_interval", with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Between polls, how often the partitions where a group lags are asked
    /// again (their committed and end offsets, and the record time there), so
    /// that lag seconds are this old rather than a poll interval old. At most
    /// 2,000 group-partitions a refresh, taking turns. `0s` turns it off; at
    /// or above `poll_interval` it does nothing.
    #[serde(default = "default_lagging_refresh", with = "humantime_serde")]
    pub lagging_refresh: Duration,
    #[serde(default = "default_request_timeout", with = "humantime_serde")]
    pub request_timeout: Duration,
    /// Groups and topics gone from the cluster this long are forgotten.
    #[serde(default = "default_forget_after", with = "humantime_serde")]
    pub forget_after: Duration,
    /// Groups to ask for even when the brokers cannot list groups.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Poll `__consumer_offsets` and other internal topics too.
    #[serde(default)]
    pub include_internal_topics: bool,
    /// Groups polled: those matching one of these globs (`*` any run);
    /// empty: every group. What a large estate's poll and scrape cost.
    #[serde(default)]
    pub groups_allow: Vec<String>,
    /// Groups never polled, whatever `groups_allow` says (nor asked for when
    /// a client names them).
    #[serde(default)]
    pub groups_deny: Vec<String>,
    /// Topics polled, as `groups_allow`; a group's offsets on other topics
    /// are not read.
    #[serde(default)]
    pub topics_allow: Vec<String>,
    /// Topics never polled.
    #[serde(default)]
    pub topics_deny: Vec<String>,
}

/// Whether `allow` and `deny` keep `name`: deny wins; an empty allow keeps all.
fn keeps(allow: &[String], deny: &[String], name: &str) -> bool {
    let any = |globs: &[String]| globs.iter().any(|g| streamsight_core::glob::matches(g, name));
    !any(deny) && (allow.is_empty() || any(allow))
}

impl ClusterConfig {
    /// librdkafka's properties for reaching this cluster as the poller does
    /// (security protocol, SASL, the CA file): what every librdkafka client
    /// streamsight makes for it shares (actions, probes, DLQ monitors).
    pub fn librdkafka_security(&self) -> Result<Vec<(&'static str, String)>, String> {
        // librdkafka's names are the config's.
        let mut out = vec![("security.protocol", self.security_protocol.as_str().to_owned())];
        if let Some(sasl) = &self.sasl {
            out.push(("sasl.mechanism", sasl.mechanism.name().to_owned()));
            out.push(("sasl.username", sasl.username.clone()));
            out.push(("sasl.password", sasl.password.clone()));
        }
        if let Some(tls) = &self.tls {
            if tls.server_name.is_some() {
                return Err(format!(
                    "cluster {}: librdkafka's clients (actions, probes, DLQ monitors) do not support tls.server_name",
                    self.name
                ));
            }
            if let Some(ca) = &tls.ca_file {
                out.push(("ssl.ca.location", ca.display().to_string()));
            }
        }
        Ok(out)
    }

    /// Whether this cluster's poll covers group `name`.
    pub fn keeps_group(&self, name: &str) -> bool {
        keeps(&self.groups_allow, &self.groups_deny, name)
    }

    /// Whether this cluster's poll covers topic `name`.
    pub fn keeps_topic(&self, name: &str) -> bool {
        keeps(&self.topics_allow, &self.topics_deny, name)
    }
}

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecurityProtocol {
    #[default]
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// As the config writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "plaintext",
            SecurityProtocol::Ssl => "ssl",
            SecurityProtocol::SaslPlaintext => "sasl_plaintext",
            SecurityProtocol::SaslSsl => "sasl_ssl",
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ClusterConfigError {
    #[error("cluster {cluster:?}: no bootstrap servers")]
    NoBootstrap { cluster: String },
    #[error("cluster {cluster:?}: bootstrap server {server:?} is not host:port")]
    BadBootstrap { cluster: String, server: String },
    #[error("cluster {cluster:?}: tls: {why}")]
    Tls { cluster: String, why: String },
    #[error("cluster {cluster:?}: security_protocol {} {why}", protocol.as_str())]
    SecurityMismatch {
        cluster: String,
        protocol: SecurityProtocol,
        why: &'static str,
    },
    #[error("cluster {cluster:?}: poll_interval must be at least 100ms")]
    PollTooFast { cluster: String },
    #[error("cluster {cluster:?}: lagging_refresh must be 0s (off) or at least 100ms")]
    RefreshTooFast { cluster: String },
    #[error("cluster name {0:?} is used twice")]
    Duplicate(String),
}

fn default_client_id() -> String {
    "streamsight-poller".into()
}
fn default_poll_interval() -> Duration {
    Duration::from_secs(10)
}
fn default_lagging_refresh() -> Duration {
    Duration::from_secs(1)
}
fn default_request_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_forget_after() -> Duration {
    Duration::from_secs(600)
}

impl ClusterConfig {
    /// A plaintext cluster with the defaults.
    pub fn new(name: &str, bootstrap: &str) -> Self {
        Self {
            name: name.to_owned(),
            bootstrap: bootstrap
                .split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect(),
            client_id: default_client_id(),
            security_protocol: SecurityProtocol::Plaintext,
            sasl: None,
            tls: None,
            poll_interval: default_poll_interval(),
            lagging_refresh: default_lagging_refresh(),
            request_timeout: default_request_timeout(),
            forget_after: default_forget_after(),
            groups: Vec::new(),
            include_internal_topics: false,
            groups_allow: Vec::new(),
            groups_deny: Vec::new(),
            topics_allow: Vec::new(),
            topics_deny: Vec::new(),
        }
    }

    pub fn uses_tls(&self) -> bool {
        matches!(
            self.security_protocol,
            SecurityProtocol::Ssl | SecurityProtocol::SaslSsl
        )
    }

    pub fn validate(&self) -> Result<(), ClusterConfigError> {
        let cluster = self.name.clone();
        if self.bootstrap.is_empty() {
            return Err(ClusterConfigError::NoBootstrap { cluster });
        }
        for server in &self.bootstrap {
            let port_ok = server
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if !port_ok {
                return Err(ClusterConfigError::BadBootstrap {
                    cluster,
                    server: server.clone(),
                });
            }
        }
        let protocol = self.security_protocol;
        let sasl_wanted = matches!(protocol, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl);
        let mismatch = |why| ClusterConfigError::SecurityMismatch {
            cluster: cluster.clone(),
            protocol,
            why,
        };
        match (sasl_wanted, self.sasl.is_some()) {
            (true, false) => return Err(mismatch("needs [sasl] mechanism, username and password")),
            (false, true) => return Err(mismatch("does not use the [sasl] credentials given")),
            _ => {}
        }
        if self.uses_tls() {
            crate::tls::client_config(&self.tls.clone().unwrap_or_default()).map_err(|why| {
                ClusterConfigError::Tls {
                    cluster: cluster.clone(),
                    why,
                }
            })?;
        } else if self.tls.is_some() {
            return Err(mismatch("does not use the [tls] settings given"));
        }
        if self.poll_interval < Duration::from_millis(100) {
            return Err(ClusterConfigError::PollTooFast { cluster });
        }
        if !self.lagging_refresh.is_zero() && self.lagging_refresh < Duration::from_millis(100) {
            return Err(ClusterConfigError::RefreshTooFast { cluster });
        }
        Ok(())
    }
}

/// Checks every cluster, and that names are unique.
pub fn validate_all(clusters: &[ClusterConfig]) -> Result<(), ClusterConfigError> {
    let mut seen = std::collections::BTreeSet::new();
    for c in clusters {
        c.validate()?;
        if !seen.insert(&c.name) {
            return Err(ClusterConfigError::Duplicate(c.name.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_clusters_are_refused_with_the_reason() {
        assert!(ClusterConfig::new("a", "localhost:9092").validate().is_ok());
        assert!(matches!(
            ClusterConfig::new("a", "").validate(),
            Err(ClusterConfigError::NoBootstrap { .. })
        ));
        assert!(matches!(
            ClusterConfig::new("a", "localhost").validate(),
            Err(ClusterConfigError::BadBootstrap { .. })
        ));
        let mut sasl = ClusterConfig::new("a", "h:1");
        sasl.security_protocol = SecurityProtocol::SaslSsl;
        assert!(matches!(
            sasl.validate(),
            Err(ClusterConfigError::SecurityMismatch { .. })
        ));
        let said = sasl.validate().unwrap_err().to_string();
        assert!(
            said.contains("security_protocol sasl_") && !said.contains("Sasl"),
            "{said}"
        );
        let mut tls = ClusterConfig::new("a", "h:1");
        tls.security_protocol = SecurityProtocol::Ssl;
        tls.tls = Some(crate::tls::TlsConfig {
            ca_file: Some("/nonexistent.pem".into()),
            server_name: None,
        });
        let err = tls.validate().unwrap_err().to_string();
        assert!(err.contains("/nonexistent.pem"), "{err}");
        let mut stray = ClusterConfig::new("a", "h:1");
        stray.tls = Some(crate::tls::TlsConfig::default());
        assert!(matches!(
            stray.validate(),
            Err(ClusterConfigError::SecurityMismatch { .. })
        ));
        let mut hasty = ClusterConfig::new("a", "h:1");
        hasty.lagging_refresh = Duration::from_millis(10);
        assert!(hasty.validate().unwrap_err().to_string().contains("lagging_refresh"));
        hasty.lagging_refresh = Duration::ZERO;
        assert!(hasty.validate().is_ok(), "0s is off");
        let twice = [ClusterConfig::new("a", "h:1"), ClusterConfig::new("a", "h:2")];
        assert_eq!(validate_all(&twice), Err(ClusterConfigError::Duplicate("a".into())));
    }

    #[test]
    fn unknown_keys_are_refused() {
        let toml_like = serde_json::json!({"name": "a", "bootstrap": ["h:1"], "pol_interval": "1s"});
        assert!(serde_json::from_value::<ClusterConfig>(toml_like).is_err());
    }
}
