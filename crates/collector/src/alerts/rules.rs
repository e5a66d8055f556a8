//! `[serve.alerts]`: the rules, the default set, and where notifications go.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use streamsight_core::Status;
use streamsight_core::alerts::{Condition, Timing};
use streamsight_core::anomaly::Direction;

/// What a rule watches. Each gives one series per the labels named.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// Per group (cluster, group): the oldest unread message's age, the worst
    /// partition's; unknown while no partition's is known.
    GroupLagSeconds,
    /// Per group: messages behind, summed; unknown while any partition's is.
    GroupLagMessages,
    /// Per group: 1 when its status is one of `statuses`, else 0; unknown while stale.
    GroupStatus,
    /// Per topic (cluster, topic): 1 while its producers' sends are failing, else 0.
    ProducerFailing,
    /// Per (cluster, group, topic): messages found missing (any cause) in windows
    /// reconciled over the last 10 minutes.
    MissingMessages,
    /// Per DLQ topic (cluster, topic): records per second.
    DlqVelocity,
    /// Per probe partition (cluster, topic, partition): 1 unless `ok`.
    ProbeFailing,
    /// Per polled cluster: 1 when the last poll could not read its metadata.
    ClusterUnreachable,
    /// Per service that reported pathway statistics: 1 while it reports; a service
    /// that stops has no value, and its alert goes to `no_data`.
    ServiceReporting,
    /// Per topic (cluster, topic): messages produced per second over the last minute.
    ProduceRate,
    /// Per group (cluster, group): messages consumed per second, from its commits.
    ConsumeRate,
    /// Per group: seconds until retention deletes a message it has not read
    /// (worst partition; unknown until the log start was seen advancing for a minute).
    RetentionMarginSeconds,
    /// Per group: seconds until it catches up at its current consume and produce
    /// rates (worst partition; 1e12 while it falls behind).
    CatchUpSeconds,
    /// Per group: partitions with lag it stopped committing (5 minutes) while
    /// another of its partitions committed within the last minute.
    PartitionsNotCommitting,
}

/// `[[serve.alerts.rules]]`: a threshold on a signal, held for `for`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// Unique; a rule named as a default one replaces it.
    pub name: String,
    pub signal: Signal,
    /// Fires when the value is above this (or below `below`).
    #[serde(default)]
    pub above: Option<f64>,
    #[serde(default)]
    pub below: Option<f64>,
    /// For `group_status`: the statuses that count.
    #[serde(default)]
    pub statuses: Vec<Status>,
    /// Instead of a threshold: fire when the value is anomalous against its own
    /// baseline (`drop`: far below, `rise`: far above); see docs/alerts.md.
    #[serde(default)]
    pub anomaly: Option<Direction>,
    /// Robust spreads from the baseline that count as anomalous (default 4).
    #[serde(default)]
    pub sensitivity: Option<f32>,
    /// How long the condition must hold.
    #[serde(default, rename = "for", with = "humantime_serde")]
    pub for_: Duration,
    /// How long a series may have no value before its alert is `no_data`.
    #[serde(default = "default_no_data_after", with = "humantime_serde")]
    pub no_data_after: Duration,
    /// Glob patterns (`*`) on the series' labels: only matching series count.
    #[serde(default)]
    pub scope: BTreeMap<String, String>,
    /// Added to every alert of the rule (e.g. `severity = "page"`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// `{label}` and `{value}` are replaced.
    #[serde(default)]
    pub summary: String,
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn default_no_data_after() -> Duration {
    Duration::from_secs(300)
}

fn yes() -> bool {
    true
}

impl RuleConfig {
    pub fn condition(&self) -> Condition {
        match (self.above, self.below) {
            (_, Some(b)) => Condition::Below(b),
            (Some(a), None) => Condition::Above(a),
            (None, None) => Condition::Above(0.0),
        }
    }

    pub fn timing(&self) -> Timing {
        let no_data = crate::time_ms(self.no_data_after).max(1);
        Timing {
            for_ms: crate::time_ms(self.for_),
            no_data_after_ms: no_data,
            forget_after_ms: no_data.saturating_mul(12).max(3_600_000),
        }
    }

    fn new(name: &str, signal: Signal, for_secs: u64, summary: &str) -> Self {
        Self {
            name: name.to_owned(),
            signal,
            above: Some(0.0),
            below: None,
            statuses: Vec::new(),
            anomaly: None,
            sensitivity: None,
            for_: Duration::from_secs(for_secs),
            no_data_after: default_no_data_after(),
            scope: BTreeMap::new(),
            labels: BTreeMap::new(),
            summary: summary.to_owned(),
            enabled: true,
        }
    }
}

/// The rules `serve` runs with no configuration: the seed's incident alerts.
pub fn default_rules() -> Vec<RuleConfig> {
    let mut stall = RuleConfig::new(
        "consumer_stalled",
        Signal::GroupStatus,
        60,
        "{group} ({cluster}) has stopped making progress while messages wait",
    );
    stall.statuses = vec![Status::Stall, Status::Stop];
    let mut loss = RuleConfig::new(
        "data_loss",
        Signal::GroupStatus,
        0,
        "retention deleted messages {group} ({cluster}) had not read",
    );
    loss.statuses = vec![Status::DataLoss];
    let mut lag = RuleConfig::new(
        "lag_seconds_high",
        Signal::GroupLagSeconds,
        60,
        "{group} ({cluster}) is {value} s behind",
    );
    lag.above = Some(300.0);
    let mut silent = RuleConfig::new(
        "service_silent",
        Signal::ServiceReporting,
        0,
        "{service} stopped reporting",
    );
    silent.above = None;
    silent.below = Some(0.5);
    let anomaly = |name: &str, signal, direction, summary: &str| {
        let mut r = RuleConfig::new(name, signal, 0, summary);
        r.anomaly = Some(direction);
        r
    };
    vec![
        anomaly(
            "produce_rate_drop",
            Signal::ProduceRate,
            Direction::Drop,
            "produce rate of {topic} ({cluster}) fell far below its usual level",
        ),
        anomaly(
            "consume_rate_drop",
            Signal::ConsumeRate,
            Direction::Drop,
            "{group} ({cluster}) consumes far less than usual",
        ),
        anomaly(
            "lag_growth",
            Signal::GroupLagSeconds,
            Direction::Rise,
            "lag of {group} ({cluster}) is growing faster than usual: {value} spreads above its baseline",
        ),
        anomaly(
            "dlq_spike",
            Signal::DlqVelocity,
            Direction::Rise,
            "dead letters on {topic} ({cluster}) spiked far above their usual rate",
        ),
        {
            let mut r = RuleConfig::new(
                "unread_expiring",
                Signal::RetentionMarginSeconds,
                0,
                "retention deletes messages {group} ({cluster}) has not read in {value} s",
            );
            r.above = None;
            r.below = Some(3600.0);
            r
        },
        RuleConfig::new(
            "partition_not_committing",
            Signal::PartitionsNotCommitting,
            60,
            "{group} ({cluster}) stopped committing {value} partition(s) while its others move",
        ),
        RuleConfig::new(
            "producer_failing",
            Signal::ProducerFailing,
            30,
            "sends to {topic} ({cluster}) are failing: lag reads low until they recover",
        ),
        stall,
        loss,
        RuleConfig::new(
            "messages_missing",
            Signal::MissingMessages,
            0,
            "{value} messages of {topic} went missing for {group} ({cluster}) in 10 minutes (the topic page says why)",
        ),
        lag,
        silent,
    ]
}

/// Where notifications go (`[[serve.alerts.notifiers]]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifierConfig {
    pub url: String,
    #[serde(default)]
    pub format: Format,
    /// `generic`: signs the body (`X-Streamsight-Signature: sha256=HEX`, HMAC-SHA256).
    #[serde(default)]
    pub secret: String,
    /// `pagerduty`: the integration's routing key.
    #[serde(default)]
    pub routing_key: String,
}

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// streamsight's own JSON (signed when a secret is set).
    #[default]
    Generic,
    /// A Slack-compatible incoming webhook (`text`).
    Slack,
    /// PagerDuty Events API v2 (`trigger` / `resolve`).
    Pagerduty,
    /// Prometheus Alertmanager's `POST /api/v2/alerts`.
    Alertmanager,
}

/// `[serve.alerts]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AlertsConfig {
    /// Run the default rules (each can be replaced or disabled by name).
    pub default_rules: bool,
    pub rules: Vec<RuleConfig>,
    pub notifiers: Vec<NotifierConfig>,
    /// Alerts (series) watched at most; beyond, new series are counted, not watched.
    pub max_series: usize,
    /// Series anomaly rules keep a detector for (~600 bytes each) at most.
    pub max_anomaly_series: usize,
}

impl Default for AlertsConfig {
    fn default() -> Self {
        Self {
            default_rules: true,
            rules: Vec::new(),
            notifiers: Vec::new(),
            max_series: 50_000,
            max_anomaly_series: 20_000,
        }
    }
}

impl AlertsConfig {
    /// The rules that run: the defaults (unless turned off) with the configured
    /// ones replacing those of the same name, disabled ones left out.
    pub fn effective_rules(&self) -> Vec<RuleConfig> {
        let mut rules: Vec<RuleConfig> = if self.default_rules {
            default_rules()
        } else {
            Vec::new()
        };
        for r in &self.rules {
            match rules.iter_mut().find(|d| d.name == r.name) {
                Some(d) => *d = r.clone(),
                None => rules.push(r.clone()),
            }
        }
        rules.retain(|r| r.enabled);
        rules
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_rule_replaces_or_disables_a_default_one() {
        let config: AlertsConfig = toml::from_str(
            r#"
            [[rules]]
            name = "lag_seconds_high"
            signal = "group_lag_seconds"
            above = 60
            for = "30s"
            scope = { cluster = "prod-*" }

            [[rules]]
            name = "service_silent"
            signal = "service_reporting"
            enabled = false
            "#,
        )
        .unwrap();
        let rules = config.effective_rules();
        let lag = rules.iter().find(|r| r.name == "lag_seconds_high").unwrap();
        assert_eq!(lag.condition(), Condition::Above(60.0));
        assert_eq!(lag.timing().for_ms, 30_000);
        assert!(rules.iter().all(|r| r.name != "service_silent"));
        assert!(rules.iter().any(|r| r.name == "producer_failing"));
        assert!(toml::from_str::<AlertsConfig>("[[rules]]\nname = \"x\"\nsignal = \"nope\"").is_err());
        assert!(
            toml::from_str::<AlertsConfig>("[[rules]]\nname = \"x\"\nsignal = \"dlq_velocity\"\ntypo = 1").is_err()
        );
    }
}
