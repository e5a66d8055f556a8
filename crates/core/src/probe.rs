//! The end-to-end probe's accounting, per partition of the probe topic: records
//! sent with a sequence number and creation time, acknowledged, received back,
//! lost (not received within the SLA, or jumped over by a later one, as Xinfra
//! Monitor counts them) and duplicated, with produce, round-trip and commit
//! latencies. Pure: the adapter that talks to Kafka hands it times.

use crate::time::Millis;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Latencies kept per partition and kind for quantiles.
const LATENCIES_KEPT: usize = 1_024;
/// Received sequence numbers remembered, to tell a duplicate from a late record.
const SEEN_KEPT: usize = 4_096;

#[derive(Debug, Default)]
struct Latencies(VecDeque<i64>);

impl Latencies {
    fn add(&mut self, ms: i64) {
        if self.0.len() == LATENCIES_KEPT {
            self.0.pop_front();
        }
        self.0.push_back(ms.max(0));
    }

    fn summary(&self) -> Option<LatencySummary> {
        if self.0.is_empty() {
            return None;
        }
        let mut v: Vec<i64> = self.0.iter().copied().collect();
        v.sort_unstable();
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0;
        Some(LatencySummary {
            p50_seconds: q(0.5),
            p99_seconds: q(0.99),
            max_seconds: q(1.0),
            last_seconds: *self.0.back().unwrap_or(&0) as f64 / 1000.0,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatencySummary {
    pub p50_seconds: f64,
    pub p99_seconds: f64,
    pub max_seconds: f64,
    pub last_seconds: f64,
}

#[derive(Debug, Default)]
struct Pending {
    created: Millis,
    acked: bool,
}

#[derive(Debug, Default)]
struct PartitionProbe {
    pending: BTreeMap<u64, Pending>,
    seen: BTreeSet<u64>,
    highest_received: Option<u64>,
    sent: u64,
    acked: u64,
    produce_errors: u64,
    received: u64,
    lost: u64,
    duplicated: u64,
    late: u64,
    last_received_at: Option<Millis>,
    last_lost_at: Option<Millis>,
    produce: Latencies,
    roundtrip: Latencies,
}

impl PartitionProbe {
    /// Counts these pending records lost at `at`.
    fn lose(&mut self, seqs: &[u64], at: Millis) {
        for s in seqs {
            self.pending.remove(s);
        }
        if !seqs.is_empty() {
            self.lost += seqs.len() as u64;
            self.last_lost_at = Some(at);
        }
    }
}

/// How one partition of the probe topic is doing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartitionProbeReport {
    pub partition: i32,
    /// `ok`, `degraded` (a loss or produce error within the SLA), or `down`
    /// (nothing came back within the SLA while records were sent).
    pub status: &'static str,
    pub sent: u64,
    pub acked: u64,
    pub produce_errors: u64,
    pub received: u64,
    pub lost: u64,
    pub duplicated: u64,
    /// Received after they had been counted lost.
    pub late: u64,
    pub in_flight: usize,
    pub produce_latency: Option<LatencySummary>,
    pub roundtrip_latency: Option<LatencySummary>,
    #[serde(rename = "last_received_at_ms")]
    pub last_received_at: Option<Millis>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbeReport {
    pub partitions: Vec<PartitionProbeReport>,
    pub commit_latency: Option<LatencySummary>,
    pub commit_errors: u64,
}

#[derive(Debug)]
pub struct ProbeTracker {
    sla_ms: i64,
    partitions: BTreeMap<i32, PartitionProbe>,
    commit: Latencies,
    commit_errors: u64,
    last_error_at: BTreeMap<i32, Millis>,
}

impl ProbeTracker {
    pub fn new(sla_ms: i64) -> Self {
        Self {
            sla_ms,
            partitions: BTreeMap::new(),
            commit: Latencies::default(),
            commit_errors: 0,
            last_error_at: BTreeMap::new(),
        }
    }

    fn partition(&mut self, p: i32) -> &mut PartitionProbe {
        self.partitions.entry(p).or_default()
    }

    pub fn sent(&mut self, partition: i32, seq: u64, created: Millis) {
        let p = self.partition(partition);
        p.sent += 1;
        p.pending.insert(seq, Pending { created, acked: false });
    }

    pub fn acked(&mut self, partition: i32, seq: u64, at: Millis) {
        let p = self.partition(partition);
        p.acked += 1;
        if let Some(pending) = p.pending.get_mut(&seq) {
            pending.acked = true;
            p.produce.add(at.since(pending.created));
        }
    }

    /// The send failed: never in Kafka, so never to be received.
    pub fn produce_failed(&mut self, partition: i32, seq: u64, at: Millis) {
        let p = self.partition(partition);
        p.produce_errors += 1;
        p.pending.remove(&seq);
        self.last_error_at.insert(partition, at);
    }

    pub fn received(&mut self, partition: i32, seq: u64, created: Millis, at: Millis) {
        let p = self.partition(partition);
        if p.seen.contains(&seq) {
            p.duplicated += 1;
            return;
        }
        p.seen.insert(seq);
        if p.seen.len() > SEEN_KEPT
            && let Some(&oldest) = p.seen.iter().next()
        {
            p.seen.remove(&oldest);
        }
        p.received += 1;
        p.last_received_at = Some(at);
        p.roundtrip.add(at.since(created));
        if p.pending.remove(&seq).is_none() {
            p.late += 1;
        }
        // A partition is read in order: acknowledged records before this one
        // that have not come are lost (sequence gap).
        let jumped: Vec<u64> = p
            .pending
            .range(..seq)
            .filter(|(_, x)| x.acked)
            .map(|(&s, _)| s)
            .collect();
        p.lose(&jumped, at);
        p.highest_received = p.highest_received.max(Some(seq));
    }

    pub fn committed(&mut self, latency_ms: i64) {
        self.commit.add(latency_ms);
    }

    pub fn commit_failed(&mut self) {
        self.commit_errors += 1;
    }

    /// Counts as lost what was not received within the SLA.
    pub fn expire(&mut self, now: Millis) {
        let sla = self.sla_ms;
        for p in self.partitions.values_mut() {
            let overdue: Vec<u64> = p
                .pending
                .iter()
                .filter(|(_, x)| now.since(x.created) > sla)
                .map(|(&s, _)| s)
                .collect();
            p.lose(&overdue, now);
        }
    }

    pub fn report(&self, now: Millis) -> ProbeReport {
        let partitions = self
            .partitions
            .iter()
            .map(|(&partition, p)| {
                let recent = |t: Option<Millis>| t.is_some_and(|t| now.since(t) <= self.sla_ms);
                let silent = p.sent > 0 && !recent(p.last_received_at);
                let status = if silent {
                    "down"
                } else if recent(p.last_lost_at) || recent(self.last_error_at.get(&partition).copied()) {
                    "degraded"
                } else {
                    "ok"
                };
                PartitionProbeReport {
                    partition,
                    status,
                    sent: p.sent,
                    acked: p.acked,
                    produce_errors: p.produce_errors,
                    received: p.received,
                    lost: p.lost,
                    duplicated: p.duplicated,
                    late: p.late,
                    in_flight: p.pending.len(),
                    produce_latency: p.produce.summary(),
                    roundtrip_latency: p.roundtrip.summary(),
                    last_received_at: p.last_received_at,
                }
            })
            .collect();
        ProbeReport {
            partitions,
            commit_latency: self.commit.summary(),
            commit_errors: self.commit_errors,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: i64) -> Millis {
        Millis(v)
    }

    #[test]
    fn round_trips_losses_gaps_and_duplicates() {
        let mut t = ProbeTracker::new(1_000);
        for seq in 0..5 {
            t.sent(0, seq, ms(seq as i64 * 100));
            t.acked(0, seq, ms(seq as i64 * 100 + 10));
        }
        t.received(0, 0, ms(0), ms(50));
        t.received(0, 0, ms(0), ms(60));
        // 1 and 2 are jumped over: lost at once.
        t.received(0, 3, ms(300), ms(350));
        t.expire(ms(1_300));
        assert_eq!(t.report(ms(1_300)).partitions[0].lost, 2, "seq 4 is not overdue yet");
        t.expire(ms(1_500));
        let r = &t.report(ms(1_300)).partitions[0];
        assert_eq!((r.sent, r.acked, r.received, r.duplicated), (5, 5, 2, 1));
        assert_eq!(r.lost, 2 + 1, "two jumped, seq 4 past the SLA");
        assert_eq!(r.produce_latency.as_ref().unwrap().p50_seconds, 0.01);
        assert_eq!(r.roundtrip_latency.as_ref().unwrap().max_seconds, 0.05);
        assert_eq!(r.status, "degraded");
        assert_eq!(t.report(ms(5_000)).partitions[0].status, "down");
    }

    #[test]
    fn produce_errors_are_not_losses() {
        let mut t = ProbeTracker::new(1_000);
        t.sent(1, 0, ms(0));
        t.produce_failed(1, 0, ms(5));
        t.expire(ms(10_000));
        let r = &t.report(ms(10_000)).partitions[0];
        assert_eq!((r.produce_errors, r.lost, r.in_flight), (1, 0, 0));
    }
}
