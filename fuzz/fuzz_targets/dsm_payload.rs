//! Any bytes, as a tracer's pipeline_stats body: decoded (plain and as gzip)
//! under the payload limits, translated into records and applied by every
//! service the writer feeds (engine, drop-accounting ledger, pathways), then
//! read the ways the API and `/metrics` read them. Nothing may panic; cargo fuzz
//! builds with debug assertions, so no arithmetic may overflow either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use streamsight_collector::intake::{Dates, translate};
use streamsight_collector::state::Shared;
use streamsight_collector::ServeConfig;
use streamsight_core::{EngineConfig, Millis};
use streamsight_wire::dsm::payload::{Limits, decode};

const NOW: i64 = 1_800_000_000_000;

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_decompressed_bytes: 1 << 20,
        ..Limits::default()
    };
    for gzipped in [false, true] {
        let Ok(payload) = decode(data, gzipped, limits) else { continue };
        let dates = Dates {
            received: Millis(NOW),
            oldest: Millis(NOW - 7 * 86_400_000),
            newest: Millis(NOW + 600_000),
        };
        let translated = translate(&payload, dates, "default", &|_| None);
        let shared = Shared::new(ServeConfig::default(), EngineConfig::default()).expect("defaults are valid");
        shared.apply(&translated.records);
        shared.deliveries.reconcile(Millis(NOW + 3_600_000), &shared.lag);
        let _ = streamsight_collector::metrics::render(&shared, Millis(NOW + 100_000));
        let _ = shared.pathways.graph(NOW - 3_600_000, NOW + 1);
    }
});
