//! Any bytes, as a tracer's pipeline_stats body: decoded (plain and as gzip),
//! translated into records and applied to an engine. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use streamsight_collector::intake::translate;
use streamsight_core::{Engine, EngineConfig, Millis};
use streamsight_wire::dsm::payload::{Limits, decode};

fuzz_target!(|data: &[u8]| {
    let limits = Limits { max_decompressed_bytes: 1 << 20 };
    for gzipped in [false, true] {
        let Ok(payload) = decode(data, gzipped, limits) else { continue };
        let translated = translate(&payload, Millis(1_800_000_000_000), "default", &|_| None);
        let mut engine = Engine::new(EngineConfig::default()).expect("default config is valid");
        for record in &translated.records {
            record.apply(&mut engine);
        }
        for id in engine.group_partitions().collect::<Vec<_>>() {
            let _ = engine.evaluate(id, Millis(1_800_000_100_000));
        }
    }
});
