//! `streamsight record`: one record of a cluster, decoded, through a
//! collector (a `payloads` key, its redaction rules) or straight from a cluster.

use crate::collector_client;
use crate::output::{self, Format};
use std::io::Write;
use streamsight_act::record::{self, ReadRecord};
use streamsight_node::config::records::RecordsConfig;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The cluster, as the collector names it (with --bootstrap-server: only a label).
    #[arg(long)]
    pub cluster: Option<String>,
    /// The record's topic.
    #[arg(long)]
    pub topic: String,
    /// Its partition.
    #[arg(long, allow_negative_numbers = true)]
    pub partition: i32,
    /// Its offset (a record compacted away: the next one is shown, said so).
    #[arg(long, allow_negative_numbers = true)]
    pub offset: i64,
    /// Read straight from this cluster (host:port[,host:port]).
    #[arg(long)]
    pub bootstrap_server: Option<String>,
    /// With --bootstrap-server: a JSON field path to mask (`card.number`,
    /// `*.email`); repeatable. A collector applies its own `[serve.records]`.
    #[arg(long)]
    pub redact: Vec<String>,
    /// With --bootstrap-server: an Avro schema for a schema-registry id
    /// (`7=schemas/payment.avsc`); repeatable. A collector uses its own
    /// `[serve.records] avro_schemas`.
    #[arg(long = "avro-schema", value_parser = parse_schema)]
    pub avro_schemas: Vec<(String, std::path::PathBuf)>,
    /// With --bootstrap-server: a Protobuf schema (`.proto`) for a
    /// schema-registry id (`8=schemas/payment.proto`); repeatable.
    #[arg(long = "protobuf-schema", value_parser = parse_schema)]
    pub protobuf_schemas: Vec<(String, std::path::PathBuf)>,
    /// The collector's API (STREAMSIGHT_API_KEY: a key of the `payloads`
    /// scope, or admin).
    #[arg(long, env = "STREAMSIGHT_API_URL", default_value = "http://127.0.0.1:7411")]
    pub collector: String,
    /// The record laid out for a person, or as JSON.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let found: serde_json::Value = match &args.bootstrap_server {
        Some(bootstrap) => {
            let config = streamsight_poller::ClusterConfig::new(args.cluster.as_deref().unwrap_or("direct"), bootstrap);
            config
                .validate()
                .map_err(|e| anyhow::anyhow!("--bootstrap-server {bootstrap}: {e}"))?;
            let limits = RecordsConfig {
                redact: args.redact.clone(),
                avro_schemas: args.avro_schemas.iter().cloned().collect(),
                protobuf_schemas: args.protobuf_schemas.iter().cloned().collect(),
                ..RecordsConfig::default()
            };
            limits
                .check()
                .map_err(|e| anyhow::anyhow!("--avro-schema, --protobuf-schema: {e}"))?;
            let r: ReadRecord = record::read(&config, &args.topic, args.partition, args.offset, &limits)?;
            serde_json::to_value(r)?
        }
        None => {
            let cluster = args.cluster.as_deref().ok_or_else(|| {
                anyhow::anyhow!("missing --cluster: through a collector, name the cluster as the collector polls it (its /api/v1/clusters), or give --bootstrap-server HOST:PORT to go to the cluster itself")
            })?;
            let path = format!(
                "/api/v1/records/{}/{}/{}/{}",
                collector_client::segment(cluster),
                collector_client::segment(&args.topic),
                args.partition,
                args.offset
            );
            let text = output::runtime()?
                .block_on(collector_client::get(&args.collector, &path, &[]))
                .map_err(|e| anyhow::anyhow!("collector at {}: {e}", args.collector))?;
            serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("unexpected answer: {e}"))?
        }
    };
    output::emit(args.format, &found, |out, r| write_record(out, r))
}

fn parse_schema(s: &str) -> Result<(String, std::path::PathBuf), String> {
    match s.split_once('=') {
        Some((id, path)) if id.trim().parse::<u32>().is_ok() && !path.is_empty() => {
            Ok((id.trim().to_owned(), path.into()))
        }
        _ => Err(format!("{s:?}: give ID=PATH (7=schemas/payment.avsc)")),
    }
}

fn shown(v: &serde_json::Value) -> String {
    let Ok(s) = serde_json::from_value::<ShownText>(v.clone()) else {
        return v.to_string();
    };
    s.0
}

/// A shown key, value or header, as one person-readable text.
struct ShownText(String);

impl<'de> serde::Deserialize<'de> for ShownText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        let bytes = v["bytes"].as_u64().unwrap_or(0);
        let text = match v["encoding"].as_str() {
            Some("null") => "null".to_owned(),
            Some("json") => serde_json::to_string_pretty(&v["json"]).unwrap_or_default(),
            Some("text") => v["text"].as_str().unwrap_or_default().to_owned(),
            Some("confluent") => match v.get("json") {
                Some(j) => format!(
                    "(schema id {}, {}) {}",
                    v["schema_id"],
                    v["format"].as_str().unwrap_or("json"),
                    serde_json::to_string_pretty(j).unwrap_or_default()
                ),
                None => format!(
                    "(schema id {}, {bytes} bytes, not decoded{}) {}",
                    v["schema_id"],
                    v["note"].as_str().map(|n| format!(": {n}")).unwrap_or_default(),
                    v["hex_preview"].as_str().unwrap_or_default()
                ),
            },
            Some("preview") => format!(
                "({bytes} bytes{}{}) {}",
                if v["hex"] == true { ", hex" } else { "" },
                if v["truncated"] == true {
                    ", first bytes only"
                } else {
                    ""
                },
                v["preview"].as_str().unwrap_or_default()
            ),
            _ => v.to_string(),
        };
        Ok(ShownText(text))
    }
}

fn write_record(out: &mut dyn Write, r: &serde_json::Value) -> std::io::Result<()> {
    writeln!(
        out,
        "{} {}/{} offset {}",
        r["cluster"].as_str().unwrap_or_default(),
        r["topic"].as_str().unwrap_or_default(),
        r["partition"],
        r["offset"]
    )?;
    if let Some(note) = r["note"].as_str() {
        writeln!(out, "note: {note}")?;
    }
    let written = r["timestamp_ms"].as_i64().map_or_else(
        || "none".to_owned(),
        |ms| streamsight_core::explain::at_ago(streamsight_core::Millis(ms), crate::commands::groups::now()),
    );
    writeln!(
        out,
        "timestamp: {written} ({})",
        r["timestamp_type"].as_str().unwrap_or("none")
    )?;
    writeln!(out, "key: {}", shown(&r["key"]))?;
    for h in r["headers"].as_array().into_iter().flatten() {
        writeln!(out, "header {}: {}", h[0].as_str().unwrap_or_default(), shown(&h[1]))?;
    }
    if r["headers_not_shown"].as_u64().unwrap_or(0) > 0 {
        writeln!(out, "({} more headers not shown)", r["headers_not_shown"])?;
    }
    writeln!(out, "value: {}", shown(&r["value"]))
}
