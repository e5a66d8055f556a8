//! What the collector holds, and the one writer that changes it.
//!
//! Every accepted record goes through the writer thread: records from all requests
//! waiting at that moment are appended to the store in one transaction (group
//! commit), and only once that is on disk are they applied to the engine and the
//! pathways, and the requests answered. So the engine never holds what the disk
//! does not, and a 2xx means "on disk".

use crate::config::ServeConfig;
use crate::pathways::Pathways;
use crate::telemetry::IntakeTelemetry;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use streamsight_core::Record;
use streamsight_core::{Engine, EngineConfig, EngineEvent, GroupId, Millis, Status};
use streamsight_store::{Store, StoreError};
use tokio::sync::oneshot;

/// Events kept for the API.
const EVENTS_KEPT: usize = 1_000;

#[derive(Clone, Debug, Serialize)]
pub struct GroupSample {
    pub at_ms: i64,
    pub status: Status,
    pub total_lag: i64,
    pub complete: bool,
    pub max_lag_seconds: Option<f64>,
}

#[derive(Debug)]
pub struct Shared {
    pub config: ServeConfig,
    pub engine: Mutex<Engine>,
    pub pathways: Mutex<Pathways>,
    pub events: Mutex<VecDeque<EngineEvent>>,
    pub history: Mutex<HashMap<GroupId, VecDeque<GroupSample>>>,
    pub telemetry: IntakeTelemetry,
    pub ready: AtomicBool,
    /// What the poller last saw of each configured cluster.
    pub clusters: Mutex<BTreeMap<String, ClusterView>>,
    /// Drop accounting.
    pub deliveries: Mutex<crate::deliveries::Deliveries>,
    /// Running end-to-end probes.
    pub probes: Mutex<Vec<streamsight_probe::Probe>>,
    /// Running dead-letter queue monitors.
    pub dlq: Mutex<Vec<streamsight_dlq::DlqMonitor>>,
}

/// A polled cluster: its last snapshot and the poller's own counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClusterView {
    pub bootstrap: Vec<String>,
    pub poll_interval_ms: i64,
    pub polls: u64,
    pub failed_polls: u64,
    pub requests: u64,
    pub last_poll_ms: Option<f64>,
    #[serde(skip)]
    pub last: Option<Arc<streamsight_poller::Snapshot>>,
}

/// Locks a mutex; a panic elsewhere while holding it does not take the collector down.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    pub fn new(config: ServeConfig, engine: EngineConfig) -> Result<Self, streamsight_core::ConfigError> {
        Ok(Self {
            engine: Mutex::new(Engine::new(engine)?),
            pathways: Mutex::new(Pathways::default()),
            events: Mutex::new(VecDeque::new()),
            history: Mutex::new(HashMap::new()),
            telemetry: IntakeTelemetry::default(),
            ready: AtomicBool::new(false),
            deliveries: Mutex::new(crate::deliveries::Deliveries::new()),
            probes: Mutex::new(Vec::new()),
            dlq: Mutex::new(Vec::new()),
            clusters: Mutex::new(
                config
                    .clusters
                    .iter()
                    .map(|c| {
                        let view = ClusterView {
                            bootstrap: c.bootstrap.clone(),
                            poll_interval_ms: crate::time_ms(c.poll_interval),
                            ..ClusterView::default()
                        };
                        (c.name.clone(), view)
                    })
                    .collect(),
            ),
            config,
        })
    }

    /// Applies records already on disk (or being replayed from it).
    pub fn apply(&self, records: &[Record]) {
        let mut new_events = Vec::new();
        {
            let mut engine = lock(&self.engine);
            for r in records {
                r.apply(&mut engine);
            }
            new_events.extend(engine.drain_events());
            let mut deliveries = lock(&self.deliveries);
            for r in records {
                if let Record::Delivery { fact, .. } = r {
                    deliveries.apply(fact, &engine);
                }
            }
            for e in &new_events {
                deliveries.engine_event(e);
            }
        }
        let mut pathways = lock(&self.pathways);
        for r in records {
            if let Record::Pathway { point, .. } = r {
                pathways.add(point.clone());
            }
        }
        drop(pathways);
        if !new_events.is_empty() {
            let mut events = lock(&self.events);
            for e in new_events {
                tracing::info!(event = ?e, "engine event");
                if events.len() == EVENTS_KEPT {
                    events.pop_front();
                }
                events.push_back(e);
            }
        }
    }

    /// Reconciles the drop-accounting windows that are due.
    pub fn reconcile_deliveries(&self, now: Millis) {
        let engine = lock(&self.engine);
        lock(&self.deliveries).reconcile(now, &engine);
    }

    /// Records each group's lag now, for its recent history.
    pub fn sample_groups(&self, now: Millis) {
        let samples: Vec<(GroupId, GroupSample)> = {
            let engine = lock(&self.engine);
            engine
                .groups()
                .map(|gid| {
                    let g = engine.evaluate_group(gid, now);
                    let max_lag_seconds = g.max_lag.and_then(|(gp, _)| engine.evaluate(gp, now).lag_seconds);
                    let sample = GroupSample {
                        at_ms: now.0,
                        status: g.status,
                        total_lag: g.total_lag,
                        complete: g.complete,
                        max_lag_seconds,
                    };
                    (gid, sample)
                })
                .collect()
        };
        let keep = self.config.history_samples.max(1);
        let mut history = lock(&self.history);
        for (gid, sample) in samples {
            let ring = history.entry(gid).or_default();
            if ring.len() >= keep {
                ring.pop_front();
            }
            ring.push_back(sample);
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    #[error("replaying the store: {0}")]
    Replay(#[from] StoreError),
    #[error("cannot start the writer thread: {0}")]
    Spawn(std::io::Error),
}

enum Job {
    Append {
        records: Vec<Record>,
        /// Applied after `records`, never stored: answers that only confirm.
        transient: Vec<Record>,
        done: oneshot::Sender<Result<(), String>>,
    },
    DeleteBefore(Millis),
}

/// The handle requests use to reach the writer thread.
#[derive(Clone, Debug)]
pub struct Writer {
    tx: mpsc::Sender<Job>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Append { records, transient, .. } => {
                write!(f, "Append({} records, {} transient)", records.len(), transient.len())
            }
            Job::DeleteBefore(at) => write!(f, "DeleteBefore({at:?})"),
        }
    }
}

impl Writer {
    /// Replays what the store holds since `since`, then starts the writer thread.
    pub fn start(mut store: Box<dyn Store>, shared: Arc<Shared>, since: Millis) -> Result<Self, WriterError> {
        let records = store.load(since)?;
        tracing::info!(records = records.len(), "replaying stored records");
        shared.apply(&records);
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("streamsight-writer".into())
            .spawn(move || write_loop(store.as_mut(), &shared, &rx))
            .map_err(WriterError::Spawn)?;
        Ok(Self { tx })
    }

    /// Returns once the records are on disk and applied.
    pub async fn append(&self, records: Vec<Record>) -> Result<(), String> {
        self.append_with_transient(records, Vec::new()).await
    }

    /// Stores `records`, then applies them and `transient` (which is not stored).
    pub async fn append_with_transient(&self, records: Vec<Record>, transient: Vec<Record>) -> Result<(), String> {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(Job::Append {
                records,
                transient,
                done,
            })
            .map_err(|_| "the writer has stopped".to_owned())?;
        wait.await.map_err(|_| "the writer has stopped".to_owned())?
    }

    pub fn delete_before(&self, before: Millis) {
        let _ = self.tx.send(Job::DeleteBefore(before));
    }
}

fn write_loop(store: &mut dyn Store, shared: &Shared, rx: &mpsc::Receiver<Job>) {
    while let Ok(first) = rx.recv() {
        let mut batch = Vec::new();
        let mut transient = Vec::new();
        let mut waiting = Vec::new();
        let mut deletes = Vec::new();
        let mut take = |job: Job| match job {
            Job::Append {
                records,
                transient: t,
                done,
            } => {
                batch.extend(records);
                transient.extend(t);
                waiting.push(done);
            }
            Job::DeleteBefore(at) => deletes.push(at),
        };
        take(first);
        while let Ok(job) = rx.try_recv() {
            take(job);
        }
        if !waiting.is_empty() {
            let result = store.append(&batch).map_err(|e| e.to_string());
            if result.is_ok() {
                shared.apply(&batch);
                shared.apply(&transient);
            } else {
                tracing::error!(error = ?result, records = batch.len(), "store append failed");
            }
            for done in waiting {
                let _ = done.send(result.clone());
            }
        }
        if let Some(&before) = deletes.iter().max() {
            match store.delete_before(before) {
                Ok(0) => {}
                Ok(n) => tracing::info!(deleted = n, "retention enforced"),
                Err(e) => tracing::error!(error = %e, "retention failed"),
            }
        }
    }
}
