//! Drop accounting in the collector: the SDKs' counts become stored facts, the
//! facts feed the core's [`Ledger`], and housekeeping reconciles closed windows.

use std::collections::VecDeque;
use streamsight_core::Record;
use streamsight_core::delivery::{Fact, Ledger, LedgerParams, PartitionKey, WindowReport};
use streamsight_core::failures::SendFailures;
use streamsight_core::{Engine, EngineEvent, Millis};
use streamsight_wire::dsm::payload::Payload;

/// Problem windows (something missing or duplicated) kept for the API.
/// When a payload arrived, and the times its points may carry: older ones would
/// be deleted by the next retention tick, newer ones are a clock gone wrong.
#[derive(Copy, Clone, Debug)]
pub struct Dates {
    pub received: Millis,
    pub oldest: Millis,
    pub newest: Millis,
}

impl Dates {
    /// Every time is accepted: for payloads this process made itself.
    pub fn any(received: Millis) -> Self {
        Self {
            received,
            oldest: Millis(i64::MIN),
            newest: Millis(i64::MAX),
        }
    }

    pub fn contains(&self, ms: i64) -> bool {
        (self.oldest.0..=self.newest.0).contains(&ms)
    }
}

const EVENTS_KEPT: usize = 1_000;

/// A payload's delivery facts, and how many were dated outside the accepted range.
#[derive(Debug, Default)]
pub struct Facts {
    pub records: Vec<Record>,
    pub out_of_range: usize,
}

/// The facts of a payload, as records. `cluster_of` places a topic whose sender
/// named no cluster (as commits are placed). Counts whose window or time is
/// outside `dates` are left out and counted.
pub fn facts<S: AsRef<str>>(p: &Payload<S>, dates: Dates, cluster_of: &dyn Fn(&str, &str) -> String) -> Facts {
    let d = &p.delivery;
    let received = dates.received;
    let mut facts = Vec::new();
    let mut out_of_range = 0;
    let mut dated = |ms: i64| {
        let ok = dates.contains(ms);
        out_of_range += usize::from(!ok);
        ok
    };
    for f in &p.failed_sends {
        let window_ms = if f.window_ms > 0 { f.window_ms } else { received.0 };
        if !dated(window_ms) {
            continue;
        }
        facts.push(Fact::FailedSends {
            cluster: cluster_of(f.cluster.as_ref(), f.topic.as_ref()),
            topic: f.topic.as_ref().to_owned(),
            partition: (f.partition >= 0).then_some(f.partition),
            window_ms,
            count: f.count,
            trace_ids: owned(&f.trace_ids),
            error: f.error.as_ref().to_owned(),
        });
    }
    for c in d
        .produced
        .iter()
        .filter(|c| c.partition >= 0 && c.first_offset >= 0 && c.count > 0)
    {
        if !dated(c.window_ms) {
            continue;
        }
        facts.push(Fact::Produced {
            cluster: cluster_of(d.cluster.as_ref(), c.topic.as_ref()),
            topic: c.topic.as_ref().to_owned(),
            partition: c.partition,
            window_ms: c.window_ms,
            count: c.count,
            first_offset: c.first_offset,
            last_offset: c.last_offset.max(c.first_offset),
        });
    }
    for c in d.consumed.iter().filter(|c| c.partition >= 0) {
        if !dated(c.window_ms) {
            continue;
        }
        facts.push(Fact::Consumed {
            cluster: cluster_of(d.cluster.as_ref(), c.topic.as_ref()),
            group: c.group.as_ref().to_owned(),
            topic: c.topic.as_ref().to_owned(),
            partition: c.partition,
            window_ms: c.window_ms,
            received: c.received,
            failed: c.failed,
            dead_lettered: c.dead_lettered,
            trace_ids: owned(&c.trace_ids),
        });
    }
    for s in d.skipped.iter().filter(|s| s.partition >= 0 && s.first_offset >= 0) {
        facts.push(Fact::Skipped {
            cluster: cluster_of(d.cluster.as_ref(), s.topic.as_ref()),
            group: s.group.as_ref().to_owned(),
            topic: s.topic.as_ref().to_owned(),
            partition: s.partition,
            first_offset: s.first_offset,
            last_offset: s.last_offset,
        });
    }
    for s in d.started.iter().filter(|s| s.partition >= 0 && s.first_offset >= 0) {
        if !dated(s.at_ms) {
            continue;
        }
        facts.push(Fact::Started {
            cluster: cluster_of(d.cluster.as_ref(), s.topic.as_ref()),
            group: s.group.as_ref().to_owned(),
            topic: s.topic.as_ref().to_owned(),
            partition: s.partition,
            first_offset: s.first_offset,
            at_ms: s.at_ms,
        });
    }
    Facts {
        records: facts
            .into_iter()
            .map(|fact| Record::Delivery {
                at: received,
                fact: Box::new(fact),
            })
            .collect(),
        out_of_range,
    }
}

fn owned<S: AsRef<str>>(strings: &[S]) -> Vec<String> {
    strings.iter().map(|s| s.as_ref().to_owned()).collect()
}

/// The ledger and the recent problem windows.
#[derive(Debug, Default)]
pub struct Deliveries {
    pub ledger: Ledger,
    pub events: VecDeque<WindowReport>,
    /// Failed sends per topic by error.
    pub failures: SendFailures,
}

/// The group's committed offset on a partition, as the engine knows it.
pub fn committed(engine: &Engine, cluster: &str, group: &str, topic: &str, partition: i32) -> Option<i64> {
    let id = engine.find(cluster, group, topic, partition)?;
    engine.commits(id).last().map(|c| c.offset)
}

impl Deliveries {
    pub fn new() -> Self {
        Self {
            ledger: Ledger::new(LedgerParams::default()),
            events: VecDeque::new(),
            failures: SendFailures::default(),
        }
    }

    /// Applies a stored fact, received at `at`. A start is compared with the
    /// group's commit now.
    pub fn apply(&mut self, fact: &Fact, at: Millis, engine: &Engine) {
        let l = &mut self.ledger;
        match fact {
            Fact::Produced {
                cluster,
                topic,
                partition,
                window_ms,
                count,
                first_offset,
                last_offset,
            } => l.produced(
                key(cluster, topic, Some(*partition)),
                *window_ms,
                *count,
                *first_offset,
                *last_offset,
            ),
            Fact::FailedSends {
                cluster,
                topic,
                partition,
                window_ms,
                count,
                trace_ids,
                error,
            } => {
                // When the collector heard of them: a send's window is a minute wide.
                self.failures
                    .record(cluster, topic, *partition, error, *count, at, trace_ids);
                l.failed_sends(key(cluster, topic, *partition), *window_ms, *count, trace_ids);
            }
            Fact::Consumed {
                cluster,
                group,
                topic,
                partition,
                window_ms,
                received,
                failed,
                dead_lettered,
                trace_ids,
            } => l.consumed(
                cluster,
                group,
                topic,
                *partition,
                *window_ms,
                *received,
                *failed,
                *dead_lettered,
                trace_ids,
            ),
            Fact::Skipped {
                cluster,
                group,
                topic,
                partition,
                first_offset,
                last_offset,
            } => l.skipped(cluster, group, topic, *partition, *first_offset, *last_offset),
            Fact::Started {
                cluster,
                group,
                topic,
                partition,
                first_offset,
                at_ms,
            } => {
                // The commit the consumer started from: the last one before it started,
                // not one it made since (both may arrive in the same payload).
                let c = engine
                    .find(cluster, group, topic, *partition)
                    .and_then(|id| engine.commits(id).filter(|c| c.at.0 <= *at_ms).last())
                    .map(|c| c.offset);
                l.started(cluster, group, topic, *partition, *first_offset, c);
            }
        }
    }

    /// Retention passing a group is the broker's evidence of expired records.
    pub fn engine_event(&mut self, e: &EngineEvent) {
        if let EngineEvent::DataLoss {
            cluster,
            group,
            topic,
            partition,
            committed_offset,
            log_start_offset,
            ..
        } = e
        {
            self.ledger.expired(
                cluster,
                group,
                topic,
                *partition,
                *committed_offset,
                log_start_offset - 1,
            );
        }
    }

    /// Keeps the newest problem windows within their bound.
    pub fn trim_events(&mut self) {
        let over = self.events.len().saturating_sub(EVENTS_KEPT);
        self.events.drain(..over);
    }

    /// Reconciles what is due; problem windows become events.
    pub fn reconcile(&mut self, now: Millis, engine: &Engine) -> Vec<WindowReport> {
        let done = self.ledger.reconcile(now, |c, g, t, p| committed(engine, c, g, t, p));
        for r in done.iter().filter(|r| r.missing.total() > 0 || r.duplicates > 0) {
            tracing::warn!(
                cluster = %r.cluster, group = %r.group, topic = %r.topic, partition = ?r.partition,
                window_start_ms = r.window_start_ms, missing = ?r.missing, duplicates = r.duplicates,
                "messages missing or duplicated"
            );
            if self.events.len() == EVENTS_KEPT {
                self.events.pop_front();
            }
            self.events.push_back(r.clone());
        }
        done
    }
}

fn key(cluster: &str, topic: &str, partition: Option<i32>) -> PartitionKey {
    PartitionKey {
        cluster: cluster.to_owned(),
        topic: topic.to_owned(),
        partition,
    }
}
