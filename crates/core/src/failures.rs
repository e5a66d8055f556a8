//! Failed sends per topic by error: what "producers are failing" means, in counts
//! the dashboard and alerts show. Bounded: at most `max_topics` topics (a new one
//! beyond that is counted as refused, never evicting a known one) and
//! `max_errors` distinct error names per topic (the rest are counted as "other").

use crate::time::Millis;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Longest error name kept; longer names are cut (at a character boundary).
pub const MAX_ERROR_BYTES: usize = 64;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TopicFailures {
    pub total: u64,
    pub by_error: BTreeMap<String, u64>,
    /// Partitions named by the failures (a send that never got one is not here).
    pub partitions: Vec<i32>,
    #[serde(rename = "first_at_ms")]
    pub first_at: Millis,
    #[serde(rename = "last_at_ms")]
    pub last_at: Millis,
    /// A few trace ids of failed records, newest last.
    pub trace_ids: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct SendFailures {
    topics: BTreeMap<(String, String), TopicFailures>,
    max_topics: usize,
    max_errors: usize,
    pub refused: u64,
}

const PARTITIONS_KEPT: usize = 64;
const TRACE_IDS_KEPT: usize = 5;

impl Default for SendFailures {
    fn default() -> Self {
        Self::new(10_000, 16)
    }
}

impl SendFailures {
    /// The failures of the topics `keep` accepts, by (cluster, topic).
    pub fn export(&self, keep: &dyn Fn(&str) -> bool) -> Vec<((String, String), TopicFailures)> {
        let kept = self.topics.iter().filter(|((_, topic), _)| keep(topic));
        kept.map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Takes in exported failures, within `max_topics`.
    pub fn import(&mut self, topics: Vec<((String, String), TopicFailures)>) {
        for (key, failures) in topics {
            if !self.topics.contains_key(&key) && self.topics.len() >= self.max_topics {
                self.refused = self.refused.saturating_add(1);
                continue;
            }
            self.topics.insert(key, failures);
        }
    }

    pub fn new(max_topics: usize, max_errors: usize) -> Self {
        Self {
            topics: BTreeMap::new(),
            max_topics,
            max_errors: max_errors.max(1),
            refused: 0,
        }
    }

    /// Counts `count` failed sends of `topic` (on `partition` when one was chosen) at `at`.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        cluster: &str,
        topic: &str,
        partition: Option<i32>,
        error: &str,
        count: u64,
        at: Millis,
        trace_ids: &[String],
    ) {
        let key = (cluster.to_owned(), topic.to_owned());
        if !self.topics.contains_key(&key) && self.topics.len() >= self.max_topics {
            self.refused = self.refused.saturating_add(1);
            return;
        }
        let t = self.topics.entry(key).or_insert_with(|| TopicFailures {
            first_at: at,
            last_at: at,
            ..TopicFailures::default()
        });
        t.total = t.total.saturating_add(count);
        t.first_at = t.first_at.min(at);
        t.last_at = t.last_at.max(at);
        let mut name = if error.is_empty() { "unknown" } else { error };
        if name.len() > MAX_ERROR_BYTES {
            let mut cut = MAX_ERROR_BYTES;
            while !name.is_char_boundary(cut) {
                cut -= 1;
            }
            name = &name[..cut];
        }
        let name = if t.by_error.contains_key(name) || t.by_error.len() + 1 < self.max_errors {
            name
        } else {
            "other"
        };
        let n = t.by_error.entry(name.to_owned()).or_default();
        *n = n.saturating_add(count);
        if let Some(p) = partition
            && !t.partitions.contains(&p)
            && t.partitions.len() < PARTITIONS_KEPT
        {
            t.partitions.push(p);
            t.partitions.sort_unstable();
        }
        for id in trace_ids {
            if t.trace_ids.len() == TRACE_IDS_KEPT {
                t.trace_ids.remove(0);
            }
            t.trace_ids.push(id.clone());
        }
    }

    /// Topics with failures since `since`, by (cluster, topic).
    pub fn since(&self, since: Millis) -> impl Iterator<Item = (&(String, String), &TopicFailures)> {
        self.topics.iter().filter(move |(_, t)| t.last_at >= since)
    }

    pub fn get(&self, cluster: &str, topic: &str) -> Option<&TopicFailures> {
        self.topics.get(&(cluster.to_owned(), topic.to_owned()))
    }

    /// Forgets topics whose last failure is older than `before`.
    pub fn expire(&mut self, before: Millis) {
        self.topics.retain(|_, t| t.last_at >= before);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_error_and_bounds_names_errors_and_topics() {
        let mut f = SendFailures::new(2, 3);
        f.record(
            "c",
            "orders",
            Some(1),
            "MessageSizeTooLarge",
            2,
            Millis(10),
            &["t1".into()],
        );
        f.record("c", "orders", None, "NotLeaderForPartition", 1, Millis(20), &[]);
        f.record("c", "orders", Some(0), &"x".repeat(500), 1, Millis(30), &[]);
        f.record("c", "orders", Some(0), "Yet another", 4, Millis(40), &[]);
        let t = f.get("c", "orders").unwrap();
        assert_eq!(t.total, 8);
        assert_eq!(t.by_error["MessageSizeTooLarge"], 2);
        assert_eq!(t.by_error["other"], 5, "{:?}", t.by_error);
        assert_eq!(t.by_error.len(), 3);
        assert_eq!(t.partitions, vec![0, 1]);
        assert_eq!((t.first_at, t.last_at), (Millis(10), Millis(40)));
        f.record("c", "payments", None, "é".repeat(100).as_str(), 1, Millis(50), &[]);
        assert!(
            f.get("c", "payments")
                .unwrap()
                .by_error
                .keys()
                .all(|k| k.len() <= MAX_ERROR_BYTES)
        );
        f.record("c", "third", None, "e", 1, Millis(50), &[]);
        assert_eq!(f.refused, 1);
        assert!(f.get("c", "third").is_none());
        assert_eq!(f.since(Millis(45)).count(), 1);
        f.expire(Millis(45));
        assert!(f.get("c", "orders").is_none());
    }
}
