//! Alerts: rules evaluated on the housekeeping tick against the signals, each
//! series' lifecycle kept by the core ([`streamsight_core::alerts`]), every
//! change written to the log before anyone is told, and notifications sent by
//! tasks of their own. A restart replays the log: a firing alert is still
//! firing, and one already notified is not notified again.

pub mod api;
mod changes;
mod feature;
mod metrics;
pub mod notify;
pub mod prometheus;
pub mod round;
pub mod service;
pub mod signals;

pub use round::round;
pub use service::{AlertService, AlertView, ChangeError, MAX_API_RULES, RuleView, of};
pub use streamsight_node::config::alerts as rules;
pub use streamsight_node::signals as derived;
