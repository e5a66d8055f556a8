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
    /// `plaintext` or `sasl_plaintext`; TLS (`ssl`, `sasl_ssl`) is refused at
    /// startup rather than failing at the first poll.
    #[serde(default)]
    pub security_protocol: SecurityProtocol,
    /// Credentials for `sasl_plaintext`.
    #[serde(default)]
    pub sasl: Option<crate::client::sasl::SaslConfig>,
    #[serde(default = "default_poll_interval", with = "humantime_serde")]
    pub poll_interval: Duration,
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

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ClusterConfigError {
    #[error("cluster {cluster:?}: no bootstrap servers")]
    NoBootstrap { cluster: String },
    #[error("cluster {cluster:?}: bootstrap server {server:?} is not host:port")]
    BadBootstrap { cluster: String, server: String },
    #[error("cluster {cluster:?}: security_protocol {protocol:?} is not supported yet (plaintext, sasl_plaintext)")]
    UnsupportedSecurity {
        cluster: String,
        protocol: SecurityProtocol,
    },
    #[error("cluster {cluster:?}: security_protocol {protocol:?} {why}")]
    SaslMismatch {
        cluster: String,
        protocol: SecurityProtocol,
        why: &'static str,
    },
    #[error("cluster {cluster:?}: poll_interval must be at least 100ms")]
    PollTooFast { cluster: String },
    #[error("cluster name {0:?} is used twice")]
    Duplicate(String),
}

fn default_client_id() -> String {
    "streamsight-poller".into()
}
fn default_poll_interval() -> Duration {
    Duration::from_secs(10)
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
            poll_interval: default_poll_interval(),
            request_timeout: default_request_timeout(),
            forget_after: default_forget_after(),
            groups: Vec::new(),
            include_internal_topics: false,
        }
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
        match (protocol, &self.sasl) {
            (SecurityProtocol::Plaintext, None) | (SecurityProtocol::SaslPlaintext, Some(_)) => {}
            (SecurityProtocol::Plaintext, Some(_)) => {
                return Err(ClusterConfigError::SaslMismatch {
                    cluster,
                    protocol,
                    why: "does not use the [sasl] credentials given: set sasl_plaintext",
                });
            }
            (SecurityProtocol::SaslPlaintext, None) => {
                return Err(ClusterConfigError::SaslMismatch {
                    cluster,
                    protocol,
                    why: "needs [sasl] mechanism, username and password",
                });
            }
            (SecurityProtocol::Ssl | SecurityProtocol::SaslSsl, _) => {
                return Err(ClusterConfigError::UnsupportedSecurity { cluster, protocol });
            }
        }
        if self.poll_interval < Duration::from_millis(100) {
            return Err(ClusterConfigError::PollTooFast { cluster });
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
            Err(ClusterConfigError::UnsupportedSecurity { .. })
        ));
        let twice = [ClusterConfig::new("a", "h:1"), ClusterConfig::new("a", "h:2")];
        assert_eq!(validate_all(&twice), Err(ClusterConfigError::Duplicate("a".into())));
    }

    #[test]
    fn unknown_keys_are_refused() {
        let toml_like = serde_json::json!({"name": "a", "bootstrap": ["h:1"], "pol_interval": "1s"});
        assert!(serde_json::from_value::<ClusterConfig>(toml_like).is_err());
    }
}
