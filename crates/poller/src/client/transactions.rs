//! Who holds an open transaction. For each partition whose last stable offset
//! stands below its end, DescribeProducers on its leader names the producer
//! whose transaction starts there; ListTransactions on every broker gives that
//! producer's transactional id (each broker lists the transactions it
//! coordinates), and DescribeTransactions on the broker that listed it, its
//! timeout. Only held partitions are asked
//! about: a cluster with no open transaction costs nothing more.

use super::ClusterClient;
use crate::snapshot::{Snapshot, TransactionHolder};
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeTransactionsRequest, ListTransactionsRequest, ProducerId, TopicName,
    TransactionalId, describe_producers_request::TopicRequest,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, HashMap};

/// Held partitions asked about in one poll: beyond it, the rest are named by
/// later polls (the first ones stay held while they matter).
const MAX_HELD_PARTITIONS: usize = 1_000;

impl ClusterClient {
    pub(super) async fn transaction_holders(&mut self, snap: &mut Snapshot) {
        // The held partitions by leader, with the offset each is held at.
        let mut held: BTreeMap<i32, BTreeMap<String, Vec<i32>>> = BTreeMap::new();
        let mut at: HashMap<(String, i32), i64> = HashMap::new();
        for t in &snap.topics {
            for p in &t.partitions {
                if let (Some(stable), Some(end)) = (p.stable, p.end)
                    && stable < end
                    && p.leader >= 0
                    && at.len() < MAX_HELD_PARTITIONS
                {
                    held.entry(p.leader)
                        .or_default()
                        .entry(t.name.clone())
                        .or_default()
                        .push(p.partition);
                    at.insert((t.name.clone(), p.partition), stable);
                }
            }
        }
        if at.is_empty() {
            return;
        }
        let mut work = Vec::new();
        for (leader, topics) in held {
            let Some(addr) = self.brokers.get(&leader).cloned() else {
                continue;
            };
            if !self.speaks::<DescribeProducersRequest>(&addr).await {
                continue;
            }
            let request = DescribeProducersRequest::default().with_topics(
                topics
                    .into_iter()
                    .map(|(name, parts)| {
                        TopicRequest::default()
                            .with_name(TopicName(StrBytes::from_string(name)))
                            .with_partition_indexes(parts)
                    })
                    .collect(),
            );
            work.push((addr, vec![request]));
        }
        // The producer whose transaction starts at the held offset.
        let mut holders: HashMap<(String, i32), TransactionHolder> = HashMap::new();
        for (_, answers) in self.fan_out(work).await {
            let Ok(answers) = answers else { continue };
            for t in answers.into_iter().flat_map(|a| a.topics) {
                for p in t.partitions.into_iter().filter(|p| p.error_code == 0) {
                    let key = (t.name.0.to_string(), p.partition_index);
                    let Some(&stable) = at.get(&key) else { continue };
                    if let Some(s) = p.active_producers.iter().find(|s| s.current_txn_start_offset == stable) {
                        holders.insert(
                            key,
                            TransactionHolder {
                                producer_id: s.producer_id.0,
                                producer_epoch: s.producer_epoch,
                                first_offset: stable,
                                transactional_id: None,
                                timeout_ms: None,
                            },
                        );
                    }
                }
            }
        }
        if holders.is_empty() {
            return;
        }
        self.name_transactions(&mut holders).await;
        for t in &mut snap.topics {
            for p in &mut t.partitions {
                if let Some(h) = holders.remove(&(t.name.clone(), p.partition)) {
                    p.open_transaction = Some(h);
                }
            }
        }
    }

    /// The transactional ids of the holders' producers, from the brokers that
    /// coordinate them, and each transaction's timeout.
    async fn name_transactions(&mut self, holders: &mut HashMap<(String, i32), TransactionHolder>) {
        let mut producers: Vec<i64> = holders.values().map(|h| h.producer_id).collect();
        producers.sort_unstable();
        producers.dedup();
        let list = ListTransactionsRequest::default()
            .with_producer_id_filters(producers.iter().map(|&id| ProducerId(id)).collect())
            .with_duration_filter(-1);
        let mut work = Vec::new();
        for addr in self.brokers.values().cloned().collect::<Vec<_>>() {
            if self.speaks::<ListTransactionsRequest>(&addr).await {
                work.push((addr, vec![list.clone()]));
            }
        }
        // Producer id to its transactional id, and the broker coordinating it.
        let mut named: HashMap<i64, (String, String)> = HashMap::new();
        for (addr, answers) in self.fan_out(work).await {
            let Ok(answers) = answers else { continue };
            for s in answers
                .into_iter()
                .filter(|a| a.error_code == 0)
                .flat_map(|a| a.transaction_states)
            {
                if producers.binary_search(&s.producer_id.0).is_ok() {
                    named.insert(s.producer_id.0, (s.transactional_id.0.to_string(), addr.clone()));
                }
            }
        }
        let mut by_coordinator: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (id, addr) in named.values() {
            by_coordinator.entry(addr.clone()).or_default().push(id.clone());
        }
        let mut work = Vec::new();
        for (addr, ids) in by_coordinator {
            if self.speaks::<DescribeTransactionsRequest>(&addr).await {
                let ids = ids
                    .into_iter()
                    .map(|id| TransactionalId(StrBytes::from_string(id)))
                    .collect();
                work.push((
                    addr,
                    vec![DescribeTransactionsRequest::default().with_transactional_ids(ids)],
                ));
            }
        }
        // Producer id to its transaction's timeout.
        let mut described: HashMap<i64, i32> = HashMap::new();
        for (_, answers) in self.fan_out(work).await {
            let Ok(answers) = answers else { continue };
            for s in answers.into_iter().flat_map(|a| a.transaction_states) {
                // -1: no transaction in progress (it ended since it was listed).
                if s.error_code == 0 && s.transaction_start_time_ms >= 0 {
                    described.insert(s.producer_id.0, s.transaction_timeout_ms);
                }
            }
        }
        for h in holders.values_mut() {
            h.transactional_id = named.get(&h.producer_id).map(|(id, _)| id.clone());
            h.timeout_ms = described.get(&h.producer_id).copied();
        }
    }
}
