//! A run's context, shared by the run and by settling what an earlier one
//! left in flight: where it acts, how it reports to the log, what it counts.

use crate::ActError;
use serde::Serialize;
use streamsight_core::Record;
use streamsight_core::redrive::{DlqTopic, RedriveEvent};
use streamsight_node::{Shared, clock};
use streamsight_poller::ClusterConfig;

/// One run: of which DLQ topic of which cluster, by which key, reporting to
/// the node's log (blocking: a run has its own thread).
#[derive(Debug)]
pub struct Run<'a> {
    pub shared: &'a Shared,
    pub runtime: &'a tokio::runtime::Handle,
    pub cluster: &'a ClusterConfig,
    pub of: DlqTopic,
    pub id: String,
    pub key: String,
}

impl Run<'_> {
    /// On disk and applied, or an error: nothing is sent unless its claim is.
    pub(super) fn append(&self, events: Vec<RedriveEvent>) -> Result<(), ActError> {
        let writer = self
            .shared
            .writer()
            .ok_or_else(|| ActError::Refused("this collector is shutting down: its log takes nothing".into()))?;
        let at = clock::now();
        let records = events
            .into_iter()
            .map(|e| Record::Redrive { at, event: Box::new(e) })
            .collect();
        self.runtime
            .block_on(writer.append(records))
            .map_err(|e| ActError::Broker(format!("the collector's log refused the redrive's progress: {e}")))
    }

    pub(super) fn broker(&self, e: rdkafka::error::KafkaError) -> ActError {
        ActError::Broker(format!("cluster {}: {e}", self.cluster.name))
    }
}

/// Where a run in this process stands, for `GET /api/v1/redrives/{run}`.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Status {
    #[serde(flatten)]
    pub counts: Counts,
    pub done: bool,
    pub error: Option<String>,
}

/// What a run counts as it goes.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Counts {
    /// Letters the selection took, so far.
    pub selected: u64,
    /// In-flight letters of crashed runs found sent, and released.
    pub settled_sent: u64,
    pub settled_released: u64,
    pub sent: u64,
    pub already_sent: u64,
    pub no_destination: u64,
}
