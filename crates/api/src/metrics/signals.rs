//! The derived signals per group (and the open transactions per partition), as the read model has them
//! ([`streamsight_node::signals`]): the series the alert rules compare.

use std::fmt::Write;
use streamsight_core::Millis;
use streamsight_core::alerts::rule::Signal;
use streamsight_http::prometheus::{Family, esc, label_name};
use streamsight_node::Shared;
use streamsight_node::signals::{self as series, Query};

/// The signals written here: name, help, signal.
const WRITTEN: [(&str, &str, Signal); 5] = [
    (
        "streamsight_retention_margin_seconds",
        "Seconds until retention deletes a message the group has not read (worst partition).",
        Signal::RetentionMarginSeconds,
    ),
    (
        "streamsight_catch_up_seconds",
        "Seconds until the group catches up at its current rates (worst partition; 1e12 while falling behind).",
        Signal::CatchUpSeconds,
    ),
    (
        "streamsight_partitions_not_committing",
        "Partitions with lag the group stopped committing while its others move.",
        Signal::PartitionsNotCommitting,
    ),
    (
        "streamsight_open_transaction_seconds",
        "Seconds an open transaction has held the partition's last stable offset below its end (0 while none does).",
        Signal::OpenTransactionSeconds,
    ),
    (
        "streamsight_group_rebalances_last_hour",
        "Rebalances of the group seen in the last hour of polls.",
        Signal::RebalancesPerHour,
    ),
];

/// Each signal's known values; an unknown one has no series (never 0).
pub(crate) fn render_signals(out: &mut String, shared: &Shared, now: Millis) {
    for (name, help, signal) in WRITTEN {
        let mut family = Family::new(name, "gauge", help);
        for (labels, value) in series::read(shared, &Query::of(signal), now) {
            let Some(value) = value else { continue };
            let mut text = String::new();
            for (k, v) in labels.iter() {
                let Some(k) = label_name(k) else { continue };
                let sep = if text.is_empty() { "" } else { "," };
                let _ = write!(text, "{sep}{k}=\"{}\"", esc(v));
            }
            family.sample(&text, value);
        }
        family.write(out);
    }
}
