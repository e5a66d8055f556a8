//! `streamsight dlq redrive`: dead letters sent back to their source topic
//! through a collector, which keeps the progress in its log so that nothing is
//! sent twice. A dry run unless `--execute`; then the run's progress is
//! followed until it ends (the run goes on in the collector if this stops).

use crate::collector_client;
use crate::commands::groups::{now, parse_time_flag, time};
use crate::output::{self, Format};
use std::io::Write;
use std::time::Duration;
use streamsight_act::redrive::{Letter, OffsetRange, Plan, Selection};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The cluster, as the collector polls it.
    #[arg(long)]
    pub cluster: String,
    /// The dead-letter topic.
    #[arg(long)]
    pub dlq: String,
    /// Only dead letters whose error class or stage is this.
    #[arg(long)]
    pub reason: Option<String>,
    /// Only dead letters written at or after: RFC 3339 or a duration ago (`-1h`).
    #[arg(long, allow_hyphen_values = true)]
    pub from: Option<String>,
    /// ... and before.
    #[arg(long, allow_hyphen_values = true)]
    pub to: Option<String>,
    /// Only these DLQ offsets (`A-B`, inclusive), in each partition.
    #[arg(long)]
    pub offsets: Option<OffsetRange>,
    /// Only these DLQ partitions; repeatable.
    #[arg(long = "partition")]
    pub partitions: Vec<i32>,
    /// Only this dead letter (`PARTITION:OFFSET`); repeatable.
    #[arg(long = "letter", value_parser = parse_letter)]
    pub letters: Vec<Letter>,
    /// Send to this topic instead of each letter's source.
    #[arg(long)]
    pub to_topic: Option<String>,
    /// Records per second (default 1000).
    #[arg(long)]
    pub rate: Option<u32>,
    /// Send them. Without it, only the plan is printed.
    #[arg(long)]
    pub execute: bool,
    /// The collector's API (STREAMSIGHT_API_KEY is sent as its key; --execute
    /// needs an admin key).
    #[arg(long, env = "STREAMSIGHT_API_URL", default_value = "http://127.0.0.1:7411")]
    pub collector: String,
    /// A table of the plan and progress lines, or the answers as JSON.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

fn parse_letter(s: &str) -> Result<Letter, String> {
    let (p, o) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?}: give PARTITION:OFFSET"))?;
    match (p.trim().parse::<i32>(), o.trim().parse::<i64>()) {
        (Ok(partition), Ok(offset)) if partition >= 0 && offset >= 0 => Ok(Letter { partition, offset }),
        _ => Err(format!("{s:?}: give PARTITION:OFFSET, both 0 or more")),
    }
}

fn selection(args: &Args) -> anyhow::Result<Selection> {
    let now = now();
    Ok(Selection {
        partitions: args.partitions.clone(),
        letters: args.letters.clone(),
        reason: args.reason.clone(),
        from_ms: args
            .from
            .as_deref()
            .map(|t| parse_time_flag("--from", t, now))
            .transpose()?
            .map(|m| m.0),
        to_ms: args
            .to
            .as_deref()
            .map(|t| parse_time_flag("--to", t, now))
            .transpose()?
            .map(|m| m.0),
        offsets: args.offsets,
        to_topic: args.to_topic.clone(),
        rate: args.rate,
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let selection = selection(&args)?;
    let path = format!(
        "/api/v1/dlq/{}/{}/redrive",
        collector_client::segment(&args.cluster),
        collector_client::segment(&args.dlq)
    );
    let at = |e: String| anyhow::anyhow!("collector at {}: {e}", args.collector);
    let runtime = output::runtime()?;
    // The same selection, as a dry run or not.
    let post = |dry_run: bool| -> anyhow::Result<serde_json::Value> {
        let body = serde_json::json!({ "selection": selection, "dry_run": dry_run });
        let text = runtime
            .block_on(collector_client::send(
                reqwest::Method::POST,
                &args.collector,
                &path,
                &[],
                Some(&body),
            ))
            .map_err(at)?;
        serde_json::from_str(&text).map_err(|e| at(format!("unexpected answer: {e}")))
    };
    let answer = post(true)?;
    let plan: Plan =
        serde_json::from_value(answer["plan"].clone()).map_err(|e| at(format!("unexpected answer: {e}")))?;
    if !args.execute {
        return output::emit(args.format, &answer, |out, _| {
            write_plan(out, &plan)?;
            writeln!(out, "dry run: nothing sent. Run again with --execute to send them.")
        });
    }
    if args.format == Format::Table {
        write_plan(&mut std::io::stdout(), &plan)?;
    }
    let started = post(false)?;
    let run = started["run"].as_str().unwrap_or_default().to_owned();
    if args.format == Format::Table {
        println!("redrive {run} started; its progress follows (it goes on in the collector if this stops)");
    }
    let mut last = String::new();
    loop {
        let status = runtime
            .block_on(collector_client::get_json(
                &args.collector,
                &format!("/api/v1/redrives/{run}"),
            ))
            .map_err(at)?;
        let live = &status["live"];
        let line = format!(
            "sent {} of the {} the dry run would send (already sent before: {}, no destination: {}, settled from an earlier run: {} sent, {} released)",
            live["sent"].as_u64().unwrap_or(0),
            plan.to_send + plan.in_flight,
            live["already_sent"].as_u64().unwrap_or(0),
            live["no_destination"].as_u64().unwrap_or(0),
            live["settled_sent"].as_u64().unwrap_or(0),
            live["settled_released"].as_u64().unwrap_or(0),
        );
        let done = live["done"].as_bool().unwrap_or(false) || status["interrupted"].as_bool().unwrap_or(false);
        if args.format == Format::Table && line != last {
            println!("{line}");
            last = line;
        }
        if done {
            if args.format == Format::Json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            }
            if let Some(e) = live["error"].as_str() {
                anyhow::bail!(
                    "redrive {run} stopped: {e} (run the same command again to resume: nothing is sent twice)"
                );
            }
            if args.format == Format::Table {
                println!("redrive {run} done");
            }
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn write_plan(out: &mut dyn Write, p: &Plan) -> std::io::Result<()> {
    writeln!(
        out,
        "dead letters of {} on {}: {} read, {} selected",
        p.dlq, p.cluster, p.scanned, p.selected
    )?;
    writeln!(
        out,
        "{:>9} {:>10}  {:<20} {:<24} {:<14} {:<24}  DESTINATION",
        "PARTITION", "OFFSET", "WRITTEN", "ERROR CLASS", "STAGE", "STATUS"
    )?;
    for l in &p.letters {
        let dest = match (&l.to_topic, l.to_partition) {
            (Some(t), Some(part)) => format!("{t}[{part}]"),
            (Some(t), None) => format!("{t} (partitioned by key)"),
            (None, _) => "-".into(),
        };
        let status = match &l.sent_to {
            Some(d) => format!("sent to {}[{}]@{}", d.topic, d.partition, d.offset),
            None => l.status.clone(),
        };
        writeln!(
            out,
            "{:>9} {:>10}  {:<20} {:<24} {:<14} {:<24}  {dest}",
            l.partition,
            l.offset,
            time(l.timestamp_ms),
            l.error_class.as_deref().unwrap_or("-"),
            l.stage.as_deref().unwrap_or("-"),
            status
        )?;
    }
    if (p.letters.len() as u64) < p.selected {
        writeln!(out, "... and {} more", p.selected - p.letters.len() as u64)?;
    }
    let to: Vec<String> = p.by_topic.iter().map(|(t, n)| format!("{n} to {t}")).collect();
    writeln!(
        out,
        "{} to send ({}), {} already sent, {} in flight from a run that stopped (checked first), {} with no destination",
        p.to_send,
        if to.is_empty() { "none".into() } else { to.join(", ") },
        p.already_sent,
        p.in_flight,
        p.no_destination
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_are_partition_colon_offset() {
        assert_eq!(
            parse_letter("2:41").unwrap(),
            Letter {
                partition: 2,
                offset: 41
            }
        );
        assert!(parse_letter("2").is_err() && parse_letter("-1:3").is_err() && parse_letter("a:b").is_err());
    }
}
