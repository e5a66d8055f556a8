//! `streamsight dlq`: dead-letter topics with velocity and top reasons (from a
//! collector), and `tail` of one DLQ topic with its provenance decoded (straight
//! from the cluster; nothing is committed).

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use std::io::Write;
use std::time::{Duration, Instant};
use streamsight_dlq::stats::RecentRecord;

#[derive(Debug, thiserror::Error)]
pub enum DlqCliError {
    #[error("collector at {url}: {reason}")]
    Collector { url: String, reason: String },
    #[error("cluster {bootstrap}: {reason}")]
    Cluster { bootstrap: String, reason: String },
}

/// The collector's `/api/v1/dlq`, as is.
pub async fn list(url: &str) -> Result<serde_json::Value, DlqCliError> {
    let err = |reason: String| DlqCliError::Collector {
        url: url.to_owned(),
        reason,
    };
    crate::collector_client::get_json(url, "/api/v1/dlq").await.map_err(err)
}

pub fn write_list(out: &mut impl Write, body: &serde_json::Value) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<12} {:<28} {:<20} {:>8} {:>10}  TOP REASONS",
        "CLUSTER", "DLQ-TOPIC", "SOURCE", "RECORDS", "RECORDS/S"
    )?;
    for c in body["clusters"].as_array().into_iter().flatten() {
        for t in c["topics"].as_array().into_iter().flatten() {
            let reasons: Vec<String> = t["reasons"]
                .as_array()
                .into_iter()
                .flatten()
                .take(3)
                .map(|r| {
                    format!(
                        "{}/{} x{}",
                        r[0]["stage"].as_str().unwrap_or("?"),
                        r[0]["error_class"].as_str().unwrap_or("?"),
                        r[1]
                    )
                })
                .collect();
            let dash = |v: &serde_json::Value| if v.is_null() { "-".to_owned() } else { v.to_string() };
            let velocity = t["velocity"].as_f64().map_or("-".to_owned(), |v| format!("{v:.2}"));
            writeln!(
                out,
                "{:<12} {:<28} {:<20} {:>8} {:>10}  {}",
                c["cluster"].as_str().unwrap_or("?"),
                t["dlq_topic"].as_str().unwrap_or("?"),
                t["source_topic"].as_str().unwrap_or("-"),
                dash(&t["records"]),
                velocity,
                reasons.join(", ")
            )?;
        }
    }
    Ok(())
}

/// The last `limit` records of each partition of `topic`.
pub fn tail(bootstrap: &str, topic: &str, limit: i64) -> Result<Vec<RecentRecord>, DlqCliError> {
    let err = |reason: String| DlqCliError::Cluster {
        bootstrap: bootstrap.to_owned(),
        reason,
    };
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "streamsight-dlq-tail")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .create()
        .map_err(|e| err(e.to_string()))?;
    let timeout = Duration::from_secs(10);
    let md = consumer
        .fetch_metadata(Some(topic), timeout)
        .map_err(|e| err(e.to_string()))?;
    let partitions: Vec<i32> = md
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none())
        .ok_or_else(|| err(format!("no topic {topic}")))?
        .partitions()
        .iter()
        .map(|p| p.id())
        .collect();
    let mut tpl = TopicPartitionList::new();
    let mut remaining = 0;
    let mut ends = std::collections::BTreeMap::new();
    for &p in &partitions {
        let (low, high) = consumer
            .fetch_watermarks(topic, p, timeout)
            .map_err(|e| err(e.to_string()))?;
        let start = low.max(high - limit.max(0));
        remaining += high - start;
        ends.insert(p, high);
        tpl.add_partition_offset(topic, p, Offset::Offset(start))
            .map_err(|e| err(e.to_string()))?;
    }
    consumer.assign(&tpl).map_err(|e| err(e.to_string()))?;
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while remaining > 0 && Instant::now() < deadline {
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        if ends.get(&m.partition()).is_some_and(|&h| m.offset() >= h) {
            continue;
        }
        remaining -= 1;
        out.push(streamsight_dlq::read_record(&m));
    }
    out.sort_by_key(|t| (t.partition, t.offset));
    Ok(out)
}

pub fn write_tail(out: &mut impl Write, records: &[RecentRecord]) -> std::io::Result<()> {
    for r in records {
        let p = r.provenance.clone().unwrap_or_default();
        let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        writeln!(
            out,
            "{}/{}  from {}[{}]@{}  group {}  stage {}  {}: {}  schema {}  trace {}  ({} bytes) {}",
            r.partition,
            r.offset,
            opt(p.source_topic),
            opt(p.source_partition.map(|x| x.to_string())),
            opt(p.source_offset.map(|x| x.to_string())),
            opt(p.consumer_group),
            opt(p.stage),
            opt(p.error_class),
            opt(p.error_message),
            opt(p.schema_id),
            opt(p.trace_id),
            r.value_bytes,
            r.preview
        )?;
    }
    Ok(())
}
