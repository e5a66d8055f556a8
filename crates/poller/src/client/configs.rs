//! Topics' time retention, from DescribeConfigs (`retention.ms` and
//! `cleanup.policy`): with the age of the oldest unread record, how long
//! before retention deletes what a group has not read, known before anything
//! is deleted (the log start's pace says so only once it moves). Asked at
//! most every [`REFRESH_MS`] (a topic's settings rarely change), in requests
//! of at most [`PER_REQUEST`] topics, of one broker that speaks it.

use super::*;
use kafka_protocol::messages::DescribeConfigsRequest;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;

/// How often the topics' settings are asked again.
pub(super) const REFRESH_MS: i64 = 60_000;
/// Topics named per DescribeConfigs.
const PER_REQUEST: usize = 500;
/// DescribeConfigs' resource type of a topic.
const TOPIC: i8 = 2;

/// What was last read, and when.
#[derive(Debug, Default)]
pub(super) struct RetentionCache {
    pub(super) at: Option<Millis>,
    /// Every topic asked of, with its time retention when the broker gave
    /// one: a topic it said nothing usable of is not asked again each poll.
    pub(super) by_topic: BTreeMap<String, Option<i64>>,
    /// The brokers failed DescribeConfigs (tansu 0.6.0 lists it among its
    /// APIs and closes the connection when asked): not asked again until then.
    pub(super) refused_until: Option<Millis>,
}

/// How long after a failed DescribeConfigs it is not asked again.
const REFUSED_FOR_MS: i64 = 600_000;

/// A topic's time retention from its settings: `retention.ms` when its
/// cleanup policy deletes, -1 when nothing is deleted by time (compacted
/// only, or `retention.ms=-1`); None when a setting is missing or unreadable.
pub(crate) fn time_retention(retention_ms: Option<&str>, cleanup_policy: Option<&str>) -> Option<i64> {
    let deletes = cleanup_policy?.split(',').any(|p| p.trim() == "delete");
    let ms: i64 = retention_ms?.trim().parse().ok()?;
    Some(if deletes && ms >= 0 { ms } else { -1 })
}

impl ClusterClient {
    /// Every topic's time retention into `snap.retention`: read again when
    /// [`REFRESH_MS`] passed or a topic is new to it; a broker that does not
    /// speak DescribeConfigs leaves it empty.
    pub(super) async fn retention(&mut self, snap: &mut Snapshot) {
        let names: Vec<String> = snap.topics.iter().map(|t| t.name.clone()).collect();
        let fresh = self.retention.at.is_some_and(|t| {
            snap.at.since(t) < REFRESH_MS && names.iter().all(|n| self.retention.by_topic.contains_key(n))
        });
        let refused = self.retention.refused_until.is_some_and(|t| snap.at < t);
        if !fresh && !refused && !names.is_empty() {
            let Some(addr) = self.brokers.values().next().cloned() else {
                return;
            };
            if !self.speaks::<DescribeConfigsRequest>(&addr).await {
                return;
            }
            let mut by_topic = BTreeMap::new();
            for chunk in names.chunks(PER_REQUEST) {
                let request = DescribeConfigsRequest::default().with_resources(
                    chunk
                        .iter()
                        .map(|name| {
                            DescribeConfigsResource::default()
                                .with_resource_type(TOPIC)
                                .with_resource_name(StrBytes::from_string(name.clone()))
                                .with_configuration_keys(Some(vec![
                                    StrBytes::from_static_str("retention.ms"),
                                    StrBytes::from_static_str("cleanup.policy"),
                                ]))
                        })
                        .collect(),
                );
                match self.any_broker(&request).await {
                    Ok(answer) => {
                        for r in answer.results.iter().filter(|r| r.error_code == 0) {
                            let value = |key: &str| {
                                r.configs
                                    .iter()
                                    .find(|c| c.name.as_str() == key)
                                    .and_then(|c| c.value.as_ref())
                                    .map(|v| v.as_str())
                            };
                            let ms = time_retention(value("retention.ms"), value("cleanup.policy"));
                            by_topic.insert(r.resource_name.to_string(), ms);
                        }
                        for name in chunk {
                            by_topic.entry(name.clone()).or_insert(None);
                        }
                    }
                    Err(e) => {
                        // Not the cluster's failure: retention is then told by
                        // the log start's pace alone. Said, not counted.
                        tracing::warn!(
                            cluster = %self.config.name,
                            error = %e,
                            "the brokers did not answer DescribeConfigs: topics' retention is not read for 10 minutes"
                        );
                        self.retention.refused_until = Some(Millis(snap.at.0.saturating_add(REFUSED_FOR_MS)));
                        return;
                    }
                }
            }
            self.retention = RetentionCache {
                at: Some(snap.at),
                by_topic,
                refused_until: None,
            };
        }
        snap.retention = names
            .into_iter()
            .filter_map(|name| {
                self.retention
                    .by_topic
                    .get(&name)
                    .copied()
                    .flatten()
                    .map(|ms| (name, ms))
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::time_retention;

    #[test]
    fn time_retention_is_the_settings_when_the_policy_deletes() {
        assert_eq!(time_retention(Some("604800000"), Some("delete")), Some(604_800_000));
        assert_eq!(time_retention(Some("20000"), Some("compact,delete")), Some(20_000));
        assert_eq!(time_retention(Some("20000"), Some("compact")), Some(-1));
        assert_eq!(time_retention(Some("-1"), Some("delete")), Some(-1));
        assert_eq!(time_retention(None, Some("delete")), None);
        assert_eq!(time_retention(Some("soon"), Some("delete")), None);
        assert_eq!(time_retention(Some("1"), None), None);
    }
}
