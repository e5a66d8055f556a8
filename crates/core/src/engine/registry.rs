//! Registry and lifecycle: ids for names, lookups, deletion and idleness.

use super::*;

impl Engine {
    /// Forgets a group. Its slot stays as a tombstone: ids handed out stay valid,
    /// and a group of the same name seen later starts afresh.
    pub(super) fn delete_group(&mut self, gid: GroupId) {
        let g = &mut self.groups[gid.0 as usize];
        g.deleted = true;
        let key = (g.cluster, g.name);
        let members = std::mem::take(&mut g.partitions);
        self.usage.group_partitions -= members.len();
        if let Some(u) = self.usage.clusters.get_mut(&key.0) {
            u.groups -= 1;
        }
        for gpid in members {
            let pid = self.group_partitions[gpid.0 as usize].partition;
            self.partitions[pid.0 as usize].groups.retain(|&(_, id)| id != gpid);
            self.group_partitions[gpid.0 as usize].window.clear();
            self.losses.remove(&gpid);
        }
        self.group_ids.remove(&key);
    }

    /// Forgets a topic, its partitions' histories and every group's place on them.
    pub(super) fn delete_topic(&mut self, cluster: &str, topic: &str) {
        let (Some(c), Some(t)) = (self.names.get(cluster), self.names.get(topic)) else {
            return;
        };
        let Some(tid) = self.topic_ids.remove(&(c, t)) else {
            return;
        };
        if let Some(clusters) = self.topic_clusters.get_mut(&t) {
            clusters.retain(|&x| x != c);
        }
        if let Some(u) = self.usage.clusters.get_mut(&c) {
            u.topics -= 1;
        }
        for pid in std::mem::take(&mut self.topics[tid.0 as usize].partitions) {
            self.usage.partitions -= 1;
            let p = &mut self.partitions[pid.0 as usize];
            self.partition_ids.remove(&(tid, p.partition));
            p.deleted = true;
            self.open_transactions.remove(&pid);
            p.history = OffsetHistory::new(&self.history);
            for (gid, gpid) in std::mem::take(&mut p.groups) {
                self.usage.group_partitions -= 1;
                self.groups[gid.0 as usize].partitions.retain(|&id| id != gpid);
                self.group_partitions[gpid.0 as usize].window.clear();
                self.losses.remove(&gpid);
            }
        }
    }

    /// Groups whose newest commit is older than `idle` at `now`, and topics no
    /// source has said anything about for that long: what an adapter expires when
    /// no broker can tell whether they still exist.
    pub fn idle(&self, now: Millis, idle: std::time::Duration) -> Idle<'_> {
        let idle_ms = duration_ms(idle);
        let old = |t: Option<Millis>| t.is_none_or(|t| now.since(t) > idle_ms);
        let groups = self
            .groups()
            .filter(|&gid| {
                let g = &self.groups[gid.0 as usize];
                g.partitions
                    .iter()
                    .all(|gp| old(self.group_partitions[gp.0 as usize].window.last().map(|c| c.at)))
            })
            .map(|gid| self.group_name(gid))
            .collect();
        let topics = self
            .topics
            .iter()
            .filter(|t| !t.partitions.is_empty() && old(t.unassigned_failure_at))
            .filter(|t| {
                t.partitions.iter().all(|pid| {
                    let p = &self.partitions[pid.0 as usize];
                    old(p.end_seen_at.max(p.last_success_at).max(p.last_failure_at)) && p.groups.is_empty()
                })
            })
            .map(|t| (self.names.name(t.cluster), self.names.name(t.name)))
            .collect();
        Idle { groups, topics }
    }

    /// The id of a valid partition, created on first sight within the
    /// cardinality limits. Hot paths look it up once and call the id-taking methods.
    pub fn partition_id(&mut self, p: PartitionRef<'_>) -> Result<PartitionId, RejectReason> {
        if p.partition < 0 {
            return Err(RejectReason::NegativePartition);
        }
        let tid = self.topic_id(p.cluster, p.topic)?;
        if let Some(&pid) = self.partition_ids.get(&(tid, p.partition)) {
            return Ok(pid);
        }
        let limits = &self.config.cardinality;
        if p.partition as usize >= limits.max_partitions_per_topic {
            return Err(self.limited(Limit::PartitionId));
        }
        if self.usage.partitions >= limits.max_partitions {
            return Err(self.limited(Limit::Partitions));
        }
        self.usage.partitions += 1;
        let pid = PartitionId(index_u32(self.partitions.len()));
        self.partitions.push(PartitionState {
            topic: tid,
            partition: p.partition,
            history: OffsetHistory::new(&self.history),
            end_seen_at: None,
            broker_end_max: None,
            broker_end: None,
            acked_end: None,
            unconfirmed: None,
            log_start: None,
            unreadable: Unreadable::NONE,
            stable: StableOffset::NONE,
            pending_end_reset: None,
            pending_log_start_reset: None,
            last_failure_at: None,
            last_success_at: None,
            unreachable_since: None,
            deleted: false,
            groups: Vec::new(),
        });
        self.partition_ids.insert((tid, p.partition), pid);
        self.topics[tid.0 as usize].partitions.push(pid);
        Ok(pid)
    }

    /// Counts a refusal by `limit`, and says it is one.
    fn limited(&mut self, limit: Limit) -> RejectReason {
        self.stats.limited.add(limit);
        RejectReason::Limited
    }

    /// A name for something new: refused when longer than the limit.
    fn new_name(&mut self, name: &str) -> Result<NameId, RejectReason> {
        if name.len() > self.config.cardinality.max_name_bytes {
            return Err(self.limited(Limit::NameBytes));
        }
        Ok(self.names.intern(name))
    }

    /// A known cluster, or a new one within the limit. Names are only interned
    /// once they are let in: a refused flood leaves nothing behind.
    fn cluster(&mut self, cluster: &str) -> Result<NameId, RejectReason> {
        if let Some(c) = self.names.get(cluster)
            && self.usage.clusters.contains_key(&c)
        {
            return Ok(c);
        }
        if self.usage.clusters.len() >= self.config.cardinality.max_clusters {
            return Err(self.limited(Limit::Clusters));
        }
        let c = self.new_name(cluster)?;
        self.usage.clusters.insert(c, ClusterUsage::default());
        Ok(c)
    }

    pub(super) fn topic_id(&mut self, cluster: &str, topic: &str) -> Result<TopicId, RejectReason> {
        if let (Some(c), Some(t)) = (self.names.get(cluster), self.names.get(topic))
            && let Some(&tid) = self.topic_ids.get(&(c, t))
        {
            return Ok(tid);
        }
        let c = self.cluster(cluster)?;
        if self.usage.clusters[&c].topics >= self.config.cardinality.max_topics_per_cluster {
            return Err(self.limited(Limit::Topics));
        }
        let t = self.new_name(topic)?;
        if let Some(u) = self.usage.clusters.get_mut(&c) {
            u.topics += 1;
        }
        let key = (c, t);
        let tid = TopicId(index_u32(self.topics.len()));
        self.topics.push(TopicState {
            cluster: key.0,
            name: key.1,
            partitions: Vec::new(),
            unassigned_failure_at: None,
            retention_ms: None,
        });
        self.topic_ids.insert(key, tid);
        self.topic_clusters.entry(key.1).or_default().push(key.0);
        Ok(tid)
    }

    /// The clusters a topic is known in. Tracers name the cluster on produce
    /// points but not always on commits: adapters use this to place the latter.
    pub fn clusters_of<'a>(&'a self, topic: &str) -> impl Iterator<Item = &'a str> + 'a {
        let clusters = self.names.get(topic).and_then(|t| self.topic_clusters.get(&t));
        clusters.into_iter().flatten().map(|&c| self.names.name(c))
    }

    /// The id of a group, created on first sight within the cardinality limits.
    pub fn group_id(&mut self, cluster: &str, group: &str) -> Result<GroupId, RejectReason> {
        if let Some(gid) = self.find_group(cluster, group) {
            return Ok(gid);
        }
        let c = self.cluster(cluster)?;
        if self.usage.clusters[&c].groups >= self.config.cardinality.max_groups_per_cluster {
            return Err(self.limited(Limit::Groups));
        }
        let g = self.new_name(group)?;
        if let Some(u) = self.usage.clusters.get_mut(&c) {
            u.groups += 1;
        }
        let key = (c, g);
        let gid = GroupId(index_u32(self.groups.len()));
        self.groups.push(GroupState {
            cluster: key.0,
            name: key.1,
            partitions: Vec::new(),
            deleted: false,
            no_members_since: None,
        });
        self.group_ids.insert(key, gid);
        Ok(gid)
    }

    pub fn group_partition_id(&mut self, gid: GroupId, pid: PartitionId) -> Result<GroupPartitionId, RejectReason> {
        if let Some(id) = self.existing_group_partition(gid, pid) {
            return Ok(id);
        }
        if self.usage.group_partitions >= self.config.cardinality.max_group_partitions {
            return Err(self.limited(Limit::GroupPartitions));
        }
        self.usage.group_partitions += 1;
        let id = GroupPartitionId(index_u32(self.group_partitions.len()));
        self.group_partitions.push(GroupPartitionState {
            group: gid,
            partition: pid,
            window: CommitWindow::default(),
        });
        self.groups[gid.0 as usize].partitions.push(id);
        self.partitions[pid.0 as usize].groups.push((gid, id));
        Ok(id)
    }

    pub(super) fn existing_group_partition(&self, gid: GroupId, pid: PartitionId) -> Option<GroupPartitionId> {
        let groups = &self.partitions[pid.0 as usize].groups;
        groups.iter().find(|(g, _)| *g == gid).map(|&(_, id)| id)
    }

    pub(super) fn topic_name(&self, pid: PartitionId) -> &str {
        self.cluster_and_topic(pid).1
    }

    pub(super) fn cluster_and_topic(&self, pid: PartitionId) -> (&str, &str) {
        let t = &self.topics[self.partitions[pid.0 as usize].topic.0 as usize];
        (self.names.name(t.cluster), self.names.name(t.name))
    }

    /// Every group-partition, in the order they were first seen.
    /// Every live group-partition, in the order they were first seen.
    pub fn group_partitions(&self) -> impl Iterator<Item = GroupPartitionId> + '_ {
        (0..self.group_partitions.len())
            .map(|i| GroupPartitionId(i as u32))
            .filter(|id| self.is_live(*id))
    }

    pub(super) fn is_live(&self, id: GroupPartitionId) -> bool {
        let gp = &self.group_partitions[id.0 as usize];
        !self.groups[gp.group.0 as usize].deleted && !self.partitions[gp.partition.0 as usize].deleted
    }

    /// Every live group, in the order they were first seen.
    pub fn groups(&self) -> impl Iterator<Item = GroupId> + '_ {
        (0..self.groups.len())
            .map(|i| GroupId(i as u32))
            .filter(|id| !self.groups[id.0 as usize].deleted)
    }

    /// The groups with ids in `[from, from + n)`: a walk over every group in
    /// pieces, letting go of the engine between them (ids are never reused).
    pub fn groups_between(&self, from: u32, n: u32) -> impl Iterator<Item = GroupId> + '_ {
        let end = from.saturating_add(n).min(self.groups.len() as u32);
        (from.min(end)..end)
            .map(GroupId)
            .filter(|id| !self.groups[id.0 as usize].deleted)
    }

    /// Group ids handed out so far (tombstones included): where a walk in pieces ends.
    pub fn group_slots(&self) -> u32 {
        self.groups.len() as u32
    }

    /// Partition ids handed out so far (tombstones included).
    pub fn partition_slots(&self) -> u32 {
        self.partitions.len() as u32
    }

    /// The same for partitions.
    pub fn partitions_between(&self, from: u32, n: u32) -> impl Iterator<Item = PartitionId> + '_ {
        let end = from.saturating_add(n).min(self.partitions.len() as u32);
        (from.min(end)..end)
            .map(PartitionId)
            .filter(|id| !self.partitions[id.0 as usize].deleted)
    }

    pub fn names(&self, id: GroupPartitionId) -> GroupPartitionNames<'_> {
        let gp = &self.group_partitions[id.0 as usize];
        let g = &self.groups[gp.group.0 as usize];
        let p = &self.partitions[gp.partition.0 as usize];
        GroupPartitionNames {
            cluster: self.names.name(g.cluster),
            group: self.names.name(g.name),
            topic: self.topic_name(gp.partition),
            partition: p.partition,
        }
    }

    pub fn group_name(&self, id: GroupId) -> (&str, &str) {
        let g = &self.groups[id.0 as usize];
        (self.names.name(g.cluster), self.names.name(g.name))
    }

    /// Finds a group-partition by name without creating it.
    pub fn find(&self, cluster: &str, group: &str, topic: &str, partition: i32) -> Option<GroupPartitionId> {
        let (c, g, t) = (self.names.get(cluster)?, self.names.get(group)?, self.names.get(topic)?);
        let gid = *self.group_ids.get(&(c, g))?;
        let tid = *self.topic_ids.get(&(c, t))?;
        let pid = *self.partition_ids.get(&(tid, partition))?;
        self.existing_group_partition(gid, pid)
    }

    /// The group-partitions of the groups that read `topic`/`partition`.
    pub fn readers(&self, cluster: &str, topic: &str, partition: i32) -> Vec<GroupPartitionId> {
        let (Some(c), Some(t)) = (self.names.get(cluster), self.names.get(topic)) else {
            return Vec::new();
        };
        let Some(tid) = self.topic_ids.get(&(c, t)) else {
            return Vec::new();
        };
        let Some(pid) = self.partition_ids.get(&(*tid, partition)) else {
            return Vec::new();
        };
        self.partitions[pid.0 as usize]
            .groups
            .iter()
            .map(|&(_, gp)| gp)
            .collect()
    }

    /// Every live partition, in the order they were first seen.
    pub fn partitions(&self) -> impl Iterator<Item = PartitionId> + '_ {
        (0..self.partitions.len())
            .map(|i| PartitionId(i as u32))
            .filter(|id| !self.partitions[id.0 as usize].deleted)
    }

    /// Cluster, topic and partition number of a partition.
    pub fn partition_names(&self, pid: PartitionId) -> (&str, &str, i32) {
        let (cluster, topic) = self.cluster_and_topic(pid);
        (cluster, topic, self.partitions[pid.0 as usize].partition)
    }

    /// The recent commits the health rules read, oldest first.
    pub fn commits(&self, id: GroupPartitionId) -> impl Iterator<Item = crate::window::Commit> + '_ {
        self.group_partitions[id.0 as usize].window.iter()
    }

    /// The partition a group-partition reads.
    pub fn partition_of(&self, id: GroupPartitionId) -> PartitionId {
        self.group_partitions[id.0 as usize].partition
    }

    /// The group-partitions of one group.
    pub fn group_members(&self, id: GroupId) -> &[GroupPartitionId] {
        &self.groups[id.0 as usize].partitions
    }

    pub fn find_group(&self, cluster: &str, group: &str) -> Option<GroupId> {
        let (c, g) = (self.names.get(cluster)?, self.names.get(group)?);
        self.group_ids.get(&(c, g)).copied()
    }
}
