//! What the monitor learned of DLQ topics: pure, fed by the Kafka side.

use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use streamsight_wire::dlq::Provenance;

/// Recent records kept per DLQ topic, and the longest payload preview.
pub const RECENT_KEPT: usize = 100;
pub const PREVIEW_BYTES: usize = 256;
/// Offset samples kept per topic for velocity.
const SAMPLES_KEPT: usize = 64;
/// Distinct reasons counted per DLQ topic; records with a new reason beyond are
/// counted under one `other` reason, so hostile headers cannot grow the map.
pub const REASONS_KEPT: usize = 1_000;

/// Why records are in a DLQ: counted per (source topic, error class, stage).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Reason {
    pub source_topic: String,
    pub error_class: String,
    pub stage: String,
    /// Which header naming said so.
    pub convention: String,
    /// The schema, for schema violations.
    pub schema: String,
}

/// One DLQ record, for browsing: provenance and a preview, never other headers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecentRecord {
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
    pub provenance: Option<Provenance>,
    /// The first bytes of the value, as text when it is text, else hex.
    pub preview: String,
    pub value_bytes: usize,
}

#[derive(Debug, Default)]
struct TopicStats {
    source_topic: Option<String>,
    reasons: BTreeMap<Reason, u64>,
    read: u64,
    recent: VecDeque<RecentRecord>,
    /// (unix ms, sum of end offsets over partitions).
    ends: VecDeque<(i64, i64)>,
}

#[derive(Debug, Default)]
pub struct DlqStats {
    topics: BTreeMap<String, TopicStats>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TopicReport {
    pub dlq_topic: String,
    /// The topic its name points at, or the one its records name.
    pub source_topic: Option<String>,
    /// Records in the DLQ as the broker counts them (end offsets).
    pub records: Option<i64>,
    /// Records per second over the samples kept; `None` until there are two.
    pub velocity: Option<f64>,
    pub read: u64,
    pub reasons: Vec<(Reason, u64)>,
    pub recent: Vec<RecentRecord>,
}

pub fn preview(value: Option<&[u8]>) -> (String, usize) {
    let v = value.unwrap_or_default();
    (preview_of(v, PREVIEW_BYTES).0, v.len())
}

/// The first `limit` bytes of `v` as text when they are text, else as hex,
/// and whether they are hex.
pub fn preview_of(v: &[u8], limit: usize) -> (String, bool) {
    let head = &v[..v.len().min(limit)];
    match std::str::from_utf8(head) {
        Ok(t) => (t.to_owned(), false),
        // Cut inside a character by the preview limit: still text.
        Err(e) if e.error_len().is_none() => (String::from_utf8_lossy(&head[..e.valid_up_to()]).into_owned(), false),
        Err(_) => (head.iter().map(|b| format!("{b:02x}")).collect(), true),
    }
}

impl DlqStats {
    pub fn watch(&mut self, topic: &str, source: Option<&str>) {
        let t = self.topics.entry(topic.to_owned()).or_default();
        if t.source_topic.is_none() {
            t.source_topic = source.map(str::to_owned);
        }
    }

    pub fn topics(&self) -> impl Iterator<Item = &str> {
        self.topics.keys().map(String::as_str)
    }

    /// A record read from a DLQ topic.
    pub fn record(&mut self, topic: &str, record: RecentRecord) {
        let t = self.topics.entry(topic.to_owned()).or_default();
        t.read += 1;
        let p = record.provenance.as_ref();
        let reason = Reason {
            source_topic: p
                .and_then(|p| p.source_topic.clone())
                .or_else(|| t.source_topic.clone())
                .unwrap_or_else(|| "unknown".into()),
            error_class: p
                .and_then(|p| p.error_class.clone())
                .unwrap_or_else(|| "unknown".into()),
            stage: p.and_then(|p| p.stage.clone()).unwrap_or_else(|| "unknown".into()),
            convention: p.and_then(|p| p.convention).unwrap_or("none").into(),
            schema: p.and_then(|p| p.schema_id.clone()).unwrap_or_default(),
        };
        if t.source_topic.is_none() && reason.source_topic != "unknown" {
            t.source_topic = Some(reason.source_topic.clone());
        }
        let reason = if t.reasons.len() >= REASONS_KEPT && !t.reasons.contains_key(&reason) {
            Reason {
                source_topic: "other".into(),
                error_class: "other".into(),
                stage: "other".into(),
                convention: "other".into(),
                schema: String::new(),
            }
        } else {
            reason
        };
        *t.reasons.entry(reason).or_default() += 1;
        if t.recent.len() == RECENT_KEPT {
            t.recent.pop_front();
        }
        t.recent.push_back(record);
    }

    /// The broker's end offsets of a DLQ topic, summed, at `at_ms`.
    pub fn ends(&mut self, topic: &str, at_ms: i64, sum: i64) {
        let t = self.topics.entry(topic.to_owned()).or_default();
        if t.ends.len() == SAMPLES_KEPT {
            t.ends.pop_front();
        }
        t.ends.push_back((at_ms, sum));
    }

    pub fn report(&self) -> Vec<TopicReport> {
        self.topics
            .iter()
            .map(|(name, t)| {
                let velocity = match (t.ends.front(), t.ends.back()) {
                    (Some(&(t0, e0)), Some(&(t1, e1))) if t1 > t0 => {
                        Some((e1 - e0).max(0) as f64 * 1000.0 / (t1 - t0) as f64)
                    }
                    _ => None,
                };
                let mut reasons: Vec<(Reason, u64)> = t.reasons.iter().map(|(r, n)| (r.clone(), *n)).collect();
                reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                TopicReport {
                    dlq_topic: name.clone(),
                    source_topic: t.source_topic.clone(),
                    records: t.ends.back().map(|&(_, e)| e),
                    velocity,
                    read: t.read,
                    reasons,
                    recent: t.recent.iter().cloned().collect(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(offset: i64, p: Option<Provenance>) -> RecentRecord {
        let (preview, value_bytes) = preview(Some(b"{\"id\":1}"));
        RecentRecord {
            partition: 0,
            offset,
            timestamp_ms: None,
            provenance: p,
            preview,
            value_bytes,
        }
    }

    #[test]
    fn reasons_velocity_and_recent_records() {
        let mut s = DlqStats::default();
        s.watch("orders.dlq", Some("orders"));
        let p = Provenance {
            source_topic: Some("orders".into()),
            error_class: Some("schema_violation".into()),
            stage: Some("validation".into()),
            convention: Some("spring"),
            ..Provenance::default()
        };
        s.record("orders.dlq", rec(0, Some(p.clone())));
        s.record("orders.dlq", rec(1, Some(p)));
        s.record("orders.dlq", rec(2, None));
        s.ends("orders.dlq", 0, 10);
        s.ends("orders.dlq", 10_000, 30);
        let r = &s.report()[0];
        assert_eq!((r.records, r.velocity, r.read), (Some(30), Some(2.0), 3));
        assert_eq!(r.reasons[0].1, 2);
        assert_eq!(r.reasons[0].0.error_class, "schema_violation");
        assert_eq!(
            r.reasons[1].0.source_topic, "orders",
            "from the name when the record says nothing"
        );
        assert_eq!(r.recent.len(), 3);
    }

    #[test]
    fn reasons_per_topic_are_bounded() {
        let mut stats = DlqStats::default();
        for i in 0..REASONS_KEPT + 50 {
            let provenance = Provenance {
                error_class: Some(format!("E{i}")),
                convention: Some("streamsight"),
                ..Provenance::default()
            };
            stats.record(
                "orders.dlq",
                RecentRecord {
                    partition: 0,
                    offset: i as i64,
                    timestamp_ms: None,
                    provenance: Some(provenance),
                    preview: String::new(),
                    value_bytes: 0,
                },
            );
        }
        let t = &stats.topics["orders.dlq"];
        assert_eq!(t.reasons.len(), REASONS_KEPT + 1);
        assert_eq!(t.reasons.values().sum::<u64>(), (REASONS_KEPT + 50) as u64);
    }

    #[test]
    fn previews_are_short_and_binary_is_hex() {
        let (p, n) = preview(Some(&[0xff, 0x00, 0x10]));
        assert_eq!((p.as_str(), n), ("ff0010", 3));
        let long = vec![b'a'; 1000];
        assert_eq!(preview(Some(&long)).0.len(), PREVIEW_BYTES);
    }
}
