//! Pathway statistics: per 10 s bucket and pathway hash, the merged sketches of
//! every service instance that reported it, and the graph they draw.

use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use streamsight_core::pathway::PathwayPoint;
use streamsight_core::sketch::Sketch;
use streamsight_core::{Limit, LimitCounts};

#[derive(Debug, Default)]
pub struct Pathways {
    buckets: BTreeMap<(i64, u64), PathwayPoint>,
    /// Approximate bytes the buckets hold, against `PathwayLimits::max_bytes`.
    bytes: usize,
    /// Buckets per reporting service, against `PathwayLimits::max_services`.
    services: HashMap<String, usize>,
    limits: PathwayLimits,
    /// Points refused, by the limit that refused them.
    limited: LimitCounts,
}

/// What pathway statistics may hold. Over a limit, new points are refused and
/// counted; what is held is never evicted for them (retention prunes it).
#[derive(Copy, Clone, Debug)]
pub struct PathwayLimits {
    pub max_bytes: usize,
    pub max_services: usize,
}

impl Default for PathwayLimits {
    fn default() -> Self {
        Self {
            max_bytes: usize::MAX,
            max_services: usize::MAX,
        }
    }
}

/// What a point costs held in memory.
fn point_bytes(p: &PathwayPoint) -> usize {
    let sketches = [&p.edge_latency, &p.pathway_latency, &p.payload_size];
    let bins: usize = sketches.iter().map(|s| s.bins().len()).sum();
    std::mem::size_of::<PathwayPoint>()
        + bins * std::mem::size_of::<(f64, f64)>()
        + p.edge_tags
            .iter()
            .map(|t| t.len() + std::mem::size_of::<String>())
            .sum::<usize>()
        + p.service.len()
        + p.env.len()
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Quantiles {
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
}

impl Quantiles {
    fn of(s: &Sketch) -> Self {
        Self {
            p50: s.quantile(0.5),
            p95: s.quantile(0.95),
            p99: s.quantile(0.99),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Node {
    pub id: String,
    pub kind: &'static str,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Edge {
    pub from: String,
    pub to: String,
    /// `out` (a service producing to a topic) or `in` (a group consuming it).
    pub direction: String,
    pub group: Option<String>,
    pub env: String,
    pub count: f64,
    pub throughput_per_second: f64,
    pub edge_latency_seconds: Quantiles,
    pub pathway_latency_seconds: Quantiles,
    pub payload_size_bytes_avg: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Graph {
    pub from_ms: i64,
    pub to_ms: i64,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

#[derive(Default)]
struct EdgeAcc {
    edge: Sketch,
    pathway: Sketch,
    payload: Sketch,
    count: f64,
}

impl Pathways {
    pub fn limits(&self) -> PathwayLimits {
        self.limits
    }

    pub fn new(limits: PathwayLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    pub fn add(&mut self, point: PathwayPoint) {
        let added = point_bytes(&point);
        if self.bytes.saturating_add(added) > self.limits.max_bytes {
            self.limited.add(Limit::Pathways);
            return;
        }
        match self.buckets.entry((point.bucket_start_ms, point.hash)) {
            std::collections::btree_map::Entry::Occupied(mut e) => {
                let b = e.get_mut();
                let before = point_bytes(b);
                b.edge_latency.merge(&point.edge_latency);
                b.pathway_latency.merge(&point.pathway_latency);
                b.payload_size.merge(&point.payload_size);
                self.bytes = self.bytes - before + point_bytes(b);
            }
            std::collections::btree_map::Entry::Vacant(e) => {
                let full = self.services.len() >= self.limits.max_services;
                match self.services.get_mut(&point.service) {
                    Some(n) => *n += 1,
                    None if full => {
                        self.limited.add(Limit::Services);
                        return;
                    }
                    None => {
                        self.services.insert(point.service.clone(), 1);
                    }
                }
                self.bytes += added;
                e.insert(point);
            }
        }
    }

    /// Forgets buckets that started before `before_ms`.
    /// The buckets about the topics `keeps` accepts (or about none), as the
    /// records that make them again.
    pub fn export(&self, keeps: &dyn Fn(Option<&str>) -> bool) -> Vec<streamsight_core::Record> {
        let kept = self.buckets.values().filter(|p| keeps(p.topic()));
        kept.map(|p| streamsight_core::Record::Pathway {
            at: streamsight_core::Millis(p.bucket_start_ms),
            point: Box::new(p.clone()),
        })
        .collect()
    }

    pub fn prune(&mut self, before_ms: i64) {
        let kept = self.buckets.split_off(&(before_ms, 0));
        for p in std::mem::replace(&mut self.buckets, kept).into_values() {
            self.bytes -= point_bytes(&p);
            if let Some(n) = self.services.get_mut(&p.service) {
                *n -= 1;
                if *n == 0 {
                    self.services.remove(&p.service);
                }
            }
        }
    }

    pub fn limited(&self) -> &LimitCounts {
        &self.limited
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Buckets that started in `[from_ms, to_ms)`.
    pub fn points(&self, from_ms: i64, to_ms: i64) -> impl Iterator<Item = &PathwayPoint> {
        self.buckets.range((from_ms, 0)..(to_ms, 0)).map(|(_, p)| p)
    }

    /// Services and topics, joined by the Kafka edges seen in `[from_ms, to_ms)`.
    pub fn graph(&self, from_ms: i64, to_ms: i64) -> Graph {
        let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
        let mut edges: HashMap<(String, String, String, Option<String>, String), EdgeAcc> = HashMap::new();
        for p in self.points(from_ms, to_ms) {
            let (Some(topic), Some(direction)) = (p.tag("topic"), p.tag("direction")) else {
                continue;
            };
            let service = format!("service:{}", p.service);
            let topic_id = format!("topic:{topic}");
            nodes.entry(service.clone()).or_insert_with(|| Node {
                id: service.clone(),
                kind: "service",
                name: p.service.clone(),
            });
            nodes.entry(topic_id.clone()).or_insert_with(|| Node {
                id: topic_id.clone(),
                kind: "topic",
                name: topic.to_owned(),
            });
            let (from, to) = if direction == "in" {
                (topic_id, service)
            } else {
                (service, topic_id)
            };
            let key = (
                from,
                to,
                direction.to_owned(),
                p.tag("group").map(str::to_owned),
                p.env.clone(),
            );
            let acc = edges.entry(key).or_default();
            acc.edge.merge(&p.edge_latency);
            acc.pathway.merge(&p.pathway_latency);
            acc.payload.merge(&p.payload_size);
            acc.count += p.count();
        }
        let seconds = (to_ms.saturating_sub(from_ms) as f64 / 1000.0).max(1.0);
        let mut edges: Vec<Edge> = edges
            .into_iter()
            .map(|((from, to, direction, group, env), acc)| Edge {
                from,
                to,
                direction,
                group,
                env,
                count: acc.count,
                throughput_per_second: acc.count / seconds,
                edge_latency_seconds: Quantiles::of(&acc.edge),
                pathway_latency_seconds: Quantiles::of(&acc.pathway),
                payload_size_bytes_avg: (acc.payload.count() > 0.0).then(|| acc.payload.sum() / acc.payload.count()),
            })
            .collect();
        edges.sort_by(|a, b| (&a.from, &a.to, &a.group).cmp(&(&b.from, &b.to, &b.group)));
        Graph {
            from_ms,
            to_ms,
            nodes: nodes.into_values().collect(),
            edges,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamsight_wire::dsm::sketch::Mapping;

    fn point(start: i64, hash: u64, service: &str, tags: &[&str], latencies: &[f64]) -> PathwayPoint {
        let sketch = streamsight_wire::dsm::sketch::decode(&Mapping::default().encode(latencies)).unwrap();
        PathwayPoint {
            bucket_start_ms: start,
            bucket_ms: 10_000,
            hash,
            parent_hash: 0,
            service: service.into(),
            env: "prod".into(),
            edge_tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            edge_latency: sketch.clone(),
            pathway_latency: sketch,
            payload_size: Sketch::default(),
        }
    }

    #[test]
    fn producer_topic_consumer_graph() {
        let mut p = Pathways::default();
        p.add(point(
            0,
            1,
            "checkout",
            &["direction:out", "topic:orders", "type:kafka"],
            &[0.01],
        ));
        p.add(point(
            0,
            2,
            "billing",
            &["direction:in", "group:bill", "topic:orders", "type:kafka"],
            &[0.2, 0.4],
        ));
        // Another instance of billing, same pathway and bucket: merged.
        p.add(point(
            0,
            2,
            "billing",
            &["direction:in", "group:bill", "topic:orders", "type:kafka"],
            &[0.3],
        ));
        p.add(point(0, 3, "web", &["direction:out", "type:http"], &[0.3]));
        let g = p.graph(0, 10_000);
        let ids: Vec<&str> = g.nodes.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["service:billing", "service:checkout", "topic:orders"]);
        assert_eq!(g.edges.len(), 2);
        let consume = &g.edges[1];
        assert_eq!(
            (consume.from.as_str(), consume.to.as_str()),
            ("topic:orders", "service:billing")
        );
        assert_eq!(consume.group.as_deref(), Some("bill"));
        assert_eq!(consume.count, 3.0);
        let p50 = consume.edge_latency_seconds.p50.unwrap();
        assert!((p50 - 0.3).abs() < 0.01, "{p50}");
    }

    #[test]
    fn prune_forgets_old_buckets() {
        let mut p = Pathways::default();
        p.add(point(0, 1, "a", &["direction:out", "topic:t"], &[0.1]));
        p.add(point(10_000, 1, "a", &["direction:out", "topic:t"], &[0.1]));
        p.prune(10_000);
        assert_eq!(p.len(), 1);
    }
}
