//! The journey index: traces by id, by 64-bit id, by the offset of each message
//! they touched, and by the traces that link to them. Tail-sampled: a trace is
//! decided once `decision_wait` has passed since it was first seen, so that an
//! error or a dead letter arriving after the healthy spans still keeps them.

use super::{LogLine, Span, TraceId};
use crate::time::Millis;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};

/// A span or a log line the index holds, as [`Journeys::export`] hands it on.
#[derive(Clone, Debug)]
pub enum Kept {
    Span(Box<Span>),
    Log(Box<LogLine>),
}

/// Keys are random trace ids and names from the network: foldhash, seeded per map.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

#[derive(Copy, Clone, Debug, PartialEq)]
pub struct JourneyLimits {
    /// Traces kept at most; the oldest go first beyond.
    pub max_traces: usize,
    /// Spans kept at most, over all traces; the oldest traces go first beyond.
    pub max_spans: usize,
    pub max_spans_per_trace: usize,
    pub max_logs_per_trace: usize,
    /// Traces not heard of for this long are forgotten.
    pub retention_ms: i64,
    /// How long after a trace is first seen it is decided.
    pub decision_wait_ms: i64,
    /// Share of healthy traces kept (0 to 1); every trace with an error, a
    /// failed send or a dead letter is kept.
    pub healthy_share: f64,
}

impl Default for JourneyLimits {
    fn default() -> Self {
        Self {
            // ~760 bytes of memory per span indexed (BENCHMARKS.md): ~230 MiB at most.
            max_traces: 100_000,
            max_spans: 300_000,
            max_spans_per_trace: 1_000,
            max_logs_per_trace: 200,
            retention_ms: 24 * 3_600_000,
            decision_wait_ms: 60_000,
            healthy_share: 0.1,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct JourneysStats {
    pub traces: usize,
    pub spans: usize,
    pub logs: usize,
    /// Healthy traces dropped by the sampling policy.
    pub sampled_out: u64,
    /// Traces forgotten for the limits (oldest first) or retention.
    pub evicted: u64,
    /// Spans or lines beyond a trace's limit.
    pub dropped: u64,
}

#[derive(Debug)]
struct Trace {
    spans: Vec<Span>,
    logs: Vec<LogLine>,
    first_seen: Millis,
    last_seen: Millis,
    /// An error, a failed send or a dead letter: kept whatever the sampling.
    notable: bool,
    decided: bool,
}

/// Everything one trace id finds: its spans and those of the traces linked to
/// it (a consumer's that links to the producer's span), its log lines.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Journey {
    pub trace_id: TraceId,
    /// Other traces whose spans are part of this message's path.
    pub linked_traces: Vec<TraceId>,
    pub spans: Vec<Span>,
    pub logs: Vec<LogLine>,
}

impl Journey {
    /// One journey of the parts of a trace kept on several nodes (each holds
    /// the spans of its shards' topics): spans, lines and linked traces of all,
    /// each once, spans and lines in time order.
    pub fn merge(parts: Vec<Journey>) -> Option<Journey> {
        let mut parts = parts.into_iter();
        let mut whole = parts.next()?;
        for part in parts {
            // A 128-bit id says more than its lower half.
            if whole.trace_id.is_short() && !part.trace_id.is_short() {
                whole.trace_id = part.trace_id;
            }
            whole.spans.extend(part.spans);
            whole.logs.extend(part.logs);
            whole.linked_traces.extend(part.linked_traces);
        }
        whole
            .spans
            .sort_by(|a, b| (a.start_ns, &a.span_id).cmp(&(b.start_ns, &b.span_id)));
        whole.spans.dedup();
        whole.logs.sort_by_key(|l| l.at);
        whole.logs.dedup();
        whole.linked_traces.sort();
        whole.linked_traces.dedup();
        let root = whole.trace_id;
        whole.linked_traces.retain(|t| *t != root);
        Some(whole)
    }
}

type OffsetKey = (String, i32, i64);

#[derive(Debug)]
pub struct Journeys {
    traces: Map<TraceId, Trace>,
    /// (first seen, trace) in arrival order: who goes first.
    order: VecDeque<(Millis, TraceId)>,
    by_low: Map<u64, TraceId>,
    by_offset: Map<OffsetKey, Vec<(String, TraceId)>>,
    /// A trace → the traces with a span linking to it.
    linked: Map<TraceId, Vec<TraceId>>,
    spans: usize,
    logs: usize,
    limits: JourneyLimits,
    stats: JourneysStats,
}

/// Room for one more, doubling from one: `Vec` would make room for four at the
/// first push, and most traces hold one or two spans (a span is ~270 bytes).
fn grow_by_doubling<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact(v.len().max(1));
    }
}

/// Traces linked to one trace, at most.
const MAX_LINKED: usize = 64;

impl Journeys {
    pub fn limits(&self) -> JourneyLimits {
        self.limits
    }

    pub fn new(limits: JourneyLimits) -> Self {
        Self {
            traces: Map::default(),
            order: VecDeque::new(),
            by_low: Map::default(),
            by_offset: Map::default(),
            linked: Map::default(),
            spans: 0,
            logs: 0,
            limits,
            stats: JourneysStats::default(),
        }
    }

    pub fn stats(&self) -> JourneysStats {
        JourneysStats {
            traces: self.traces.len(),
            spans: self.spans,
            logs: self.logs,
            ..self.stats.clone()
        }
    }

    /// The trace a (possibly 64-bit) id names.
    pub fn resolve(&self, id: TraceId) -> TraceId {
        if id.is_short()
            && let Some(long) = self.by_low.get(&id.low())
        {
            return *long;
        }
        id
    }

    fn trace(&mut self, id: TraceId, now: Millis) -> &mut Trace {
        if !self.traces.contains_key(&id) {
            self.order.push_back((now, id));
        }
        let t = self.traces.entry(id).or_insert_with(|| Trace {
            spans: Vec::new(),
            logs: Vec::new(),
            first_seen: now,
            last_seen: now,
            notable: false,
            decided: false,
        });
        t.last_seen = t.last_seen.max(now);
        t
    }

    /// A 128-bit trace takes over the 64-bit one with its lower half (spans of
    /// a Datadog tracer that sent only that half arrived first).
    fn adopt(&mut self, long: TraceId, now: Millis) {
        if long.is_short() || self.by_low.contains_key(&long.low()) {
            return;
        }
        self.by_low.insert(long.low(), long);
        let short = TraceId(u128::from(long.low()));
        if let Some(old) = self.traces.remove(&short) {
            let t = self.trace(long, now);
            t.notable |= old.notable;
            t.first_seen = t.first_seen.min(old.first_seen);
            for mut s in old.spans {
                s.trace_id = long;
                t.spans.push(s);
            }
            for mut l in old.logs {
                l.trace_id = long;
                t.logs.push(l);
            }
            for v in self.by_offset.values_mut() {
                for (_, id) in v.iter_mut().filter(|(_, id)| *id == short) {
                    *id = long;
                }
            }
        }
    }

    pub fn add_span(&mut self, mut span: Span, now: Millis) {
        self.adopt(span.trace_id, now);
        let id = self.resolve(span.trace_id);
        span.trace_id = id;
        let limit = self.limits.max_spans_per_trace;
        let t = self.trace(id, now);
        if t.spans.len() >= limit {
            self.stats.dropped += 1;
            return;
        }
        t.notable |= span.error.is_some();
        if let Some(m) = &span.messaging
            && let (Some(p), Some(o)) = (m.partition, m.offset)
        {
            let at = self.by_offset.entry((m.topic.clone(), p, o)).or_default();
            if !at.iter().any(|(c, x)| *x == id && *c == m.cluster) && at.len() < MAX_LINKED {
                at.push((m.cluster.clone(), id));
            }
        }
        for (to, _) in &span.links {
            let to = self.resolve(*to);
            let from = self.linked.entry(to).or_default();
            if !from.contains(&id) && from.len() < MAX_LINKED {
                from.push(id);
            }
        }
        let t = self.traces.get_mut(&id).expect("made above");
        grow_by_doubling(&mut t.spans);
        t.spans.push(span);
        self.spans += 1;
        self.enforce();
    }

    pub fn add_log(&mut self, mut line: LogLine, now: Millis) {
        self.adopt(line.trace_id, now);
        let id = self.resolve(line.trace_id);
        line.trace_id = id;
        let limit = self.limits.max_logs_per_trace;
        let t = self.trace(id, now);
        if t.logs.len() >= limit {
            self.stats.dropped += 1;
            return;
        }
        t.notable |= matches!(
            line.severity.to_ascii_lowercase().as_str(),
            "error" | "fatal" | "critical"
        );
        grow_by_doubling(&mut t.logs);
        t.logs.push(line);
        self.logs += 1;
        self.enforce();
    }

    /// The spans and lines held of the topics `keeps` accepts (lines, and
    /// spans about no topic, as about none), as records that taken in again
    /// (in order, [`Journeys::add_span`]) make the same traces: each trace's
    /// first at its first sighting and its last at its last. Sampling
    /// decisions are not kept: they are made again, alike.
    pub fn export(&self, keeps: &dyn Fn(Option<&str>) -> bool) -> Vec<(Millis, Kept)> {
        let mut kept = Vec::new();
        for (_, id) in &self.order {
            let Some(t) = self.traces.get(id) else { continue };
            let spans = t
                .spans
                .iter()
                .filter(|s| keeps(s.messaging.as_ref().map(|m| m.topic.as_str())));
            let logs = t.logs.iter().filter(|_| keeps(None));
            let start = kept.len();
            kept.extend(spans.map(|s| (t.first_seen, Kept::Span(Box::new(s.clone())))));
            kept.extend(logs.map(|l| (t.first_seen, Kept::Log(Box::new(l.clone())))));
            if kept.len() > start
                && let Some((at, _)) = kept.last_mut()
            {
                *at = t.last_seen;
            }
        }
        kept
    }

    /// Keeps `id` whatever the sampling (a failed send, a dead letter).
    pub fn mark_notable(&mut self, id: TraceId) {
        let id = self.resolve(id);
        if let Some(t) = self.traces.get_mut(&id) {
            t.notable = true;
        }
    }

    fn enforce(&mut self) {
        while self.traces.len() > self.limits.max_traces || self.spans > self.limits.max_spans {
            let Some((_, id)) = self.order.pop_front() else { break };
            if self.remove(id) {
                self.stats.evicted += 1;
            }
        }
    }

    fn remove(&mut self, id: TraceId) -> bool {
        let Some(t) = self.traces.remove(&id) else {
            return false;
        };
        self.spans -= t.spans.len();
        self.logs -= t.logs.len();
        for s in &t.spans {
            if let Some(m) = &s.messaging
                && let (Some(p), Some(o)) = (m.partition, m.offset)
            {
                let key = (m.topic.clone(), p, o);
                if let Some(v) = self.by_offset.get_mut(&key) {
                    v.retain(|(_, x)| *x != id);
                    if v.is_empty() {
                        self.by_offset.remove(&key);
                    }
                }
            }
            for (to, _) in &s.links {
                let to = self.resolve(*to);
                if let Some(v) = self.linked.get_mut(&to) {
                    v.retain(|x| *x != id);
                }
            }
        }
        self.linked.remove(&id);
        if !id.is_short() && self.by_low.get(&id.low()) == Some(&id) {
            self.by_low.remove(&id.low());
        }
        true
    }

    /// Decides the traces whose wait is over (kept when notable, or for the
    /// healthy share by their id's random bits), and forgets those past retention.
    pub fn housekeep(&mut self, now: Millis) {
        let share = (self.limits.healthy_share.clamp(0.0, 1.0) * 10_000.0) as u64;
        // A journey is kept whole: a trace linked to a notable one (the
        // producer's trace a failed consumer's links to, or the consumers'
        // traces of a failed send) is kept with it.
        let mut notable: std::collections::HashSet<TraceId> = std::collections::HashSet::new();
        for (id, t) in self.traces.iter().filter(|(_, t)| t.notable) {
            notable.insert(*id);
            notable.extend(self.linked.get(id).into_iter().flatten().copied());
            notable.extend(t.spans.iter().flat_map(|s| &s.links).map(|(to, _)| self.resolve(*to)));
        }
        let mut drop = Vec::new();
        for (id, t) in &mut self.traces {
            if now.since(t.last_seen) >= self.limits.retention_ms {
                drop.push((*id, false));
            } else if !t.decided && now.since(t.first_seen) >= self.limits.decision_wait_ms {
                t.decided = true;
                // Spans none of which touches a message (nor links to one) are no
                // journey's: a trace of only log lines is kept (for the SDK's
                // records, lines may be all there is).
                let messaging = t.spans.is_empty()
                    || self.linked.contains_key(id)
                    || t.spans.iter().any(|s| s.messaging.is_some() || !s.links.is_empty());
                if !messaging || (!notable.contains(id) && id.low() % 10_000 >= share) {
                    drop.push((*id, true));
                }
            }
        }
        for (id, sampled) in drop {
            if self.remove(id) {
                if sampled {
                    self.stats.sampled_out += 1;
                } else {
                    self.stats.evicted += 1;
                }
            }
        }
        let traces = &self.traces;
        self.order.retain(|(_, id)| traces.contains_key(id));
    }

    /// The traces that touched `topic`/`partition`/`offset` (on `cluster`, or
    /// on any when the span did not say).
    pub fn at_offset(&self, cluster: Option<&str>, topic: &str, partition: i32, offset: i64) -> Vec<TraceId> {
        let key = (topic.to_owned(), partition, offset);
        self.by_offset
            .get(&key)
            .into_iter()
            .flatten()
            .filter(|(c, _)| cluster.is_none_or(|want| c.is_empty() || c == want))
            .map(|(_, id)| *id)
            .collect()
    }

    /// The journey of `id`, time-ordered; `None` when nothing is known of it.
    /// A consumer's trace that links to a producer's names the producer's
    /// journey: asked by either, the answer is the producer's trace with every
    /// trace linked to it.
    pub fn journey(&self, id: TraceId) -> Option<Journey> {
        let id = self.resolve(id);
        let root = self
            .traces
            .get(&id)
            .and_then(|t| {
                t.spans
                    .iter()
                    .flat_map(|s| &s.links)
                    .map(|(to, _)| self.resolve(*to))
                    .next()
            })
            .unwrap_or(id);
        let own = self.traces.get(&root);
        let mut linked: Vec<TraceId> = self.linked.get(&root).cloned().unwrap_or_default();
        if id != root && !linked.contains(&id) {
            linked.push(id);
        }
        if own.is_none() && linked.iter().all(|l| !self.traces.contains_key(l)) {
            return None;
        }
        let mut j = Journey {
            trace_id: root,
            linked_traces: linked.clone(),
            ..Journey::default()
        };
        for t in own.into_iter().chain(linked.iter().filter_map(|l| self.traces.get(l))) {
            j.spans.extend(t.spans.iter().cloned());
            j.logs.extend(t.logs.iter().cloned());
        }
        j.spans.sort_by_key(|s| (s.start_ns, s.span_id));
        j.logs.sort_by_key(|l| l.at);
        Some(j)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Messaging, Operation, Source};
    use super::*;

    fn span(trace: u128, id: u64, op: Operation, offset: Option<i64>) -> Span {
        Span {
            trace_id: TraceId(trace),
            span_id: id,
            parent_id: 0,
            name: format!("{op:?}"),
            service: "svc".into(),
            start_ns: i64::try_from(id).unwrap() * 1_000_000,
            duration_ns: 1_000,
            error: None,
            messaging: Some(Messaging {
                topic: "orders".into(),
                partition: Some(0),
                offset,
                operation: Some(op),
                ..Messaging::default()
            }),
            links: Vec::new(),
            source: Source::Otlp,
        }
    }

    const LONG: u128 = 0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c;

    #[test]
    fn a_datadog_id_an_otel_link_and_an_offset_find_one_journey() {
        let mut j = Journeys::new(JourneyLimits::default());
        // A Datadog tracer's span with only the lower half, first.
        let mut dd = span(u128::from(LONG as u64), 1, Operation::Send, Some(41));
        dd.source = Source::Datadog;
        j.add_span(dd, Millis(0));
        j.add_span(span(LONG, 2, Operation::Send, None), Millis(1));
        // A consumer's span in a trace of its own, linked to the producer's.
        let mut process = span(7, 3, Operation::Process, Some(41));
        process.links = vec![(TraceId(LONG), 2)];
        j.add_span(process, Millis(2));
        let journey = j.journey(TraceId(u128::from(LONG as u64))).unwrap();
        assert_eq!(journey.trace_id, TraceId(LONG));
        assert_eq!(journey.spans.iter().map(|s| s.span_id).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(journey.linked_traces, [TraceId(7)]);
        assert_eq!(
            j.journey(TraceId(7)),
            Some(journey.clone()),
            "asked by the consumer's trace: the same journey"
        );
        let mut at = j.at_offset(None, "orders", 0, 41);
        at.sort();
        assert_eq!(at, [TraceId(7), TraceId(LONG)]);
        assert!(j.at_offset(Some("prod"), "orders", 0, 42).is_empty());
    }

    #[test]
    fn tail_sampling_keeps_errors_that_arrive_late_and_a_share_of_the_rest() {
        let limits = JourneyLimits {
            healthy_share: 0.0,
            ..JourneyLimits::default()
        };
        let mut j = Journeys::new(limits);
        j.add_span(span(10_001, 1, Operation::Send, Some(1)), Millis(0));
        j.add_span(span(10_002, 1, Operation::Send, Some(2)), Millis(0));
        let mut failed = span(10_002, 2, Operation::Process, Some(2));
        failed.error = Some("ValueError".into());
        j.add_span(failed, Millis(30_000));
        j.housekeep(Millis(30_000));
        let mut unrelated = span(10_003, 1, Operation::Send, None);
        unrelated.messaging = None;
        unrelated.error = Some("timeout".into());
        j.add_span(unrelated, Millis(0));
        assert_eq!(j.stats().traces, 3, "undecided until the wait is over");
        j.housekeep(Millis(61_000));
        assert!(j.journey(TraceId(10_001)).is_none(), "healthy, outside the share");
        assert!(j.journey(TraceId(10_003)).is_none(), "no message in it, error or not");
        assert_eq!(j.journey(TraceId(10_002)).unwrap().spans.len(), 2);
        assert!(
            j.at_offset(None, "orders", 0, 1).is_empty(),
            "its offset forgotten with it"
        );
        assert_eq!(j.stats().sampled_out, 2);
        j.housekeep(Millis(61_000 + 24 * 3_600_000));
        assert_eq!(j.stats().traces, 0, "past retention");
    }

    #[test]
    fn a_failed_consumer_keeps_the_producer_trace_it_links_to() {
        let limits = JourneyLimits {
            healthy_share: 0.0,
            ..JourneyLimits::default()
        };
        let mut j = Journeys::new(limits);
        // The producer's healthy trace, and a consumer's own trace linked to it
        // whose processing logged an error.
        j.add_span(span(LONG, 1, Operation::Send, Some(41)), Millis(0));
        let mut process = span(7, 2, Operation::Process, Some(41));
        process.links = vec![(TraceId(LONG), 1)];
        j.add_span(process, Millis(10));
        j.add_log(
            LogLine {
                trace_id: TraceId(7),
                span_id: Some(2),
                at: Millis(10),
                severity: "ERROR".into(),
                body: "refund failed".into(),
                service: "refund-svc".into(),
                source: Source::Otlp,
            },
            Millis(10),
        );
        // And a healthy pair, dropped together.
        j.add_span(span(20, 1, Operation::Send, Some(42)), Millis(0));
        let mut healthy = span(21, 2, Operation::Process, Some(42));
        healthy.links = vec![(TraceId(20), 1)];
        j.add_span(healthy, Millis(10));
        j.housekeep(Millis(61_000));
        let kept = j
            .journey(TraceId(LONG))
            .expect("the producer's trace is kept with its failed consumer");
        assert_eq!(kept.spans.len(), 2);
        assert_eq!(kept.linked_traces, [TraceId(7)]);
        assert!(j.journey(TraceId(20)).is_none() && j.journey(TraceId(21)).is_none());
    }

    #[test]
    fn bounded_whatever_arrives() {
        let limits = JourneyLimits {
            max_traces: 100,
            max_spans: 250,
            max_spans_per_trace: 3,
            ..JourneyLimits::default()
        };
        let mut j = Journeys::new(limits);
        for t in 1..=1_000u128 {
            for s in 0..5 {
                j.add_span(span(t, s, Operation::Send, Some(i64::try_from(t).unwrap())), Millis(0));
            }
        }
        let stats = j.stats();
        assert!(stats.traces <= 100 && stats.spans <= 250, "{stats:?}");
        assert!(j.journey(TraceId(1_000)).is_some(), "the newest kept");
        assert!(j.journey(TraceId(1)).is_none(), "the oldest went first");
        assert_eq!(j.by_offset.len(), stats.traces, "no index entry outlives its trace");
    }
}
