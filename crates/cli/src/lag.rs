//! `streamsight lag`: a `kafka-consumer-groups --describe` with lag seconds and
//! health, read from a running collector or straight from a cluster.

use serde::Deserialize;
use std::collections::BTreeSet;
use std::io::Write;
use streamsight_core::{Engine, EngineConfig, LagRow, Millis};
use streamsight_poller::{ClusterClient, ClusterConfig, Tracker};

/// One group-partition as printed: the collector's lag row.
pub type Row = LagRow;

#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub group: Option<String>,
    pub topic: Option<String>,
}

impl Filter {
    fn keeps(&self, group: &str, topic: &str) -> bool {
        self.group.as_deref().is_none_or(|g| g == group) && self.topic.as_deref().is_none_or(|t| t == topic)
    }

    /// ` for group G on topic T`, as far as the filter asks.
    fn words(&self) -> String {
        let mut w = String::new();
        if let Some(g) = &self.group {
            w.push_str(&format!(" for group {g:?}"));
        }
        if let Some(t) = &self.topic {
            w.push_str(&format!(" on topic {t:?}"));
        }
        w
    }
}

/// What was found: the rows, and when there are none, what was looked at
/// and why there is nothing.
#[derive(Debug)]
pub struct Found {
    pub rows: Vec<Row>,
    pub why_none: Option<String>,
    /// Where there are no rows: clusters the collector polls that did not
    /// answer its last poll (their lag is unknown, not absent).
    pub unreachable: Vec<String>,
    /// Straight from a cluster, in one look: no verdict for a group behind.
    pub bootstrap_look: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum LagError {
    #[error("collector at {url}: {reason}")]
    Collector { url: String, reason: String },
    #[error("cluster {bootstrap}: {reason}")]
    Cluster { bootstrap: String, reason: String },
}

/// Rows from a running collector's `/api/v1/lag`.
pub async fn from_collector(url: &str, cluster: Option<&str>, filter: &Filter) -> Result<Found, LagError> {
    let err = |reason: String| LagError::Collector {
        url: url.to_owned(),
        reason,
    };
    let mut query: Vec<(&str, &str)> = Vec::new();
    if let Some(c) = cluster {
        query.push(("cluster", c));
    }
    if let Some(g) = &filter.group {
        query.push(("group", g));
    }
    if let Some(t) = &filter.topic {
        query.push(("topic", t));
    }
    let text = crate::collector_client::get(url, "/api/v1/lag", &query)
        .await
        .map_err(err)?;
    #[derive(Deserialize)]
    struct Answer {
        rows: Vec<Row>,
    }
    let answer: Answer = serde_json::from_str(&text).map_err(|e| err(format!("unexpected answer: {e}")))?;
    // Where there is nothing to show, what the collector's pollers know: a
    // cluster that did not answer is why (its lag is unknown, not absent).
    // Asked only then: at the largest estates `/api/v1/clusters` lists every
    // group, a cost every `lag` need not pay (a row of a cluster that stopped
    // answering reads stale on its own).
    let polled = if answer.rows.is_empty() {
        crate::collector_client::get_json(url, "/api/v1/clusters").await.ok()
    } else {
        None
    };
    let clusters = polled
        .as_ref()
        .and_then(|v| v["clusters"].as_object())
        .cloned()
        .unwrap_or_default();
    let unreachable: Vec<String> = clusters
        .iter()
        .filter(|(name, _)| cluster.is_none_or(|c| c == name.as_str()))
        .filter_map(|(name, c)| {
            let last = &c["last_poll"];
            if last.is_null() {
                return Some(format!("cluster {name}: not polled yet"));
            }
            (last["metadata_ok"] == false).then(|| {
                let errors: Vec<&str> = last["errors"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.as_str())
                    .collect();
                format!(
                    "cluster {name} did not answer the collector's last poll ({}): its lag is unknown",
                    if errors.is_empty() {
                        "no reason given".to_owned()
                    } else {
                        errors.join("; ")
                    }
                )
            })
        })
        .collect();
    // A group or topic named and not there: what is, to pick from.
    let held = if answer.rows.is_empty() && (filter.group.is_some() || filter.topic.is_some()) {
        let everything = crate::collector_client::get(url, "/api/v1/lag", &[])
            .await
            .unwrap_or_default();
        let rows: Vec<Row> = serde_json::from_str::<Answer>(&everything)
            .map(|a| a.rows)
            .unwrap_or_default();
        let groups: BTreeSet<&str> = rows.iter().map(|r| r.group.as_str()).collect();
        let topics: BTreeSet<&str> = rows.iter().map(|r| r.topic.as_str()).collect();
        let some = |names: &BTreeSet<&str>| {
            let shown: Vec<&str> = names.iter().take(20).copied().collect();
            let more = names.len().saturating_sub(shown.len());
            if more > 0 {
                format!("{} and {more} more", shown.join(", "))
            } else {
                shown.join(", ")
            }
        };
        if groups.is_empty() {
            String::new()
        } else {
            format!("; it holds groups {} on topics {}", some(&groups), some(&topics))
        }
    } else {
        String::new()
    };
    let why_none = answer.rows.is_empty().then(|| {
        if let Some(c) = cluster
            && polled.is_some()
            && !clusters.contains_key(c)
        {
            let names: Vec<&str> = clusters.keys().map(String::as_str).collect();
            return format!(
                "the collector at {url} holds no lag in cluster {c:?} and polls no cluster of that name (it polls: {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            );
        }
        if !unreachable.is_empty() {
            return format!(
                "the collector at {url} holds no lag{}: {}",
                filter.words(),
                unreachable.join("; ")
            );
        }
        let cluster = cluster.map(|c| format!(" in cluster {c:?}")).unwrap_or_default();
        format!(
            "the collector at {url} holds no lag{}{cluster}: no tracer, SDK or poller has reported a commit \
             there yet (what it polls: {url}/api/v1/clusters){}",
            filter.words(),
            held
        )
    });
    Ok(Found {
        rows: answer.rows,
        why_none,
        unreachable,
        bootstrap_look: false,
    })
}

/// Rows from one poll of a cluster. One look gives lag in messages; lag in
/// seconds needs a history of end offsets, so it is unknown here (0 only when
/// caught up), and health is what one look can tell.
pub async fn from_cluster(bootstrap: &str, groups: &[String], filter: &Filter) -> Result<Found, LagError> {
    let mut config = ClusterConfig::new("direct", bootstrap);
    config.groups = groups.to_vec();
    config.validate().map_err(|e| LagError::Cluster {
        bootstrap: bootstrap.to_owned(),
        reason: e.to_string(),
    })?;
    let asked: BTreeSet<String> = groups.iter().cloned().collect();
    let mut client = ClusterClient::new(config.clone());
    let now = now();
    let snap = client.poll(now, &asked).await;
    if !snap.metadata_ok {
        return Err(LagError::Cluster {
            bootstrap: bootstrap.to_owned(),
            reason: snap.errors.join("; "),
        });
    }
    let mut engine = Engine::new(EngineConfig::default()).map_err(|e| LagError::Cluster {
        bootstrap: bootstrap.to_owned(),
        reason: e.to_string(),
    })?;
    let update = Tracker::new("direct", config.forget_after).update(&snap);
    for r in update.durable.iter().chain(&update.transient) {
        r.apply(&mut engine);
    }
    let rows: Vec<Row> = engine
        .reports(now, |n| filter.keeps(n.group, n.topic))
        .into_iter()
        .map(|(n, mut r)| {
            r.lag_seconds = r.lag_seconds.filter(|_| r.lag_messages == Some(0));
            r.lag_seconds_lower_bound = false;
            // One look tells how far behind, not whether the group keeps up:
            // behind, its health needs a history, so it is not "ok".
            if r.lag_messages != Some(0) && r.status == streamsight_core::Status::Ok {
                r.status = streamsight_core::Status::Stale;
            }
            LagRow {
                cluster: bootstrap.to_owned(),
                consumer: snap.consumer(n.group, n.topic, n.partition),
                ..n.row(r)
            }
        })
        .collect();
    // A share group commits nothing: its lag is share-group lag, said apart.
    let share_lag = snap.share_lag();
    let share: Vec<String> = snap
        .groups
        .iter()
        .filter(|g| g.is_share() && groups.contains(&g.name))
        .map(|g| {
            let parts: Vec<String> = share_lag
                .iter()
                .filter(|p| p.group == g.name)
                .map(|p| {
                    let lag = p.lag.map_or_else(|| "unknown".to_owned(), |l| l.to_string());
                    let bound = if p.upper_bound { "≤ " } else { "" };
                    format!("{}[{}] {bound}{lag}", p.topic, p.partition)
                })
                .collect();
            format!(
                "{} is a share group: it commits no offsets, so it has no consumer lag; its share-group lag \
                 (records past each partition's start offset not yet acknowledged, as the broker counts them; \
                 ≤ where the broker cannot, start offset to end): {}",
                g.name,
                if parts.is_empty() {
                    "not described".to_owned()
                } else {
                    parts.join(", ")
                }
            )
        })
        .collect();
    let why_none = rows.is_empty().then(|| {
        if !share.is_empty() {
            share.join("; ")
        } else if !groups.is_empty() {
            format!(
                "the brokers at {bootstrap} hold no committed offsets{}: no such group, or it never committed",
                filter.words()
            )
        } else if !snap.groups_listed {
            let why = snap.unlisted_why.as_deref().unwrap_or("the brokers did not list them");
            format!(
                "no groups listed at {bootstrap}: {why}; name the group to ask for with --group G, \
                 or ask a broker that lists groups"
            )
        } else if snap.groups.is_empty() {
            format!("the brokers at {bootstrap} list no consumer group")
        } else {
            format!(
                "none of the {} groups at {bootstrap} has committed offsets{}",
                snap.groups.len(),
                filter.words()
            )
        }
    });
    Ok(Found {
        rows,
        why_none,
        unreachable: Vec::new(),
        bootstrap_look: true,
    })
}

fn now() -> Millis {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Millis(ms)
}

/// The table `kafka-consumer-groups --describe` users know, with lag seconds
/// and health; unknown values print as `-`, never 0.
pub fn write_table(out: &mut impl Write, rows: &[Row]) -> std::io::Result<()> {
    let dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let table: Vec<[String; 12]> = rows
        .iter()
        .map(|r| {
            let owner = r.consumer.clone().unwrap_or_default();
            let report = &r.report;
            let seconds = report.lag_seconds.map(|s| {
                let s = format!("{s:.1}");
                if report.lag_seconds_lower_bound {
                    format!(">={s}")
                } else {
                    s
                }
            });
            [
                r.group.clone(),
                r.topic.clone(),
                r.partition.to_string(),
                dash(report.committed_offset.map(|o| o.to_string())),
                dash(report.end_offset.map(|o| o.to_string())),
                dash(report.lag_messages.map(|o| o.to_string())),
                dash(seconds),
                report.status.as_str().to_uppercase(),
                dash(owner.member_id.filter(|s| !s.is_empty())),
                dash(owner.host.filter(|s| !s.is_empty())),
                dash(owner.client_id.filter(|s| !s.is_empty())),
                note(report),
            ]
        })
        .collect();
    let header = [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "LAG-SECONDS",
        "STATUS",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
        "NOTE",
    ];
    let mut widths = header.map(str::len);
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |out: &mut dyn Write, cells: &[&str]| -> std::io::Result<()> {
        let padded: Vec<String> = cells.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        writeln!(out, "{}", padded.join(" ").trim_end())
    };
    line(out, &header)?;
    for row in &table {
        line(out, &row.iter().map(String::as_str).collect::<Vec<_>>())?;
    }
    Ok(())
}

/// What a row's numbers do not say on their own, as the API says it:
/// failing producers, messages lost, an unreachable leader, a transaction.
fn note(report: &streamsight_core::LagReport) -> String {
    let mut notes = Vec::new();
    if report.producer_failing {
        notes.push("producers failing: their unsent messages are in no lag".to_owned());
    }
    if report.data_loss_messages > 0 {
        notes.push(format!("{} messages lost to retention", report.data_loss_messages));
    }
    if report.broker_unreachable {
        notes.push("leader unreachable: lag unconfirmed".to_owned());
    }
    if report.open_transaction_since.is_some() {
        notes.push(match &report.open_transaction {
            Some(t) => format!("held by an open transaction of {}", t.holder()),
            None => "held by an open transaction".to_owned(),
        });
    }
    if notes.is_empty() {
        "-".to_owned()
    } else {
        notes.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of `status` that knows nothing, to be filled in.
    fn nothing_known(status: streamsight_core::Status) -> streamsight_core::LagReport {
        streamsight_core::LagReport {
            committed_offset: None,
            end_offset: None,
            log_start_offset: None,
            lag_messages: None,
            lag_seconds: None,
            lag_seconds_lower_bound: false,
            status,
            producer_failing: false,
            data_loss_messages: 0,
            at_control_marker: false,
            broker_unreachable: false,
            last_commit_at: None,
            end_offset_at: None,
            last_stable_offset: None,
            open_transaction_since: None,
            open_transaction: None,
            no_members_since: None,
        }
    }

    #[test]
    fn unknown_values_print_as_dashes_never_zero() {
        let row = Row {
            cluster: "c".into(),
            group: "billing".into(),
            topic: "orders".into(),
            partition: 0,
            report: streamsight_core::LagReport {
                committed_offset: Some(4),
                ..nothing_known(streamsight_core::Status::Stale)
            },
            consumer: None,
        };
        let mut out = Vec::new();
        write_table(&mut out, &[row]).unwrap();
        let text = String::from_utf8(out).unwrap();
        let line = text.lines().nth(1).unwrap();
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "billing", "orders", "0", "4", "-", "-", "-", "STALE", "-", "-", "-", "-"
            ]
        );
    }

    #[test]
    fn what_the_numbers_do_not_say_is_in_the_note() {
        let mut report = streamsight_core::LagReport {
            committed_offset: Some(500),
            end_offset: Some(500),
            lag_messages: Some(0),
            producer_failing: true,
            ..nothing_known(streamsight_core::Status::Ok)
        };
        assert!(note(&report).starts_with("producers failing"));
        report.producer_failing = false;
        report.data_loss_messages = 7;
        assert_eq!(note(&report), "7 messages lost to retention");
    }
}
