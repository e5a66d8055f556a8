//! `streamsight groups reset`: a dry run unless `--execute`, straight against
//! a cluster (`--bootstrap-server`) or through a collector, which records it.

use crate::collector_client;
use crate::output::{self, Format};
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use streamsight_act::reset::{self, ResetRequest, TopicSelection};
use streamsight_core::Millis;
use streamsight_core::reset::{ResetPlan, ResetTo};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Move a group's committed offsets, as `kafka-consumer-groups
    /// --reset-offsets` does, after showing per partition what the group would
    /// skip or read again. Nothing changes without --execute; a group with live
    /// members is refused.
    Reset(ResetArgs),
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["to_offset", "to_time", "to_earliest", "to_latest", "shift_by"])))]
pub struct ResetArgs {
    /// The cluster, as the collector names it (with --bootstrap-server: only a label).
    #[arg(long)]
    pub cluster: Option<String>,
    /// The group whose offsets move.
    #[arg(long)]
    pub group: String,
    /// Only this topic, or these of its partitions (`orders:0,1`); repeatable.
    /// Without it: every partition of each topic the group committed on.
    #[arg(long = "topic")]
    pub topics: Vec<TopicSelection>,
    /// To this offset (clamped to the log).
    #[arg(long, allow_negative_numbers = true)]
    pub to_offset: Option<i64>,
    /// To the first record written at or after this time: RFC 3339
    /// (`2026-12-03T10:00:00Z`) or a duration ago (`-1h`).
    #[arg(long, allow_hyphen_values = true)]
    pub to_time: Option<String>,
    /// To the first offset still in the log.
    #[arg(long)]
    pub to_earliest: bool,
    /// To the end of the log: skip everything unread.
    #[arg(long)]
    pub to_latest: bool,
    /// By this many from the committed offset (negative: read again).
    #[arg(long, allow_negative_numbers = true)]
    pub shift_by: Option<i64>,
    /// Commit the offsets. Without it, only the plan is printed.
    #[arg(long)]
    pub execute: bool,
    /// Ask this cluster directly (host:port[,host:port]); the collector then
    /// does not know of the reset, and counts what it skips as it sees it.
    #[arg(long)]
    pub bootstrap_server: Option<String>,
    /// The collector's API (STREAMSIGHT_API_KEY is sent as its key; --execute
    /// needs an admin key). The collector records the reset as the group's own.
    #[arg(long, env = "STREAMSIGHT_API_URL", default_value = "http://127.0.0.1:7411")]
    pub collector: String,
    /// A table of the plan, or the answer as JSON.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Reset(args) => reset_group(args),
    }
}

pub(crate) fn now() -> Millis {
    Millis(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
    )
}

/// A time flag (`flag`): RFC 3339, or `-DURATION` before `now`.
pub(crate) fn parse_time_flag(flag: &str, s: &str, now: Millis) -> anyhow::Result<Millis> {
    if let Some(ago) = s.strip_prefix('-') {
        let d: Duration = humantime::parse_duration(ago)
            .map_err(|e| anyhow::anyhow!("{flag} {s:?}: {e} (give -1h, -30m, or an RFC 3339 time)"))?;
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        return Ok(Millis(now.0.saturating_sub(ms)));
    }
    let t = humantime::parse_rfc3339_weak(s)
        .map_err(|e| anyhow::anyhow!("{flag} {s:?}: {e} (give 2026-12-03T10:00:00Z, or -1h)"))?;
    let ms = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    Ok(Millis(i64::try_from(ms).unwrap_or(i64::MAX)))
}

fn parse_time(s: &str, now: Millis) -> anyhow::Result<Millis> {
    parse_time_flag("--to-time", s, now)
}

fn target(args: &ResetArgs, now: Millis) -> anyhow::Result<ResetTo> {
    Ok(if let Some(o) = args.to_offset {
        ResetTo::Offset(o)
    } else if let Some(t) = &args.to_time {
        ResetTo::Time(parse_time(t, now)?)
    } else if args.to_earliest {
        ResetTo::Earliest
    } else if args.to_latest {
        ResetTo::Latest
    } else {
        ResetTo::ShiftBy(args.shift_by.unwrap_or(0))
    })
}

/// What either path answers: the plan, and whether it ran.
#[derive(serde::Serialize, serde::Deserialize)]
struct Answer {
    dry_run: bool,
    #[serde(default)]
    would_refuse: Option<String>,
    #[serde(default)]
    executed: bool,
    #[serde(default)]
    recorded: Option<bool>,
    #[serde(default)]
    record_error: Option<String>,
    plan: ResetPlan,
}

fn reset_group(args: ResetArgs) -> anyhow::Result<()> {
    let now = now();
    let request = ResetRequest {
        group: args.group.clone(),
        topics: args.topics.clone(),
        to: target(&args, now)?,
    };
    // The request's own mistakes, said before any cluster or collector is asked.
    request.check()?;
    let answer = output::runtime()?.block_on(async {
        match &args.bootstrap_server {
            Some(bootstrap) => direct(bootstrap, args.cluster.as_deref(), &request, args.execute, now).await,
            None => through_collector(&args, &request).await,
        }
    })?;
    output::emit(args.format, &answer, |out, a| write_plan(out, a, now))?;
    Ok(())
}

async fn direct(
    bootstrap: &str,
    cluster: Option<&str>,
    request: &ResetRequest,
    execute: bool,
    now: Millis,
) -> anyhow::Result<Answer> {
    let config = streamsight_poller::ClusterConfig::new(cluster.unwrap_or("direct"), bootstrap);
    config
        .validate()
        .map_err(|e| anyhow::anyhow!("--bootstrap-server {bootstrap}: {e}"))?;
    let mut planned = reset::plan(&config, request, now).await?;
    if !execute {
        let would_refuse = planned.plan.refusal();
        return Ok(Answer {
            dry_run: true,
            would_refuse,
            executed: false,
            recorded: None,
            record_error: None,
            plan: planned.plan,
        });
    }
    reset::execute(&mut planned).await?;
    Ok(Answer {
        dry_run: false,
        would_refuse: None,
        executed: true,
        recorded: None,
        record_error: None,
        plan: planned.plan,
    })
}

async fn through_collector(args: &ResetArgs, request: &ResetRequest) -> anyhow::Result<Answer> {
    let cluster = args.cluster.as_deref().ok_or_else(|| {
        anyhow::anyhow!("missing --cluster: through a collector, name the cluster as the collector polls it (its /api/v1/clusters), or give --bootstrap-server HOST:PORT to go to the cluster itself")
    })?;
    let path = format!(
        "/api/v1/groups/{}/{}/reset",
        collector_client::segment(cluster),
        collector_client::segment(&request.group)
    );
    let body = serde_json::json!({ "topics": request.topics, "to": request.to, "dry_run": !args.execute });
    let text = collector_client::send(reqwest::Method::POST, &args.collector, &path, &[], Some(&body))
        .await
        .map_err(|e| anyhow::anyhow!("collector at {}: {e}", args.collector))?;
    serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("collector at {}: unexpected answer: {e}", args.collector))
}

pub(crate) fn time(ms: Option<i64>) -> String {
    ms.and_then(|ms| u64::try_from(ms).ok())
        .map(|ms| humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string())
        .unwrap_or_else(|| "-".into())
}

fn write_plan(out: &mut dyn Write, a: &Answer, now: Millis) -> std::io::Result<()> {
    let p = &a.plan;
    writeln!(
        out,
        "group {} on {} ({}), to {}",
        p.group,
        p.cluster,
        p.state.as_deref().unwrap_or("state unknown"),
        p.to
    )?;
    if p.new_group {
        writeln!(
            out,
            "group {} does not exist on {}: executing creates it with these offsets",
            p.group, p.cluster
        )?;
    }
    writeln!(
        out,
        "{:<30} {:>9} {:>12} {:>12} {:>10} {:>10}  RECORDS WRITTEN",
        "TOPIC", "PARTITION", "COMMITTED", "TARGET", "SKIP", "READ AGAIN"
    )?;
    for part in &p.partitions {
        // The span's ends as ISO-8601 UTC, with the age of the newest.
        let span = match (part.first_time_ms, part.last_time_ms) {
            (None, None) => "-".into(),
            (first, Some(last)) => format!(
                "{} .. {}",
                time(first),
                streamsight_core::explain::at_ago(Millis(last), now)
            ),
            (first, None) => format!("{} .. -", time(first)),
        };
        writeln!(
            out,
            "{:<30} {:>9} {:>12} {:>12} {:>10} {:>10}  {span}{}",
            part.topic,
            part.partition,
            part.committed.map_or_else(|| "-".into(), |c| c.to_string()),
            part.target,
            // No commit: where the group would have started is its client's
            // auto.offset.reset, unknown here.
            part.committed.map_or_else(|| "-".into(), |_| part.skip.to_string()),
            part.committed.map_or_else(|| "-".into(), |_| part.reread.to_string()),
            part.note.as_deref().map(|n| format!("  ({n})")).unwrap_or_default()
        )?;
    }
    for why in &p.unplanned {
        writeln!(out, "not planned: {why}")?;
    }
    writeln!(
        out,
        "{} partition(s): {} offset(s) skipped, {} read again",
        p.partitions.len(),
        p.skip,
        p.reread
    )?;
    if a.executed {
        writeln!(out, "executed: the group's offsets are committed.")?;
        match (a.recorded, &a.record_error) {
            (Some(true), _) => writeln!(out, "recorded by the collector as the group's own reset.")?,
            (Some(false), why) => writeln!(
                out,
                "NOT recorded by the collector: {}",
                why.as_deref().unwrap_or("unknown")
            )?,
            (None, _) => writeln!(
                out,
                "the collector was not told (--bootstrap-server): it sees the move as the group's own commit."
            )?,
        }
    } else {
        match &a.would_refuse {
            Some(why) => writeln!(out, "dry run: nothing changed; --execute would be refused: {why}")?,
            None => writeln!(
                out,
                "dry run: nothing changed. Run again with --execute to commit these offsets."
            )?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_or_a_duration_ago() {
        let now = Millis(10_000_000);
        assert_eq!(parse_time("-1h", now).unwrap(), Millis(10_000_000 - 3_600_000));
        assert_eq!(parse_time("1970-01-01T00:00:10Z", now).unwrap(), Millis(10_000));
        let e = parse_time("yesterday", now).unwrap_err().to_string();
        assert!(e.contains("2026-12-03T10:00:00Z, or -1h"), "{e}");
    }
}
