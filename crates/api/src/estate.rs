//! The estate's partitions, pathway graph and drop accounting; on a sharded
//! log, of every shard.

use crate::filters::{LagFilter, ShardsOnly};
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use streamsight_core::{Millis, PartitionReport};
use streamsight_http::fanout;
use streamsight_http::query::{ApiQuery, with_coverage};
use streamsight_node::Shared;
use streamsight_node::clock;

#[derive(Debug, Serialize, Deserialize)]
struct PartitionRow {
    cluster: String,
    topic: String,
    partition: i32,
    #[serde(flatten)]
    report: PartitionReport,
}

fn partition_rows(shared: &Shared, now: Millis, shards: Option<&BTreeSet<u32>>) -> Vec<PartitionRow> {
    let engine = shared.lag.engine();
    engine
        .partitions()
        .filter_map(|pid| {
            let (cluster, topic, partition) = engine.partition_names(pid);
            fanout::in_shards(shared, shards, topic).then(|| PartitionRow {
                cluster: cluster.to_owned(),
                topic: topic.to_owned(),
                partition,
                report: engine.evaluate_partition(pid, now),
            })
        })
        .collect()
}

pub(crate) async fn partitions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<ShardsOnly>,
) -> Response {
    let now = clock::now();
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| partition_rows(s, now, shards);
    fanout::answer(
        shared,
        "/api/v1/partitions",
        query.shards,
        None,
        &headers,
        local,
        |rows, coverage| with_coverage(json!({ "now_ms": now.0, "partitions": rows }), coverage),
    )
    .await
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Window {
    window_seconds: Option<u64>,
    shards: Option<String>,
}

/// One service or topic of the pathway graph, or one edge with its health.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "element", rename_all = "snake_case")]
enum GraphRow {
    Node(serde_json::Value),
    Edge(serde_json::Value),
}

/// The graph's nodes and the edges of `shards`' topics (an edge's topic is
/// its `topic:` end; one between services is shard 0's, as its points are).
fn graph_rows(shared: &Shared, span_ms: i64, now: Millis, shards: Option<&BTreeSet<u32>>) -> Vec<GraphRow> {
    let mut graph = shared.pathways.graph(now.0.saturating_sub(span_ms), now.0 + 1);
    let topic_of = |e: &streamsight_node::pathways::Edge| {
        [&e.from, &e.to]
            .into_iter()
            .find_map(|end| end.strip_prefix("topic:"))
            .map(str::to_owned)
    };
    graph.edges.retain(|e| match topic_of(e) {
        Some(topic) => fanout::in_shards(shared, shards, &topic),
        None => shards.is_none_or(|s| s.contains(&0)),
    });
    let health = edge_health(shared, &graph, now);
    let nodes = graph.nodes.iter().map(|n| GraphRow::Node(json!(n)));
    let edges = graph.edges.iter().zip(health).map(|(e, status)| {
        let mut edge = json!(e);
        edge["status"] = json!(status);
        GraphRow::Edge(edge)
    });
    nodes.chain(edges).collect()
}

pub(crate) async fn pathways(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    ApiQuery(window): ApiQuery<Window>,
) -> Response {
    let now = clock::now();
    let span = window
        .window_seconds
        .map_or(streamsight_node::clock::time_ms(shared.config.pathway_window), |s| {
            i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX)
        });
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| graph_rows(s, span, now, shards);
    fanout::answer(
        shared,
        "/api/v1/pathways",
        window.shards,
        query,
        &headers,
        local,
        |rows, coverage| {
            // A service is a node of every shard it touches: listed once.
            let mut nodes = BTreeMap::new();
            let mut edges = Vec::new();
            for row in rows {
                match row {
                    GraphRow::Node(n) => {
                        nodes
                            .entry(n["id"].as_str().unwrap_or_default().to_owned())
                            .or_insert(n);
                    }
                    GraphRow::Edge(e) => edges.push(e),
                }
            }
            let graph = json!({
                "from_ms": now.0.saturating_sub(span),
                "to_ms": now.0 + 1,
                "nodes": nodes.into_values().collect::<Vec<_>>(),
                "edges": edges,
            });
            with_coverage(graph, coverage)
        },
    )
    .await
}

/// Each edge's health: a consuming edge has its group's worst status, a
/// producing edge `producer_failing` while its topic's sends fail; `None` where
/// nothing is known of it.
fn edge_health(shared: &Shared, graph: &streamsight_node::pathways::Graph, now: Millis) -> Vec<Option<&'static str>> {
    let refresh_ms = shared.config.refresh_ms();
    let summaries = shared.lag.summaries(now, refresh_ms);
    let mut groups: std::collections::HashMap<&str, streamsight_core::Status> = std::collections::HashMap::new();
    for g in &summaries.groups {
        let e = groups.entry(g.group.as_str()).or_insert(g.status);
        *e = (*e).max(g.status);
    }
    let failing_ms = shared.lag.engine().producer_failing_window_ms();
    let deliveries = shared.deliveries.view();
    let failing: std::collections::HashSet<&str> = deliveries
        .failures
        .since(Millis(now.0.saturating_sub(failing_ms)))
        .map(|((_, topic), _)| topic.as_str())
        .collect();
    graph
        .edges
        .iter()
        .map(|e| match (e.direction.as_str(), &e.group) {
            ("in", Some(g)) => groups.get(g.as_str()).map(|s| s.as_str()),
            ("out", _) => {
                let topic = e.to.strip_prefix("topic:").unwrap_or(&e.to);
                Some(if failing.contains(topic) {
                    "producer_failing"
                } else {
                    "ok"
                })
            }
            _ => None,
        })
        .collect()
}

/// Drop accounting: reconciled windows with the cause of every missing message,
/// cumulative totals per group and topic, and the recent problem windows.
/// One row of the drop accounting, tagged with the list it belongs to.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "list", rename_all = "snake_case")]
enum DeliveryRow {
    Window(serde_json::Value),
    Total(serde_json::Value),
    Event(serde_json::Value),
}

fn delivery_rows(shared: &Shared, filter: &LagFilter, shards: Option<&BTreeSet<u32>>) -> Vec<DeliveryRow> {
    let keep = |c: &str, g: &str, t: &str| filter.keeps(c, g, t) && fanout::in_shards(shared, shards, t);
    let d = shared.deliveries.view();
    let windows = d
        .ledger
        .reports(keep)
        .into_iter()
        .map(|w| DeliveryRow::Window(json!(w)));
    let totals = d
        .ledger
        .totals()
        .iter()
        .filter(|((c, g, t), _)| keep(c, g, t))
        .map(|((c, g, t), totals)| {
            DeliveryRow::Total(json!({ "cluster": c, "group": g, "topic": t, "totals": totals }))
        });
    let events = d
        .events
        .iter()
        .filter(|r| keep(&r.cluster, &r.group, &r.topic))
        .map(|e| DeliveryRow::Event(json!(e)));
    windows.chain(totals).chain(events).collect()
}

pub(crate) async fn deliveries(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    ApiQuery(filter): ApiQuery<LagFilter>,
) -> Response {
    let asked = filter.shards.clone();
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| delivery_rows(s, &filter, shards);
    fanout::answer(
        shared,
        "/api/v1/deliveries",
        asked,
        query,
        &headers,
        local,
        |rows, coverage| {
            let (mut windows, mut totals, mut events) = (Vec::new(), Vec::new(), Vec::new());
            for row in rows {
                match row {
                    DeliveryRow::Window(w) => windows.push(w),
                    DeliveryRow::Total(t) => totals.push(t),
                    DeliveryRow::Event(e) => events.push(e),
                }
            }
            with_coverage(
                json!({ "windows": windows, "totals": totals, "events": events }),
                coverage,
            )
        },
    )
    .await
}
