//! A Kafka admin client that asks a whole cluster what the poller needs in a
//! few batched requests: one Metadata, ListGroups per broker, DescribeGroups and
//! OffsetFetch per coordinator, two ListOffsets per partition leader.
//!
//! rdkafka's admin API has no batched group offsets (rust-rdkafka#659) and a
//! consumer per group would not scale, so this speaks the protocol itself with
//! the `kafka-protocol` codecs. Versions are negotiated per broker: newer
//! brokers get one OffsetFetch for many groups (v8+) and one FindCoordinator for
//! many keys (v4+); older ones, and librdkafka's mock cluster, one per group,
//! pipelined on one connection.

mod connection;
pub use crate::sasl;
pub use crate::tls;

use crate::config::ClusterConfig;
use crate::snapshot::{
    BrokerStatus, CommittedOffset, GroupSnapshot, MemberSnapshot, PartitionSnapshot, Snapshot, TopicSnapshot,
};
use bytes::Buf;
use connection::Connection;
use futures_util::future::join_all;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, DescribeGroupsRequest, FindCoordinatorRequest, GroupId, ListGroupsRequest,
    ListOffsetsRequest, MetadataRequest, OffsetFetchRequest, TopicName,
    list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
    offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics},
};
use kafka_protocol::protocol::{Decodable, Request, StrBytes};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use streamsight_core::Millis;

/// Brokers of one cluster ever dialled: the largest Kafka clusters have a few
/// hundred; a metadata answer listing more is not believed past this.
const MAX_BROKERS: usize = 1_024;
use tokio_rustls::rustls::ClientConfig;

/// Groups per batched OffsetFetch or DescribeGroups request.
const GROUPS_PER_REQUEST: usize = 100;
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KafkaError {
    #[error("cannot reach broker {broker}: {reason}")]
    Connect { broker: String, reason: String },
    #[error("broker {broker} did not answer in time")]
    Timeout { broker: String },
    #[error("broker {broker} does not support {api}")]
    Unsupported { broker: String, api: &'static str },
    #[error("broker {broker} answered {api} with error code {code}")]
    Broker {
        broker: String,
        api: &'static str,
        code: i16,
    },
    #[error("broker {broker}: {reason}")]
    Protocol { broker: String, reason: String },
    #[error("no broker of cluster {cluster} answered: {reason}")]
    NoBroker { cluster: String, reason: String },
    #[error("broker {broker}: authentication failed: {reason}")]
    Auth { broker: String, reason: String },
    #[error("broker {broker}: tls: {reason}")]
    Tls { broker: String, reason: String },
}

/// Kafka error codes the poller acts on.
mod code {
    pub(super) const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    pub(super) const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub(super) const NOT_COORDINATOR: i16 = 16;
    pub(super) const GROUP_ID_NOT_FOUND: i16 = 69;
}

/// The connections and what was learned of one cluster.
#[derive(Debug)]
pub struct ClusterClient {
    config: ClusterConfig,
    /// Broker id to `host:port`, from the last Metadata answer.
    brokers: BTreeMap<i32, String>,
    connections: HashMap<String, Connection>,
    /// Group to coordinator broker id; dropped when the broker says otherwise.
    coordinators: HashMap<String, i32>,
    /// Requests sent since the client was made, ApiVersions handshakes included.
    requests: u64,
    /// The TLS side, built once; why it could not be, for every connection to say.
    tls: Option<Result<Arc<ClientConfig>, String>>,
    /// The brokers cannot fetch "every topic" of a group (librdkafka's mock echoes
    /// the null list back): name every partition instead.
    name_offset_topics: bool,
}

impl ClusterClient {
    pub fn new(config: ClusterConfig) -> Self {
        let tls = config
            .uses_tls()
            .then(|| tls::client_config(&config.tls.clone().unwrap_or_default()));
        Self {
            tls,
            config,
            brokers: BTreeMap::new(),
            connections: HashMap::new(),
            coordinators: HashMap::new(),
            requests: 0,
            name_offset_topics: false,
        }
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// One poll of the whole cluster at `at`. `extra_groups` are asked for even
    /// when the brokers cannot list groups (librdkafka's mock has no ListGroups).
    /// Never fails: what could not be asked is marked so in the snapshot.
    pub async fn poll(&mut self, at: Millis, extra_groups: &BTreeSet<String>) -> Snapshot {
        let mut snap = Snapshot::new(&self.config.name, at);
        let sent_before = self.requests;
        match self.metadata(&mut snap).await {
            Ok(()) => {
                snap.metadata_ok = true;
                self.offsets(&mut snap).await;
            }
            Err(e) => snap.errors.push(e.to_string()),
        }
        self.groups(&mut snap, extra_groups).await;
        snap.brokers = self
            .brokers
            .iter()
            .map(|(&id, addr)| BrokerStatus {
                id,
                addr: addr.clone(),
                reachable: self.connections.contains_key(addr),
            })
            .collect();
        snap.requests = self.requests - sent_before;
        snap
    }

    async fn connection(&mut self, addr: &str) -> Result<&mut Connection, KafkaError> {
        if !self.connections.contains_key(addr) {
            self.requests += 1;
            let conn = Connection::connect(addr, &self.config, self.tls.as_ref()).await?;
            self.connections.insert(addr.to_owned(), conn);
        }
        self.connections.get_mut(addr).ok_or_else(|| KafkaError::Connect {
            broker: addr.to_owned(),
            reason: "connection lost".into(),
        })
    }

    /// Drops a connection that failed: the next request reconnects.
    fn drop_connection(&mut self, addr: &str) {
        self.connections.remove(addr);
    }

    /// Sends one request to the first broker that answers: known brokers first,
    /// then the bootstrap list.
    async fn any_broker<R: Request>(&mut self, request: &R) -> Result<R::Response, KafkaError> {
        let mut candidates: Vec<String> = self.brokers.values().cloned().collect();
        candidates.extend(self.config.bootstrap.iter().cloned());
        candidates.dedup();
        let mut last = None;
        for addr in candidates {
            self.requests += 1;
            let result = match self.connection(&addr).await {
                Ok(conn) => conn.send(request).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(r) => return Ok(r),
                Err(e) => {
                    self.drop_connection(&addr);
                    last = Some(e);
                }
            }
        }
        Err(KafkaError::NoBroker {
            cluster: self.config.name.clone(),
            reason: last.map_or_else(|| "no bootstrap servers".into(), |e| e.to_string()),
        })
    }

    /// Sends each broker its requests, all brokers at once, each pipelined.
    async fn fan_out<R: Request>(
        &mut self,
        work: Vec<(String, Vec<R>)>,
    ) -> Vec<(String, Result<Vec<R::Response>, KafkaError>)> {
        let (config, tls) = (&self.config, self.tls.as_ref());
        let jobs = work.into_iter().map(|(addr, requests)| {
            let existing = self.connections.remove(&addr);
            self.requests += requests.len() as u64 + u64::from(existing.is_none());
            async move {
                let mut conn = match existing {
                    Some(c) => c,
                    None => match Connection::connect(&addr, config, tls).await {
                        Ok(c) => c,
                        Err(e) => return (addr, None, Err(e)),
                    },
                };
                let result = conn.send_all(&requests).await;
                (addr, Some(conn), result)
            }
        });
        let mut out = Vec::new();
        for (addr, conn, result) in join_all(jobs).await {
            // A connection that failed mid-pipeline is out of step: reconnect next time.
            if let Some(conn) = conn.filter(|_| result.is_ok()) {
                self.connections.insert(addr.clone(), conn);
            }
            out.push((addr, result));
        }
        out
    }

    async fn metadata(&mut self, snap: &mut Snapshot) -> Result<(), KafkaError> {
        // Version 0 names "all topics" with an empty list, later ones with null.
        let all_topics = MetadataRequest::default()
            .with_topics(None)
            .with_allow_auto_topic_creation(false);
        let response = self.any_broker(&all_topics).await?;
        // Only advertised brokers are ever dialled, and only so many of them.
        if response.brokers.len() > MAX_BROKERS {
            tracing::warn!(
                cluster = %self.config.name,
                advertised = response.brokers.len(),
                kept = MAX_BROKERS,
                "metadata advertises more brokers than are ever dialled"
            );
        }
        self.brokers = response
            .brokers
            .iter()
            .take(MAX_BROKERS)
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        let known: std::collections::HashSet<&String> =
            self.brokers.values().chain(self.config.bootstrap.iter()).collect();
        self.connections.retain(|addr, _| known.contains(addr));
        for t in response.topics {
            let Some(name) = t.name else { continue };
            if t.is_internal && !self.config.include_internal_topics {
                continue;
            }
            let mut partitions: Vec<PartitionSnapshot> = t
                .partitions
                .iter()
                .map(|p| PartitionSnapshot {
                    partition: p.partition_index,
                    leader: p.leader_id.0,
                    log_start: None,
                    end: None,
                    error: (p.leader_id.0 < 0).then(|| "no leader".to_owned()),
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            snap.topics.push(TopicSnapshot {
                name: name.0.to_string(),
                id: (!t.topic_id.is_nil()).then(|| t.topic_id.to_string()),
                error_code: t.error_code,
                partitions,
            });
        }
        snap.topics.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(())
    }

    /// Earliest and latest offsets of every partition, two requests per leader.
    async fn offsets(&mut self, snap: &mut Snapshot) {
        let mut by_leader: BTreeMap<i32, BTreeMap<&str, Vec<i32>>> = BTreeMap::new();
        for t in &snap.topics {
            for p in t.partitions.iter().filter(|p| p.leader >= 0) {
                by_leader
                    .entry(p.leader)
                    .or_default()
                    .entry(&t.name)
                    .or_default()
                    .push(p.partition);
            }
        }
        let request = |topics: &BTreeMap<&str, Vec<i32>>, timestamp: i64| {
            ListOffsetsRequest::default().with_replica_id((-1).into()).with_topics(
                topics
                    .iter()
                    .map(|(name, parts)| {
                        ListOffsetsTopic::default()
                            .with_name(TopicName(StrBytes::from_string((*name).to_owned())))
                            .with_partitions(
                                parts
                                    .iter()
                                    .map(|&p| {
                                        ListOffsetsPartition::default()
                                            .with_partition_index(p)
                                            .with_timestamp(timestamp)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
        };
        let mut work = Vec::new();
        let mut unknown_leaders = Vec::new();
        for (leader, topics) in &by_leader {
            match self.brokers.get(leader) {
                Some(addr) => work.push((addr.clone(), vec![request(topics, EARLIEST), request(topics, LATEST)])),
                None => unknown_leaders.push(*leader),
            }
        }
        let results = self.fan_out(work).await;
        let mut found: HashMap<(String, i32), ListedOffsets> = HashMap::new();
        let mut failed_brokers: HashMap<String, String> = HashMap::new();
        for (addr, result) in results {
            match result {
                Ok(answers) => {
                    for (i, answer) in answers.into_iter().enumerate() {
                        for t in answer.topics {
                            for p in t.partitions {
                                let entry = found.entry((t.name.0.to_string(), p.partition_index)).or_default();
                                if p.error_code != 0 {
                                    entry.2 = Some(format!("ListOffsets error code {}", p.error_code));
                                } else if i == 0 {
                                    entry.0 = Some(p.offset);
                                } else {
                                    entry.1 = Some(p.offset);
                                }
                            }
                        }
                    }
                }
                Err(e) => {
                    snap.errors.push(e.to_string());
                    failed_brokers.insert(addr, e.to_string());
                }
            }
        }
        for t in &mut snap.topics {
            for p in &mut t.partitions {
                let leader_addr = self.brokers.get(&p.leader);
                if let Some(reason) = leader_addr.and_then(|a| failed_brokers.get(a)) {
                    p.error = Some(reason.clone());
                } else if unknown_leaders.contains(&p.leader) {
                    p.error = Some(format!("leader {} is not a known broker", p.leader));
                } else if let Some((start, end, error)) = found.remove(&(t.name.clone(), p.partition)) {
                    p.log_start = start.filter(|&o| o >= 0);
                    p.end = end.filter(|&o| o >= 0);
                    p.error = error;
                } else if p.error.is_none() {
                    p.error = Some("leader did not answer for this partition".into());
                }
            }
        }
    }

    async fn groups(&mut self, snap: &mut Snapshot, extra: &BTreeSet<String>) {
        let mut groups: BTreeMap<String, GroupSnapshot> = BTreeMap::new();
        snap.groups_listed = self.list_groups(snap, &mut groups).await;
        for name in extra {
            groups.entry(name.clone()).or_insert_with(|| GroupSnapshot::new(name));
        }
        if groups.is_empty() {
            return;
        }
        self.find_coordinators(groups.keys(), snap).await;
        let mut by_coordinator: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, g) in &mut groups {
            match self.coordinators.get(name).and_then(|id| self.brokers.get(id)) {
                Some(addr) => by_coordinator.entry(addr.clone()).or_default().push(name.clone()),
                None => g.error = Some("no coordinator found".into()),
            }
        }
        self.describe_groups(&by_coordinator, &mut groups, snap).await;
        let decoded = self.fetch_offsets(&by_coordinator, &mut groups, snap).await;
        if !decoded && !self.name_offset_topics {
            self.name_offset_topics = true;
            for g in groups.values_mut() {
                g.error = None;
                g.offsets.clear();
            }
            snap.errors.retain(|e| !e.contains("OffsetFetch"));
            self.fetch_offsets(&by_coordinator, &mut groups, snap).await;
        }
        snap.groups = groups.into_values().collect();
    }

    /// Lists groups on every broker; true when every broker answered, so that a
    /// group missing from the list is known to be gone.
    async fn list_groups(&mut self, snap: &mut Snapshot, groups: &mut BTreeMap<String, GroupSnapshot>) -> bool {
        let addrs: Vec<String> = self.brokers.values().cloned().collect();
        if addrs.is_empty() {
            return false;
        }
        let supported = match self.connection(&addrs[0]).await {
            Ok(c) => c.supports::<ListGroupsRequest>(),
            Err(_) => false,
        };
        if !supported {
            return false;
        }
        let work = addrs
            .into_iter()
            .map(|a| (a, vec![ListGroupsRequest::default()]))
            .collect();
        let mut complete = true;
        for (_, result) in self.fan_out(work).await {
            match result {
                Ok(answers) => {
                    for answer in answers {
                        if answer.error_code != 0 {
                            complete = false;
                            continue;
                        }
                        for g in answer.groups {
                            let name = g.group_id.0.to_string();
                            let entry = groups.entry(name.clone()).or_insert_with(|| GroupSnapshot::new(&name));
                            entry.listed = true;
                            entry.protocol_type = Some(g.protocol_type.to_string()).filter(|s| !s.is_empty());
                            if !g.group_state.is_empty() {
                                entry.state = Some(g.group_state.to_string());
                            }
                        }
                    }
                }
                Err(e) => {
                    complete = false;
                    snap.errors.push(e.to_string());
                }
            }
        }
        complete
    }

    async fn find_coordinators<'a>(&mut self, groups: impl Iterator<Item = &'a String>, snap: &mut Snapshot) {
        let missing: Vec<String> = groups
            .filter(|g| !self.coordinators.contains_key(*g))
            .cloned()
            .collect();
        if missing.is_empty() {
            return;
        }
        let Some(addr) = self.brokers.values().next().cloned() else {
            return;
        };
        let batched = match self.connection(&addr).await {
            Ok(c) => c.version::<FindCoordinatorRequest>().is_some_and(|v| v >= 4),
            Err(e) => {
                snap.errors.push(e.to_string());
                return;
            }
        };
        let requests: Vec<FindCoordinatorRequest> = if batched {
            missing
                .chunks(GROUPS_PER_REQUEST)
                .map(|keys| {
                    FindCoordinatorRequest::default()
                        .with_coordinator_keys(keys.iter().map(|k| StrBytes::from_string(k.clone())).collect())
                })
                .collect()
        } else {
            missing
                .iter()
                .map(|k| FindCoordinatorRequest::default().with_key(StrBytes::from_string(k.clone())))
                .collect()
        };
        for (_, result) in self.fan_out(vec![(addr, requests)]).await {
            match result {
                Ok(answers) => {
                    for (i, a) in answers.into_iter().enumerate() {
                        if batched {
                            for c in a.coordinators.iter().filter(|c| c.error_code == 0) {
                                self.coordinators.insert(c.key.to_string(), c.node_id.0);
                            }
                        } else if a.error_code == 0 {
                            self.coordinators.insert(missing[i].clone(), a.node_id.0);
                        }
                    }
                }
                Err(e) => snap.errors.push(e.to_string()),
            }
        }
    }

    async fn describe_groups(
        &mut self,
        by_coordinator: &BTreeMap<String, Vec<String>>,
        groups: &mut BTreeMap<String, GroupSnapshot>,
        snap: &mut Snapshot,
    ) {
        let mut work = Vec::new();
        for (addr, names) in by_coordinator {
            let supported = match self.connection(addr).await {
                Ok(c) => c.supports::<DescribeGroupsRequest>(),
                Err(_) => false,
            };
            if supported {
                let requests = names
                    .chunks(GROUPS_PER_REQUEST)
                    .map(|chunk| {
                        DescribeGroupsRequest::default().with_groups(
                            chunk
                                .iter()
                                .map(|g| GroupId(StrBytes::from_string(g.clone())))
                                .collect(),
                        )
                    })
                    .collect();
                work.push((addr.clone(), requests));
            }
        }
        for (_, result) in self.fan_out(work).await {
            let answers = match result {
                Ok(a) => a,
                Err(e) => {
                    snap.errors.push(e.to_string());
                    continue;
                }
            };
            for described in answers.into_iter().flat_map(|a| a.groups) {
                let Some(g) = groups.get_mut(described.group_id.0.as_str()) else {
                    continue;
                };
                if described.error_code != 0 {
                    self.forget_coordinator_on(described.error_code, &g.name);
                    g.error = Some(format!("DescribeGroups error code {}", described.error_code));
                    continue;
                }
                g.state = Some(described.group_state.to_string());
                g.protocol_type = Some(described.protocol_type.to_string()).filter(|s| !s.is_empty());
                g.members = described
                    .members
                    .iter()
                    .map(|m| MemberSnapshot {
                        member_id: m.member_id.to_string(),
                        client_id: m.client_id.to_string(),
                        host: m.client_host.to_string(),
                        assignment: decode_assignment(&m.member_assignment),
                    })
                    .collect();
            }
        }
    }

    async fn fetch_offsets(
        &mut self,
        by_coordinator: &BTreeMap<String, Vec<String>>,
        groups: &mut BTreeMap<String, GroupSnapshot>,
        snap: &mut Snapshot,
    ) -> bool {
        let named: Vec<(String, Vec<i32>)> = if self.name_offset_topics {
            snap.topics
                .iter()
                .map(|t| (t.name.clone(), t.partitions.iter().map(|p| p.partition).collect()))
                .collect()
        } else {
            Vec::new()
        };
        let topic = |name: &str| TopicName(StrBytes::from_string(name.to_owned()));
        let mut decoded = true;
        let mut work = Vec::new();
        let mut order: HashMap<String, Vec<Vec<String>>> = HashMap::new();
        for (addr, names) in by_coordinator {
            let version = match self.connection(addr).await {
                Ok(c) => c.version::<OffsetFetchRequest>(),
                Err(e) => {
                    snap.errors.push(e.to_string());
                    for n in names {
                        if let Some(g) = groups.get_mut(n) {
                            g.error = Some(e.to_string());
                        }
                    }
                    continue;
                }
            };
            let Some(version) = version.filter(|&v| v >= 2) else {
                snap.errors.push(format!(
                    "broker {addr} cannot fetch all of a group's offsets (OffsetFetch v2+)"
                ));
                continue;
            };
            let chunks: Vec<Vec<String>> = if version >= 8 {
                names.chunks(GROUPS_PER_REQUEST).map(<[String]>::to_vec).collect()
            } else {
                names.iter().map(|n| vec![n.clone()]).collect()
            };
            let requests = chunks
                .iter()
                .map(|chunk| {
                    if version >= 8 {
                        let topics = self.name_offset_topics.then(|| {
                            named
                                .iter()
                                .map(|(t, parts)| {
                                    OffsetFetchRequestTopics::default()
                                        .with_name(topic(t))
                                        .with_partition_indexes(parts.clone())
                                })
                                .collect()
                        });
                        OffsetFetchRequest::default().with_groups(
                            chunk
                                .iter()
                                .map(|g| {
                                    OffsetFetchRequestGroup::default()
                                        .with_group_id(GroupId(StrBytes::from_string(g.clone())))
                                        .with_topics(topics.clone())
                                })
                                .collect(),
                        )
                    } else {
                        let topics = self.name_offset_topics.then(|| {
                            named
                                .iter()
                                .map(|(t, parts)| {
                                    OffsetFetchRequestTopic::default()
                                        .with_name(topic(t))
                                        .with_partition_indexes(parts.clone())
                                })
                                .collect()
                        });
                        OffsetFetchRequest::default()
                            .with_group_id(GroupId(StrBytes::from_string(chunk[0].clone())))
                            .with_topics(topics)
                    }
                })
                .collect();
            order.insert(addr.clone(), chunks);
            work.push((addr.clone(), requests));
        }
        for (addr, result) in self.fan_out(work).await {
            let answers = match result {
                Ok(a) => a,
                Err(e) => {
                    decoded &= !matches!(e, KafkaError::Protocol { .. });
                    snap.errors.push(e.to_string());
                    for n in by_coordinator.get(&addr).into_iter().flatten() {
                        if let Some(g) = groups.get_mut(n) {
                            g.error = Some(e.to_string());
                        }
                    }
                    continue;
                }
            };
            let chunks = order.remove(&addr).unwrap_or_default();
            for (answer, chunk) in answers.into_iter().zip(chunks) {
                if answer.groups.is_empty() {
                    // One group per request (v2-v7): its answer is the whole response.
                    let Some(g) = groups.get_mut(&chunk[0]) else { continue };
                    if answer.error_code != 0 {
                        self.forget_coordinator_on(answer.error_code, &chunk[0]);
                        note_group_error(g, answer.error_code);
                        continue;
                    }
                    let found = answer.topics.iter().flat_map(|t| {
                        t.partitions
                            .iter()
                            .map(|p| (&t.name, p.partition_index, p.committed_offset, p.error_code))
                    });
                    push_offsets(g, found);
                } else {
                    for ga in answer.groups {
                        let name = ga.group_id.0.to_string();
                        let Some(g) = groups.get_mut(&name) else { continue };
                        if ga.error_code != 0 {
                            self.forget_coordinator_on(ga.error_code, &name);
                            note_group_error(g, ga.error_code);
                            continue;
                        }
                        let found = ga.topics.iter().flat_map(|t| {
                            t.partitions
                                .iter()
                                .map(|p| (&t.name, p.partition_index, p.committed_offset, p.error_code))
                        });
                        push_offsets(g, found);
                    }
                }
            }
        }
        for g in groups.values_mut() {
            g.offsets
                .sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        }
        decoded
    }

    fn forget_coordinator_on(&mut self, error: i16, group: &str) {
        if matches!(
            error,
            code::NOT_COORDINATOR | code::COORDINATOR_NOT_AVAILABLE | code::COORDINATOR_LOAD_IN_PROGRESS
        ) {
            self.coordinators.remove(group);
        }
    }
}

/// A group's committed offsets from an OffsetFetch answer (the shapes of v2-v7
/// and v8+ differ, their partitions do not); -1 means none committed.
fn push_offsets<'a>(g: &mut GroupSnapshot, found: impl Iterator<Item = (&'a TopicName, i32, i64, i16)>) {
    for (topic, partition, offset, error) in found {
        if error == 0 && offset >= 0 {
            g.offsets.push(CommittedOffset {
                topic: topic.0.to_string(),
                partition,
                offset,
            });
        }
    }
}

/// Earliest and latest offsets of one partition, or why they are missing.
type ListedOffsets = (Option<i64>, Option<i64>, Option<String>);

fn note_group_error(g: &mut GroupSnapshot, error: i16) {
    if error == code::GROUP_ID_NOT_FOUND {
        g.state = Some("Dead".into());
    } else {
        g.error = Some(format!("OffsetFetch error code {error}"));
    }
}

/// A consumer-protocol assignment: version, then topics and partitions. Anything
/// else (another protocol, or garbage) is no assignment rather than an error.
fn decode_assignment(bytes: &bytes::Bytes) -> Vec<(String, Vec<i32>)> {
    let mut buf = bytes.clone();
    if buf.remaining() < 2 {
        return Vec::new();
    }
    let version = buf.get_i16();
    match ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3)) {
        Ok(a) => a
            .assigned_partitions
            .into_iter()
            .map(|tp| (tp.topic.0.to_string(), tp.partitions))
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn assignments_decode_and_garbage_is_no_assignment() {
        let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
            TopicPartition::default()
                .with_topic(TopicName(StrBytes::from_static_str("orders")))
                .with_partitions(vec![0, 2]),
        ]);
        let mut buf = bytes::BytesMut::new();
        bytes::BufMut::put_i16(&mut buf, 1);
        assignment.encode(&mut buf, 1).unwrap();
        assert_eq!(
            decode_assignment(&buf.freeze()),
            vec![("orders".to_owned(), vec![0, 2])]
        );
        for garbage in [&b""[..], &[0, 1][..], &[0, 0, 0, 0, 0, 9, 0xff][..], &[0xff; 40][..]] {
            assert!(decode_assignment(&bytes::Bytes::copy_from_slice(garbage)).is_empty());
        }
    }
}
