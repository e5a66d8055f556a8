//! `streamsight replay`: a scenario of timed events through the engine, on a
//! simulated clock, with the state printed at sample times.
//!
//! Input is JSON Lines, one event per line, in non-decreasing `at` (seconds from
//! the scenario's start). Data that is merely wrong (offset -1, partition -1) is the
//! engine's to reject and count; a line that is not a valid event stops the replay
//! with its number and the reason.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use streamsight_core::{EndOffsetSource, Engine, EngineStats, LagRow, Millis, Observation, PartitionRef, Record};
use streamsight_wire::dsm::backlog;

/// The cluster events belong to when they do not name one.
pub const DEFAULT_CLUSTER: &str = "default";

/// `json`: one JSON object per (group, topic, partition) per sample;
/// `table`: a table per sample, for people.
pub use crate::output::Format;

#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// Also sample every this many milliseconds, starting at 0.
    pub sample_every_ms: Option<i64>,
    pub format: Format,
    /// Print engine events (resets, data loss) as they are detected.
    pub events: bool,
}

#[derive(Debug)]
pub struct ReplaySummary {
    pub lines: usize,
    pub samples: usize,
    pub stats: EngineStats,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("line {line}: {reason}")]
    Line { line: usize, reason: String },
    #[error("reading the scenario: {0}")]
    Read(std::io::Error),
    #[error("writing the output: {0}")]
    Write(std::io::Error),
}

/// One line of a scenario, `at` aside.
#[derive(Debug, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
enum Event {
    Produce {
        #[serde(default)]
        cluster: Option<String>,
        topic: String,
        partition: i32,
        offset: i64,
    },
    ProduceFailed {
        #[serde(default)]
        cluster: Option<String>,
        topic: String,
        partition: i32,
        /// What the client handed its callback; never used as an offset.
        #[serde(default)]
        #[allow(dead_code)]
        offset: Option<i64>,
        #[serde(default)]
        error: Option<String>,
    },
    Commit {
        #[serde(default)]
        cluster: Option<String>,
        group: String,
        topic: String,
        partition: i32,
        offset: i64,
    },
    HighWatermark {
        #[serde(default)]
        cluster: Option<String>,
        topic: String,
        partition: i32,
        offset: i64,
    },
    LogStart {
        #[serde(default)]
        cluster: Option<String>,
        topic: String,
        partition: i32,
        offset: i64,
    },
    ControlMarker {
        #[serde(default)]
        cluster: Option<String>,
        topic: String,
        partition: i32,
        offset: i64,
    },
    /// The broker's last stable offset (ListOffsets `read_committed`).
    StableOffset {
        #[serde(default)]
        cluster: Option<String>,
        topic: String,
        partition: i32,
        offset: i64,
    },
    /// The record at `offset` has `at` as its timestamp.
    RecordWritten {
        #[serde(default)]
        cluster: Option<String>,
        topic: String,
        partition: i32,
        offset: i64,
    },
    TopicRecreated {
        #[serde(default)]
        cluster: Option<String>,
        topic: String,
    },
    /// A raw Data Streams backlog, exactly as a tracer sent it.
    Backlog {
        tags: Vec<String>,
        value: i64,
    },
    Sample {},
}

/// One (group, topic, partition) at one sample.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub at: f64,
    #[serde(flatten)]
    pub lag: LagRow,
}

impl std::ops::Deref for Row {
    type Target = LagRow;

    fn deref(&self) -> &LagRow {
        &self.lag
    }
}

fn parse_line(line: &str) -> Result<(Millis, Event), String> {
    let mut value: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let object = value.as_object_mut().ok_or("expected a JSON object")?;
    let at = object.remove("at").ok_or("missing field `at`")?;
    let secs = at
        .as_f64()
        .ok_or_else(|| format!("`at` must be a number of seconds, got {at}"))?;
    let at = Millis::from_secs_f64(secs).ok_or_else(|| format!("`at` {secs} is not a finite time"))?;
    if !object.contains_key("event") {
        return Err("missing field `event`".into());
    }
    let event = Event::deserialize(value).map_err(|e| e.to_string())?;
    Ok((at, event))
}

/// The event as the log's record, applied as the collector applies what it stored.
fn apply(engine: &mut Engine, at: Millis, event: &Event) {
    fn part<'a>(cluster: &'a Option<String>, topic: &'a str, partition: i32) -> PartitionRef<'a> {
        PartitionRef {
            cluster: cluster.as_deref().unwrap_or(DEFAULT_CLUSTER),
            topic,
            partition,
        }
    }
    let observation = match event {
        Event::Produce {
            cluster,
            topic,
            partition,
            offset,
        } => Observation::Produced {
            partition: part(cluster, topic, *partition),
            offset: *offset,
        },
        Event::ProduceFailed {
            cluster,
            topic,
            partition,
            error,
            ..
        } => Observation::ProduceFailed {
            partition: part(cluster, topic, *partition),
            error: error.as_deref().unwrap_or("unknown"),
        },
        Event::Commit {
            cluster,
            group,
            topic,
            partition,
            offset,
        } => Observation::Committed {
            group,
            partition: part(cluster, topic, *partition),
            offset: *offset,
        },
        Event::HighWatermark {
            cluster,
            topic,
            partition,
            offset,
        } => Observation::EndOffset {
            partition: part(cluster, topic, *partition),
            offset: *offset,
            source: EndOffsetSource::Broker,
        },
        Event::LogStart {
            cluster,
            topic,
            partition,
            offset,
        } => Observation::LogStart {
            partition: part(cluster, topic, *partition),
            offset: *offset,
        },
        Event::ControlMarker {
            cluster,
            topic,
            partition,
            offset,
        } => Observation::ControlMarker {
            partition: part(cluster, topic, *partition),
            offset: *offset,
        },
        Event::StableOffset {
            cluster,
            topic,
            partition,
            offset,
        } => Observation::StableOffset {
            partition: part(cluster, topic, *partition),
            offset: *offset,
        },
        Event::RecordWritten {
            cluster,
            topic,
            partition,
            offset,
        } => Observation::RecordWritten {
            partition: part(cluster, topic, *partition),
            offset: *offset,
        },
        Event::TopicRecreated { cluster, topic } => Observation::TopicRecreated {
            cluster: cluster.as_deref().unwrap_or(DEFAULT_CLUSTER),
            topic,
        },
        Event::Backlog { tags, value } => match backlog::parse(tags, *value, DEFAULT_CLUSTER) {
            Ok(observation) => observation,
            Err(e) => {
                Record::Rejected { at, reason: e.reason() }.apply(engine);
                return;
            }
        },
        Event::Sample {} => return,
    };
    // Rejections are counted by the engine; a replay goes on past them.
    Record::Observation {
        at,
        observation: observation.to_owned(),
    }
    .apply(engine);
}

/// The state of every group-partition at `now`, sorted by name.
pub fn sample(engine: &Engine, now: Millis) -> Vec<Row> {
    engine
        .reports(now, |_| true)
        .into_iter()
        .map(|(names, mut report)| {
            // Milliseconds are the engine's resolution: no float noise beyond them.
            report.lag_seconds = report.lag_seconds.map(|s| (s * 1000.0).round() / 1000.0);
            Row {
                at: now.as_secs_f64(),
                lag: names.row(report),
            }
        })
        .collect()
}

/// Replays `input` into `engine`, writing samples to `out`.
pub fn run(
    engine: &mut Engine,
    input: impl BufRead,
    out: &mut impl Write,
    options: &ReplayOptions,
) -> Result<ReplaySummary, ReplayError> {
    let mut printer = Printer {
        out,
        format: options.format,
        samples: 0,
    };
    let mut next_sample = options.sample_every_ms.map(|_| Millis(0));
    let every = options.sample_every_ms.unwrap_or(i64::MAX).max(1);
    let mut last_at: Option<Millis> = None;
    let mut lines = 0;
    for (index, line) in input.lines().enumerate() {
        let line = line.map_err(ReplayError::Read)?;
        lines = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let bad = |reason: String| ReplayError::Line {
            line: index + 1,
            reason,
        };
        let (at, event) = parse_line(&line).map_err(bad)?;
        if let Some(prev) = last_at
            && at < prev
        {
            return Err(bad(format!(
                "`at` {} is before the previous event's {}: events must be in time order",
                at.as_secs_f64(),
                prev.as_secs_f64()
            )));
        }
        while let Some(t) = next_sample.filter(|&t| t < at) {
            printer.sample(engine, t)?;
            next_sample = Some(Millis(t.0.saturating_add(every)));
        }
        apply(engine, at, &event);
        if options.events {
            printer.events(engine)?;
        } else {
            engine.drain_events();
        }
        if matches!(event, Event::Sample {}) {
            printer.sample(engine, at)?;
        }
        last_at = Some(at);
    }
    if let Some(end) = last_at {
        while let Some(t) = next_sample.filter(|&t| t <= end) {
            printer.sample(engine, t)?;
            next_sample = Some(Millis(t.0.saturating_add(every)));
        }
        if printer.samples == 0 {
            printer.sample(engine, end)?;
        }
    }
    Ok(ReplaySummary {
        lines,
        samples: printer.samples,
        stats: engine.stats().clone(),
    })
}

struct Printer<'w, W: Write> {
    out: &'w mut W,
    format: Format,
    samples: usize,
}

impl<W: Write> Printer<'_, W> {
    fn sample(&mut self, engine: &Engine, now: Millis) -> Result<(), ReplayError> {
        self.samples += 1;
        let rows = sample(engine, now);
        match self.format {
            Format::Json => {
                for r in &rows {
                    let line = serde_json::to_string(r).map_err(|e| ReplayError::Write(e.into()))?;
                    writeln!(self.out, "{line}").map_err(ReplayError::Write)?;
                }
            }
            Format::Table => write_table(self.out, now, &rows).map_err(ReplayError::Write)?,
        }
        Ok(())
    }

    fn events(&mut self, engine: &mut Engine) -> Result<(), ReplayError> {
        for event in engine.drain_events() {
            let mut value = serde_json::to_value(&event).map_err(|e| ReplayError::Write(e.into()))?;
            if let Some(at) = value.get_mut("at").and_then(|v| v.as_i64()) {
                value["at"] = serde_json::json!(Millis(at).as_secs_f64());
            }
            let prefix = if self.format == Format::Table { "event " } else { "" };
            writeln!(self.out, "{prefix}{value}").map_err(ReplayError::Write)?;
        }
        Ok(())
    }
}

fn write_table(out: &mut impl Write, now: Millis, rows: &[Row]) -> std::io::Result<()> {
    let opt = |v: Option<i64>| v.map_or_else(|| "unknown".to_owned(), |v| v.to_string());
    let cells: Vec<[String; 9]> = rows
        .iter()
        .map(|row| {
            let r = &row.report;
            let lag_s = match (r.lag_seconds, r.lag_seconds_lower_bound) {
                (None, _) => "unknown".to_owned(),
                (Some(s), true) => format!(">={s:.1}"),
                (Some(s), false) => format!("{s:.1}"),
            };
            let mut flags = Vec::new();
            if r.producer_failing {
                flags.push("producer_failing".to_owned());
            }
            if r.data_loss_messages > 0 {
                flags.push(format!("data_loss={}", r.data_loss_messages));
            }
            if r.at_control_marker {
                flags.push("control_marker".to_owned());
            }
            [
                row.cluster.clone(),
                row.group.clone(),
                row.topic.clone(),
                row.partition.to_string(),
                opt(r.committed_offset),
                opt(r.end_offset),
                opt(r.lag_messages),
                lag_s,
                format!("{} {}", r.status.as_str(), flags.join(","))
                    .trim_end()
                    .to_owned(),
            ]
        })
        .collect();
    let header = [
        "CLUSTER",
        "GROUP",
        "TOPIC",
        "PART",
        "COMMITTED",
        "END",
        "LAG",
        "LAG_S",
        "STATUS",
    ];
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    writeln!(out, "at {:.3} s", now.as_secs_f64())?;
    let line = |cells: &[&str]| {
        cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    writeln!(out, "{}", line(&header))?;
    for row in &cells {
        writeln!(out, "{}", line(&row.each_ref().map(String::as_str)))?;
    }
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamsight_core::EngineConfig;

    fn replay(input: &str, every: Option<i64>) -> Result<(Vec<Row>, ReplaySummary), ReplayError> {
        let mut engine = Engine::new(EngineConfig::default()).unwrap();
        let mut out = Vec::new();
        let options = ReplayOptions {
            sample_every_ms: every,
            format: Format::Json,
            events: false,
        };
        let summary = run(&mut engine, input.as_bytes(), &mut out, &options)?;
        let rows = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        Ok((rows, summary))
    }

    fn line_error(input: &str) -> (usize, String) {
        match replay(input, None) {
            Err(ReplayError::Line { line, reason }) => (line, reason),
            other => panic!("expected a line error, got {other:?}"),
        }
    }

    #[test]
    fn samples_see_events_up_to_their_time() {
        let input = r#"{"at":0,"event":"produce","topic":"t","partition":0,"offset":9}
{"at":1,"event":"commit","group":"g","topic":"t","partition":0,"offset":5}
{"at":2,"event":"sample"}
{"at":2,"event":"produce","topic":"t","partition":0,"offset":19}
"#;
        let (rows, summary) = replay(input, Some(1000)).unwrap();
        let at: Vec<(f64, Option<i64>)> = rows.iter().map(|r| (r.at, r.report.lag_messages)).collect();
        // periodic at 0 (no group yet: no rows), 1, 2; the explicit sample at 2 comes
        // before the second produce in the file.
        assert_eq!(at, vec![(1.0, Some(5)), (2.0, Some(5)), (2.0, Some(15))]);
        assert_eq!(summary.samples, 4);
    }

    #[test]
    fn an_open_transaction_and_a_record_time_replay() {
        // The LSO stays at 100 while the high watermark moves on; the group waits
        // at it. The record at 100 was written at 5 s.
        let input = r#"{"at":5,"event":"record_written","topic":"t","partition":0,"offset":100}
{"at":10,"event":"high_watermark","topic":"t","partition":0,"offset":120}
{"at":10,"event":"stable_offset","topic":"t","partition":0,"offset":100}
{"at":10,"event":"commit","group":"g","topic":"t","partition":0,"offset":100}
{"at":80,"event":"high_watermark","topic":"t","partition":0,"offset":150}
{"at":80,"event":"stable_offset","topic":"t","partition":0,"offset":100}
{"at":80,"event":"sample"}
"#;
        let (rows, _) = replay(input, None).unwrap();
        let r = &rows[0].report;
        assert_eq!(r.status, streamsight_core::Status::Blocked);
        assert_eq!(
            (r.last_stable_offset, r.open_transaction_since),
            (Some(100), Some(Millis(10_000)))
        );
        // Exact up to the history's streaming tolerance (a quarter of min_resolution).
        assert!(!r.lag_seconds_lower_bound);
        assert!(r.lag_seconds.is_some_and(|s| (s - 75.0).abs() <= 0.25), "{r:?}");
    }

    #[test]
    fn without_samples_the_final_state_is_printed() {
        let input = r#"{"at":0,"event":"produce","topic":"t","partition":0,"offset":9}
{"at":3,"event":"commit","group":"g","topic":"t","partition":0,"offset":10}
"#;
        let (rows, _) = replay(input, None).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].at, 3.0);
        assert_eq!(rows[0].report.lag_messages, Some(0));
    }

    #[test]
    fn invalid_data_is_counted_not_fatal() {
        let input = r#"{"at":0,"event":"backlog","tags":["type:kafka_produce","topic:t","partition:-1"],"value":-1}
{"at":0,"event":"backlog","tags":["type:kafka_produce","topic:t"],"value":3}
{"at":0,"event":"produce_failed","topic":"t","partition":0,"offset":-1,"error":"MSG_SIZE_TOO_LARGE"}
"#;
        let (_, summary) = replay(input, None).unwrap();
        let r = &summary.stats.rejected;
        assert_eq!(r.get(streamsight_core::RejectReason::NegativePartition), 1);
        assert_eq!(r.get(streamsight_core::RejectReason::MissingTag), 1);
        assert_eq!(r.get(streamsight_core::RejectReason::FailedSend), 1);
    }

    #[test]
    fn bad_lines_stop_with_their_number_and_reason() {
        let ok = r#"{"at":1,"event":"sample"}"#;
        let cases = [
            ("not json", "not JSON"),
            (r#"[1,2]"#, "expected a JSON object"),
            (r#"{"event":"sample"}"#, "missing field `at`"),
            (r#"{"at":"soon","event":"sample"}"#, "`at` must be a number"),
            (r#"{"at":1}"#, "missing field `event`"),
            (r#"{"at":1,"event":"teleport"}"#, "unknown variant `teleport`"),
            (
                r#"{"at":1,"event":"produce","topic":"t","partition":0}"#,
                "missing field `offset`",
            ),
            (
                r#"{"at":1,"event":"produce","topic":"t","partition":0,"offset":1.5}"#,
                "invalid type",
            ),
            (
                r#"{"at":1,"event":"produce","topic":"t","partition":1e12,"offset":1}"#,
                "invalid type",
            ),
            (r#"{"at":1,"event":"sample","colour":"red"}"#, "unknown field `colour`"),
            (r#"{"at":0.5,"event":"sample"}"#, "before the previous event's 1"),
        ];
        for (bad, why) in cases {
            let (line, reason) = line_error(&format!("{ok}\n\n{bad}\n{ok}\n"));
            assert_eq!(line, 3, "{bad}");
            assert!(reason.contains(why), "{bad}: {reason}");
        }
    }
}
