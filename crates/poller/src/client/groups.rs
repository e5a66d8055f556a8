//! The groups' part of a poll: ListGroups per broker, FindCoordinator for
//! their coordinators, then per coordinator ConsumerGroupDescribe for Kafka 4's
//! `consumer` groups (`consumer_groups.rs`), DescribeGroups for the classic
//! ones, DescribeShareGroupOffsets for share groups (`share_groups.rs`), and
//! OffsetFetch for all but share groups.

use super::*;

impl ClusterClient {
    pub(super) async fn groups(&mut self, snap: &mut Snapshot, extra: &BTreeSet<String>) {
        let mut groups: BTreeMap<String, GroupSnapshot> = BTreeMap::new();
        snap.groups_listed = self.list_groups(snap, &mut groups).await;
        for name in extra.iter().filter(|g| self.config.keeps_group(g)) {
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
        let classic = self.describe_consumer_groups(&by_coordinator, &mut groups, snap).await;
        self.describe_groups(&classic, &mut groups, snap).await;
        self.describe_share_offsets(&by_coordinator, &mut groups, snap).await;
        self.describe_share_groups(&by_coordinator, &mut groups, snap).await;
        self.describe_streams_groups(&by_coordinator, &mut groups, snap).await;
        // Share groups keep no committed offsets (KIP-932): OffsetFetch has nothing for them.
        let by_coordinator: BTreeMap<String, Vec<String>> = by_coordinator
            .into_iter()
            .map(|(addr, mut names)| {
                names.retain(|n| groups.get(n).is_none_or(|g| g.group_type.as_deref() != Some("share")));
                (addr, names)
            })
            .collect();
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
            snap.unlisted_why = Some("no broker is known (Metadata did not answer)".to_owned());
            return false;
        }
        if !self.speaks::<ListGroupsRequest>(&addrs[0]).await {
            snap.unlisted_why = Some(format!(
                "the broker at {} does not speak ListGroups (librdkafka's mock cluster is one such)",
                addrs[0]
            ));
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
                            snap.unlisted_why = Some(format!("ListGroups answered error code {}", answer.error_code));
                            continue;
                        }
                        for g in answer.groups {
                            if !self.config.keeps_group(&g.group_id.0) {
                                continue;
                            }
                            let name = g.group_id.0.to_string();
                            let entry = groups.entry(name.clone()).or_insert_with(|| GroupSnapshot::new(&name));
                            entry.listed = true;
                            entry.protocol_type = Some(g.protocol_type.to_string()).filter(|s| !s.is_empty());
                            // v5+: the group's type; before, only classic groups are listed.
                            entry.group_type = Some(g.group_type.to_string()).filter(|s| !s.is_empty());
                            if !g.group_state.is_empty() {
                                entry.state = Some(g.group_state.to_string());
                            }
                        }
                    }
                }
                Err(e) => {
                    complete = false;
                    snap.unlisted_why = Some(format!("ListGroups failed: {e}"));
                    snap.errors.push(e.to_string());
                }
            }
        }
        complete
    }

    pub(super) async fn find_coordinators<'a>(
        &mut self,
        groups: impl Iterator<Item = &'a String>,
        snap: &mut Snapshot,
    ) {
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
            if self.speaks::<DescribeGroupsRequest>(addr).await {
                let requests = in_batches(names, |ids| DescribeGroupsRequest::default().with_groups(ids));
                work.push((addr.clone(), requests));
            } else {
                let why = format!("its coordinator {addr} does not speak DescribeGroups");
                undescribed(groups, names, &why);
            }
        }
        for (addr, result) in self.fan_out(work).await {
            let answers = match result {
                Ok(a) => a,
                Err(e) => {
                    // Each group asked carries why its membership is unknown.
                    undescribed(groups, &by_coordinator[&addr], &format!("DescribeGroups failed: {e}"));
                    snap.errors.push(e.to_string());
                    continue;
                }
            };
            for described in answers.into_iter().flat_map(|a| a.groups) {
                let Some(g) = groups.get_mut(described.group_id.0.as_str()) else {
                    continue;
                };
                // A group the list knows as another type, or one with committed
                // offsets, that classic DescribeGroups calls dead or unknown is a
                // group of the new protocol asked with the old API: not gone.
                let unknown_to_classic = described.error_code == code::GROUP_ID_NOT_FOUND
                    || (described.error_code == 0 && described.group_state.as_str() == "Dead");
                if unknown_to_classic && g.listed && g.group_type.as_deref() != Some("classic") {
                    g.error = Some(match g.group_type.as_deref() {
                        Some(t @ ("consumer" | "streams")) => format!(
                            "DescribeGroups does not know this group (a {t} group) and its coordinator has no {}",
                            if t == "consumer" {
                                "ConsumerGroupDescribe"
                            } else {
                                "StreamsGroupDescribe"
                            }
                        ),
                        // A type newer than this collector: shown as the broker
                        // names it, its membership unknown.
                        Some(t) => {
                            format!("a group of type {t:?}, which this collector cannot describe: membership unknown")
                        }
                        None => "DescribeGroups does not know this group and ListGroups gave no type".to_owned(),
                    });
                    continue;
                }
                if described.error_code != 0 {
                    self.forget_coordinator_on(described.error_code, &g.name);
                    g.error = Some(format!("DescribeGroups error code {}", described.error_code));
                    continue;
                }
                g.state = Some(described.group_state.to_string());
                g.protocol_type = Some(described.protocol_type.to_string()).filter(|s| !s.is_empty());
                g.described = true;
                g.members = described
                    .members
                    .iter()
                    .map(|m| MemberSnapshot {
                        member_id: m.member_id.to_string(),
                        client_id: m.client_id.to_string(),
                        host: m.client_host.to_string(),
                        assignment: decode_assignment(&m.member_assignment),
                        member_epoch: None,
                        instance_id: m.group_instance_id.as_ref().map(ToString::to_string),
                        tasks: None,
                    })
                    .collect();
            }
        }
    }

    pub(super) async fn fetch_offsets(
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
                    push_offsets(g, &self.config, found);
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
                        push_offsets(g, &self.config, found);
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

    pub(super) fn forget_coordinator_on(&mut self, error: i16, group: &str) {
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
/// `names` as requests of at most [`GROUPS_PER_REQUEST`] group ids each.
pub(super) fn in_batches<R>(names: &[String], request: impl Fn(Vec<GroupId>) -> R) -> Vec<R> {
    names
        .chunks(GROUPS_PER_REQUEST)
        .map(|chunk| {
            request(
                chunk
                    .iter()
                    .map(|g| GroupId(StrBytes::from_string(g.clone())))
                    .collect(),
            )
        })
        .collect()
}

fn push_offsets<'a>(
    g: &mut GroupSnapshot,
    config: &crate::ClusterConfig,
    found: impl Iterator<Item = (&'a TopicName, i32, i64, i16)>,
) {
    for (topic, partition, offset, error) in found {
        if error == 0 && offset >= 0 && config.keeps_topic(&topic.0) {
            g.offsets.push(CommittedOffset {
                topic: topic.0.to_string(),
                partition,
                offset,
            });
        }
    }
}

/// Groups whose describe did not answer: why, unless a reason is there already.
pub(super) fn undescribed(groups: &mut BTreeMap<String, GroupSnapshot>, names: &[String], why: &str) {
    for n in names {
        if let Some(g) = groups.get_mut(n)
            && !g.described
            && g.error.is_none()
        {
            g.error = Some(why.to_owned());
        }
    }
}

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
