//! A broker built on kafka-protocol's exact encodings, for the APIs and states no
//! broker on this machine has: librdkafka's mock cluster answers the last stable
//! offset as the high watermark and lists no groups; tansu 0.6.0 neither holds a
//! `read_committed` reader at an open transaction nor ends one (no EndTxn). It
//! answers ApiVersions, Metadata, ListOffsets (`read_uncommitted` and
//! `read_committed`), FindCoordinator, ListGroups (with group types),
//! DescribeGroups (classic groups; a `consumer` group is unknown to it, as on
//! Kafka 4), ConsumerGroupDescribe (API 69, KIP-848), DescribeShareGroupOffsets
//! (API 90 v0, KIP-932: a share group's `offsets` are its start offsets) and
//! OffsetFetch (nothing for a share group), from a
//! [`WireCluster`] a test changes between polls. Every frame is decoded and encoded by kafka-protocol,
//! the crate the poller's own client uses, at the version the client picked from
//! what this broker advertises.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::consumer_group_describe_response as cgd;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{OffsetFetchResponsePartition, OffsetFetchResponseTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The one broker's id.
pub const NODE_ID: i32 = 1;

/// One partition's offsets, as the broker would answer them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WirePartition {
    pub log_start: i64,
    pub high_watermark: i64,
    /// Below the high watermark while a transaction is open.
    pub last_stable: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WireGroup {
    /// `Stable`, `Empty`, ...
    pub state: String,
    /// `classic`, `consumer`, `share`: ListGroups v5's group type.
    pub group_type: String,
    /// (topic, partition) → committed offset; a share group's share-partition
    /// start offset.
    pub offsets: BTreeMap<(String, i32), i64>,
    /// The group epoch ConsumerGroupDescribe answers.
    pub epoch: i32,
    pub members: Vec<WireMember>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WireMember {
    pub member_id: String,
    pub client_id: String,
    pub host: String,
    pub epoch: i32,
    pub assignment: Vec<(String, Vec<i32>)>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WireCluster {
    pub topics: BTreeMap<String, Vec<WirePartition>>,
    pub groups: BTreeMap<String, WireGroup>,
    /// Advertise no ConsumerGroupDescribe, as a broker before Kafka 3.7 does.
    pub without_consumer_group_describe: bool,
}

/// The broker, listening on loopback until dropped with its runtime.
#[derive(Debug)]
pub struct WireBroker {
    pub addr: String,
    cluster: Arc<Mutex<WireCluster>>,
}

impl WireBroker {
    pub async fn start(cluster: WireCluster) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cluster = Arc::new(Mutex::new(cluster));
        let shared = cluster.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, shared.clone(), addr.port()));
            }
        });
        Self {
            addr: addr.to_string(),
            cluster,
        }
    }

    /// Changes what the broker answers from the next request on.
    pub fn update(&self, f: impl FnOnce(&mut WireCluster)) {
        f(&mut self.cluster.lock().unwrap());
    }
}

/// The versions advertised: each a range the poller's client speaks.
const VERSIONS: [(ApiKey, i16, i16); 9] = [
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::Metadata, 1, 9),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::FindCoordinator, 0, 3),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::OffsetFetch, 2, 9),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::DescribeShareGroupOffsets, 0, 0),
];

async fn serve(mut socket: tokio::net::TcpStream, cluster: Arc<Mutex<WireCluster>>, port: u16) {
    loop {
        let mut len = [0u8; 4];
        if socket.read_exact(&mut len).await.is_err() {
            return;
        }
        let len = i32::from_be_bytes(len);
        // Kafka's own bound on a request (`socket.request.max.bytes`, 100 MiB):
        // one ListOffsets for 100,000 partitions is 1.7 MB.
        assert!((0..100 << 20).contains(&len), "the client sent a frame of {len} bytes");
        let mut frame = vec![0u8; len as usize];
        if socket.read_exact(&mut frame).await.is_err() {
            return;
        }
        let answer = {
            let cluster = cluster.lock().unwrap();
            answer(bytes::Bytes::from(frame), &cluster, port)
        };
        let Some(answer) = answer else { return };
        let mut out = (answer.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&answer);
        if socket.write_all(&out).await.is_err() {
            return;
        }
    }
}

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// The response frame (without its length) to one request frame; `None` closes
/// the connection, as a broker does on a request it cannot read.
fn answer(mut frame: bytes::Bytes, cluster: &WireCluster, port: u16) -> Option<Vec<u8>> {
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api = ApiKey::try_from(key).ok()?;
    let header = RequestHeader::decode(&mut frame, api.request_header_version(version)).ok()?;
    let mut out = bytes::BytesMut::new();
    let response_header = ResponseHeader::default().with_correlation_id(header.correlation_id);
    // ApiVersions answers with header v0 whatever its version, so that a client
    // on a version the broker does not know can read it.
    response_header
        .encode(&mut out, api.response_header_version(version))
        .ok()?;
    match api {
        ApiKey::ApiVersions => {
            let _ = ApiVersionsRequest::decode(&mut frame, version).ok()?;
            ApiVersionsResponse::default()
                .with_api_keys(
                    VERSIONS
                        .iter()
                        .filter(|(k, ..)| {
                            !(cluster.without_consumer_group_describe && *k == ApiKey::ConsumerGroupDescribe)
                        })
                        .map(|&(k, min, max)| {
                            ApiVersion::default()
                                .with_api_key(k as i16)
                                .with_min_version(min)
                                .with_max_version(max)
                        })
                        .collect(),
                )
                .encode(&mut out, version)
                .ok()?;
        }
        ApiKey::Metadata => {
            let _ = MetadataRequest::decode(&mut frame, version).ok()?;
            let topics = cluster
                .topics
                .iter()
                .map(|(t, parts)| {
                    MetadataResponseTopic::default()
                        .with_name(Some(TopicName(name(t))))
                        .with_partitions(
                            (0..parts.len() as i32)
                                .map(|p| {
                                    MetadataResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_leader_id(BrokerId(NODE_ID))
                                        .with_replica_nodes(vec![BrokerId(NODE_ID)])
                                        .with_isr_nodes(vec![BrokerId(NODE_ID)])
                                })
                                .collect(),
                        )
                })
                .collect();
            MetadataResponse::default()
                .with_brokers(vec![
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(NODE_ID))
                        .with_host(name("127.0.0.1"))
                        .with_port(i32::from(port)),
                ])
                .with_controller_id(BrokerId(NODE_ID))
                .with_topics(topics)
                .encode(&mut out, version)
                .ok()?;
        }
        ApiKey::ListOffsets => {
            let request = ListOffsetsRequest::decode(&mut frame, version).ok()?;
            let committed = request.isolation_level == 1;
            let topics = request
                .topics
                .iter()
                .map(|t| {
                    let parts = cluster.topics.get(t.name.0.as_str());
                    ListOffsetsTopicResponse::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    let answer =
                                        ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
                                    match parts.and_then(|ps| ps.get(p.partition_index as usize)) {
                                        Some(o) => answer.with_offset(match p.timestamp {
                                            -2 => o.log_start,
                                            _ if committed => o.last_stable,
                                            _ => o.high_watermark,
                                        }),
                                        // UNKNOWN_TOPIC_OR_PARTITION
                                        None => answer.with_error_code(3),
                                    }
                                })
                                .collect(),
                        )
                })
                .collect();
            ListOffsetsResponse::default()
                .with_topics(topics)
                .encode(&mut out, version)
                .ok()?;
        }
        ApiKey::FindCoordinator => {
            let request = FindCoordinatorRequest::decode(&mut frame, version).ok()?;
            let response = FindCoordinatorResponse::default()
                .with_node_id(BrokerId(NODE_ID))
                .with_host(name("127.0.0.1"))
                .with_port(i32::from(port))
                .with_coordinators(
                    request
                        .coordinator_keys
                        .iter()
                        .map(|k| {
                            Coordinator::default()
                                .with_key(k.clone())
                                .with_node_id(BrokerId(NODE_ID))
                                .with_host(name("127.0.0.1"))
                                .with_port(i32::from(port))
                        })
                        .collect(),
                );
            response.encode(&mut out, version).ok()?;
        }
        ApiKey::ListGroups => {
            let _ = ListGroupsRequest::decode(&mut frame, version).ok()?;
            ListGroupsResponse::default()
                .with_groups(
                    cluster
                        .groups
                        .iter()
                        .map(|(g, group)| {
                            ListedGroup::default()
                                .with_group_id(GroupId(name(g)))
                                .with_protocol_type(name(if group.group_type == "share" {
                                    "share"
                                } else {
                                    "consumer"
                                }))
                                .with_group_state(name(&group.state))
                                .with_group_type(name(&group.group_type))
                        })
                        .collect(),
                )
                .encode(&mut out, version)
                .ok()?;
        }
        ApiKey::DescribeGroups => {
            let request = DescribeGroupsRequest::decode(&mut frame, version).ok()?;
            let groups = request
                .groups
                .iter()
                .map(|g| {
                    let described = DescribedGroup::default().with_group_id(g.clone());
                    match cluster.groups.get(g.0.as_str()) {
                        // What a Kafka 4 broker answers for a group of the new
                        // protocol asked with the classic API: not a classic group.
                        Some(group) if group.group_type != "classic" => {
                            described.with_error_code(69).with_group_state(name("Dead"))
                        }
                        Some(group) => described
                            .with_group_state(name(&group.state))
                            .with_protocol_type(name("consumer")),
                        None => described.with_group_state(name("Dead")),
                    }
                })
                .collect();
            DescribeGroupsResponse::default()
                .with_groups(groups)
                .encode(&mut out, version)
                .ok()?;
        }
        ApiKey::ConsumerGroupDescribe => {
            let request = ConsumerGroupDescribeRequest::decode(&mut frame, version).ok()?;
            let groups = request
                .group_ids
                .iter()
                .map(|g| {
                    let described = cgd::DescribedGroup::default().with_group_id(g.clone());
                    match cluster.groups.get(g.0.as_str()) {
                        Some(group) if group.group_type == "consumer" => described
                            .with_group_state(name(&group.state))
                            .with_group_epoch(group.epoch)
                            .with_assignment_epoch(group.epoch)
                            .with_assignor_name(name("uniform"))
                            .with_members(
                                group
                                    .members
                                    .iter()
                                    .map(|m| {
                                        let assignment = cgd::Assignment::default().with_topic_partitions(
                                            m.assignment
                                                .iter()
                                                .map(|(t, ps)| {
                                                    cgd::TopicPartitions::default()
                                                        .with_topic_name(TopicName(name(t)))
                                                        .with_partitions(ps.clone())
                                                })
                                                .collect(),
                                        );
                                        cgd::Member::default()
                                            .with_member_id(name(&m.member_id))
                                            .with_member_epoch(m.epoch)
                                            .with_client_id(name(&m.client_id))
                                            .with_client_host(name(&m.host))
                                            .with_assignment(assignment.clone())
                                            .with_target_assignment(assignment)
                                    })
                                    .collect(),
                            ),
                        // GROUP_ID_NOT_FOUND, as for a classic group on Kafka 4.
                        _ => described.with_error_code(69),
                    }
                })
                .collect();
            ConsumerGroupDescribeResponse::default()
                .with_groups(groups)
                .encode(&mut out, version)
                .ok()?;
        }
        // v8+: many groups in one request (KIP-709), each answered whole.
        ApiKey::OffsetFetch if version >= 8 => {
            use kafka_protocol::messages::offset_fetch_response as ofr;
            let request = OffsetFetchRequest::decode(&mut frame, version).ok()?;
            let groups = request
                .groups
                .iter()
                .map(|asked| {
                    let mut by_topic: BTreeMap<&str, Vec<ofr::OffsetFetchResponsePartitions>> = BTreeMap::new();
                    if let Some(group) = cluster
                        .groups
                        .get(asked.group_id.0.as_str())
                        .filter(|g| g.group_type != "share")
                    {
                        for ((topic, partition), offset) in &group.offsets {
                            by_topic.entry(topic).or_default().push(
                                ofr::OffsetFetchResponsePartitions::default()
                                    .with_partition_index(*partition)
                                    .with_committed_offset(*offset),
                            );
                        }
                    }
                    ofr::OffsetFetchResponseGroup::default()
                        .with_group_id(asked.group_id.clone())
                        .with_topics(
                            by_topic
                                .into_iter()
                                .map(|(t, partitions)| {
                                    ofr::OffsetFetchResponseTopics::default()
                                        .with_name(TopicName(name(t)))
                                        .with_partitions(partitions)
                                })
                                .collect(),
                        )
                })
                .collect();
            OffsetFetchResponse::default()
                .with_groups(groups)
                .encode(&mut out, version)
                .ok()?;
        }
        ApiKey::OffsetFetch => {
            let request = OffsetFetchRequest::decode(&mut frame, version).ok()?;
            let mut by_topic: BTreeMap<&str, Vec<OffsetFetchResponsePartition>> = BTreeMap::new();
            if let Some(group) = cluster
                .groups
                .get(request.group_id.0.as_str())
                .filter(|g| g.group_type != "share")
            {
                for ((topic, partition), offset) in &group.offsets {
                    by_topic.entry(topic).or_default().push(
                        OffsetFetchResponsePartition::default()
                            .with_partition_index(*partition)
                            .with_committed_offset(*offset),
                    );
                }
            }
            OffsetFetchResponse::default()
                .with_topics(
                    by_topic
                        .into_iter()
                        .map(|(t, partitions)| {
                            OffsetFetchResponseTopic::default()
                                .with_name(TopicName(name(t)))
                                .with_partitions(partitions)
                        })
                        .collect(),
                )
                .encode(&mut out, version)
                .ok()?;
        }
        ApiKey::DescribeShareGroupOffsets => {
            use kafka_protocol::messages::describe_share_group_offsets_response as dsgo;
            let request = DescribeShareGroupOffsetsRequest::decode(&mut frame, version).ok()?;
            let groups = request
                .groups
                .iter()
                .map(|asked| {
                    let answer =
                        dsgo::DescribeShareGroupOffsetsResponseGroup::default().with_group_id(asked.group_id.clone());
                    match cluster.groups.get(asked.group_id.0.as_str()) {
                        Some(group) if group.group_type == "share" => {
                            let mut by_topic: BTreeMap<&str, Vec<dsgo::DescribeShareGroupOffsetsResponsePartition>> =
                                BTreeMap::new();
                            for ((topic, partition), start) in &group.offsets {
                                by_topic.entry(topic).or_default().push(
                                    dsgo::DescribeShareGroupOffsetsResponsePartition::default()
                                        .with_partition_index(*partition)
                                        .with_start_offset(*start),
                                );
                            }
                            answer.with_topics(
                                by_topic
                                    .into_iter()
                                    .map(|(t, partitions)| {
                                        dsgo::DescribeShareGroupOffsetsResponseTopic::default()
                                            .with_topic_name(TopicName(name(t)))
                                            .with_partitions(partitions)
                                    })
                                    .collect(),
                            )
                        }
                        // GROUP_ID_NOT_FOUND, as Kafka answers for a group of another type.
                        _ => answer.with_error_code(69),
                    }
                })
                .collect();
            DescribeShareGroupOffsetsResponse::default()
                .with_groups(groups)
                .encode(&mut out, version)
                .ok()?;
        }
        _ => return None,
    }
    Some(out.to_vec())
}
