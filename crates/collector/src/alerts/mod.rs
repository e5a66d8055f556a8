//! Alerts: rules evaluated on the housekeeping tick against the services, each
//! series' lifecycle kept by the core ([`streamsight_core::alerts`]), every
//! change written to the log before anyone is told, and notifications sent by
//! tasks of their own. A restart replays the log: a firing alert is still
//! firing, and one already notified is not notified again.

pub mod derived;
pub mod notify;
pub mod rules;
mod signals;

use crate::services::lock;
use crate::state::Shared;
use notify::{Notification, Notifier};
use rules::RuleConfig;
use std::sync::Mutex;
use streamsight_core::alerts::{Alert, AlertState, Alerts, Condition, Silence, render};
use streamsight_core::anomaly::{Detector, Sensitivity};
use streamsight_core::{AlertEvent, Millis, Record};

#[derive(Debug)]
struct Book {
    alerts: Alerts,
    silences: Vec<Silence>,
    /// Anomaly rules' detectors, per (rule, series), with when each last had a
    /// value: bounded, and forgotten with their series.
    detectors: std::collections::HashMap<(String, streamsight_core::alerts::Labels), (Detector, Millis)>,
    max_detectors: usize,
}

/// The alerts service: rules, their alerts, silences and notifiers.
#[derive(Debug)]
pub struct AlertService {
    rules: Vec<RuleConfig>,
    book: Mutex<Book>,
    notifiers: std::sync::OnceLock<Vec<Notifier>>,
    /// The dashboard's address, for links in notifications.
    pub(crate) base_url: std::sync::OnceLock<String>,
    /// Where silences made through the API are stored; let go at shutdown so
    /// that the writer can finish.
    pub(crate) writer: Mutex<Option<crate::state::Writer>>,
    /// How fast each partition's log start advances.
    log_starts: Mutex<derived::LogStarts>,
    /// The derived signals of the last evaluation, for /metrics and the API.
    derived: Mutex<std::sync::Arc<Vec<derived::GroupSignals>>>,
    max_series: usize,
    /// Records that notifications were delivered, stored by the next round.
    delivered: std::sync::Arc<Mutex<Vec<Record>>>,
}

/// An alert as the API shows it.
#[derive(Debug, serde::Serialize)]
pub struct AlertView {
    #[serde(flatten)]
    pub alert: Alert,
    pub summary: String,
    pub silenced: bool,
}

impl AlertService {
    pub(crate) fn new(config: &rules::AlertsConfig) -> Self {
        Self {
            rules: config.effective_rules(),
            book: Mutex::new(Book {
                alerts: Alerts::new(config.max_series),
                silences: Vec::new(),
                detectors: std::collections::HashMap::new(),
                max_detectors: config.max_anomaly_series,
            }),
            notifiers: std::sync::OnceLock::new(),
            base_url: std::sync::OnceLock::new(),
            writer: Mutex::new(None),
            log_starts: Mutex::default(),
            derived: Mutex::default(),
            max_series: config.max_series,
            delivered: std::sync::Arc::default(),
        }
    }

    /// Series anomaly rules keep a detector for.
    pub fn anomaly_series(&self) -> usize {
        lock(&self.book).detectors.len()
    }

    pub fn rules(&self) -> &[RuleConfig] {
        &self.rules
    }

    /// Starts the notifiers' tasks (on the collector's runtime).
    pub(crate) fn start_notifiers(&self, config: &rules::AlertsConfig) {
        let _ = self
            .notifiers
            .set(config.notifiers.iter().cloned().map(Notifier::start).collect());
    }

    /// Every alert but the quiet ones (ok), worst first.
    pub fn list(&self, now: Millis) -> Vec<AlertView> {
        let book = lock(&self.book);
        let mut out: Vec<AlertView> = book
            .alerts
            .iter()
            .filter(|a| a.state != AlertState::Ok)
            .map(|a| AlertView {
                summary: self.summary(a),
                silenced: book.silences.iter().any(|s| s.silences(a, now)),
                alert: a.clone(),
            })
            .collect();
        let rank = |s: AlertState| match s {
            AlertState::Firing => 0,
            AlertState::NoData => 1,
            AlertState::Pending => 2,
            _ => 3,
        };
        out.sort_by(|a, b| {
            (rank(a.alert.state), &a.alert.rule, &a.alert.labels).cmp(&(
                rank(b.alert.state),
                &b.alert.rule,
                &b.alert.labels,
            ))
        });
        out
    }

    pub fn silences(&self, now: Millis) -> Vec<Silence> {
        lock(&self.book)
            .silences
            .iter()
            .filter(|s| now < s.until)
            .cloned()
            .collect()
    }

    fn summary(&self, a: &Alert) -> String {
        let template = self
            .rules
            .iter()
            .find(|r| r.name == a.rule)
            .map_or("", |r| r.summary.as_str());
        if template.is_empty() {
            format!("{} {:?}", a.rule, a.labels)
        } else {
            render(template, &a.labels, a.value)
        }
    }

    /// Evaluates every rule at `now`: the log records for what changed.
    pub fn evaluate(&self, shared: &Shared, now: Millis) -> Vec<Record> {
        let derived = {
            let engine = shared.lag.engine();
            let mut starts = lock(&self.log_starts);
            std::sync::Arc::new(derived::compute(&engine, &mut starts, now, self.max_series))
        };
        *lock(&self.derived) = derived.clone();
        // Each signal read once per cycle, however many rules share it, and
        // dropped before the next is read: one signal's series in memory at a time.
        let mut rules: Vec<&RuleConfig> = self.rules.iter().collect();
        rules.sort_by_key(|r| signals::key(r));
        let mut records = Vec::new();
        for same in rules.chunk_by(|a, b| signals::key(a) == signals::key(b)) {
            let all = signals::all(shared, same[0], &derived, now);
            for rule in same {
                let series = signals::scoped(&all, rule);
                let mut book = lock(&self.book);
                let (series, condition) = match rule.anomaly {
                    Some(direction) => (book.anomalies(rule, direction, series, now), Condition::Above(0.0)),
                    None => (series, rule.condition()),
                };
                for t in book.alerts.evaluate(&rule.name, condition, rule.timing(), series, now) {
                    records.push(Record::Alert {
                        at: now,
                        event: AlertEvent::Changed(t),
                    });
                }
            }
        }
        records
    }

    /// Applies logged alert events (after they are stored, and at replay).
    pub fn apply(&self, records: &[Record]) {
        let mut book = lock(&self.book);
        for r in records {
            let Record::Alert { event, .. } = r else { continue };
            match event {
                AlertEvent::Changed(t) => book.alerts.replay(t, false),
                AlertEvent::Notified { rule, labels, state } => book.alerts.mark_notified(rule, labels, *state),
                AlertEvent::Silenced(s) => {
                    book.silences.retain(|x| x.id != s.id);
                    book.silences.push(s.clone());
                }
            }
        }
    }

    /// The alerts whose state no notifier was handed yet, each with the record
    /// saying it was and whether a silence covers it. They count as handed from
    /// now on in memory (a notifier retries on its own); the record is stored
    /// once a receiver took it, so a crash before that notifies after restart.
    pub fn due(&self, now: Millis) -> Vec<(Notification, Record, bool)> {
        let mut book = lock(&self.book);
        let base = self.base_url.get().map_or("", String::as_str);
        let due: Vec<(Notification, Record, bool)> = book
            .alerts
            .unnotified()
            .map(|a| {
                let n = Notification {
                    rule: a.rule.clone(),
                    labels: a.labels.clone(),
                    state: a.state,
                    value: a.value,
                    summary: self.summary(a),
                    since_ms: a.since.0,
                    url: link(base, a),
                };
                let done = Record::Alert {
                    at: now,
                    event: AlertEvent::Notified {
                        rule: a.rule.clone(),
                        labels: a.labels.clone(),
                        state: a.state,
                    },
                };
                (n, done, book.silences.iter().any(|s| s.silences(a, now)))
            })
            .collect();
        for (n, _, _) in &due {
            book.alerts.mark_notified(&n.rule, &n.labels, n.state);
        }
        due
    }

    pub(crate) fn notifiers(&self) -> &[Notifier] {
        self.notifiers.get().map_or(&[], Vec::as_slice)
    }

    /// The notifiers and how they fare (the URL without its path: it may hold a token).
    pub fn notifier_report(&self) -> Vec<serde_json::Value> {
        use std::sync::atomic::Ordering::Relaxed;
        self.notifiers()
            .iter()
            .map(|n| {
                let host = n.config.url.split('/').take(3).collect::<Vec<_>>().join("/");
                serde_json::json!({
                    "url": host,
                    "format": n.config.format,
                    "sent": n.stats.sent.load(Relaxed),
                    "failed": n.stats.failed.load(Relaxed),
                    "dropped": n.stats.dropped.load(Relaxed),
                    "last_error": lock(&n.stats.last_error).clone(),
                })
            })
            .collect()
    }

    /// The derived signals per group as of the last evaluation.
    pub fn group_signals(&self) -> std::sync::Arc<Vec<derived::GroupSignals>> {
        lock(&self.derived).clone()
    }

    /// `streamsight_alerts{rule,state}`, `streamsight_notifications_failed_total`
    /// and the derived signals per group.
    pub(crate) fn render_metrics(&self, out: &mut String, now: Millis) {
        use std::fmt::Write;
        let signals = self.group_signals();
        for (name, help, value) in [
            (
                "streamsight_retention_margin_seconds",
                "Seconds until retention deletes a message the group has not read (worst partition).",
                (|g: &derived::GroupSignals| g.retention_margin_seconds) as fn(&derived::GroupSignals) -> Option<f64>,
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
                        crate::metrics::esc(&g.cluster),
                        crate::metrics::esc(&g.group)
                    );
                }
            }
        }
        let mut counts: std::collections::BTreeMap<(String, &str), u64> = std::collections::BTreeMap::new();
        for r in &self.rules {
            for state in ["pending", "firing", "no_data"] {
                counts.insert((r.name.clone(), state), 0);
            }
        }
        for a in self.list(now) {
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
                crate::metrics::esc(&rule)
            );
        }
        let _ = writeln!(
            out,
            "# HELP streamsight_notifications_failed_total Notifications not delivered after retries, or dropped with the queue full.\n# TYPE streamsight_notifications_failed_total counter"
        );
        let failed: u64 = self
            .notifiers()
            .iter()
            .map(|n| n.stats.failed.load(std::sync::atomic::Ordering::Relaxed))
            .sum();
        let _ = writeln!(out, "streamsight_notifications_failed_total {failed}");
    }

    /// Stores a silence; it takes effect once stored.
    pub(crate) async fn silence(&self, silence: Silence, now: Millis) -> Result<(), crate::state::AppendError> {
        let writer = lock(&self.writer).clone().ok_or(crate::state::AppendError::Stopped)?;
        writer
            .append(vec![Record::Alert {
                at: now,
                event: AlertEvent::Silenced(silence),
            }])
            .await
    }
}

impl Book {
    /// Each value judged against its own series' baseline: the anomaly score while
    /// anomalous, else 0; unknown stays unknown.
    fn anomalies(
        &mut self,
        rule: &RuleConfig,
        direction: streamsight_core::anomaly::Direction,
        series: Vec<(streamsight_core::alerts::Labels, Option<f64>)>,
        now: Millis,
    ) -> Vec<(streamsight_core::alerts::Labels, Option<f64>)> {
        let sensitivity = Sensitivity {
            spreads: rule.sensitivity.unwrap_or(Sensitivity::default().spreads),
            ..Sensitivity::default()
        };
        let forget_after = rule.timing().forget_after_ms;
        self.detectors
            .retain(|(r, _), (_, seen)| r != &rule.name || now.since(*seen) < forget_after);
        series
            .into_iter()
            .map(|(labels, value)| {
                let Some(v) = value else { return (labels, None) };
                let key = (rule.name.clone(), labels);
                if !self.detectors.contains_key(&key) && self.detectors.len() >= self.max_detectors {
                    return (key.1, None);
                }
                let (d, seen) = self
                    .detectors
                    .entry(key.clone())
                    .or_insert_with(|| (Detector::new(direction), now));
                *seen = now;
                let verdict = d.observe(now, v, sensitivity);
                let score = if verdict.anomalous {
                    f64::from(verdict.score)
                } else {
                    0.0
                };
                (key.1, Some(score))
            })
            .collect()
    }
}

fn link(base: &str, a: &Alert) -> String {
    let enc = |s: &str| s.replace('%', "%25").replace('/', "%2F").replace(' ', "%20");
    let (cluster, group, topic) = (a.labels.get("cluster"), a.labels.get("group"), a.labels.get("topic"));
    match (cluster, group, topic) {
        (Some(c), Some(g), _) => format!("{base}/groups/{}/{}", enc(c), enc(g)),
        (Some(c), None, Some(t)) => format!("{base}/topics/{}/{}", enc(c), enc(t)),
        _ => format!("{base}/"),
    }
}

/// One round on the housekeeping tick: evaluate, store what changed, notify
/// what is due (never waiting for a receiver), store that it was.
pub(crate) async fn round(shared: std::sync::Arc<Shared>, writer: &crate::state::Writer, now: Millis) {
    let changed = {
        let shared = shared.clone();
        tokio::task::spawn_blocking(move || shared.alerts.evaluate(&shared, now))
            .await
            .unwrap_or_default()
    };
    if !changed.is_empty() {
        for r in &changed {
            if let Record::Alert {
                event: AlertEvent::Changed(t),
                ..
            } = r
                && t.to.notifies()
            {
                tracing::warn!(rule = %t.rule, labels = ?t.labels, from = t.from.as_str(), to = t.to.as_str(), value = ?t.value, "alert");
            }
        }
        // Written before anyone is told: a crash after this notifies on restart.
        if let Err(e) = writer.append(changed).await {
            tracing::error!(error = %e, "alert changes not stored; retried next round");
            return;
        }
    }
    for (n, done, silenced) in shared.alerts.due(now) {
        // A silenced alert counts as told: it is not sent when the silence ends.
        if silenced || shared.alerts.notifiers().is_empty() {
            lock(&shared.alerts.delivered).push(done);
            continue;
        }
        let pending: Vec<_> = shared
            .alerts
            .notifiers()
            .iter()
            .filter_map(|x| x.send(n.clone()))
            .collect();
        let delivered = shared.alerts.delivered.clone();
        tokio::spawn(async move {
            let mut told = false;
            for p in pending {
                told |= p.await.unwrap_or(false);
            }
            // Told at least one receiver: never again for this state.
            if told {
                lock(&delivered).push(done);
            }
        });
    }
    let done = std::mem::take(&mut *lock(&shared.alerts.delivered));
    if !done.is_empty()
        && let Err(e) = writer.append(done.clone()).await
    {
        tracing::error!(error = %e, "notifications' delivery not stored; retried next round");
        lock(&shared.alerts.delivered).extend(done);
    }
}
