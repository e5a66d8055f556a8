//! The alerts service: rules evaluated on the housekeeping tick against the services, each
//! series' lifecycle kept by the core ([`streamsight_core::alerts`]), every
//! change written to the log before anyone is told, and notifications sent by
//! tasks of their own. A restart replays the log: a firing alert is still
//! firing, and one already notified is not notified again.

use crate::notify::{Notification, Notifier};
use crate::signals;
use std::collections::BTreeMap;
use std::sync::Mutex;
use streamsight_core::alerts::rule::Rule;
use streamsight_core::alerts::{Alert, AlertState, Alerts, Condition, SharedLabels, Silence, render};
use streamsight_core::anomaly::{Detector, Direction, Sensitivity, Verdict};
use streamsight_core::{AlertEvent, Millis, Record};
use streamsight_node::Shared;
use streamsight_node::config::alerts as rules;
use streamsight_node::sync::lock;

/// One anomaly rule's detectors by series. Keyed by labels from the network:
/// foldhash, seeded per map (SipHash over every series' labels was a
/// twentieth of an alert round at 1,000,000 group-partitions). Boxed: a
/// detector is ~0.7 KB, and held in the table each growth copied them all
/// and the table's spare room cost as much again (a first round at 1.25 M
/// detectors spent a third of its time zeroing and copying pages).
/// Each with when its series last had a value and what it said then: a
/// second rule asking the same question in the same round takes that verdict
/// instead of teaching the detector the value twice.
pub(crate) type SeriesDetectors =
    std::collections::HashMap<SharedLabels, (Box<Detector>, Millis, Verdict), foldhash::fast::RandomState>;

/// What an anomaly rule asks of its series. A detector's state depends on
/// nothing else (the series' values, the direction watched, the sensitivity
/// that decides what it learns slowly, and when it is forgotten), so rules
/// asking the same question share the detectors: a team's copy of a rule
/// for another receiver costs no memory. The rule's own threshold, `for` and
/// scope apply after.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Question {
    query: signals::Query,
    direction: Direction,
    spreads: u32,
    forget_after_ms: i64,
}

impl Question {
    fn of(rule: &Rule, direction: Direction) -> Self {
        Self {
            query: signals::key(rule),
            direction,
            spreads: sensitivity(rule).spreads.to_bits(),
            forget_after_ms: rule.timing().forget_after_ms,
        }
    }
}

fn sensitivity(rule: &Rule) -> Sensitivity {
    Sensitivity {
        spreads: rule.sensitivity.unwrap_or(Sensitivity::default().spreads),
        min_spread: rule.signal.min_spread(),
        ..Sensitivity::default()
    }
}

#[derive(Debug)]
pub(crate) struct Book {
    pub(crate) alerts: Alerts,
    pub(crate) silences: Vec<Silence>,
    /// Anomaly rules' detectors, per question then series: bounded, and
    /// forgotten with their series or once no rule asks.
    pub(crate) detectors: std::collections::HashMap<Question, SeriesDetectors>,
    pub(crate) detector_count: usize,
    pub(crate) max_detectors: usize,
    /// Rules made through the API, over the configuration's.
    pub(crate) api_rules: std::collections::BTreeMap<String, Rule>,
    /// The rules that run: base ← API rules, enabled ones.
    pub(crate) rules: std::sync::Arc<Vec<Rule>>,
}

/// The alerts service: rules, their alerts, silences and notifiers.
#[derive(Debug)]
pub struct AlertService {
    /// The defaults and the configuration's rules, disabled ones included.
    pub(crate) base: Vec<Rule>,
    /// Names of the rules the configuration sets (the rest of `base` are defaults).
    pub(crate) configured: std::collections::BTreeSet<String>,
    pub(crate) book: Mutex<Book>,
    pub(crate) notifiers: std::sync::OnceLock<Vec<Notifier>>,
    /// The dashboard's address, for links in notifications.
    pub base_url: std::sync::OnceLock<String>,
    /// Where silences made through the API are stored; let go at shutdown so
    /// that the writer can finish.
    pub writer: Mutex<Option<streamsight_node::Writer>>,
    /// Counters' last readings per signal (see [`signals::per_minute`]).
    pub(crate) readings: Mutex<std::collections::HashMap<signals::Query, signals::Readings>>,
    /// Each signal's labels of the last cycle (see [`signals::settle`]).
    pub(crate) previous: Mutex<std::collections::HashMap<signals::Query, Vec<SharedLabels>>>,
    /// Why the last round did not evaluate the rules, if it did not.
    pub(crate) skipped: Mutex<Option<String>>,
    /// On a shared log, when the node evaluating the rules last said it did
    /// (an [`AlertEvent::Evaluated`] read from the log), by its clock.
    pub(crate) heard_evaluated: Mutex<Option<Millis>>,
    /// Whether the rules were being evaluated (here or elsewhere) as of this
    /// node's last round: `streamsight_alerts_evaluated`.
    pub(crate) evaluated_now: std::sync::atomic::AtomicBool,
    /// When this node last wrote that it evaluated them.
    pub(crate) said_evaluated: Mutex<Option<Millis>>,
    /// Records that notifications were delivered, stored by the next round.
    pub(crate) delivered: std::sync::Arc<Mutex<Vec<Record>>>,
    /// When the state the log must keep (API rules, silences, alerts not ok)
    /// was last written again, so that retention never deletes it.
    pub(crate) rewritten_at: Mutex<Option<Millis>>,
    /// How long the last round's evaluation took (µs; 0 before the first):
    /// `streamsight_alerts_evaluation_seconds`.
    pub(crate) evaluation_micros: std::sync::atomic::AtomicU64,
    /// Who holds each open transaction this node's engine knows of, in words,
    /// by (cluster, topic, partition): what `transaction_open`'s summary names.
    pub(crate) open_transactions: Mutex<std::collections::HashMap<(String, String, String), String>>,
    /// Held while a change is stored and applied: a rewrite of the state never
    /// lands after a change it did not see (a removed rule brought back).
    pub(crate) changes: tokio::sync::Mutex<()>,
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

/// How often the node evaluating the rules on a shared log says so in the log.
pub const SAY_EVALUATED_EVERY_MS: i64 = 5_000;

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
    Store(#[from] streamsight_node::AppendError),
}

/// An alert as the API shows it.
#[derive(Debug, serde::Serialize)]
pub struct AlertView {
    #[serde(flatten)]
    pub alert: Alert,
    pub summary: String,
    pub silenced: bool,
    /// Nobody evaluates the rules now: the state shown is the last one
    /// judged, not a current one.
    pub stale: bool,
}

impl AlertService {
    pub fn new(config: &rules::AlertsConfig) -> Self {
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
            skipped: Mutex::default(),
            heard_evaluated: Mutex::default(),
            said_evaluated: Mutex::default(),
            evaluated_now: std::sync::atomic::AtomicBool::new(false),
            previous: Mutex::default(),
            readings: Mutex::default(),
            delivered: std::sync::Arc::default(),
            rewritten_at: Mutex::new(None),
            evaluation_micros: std::sync::atomic::AtomicU64::new(0),
            open_transactions: Mutex::default(),
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
    pub fn start_notifiers(&self, config: &rules::AlertsConfig) {
        let _ = self
            .notifiers
            .set(config.notifiers.iter().cloned().map(Notifier::start).collect());
    }

    /// Every alert but the quiet ones (ok), worst first, each `stale` when
    /// nobody evaluates the rules now (see [`crate::round::not_evaluated_because`]).
    pub fn list(&self, now: Millis, stale: bool) -> Vec<AlertView> {
        let book = lock(&self.book);
        let mut out: Vec<AlertView> = book
            .alerts
            .iter()
            .filter(|a| a.state != AlertState::Ok)
            .map(|a| AlertView {
                summary: self.summary(&book.rules, a),
                silenced: book.silences.iter().any(|s| s.silences(a, now)),
                stale,
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

    pub(crate) fn summary(&self, rules: &[Rule], a: &Alert) -> String {
        let labels = || {
            let pairs: Vec<String> = a.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            pairs.join(", ")
        };
        match rules.iter().find(|r| *r.name == *a.rule) {
            None => format!("{} ({}): the rule was removed", a.rule, labels()),
            Some(r) if r.summary.is_empty() => format!("{} ({})", a.rule, labels()),
            Some(r) => {
                let mut out = render(&r.summary, &a.labels, a.value);
                // The holder is not a label (it changes while the partition's
                // alert is the same one): it is said beside the summary.
                if r.signal == streamsight_core::alerts::rule::Signal::OpenTransactionSeconds
                    && a.state != AlertState::Resolved
                    && let (Some(c), Some(t), Some(p)) = (
                        a.labels.get("cluster"),
                        a.labels.get("topic"),
                        a.labels.get("partition"),
                    )
                    && let Some(holder) = lock(&self.open_transactions).get(&(c.clone(), t.clone(), p.clone()))
                {
                    out.push_str("; held by ");
                    out.push_str(holder);
                }
                out
            }
        }
    }

    /// Notes who holds each open transaction the engine knows of (on every
    /// node, each round: the nodes that only list alerts name them too).
    pub fn note_open_transactions(&self, shared: &Shared, now: Millis) {
        let engine = shared.lag.engine();
        let named = engine
            .named_open_transactions(now)
            .into_iter()
            .map(|(pid, t, since)| {
                let (c, topic, p) = engine.partition_names(pid);
                (
                    (c.to_owned(), topic.to_owned(), p.to_string()),
                    streamsight_core::explain::open_transaction(&t, since, now),
                )
            })
            .collect();
        *lock(&self.open_transactions) = named;
    }

    /// This node's part of every signal the rules read: what a sharded log's
    /// evaluating node merges with the others' (see [`signals::merge`]).
    pub fn local_series(&self, shared: &Shared, now: Millis) -> Vec<signals::KeyedSeries> {
        let rules = lock(&self.book).rules.clone();
        let queries: std::collections::BTreeSet<signals::Query> = rules.iter().map(signals::key).collect();
        queries
            .into_iter()
            .map(|query| {
                let series = signals::read(shared, &query, now);
                signals::KeyedSeries::new(query, series)
            })
            .collect()
    }

    /// Says why the last round did not evaluate the rules (None: it did).
    pub fn not_evaluated(&self, telemetry: &streamsight_node::telemetry::IntakeTelemetry, why: Option<String>) {
        if let Some(why) = &why {
            telemetry.failed(streamsight_node::telemetry::Failure::RulesNotEvaluated, why);
        }
        *lock(&self.skipped) = why;
    }

    /// Why this node's last round did not evaluate the rules (None: it did,
    /// or it does not hold their lease: see [`crate::round::not_evaluated_because`]).
    pub fn skipped_because(&self) -> Option<String> {
        lock(&self.skipped).clone()
    }

    /// When the node evaluating the rules last said it did, if ever heard.
    pub fn heard_evaluated(&self) -> Option<Millis> {
        *lock(&self.heard_evaluated)
    }

    /// The record saying this node evaluated the rules at `now`, when one
    /// is due (every [`SAY_EVALUATED_EVERY_MS`]).
    pub(crate) fn say_evaluated(&self, now: Millis) -> Option<Record> {
        let mut said = lock(&self.said_evaluated);
        if said.is_some_and(|t| now.since(t) < SAY_EVALUATED_EVERY_MS) {
            return None;
        }
        *said = Some(now);
        Some(Record::Alert {
            at: now,
            event: Box::new(AlertEvent::Evaluated),
        })
    }

    /// Evaluates every rule at `now` on this node's services: the log records
    /// for what changed.
    /// The derived signals are refreshed first, as a housekeeping round does.
    pub fn evaluate(&self, shared: &Shared, now: Millis) -> Vec<Record> {
        shared.signals.refresh(&shared.lag, now);
        self.evaluate_with(shared, now, None)
    }

    /// The same on the derived signals as they are, and on a sharded log with
    /// every signal's series merged from the nodes holding each shard
    /// (`gathered`) instead of read from this node's services.
    pub(crate) fn evaluate_with(
        &self,
        shared: &Shared,
        now: Millis,
        gathered: Option<&BTreeMap<signals::Query, signals::Series>>,
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
                    None => signals::read(shared, &key, now),
                };
                let (all, labels) = signals::settle(series, &last);
                previous.insert(key.clone(), labels);
                if same[0].signal.is_counter() {
                    let mut readings = lock(&self.readings);
                    // No readings yet: the signal's first reading since start.
                    let last = readings.remove(&key);
                    let (rates, now_read) = signals::per_minute(all, last, now);
                    readings.insert(key, now_read);
                    rates
                } else {
                    all
                }
            };
            // Rules that share a scope (a team's rules on its groups) share
            // the walk that finds its series: at 100,000 groups a walk per rule
            // was most of a cycle.
            let mut in_scope: std::collections::HashMap<&BTreeMap<String, String>, Vec<usize>> =
                std::collections::HashMap::new();
            for rule in same {
                let kept = in_scope
                    .entry(&rule.scope)
                    .or_insert_with(|| signals::in_scope(&all, &rule.scope));
                let mut book = lock(&self.book);
                let timing = rule.timing();
                let changed = match (rule.anomaly, rule.labels.is_empty()) {
                    // The common rule walks the signal's series where they are.
                    (None, true) => {
                        let series = kept.iter().filter_map(|&i| all.get(i)).map(|(l, v)| (l, *v));
                        book.alerts
                            .evaluate_sorted(&rule.name, rule.condition(), timing, series, now)
                    }
                    (anomaly, _) => {
                        let series = signals::scoped(&all, kept, rule);
                        let (series, condition) = match anomaly {
                            Some(direction) => (book.anomalies(rule, direction, series, now), Condition::Above(0.0)),
                            None => (series, rule.condition()),
                        };
                        if rule.labels.is_empty() {
                            let series = series.iter().map(|(l, v)| (l, *v));
                            book.alerts.evaluate_sorted(&rule.name, condition, timing, series, now)
                        } else {
                            book.alerts.evaluate(&rule.name, condition, timing, series, now)
                        }
                    }
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
            let Record::Alert { event, at } = r else { continue };
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
                AlertEvent::Evaluated => {
                    let mut heard = lock(&self.heard_evaluated);
                    *heard = Some(heard.map_or(*at, |h| h.max(*at)));
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
                    rule: a.rule.to_string(),
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
                        rule: a.rule.to_string(),
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

    pub fn notifiers(&self) -> &[Notifier] {
        self.notifiers.get().map_or(&[], Vec::as_slice)
    }

    /// The notifiers and how they fare (the URL without its path: it may hold a token).
    pub fn notifier_report(&self) -> Vec<serde_json::Value> {
        use std::sync::atomic::Ordering::Relaxed;
        self.notifiers()
            .iter()
            .map(|n| {
                serde_json::json!({
                    "url": n.config.shown_url(),
                    "format": n.config.format,
                    "sent": n.stats.sent.load(Relaxed),
                    "failed": n.stats.failed.load(Relaxed),
                    "dropped": n.stats.dropped.load(Relaxed),
                    "last_error": lock(&n.stats.last_error).clone(),
                })
            })
            .collect()
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
        let asked: std::collections::HashSet<Question> =
            rules.iter().filter_map(|r| Some(Question::of(r, r.anomaly?))).collect();
        let count = &mut self.detector_count;
        self.detectors.retain(|question, series| {
            let keep = asked.contains(question);
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
    /// anomalous (and beyond the rule's threshold, if it has one), else 0;
    /// unknown stays unknown.
    fn anomalies(
        &mut self,
        rule: &Rule,
        direction: Direction,
        series: signals::Series,
        now: Millis,
    ) -> signals::Series {
        let sensitivity = sensitivity(rule);
        let question = Question::of(rule, direction);
        let forget_after = question.forget_after_ms;
        let detectors = self.detectors.entry(question).or_default();
        let before = detectors.len();
        detectors.retain(|_, (_, seen, _)| now.since(*seen) < forget_after);
        self.detector_count -= before - detectors.len();
        // Room for the series this round may add, made once.
        let room = self.max_detectors.saturating_sub(self.detector_count);
        detectors.reserve(series.len().saturating_sub(detectors.len()).min(room));
        series
            .into_iter()
            .map(|(labels, value)| {
                let Some(v) = value else { return (labels, None) };
                let verdict = match detectors.get_mut(&labels) {
                    // Asked already this round by a rule sharing the question.
                    Some((_, seen, verdict)) if *seen == now => *verdict,
                    Some((d, seen, verdict)) => {
                        *seen = now;
                        *verdict = d.observe(now, v, sensitivity);
                        *verdict
                    }
                    None if self.detector_count >= self.max_detectors => return (labels, None),
                    None => {
                        self.detector_count += 1;
                        let mut d = Box::new(Detector::new(direction));
                        let verdict = d.observe(now, v, sensitivity);
                        detectors.insert(labels.clone(), (d, now, verdict));
                        verdict
                    }
                };
                let score = if verdict.anomalous && rule.anomaly_passes_threshold(v) {
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

/// The alerts service of a node, installed with every tenant.
pub fn of(shared: &Shared) -> &AlertService {
    shared
        .feature::<AlertService>()
        .expect("the collector installs the alerts feature on every node")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default `lag_growth` rule, judged every 10 s like the housekeeping tick.
    fn scores(values: &[f64]) -> Vec<f64> {
        let rule = rules::default_rules()
            .into_iter()
            .find(|r| r.name == "lag_growth")
            .expect("a default lag_growth rule");
        let direction = rule.anomaly.expect("an anomaly rule");
        let AlertService { book, .. } = AlertService::new(&rules::AlertsConfig::default());
        let mut book = book.into_inner().expect("a fresh lock");
        let labels = streamsight_node::signals::labels(&[("cluster", "c"), ("group", "g")]);
        values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let at = Millis(1_000_000 + i as i64 * 10_000);
                let out = book.anomalies(&rule, direction, vec![(labels.clone(), Some(*v))], at);
                out[0].1.expect("a known value stays known")
            })
            .collect()
    }

    #[test]
    fn lag_growth_does_not_page_for_a_healthy_groups_jitter_and_does_for_real_growth() {
        // A group committing every 10 s: mostly 4 s of lag, at times 5, and
        // now and then 10 s (a commit late). Against its tight baseline (1 s
        // spread) three 10 s readings are six spreads high; the soak saw ~20
        // such firings an hour before the floor.
        let steady = |i: i32| if i % 5 == 0 { 5.0 } else { 4.0 };
        let mut healthy: Vec<f64> = (0..40).map(steady).collect();
        healthy.extend([10.0, 10.0, 10.0]);
        assert!(scores(&healthy).iter().all(|s| *s == 0.0), "{:?}", scores(&healthy));
        // The same group falling behind for real: past the floor, it fires.
        let mut growing: Vec<f64> = (0..40).map(steady).collect();
        growing.extend([90.0, 150.0, 210.0]);
        let s = scores(&growing);
        assert!(*s.last().unwrap() > 0.0, "{s:?}");
    }

    #[test]
    fn rules_asking_the_same_question_share_detectors_and_each_learns_a_value_once() {
        let lag_growth = rules::default_rules()
            .into_iter()
            .find(|r| r.name == "lag_growth")
            .expect("a default lag_growth rule");
        let direction = lag_growth.anomaly.expect("an anomaly rule");
        // The same rule for another receiver, and one judging more strictly.
        let copy = Rule {
            name: "lag_growth_pager".into(),
            ..lag_growth.clone()
        };
        let strict = Rule {
            name: "lag_growth_strict".into(),
            sensitivity: Some(2.0),
            ..lag_growth.clone()
        };
        let AlertService { book, .. } = AlertService::new(&rules::AlertsConfig::default());
        let mut book = book.into_inner().expect("a fresh lock");
        let AlertService { book: alone, .. } = AlertService::new(&rules::AlertsConfig::default());
        let mut alone = alone.into_inner().expect("a fresh lock");
        let series: Vec<SharedLabels> = (0..3)
            .map(|g| streamsight_node::signals::labels(&[("cluster", "c"), ("group", &format!("g{g}"))]))
            .collect();
        let steady = |i: i32| if i % 5 == 0 { 5.0 } else { 4.0 };
        let mut values: Vec<f64> = (0..40).map(steady).collect();
        values.extend([90.0, 150.0, 210.0, 270.0]);
        for (i, v) in values.iter().enumerate() {
            let at = Millis(1_000_000 + i as i64 * 10_000);
            let round: Vec<(SharedLabels, Option<f64>)> = series.iter().map(|l| (l.clone(), Some(*v))).collect();
            let a = book.anomalies(&lag_growth, direction, round.clone(), at);
            let b = book.anomalies(&copy, direction, round.clone(), at);
            book.anomalies(&strict, direction, round.clone(), at);
            // Each value learned once: the same scores as a rule on its own.
            let lone = alone.anomalies(&lag_growth, direction, round, at);
            assert_eq!(a, lone, "value {i}");
            assert_eq!(b, lone, "value {i}");
        }
        assert!(
            book.anomalies(
                &lag_growth,
                direction,
                vec![(series[0].clone(), Some(400.0))],
                Millis(2_000_000)
            )[0]
            .1
            .is_some_and(|s| s > 0.0)
        );
        // Two questions (the strict rule's is its own), three series each.
        assert_eq!(book.detectors.len(), 2);
        assert_eq!(book.detector_count, 6);
        // Once no rule asks a question, its detectors go.
        book.retire_gone(&[copy], Millis(2_010_000));
        assert_eq!((book.detectors.len(), book.detector_count), (1, 3));
        book.retire_gone(&[], Millis(2_020_000));
        assert_eq!((book.detectors.len(), book.detector_count), (0, 0));
    }
}
