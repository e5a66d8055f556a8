//! What one poll saw of a cluster. Plain data: the tracker turns it into engine
//! observations, the collector keeps the last one for group state and members.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use streamsight_core::Millis;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub cluster: String,
    #[serde(rename = "at_ms")]
    pub at: Millis,
    /// Metadata answered: `topics` is the cluster's full list.
    pub metadata_ok: bool,
    /// The cluster's id, as Metadata (v2 on) gives it: what tracers send as
    /// `kafka_cluster_id` for this cluster.
    #[serde(default)]
    pub cluster_id: Option<String>,
    /// Every broker listed its groups: a group not among them is gone.
    pub groups_listed: bool,
    /// A refresh between polls of some partitions and groups only (the
    /// lagging ones): what it lacks is not gone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// Why groups were not listed, when they were not: what a user told
    /// "no groups" should read.
    #[serde(default)]
    pub unlisted_why: Option<String>,
    pub brokers: Vec<BrokerStatus>,
    pub topics: Vec<TopicSnapshot>,
    pub groups: Vec<GroupSnapshot>,
    /// Record batches read at lagging groups' committed offsets: when those
    /// records were written.
    #[serde(default)]
    pub batches: Vec<BatchTime>,
    /// Each topic's time retention in ms (-1: nothing deleted by time), as
    /// its settings say (DescribeConfigs); topics unread are absent.
    #[serde(default)]
    pub retention: BTreeMap<String, i64>,
    /// Requests sent during this poll, connection handshakes included.
    pub requests: u64,
    pub errors: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BrokerStatus {
    pub id: i32,
    pub addr: String,
    /// A connection to it was open at the end of the poll.
    pub reachable: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopicSnapshot {
    pub name: String,
    /// The topic id (Metadata v10+): a new id under the same name is a recreation.
    pub id: Option<String>,
    pub error_code: i16,
    pub partitions: Vec<PartitionSnapshot>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartitionSnapshot {
    pub partition: i32,
    pub leader: i32,
    pub log_start: Option<i64>,
    pub end: Option<i64>,
    /// The last stable offset (ListOffsets `read_committed`): below `end` while a
    /// transaction is open.
    #[serde(default)]
    pub stable: Option<i64>,
    /// The open transaction holding `stable` below `end`, as the brokers name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_transaction: Option<TransactionHolder>,
    /// Why the offsets are missing.
    pub error: Option<String>,
}

/// The producer whose open transaction holds a partition's last stable
/// offset: DescribeProducers on the leader (the producer whose transaction
/// starts at that offset), and where its coordinator answered,
/// ListTransactions and DescribeTransactions (its id and timeout).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransactionHolder {
    pub producer_id: i64,
    pub producer_epoch: i32,
    pub first_offset: i64,
    pub transactional_id: Option<String>,
    pub timeout_ms: Option<i32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupSnapshot {
    pub name: String,
    /// Kafka's group state (`Stable`, `Empty`, `PreparingRebalance`, `Dead`...).
    pub state: Option<String>,
    pub protocol_type: Option<String>,
    /// ListGroups v5's group type: `classic`, `consumer` (KIP-848, Kafka 4's
    /// default), `share` (KIP-932), ...; `None` where the broker does not say.
    #[serde(default)]
    pub group_type: Option<String>,
    /// The group epoch (ConsumerGroupDescribe), for `consumer` groups.
    #[serde(default)]
    pub group_epoch: Option<i32>,
    /// Found by ListGroups (rather than only asked for by name).
    pub listed: bool,
    /// A describe (DescribeGroups, ConsumerGroupDescribe) answered for it: its
    /// state and `members` are the broker's word. False, `members` is empty
    /// because nobody knows them (a failed describe: `error` says why; a share
    /// group, which nothing here describes), never because there are none.
    #[serde(default)]
    pub described: bool,
    pub members: Vec<MemberSnapshot>,
    pub offsets: Vec<CommittedOffset>,
    /// A share group's share-partition start offsets (KIP-932's SPSO, from
    /// DescribeShareGroupOffsets): where its in-flight window begins. Not
    /// committed offsets: a share group commits none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub share_starts: Vec<CommittedOffset>,
    /// The broker's own share-group lag per share-partition (KIP-1226,
    /// DescribeShareGroupOffsets v1), in `offset`: records past the start
    /// offset not yet acknowledged. Empty where the broker speaks only v0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub share_lags: Vec<CommittedOffset>,
    /// A streams group's topology and epochs (StreamsGroupDescribe, KIP-1071).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<StreamsSnapshot>,
    pub error: Option<String>,
}

/// A streams group's topology as its coordinator holds it (KIP-1071).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamsSnapshot {
    /// The epoch of the target assignment the members work towards.
    pub assignment_epoch: i32,
    /// `None` until the group's topology is initialised.
    pub topology_epoch: Option<i32>,
    pub subtopologies: Vec<Subtopology>,
}

/// One sub-topology: a task `(id, p)` reads partition `p` of each input.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subtopology {
    pub id: String,
    /// Topics it reads that the application does not make.
    pub source_topics: Vec<String>,
    /// Internal topics it reads: repartition topics another sub-topology writes.
    pub repartition_source_topics: Vec<String>,
    /// Internal topics it writes for another sub-topology to read.
    pub repartition_sink_topics: Vec<String>,
    /// Its state stores' changelogs: written, read only to restore state.
    pub changelog_topics: Vec<String>,
}

impl StreamsSnapshot {
    /// What a topic is to the application: `source`, `repartition` or
    /// `changelog`; `None` for a topic it does not name.
    pub fn role_of(&self, topic: &str) -> Option<&'static str> {
        let named = |topics: &[String]| topics.iter().any(|t| t == topic);
        if self.subtopologies.iter().any(|s| named(&s.changelog_topics)) {
            Some("changelog")
        } else if self
            .subtopologies
            .iter()
            .any(|s| named(&s.repartition_source_topics) || named(&s.repartition_sink_topics))
        {
            Some("repartition")
        } else if self.subtopologies.iter().any(|s| named(&s.source_topics)) {
            Some("source")
        } else {
            None
        }
    }

    /// The topics a task of sub-topology `id` reads.
    pub fn inputs_of(&self, id: &str) -> Vec<&str> {
        self.subtopologies
            .iter()
            .filter(|s| s.id == id)
            .flat_map(|s| s.source_topics.iter().chain(&s.repartition_source_topics))
            .map(String::as_str)
            .collect()
    }
}

/// A streams member's tasks by kind: (sub-topology id, partitions).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamsTasks {
    /// The Kafka Streams instance the member is a thread of.
    pub process_id: String,
    pub member_epoch: i32,
    pub active: Vec<(String, Vec<i32>)>,
    pub standby: Vec<(String, Vec<i32>)>,
    pub warmup: Vec<(String, Vec<i32>)>,
}

/// A share group's lag on one share-partition: share-group lag (KIP-1226), not
/// consumer lag — many members read a partition at once, out of order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ShareLag {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    /// The share-partition start offset; `None` before the group read any.
    pub start_offset: Option<i64>,
    pub end_offset: Option<i64>,
    /// Records past the start offset not yet acknowledged (KIP-1226), as the
    /// broker counts them; where it cannot (DescribeShareGroupOffsets v0),
    /// records from the start offset to the end. `None` when unknown.
    pub lag: Option<i64>,
    /// The lag is start to end: records acknowledged past the start offset
    /// are counted too (a broker without DescribeShareGroupOffsets v1).
    pub upper_bound: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemberSnapshot {
    pub member_id: String,
    pub client_id: String,
    pub host: String,
    pub assignment: Vec<(String, Vec<i32>)>,
    /// The member epoch (ConsumerGroupDescribe), for `consumer` groups.
    #[serde(default)]
    pub member_epoch: Option<i32>,
    /// A static member's `group.instance.id` (KIP-345): who it is across
    /// restarts, each of which gives it a new member id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    /// A streams member's tasks (its `assignment` is their input partitions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<StreamsTasks>,
}

impl MemberSnapshot {
    /// Who the member is from poll to poll: its static instance id where it
    /// has one (a restart keeps it), else its member id.
    pub fn identity(&self) -> &str {
        self.instance_id.as_deref().unwrap_or(&self.member_id)
    }
}

/// One record batch's offsets and times, from its header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchTime {
    pub topic: String,
    pub partition: i32,
    pub base_offset: i64,
    pub last_offset: i64,
    /// Milliseconds since the epoch: the first record's time and the largest.
    pub first_timestamp: i64,
    pub last_timestamp: i64,
    /// The broker stamped the batch (LogAppendTime) rather than the producer.
    pub log_append_time: bool,
    /// A control batch: a transaction's commit or abort marker, which takes
    /// an offset no reader is ever handed.
    #[serde(default)]
    pub control: bool,
    /// Offsets (from, to) from the one read at (a commit) that hold nothing
    /// a `read_committed` reader is handed: markers and aborted records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<(i64, i64)>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommittedOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

impl Snapshot {
    pub fn new(cluster: &str, at: Millis) -> Self {
        Self {
            cluster: cluster.to_owned(),
            at,
            ..Self::default()
        }
    }

    /// Every share group's lag per share-partition, by this poll: the
    /// broker's own KIP-1226 figure where it gave one (DescribeShareGroupOffsets
    /// v1: records past the start offset not yet acknowledged), else the
    /// records from the start offset to the end offset, an upper bound said
    /// so by [`ShareLag::upper_bound`].
    pub fn share_lag(&self) -> Vec<ShareLag> {
        let ends: std::collections::HashMap<(&str, i32), i64> = self
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .filter_map(move |p| Some(((t.name.as_str(), p.partition), p.end?)))
            })
            .collect();
        let mut out = Vec::new();
        for g in self.groups.iter().filter(|g| g.is_share()) {
            for s in &g.share_starts {
                let end = ends.get(&(s.topic.as_str(), s.partition)).copied();
                // -1: the share-partition is not initialised yet (nothing read).
                let start = (s.offset >= 0).then_some(s.offset);
                let exact = g
                    .share_lags
                    .iter()
                    .find(|l| l.topic == s.topic && l.partition == s.partition)
                    .map(|l| l.offset);
                out.push(ShareLag {
                    group: g.name.clone(),
                    topic: s.topic.clone(),
                    partition: s.partition,
                    start_offset: start,
                    end_offset: end,
                    lag: exact.or_else(|| start.zip(end).map(|(s, e)| (e - s).max(0))),
                    upper_bound: exact.is_none(),
                });
            }
        }
        out
    }

    pub fn partition_count(&self) -> usize {
        self.topics.iter().map(|t| t.partitions.len()).sum()
    }

    /// A group by name, by binary search: `groups` are sorted by name (the poll
    /// and the refresh make them so, [`Snapshot::sort_groups`] mends a snapshot
    /// built otherwise). Asked for every group-partition of a lag answer or a
    /// scrape, so never a scan: at 100,000 groups a scan per row was 5·10¹⁰
    /// comparisons.
    pub fn group(&self, name: &str) -> Option<&GroupSnapshot> {
        let i = self.groups.binary_search_by(|g| g.name.as_str().cmp(name)).ok()?;
        self.groups.get(i)
    }

    /// Sorts `groups` by name where they are not (what [`Snapshot::group`] needs).
    pub fn sort_groups(&mut self) {
        if !self.groups.is_sorted_by(|a, b| a.name <= b.name) {
            self.groups.sort_by(|a, b| a.name.cmp(&b.name));
        }
    }

    /// The member of `group` that owns the partition, for a lag row: `None` when
    /// the group was not described, members unknown when nobody owns it.
    pub fn consumer(&self, group: &str, topic: &str, partition: i32) -> Option<streamsight_core::Consumer> {
        let g = self.group(group)?;
        let member = g.owner(topic, partition);
        Some(streamsight_core::Consumer {
            group_state: g.state.clone(),
            group_type: g.group_type.clone(),
            member_id: member.map(|m| m.member_id.clone()),
            client_id: member.map(|m| m.client_id.clone()),
            host: member.map(|m| m.host.clone()),
        })
    }
}

impl GroupSnapshot {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            state: None,
            protocol_type: None,
            group_type: None,
            group_epoch: None,
            listed: false,
            described: false,
            members: Vec::new(),
            offsets: Vec::new(),
            share_starts: Vec::new(),
            share_lags: Vec::new(),
            streams: None,
            error: None,
        }
    }

    /// A share group, by ListGroups' type.
    pub fn is_share(&self) -> bool {
        self.group_type.as_deref() == Some("share")
    }

    /// The member a partition is assigned to.
    pub fn owner(&self, topic: &str, partition: i32) -> Option<&MemberSnapshot> {
        self.members.iter().find(|m| {
            m.assignment
                .iter()
                .any(|(t, parts)| t == topic && parts.contains(&partition))
        })
    }

    /// Why nothing may act on this group as one without live members, if it
    /// may not: only a describe's positive answer, no member and a state of
    /// `Empty` or `Dead`, lets an act through. A describe that failed, a state
    /// nobody described (ListGroups' "unknown"), a type nothing here describes
    /// (share, streams) is unknown membership, never "no members".
    pub fn not_known_empty(&self) -> Option<String> {
        if !self.described {
            let why = self.error.clone().unwrap_or_else(|| match self.group_type.as_deref() {
                Some(t @ ("share" | "streams")) => format!("a {t} group its coordinator did not describe"),
                _ => "the coordinator did not describe the group".into(),
            });
            return Some(match &self.state {
                Some(s) => format!("{why}; ListGroups says {s:?}, which names no members"),
                None => why,
            });
        }
        if !self.members.is_empty() {
            return None;
        }
        match self.state.as_deref() {
            Some(s) if s.eq_ignore_ascii_case("empty") || s.eq_ignore_ascii_case("dead") => None,
            Some(s) => Some(format!(
                "the broker describes it as {s:?} with no members listed: a state between members, not an empty group"
            )),
            None => Some("the broker described it with no state".into()),
        }
    }

    /// The group exists: listed, or with committed offsets, whatever one API
    /// says of its state (classic DescribeGroups calls a Kafka 4 `consumer`
    /// group dead), or with members the broker does not call dead.
    pub fn exists(&self) -> bool {
        self.listed
            || !self.offsets.is_empty()
            || !self.share_starts.is_empty()
            || (!self.members.is_empty() && self.state.as_deref() != Some("Dead"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_found_by_name_once_sorted() {
        let mut snap = Snapshot::new("c", Millis(0));
        snap.groups = ["b", "c", "a"].iter().map(|n| GroupSnapshot::new(n)).collect();
        snap.sort_groups();
        for name in ["a", "b", "c"] {
            assert_eq!(snap.group(name).map(|g| g.name.as_str()), Some(name));
        }
        assert!(snap.group("d").is_none());
        assert!(snap.group("").is_none());
    }
}
