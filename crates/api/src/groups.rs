//! Lag and groups: every group-partition's lag, every group folded from its
//! partitions, one group's partitions and history; on a sharded log, of every
//! shard.

use crate::filters::LagFilter;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use streamsight_core::{GroupFold, LagRow, Millis};
use streamsight_http::fanout;
use streamsight_http::query::{ApiQuery, with_coverage};
use streamsight_http::{ApiError, ErrorKind};
use streamsight_node::Shared;
use streamsight_node::clock;

fn lag_rows(shared: &Shared, now: Millis, filter: &LagFilter, shards: Option<&BTreeSet<u32>>) -> Vec<LagRow> {
    let snapshots = shared.clusters.snapshots();
    let engine = shared.lag.engine();
    engine
        .reports(now, |n| {
            filter.keeps(n.cluster, n.group, n.topic) && fanout::in_shards(shared, shards, n.topic)
        })
        .into_iter()
        .map(|(n, report)| lag_row(&snapshots, &n, report))
        .collect()
}

/// A group-partition's row, with the member the last poll saw own it.
fn lag_row(
    snapshots: &std::collections::HashMap<String, Arc<streamsight_poller::Snapshot>>,
    n: &streamsight_core::GroupPartitionNames<'_>,
    report: streamsight_core::LagReport,
) -> LagRow {
    LagRow {
        consumer: snapshots
            .get(n.cluster)
            .and_then(|s| s.consumer(n.group, n.topic, n.partition)),
        ..n.row(report)
    }
}

/// Every group-partition's lag, of every shard on a sharded log.
pub(crate) async fn lag(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    ApiQuery(filter): ApiQuery<LagFilter>,
) -> Response {
    let now = clock::now();
    let asked = filter.shards.clone();
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| lag_rows(s, now, &filter, shards);
    fanout::answer(
        shared,
        "/api/v1/lag",
        asked,
        query,
        &headers,
        local,
        |mut rows, coverage| {
            if coverage.is_some() {
                rows.sort_by(|a, b| {
                    (&a.cluster, &a.group, &a.topic, a.partition).cmp(&(&b.cluster, &b.group, &b.topic, b.partition))
                });
            }
            with_coverage(json!({ "now_ms": now.0, "rows": rows }), coverage)
        },
    )
    .await
}

#[derive(Debug, Serialize)]
struct GroupRow {
    cluster: String,
    group: String,
    status: streamsight_core::Status,
    partitions: usize,
    /// Unknown (null) unless every partition's lag is known.
    total_lag: Option<i64>,
    /// Sum of the known lags: a lower bound when `complete` is false.
    known_lag: i64,
    complete: bool,
    max_lag: Option<MaxLag>,
}

#[derive(Debug, Serialize)]
struct MaxLag {
    topic: String,
    partition: i32,
    lag_messages: i64,
}

/// A group's row from its partitions' rows, wherever they were held: the
/// same fold as the engine's for a group it holds whole.
fn fold_groups(rows: Vec<LagRow>) -> Vec<GroupRow> {
    let mut groups: BTreeMap<(String, String), GroupFold<(String, i32)>> = BTreeMap::new();
    for row in rows {
        groups
            .entry((row.cluster, row.group))
            .or_default()
            .add((row.topic, row.partition), row.report);
    }
    groups
        .into_iter()
        .map(|((cluster, group), fold)| {
            let fold = fold.finish();
            GroupRow {
                cluster,
                group,
                status: fold.status,
                partitions: fold.partitions,
                total_lag: fold.complete.then_some(fold.total_lag),
                known_lag: fold.total_lag,
                complete: fold.complete,
                max_lag: fold.max_lag.map(|((topic, partition), lag_messages)| MaxLag {
                    topic,
                    partition,
                    lag_messages,
                }),
            }
        })
        .collect()
}

/// Groups on one page of `/api/v1/groups` at most, and when no `limit` is given.
pub(crate) const MAX_GROUPS_PAGE: usize = 10_000;

/// `/api/v1/groups`' query: a cluster, and a page of groups in (cluster,
/// group) order after a cursor (the `next` of the page before).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GroupsQuery {
    cluster: Option<String>,
    limit: Option<usize>,
    after_cluster: Option<String>,
    after_group: Option<String>,
}

/// A page's place: groups after `after`, at most `limit` of them.
#[derive(Clone, Debug)]
struct Page {
    cluster: Option<String>,
    after: Option<(String, String)>,
    limit: usize,
}

impl Page {
    fn from_query(q: GroupsQuery) -> Result<Self, ApiError> {
        let limit = q.limit.unwrap_or(MAX_GROUPS_PAGE);
        if !(1..=MAX_GROUPS_PAGE).contains(&limit) {
            return Err(ApiError::new(
                ErrorKind::BadQuery,
                format!("limit is 1 to {MAX_GROUPS_PAGE}"),
            ));
        }
        let after = match (q.after_cluster, q.after_group) {
            (Some(c), Some(g)) => Some((c, g)),
            (None, None) => None,
            _ => {
                return Err(ApiError::new(
                    ErrorKind::BadQuery,
                    "after_cluster and after_group go together (the `next` of the page before)",
                ));
            }
        };
        Ok(Self {
            cluster: q.cluster,
            after,
            limit,
        })
    }

    fn in_cluster(&self, cluster: &str) -> bool {
        self.cluster.as_deref().is_none_or(|c| c == cluster)
    }

    /// After the cursor (every group is, on the first page).
    fn after(&self, cluster: &str, group: &str) -> bool {
        self.after
            .as_ref()
            .is_none_or(|(c, g)| (cluster, group) > (c.as_str(), g.as_str()))
    }
}

/// This node's rows of one page of groups, when it holds every group whole
/// (the log is not sharded): the groups' names are sorted first, and only the
/// page's group-partitions evaluated. With 100,000 groups a page costs its own
/// groups, not the estate. The count is of every group the query keeps.
fn page_rows(shared: &Shared, now: Millis, page: &Page) -> (Vec<LagRow>, usize, bool) {
    let snapshots = shared.clusters.snapshots();
    let engine = shared.lag.engine();
    let mut names: Vec<(&str, &str, streamsight_core::GroupId)> = engine
        .groups()
        .filter(|&id| !engine.group_members(id).is_empty())
        .map(|id| {
            let (cluster, group) = engine.group_name(id);
            (cluster, group, id)
        })
        .filter(|(cluster, _, _)| page.in_cluster(cluster))
        .collect();
    names.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let total = names.len();
    let from = names.partition_point(|(c, g, _)| !page.after(c, g));
    let chosen = &names[from..(from + page.limit).min(names.len())];
    let more = from + chosen.len() < names.len();
    let rows = chosen
        .iter()
        .flat_map(|&(_, _, id)| engine.group_members(id).iter().copied())
        .map(|gp| lag_row(&snapshots, &engine.names(gp), engine.evaluate(gp, now)))
        .collect();
    (rows, total, more)
}

/// Groups, by cluster and name, a page at a time (`limit`, at most
/// [`MAX_GROUPS_PAGE`]; `next` names where the next page starts). On a
/// sharded log a group's partitions may be in several shards: their rows are
/// gathered, then folded here.
pub(crate) async fn groups(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<GroupsQuery>,
) -> Response {
    let page = match Page::from_query(query) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let now = clock::now();
    if !shared.sharded() {
        let (rows, total, more) = page_rows(&shared, now, &page);
        return groups_page(fold_groups(rows), total, more, None);
    }
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| lag_rows(s, now, &LagFilter::default(), shards);
    fanout::answer(
        shared,
        "/api/v1/lag",
        None,
        None,
        &headers,
        local,
        move |rows, coverage| {
            let mut groups = fold_groups(rows);
            groups.retain(|g| page.in_cluster(&g.cluster));
            let total = groups.len();
            groups.retain(|g| page.after(&g.cluster, &g.group));
            let more = groups.len() > page.limit;
            groups.truncate(page.limit);
            // A missing shard may hold more of any group: every sum is a lower bound.
            if coverage.as_ref().is_some_and(|c| !c.missing.is_empty()) {
                for g in &mut groups {
                    g.complete = false;
                }
            }
            groups_page(groups, total, more, coverage)
        },
    )
    .await
}

fn groups_page(
    groups: Vec<GroupRow>,
    total: usize,
    more: bool,
    coverage: Option<streamsight_http::fanout::Coverage>,
) -> Response {
    let next = more
        .then(|| groups.last())
        .flatten()
        .map(|g| json!({ "after_cluster": g.cluster, "after_group": g.group }));
    with_coverage(
        json!({ "groups": groups, "total_groups": total, "next": next }),
        coverage,
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Range {
    /// Keep history samples from this time on (ms since the epoch).
    from_ms: Option<i64>,
    shards: Option<String>,
}

/// A group's partitions of some shards, and that part's recent samples.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "row", rename_all = "snake_case")]
enum GroupDetailRow {
    Partition {
        topic: String,
        partition: i32,
        reason: String,
        lag: Box<streamsight_core::LagReport>,
        consumer: Option<streamsight_core::Consumer>,
        recent_commits: Vec<serde_json::Value>,
    },
    /// A sample of the group's partitions that `part` (a node) holds.
    Sample {
        part: String,
        sample: streamsight_node::services::GroupSample,
    },
    /// The derived signals (the read model's) of the group's partitions a
    /// node holds, as of its last housekeeping round.
    Signals {
        signals: streamsight_node::services::GroupSignals,
    },
}

fn group_detail_rows(
    shared: &Shared,
    cluster: &str,
    group: &str,
    from_ms: i64,
    now: Millis,
    shards: Option<&BTreeSet<u32>>,
) -> Vec<GroupDetailRow> {
    let snapshots = shared.clusters.snapshots();
    let engine = shared.lag.engine();
    let Some((gid, members)) = fanout::group_in_shards(shared, &engine, cluster, group, shards) else {
        return Vec::new();
    };
    let mut rows: Vec<GroupDetailRow> = members
        .into_iter()
        .map(|gp| {
            let n = engine.names(gp);
            let lag = engine.evaluate(gp, now);
            GroupDetailRow::Partition {
                topic: n.topic.to_owned(),
                partition: n.partition,
                reason: engine.reason(gp, &lag, now),
                consumer: snapshots
                    .get(n.cluster)
                    .and_then(|s| s.consumer(n.group, n.topic, n.partition)),
                recent_commits: engine.commits(gp).map(|c| json!(c)).collect(),
                lag: Box::new(lag),
            }
        })
        .collect();
    drop(engine);
    // Of every shard this node holds: the fan-out asks a node for those.
    if let Some(signals) = shared.signals.group(cluster, group) {
        rows.push(GroupDetailRow::Signals { signals });
    }
    let part = shared.directory.get().map_or("local", |d| d.node()).to_owned();
    rows.extend(
        shared
            .lag
            .group_history(gid)
            .into_iter()
            .filter(|s| s.at_ms >= from_ms)
            .map(|sample| GroupDetailRow::Sample {
                part: part.clone(),
                sample,
            }),
    );
    rows
}

/// A group's samples from the nodes holding its parts, one per housekeeping
/// interval: sums and worsts of the parts', incomplete where a part has none.
fn merge_history(
    samples: Vec<(String, streamsight_node::services::GroupSample)>,
    interval_ms: i64,
) -> Vec<streamsight_node::services::GroupSample> {
    let parts: BTreeSet<&str> = samples.iter().map(|(p, _)| p.as_str()).collect();
    if parts.len() <= 1 {
        return samples.into_iter().map(|(_, s)| s).collect();
    }
    let mut buckets: BTreeMap<i64, BTreeMap<&str, &streamsight_node::services::GroupSample>> = BTreeMap::new();
    for (part, sample) in &samples {
        buckets
            .entry(sample.at_ms.div_euclid(interval_ms.max(1)))
            .or_default()
            .insert(part, sample);
    }
    buckets
        .into_values()
        .map(|of| {
            let mut merged = streamsight_node::services::GroupSample {
                at_ms: 0,
                status: streamsight_core::Status::Ok,
                total_lag: None,
                known_lag: 0,
                complete: of.len() == parts.len(),
                max_lag_seconds: None,
                lag_seconds_lower_bound: false,
                producer_failing: false,
            };
            for s in of.values() {
                merged.at_ms = merged.at_ms.max(s.at_ms);
                merged.status = merged.status.max(s.status);
                merged.known_lag = merged.known_lag.saturating_add(s.known_lag);
                merged.complete &= s.complete;
                if s.max_lag_seconds > merged.max_lag_seconds {
                    merged.max_lag_seconds = s.max_lag_seconds;
                    merged.lag_seconds_lower_bound = s.lag_seconds_lower_bound;
                }
                merged.producer_failing |= s.producer_failing;
            }
            merged.total_lag = merged.complete.then_some(merged.known_lag);
            merged
        })
        .collect()
}

pub(crate) async fn group(
    State(shared): State<Arc<Shared>>,
    Path((cluster, group)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    ApiQuery(range): ApiQuery<Range>,
) -> Response {
    let now = clock::now();
    let from = range.from_ms.unwrap_or(i64::MIN);
    let path = format!(
        "/api/v1/groups/{}/{}",
        fanout::segment(&cluster),
        fanout::segment(&group)
    );
    let (c, g) = (cluster.clone(), group.clone());
    let local = move |s: &Shared, shards: Option<&BTreeSet<u32>>| group_detail_rows(s, &c, &g, from, now, shards);
    let refresh_ms = shared.config.refresh_ms();
    let interval_ms = streamsight_node::clock::time_ms(shared.config.history_interval);
    // Where this node polls the group's cluster: its rebalances, from the polls.
    let rebalances = shared.clusters.rebalances(&cluster, &group, now);
    // A share group has no consumer lag: its share-group lag, from the last poll.
    let polled = shared.clusters.snapshot(&cluster);
    let group_type = polled
        .as_ref()
        .and_then(|s| s.group(&group))
        .and_then(|g| g.group_type.clone());
    let share_lag: Vec<streamsight_poller::snapshot::ShareLag> = polled
        .as_ref()
        .map(|s| s.share_lag().into_iter().filter(|l| l.group == group).collect())
        .unwrap_or_default();
    let is_share = group_type.as_deref() == Some("share");
    // The group as the last poll saw it: a group with members that has never
    // committed (a consumer crash-looping before its first commit) has no
    // lag rows, and is shown, never "no such group".
    // A streams group (KIP-1071): its topology, epochs and each member's tasks.
    let streams = polled
        .as_ref()
        .and_then(|s| s.group(&group))
        .and_then(|g| Some((g, g.streams.as_ref()?)))
        .map(|(g, t)| {
            json!({
                "assignment_epoch": t.assignment_epoch,
                "topology_epoch": t.topology_epoch,
                "subtopologies": t.subtopologies,
                "members": g.members.iter().map(|m| json!({
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "host": m.host,
                    "tasks": m.tasks,
                })).collect::<Vec<_>>(),
            })
        });
    let roles = polled
        .as_ref()
        .and_then(|s| s.group(&group))
        .and_then(|g| g.streams.clone());
    let seen = polled.as_ref().and_then(|s| s.group(&group)).map(|g| {
        json!({
            "state": g.state,
            "described": g.described,
            // Unknown (the describe failed) is never "no members".
            "members": g.described.then_some(g.members.len()),
            "error": g.error,
        })
    });
    // A query with `shards=` is answered here, never passed on: as it came.
    fanout::answer(shared, &path, range.shards, query, &headers, local, |rows, coverage| {
        let mut fold = GroupFold::default();
        let (mut partitions, mut samples) = (Vec::new(), Vec::new());
        let mut signals: Option<streamsight_node::services::GroupSignals> = None;
        for row in rows {
            match row {
                GroupDetailRow::Partition {
                    topic,
                    partition,
                    reason,
                    lag,
                    consumer,
                    recent_commits,
                } => {
                    fold.add((), (*lag).clone());
                    partitions.push(json!({
                        "topic": topic,
                        "partition": partition,
                        // A streams group's input: `source` or `repartition`.
                        "topic_role": roles.as_ref().and_then(|r| r.role_of(&topic)),
                        "reason": reason,
                        "lag": lag,
                        "consumer": consumer,
                        "recent_commits": recent_commits,
                    }));
                }
                GroupDetailRow::Sample { part, sample } => samples.push((part, sample)),
                GroupDetailRow::Signals { signals: part } => match &mut signals {
                    Some(whole) => whole.merge(&part),
                    None => signals = Some(part),
                },
            }
        }
        if partitions.is_empty()
            && !is_share
            && seen.is_none()
            && coverage.as_ref().is_none_or(|c| c.missing.is_empty())
        {
            return ApiError::new(
                ErrorKind::UnknownGroup,
                format!("no group {group:?} in cluster {cluster:?}"),
            )
            .into_response();
        }
        partitions.sort_by(|a, b| {
            (a["topic"].as_str(), a["partition"].as_i64()).cmp(&(b["topic"].as_str(), b["partition"].as_i64()))
        });
        let body = json!({
            "now_ms": now.0,
            "refresh_ms": refresh_ms,
            "cluster": cluster,
            "group": group,
            "status": fold.finish().status,
            "partitions": partitions,
            "history": merge_history(samples, interval_ms),
            // Unknown until a housekeeping round derived them; a missing
            // shard's part is not in them (`shards.missing` says so).
            "signals": signals.map(|g| json!({
                "retention_margin_seconds": g.retention_margin_seconds,
                "catch_up_seconds": g.catch_up_seconds,
                "partitions_not_committing": g.partitions_not_committing,
            })),
            "rebalances": rebalances,
            "group_type": group_type,
            // Share-group lag (KIP-932): the broker's KIP-1226 figure where it
            // answers DescribeShareGroupOffsets v1, else start offset to end,
            // an upper bound (`upper_bound`); never consumer lag.
            "share_partitions": is_share.then_some(&share_lag),
            "streams": streams,
            "polled": seen,
            // No row: lag unknown, because the group committed nothing yet.
            "lag_unknown_because": (partitions.is_empty() && !is_share)
                .then_some("no commit yet: the group has committed no offset on any partition"),
        });
        with_coverage(body, coverage)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamsight_node::services::GroupSample;

    fn sample(at_ms: i64, lag: i64, status: streamsight_core::Status) -> GroupSample {
        GroupSample {
            at_ms,
            status,
            total_lag: Some(lag),
            known_lag: lag,
            complete: true,
            max_lag_seconds: Some(lag as f64),
            lag_seconds_lower_bound: false,
            producer_failing: false,
        }
    }

    #[test]
    fn parts_samples_merge_per_interval_and_a_missing_part_is_incomplete() {
        use streamsight_core::Status::{Ok, Warn};
        let merged = merge_history(
            vec![
                ("a".into(), sample(10_100, 5, Ok)),
                ("b".into(), sample(10_900, 7, Warn)),
                ("a".into(), sample(20_100, 6, Ok)),
            ],
            1_000 * 10,
        );
        assert_eq!(merged.len(), 2);
        assert_eq!(
            (merged[0].at_ms, merged[0].total_lag, merged[0].status),
            (10_900, Some(12), Warn)
        );
        assert!(merged[0].complete);
        assert!(!merged[1].complete, "b has no sample in the second interval");
        assert_eq!(
            (merged[1].total_lag, merged[1].known_lag),
            (None, 6),
            "a sum with a part missing is not the total"
        );
        // One part: its samples as they are.
        assert_eq!(merge_history(vec![("a".into(), sample(1, 1, Ok))], 10).len(), 1);
    }
}
