//! A refresh between polls: the committed and end offsets of only the
//! partitions where a group lags, and the times of the records there. A poll
//! every 10 s leaves a lagging group's committed offset up to 10 s old, and a
//! group behind by X seconds then reads X plus that age; the refresh makes it
//! the refresh interval's age instead, for a few requests: two ListOffsets per
//! leader of those partitions, an OffsetFetch per coordinator (100 groups
//! each), and the record-time Fetch when a commit moved.

use super::*;
use crate::tracker::Lagging;

impl ClusterClient {
    /// Refreshes `lagging` (from [`crate::Tracker::lagging`]) at `at`: a
    /// partial snapshot, which the tracker reads as such. Before a poll has
    /// answered Metadata there is nothing to ask by.
    pub async fn refresh(&mut self, at: Millis, lagging: &Lagging) -> Snapshot {
        let mut snap = Snapshot::new(&self.config.name, at);
        snap.partial = true;
        if lagging.is_empty() || self.brokers.is_empty() {
            return snap;
        }
        let sent_before = self.requests;
        let mut wanted: BTreeMap<&str, BTreeSet<i32>> = BTreeMap::new();
        for parts in lagging.values() {
            for (topic, partition) in parts {
                wanted.entry(topic).or_default().insert(*partition);
            }
        }
        for (topic, parts) in wanted {
            let Some(leaders) = self.leaders.get(topic) else {
                continue;
            };
            let partitions: Vec<PartitionSnapshot> = leaders
                .iter()
                .filter(|(p, leader)| parts.contains(p) && *leader >= 0)
                .map(|&(partition, leader)| PartitionSnapshot {
                    partition,
                    leader,
                    log_start: None,
                    end: None,
                    stable: None,
                    open_transaction: None,
                    error: None,
                })
                .collect();
            snap.topics.push(TopicSnapshot {
                name: topic.to_owned(),
                id: None,
                error_code: 0,
                partitions,
            });
        }
        snap.metadata_ok = true;
        self.offsets(&mut snap, false).await;
        // A partition whose leader failed is left to the next poll, not
        // called unreachable between polls.
        for t in &mut snap.topics {
            t.partitions.retain(|p| p.end.is_some());
        }
        snap.topics.retain(|t| !t.partitions.is_empty());
        let names: Vec<String> = lagging.keys().cloned().collect();
        self.find_coordinators(names.iter(), &mut snap).await;
        let mut groups: BTreeMap<String, GroupSnapshot> = BTreeMap::new();
        let mut by_coordinator: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for name in names {
            if let Some(addr) = self.coordinators.get(&name).and_then(|id| self.brokers.get(id)) {
                by_coordinator.entry(addr.clone()).or_default().push(name.clone());
                groups.insert(name.clone(), GroupSnapshot::new(&name));
            }
        }
        self.fetch_offsets(&by_coordinator, &mut groups, &mut snap).await;
        // A group the refresh could not ask is neither moved nor gone.
        snap.groups = groups.into_values().filter(|g| !g.offsets.is_empty()).collect();
        self.record_times(&mut snap).await;
        snap.requests = self.requests - sent_before;
        snap
    }
}
