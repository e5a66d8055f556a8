//! streamsight's rules as Prometheus alerting rules, so that a team paging
//! from Prometheus pages on the same conditions, at the same thresholds and
//! after the same waits as streamsight's own alerts (`streamsight alerts rules
//! --format prometheus`; `deploy/prometheus/alerts.yml` is its output for the
//! default rules, and a test keeps it so).
//!
//! A rule over a signal `/metrics` exports is translated into PromQL over that
//! series; an anomaly rule (its baseline lives in streamsight) and a signal
//! with no series of its own are mirrored from `streamsight_alert_value`,
//! which carries each alert's labels. Pure: rules in, text out.

use crate::metrics::prometheus_label;
use std::fmt::Write;
use std::time::Duration;
use streamsight_core::Status;
use streamsight_core::alerts::rule::{Aggregate, Rule, Signal};

/// How far back a counter's rule looks for an increase (streamsight's own
/// missing-messages signal counts windows reconciled over the last 10 minutes).
const COUNTER_WINDOW: &str = "10m";

/// One Prometheus alerting rule.
struct PromRule {
    alert: String,
    expr: String,
    for_: Duration,
    severity: String,
    /// The streamsight rule it comes from.
    rule: Option<String>,
    /// Read from `streamsight_alert_value` (the rule has no series of its own).
    mirrored: bool,
    summary: String,
}

/// The alert name of streamsight's rule `name`: `Kafka` and the name in
/// CamelCase (`consumer_stalled` → `KafkaConsumerStalled`).
pub fn alert_name(name: &str) -> String {
    let mut out = String::from("Kafka");
    for word in name.split(|c: char| !c.is_ascii_alphanumeric()) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    out
}

/// The severity a rule pages with: its own `severity` label, else `page` for
/// the seed's incident and lost messages, `warn` for the rest.
fn severity(rule: &Rule) -> String {
    if let Some(s) = rule.labels.get("severity") {
        return s.clone();
    }
    let page = [
        "consumer_stalled",
        "data_loss",
        "lag_seconds_high",
        "producer_failing",
        "messages_missing",
        "unread_expiring",
    ];
    if page.contains(&rule.name.as_str()) {
        "page"
    } else {
        "warn"
    }
    .to_owned()
}

/// A glob (`*` for any text) as an anchored PromQL regular expression.
fn glob_regex(glob: &str) -> String {
    let mut out = String::new();
    for c in glob.chars() {
        match c {
            '*' => out.push_str(".*"),
            c if "\\.+?()[]{}|^$".contains(c) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// A PromQL string literal.
fn quoted(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// `metric{matchers}`: the rule's scope as regular-expression matchers, then `extra`.
fn selector(metric: &str, rule: &Rule, extra: &[(&str, &str, &str)]) -> String {
    let mut matchers: Vec<String> = rule
        .scope
        .iter()
        .filter_map(|(label, glob)| {
            let name = if label == "alertname" {
                return None;
            } else {
                prometheus_label(label)?
            };
            Some(format!("{name}=~{}", quoted(&glob_regex(glob))))
        })
        .collect();
    matchers.extend(extra.iter().map(|(k, op, v)| format!("{k}{op}{}", quoted(v))));
    if matchers.is_empty() {
        metric.to_owned()
    } else {
        format!("{metric}{{{}}}", matchers.join(","))
    }
}

/// The rule's comparison (`> 300`, `< 3600`).
fn threshold(rule: &Rule) -> String {
    match (rule.below, rule.above) {
        (Some(below), _) => format!("< {below}"),
        (None, Some(above)) => format!("> {above}"),
        (None, None) => "> 0".to_owned(),
    }
}

/// What a counter gained over the window, a series first seen within it
/// counted from 0: `increase()` alone reads a counter that first appears at
/// 100 as no increase, and a first loss would never page.
fn gained(series: &str, by: &str) -> String {
    format!("sum by ({by}) ({series} - ({series} offset {COUNTER_WINDOW} or {series} * 0))")
}

/// `rule` in PromQL over the series `/metrics` exports, with the summary when
/// the translation's value is not the signal's; `None` when it has no series
/// of its own (it is mirrored).
fn native(rule: &Rule) -> Option<(String, Option<String>)> {
    if rule.anomaly.is_some() {
        return None;
    }
    let t = threshold(rule);
    let max = |metric: &str, by: &str| format!("max by ({by}) ({}) {t}", selector(metric, rule, &[]));
    let group = "cluster_name, group";
    Some(match rule.signal {
        Signal::GroupLagSeconds => (max("kafka_consumergroup_group_max_lag_seconds", group), None),
        Signal::GroupLagMessages if rule.aggregate == Some(Aggregate::Max) => {
            (max("kafka_consumergroup_group_max_lag", group), None)
        }
        Signal::GroupLagMessages => (
            format!(
                "sum by ({group}) ({}) {t}",
                selector("kafka_consumergroup_group_sum_lag", rule, &[])
            ),
            None,
        ),
        // A loss is a moment (the committed offset below the log start, until
        // the group moves past): its counter, which a scrape cannot miss.
        Signal::GroupStatus if rule.statuses == [Status::DataLoss] => (
            format!(
                "{} > 0",
                gained(
                    &selector("streamsight_data_loss_messages_total", rule, &[]),
                    "cluster_name, group, topic"
                )
            ),
            Some(
                "retention deleted {{ $value | printf \"%.6g\" }} messages of {{ $labels.topic }} that {{ $labels.group }} ({{ $labels.cluster_name }}) had not read (last 10 minutes)"
                    .to_owned(),
            ),
        ),
        Signal::GroupStatus => {
            let statuses: Vec<&str> = rule.statuses.iter().map(|s| s.as_str()).collect();
            let series = selector("streamsight_group_status", rule, &[("status", "=~", &statuses.join("|"))]);
            (format!("max by ({group}) ({series}) {t}"), None)
        }
        Signal::ProducerFailing => (max("streamsight_producer_failing", "cluster_name, topic"), None),
        Signal::MissingMessages => (
            format!(
                "{} {t}",
                gained(
                    &selector("streamsight_messages_missing_total", rule, &[]),
                    "cluster_name, group, topic"
                )
            ),
            None,
        ),
        Signal::RetentionMarginSeconds => (max("streamsight_retention_margin_seconds", group), None),
        Signal::CatchUpSeconds => (max("streamsight_catch_up_seconds", group), None),
        Signal::PartitionsNotCommitting => (max("streamsight_partitions_not_committing", group), None),
        Signal::RebalancesPerHour => (max("streamsight_group_rebalances_last_hour", group), None),
        Signal::OpenTransactionSeconds => (
            max("streamsight_open_transaction_seconds", "cluster_name, topic, partition"),
            None,
        ),
        _ => return None,
    })
}

/// streamsight's summary template in Go's: `{label}` → `{{ $labels.label }}`
/// (`cluster` is `cluster_name`), `{value}` → `{{ $value | printf "%.6g" }}`.
fn summary(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            break;
        };
        out.push_str(&rest[..open]);
        let name = &after[..close];
        if name == "value" {
            out.push_str("{{ $value | printf \"%.6g\" }}");
        } else if let Some(label) = prometheus_label(name) {
            let _ = write!(out, "{{{{ $labels.{label} }}}}");
        } else {
            out.push_str(&rest[open..open + close + 2]);
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

fn translate(rule: &Rule) -> PromRule {
    let native = native(rule);
    let mirrored = native.is_none();
    let (expr, own_summary) = native.unwrap_or_else(|| {
        // No data is how some rules fire (a silent service has no value).
        let series = format!(
            "streamsight_alert_value{{rule={},state=~\"firing|no_data\"}}",
            quoted(&rule.name)
        );
        (series, None)
    });
    PromRule {
        alert: alert_name(&rule.name),
        expr,
        // A mirrored alert already held for the rule's `for` in streamsight.
        for_: if mirrored { Duration::ZERO } else { rule.for_ },
        severity: severity(rule),
        rule: Some(rule.name.clone()),
        mirrored,
        summary: own_summary.unwrap_or_else(|| summary(&rule.summary)),
    }
}

/// Rules of Prometheus' own: missing data is never healthy, and streamsight's
/// alerts that have no rule above still reach Prometheus.
fn meta(generated: &[String], mirrored: &[String]) -> Vec<PromRule> {
    let own = |alert: &str, expr: String, for_secs: u64, severity: &str, summary: &str| PromRule {
        alert: alert.to_owned(),
        expr,
        for_: Duration::from_secs(for_secs),
        severity: severity.to_owned(),
        rule: None,
        mirrored: false,
        summary: summary.to_owned(),
    };
    let except = |names: &[String]| {
        if names.is_empty() {
            String::new()
        } else {
            let names: Vec<String> = names.iter().map(|n| glob_regex(n)).collect();
            format!(",rule!~{}", quoted(&names.join("|")))
        }
    };
    let (others, unmirrored) = (except(generated), except(mirrored));
    vec![
        own(
            "KafkaLagUnknown",
            "max by (cluster_name, group) (streamsight_group_status{status=\"stale\"}) > 0".to_owned(),
            600,
            "warn",
            "lag of {{ $labels.group }} ({{ $labels.cluster_name }}) is unknown: no fresh data",
        ),
        own(
            "StreamsightAlertFiring",
            format!("streamsight_alert_value{{state=\"firing\"{others}}}"),
            0,
            "warn",
            "streamsight's rule {{ $labels.rule }} is firing{{ with $labels.group }} for group {{ . }}{{ end }}{{ with $labels.topic }} on {{ . }}{{ end }}{{ with $labels.service }} for service {{ . }}{{ end }}{{ with $labels.cluster_name }} ({{ . }}){{ end }}: value {{ $value | printf \"%.6g\" }}",
        ),
        own(
            "StreamsightAlertNoData",
            format!("streamsight_alert_value{{state=\"no_data\"{unmirrored}}}"),
            0,
            "warn",
            "streamsight's rule {{ $labels.rule }} has no data{{ with $labels.group }} for group {{ . }}{{ end }}{{ with $labels.topic }} on {{ . }}{{ end }}{{ with $labels.service }} from service {{ . }}{{ end }}{{ with $labels.cluster_name }} ({{ . }}){{ end }}: missing data is not healthy",
        ),
        own(
            "StreamsightAlertsNotEvaluated",
            "streamsight_alerts_evaluated == 0".to_owned(),
            60,
            "page",
            "nobody evaluates streamsight's rules{{ with $labels.instance }} (as {{ . }} sees it){{ end }}: the alerts it shows are stale",
        ),
        own(
            "StreamsightNotificationsFailing",
            "increase(streamsight_notifications_failed_total[15m]) > 0".to_owned(),
            0,
            "warn",
            "streamsight could not deliver {{ $value | printf \"%.6g\" }} notifications",
        ),
        own(
            "StreamsightDown",
            "absent(up{job=\"streamsight\"} == 1)".to_owned(),
            300,
            "page",
            "streamsight is not being scraped: Kafka lag is not watched",
        ),
        own(
            "StreamsightLagSeriesAbsent",
            "absent(kafka_consumergroup_group_lag_seconds)".to_owned(),
            900,
            "warn",
            "no lag series at all: no data is not the same as no lag",
        ),
    ]
}

/// A duration as Prometheus writes it (`1m`, `30s`, `1h30m`).
fn duration(d: Duration) -> String {
    let s = d.as_secs();
    let (h, m, sec) = (s / 3600, s % 3600 / 60, s % 60);
    let mut out = String::new();
    for (n, unit) in [(h, "h"), (m, "m"), (sec, "s")] {
        if n > 0 {
            let _ = write!(out, "{n}{unit}");
        }
    }
    out
}

/// The enabled `rules` as a Prometheus rule file (YAML), with Prometheus' own
/// rules after them.
pub fn rules_file(rules: &[Rule], source: &str) -> String {
    let translated: Vec<PromRule> = rules.iter().filter(|r| r.enabled).map(translate).collect();
    let names: Vec<String> = translated.iter().filter_map(|r| r.rule.clone()).collect();
    let mirrored: Vec<String> = translated
        .iter()
        .filter(|r| r.mirrored)
        .filter_map(|r| r.rule.clone())
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Generated by `streamsight alerts rules --format prometheus` from {source}:\n\
         # do not edit; change the rules in streamsight.toml ([[serve.alerts.rules]])\n\
         # and generate again. Each alert holds for the rule's own `for`, so it pages\n\
         # when streamsight's own alert does (plus a scrape and an evaluation).\n\
         # Checked by `promtool check rules` and `promtool test rules alerts_test.yml`\n\
         # (crates/cli/tests/prometheus.rs)."
    );
    out.push_str("groups:\n");
    for (group, rules) in [
        ("streamsight", translated),
        ("streamsight-meta", meta(&names, &mirrored)),
    ] {
        let _ = writeln!(out, "  - name: {group}\n    rules:");
        for r in rules {
            let _ = writeln!(out, "      - alert: {}", r.alert);
            let _ = writeln!(out, "        expr: {}", quoted(&r.expr));
            if !r.for_.is_zero() {
                let _ = writeln!(out, "        for: {}", duration(r.for_));
            }
            let _ = writeln!(out, "        labels:\n          severity: {}", quoted(&r.severity));
            if let Some(rule) = &r.rule {
                let _ = writeln!(out, "          streamsight_rule: {}", quoted(rule));
            }
            let _ = writeln!(out, "        annotations:\n          summary: {}", quoted(&r.summary));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_durations_as_prometheus_writes_them() {
        assert_eq!(alert_name("consumer_stalled"), "KafkaConsumerStalled");
        assert_eq!(alert_name("lag-seconds.high"), "KafkaLagSecondsHigh");
        assert_eq!(duration(Duration::from_secs(60)), "1m");
        assert_eq!(duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(duration(Duration::from_secs(3600)), "1h");
    }

    #[test]
    fn summaries_become_templates() {
        assert_eq!(
            summary("{group} ({cluster}) is {value} s behind {nope} {"),
            "{{ $labels.group }} ({{ $labels.cluster_name }}) is {{ $value | printf \"%.6g\" }} s behind {{ $labels.nope }} {"
        );
    }

    #[test]
    fn scope_globs_become_anchored_matchers() {
        let mut r = Rule::new("x", Signal::GroupLagSeconds, 60, "");
        r.scope.insert("group".into(), "billing-*.v1".into());
        r.scope.insert("cluster".into(), "prod".into());
        r.above = Some(300.0);
        let (expr, _) = native(&r).unwrap();
        assert_eq!(
            expr,
            r#"max by (cluster_name, group) (kafka_consumergroup_group_max_lag_seconds{cluster_name=~"prod",group=~"billing-.*\\.v1"}) > 300"#
        );
    }

    #[test]
    fn anomaly_rules_are_mirrored_with_their_labels() {
        let mut r = Rule::new("produce_rate_drop", Signal::ProduceRate, 0, "{topic} fell");
        r.anomaly = Some(streamsight_core::anomaly::Direction::Drop);
        let p = translate(&r);
        assert_eq!(
            p.expr,
            r#"streamsight_alert_value{rule="produce_rate_drop",state=~"firing|no_data"}"#
        );
        assert_eq!(p.summary, "{{ $labels.topic }} fell");
    }
}
