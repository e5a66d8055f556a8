//! The journeys' index: spans and log lines from the log, a feature the
//! writer applies records to.

use std::sync::Mutex;
use streamsight_core::journey::{Journey, Journeys, JourneysStats, Kept, TraceId};
use streamsight_core::{Millis, Record};
use streamsight_node::config::journeys::JourneysConfig;
use streamsight_node::sync::lock;
use streamsight_node::{Feature, Shared};

/// The journeys service of a node, installed with every tenant.
pub fn of(shared: &Shared) -> &JourneyService {
    shared
        .feature::<JourneyService>()
        .expect("the collector installs the journeys feature on every node")
}

/// The journeys service: the index, fed by stored records.
#[derive(Debug)]
pub struct JourneyService {
    index: Mutex<Journeys>,
}

impl JourneyService {
    pub fn new(config: &JourneysConfig) -> Self {
        Self {
            index: Mutex::new(Journeys::new(config.limits())),
        }
    }

    /// Forgets every trace.
    pub fn reset(&self) {
        let mut index = lock(&self.index);
        *index = Journeys::new(index.limits());
    }

    /// The spans and lines held of the shards, as records.
    pub fn export(&self, shards: &streamsight_core::shard::Shards) -> Vec<Record> {
        let kept = lock(&self.index).export(&|topic| shards.keeps(topic));
        kept.into_iter()
            .map(|(at, k)| match k {
                Kept::Span(span) => Record::Span { at, span },
                Kept::Log(line) => Record::Log { at, line },
            })
            .collect()
    }

    /// Forgets the shards no longer held.
    pub fn retain(&self, shards: &streamsight_core::shard::Shards) {
        let kept = self.export(shards);
        self.reset();
        self.take(kept);
    }

    /// The spans and lines of records others still need (copied in).
    pub fn apply(&self, records: &[Record]) {
        self.take(
            records
                .iter()
                .filter(|r| matches!(r, Record::Span { .. } | Record::Log { .. }))
                .cloned()
                .collect(),
        );
    }

    /// The spans and lines of records nobody needs after: they move in.
    pub fn take(&self, records: Vec<Record>) {
        if !records
            .iter()
            .any(|r| matches!(r, Record::Span { .. } | Record::Log { .. }))
        {
            return;
        }
        let mut index = lock(&self.index);
        for r in records {
            match r {
                Record::Span { at, span } => index.add_span(*span, at),
                Record::Log { at, line } => index.add_log(*line, at),
                _ => {}
            }
        }
    }

    /// Marks `notable` traces (ones the collector knows went wrong) before
    /// sampling decides, then decides and forgets.
    pub fn decide(&self, notable: Vec<TraceId>, now: Millis) {
        let mut index = lock(&self.index);
        for id in notable {
            index.mark_notable(id);
        }
        index.housekeep(now);
    }

    pub fn stats(&self) -> JourneysStats {
        lock(&self.index).stats()
    }

    pub fn journey(&self, id: TraceId) -> Option<Journey> {
        lock(&self.index).journey(id)
    }

    pub fn at_offset(&self, cluster: Option<&str>, topic: &str, partition: i32, offset: i64) -> Vec<TraceId> {
        lock(&self.index).at_offset(cluster, topic, partition, offset)
    }
}

impl Feature for JourneyService {
    fn name(&self) -> &'static str {
        "journeys"
    }

    fn apply(&self, records: &[Record]) {
        JourneyService::apply(self, records);
    }

    fn take(&self, records: Vec<Record>) {
        JourneyService::take(self, records);
    }

    fn export(&self, shards: &streamsight_core::shard::Shards) -> Vec<Record> {
        JourneyService::export(self, shards)
    }

    fn retain(&self, shards: &streamsight_core::shard::Shards) {
        JourneyService::retain(self, shards);
    }

    /// What the store holds against its limits (`[serve.journeys]`), and what
    /// it let go: beside the process's RSS, a store filling to its bound.
    fn metrics(&self, out: &mut String, _now: Millis) {
        use streamsight_http::prometheus::Family;
        let s = self.stats();
        let mut held = Family::new(
            "streamsight_journeys_held",
            "gauge",
            "What the journeys store holds now, by what.",
        );
        for (what, n) in [("traces", s.traces), ("spans", s.spans), ("logs", s.logs)] {
            held.sample(&format!("what=\"{what}\""), n);
        }
        held.write(out);
        let mut let_go = Family::new(
            "streamsight_journeys_let_go_total",
            "counter",
            "Traces and spans the journeys store let go, by why.",
        );
        for (why, n) in [
            ("sampled_out", s.sampled_out),
            ("evicted", s.evicted),
            ("dropped", s.dropped),
        ] {
            let_go.sample(&format!("why=\"{why}\""), n);
        }
        let_go.write(out);
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
