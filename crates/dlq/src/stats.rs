//! What the monitor learned of DLQ topics: pure, fed by the Kafka side.

use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use streamsight_wire::dlq::Provenance;

/// Recent records kept per DLQ topic, and the longest payload preview.
pub const RECENT_KEPT: usize = 100;
pub const PREVIEW_BYTES: usize = 256;
/// The span a velocity is measured over: letters written in the last minute.
pub const VELOCITY_WINDOW_MS: i64 = 60_000;
/// Seconds of letters' arrivals kept (a bucket a second): twice the window.
const ARRIVAL_SECONDS_KEPT: i64 = 2 * VELOCITY_WINDOW_MS / 1000;
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
    /// The last refresh: (unix ms, sum of end offsets over partitions).
    end: Option<(i64, i64)>,
    /// The next offset to count per partition: a record below it was counted
    /// already (the consumer was assigned again as DLQs came and went), and
    /// is not counted twice.
    next: BTreeMap<i32, i64>,
    /// Letters read, by the second they were written (their timestamp): the
    /// velocity counts these, not end offsets, which count transactions'
    /// markers and which tansu 0.6.0 reports below the records it serves.
    arrivals: BTreeMap<i64, u64>,
    /// Records offered again and not counted, for the test that says so.
    read_again: u64,
    /// The reasons' counts once the monitor first read up to the brokers' end
    /// offsets: what was there before it watched. Alert rules count from here,
    /// so a restart or a DLQ found with years of letters is not a burst.
    caught_up: Option<BTreeMap<Reason, u64>>,
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
    /// Records offered again (already counted) and not counted.
    pub read_again: u64,
    pub reasons: Vec<(Reason, u64)>,
    /// Each reason's records since the monitor first read the topic to its
    /// end (`None` before): what alert rules count, from 0.
    pub since_caught_up: Option<Vec<(Reason, u64)>>,
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
    /// Counts `record` of `topic` unless its offset was counted already;
    /// whether it was counted.
    pub fn record(&mut self, topic: &str, record: RecentRecord) -> bool {
        let t = self.topics.entry(topic.to_owned()).or_default();
        let next = t.next.entry(record.partition).or_default();
        if record.offset < *next {
            t.read_again += 1;
            return false;
        }
        *next = record.offset.saturating_add(1);
        t.read += 1;
        if let Some(at) = record.timestamp_ms.filter(|&at| at > 0) {
            let second = at.div_euclid(1000);
            *t.arrivals.entry(second).or_default() += 1;
            let newest = t.arrivals.last_key_value().map_or(second, |(&s, _)| s);
            while t
                .arrivals
                .first_key_value()
                .is_some_and(|(&s, _)| s < newest - ARRIVAL_SECONDS_KEPT)
            {
                t.arrivals.pop_first();
            }
        }
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
        true
    }

    /// Where to read `partition` of `topic` from: after the last record counted.
    pub fn next_offset(&self, topic: &str, partition: i32) -> Option<i64> {
        self.topics.get(topic)?.next.get(&partition).copied()
    }

    /// The topic is gone from the cluster: a topic made again under its name
    /// starts at offset 0, and is read from there.
    pub fn forget_positions(&mut self, topic: &str) {
        if let Some(t) = self.topics.get_mut(topic) {
            t.next.clear();
        }
    }

    /// The brokers' (low, high) watermarks of each partition of `topic`: once
    /// every partition was read to its end, the topic is caught up and its
    /// reasons so far are the alert rules' baseline. (An end below what was
    /// counted is no sign the topic was made again: tansu 0.6.0 reports ends
    /// below the records it serves.)
    pub fn watermarks(&mut self, topic: &str, marks: &[(i32, i64, i64)]) {
        let t = self.topics.entry(topic.to_owned()).or_default();
        let mut all_read = true;
        for &(partition, low, high) in marks {
            if high > low && t.next.get(&partition).is_none_or(|&n| n < high) {
                all_read = false;
            }
        }
        if all_read && t.caught_up.is_none() {
            t.caught_up = Some(t.reasons.clone());
        }
    }

    /// The broker's end offsets of a DLQ topic, summed, at `at_ms`.
    pub fn ends(&mut self, topic: &str, at_ms: i64, sum: i64) {
        self.topics.entry(topic.to_owned()).or_default().end = Some((at_ms, sum));
    }

    pub fn report(&self) -> Vec<TopicReport> {
        /// Letters per second written over the minute before the last refresh
        /// (read by then): a burst shows at once and fades within a minute;
        /// letters written before the monitor watched are not a burst.
        fn velocity(t: &TopicStats) -> Option<f64> {
            let (now, _) = t.end?;
            let from = (now - VELOCITY_WINDOW_MS).div_euclid(1000);
            let n: u64 = t.arrivals.range(from + 1..).map(|(_, n)| n).sum();
            Some(n as f64 * 1000.0 / VELOCITY_WINDOW_MS as f64)
        }
        self.topics
            .iter()
            .map(|(name, t)| {
                let velocity = velocity(t);
                let mut reasons: Vec<(Reason, u64)> = t.reasons.iter().map(|(r, n)| (r.clone(), *n)).collect();
                reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                let since_caught_up = t.caught_up.as_ref().map(|base| {
                    t.reasons
                        .iter()
                        .map(|(r, n)| (r.clone(), n.saturating_sub(base.get(r).copied().unwrap_or(0))))
                        .collect()
                });
                TopicReport {
                    dlq_topic: name.clone(),
                    source_topic: t.source_topic.clone(),
                    records: t.end.map(|(_, e)| e),
                    velocity,
                    read: t.read,
                    read_again: t.read_again,
                    reasons,
                    since_caught_up,
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
        assert_eq!((r.records, r.read), (Some(30), 3));
        assert_eq!(r.velocity, Some(0.0), "no letter says when it was written");
        assert_eq!(r.reasons[0].1, 2);
        assert_eq!(r.reasons[0].0.error_class, "schema_violation");
        assert_eq!(
            r.reasons[1].0.source_topic, "orders",
            "from the name when the record says nothing"
        );
        assert_eq!(r.recent.len(), 3);
    }

    #[test]
    fn a_record_offered_again_is_counted_once() {
        let mut s = DlqStats::default();
        s.watch("orders.dlq", Some("orders"));
        for o in [0, 1, 2, 0, 1, 2, 3] {
            s.record("orders.dlq", rec(o, None));
        }
        let r = &s.report()[0];
        assert_eq!((r.read, r.read_again, r.reasons[0].1, r.recent.len()), (4, 3, 4, 4));
        assert_eq!(s.next_offset("orders.dlq", 0), Some(4));
        // Made again under its name: offsets start at 0 and are counted.
        s.forget_positions("orders.dlq");
        assert!(s.record("orders.dlq", rec(0, None)));
    }

    #[test]
    fn rules_count_from_when_the_topic_was_read_to_its_end() {
        let mut s = DlqStats::default();
        let p = |class: &str| Provenance {
            error_class: Some(class.into()),
            convention: Some("streamsight"),
            ..Provenance::default()
        };
        for o in 0..5 {
            s.record("orders.dlq", rec(o, Some(p("Old"))));
        }
        s.watermarks("orders.dlq", &[(0, 0, 9)]);
        assert_eq!(s.report()[0].since_caught_up, None, "4 records still unread");
        for o in 5..9 {
            s.record("orders.dlq", rec(o, Some(p("Old"))));
        }
        s.watermarks("orders.dlq", &[(0, 0, 9)]);
        for o in 9..12 {
            s.record("orders.dlq", rec(o, Some(p("New"))));
        }
        s.record("orders.dlq", rec(12, Some(p("Old"))));
        let mut since = s.report()[0].since_caught_up.clone().unwrap();
        since.sort_by(|a, b| a.0.error_class.cmp(&b.0.error_class));
        let since: Vec<(&str, u64)> = since.iter().map(|(r, n)| (r.error_class.as_str(), *n)).collect();
        assert_eq!(since, [("New", 3), ("Old", 1)]);
    }

    #[test]
    fn velocity_is_letters_written_in_the_last_minute() {
        let mut s = DlqStats::default();
        let at = |offset: i64, ms: i64| RecentRecord {
            timestamp_ms: Some(ms),
            ..rec(offset, None)
        };
        // Letters written long before the monitor watched: no velocity.
        for o in 0..100 {
            s.record("orders.dlq", at(o, 1_000));
        }
        // 0.2 a second for three minutes, then 200 at once.
        let mut o = 100;
        for k in 0..36 {
            s.record("orders.dlq", at(o, 1_000_000 + k * 5_000));
            o += 1;
        }
        s.ends("orders.dlq", 1_180_000, 0);
        let v = s.report()[0].velocity.unwrap();
        assert!((v - 0.2).abs() < 0.02, "{v}");
        for _ in 0..200 {
            s.record("orders.dlq", at(o, 1_181_000));
            o += 1;
        }
        s.ends("orders.dlq", 1_182_000, 0);
        let v = s.report()[0].velocity.unwrap();
        assert!((v - 212.0 / 60.0).abs() < 0.02, "{v}");
        // A minute later the burst has left the window.
        s.ends("orders.dlq", 1_242_000, 0);
        assert_eq!(s.report()[0].velocity, Some(0.0));
        // Bounded: a bucket a second, two minutes of them.
        assert!(s.topics["orders.dlq"].arrivals.len() <= 121);
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
