//! The alerts' metrics: alerts by rule and state and failed notifications
//! (the signals the rules compare are the read model's, written by the API's
//! `/metrics` with the base's series).

use crate::service::AlertService;
use streamsight_core::Millis;
use streamsight_http::prometheus::{esc, header, label_name};

/// `streamsight_alerts{rule,state}`, `streamsight_alert_value{rule,state,…}`,
/// `streamsight_notifications_failed_total`
/// `streamsight_alerts_evaluation_seconds` and `streamsight_alerts_evaluated`.
pub(crate) fn render(alerts: &AlertService, out: &mut String, now: Millis) {
    use std::fmt::Write;
    let mut counts: std::collections::BTreeMap<(String, &str), u64> = std::collections::BTreeMap::new();
    for r in alerts.rules().iter() {
        for state in ["pending", "firing", "no_data"] {
            counts.insert((r.name.clone(), state), 0);
        }
    }
    for a in alerts.list(now, false) {
        if let Some(n) = counts.get_mut(&(a.alert.rule.to_string(), a.alert.state.as_str())) {
            *n += 1;
        }
    }
    let _ = writeln!(
        out,
        "# HELP streamsight_alerts Alerts by rule and state.\n# TYPE streamsight_alerts gauge"
    );
    for ((rule, state), n) in counts {
        let _ = writeln!(
            out,
            "streamsight_alerts{{rule=\"{}\",state=\"{state}\"}} {n}",
            esc(&rule)
        );
    }
    render_alert_values(alerts, out, now);
    let _ = writeln!(
        out,
        "# HELP streamsight_notifications_failed_total Notifications not delivered after retries, or dropped with the queue full.\n# TYPE streamsight_notifications_failed_total counter"
    );
    let failed: u64 = alerts
        .notifiers()
        .iter()
        .map(|n| n.stats.failed.load(std::sync::atomic::Ordering::Relaxed))
        .sum();
    let _ = writeln!(out, "streamsight_notifications_failed_total {failed}");
    header(
        out,
        "streamsight_alerts_evaluation_seconds",
        "gauge",
        "How long the last round took to evaluate every rule (0 before the first).",
    );
    let micros = alerts.evaluation_micros.load(std::sync::atomic::Ordering::Relaxed);
    let _ = writeln!(out, "streamsight_alerts_evaluation_seconds {}", micros as f64 / 1e6);
    header(
        out,
        "streamsight_alerts_evaluated",
        "gauge",
        "1 while the rules are evaluated (by this node, or on a shared log by the node holding their lease, heard from within 20 s); 0 before the first round, while rounds are skipped, and while no node evaluates: the alerts shown are then stale.",
    );
    let evaluated = alerts.evaluated_now.load(std::sync::atomic::Ordering::Relaxed);
    let _ = writeln!(out, "streamsight_alerts_evaluated {}", u8::from(evaluated));
}

/// An alert's labels as Prometheus label names ([`label_name`]), but for
/// those that would hide the series' own `rule` or `state`.
pub(crate) fn prometheus_label(name: &str) -> Option<&str> {
    match name {
        "rule" | "state" => None,
        _ => label_name(name),
    }
}

/// One series per alert that is not quiet (pending, firing, no data), with
/// the alert's own labels (group, topic, cluster_name…) and its value (NaN
/// while it has none): what Prometheus needs to mirror streamsight's alerts
/// and say which group or topic each is about. Bounded by the rules'
/// `max_series`.
fn render_alert_values(alerts: &AlertService, out: &mut String, now: Millis) {
    use std::fmt::Write;
    header(
        out,
        "streamsight_alert_value",
        "gauge",
        "Each alert that is pending, firing or without data, with its labels; the value is the signal's last value (NaN when none).",
    );
    for a in alerts.list(now, false) {
        let state = a.alert.state.as_str();
        // A silence in streamsight silences its mirror in Prometheus too.
        if a.silenced || !matches!(state, "pending" | "firing" | "no_data") {
            continue;
        }
        let mut labels = format!("rule=\"{}\",state=\"{state}\"", esc(&a.alert.rule));
        for (k, v) in a.alert.labels.iter() {
            if let Some(name) = prometheus_label(k) {
                let _ = write!(labels, ",{name}=\"{}\"", esc(v));
            }
        }
        let value = a.alert.value.map_or_else(|| "NaN".to_owned(), |v| v.to_string());
        let _ = writeln!(out, "streamsight_alert_value{{{labels}}} {value}");
    }
}

#[cfg(test)]
mod tests {
    use super::prometheus_label;

    #[test]
    fn alert_labels_become_prometheus_labels() {
        assert_eq!(prometheus_label("cluster"), Some("cluster_name"));
        assert_eq!(prometheus_label("group"), Some("group"));
        assert_eq!(prometheus_label("rule"), None);
        assert_eq!(prometheus_label("state"), None);
        assert_eq!(prometheus_label("9lives"), None);
        assert_eq!(prometheus_label("a-b"), None);
        assert_eq!(prometheus_label("__name__"), None);
    }
}
