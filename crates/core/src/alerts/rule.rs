//! What a rule is: the signal it watches, its condition, timing, scope and
//! words. Bounded, since rules also come from the network.

use crate::alerts::{Condition, Timing};
use crate::anomaly::Direction;
use crate::model::Status;
use crate::time::duration_ms;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

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
    /// Per (cluster, group, topic): the oldest unread message's age, worst
    /// partition of the topic; unknown while no partition's is known.
    TopicLagSeconds,
    /// Per (cluster, group, topic): messages behind (`aggregate`: `sum` by
    /// default, or `max` for the worst partition); unknown while any partition's is.
    TopicLagMessages,
    /// Per (cluster, group, topic, partition): the oldest unread message's age.
    /// A series per group-partition: costly at a million; scope it.
    PartitionLagSeconds,
    /// Per (cluster, group, topic, partition): messages behind.
    PartitionLagMessages,
    /// Per (cluster, topic, error): failed sends per minute (since the last
    /// evaluation; unknown at the first).
    FailedSends,
    /// Per (cluster, group, topic, cause): messages found missing for that cause
    /// in windows reconciled over the last 10 minutes.
    MissingMessagesByCause,
    /// Per (cluster, topic = the DLQ, source_topic, error_class, stage): dead
    /// letters per minute by reason, as the DLQ monitor reads them.
    DeadLetters,
    /// Per (cluster, topic = the source, schema, error_class): records
    /// dead-lettered at validation per minute.
    SchemaViolations,
    /// Per probe partition (cluster, topic, partition): probe records lost per minute.
    ProbeLost,
    /// Per polled partition (cluster, topic, partition): seconds an open
    /// transaction has held the last stable offset below the end offset, once it
    /// has for `open_transaction_after`; 0 while none does; no series where the
    /// last stable offset was never read.
    OpenTransactionSeconds,
    /// Per polled group (cluster, group): rebalances seen in the last hour.
    RebalancesPerHour,
}

impl Signal {
    /// Values that only grow, alerted on as a rate per minute.
    pub fn is_counter(self) -> bool {
        matches!(
            self,
            Signal::FailedSends | Signal::DeadLetters | Signal::SchemaViolations | Signal::ProbeLost
        )
    }

    /// The smallest spread an anomaly rule's detector allows, in the signal's
    /// unit: a steady series does not alarm on a wobble below it. 1 for most;
    /// a DLQ's records per second are small numbers (0.2 a second is busy),
    /// so there it is 0.05 (3 letters a minute).
    pub fn min_spread(self) -> f32 {
        match self {
            Signal::DlqVelocity => 0.05,
            _ => 1.0,
        }
    }

    /// Lag messages summed over partitions unless the rule says `max`.
    pub fn aggregates(self) -> bool {
        matches!(self, Signal::GroupLagMessages | Signal::TopicLagMessages)
    }
}

/// How a lag signal combines a group's (or topic's) partitions.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregate {
    Sum,
    Max,
}

/// A threshold (or an anomaly) on a signal, held for `for`: from the config's
/// `[[serve.alerts.rules]]` or the API, stored in the log when from the API.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
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
    /// With `above` (for `rise`) or `below` (for `drop`), the value must also be
    /// beyond that threshold.
    #[serde(default)]
    pub anomaly: Option<Direction>,
    /// For `group_lag_messages` and `topic_lag_messages`: `sum` (default) or `max`.
    #[serde(default)]
    pub aggregate: Option<Aggregate>,
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

impl Rule {
    pub fn condition(&self) -> Condition {
        match (self.above, self.below) {
            (_, Some(b)) => Condition::Below(b),
            (Some(a), None) => Condition::Above(a),
            (None, None) => Condition::Above(0.0),
        }
    }

    /// Whether a value an anomaly rule found anomalous also passes the rule's
    /// threshold in the watched direction (`above` for `rise`, `below` for
    /// `drop`), when it has one. The detector learns every value; the threshold
    /// only keeps small values from paging: a group at 4 s of lag whose lag
    /// jitters by a second is "anomalous" against a tight baseline, and not news.
    pub fn anomaly_passes_threshold(&self, value: f64) -> bool {
        match self.anomaly {
            Some(Direction::Rise) => self.above.is_none_or(|a| value > a),
            Some(Direction::Drop) => self.below.is_none_or(|b| value < b),
            None => true,
        }
    }

    pub fn timing(&self) -> Timing {
        let no_data = duration_ms(self.no_data_after).max(1);
        Timing {
            for_ms: duration_ms(self.for_),
            no_data_after_ms: no_data,
            forget_after_ms: no_data.saturating_mul(12).max(3_600_000),
        }
    }

    /// A rule firing above 0, held `for_secs`.
    pub fn new(name: &str, signal: Signal, for_secs: u64, summary: &str) -> Self {
        Self {
            name: name.to_owned(),
            signal,
            above: Some(0.0),
            below: None,
            statuses: Vec::new(),
            anomaly: None,
            aggregate: None,
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

/// Bounds on one rule (a rule from the API is refused beyond them; so is a
/// configuration, at start).
pub const MAX_NAME: usize = 128;
pub const MAX_ENTRIES: usize = 16;
pub const MAX_TEXT: usize = 512;
pub const MAX_SUMMARY: usize = 2048;
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("a rule's name is 1 to {MAX_NAME} characters of letters, digits, '_', '-', '.' and ':'")]
    Name,
    #[error("{0}: at most {MAX_ENTRIES} entries, each key and value at most {MAX_TEXT} bytes")]
    Entries(&'static str),
    #[error("the summary is at most {MAX_SUMMARY} bytes")]
    Summary,
    #[error("thresholds and sensitivity must be finite numbers (sensitivity above 0, at most 100)")]
    Number,
    #[error("`for` and `no_data_after` are at most 30 days, and `no_data_after` at least 1 s")]
    Duration,
    #[error("`statuses` is for the group_status signal, and at most {MAX_ENTRIES}")]
    Statuses,
    #[error("`aggregate` is for group_lag_messages and topic_lag_messages (lag seconds are the worst partition's)")]
    Aggregate,
}

impl Rule {
    /// Checks every bound; a rule that passes costs at most a few KiB.
    pub fn validate(&self) -> Result<(), RuleError> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= MAX_NAME
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'));
        if !name_ok {
            return Err(RuleError::Name);
        }
        for (what, map) in [("scope", &self.scope), ("labels", &self.labels)] {
            if map.len() > MAX_ENTRIES || map.iter().any(|(k, v)| k.len() > MAX_TEXT || v.len() > MAX_TEXT) {
                return Err(RuleError::Entries(what));
            }
        }
        if self.summary.len() > MAX_SUMMARY {
            return Err(RuleError::Summary);
        }
        let finite = |x: Option<f64>| x.is_none_or(f64::is_finite);
        let sensitivity_ok = self.sensitivity.is_none_or(|s| s.is_finite() && s > 0.0 && s <= 100.0);
        if !finite(self.above) || !finite(self.below) || !sensitivity_ok {
            return Err(RuleError::Number);
        }
        if self.for_ > MAX_DURATION || self.no_data_after > MAX_DURATION || self.no_data_after < Duration::from_secs(1)
        {
            return Err(RuleError::Duration);
        }
        if self.statuses.len() > MAX_ENTRIES || (!self.statuses.is_empty() && self.signal != Signal::GroupStatus) {
            return Err(RuleError::Statuses);
        }
        if self.aggregate.is_some() && !self.signal.aggregates() {
            return Err(RuleError::Aggregate);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked() {
        let ok = Rule::new("lag_high", Signal::GroupLagSeconds, 60, "{group} behind");
        assert_eq!(ok.validate(), Ok(()));
        let with = |f: &dyn Fn(&mut Rule)| {
            let mut r = ok.clone();
            f(&mut r);
            r.validate()
        };
        assert_eq!(with(&|r| r.name = String::new()), Err(RuleError::Name));
        assert_eq!(with(&|r| r.name = "a b".into()), Err(RuleError::Name));
        assert_eq!(with(&|r| r.name = "x".repeat(129)), Err(RuleError::Name));
        assert_eq!(
            with(&|r| r.scope = (0..17).map(|i| (i.to_string(), "*".into())).collect()),
            Err(RuleError::Entries("scope"))
        );
        assert_eq!(
            with(&|r| r.labels = [("k".into(), "v".repeat(513))].into()),
            Err(RuleError::Entries("labels"))
        );
        assert_eq!(with(&|r| r.summary = "s".repeat(2049)), Err(RuleError::Summary));
        assert_eq!(with(&|r| r.above = Some(f64::NAN)), Err(RuleError::Number));
        assert_eq!(with(&|r| r.sensitivity = Some(0.0)), Err(RuleError::Number));
        assert_eq!(
            with(&|r| r.for_ = Duration::from_secs(31 * 86_400)),
            Err(RuleError::Duration)
        );
        assert_eq!(with(&|r| r.no_data_after = Duration::ZERO), Err(RuleError::Duration));
        assert_eq!(with(&|r| r.statuses = vec![Status::Stall]), Err(RuleError::Statuses));
        assert_eq!(with(&|r| r.aggregate = Some(Aggregate::Sum)), Err(RuleError::Aggregate));
    }

    #[test]
    fn an_anomaly_rule_honours_the_threshold_of_its_direction() {
        let mut rise = Rule::new("lag_growth", Signal::GroupLagSeconds, 0, "");
        rise.anomaly = Some(Direction::Rise);
        rise.above = Some(60.0);
        assert!(!rise.anomaly_passes_threshold(5.0));
        assert!(!rise.anomaly_passes_threshold(60.0));
        assert!(rise.anomaly_passes_threshold(61.0));
        rise.above = None;
        assert!(rise.anomaly_passes_threshold(5.0));
        // A drop rule ignores `above` (Rule::new's 0 would otherwise hide a drop to 0).
        let mut drop = Rule::new("produce_rate_drop", Signal::ProduceRate, 0, "");
        drop.anomaly = Some(Direction::Drop);
        assert!(drop.anomaly_passes_threshold(0.0));
        drop.below = Some(10.0);
        assert!(drop.anomaly_passes_threshold(9.0));
        assert!(!drop.anomaly_passes_threshold(10.0));
    }
}
