//! Dead-letter redrive: the selected dead letters of a DLQ topic produced
//! back to their source topic (or another), their key, value and headers kept,
//! the DLQ's provenance headers replaced by a `streamsight-redrive` header, by
//! an idempotent producer at a bounded rate. Never twice: every batch is
//! claimed in the collector's log before it is sent and recorded sent after
//! (the ledger, [`streamsight_core::redrive`]); a run that finds letters a
//! crashed one claimed reads their destinations for that header first.

mod context;
pub mod run;
mod scan;
mod settle;

pub use context::{Counts, Run, Status};
pub use run::Running;

use crate::ActError;
use crate::record::reader_config;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Message};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use streamsight_core::redrive::{Destination, DlqTopic, LetterState};
use streamsight_node::Shared;
use streamsight_poller::ClusterConfig;
use streamsight_wire::dlq::Provenance;

/// Dead letters one run may select.
pub const MAX_SELECTED: u64 = 100_000;
/// Records of a DLQ read to select them.
pub const MAX_SCANNED: u64 = 5_000_000;
/// Records of the destinations read to settle letters a crashed run claimed.
pub const MAX_VERIFIED: u64 = 5_000_000;
/// Letters a dry run lists one by one (all are counted).
pub const LISTED: usize = 1_000;
/// Letters named one by one in a request (the dashboard's selection).
pub const MAX_NAMED: usize = 1_000;
/// Records per second, unless told; and the most that may be asked.
pub const DEFAULT_RATE: u32 = 1_000;
pub const MAX_RATE: u32 = 100_000;

/// Which dead letters, and where to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// Only these DLQ partitions (none: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<i32>,
    /// Only these letters, (partition, offset).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub letters: Vec<Letter>,
    /// Only letters whose error class or stage is this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Only letters dead-lettered at or after (unix ms) ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_ms: Option<i64>,
    /// ... and before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_ms: Option<i64>,
    /// Only DLQ offsets in this range (inclusive), in each partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offsets: Option<OffsetRange>,
    /// Send here instead of each letter's source topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_topic: Option<String>,
    /// Records per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<u32>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Letter {
    pub partition: i32,
    pub offset: i64,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OffsetRange {
    pub first: i64,
    pub last: i64,
}

impl std::str::FromStr for OffsetRange {
    type Err = String;

    /// `A-B` (inclusive), or one offset.
    fn from_str(s: &str) -> Result<Self, String> {
        let num = |t: &str| {
            t.trim()
                .parse::<i64>()
                .ok()
                .filter(|o| *o >= 0)
                .ok_or_else(|| format!("{t:?} is not an offset (in {s:?}; give A-B)"))
        };
        let (first, last) = match s.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(s)?, num(s)?),
        };
        if first > last {
            return Err(format!("{s:?}: the first offset is past the last"));
        }
        Ok(OffsetRange { first, last })
    }
}

impl Selection {
    /// What the selection names, in the CLI's words, when it names anything
    /// (a reason, letters, offsets, times): matching nothing of those is the
    /// user's mistake, said; an unnamed selection of an empty DLQ is not.
    pub fn named(&self) -> Option<String> {
        let mut named = Vec::new();
        if let Some(r) = &self.reason {
            named.push(format!("--reason {r}"));
        }
        if !self.letters.is_empty() {
            let letters: Vec<String> = self
                .letters
                .iter()
                .map(|l| format!("{}:{}", l.partition, l.offset))
                .collect();
            named.push(format!("--letter {}", letters.join(" --letter ")));
        }
        if let Some(o) = self.offsets {
            named.push(format!("--offsets {}-{}", o.first, o.last));
        }
        if let Some(t) = self.from_ms {
            named.push(format!("--from {}", streamsight_core::Millis(t).iso()));
        }
        if let Some(t) = self.to_ms {
            named.push(format!("--to {}", streamsight_core::Millis(t).iso()));
        }
        (!named.is_empty()).then(|| named.join(" "))
    }

    /// Bounds every name and count before anything is asked of a broker.
    pub fn check(&self, dlq: &str) -> Result<(), ActError> {
        let bad = |why: String| Err(ActError::BadRequest(why));
        let name = |t: &str| !t.is_empty() && t.len() <= crate::reset::MAX_NAME_BYTES;
        if !name(dlq) {
            return bad(format!("a DLQ topic is 1 to {} bytes", crate::reset::MAX_NAME_BYTES));
        }
        if self.to_topic.as_deref().is_some_and(|t| !name(t)) {
            return bad(format!("--to-topic is 1 to {} bytes", crate::reset::MAX_NAME_BYTES));
        }
        if self.to_topic.as_deref() == Some(dlq) {
            return bad(format!("{dlq} is the DLQ itself: redrive it to another topic"));
        }
        if self.letters.len() > MAX_NAMED || self.partitions.len() > MAX_NAMED {
            return bad(format!(
                "at most {MAX_NAMED} letters and {MAX_NAMED} partitions are named"
            ));
        }
        if self.partitions.iter().any(|p| *p < 0) || self.letters.iter().any(|l| l.partition < 0 || l.offset < 0) {
            return bad("partitions and offsets are 0 or more".into());
        }
        if self.reason.as_deref().is_some_and(|r| r.is_empty() || r.len() > 1_024) {
            return bad("a reason is 1 to 1024 bytes".into());
        }
        if let (Some(f), Some(t)) = (self.from_ms, self.to_ms)
            && f > t
        {
            return bad("--from is after --to".into());
        }
        if self.offsets.is_some_and(|o| o.first < 0 || o.first > o.last) {
            return bad("an offset range is A-B with 0 <= A <= B".into());
        }
        if self.rate.is_some_and(|r| r == 0 || r > MAX_RATE) {
            return bad(format!("a rate is 1 to {MAX_RATE} records per second"));
        }
        Ok(())
    }

    fn rate(&self) -> u32 {
        self.rate.unwrap_or(DEFAULT_RATE)
    }

    /// Whether the dead letter `m` is one this selection takes.
    fn takes(&self, m: &BorrowedMessage<'_>, provenance: Option<&Provenance>) -> bool {
        let (p, o) = (m.partition(), m.offset());
        if !self.letters.is_empty() && !self.letters.iter().any(|l| l.partition == p && l.offset == o) {
            return false;
        }
        if self.offsets.is_some_and(|r| o < r.first || o > r.last) {
            return false;
        }
        let t = m.timestamp().to_millis();
        if self.from_ms.is_some_and(|f| t.is_none_or(|t| t < f)) || self.to_ms.is_some_and(|e| t.is_none_or(|t| t >= e))
        {
            return false;
        }
        if let Some(reason) = &self.reason {
            let p = provenance;
            let is = |v: Option<&String>| v.is_some_and(|v| v == reason);
            if !p.is_some_and(|p| is(p.error_class.as_ref()) || is(p.stage.as_ref())) {
                return false;
            }
        }
        true
    }
}

/// One selected dead letter, as a dry run lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedLetter {
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
    pub error_class: Option<String>,
    pub stage: Option<String>,
    /// Where it goes; `None`: nowhere known (no provenance names a source,
    /// the DLQ's name does not, and no `--to-topic`).
    pub to_topic: Option<String>,
    /// The source partition when it goes back to its source topic; `None`:
    /// the producer's partitioner chooses (by key).
    pub to_partition: Option<i32>,
    /// `send`, `sent` (by an earlier redrive: `sent_to`), `in_flight` (a
    /// crashed run's: checked before anything is sent) or `no_destination`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_to: Option<Destination>,
}

/// What a redrive would do (or did).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub cluster: String,
    pub dlq: String,
    pub selection: Selection,
    /// DLQ records read.
    pub scanned: u64,
    pub selected: u64,
    pub to_send: u64,
    pub already_sent: u64,
    pub in_flight: u64,
    pub no_destination: u64,
    /// Letters to send, per destination topic.
    pub by_topic: BTreeMap<String, u64>,
    /// The first [`LISTED`] selected letters.
    pub letters: Vec<PlannedLetter>,
}

/// Distinct reasons said when a selection matches nothing.
const MAX_REASONS_SAID: usize = 20;

/// Why a selection that named something matched nothing, with what is there:
/// the offsets each partition holds and the reasons the letters read carry.
pub(super) fn nothing_matched(
    dlq: &str,
    named: &str,
    held: &[(i32, i64, i64)],
    reasons: &BTreeMap<String, u64>,
) -> String {
    let holds: Vec<String> = held
        .iter()
        .map(|&(p, low, high)| {
            if high > low {
                format!("{p}:{low}-{}", high - 1)
            } else {
                format!("{p}: empty")
            }
        })
        .collect();
    let mut said = format!(
        "no dead letter of {dlq} matches {named}; it holds {}",
        if holds.is_empty() {
            "nothing".into()
        } else {
            holds.join(", ")
        }
    );
    if !reasons.is_empty() {
        let mut by_count: Vec<(&String, &u64)> = reasons.iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let list: Vec<String> = by_count.iter().map(|(r, n)| format!("{r} ×{n}")).collect();
        said.push_str(&format!(
            "; reasons of the letters read: {} (a reason matches an error class or a stage exactly, case included)",
            list.join(", ")
        ));
    }
    said
}

/// Where a letter goes: `--to-topic`, else the source its provenance names,
/// else the one its DLQ's name points at (`orders.dlq`: `orders`).
fn destination(selection: &Selection, dlq: &str, p: Option<&Provenance>) -> (Option<String>, Option<i32>) {
    if let Some(t) = &selection.to_topic {
        return (Some(t.clone()), None);
    }
    if let Some(t) = p.and_then(|p| p.source_topic.clone()) {
        return (Some(t), p.and_then(|p| p.source_partition));
    }
    (streamsight_wire::dlq::source_of_dlq_name(dlq).map(str::to_owned), None)
}

/// The topics letters may go to, and their partition counts.
fn partition_counts(cluster: &ClusterConfig, topics: &BTreeSet<String>) -> Result<HashMap<String, i32>, ActError> {
    let broker = |e: rdkafka::error::KafkaError| ActError::Broker(format!("cluster {}: {e}", cluster.name));
    let consumer: BaseConsumer = reader_config(cluster, "streamsight-redrive")?
        .create()
        .map_err(broker)?;
    let mut out = HashMap::new();
    for t in topics {
        let meta = consumer
            .fetch_metadata(Some(t), cluster.request_timeout)
            .map_err(broker)?;
        let n = meta
            .topics()
            .iter()
            .find(|m| m.name() == t && m.error().is_none())
            .map_or(0, |m| m.partitions().len());
        if n == 0 {
            return Err(ActError::UnknownTopic(format!(
                "cluster {} has no topic {t} to redrive to",
                cluster.name
            )));
        }
        out.insert(t.clone(), i32::try_from(n).unwrap_or(i32::MAX));
    }
    Ok(out)
}

/// A dry run: what would be sent where, nothing sent. Blocking.
pub fn plan(shared: &Shared, cluster: &ClusterConfig, dlq: &str, selection: &Selection) -> Result<Plan, ActError> {
    selection.check(dlq)?;
    let of = DlqTopic {
        cluster: cluster.name.clone(),
        dlq: dlq.to_owned(),
    };
    let mut plan = Plan {
        cluster: cluster.name.clone(),
        dlq: dlq.to_owned(),
        selection: selection.clone(),
        ..Plan::default()
    };
    // The reasons the letters read carry, for a selection that matches none.
    let mut reasons: BTreeMap<String, u64> = BTreeMap::new();
    let scanned = scan::scan(cluster, dlq, selection, |m, provenance| {
        for r in provenance
            .into_iter()
            .flat_map(|p| [&p.error_class, &p.stage])
            .flatten()
        {
            if reasons.len() < MAX_REASONS_SAID || reasons.contains_key(r) {
                *reasons.entry(r.clone()).or_default() += 1;
            }
        }
        if !selection.takes(m, provenance) {
            return Ok(true);
        }
        plan.selected += 1;
        if plan.selected > MAX_SELECTED {
            return Err(ActError::BadRequest(format!(
                "more than {MAX_SELECTED} dead letters selected: narrow the selection (--offsets, --from, --reason)"
            )));
        }
        let (to_topic, to_partition) = destination(selection, dlq, provenance);
        let known = shared.redrives.view().state(&of, m.partition(), m.offset()).cloned();
        let (status, sent_to) = match (known, &to_topic) {
            (Some(LetterState::Sent { to, .. }), _) => {
                plan.already_sent += 1;
                ("sent", Some(to))
            }
            (Some(LetterState::InFlight { .. }), _) => {
                plan.in_flight += 1;
                ("in_flight", None)
            }
            (None, None) => {
                plan.no_destination += 1;
                ("no_destination", None)
            }
            (None, Some(t)) => {
                plan.to_send += 1;
                *plan.by_topic.entry(t.clone()).or_default() += 1;
                ("send", None)
            }
        };
        if plan.letters.len() < LISTED {
            plan.letters.push(PlannedLetter {
                partition: m.partition(),
                offset: m.offset(),
                timestamp_ms: m.timestamp().to_millis(),
                error_class: provenance.and_then(|p| p.error_class.clone()),
                stage: provenance.and_then(|p| p.stage.clone()),
                to_topic,
                to_partition,
                status: status.to_owned(),
                sent_to,
            });
        }
        Ok(true)
    })?;
    plan.scanned = scanned.records;
    if plan.selected == 0
        && let Some(named) = selection.named()
    {
        return Err(ActError::NotFound(nothing_matched(
            dlq,
            &named,
            &scanned.held,
            &reasons,
        )));
    }
    if let Some(t) = plan.by_topic.keys().find(|t| shared.config.is_log_topic(t)) {
        return Err(ActError::Refused(format!(
            "{t} is this collector's own log: nothing is redriven into it"
        )));
    }
    let counts = partition_counts(cluster, &plan.by_topic.keys().cloned().collect())?;
    for l in &mut plan.letters {
        if let (Some(t), Some(p)) = (&l.to_topic, l.to_partition)
            && counts.get(t).is_some_and(|n| p >= *n)
        {
            l.to_partition = None;
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_ranges_and_selections_are_bounded() {
        assert_eq!("3-9".parse::<OffsetRange>().unwrap(), OffsetRange { first: 3, last: 9 });
        assert_eq!("4".parse::<OffsetRange>().unwrap(), OffsetRange { first: 4, last: 4 });
        for bad in ["9-3", "a-b", "-1", ""] {
            assert!(bad.parse::<OffsetRange>().is_err(), "{bad}");
        }
        let ok = Selection::default();
        assert!(ok.check("orders.dlq").is_ok());
        let into_itself = Selection {
            to_topic: Some("orders.dlq".into()),
            ..Selection::default()
        };
        assert!(into_itself.check("orders.dlq").is_err());
        let fast = Selection {
            rate: Some(MAX_RATE + 1),
            ..Selection::default()
        };
        assert!(fast.check("orders.dlq").is_err());
        let backwards = Selection {
            from_ms: Some(2),
            to_ms: Some(1),
            ..Selection::default()
        };
        assert!(backwards.check("orders.dlq").is_err());
        assert!(Selection::default().check("").is_err());
    }

    #[test]
    fn letters_go_back_where_their_provenance_says() {
        let p = Provenance {
            source_topic: Some("payments".into()),
            source_partition: Some(2),
            ..Provenance::default()
        };
        let none = Selection::default();
        assert_eq!(
            destination(&none, "orders.dlq", Some(&p)),
            (Some("payments".into()), Some(2))
        );
        assert_eq!(destination(&none, "orders.dlq", None), (Some("orders".into()), None));
        assert_eq!(destination(&none, "failures", None), (None, None));
        let to = Selection {
            to_topic: Some("retry".into()),
            ..Selection::default()
        };
        assert_eq!(destination(&to, "orders.dlq", Some(&p)), (Some("retry".into()), None));
    }
}
