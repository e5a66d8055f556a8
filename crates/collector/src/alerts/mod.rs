//! Alerts: rules evaluated on the housekeeping tick against the services, each
//! series' lifecycle kept by the core ([`streamsight_core::alerts`]), every
//! change written to the log before anyone is told, and notifications sent by
//! tasks of their own. A restart replays the log: a firing alert is still
//! firing, and one already notified is not notified again.

pub mod api;
mod changes;
pub mod derived;
pub mod notify;
pub mod rules;
mod signals;

use crate::services::lock;
use crate::state::Shared;
use notify::{Notification, Notifier};
use std::collections::BTreeMap;
use std::sync::Mutex;
use streamsight_core::alerts::rule::Rule;
use streamsight_core::alerts::{Alert, AlertState, Alerts, Condition, SharedLabels, Silence, render};
use streamsight_core::anomaly::{Detector, Sensitivity};
use streamsight_core::{AlertEvent, Millis, Record};

#[derive(Debug)]
struct Book {
    alerts: Alerts,
    silences: Vec<Silence>,
    /// Anomaly rules' detectors, per rule then series, with when each last had
    /// a value: bounded, and forgotten with their series.
    detectors: std::collections::HashMap<String, std::collections::HashMap<SharedLabels, (Detector, Millis)>>,
    detector_count: usize,
    max_detectors: usize,
    /// Rules made through the API, over the configuration's.
    api_rules: std::collections::BTreeMap<String, Rule>,
    /// The rules that run: base ← API rules, enabled ones.
    rules: std::sync::Arc<Vec<Rule>>,
}

/// The alerts service: rules, their alerts, silences and notifiers.
#[derive(Debug)]
pub struct AlertService {
    /// The defaults and the configuration's rules, disabled ones included.
    base: Vec<Rule>,
    /// Names of the rules the configuration sets (the rest of `base` are defaults).
    configured: std::collections::BTreeSet<String>,
    book: Mutex<Book>,
    notifiers: std::sync::OnceLock<Vec<Notifier>>,
    /// The dashboard's address, for links in notifications.
    pub(crate) base_url: std::sync::OnceLock<String>,
    /// Where silences made through the API are stored; let go at shutdown so
    /// that the writer can finish.
    pub(crate) writer: Mutex<Option<crate::state::Writer>>,
    /// How fast each partition's log start advances.
    log_starts: Mutex<derived::LogStarts>,
    /// Counters' last readings per signal (see [`signals::per_minute`]).
    readings: Mutex<std::collections::HashMap<signals::Key, signals::Readings>>,
    /// Each signal's labels of the last cycle (see [`signals::settle`]).
    previous: Mutex<std::collections::HashMap<signals::Key, Vec<SharedLabels>>>,
    /// The derived signals of the last evaluation, for /metrics and the API.
    derived: Mutex<std::sync::Arc<Vec<derived::GroupSignals>>>,
    max_series: usize,
    /// Why the last round did not evaluate the rules, if it did not.
    skipped: Mutex<Option<String>>,
    /// Records that notifications were delivered, stored by the next round.
    delivered: std::sync::Arc<Mutex<Vec<Record>>>,
    /// When the state the log must keep (API rules, silences, alerts not ok)
    /// was last written again, so that retention never deletes it.
    rewritten_at: Mutex<Option<Millis>>,
    /// Held while a change is stored and applied: a rewrite of the state never
    /// lands after a change it did not see (a removed rule brought back).
    changes: tokio::sync::Mutex<()>,
}

/// A rule as the API shows it: where it comes from.
#[derive(Debug, serde::Serialize)]
pub struct RuleView {
    #[serde(flatten)]
    pub rule: Rule,
    /// `default`, `config` or `api`.
    pub source: &'static str,
}

/// How long a removed rule's resolved alerts stay listed (as long as a
/// running rule's resolved alerts at least are).
const RETIRED_SHOWN_MS: i64 = 3_600_000;

/// Rules made through the API at most (each within [`Rule::validate`]'s bounds).
pub const MAX_API_RULES: usize = 1_000;

/// Why a change through the API was refused.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error(transparent)]
    Rule(#[from] streamsight_core::alerts::rule::RuleError),
    #[error("at most {MAX_API_RULES} rules can be made through the API")]
    TooManyRules,
    #[error("no such {0}")]
    NotFound(&'static str),
    #[error(transparent)]
    Store(#[from] crate::state::AppendError),
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
            base: config.base_rules(),
            configured: config.rules.iter().map(|r| r.name.clone()).collect(),
            book: Mutex::new(Book {
                alerts: Alerts::new(config.max_series),
                silences: Vec::new(),
                detectors: std::collections::HashMap::new(),
                detector_count: 0,
                max_detectors: config.max_anomaly_series,
                api_rules: std::collections::BTreeMap::new(),
                rules: std::sync::Arc::new(config.effective_rules()),
            }),
            notifiers: std::sync::OnceLock::new(),
            base_url: std::sync::OnceLock::new(),
            writer: Mutex::new(None),
            log_starts: Mutex::default(),
            derived: Mutex::default(),
            skipped: Mutex::default(),
            previous: Mutex::default(),
            readings: Mutex::default(),
            max_series: config.max_series,
            delivered: std::sync::Arc::default(),
            rewritten_at: Mutex::new(None),
            changes: tokio::sync::Mutex::new(()),
        }
    }

    /// Series anomaly rules keep a detector for.
    pub fn anomaly_series(&self) -> usize {
        lock(&self.book).detector_count
    }

    /// The rules that run.
    pub fn rules(&self) -> std::sync::Arc<Vec<Rule>> {
        lock(&self.book).rules.clone()
    }

    /// Every rule, disabled ones included, with where it comes from.
    pub fn rule_views(&self) -> Vec<RuleView> {
        let book = lock(&self.book);
        rules::overlay(self.base.clone(), book.api_rules.values())
            .into_iter()
            .map(|rule| {
                let source = if book.api_rules.contains_key(&rule.name) {
                    "api"
                } else if self.configured.contains(&rule.name) {
                    "config"
                } else {
                    "default"
                };
                RuleView { rule, source }
            })
            .collect()
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
                summary: self.summary(&book.rules, a),
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

    fn summary(&self, rules: &[Rule], a: &Alert) -> String {
        let labels = || {
            let pairs: Vec<String> = a.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            pairs.join(", ")
        };
        match rules.iter().find(|r| r.name == a.rule) {
            None => format!("{} ({}): the rule was removed", a.rule, labels()),
            Some(r) if r.summary.is_empty() => format!("{} ({})", a.rule, labels()),
            Some(r) => render(&r.summary, &a.labels, a.value),
        }
    }

    /// This node's part of every signal the rules read: what a sharded log's
    /// evaluating node merges with the others' (see [`signals::merge`]).
    pub(crate) fn local_series(&self, shared: &Shared, now: Millis) -> Vec<signals::KeyedSeries> {
        let derived = self.group_signals();
        let rules = lock(&self.book).rules.clone();
        let mut keyed: BTreeMap<signals::Key, &Rule> = BTreeMap::new();
        for rule in rules.iter() {
            keyed.entry(signals::key(rule)).or_insert(rule);
        }
        keyed
            .into_iter()
            .map(|((signal, statuses, aggregate), rule)| signals::KeyedSeries {
                signal,
                statuses,
                aggregate,
                series: signals::all(shared, rule, &derived, now),
            })
            .collect()
    }

    /// Says why the last round did not evaluate the rules (None: it did).
    pub(crate) fn not_evaluated(&self, why: Option<String>) {
        if let Some(why) = &why {
            tracing::warn!(why, "alert rules not evaluated this round");
        }
        *lock(&self.skipped) = why;
    }

    pub fn not_evaluated_because(&self) -> Option<String> {
        lock(&self.skipped).clone()
    }

    /// The derived signals of this node's engine at `now`, kept for /metrics,
    /// the API and the rules: every node derives them every round, whether it
    /// evaluates the rules or not.
    pub(crate) fn derive(&self, shared: &Shared, now: Millis) -> std::sync::Arc<Vec<derived::GroupSignals>> {
        let derived = {
            let mut starts = lock(&self.log_starts);
            std::sync::Arc::new(derived::compute(&shared.lag, &mut starts, now, self.max_series))
        };
        *lock(&self.derived) = derived.clone();
        derived
    }

    /// Evaluates every rule at `now` on this node's services: the log records
    /// for what changed.
    pub fn evaluate(&self, shared: &Shared, now: Millis) -> Vec<Record> {
        let derived = self.derive(shared, now);
        self.evaluate_with(shared, now, &derived, None)
    }

    /// The same with the derived signals made, and on a sharded log with
    /// every signal's series merged from the nodes holding each shard
    /// (`gathered`) instead of read from this node's services.
    fn evaluate_with(
        &self,
        shared: &Shared,
        now: Millis,
        derived: &[derived::GroupSignals],
        gathered: Option<&BTreeMap<signals::Key, signals::Series>>,
    ) -> Vec<Record> {
        let (all_rules, mut records) = {
            let mut book = lock(&self.book);
            let rules = book.rules.clone();
            (rules.clone(), book.retire_gone(&rules, now))
        };
        // Each signal read once per cycle, however many rules share it, and
        // dropped before the next is read: one signal's series in memory at a time.
        let mut rules: Vec<&Rule> = all_rules.iter().collect();
        rules.sort_by_key(|r| signals::key(r));
        for same in rules.chunk_by(|a, b| signals::key(a) == signals::key(b)) {
            let key = signals::key(same[0]);
            let all = {
                let mut previous = lock(&self.previous);
                let last = previous.remove(&key).unwrap_or_default();
                let series = match gathered {
                    Some(gathered) => gathered.get(&key).cloned().unwrap_or_default(),
                    None => signals::all(shared, same[0], derived, now),
                };
                let (all, labels) = signals::settle(series, &last);
                previous.insert(key.clone(), labels);
                if same[0].signal.is_counter() {
                    let mut readings = lock(&self.readings);
                    let last = readings.remove(&key).unwrap_or_default();
                    let (rates, now_read) = signals::per_minute(all, last, now);
                    readings.insert(key, now_read);
                    rates
                } else {
                    all
                }
            };
            for rule in same {
                let series = signals::scoped(&all, rule);
                let mut book = lock(&self.book);
                let (series, condition) = match rule.anomaly {
                    Some(direction) => (book.anomalies(rule, direction, series, now), Condition::Above(0.0)),
                    None => (series, rule.condition()),
                };
                let timing = rule.timing();
                let changed = if rule.labels.is_empty() {
                    book.alerts.evaluate_sorted(&rule.name, condition, timing, series, now)
                } else {
                    book.alerts.evaluate(&rule.name, condition, timing, series, now)
                };
                for t in changed {
                    records.push(Record::Alert {
                        at: now,
                        event: Box::new(AlertEvent::Changed(t)),
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
            match &**event {
                AlertEvent::Changed(t) => book.alerts.replay(t, false),
                AlertEvent::Notified { rule, labels, state } => book.alerts.mark_notified(rule, labels, *state),
                AlertEvent::Silenced(s) => {
                    book.silences.retain(|x| x.id != s.id);
                    book.silences.push(s.clone());
                }
                AlertEvent::RuleSet(rule) => {
                    book.api_rules.insert(rule.name.clone(), rule.clone());
                    book.rules = std::sync::Arc::new(self.effective(&book.api_rules));
                }
                AlertEvent::RuleRemoved { name } => {
                    book.api_rules.remove(name);
                    book.rules = std::sync::Arc::new(self.effective(&book.api_rules));
                }
            }
        }
    }

    fn effective(&self, api_rules: &std::collections::BTreeMap<String, Rule>) -> Vec<Rule> {
        let mut rules = rules::overlay(self.base.clone(), api_rules.values());
        rules.retain(|r| r.enabled);
        rules
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
                    summary: self.summary(&book.rules, a),
                    since_ms: a.since.0,
                    url: link(base, a),
                };
                let done = Record::Alert {
                    at: now,
                    event: Box::new(AlertEvent::Notified {
                        rule: a.rule.clone(),
                        labels: a.labels.clone(),
                        state: a.state,
                    }),
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
}

impl Book {
    /// Alerts and detectors of rules that no longer run: wound down.
    fn retire_gone(&mut self, rules: &[Rule], now: Millis) -> Vec<Record> {
        let running: std::collections::BTreeSet<&str> = rules.iter().map(|r| r.name.as_str()).collect();
        let gone: Vec<String> = self
            .alerts
            .rule_names()
            .filter(|n| !running.contains(n))
            .map(str::to_owned)
            .collect();
        let count = &mut self.detector_count;
        self.detectors.retain(|r, series| {
            let keep = running.contains(r.as_str());
            if !keep {
                *count -= series.len();
            }
            keep
        });
        gone.iter()
            .flat_map(|rule| self.alerts.retire(rule, now, RETIRED_SHOWN_MS))
            .map(|t| Record::Alert {
                at: now,
                event: Box::new(AlertEvent::Changed(t)),
            })
            .collect()
    }

    /// Each value judged against its own series' baseline: the anomaly score while
    /// anomalous, else 0; unknown stays unknown.
    fn anomalies(
        &mut self,
        rule: &Rule,
        direction: streamsight_core::anomaly::Direction,
        series: signals::Series,
        now: Millis,
    ) -> signals::Series {
        let sensitivity = Sensitivity {
            spreads: rule.sensitivity.unwrap_or(Sensitivity::default().spreads),
            ..Sensitivity::default()
        };
        let forget_after = rule.timing().forget_after_ms;
        let detectors = self.detectors.entry(rule.name.clone()).or_default();
        let before = detectors.len();
        detectors.retain(|_, (_, seen)| now.since(*seen) < forget_after);
        self.detector_count -= before - detectors.len();
        series
            .into_iter()
            .map(|(labels, value)| {
                let Some(v) = value else { return (labels, None) };
                let (d, seen) = match detectors.get_mut(&labels) {
                    Some(d) => d,
                    None if self.detector_count >= self.max_detectors => return (labels, None),
                    None => {
                        self.detector_count += 1;
                        detectors
                            .entry(labels.clone())
                            .or_insert_with(|| (Detector::new(direction), now))
                    }
                };
                *seen = now;
                let verdict = d.observe(now, v, sensitivity);
                let score = if verdict.anomalous {
                    f64::from(verdict.score)
                } else {
                    0.0
                };
                (labels, Some(score))
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

/// The lease whose holder evaluates the rules on a shared log.
const ALERTS_LEASE: &str = "streamsight-alert-rules";

/// Where a node of a sharded log answers with its part of the signals.
pub(crate) const SERIES_PATH: &str = "/api/v1/alerts/series";

/// One round on the housekeeping tick: evaluate, store what changed, notify
/// what is due (never waiting for a receiver), store that it was.
pub(crate) async fn round(shared: std::sync::Arc<Shared>, writer: &crate::state::Writer, now: Millis) {
    let derived = {
        let shared = shared.clone();
        tokio::task::spawn_blocking(move || shared.alerts.derive(&shared, now))
            .await
            .unwrap_or_default()
    };
    // On a shared log one node at a time evaluates, stores and notifies: the
    // others apply what it stores.
    if let Some(leases) = shared.leases.get()
        && !leases.owns(ALERTS_LEASE)
    {
        // Why a round this node made earlier was skipped says nothing of
        // the node that evaluates now.
        shared.alerts.not_evaluated(None);
        return;
    }
    // A node of a sharded log sees only its shards: rules run on every
    // signal merged from the nodes holding each shard, and not at all while a
    // shard is missing (they would resolve what its data fires).
    let gathered = if shared.sharded() {
        let local =
            move |shared: &Shared, _: Option<&std::collections::BTreeSet<u32>>| shared.alerts.local_series(shared, now);
        let key = format!("Bearer {}{}", crate::auth::PEER_PREFIX, shared.peer_key);
        let credentials: Vec<_> = axum::http::HeaderValue::from_str(&key)
            .map(|v| (axum::http::header::AUTHORIZATION, v))
            .into_iter()
            .collect();
        let (parts, coverage) = crate::fanout::gather(&shared, SERIES_PATH, "", &credentials, local).await;
        if !coverage.missing.is_empty() {
            let missing: Vec<String> = coverage.missing.iter().map(u32::to_string).collect();
            let failed: Vec<String> = coverage
                .nodes
                .iter()
                .filter_map(|n| Some(format!("node {}: {}", n.node, n.error.as_ref()?)))
                .collect();
            shared.alerts.not_evaluated(Some(format!(
                "{} of {} shards ({}) did not answer{}",
                missing.len(),
                coverage.count,
                missing.join(", "),
                if failed.is_empty() {
                    String::new()
                } else {
                    format!("; {}", failed.join("; "))
                }
            )));
            return;
        }
        Some(signals::merge(parts))
    } else {
        None
    };
    let changed = {
        let shared = shared.clone();
        tokio::task::spawn_blocking(move || shared.alerts.evaluate_with(&shared, now, &derived, gathered.as_ref()))
            .await
            .unwrap_or_default()
    };
    shared.alerts.not_evaluated(None);
    if !changed.is_empty() {
        for r in &changed {
            if let Record::Alert { event, .. } = r
                && let AlertEvent::Changed(t) = &**event
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
    // Under half the retention, so that the oldest copy is never the only one
    // deleted; at least daily. A notification in flight at that moment is
    // written as told: at most once rather than at least once, for that one.
    let retention = crate::time_ms(shared.config.retention).max(2_000);
    shared
        .alerts
        .rewrite(writer, now, (retention / 2).min(86_400_000))
        .await;
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
