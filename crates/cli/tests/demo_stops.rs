//! `streamsight demo` stops when told, in any phase: SIGTERM or Ctrl-C inside
//! a producer incident (the broker rejecting every produce), and `--duration`
//! ending inside one, each within 3 s, its temp dir removed.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

mod support;

use std::process::Command;
use std::time::{Duration, Instant};
use streamsight_testkit::eventually;
use streamsight_testkit::http::get_json;
use support::{Guard, start};

/// How long the demo may take to stop. Measured on 2 cores: 0.7 to 2.4 s
/// (its services get 1.2 s, the runtime 0.3 s, then the mock cluster and
/// the clients are dropped); 2 s failed two fresh-clone runs in three.
const STOP_WITHIN: Duration = Duration::from_secs(3);

/// The demo inside an incident from its start, for `extra` more flags: its
/// guard, API URL, and when it said it serves (where its `--duration` starts),
/// once the collector sees the producer failing.
async fn demo_in_an_incident(extra: &[&str]) -> (Guard, String, Instant) {
    let (guard, line) = start(
        Command::new(env!("CARGO_BIN_EXE_streamsight"))
            .args(["demo", "--api-listen", "127.0.0.1:0", "--first-incident-after", "0s"])
            .args(["--incident-for", "10m"])
            .args(extra)
            .env("STREAMSIGHT_LOG", "error"),
        "streamsight serving",
    );
    let serving = Instant::now();
    let api = support::field(&line, "api");
    let client = reqwest::Client::new();
    eventually(60, "the demo's producer failing", async || {
        let overview = get_json(&client, &format!("{api}/api/v1/overview")).await;
        (!overview["incidents"]["producers_failing"].as_array()?.is_empty()).then_some(())
    })
    .await;
    (guard, api, serving)
}

/// Waits for the demo to exit: how long it took, and whether it succeeded.
fn exits(guard: &mut Guard, within: Duration) -> (Duration, bool) {
    let started = Instant::now();
    loop {
        if let Some(status) = guard.0.try_wait().unwrap() {
            return (started.elapsed(), status.success());
        }
        assert!(started.elapsed() < within, "the demo still runs {within:?} later");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn temp_dir(guard: &Guard) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("streamsight-demo-{}", guard.0.id()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_stops_on_sigterm_and_ctrl_c_inside_an_incident() {
    for signal in ["-TERM", "-INT"] {
        let (mut guard, _, _) = demo_in_an_incident(&[]).await;
        let dir = temp_dir(&guard);
        assert!(dir.exists(), "{dir:?}");
        let killed = Command::new("kill")
            .args([signal, &guard.0.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let (took, ok) = exits(&mut guard, STOP_WITHIN);
        eprintln!("demo: stopped {took:?} after kill {signal}");
        assert!(ok, "kill {signal}: the demo did not exit cleanly");
        assert!(!dir.exists(), "kill {signal}: {dir:?} left behind");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_stops_at_its_duration_inside_an_incident() {
    // The duration counts from when the demo serves, not from its process's
    // start (which a loaded machine makes slow): the bound is 2 s after it.
    let (mut guard, _, serving) = demo_in_an_incident(&["--duration", "8s"]).await;
    let dir = temp_dir(&guard);
    let left = Duration::from_secs(8).saturating_sub(serving.elapsed());
    let (took, ok) = exits(&mut guard, left + STOP_WITHIN);
    eprintln!("demo: stopped {took:?} after the incident was seen, {left:?} before its duration ended");
    assert!(ok, "the demo did not exit cleanly");
    assert!(!dir.exists(), "{dir:?} left behind");
}
