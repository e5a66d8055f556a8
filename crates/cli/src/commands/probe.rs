//! `streamsight probe`: the end-to-end probe alone, reporting as it goes.

use crate::output::{self, Format};
use std::io::Write;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The cluster to probe (host:port[,host:port]).
    #[arg(long)]
    pub bootstrap_server: String,
    /// The probe topic: one record to each of its partitions every interval.
    #[arg(long, default_value = "streamsight-probe")]
    pub topic: String,
    /// The group that reads the probe's records back.
    #[arg(long, default_value = "streamsight-probe")]
    pub group: String,
    /// How often a record is sent to each partition.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    pub interval: std::time::Duration,
    /// A record not back within this is lost.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "20s")]
    pub sla: std::time::Duration,
    /// Print a report this often.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    pub report_every: std::time::Duration,
    /// Stop after this long (default: until interrupted), printing a last report.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<std::time::Duration>,
    /// Each report as a table, or as one line of JSON.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let config = streamsight_probe::ProbeConfig {
        topic: args.topic,
        group: args.group,
        interval: args.interval,
        sla: args.sla,
        // Named by where it probes: its log lines say `probe=HOST:PORT`.
        ..streamsight_probe::ProbeConfig::new(&args.bootstrap_server, &args.bootstrap_server)
    };
    let (bootstrap, topic) = (args.bootstrap_server.clone(), config.topic.clone());
    let (every, duration, format) = (args.report_every, args.duration, args.format);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = runtime.block_on(async move {
        let probe = streamsight_probe::Probe::start(config)?;
        let deadline = duration.map(|d| tokio::time::Instant::now() + d);
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        loop {
            let last = tokio::select! {
                _ = tick.tick() => false,
                () = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => true,
                _ = tokio::signal::ctrl_c() => true,
            };
            let report = probe.report();
            output::emit(format, &report, |out, report| {
                write_table(out, report, probe.last_error())
            })?;
            if last {
                let why = probe.last_error();
                probe.shutdown().await;
                // A probe that never reached a partition measured nothing.
                anyhow::ensure!(
                    !report.partitions.is_empty(),
                    "the probe reached no partition of {topic:?} at {bootstrap}: {}; is a broker up there, \
                     and may this client create or write the topic?",
                    why.as_deref().unwrap_or("no metadata for the topic")
                );
                return anyhow::Ok(());
            }
        }
    });
    // A broker call still under way on a blocking thread (metadata from a
    // broker that never answers) must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    result
}

fn write_table(
    out: &mut dyn Write,
    report: &streamsight_core::probe::ProbeReport,
    last_error: Option<String>,
) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<10} {:<9} {:>7} {:>9} {:>6} {:>11} {:>12} {:>12} {:>12}",
        "PARTITION", "STATUS", "SENT", "RECEIVED", "LOST", "DUPLICATED", "PRODUCE-ERR", "RT-P50(s)", "RT-P99(s)"
    )?;
    for p in &report.partitions {
        let q = |f: fn(&streamsight_core::probe::LatencySummary) -> f64| {
            p.roundtrip_latency
                .as_ref()
                .map_or("-".to_owned(), |s| format!("{:.3}", f(s)))
        };
        writeln!(
            out,
            "{:<10} {:<9} {:>7} {:>9} {:>6} {:>11} {:>12} {:>12} {:>12}",
            p.partition,
            p.status.to_uppercase(),
            p.sent,
            p.received,
            p.lost,
            p.duplicated,
            p.produce_errors,
            q(|s| s.p50_seconds),
            q(|s| s.p99_seconds)
        )?;
    }
    if report.partitions.is_empty() {
        writeln!(out, "(no partition probed yet)")?;
    }
    if let Some(e) = last_error {
        writeln!(out, "error: {e}")?;
    }
    Ok(())
}
