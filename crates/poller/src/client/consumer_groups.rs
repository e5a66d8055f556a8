//! Kafka 4's groups: ConsumerGroupDescribe (API 69, KIP-848) for `consumer`
//! groups, which classic DescribeGroups answers as dead or unknown — the reason
//! KMinion, Redpanda Console and Sarama-based tools show them missing.

use super::*;
use kafka_protocol::messages::ConsumerGroupDescribeRequest;

impl ClusterClient {
    /// Describes each coordinator's `consumer` groups with ConsumerGroupDescribe
    /// (state, group epoch, members with their epochs and assignments); returns
    /// the groups left for classic DescribeGroups: classic ones, those of no known
    /// type, and those whose coordinator has no API 69. Share groups and
    /// streams groups whose coordinator has StreamsGroupDescribe are in
    /// neither: they have their own describes.
    pub(super) async fn describe_consumer_groups(
        &mut self,
        by_coordinator: &BTreeMap<String, Vec<String>>,
        groups: &mut BTreeMap<String, GroupSnapshot>,
        snap: &mut Snapshot,
    ) -> BTreeMap<String, Vec<String>> {
        let type_of =
            |groups: &BTreeMap<String, GroupSnapshot>, n: &String| groups.get(n).and_then(|g| g.group_type.clone());
        let mut classic = BTreeMap::new();
        let mut work = Vec::new();
        for (addr, names) in by_coordinator {
            let supported = self.speaks::<ConsumerGroupDescribeRequest>(addr).await;
            let streams = self.speaks::<super::unencoded::StreamsGroupDescribeV0>(addr).await;
            let mut new_protocol = Vec::new();
            let mut old = Vec::new();
            for n in names {
                match type_of(groups, n).as_deref() {
                    Some("consumer") if supported => new_protocol.push(n.clone()),
                    // Described by `describe_streams_groups`.
                    Some("streams") if streams => {}
                    Some("share") => {}
                    _ => old.push(n.clone()),
                }
            }
            classic.insert(addr.clone(), old);
            if !new_protocol.is_empty() {
                let requests = super::groups::in_batches(&new_protocol, |ids| {
                    ConsumerGroupDescribeRequest::default().with_group_ids(ids)
                });
                work.push((addr.clone(), requests));
            }
        }
        for (addr, result) in self.fan_out(work).await {
            let answers = match result {
                Ok(a) => a,
                Err(e) => {
                    let asked: Vec<String> = by_coordinator[&addr]
                        .iter()
                        .filter(|n| type_of(groups, n).as_deref() == Some("consumer"))
                        .cloned()
                        .collect();
                    super::groups::undescribed(groups, &asked, &format!("ConsumerGroupDescribe failed: {e}"));
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
                    g.error = Some(format!("ConsumerGroupDescribe error code {}", described.error_code));
                    continue;
                }
                g.state = Some(described.group_state.to_string());
                g.group_epoch = Some(described.group_epoch);
                g.described = true;
                g.members = described
                    .members
                    .iter()
                    .map(|m| MemberSnapshot {
                        member_id: m.member_id.to_string(),
                        client_id: m.client_id.to_string(),
                        host: m.client_host.to_string(),
                        assignment: m
                            .assignment
                            .topic_partitions
                            .iter()
                            .map(|tp| (tp.topic_name.0.to_string(), tp.partitions.clone()))
                            .collect(),
                        member_epoch: Some(m.member_epoch),
                        instance_id: m.instance_id.as_ref().map(ToString::to_string),
                        tasks: None,
                    })
                    .collect();
            }
        }
        classic
    }
}
