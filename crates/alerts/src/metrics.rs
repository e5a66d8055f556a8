//! The alerts' metrics: alerts by rule and state, failed notifications, and the
//! derived signals per group.

use crate::service::AlertService;
use streamsight_core::Millis;
use streamsight_http::prometheus::esc;
use streamsight_node::signals::GroupSignals;

/// `streamsight_alerts{rule,state}`, `streamsight_notifications_failed_total`
/// and the derived signals per group.
pub(crate) fn render(alerts: &AlertService, out: &mut String, now: Millis) {
    use std::fmt::Write;
    let signals = alerts.group_signals();
    for (name, help, value) in [
        (
            "streamsight_retention_margin_seconds",
            "Seconds until retention deletes a message the group has not read (worst partition).",
            (|g: &GroupSignals| g.retention_margin_seconds) as fn(&GroupSignals) -> Option<f64>,
        ),
        (
            "streamsight_catch_up_seconds",
            "Seconds until the group catches up at its current rates (worst partition; 1e12 while falling behind).",
            |g| g.catch_up_seconds,
        ),
        (
            "streamsight_partitions_not_committing",
            "Partitions with lag the group stopped committing while its others move.",
            |g| Some(f64::from(g.partitions_not_committing)),
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for g in signals.iter() {
            if let Some(v) = value(g) {
                let _ = writeln!(
                    out,
                    "{name}{{cluster_name=\"{}\",group=\"{}\"}} {v}",
                    esc(&g.cluster),
                    esc(&g.group)
                );
            }
        }
    }
    let mut counts: std::collections::BTreeMap<(String, &str), u64> = std::collections::BTreeMap::new();
    for r in alerts.rules().iter() {
        for state in ["pending", "firing", "no_data"] {
            counts.insert((r.name.clone(), state), 0);
        }
    }
    for a in alerts.list(now) {
        if let Some(n) = counts.get_mut(&(a.alert.rule.clone(), a.alert.state.as_str())) {
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
}
