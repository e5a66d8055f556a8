//! The alerts' metrics: alerts by rule and state and failed notifications
//! (the signals the rules compare are the read model's, written by the API's
//! `/metrics` with the base's series).

use crate::service::AlertService;
use streamsight_core::Millis;
use streamsight_http::prometheus::{esc, header};

/// `streamsight_alerts{rule,state}`, `streamsight_notifications_failed_total`
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
