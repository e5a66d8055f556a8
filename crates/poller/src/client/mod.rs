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

mod admin;
mod configs;
mod connection;
mod consumer_groups;
mod groups;
mod record_times;
mod refresh;
mod share_groups;
mod streams_groups;
mod transactions;
mod unencoded;
pub use crate::sasl;
pub use crate::tls;
pub use admin::PartitionOffset;

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
/// A cluster id longer than this (Kafka's are 22 characters) is not kept.
const MAX_CLUSTER_ID_BYTES: usize = 256;
use tokio_rustls::rustls::ClientConfig;

/// Connections to one broker a long pipeline is spread over at most, and the
/// requests that make a lane worth its connection.
const LANES: usize = 4;
const REQUESTS_PER_LANE: usize = 50;
/// Groups per batched OffsetFetch or DescribeGroups request.
const GROUPS_PER_REQUEST: usize = 100;
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
/// ListOffsets' isolation level that answers the last stable offset (v2+).
const READ_COMMITTED: i8 = 1;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KafkaError {
    #[error("cannot reach broker {broker}: {reason}")]
    Connect { broker: String, reason: String },
    /// Connected, then the broker closed the connection instead of answering
    /// (tansu does so for requests it cannot serve).
    #[error("broker {broker} closed the connection instead of answering ({reason})")]
    Closed { broker: String, reason: String },
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

/// A broker's answers to its requests, in their order, or why there are none.
type Answers<R> = (String, Result<Vec<<R as Request>::Response>, KafkaError>);

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
    /// A broker's further connections, for the lanes of a long pipeline.
    spare: HashMap<String, Vec<Connection>>,
    /// Group to coordinator broker id; dropped when the broker says otherwise.
    coordinators: HashMap<String, i32>,
    /// Requests sent since the client was made, ApiVersions handshakes included.
    requests: u64,
    /// The TLS side, built once; why it could not be, for every connection to say.
    tls: Option<Result<Arc<ClientConfig>, String>>,
    /// The brokers cannot fetch "every topic" of a group (librdkafka's mock echoes
    /// the null list back): name every partition instead.
    name_offset_topics: bool,
    /// Record batches whose times were read already.
    batches: record_times::BatchCache,
    /// Partitions whose read at a commit found only markers and aborted
    /// records up to where the bytes ended: the run's end so far.
    open_runs: HashMap<(String, i32), i64>,
    /// The topics' time retention, as last read.
    retention: configs::RetentionCache,
    /// Each polled topic's partitions and their leaders, from the last
    /// Metadata answer: what a refresh between polls asks by.
    leaders: HashMap<String, Vec<(i32, i32)>>,
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
            spare: HashMap::new(),
            coordinators: HashMap::new(),
            requests: 0,
            name_offset_topics: false,
            batches: HashMap::new(),
            open_runs: HashMap::new(),
            retention: configs::RetentionCache::default(),
            leaders: HashMap::new(),
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
                self.offsets(&mut snap, true).await;
                self.transaction_holders(&mut snap).await;
            }
            Err(e) => snap.errors.push(e.to_string()),
        }
        self.groups(&mut snap, extra_groups).await;
        if snap.metadata_ok {
            self.record_times(&mut snap).await;
            self.retention(&mut snap).await;
        }
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

    /// Whether the broker at `addr` speaks `R`; one that cannot be reached does not.
    async fn speaks<R: Request>(&mut self, addr: &str) -> bool {
        self.connection(addr).await.is_ok_and(|c| c.supports::<R>())
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
        self.spare.remove(addr);
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

    /// Sends each broker its requests, all brokers at once, each pipelined; a
    /// broker with many requests gets them over up to [`LANES`] connections at
    /// once (a broker answers one connection's requests in turn: at 100,000
    /// groups one lane left a 2-core broker's other core idle). Answers come
    /// back in the order of the requests.
    async fn fan_out<R: Request>(&mut self, work: Vec<(String, Vec<R>)>) -> Vec<Answers<R>> {
        let (config, tls) = (&self.config, self.tls.as_ref());
        let mut jobs = Vec::new();
        for (broker, (addr, requests)) in work.into_iter().enumerate() {
            let lanes = requests.len().div_ceil(REQUESTS_PER_LANE).clamp(1, LANES);
            let per_lane = requests.len().div_ceil(lanes).max(1);
            let mut requests = requests;
            let mut lane = 0;
            while lane == 0 || !requests.is_empty() {
                let rest = requests.split_off(per_lane.min(requests.len()));
                let mine = std::mem::replace(&mut requests, rest);
                let existing = if lane == 0 {
                    self.connections.remove(&addr)
                } else {
                    self.spare.get_mut(&addr).and_then(Vec::pop)
                };
                self.requests += mine.len() as u64 + u64::from(existing.is_none());
                let addr = addr.clone();
                jobs.push(async move {
                    let mut conn = match existing {
                        Some(c) => c,
                        None => match Connection::connect(&addr, config, tls).await {
                            Ok(c) => c,
                            Err(e) => return (broker, lane, addr, None, Err(e)),
                        },
                    };
                    let result = conn.send_all(&mine).await;
                    (broker, lane, addr, Some(conn), result)
                });
                lane += 1;
            }
        }
        let mut out: Vec<Answers<R>> = Vec::new();
        for (broker, lane, addr, conn, result) in join_all(jobs).await {
            // A connection that failed mid-pipeline is out of step: reconnect next time.
            if let Some(conn) = conn.filter(|_| result.is_ok()) {
                if lane == 0 {
                    self.connections.insert(addr.clone(), conn);
                } else {
                    self.spare.entry(addr.clone()).or_default().push(conn);
                }
            }
            // join_all keeps the order the jobs were made in: a broker's lanes in turn.
            if out.len() == broker {
                out.push((addr, result));
            } else if let Some((_, so_far)) = out.get_mut(broker) {
                match (so_far.as_mut(), result) {
                    (Ok(answers), Ok(more)) => answers.extend(more),
                    (Ok(_), Err(e)) => *so_far = Err(e),
                    (Err(_), _) => {}
                }
            }
        }
        out
    }

    async fn metadata(&mut self, snap: &mut Snapshot) -> Result<(), KafkaError> {
        // Version 0 names "all topics" with an empty list, later ones with null.
        let all_topics = MetadataRequest::default()
            .with_topics(None)
            .with_allow_auto_topic_creation(false);
        let response = self.any_broker(&all_topics).await?;
        snap.cluster_id = response
            .cluster_id
            .as_ref()
            .map(|id| id.as_str())
            .filter(|id| !id.is_empty() && id.len() <= MAX_CLUSTER_ID_BYTES)
            .map(str::to_owned);
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
        self.spare.retain(|addr, _| known.contains(addr));
        for t in response.topics {
            let Some(name) = t.name else { continue };
            if t.is_internal && !self.config.include_internal_topics || !self.config.keeps_topic(&name.0) {
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
                    stable: None,
                    open_transaction: None,
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
        self.leaders = snap
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    t.partitions.iter().map(|p| (p.partition, p.leader)).collect(),
                )
            })
            .collect();
        Ok(())
    }

    /// Earliest, latest and (with `stable`) last stable offsets of every
    /// partition in `snap`, a request each per leader.
    async fn offsets(&mut self, snap: &mut Snapshot, stable: bool) {
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
        let mut work = Vec::new();
        let mut unknown_leaders = Vec::new();
        for (leader, topics) in &by_leader {
            match self.brokers.get(leader) {
                Some(addr) => {
                    let mut asked = vec![list_offsets(topics, EARLIEST), list_offsets(topics, LATEST)];
                    if stable {
                        asked.push(list_offsets(topics, LATEST).with_isolation_level(READ_COMMITTED));
                    }
                    work.push((addr.clone(), asked))
                }
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
                                } else {
                                    match i {
                                        0 => entry.0 = Some(p.offset),
                                        1 => entry.1 = Some(p.offset),
                                        _ => entry.3 = Some(p.offset),
                                    }
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
                } else if let Some((start, end, error, stable)) = found.remove(&(t.name.clone(), p.partition)) {
                    p.log_start = start.filter(|&o| o >= 0);
                    p.end = end.filter(|&o| o >= 0);
                    // Never above the end: a broker answering both in one poll
                    // can see a transaction end in between.
                    p.stable = stable.filter(|&o| o >= 0).map(|o| p.end.map_or(o, |e| o.min(e)));
                    p.error = error;
                } else if p.error.is_none() {
                    p.error = Some("leader did not answer for this partition".into());
                }
            }
        }
    }
}

/// ListOffsets of `topics`' partitions at `timestamp` (or [`EARLIEST`], [`LATEST`]).
fn list_offsets(topics: &BTreeMap<&str, Vec<i32>>, timestamp: i64) -> ListOffsetsRequest {
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
}

/// Earliest, latest offsets of one partition, or why they are missing, and its
/// last stable offset.
type ListedOffsets = (Option<i64>, Option<i64>, Option<String>, Option<i64>);
