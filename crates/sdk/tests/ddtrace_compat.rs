//! Pathway hashes and the `dd-pathway-ctx-base64` header, byte for byte against
//! the real `ddtrace` package (installed in `.venv` by scripts/test): a fleet that
//! mixes Datadog tracers and this SDK builds one pathway.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

use serde_json::{Value, json};
use std::path::PathBuf;
use streamsight_wire::pathway::{PathwayContext, node_hash, pathway_hash};

#[test]
fn hashes_and_headers_match_ddtrace() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("../../.venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/test, which installs it",
        python.display()
    );
    let cases = json!([
        {"service": "checkout", "env": "prod", "tags": ["direction:out", "topic:orders", "type:kafka"],
         "parent": 0, "pathway_start_ms": 1_700_000_000_123i64, "edge_start_ms": 1_700_000_000_123i64},
        {"service": "billing", "env": "none", "tags": ["type:kafka", "topic:orders", "group:bill", "direction:in"],
         "parent": 12_345_678_901_234_567_890u64, "pathway_start_ms": 1_700_000_000_000i64, "edge_start_ms": 1_700_000_009_999i64},
        {"service": "émoji-svc", "env": "staging", "tags": ["direction:out", "topic:t", "type:kafka"],
         "parent": 1, "pathway_start_ms": 5, "edge_start_ms": 6},
    ]);
    let out = std::process::Command::new(&python)
        .arg(root.join("tests/python_pathway.py"))
        .arg(cases.to_string())
        .env("DD_TRACE_ENABLED", "false")
        // ddtrace 4 mixes a hash of its process tags into node hashes; the SDK has
        // none, so compare the algorithm with them off.
        .env("DD_EXPERIMENTAL_PROPAGATE_PROCESS_TAGS_ENABLED", "false")
        .env("DD_INSTRUMENTATION_TELEMETRY_ENABLED", "false")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let theirs: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    for (case, want) in cases.as_array().unwrap().iter().zip(theirs.as_array().unwrap()) {
        let tags: Vec<&str> = case["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        let parent = case["parent"].as_u64().unwrap();
        let hash = pathway_hash(
            node_hash(
                case["service"].as_str().unwrap(),
                case["env"].as_str().unwrap(),
                "",
                &tags,
            ),
            parent,
        );
        assert_eq!(hash, want["hash"].as_u64().unwrap(), "{case}");
        let ctx = PathwayContext {
            hash: parent,
            pathway_start_ms: case["pathway_start_ms"].as_i64().unwrap(),
            edge_start_ms: case["edge_start_ms"].as_i64().unwrap(),
        };
        assert_eq!(ctx.to_header(), want["header"].as_str().unwrap(), "{case}");
        assert_eq!(
            PathwayContext::from_header(want["header"].as_str().unwrap().as_bytes()),
            Ok(ctx)
        );
    }
}
