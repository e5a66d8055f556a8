//! What the writer and `/metrics` see of the alerts: records applied, and
//! the alerts' own series.

use crate::service::AlertService;
use streamsight_core::{Millis, Record};
use streamsight_node::Feature;

impl Feature for AlertService {
    fn name(&self) -> &'static str {
        "alerts"
    }

    fn apply(&self, records: &[Record]) {
        AlertService::apply(self, records);
    }

    fn metrics(&self, out: &mut String, now: Millis) {
        crate::metrics::render(self, out, now);
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
