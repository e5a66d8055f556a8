//! `[serve.alerts]`: the rules, the default set, and where notifications go.

use serde::{Deserialize, Serialize};
use streamsight_core::Status;
use streamsight_core::alerts::rule::{Rule, Signal};
use streamsight_core::anomaly::Direction;

/// `lag_growth` fires only once lag seconds are also above this.
pub const LAG_GROWTH_ABOVE_SECONDS: f64 = 60.0;

/// The rules `serve` runs with no configuration: the seed's incident alerts.
pub fn default_rules() -> Vec<Rule> {
    let mut stall = Rule::new(
        "consumer_stalled",
        Signal::GroupStatus,
        60,
        "{group} ({cluster}) has stopped making progress while messages wait",
    );
    stall.statuses = vec![Status::Stall, Status::Stop];
    let mut loss = Rule::new(
        "data_loss",
        Signal::GroupStatus,
        0,
        "retention deleted messages {group} ({cluster}) had not read",
    );
    loss.statuses = vec![Status::DataLoss];
    let mut lag = Rule::new(
        "lag_seconds_high",
        Signal::GroupLagSeconds,
        60,
        "{group} ({cluster}) is {value} s behind",
    );
    lag.above = Some(300.0);
    let mut silent = Rule::new(
        "service_silent",
        Signal::ServiceReporting,
        0,
        "{service} stopped reporting",
    );
    silent.above = None;
    silent.below = Some(0.5);
    let anomaly = |name: &str, signal, direction, summary: &str| {
        let mut r = Rule::new(name, signal, 0, summary);
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
        {
            let mut r = anomaly(
                "lag_growth",
                Signal::GroupLagSeconds,
                Direction::Rise,
                "lag of {group} ({cluster}) is growing faster than usual: {value} spreads above its baseline",
            );
            // A healthy group committing every 10 s reads 4-5 s of lag that
            // jitters by a second: anomalous against its tight baseline, and
            // no page (the 1-hour soak fired ~20 times an hour without this).
            r.above = Some(LAG_GROWTH_ABOVE_SECONDS);
            r
        },
        anomaly(
            "dlq_spike",
            Signal::DlqVelocity,
            Direction::Rise,
            "dead letters on {topic} ({cluster}) spiked far above their usual rate",
        ),
        {
            let mut r = Rule::new(
                "unread_expiring",
                Signal::RetentionMarginSeconds,
                0,
                "retention deletes messages {group} ({cluster}) has not read in {value} s",
            );
            r.above = None;
            r.below = Some(3600.0);
            r
        },
        Rule::new(
            "partition_not_committing",
            Signal::PartitionsNotCommitting,
            60,
            "{group} ({cluster}) stopped committing {value} partition(s) while its others move",
        ),
        Rule::new(
            "producer_failing",
            Signal::ProducerFailing,
            30,
            "sends to {topic} ({cluster}) are failing: the records that failed are not in Kafka, so no lag counts them",
        ),
        {
            let mut r = Rule::new(
                "rebalance_storm",
                Signal::RebalancesPerHour,
                0,
                "{group} ({cluster}) rebalanced {value} times in the last hour: the group page says why",
            );
            r.above = Some((streamsight_poller::membership::STORM_PER_HOUR - 1) as f64);
            r
        },
        Rule::new(
            "transaction_open",
            Signal::OpenTransactionSeconds,
            0,
            "an open transaction has held {topic} partition {partition} ({cluster}) for {value} s: read_committed consumers cannot pass it",
        ),
        stall,
        loss,
        Rule::new(
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

impl NotifierConfig {
    /// The receiver as it may be shown and logged: scheme and host, never the
    /// path (a Slack webhook's, a generic receiver's, holds its secret).
    pub fn shown_url(&self) -> String {
        self.url.split('/').take(3).collect::<Vec<_>>().join("/")
    }
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
    pub rules: Vec<Rule>,
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
    /// The defaults (unless turned off) with the configured rules replacing
    /// those of the same name; disabled ones still in, to be overlaid again.
    pub fn base_rules(&self) -> Vec<Rule> {
        let defaults = if self.default_rules {
            default_rules()
        } else {
            Vec::new()
        };
        overlay(defaults, &self.rules)
    }

    /// The rules that run with no rule made through the API.
    pub fn effective_rules(&self) -> Vec<Rule> {
        let mut rules = self.base_rules();
        rules.retain(|r| r.enabled);
        rules
    }

    /// Every configured rule within its bounds (checked at start).
    pub fn validate(&self) -> Result<(), String> {
        for r in &self.rules {
            r.validate().map_err(|e| format!("alert rule {:?}: {e}", r.name))?;
        }
        Ok(())
    }
}

/// `over` replacing the rules of `base` of the same name, others appended.
pub fn overlay<'a>(mut base: Vec<Rule>, over: impl IntoIterator<Item = &'a Rule>) -> Vec<Rule> {
    for r in over {
        match base.iter_mut().find(|d| d.name == r.name) {
            Some(d) => *d = r.clone(),
            None => base.push(r.clone()),
        }
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamsight_core::alerts::Condition;

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
