//! The dashboard and the API at the largest estate issue 32 names: 100,000
//! groups × 10 partitions (1 M group-partitions over 1,000 topics of 100
//! partitions), and one group of 1,000 partitions, in headless Chromium: time
//! to first paint and to the data on screen for the overview and group pages,
//! bytes transferred per page; `/api/v1/groups` a page at a time, a scrape of
//! `/metrics` at group granularity, one alert round of the default rules, and
//! the collector's CPU and RSS. Prints tables for BENCHMARKS.md.
//!
//! `cargo bench -p streamsight --bench dashboard` (needs Debian's chromium and
//! chromium-driver, which scripts/test installs).

#![allow(clippy::unwrap_used)] // a benchmark that cannot set up should fail loudly

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Instant;
use support::browser::Browser;
use support::dsm;

const TOPICS: i32 = 1_000;
const PARTITIONS: i32 = 100;
const GROUPS: i32 = 100_000;
/// Partitions each group commits on, of one topic: every partition has 10 groups.
const PER_GROUP: i32 = 10;
/// The wide group commits on every partition of this many topics.
const WIDE_TOPICS: i32 = 10;
/// Backlogs per payload, under the intake's default limit.
const PER_PAYLOAD: usize = 20_000;
const LOADS: usize = 5;

fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    // utime and stime: fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks * 10.0 // USER_HZ = 100
}

fn topic(t: i32) -> String {
    format!("topic-{t:04}")
}

async fn feed(http: &reqwest::Client, intake: &str) {
    let now = streamsight_testkit::now_ms();
    let mut backlogs = Vec::new();
    for t in 0..TOPICS {
        for p in 0..PARTITIONS {
            backlogs.push((now - 60_000, dsm::produce(&topic(t), p, 10_000)));
            backlogs.push((now, dsm::produce(&topic(t), p, 10_600)));
        }
    }
    let mut commit = |group: &str, t: i32, p: i32, behind: i64| {
        backlogs.push((now - 20_000, dsm::commit(group, &topic(t), p, 10_000)));
        backlogs.push((now - 1_000, dsm::commit(group, &topic(t), p, 10_600 - behind)));
    };
    for g in 0..GROUPS {
        let group = format!("group-{g:06}");
        let block = (g / TOPICS) % (PARTITIONS / PER_GROUP);
        for p in block * PER_GROUP..(block + 1) * PER_GROUP {
            commit(&group, g % TOPICS, p, i64::from((g * 7 + p) % 500));
        }
    }
    for t in 0..WIDE_TOPICS {
        for p in 0..PARTITIONS {
            commit("wide", t, p, i64::from((t * 13 + p) % 300));
        }
    }
    for chunk in backlogs.chunks(PER_PAYLOAD) {
        let mut by_time = std::collections::BTreeMap::<i64, Vec<_>>::new();
        for (at, b) in chunk {
            by_time.entry(*at).or_default().push(b.clone());
        }
        let dated = by_time.into_iter().collect();
        dsm::post(http, intake, &dsm::payload("bench", dated)).await;
    }
}

struct PageFigures {
    first_paint_ms: f64,
    rendered_ms: f64,
    bytes: f64,
}

async fn load(b: &Browser, url: &str) -> PageFigures {
    b.open(url).await;
    let v = b
        .eval(
            "const paint = performance.getEntriesByName('first-contentful-paint')[0];
             const done = performance.getEntriesByName('streamsight-rendered')[0];
             const bytes = performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
               .reduce((n, e) => n + e.transferSize, 0);
             return [paint ? paint.startTime : -1, done ? done.startTime : -1, bytes]",
        )
        .await;
    let v: Vec<f64> = serde_json::from_value(v).unwrap();
    PageFigures {
        first_paint_ms: v[0],
        rendered_ms: v[1],
        bytes: v[2],
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

async fn fetch(http: &reqwest::Client, url: &str) -> String {
    http.get(url).send().await.unwrap().text().await.unwrap()
}

fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

/// Wall time and the collector's CPU of one GET, and the body's bytes.
async fn timed(http: &reqwest::Client, pid: u32, url: &str) -> (f64, f64, usize, String) {
    let cpu = cpu_ms(pid);
    let t = Instant::now();
    let body = fetch(http, url).await;
    (t.elapsed().as_secs_f64() * 1000.0, cpu_ms(pid) - cpu, body.len(), body)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // Samples once an hour: the summary is only made when a reader finds it
        // older than 10 s, so the first request after feeding pays the pass and
        // the next ones within 10 s reuse it. The engine takes the estate's
        // groups (20,000 a cluster by default).
        let config = "[serve]\nhistory_interval = \"1h\"\n\n[engine.cardinality]\nmax_groups_per_cluster = 200000\n";
        let (serve, intake, api) = support::serve_with("dashboard-bench", config, "memory://");
        let pid = serve.0.id();
        let http = reqwest::Client::new();
        let started = Instant::now();
        feed(&http, &intake).await;
        let group_partitions = GROUPS * PER_GROUP + WIDE_TOPICS * PARTITIONS;
        println!(
            "fed {} groups, {group_partitions} group-partitions in {:.1} s",
            GROUPS + 1,
            started.elapsed().as_secs_f64()
        );

        tokio::time::sleep_until((started + std::time::Duration::from_secs(11)).into()).await;
        let (cold_ms, cold_cpu, _, body) = timed(&http, pid, &format!("{api}/api/v1/overview")).await;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["total_groups"], GROUPS + 1, "every group is known: {body:.300}");
        let cluster = v["groups"]["rows"][0]["cluster"].as_str().unwrap().replace('/', "%2F");
        let cpu = cpu_ms(pid);
        let t = Instant::now();
        for page in 1..=50 {
            fetch(&http, &format!("{api}/api/v1/overview?sort=lag_seconds&page={page}")).await;
        }
        let warm_ms = t.elapsed().as_secs_f64() * 1000.0 / 50.0;
        let warm_cpu = (cpu_ms(pid) - cpu) / 50.0;

        let mut api_rows = Vec::new();
        let (ms, cpu, bytes, body) = timed(&http, pid, &format!("{api}/api/v1/groups?limit=1000")).await;
        let first: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(first["total_groups"], GROUPS + 1, "{body:.300}");
        api_rows.push(("`/api/v1/groups?limit=1000`, first page", ms, cpu, bytes));
        let middle = format!("{api}/api/v1/groups?limit=1000&after_cluster={cluster}&after_group=group-050000");
        let (ms, cpu, bytes, _) = timed(&http, pid, &middle).await;
        api_rows.push(("`/api/v1/groups?limit=1000`, a page in the middle", ms, cpu, bytes));
        let (ms, cpu, bytes, _) = timed(&http, pid, &format!("{api}/api/v1/groups")).await;
        api_rows.push(("`/api/v1/groups` (the default page: 10,000)", ms, cpu, bytes));
        let (ms, cpu, bytes, _) = timed(&http, pid, &format!("{api}/api/v1/groups/{cluster}/wide")).await;
        api_rows.push(("`/api/v1/groups/C/wide` (1,000 partitions)", ms, cpu, bytes));
        let (ms, cpu, bytes, _) = timed(&http, pid, &format!("{api}/api/v1/groups/{cluster}/group-000042")).await;
        api_rows.push(("`/api/v1/groups/C/group-000042` (10 partitions)", ms, cpu, bytes));
        for granularity in ["group", "topic"] {
            let mut best = None::<(f64, f64, usize)>;
            for _ in 0..3 {
                let url = format!("{api}/metrics?granularity={granularity}");
                let (ms, cpu, bytes, _) = timed(&http, pid, &url).await;
                if best.is_none_or(|b| ms < b.0) {
                    best = Some((ms, cpu, bytes));
                }
            }
            let (ms, cpu, bytes) = best.unwrap();
            let name = if granularity == "group" {
                "`/metrics?granularity=group` (best of 3)"
            } else {
                "`/metrics?granularity=topic` (best of 3)"
            };
            api_rows.push((name, ms, cpu, bytes));
        }
        // One round of the default alert rules over the estate, as the
        // housekeeping tick runs it (timed by the collector itself).
        let evaluation = streamsight_testkit::eventually(60, "an alert round over the estate", async || {
            let metrics = fetch(&http, &format!("{api}/metrics?granularity=group")).await;
            metrics
                .lines()
                .find_map(|l| l.strip_prefix("streamsight_alerts_evaluation_seconds "))
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|s| *s > 0.0)
        })
        .await;

        let b = Browser::start(1400, 1000).await;
        let mut rows = Vec::new();
        for (name, path) in [
            ("overview", "/".to_owned()),
            (
                "overview, filtered and sorted",
                "/?q=group-09&sort=lag_seconds&page=3".to_owned(),
            ),
            ("group (10 partitions)", format!("/groups/{cluster}/group-000042")),
            ("group (1,000 partitions)", format!("/groups/{cluster}/wide")),
        ] {
            let mut figures = Vec::new();
            for _ in 0..LOADS {
                figures.push(load(&b, &format!("{api}{path}")).await);
            }
            rows.push((
                name,
                median(figures.iter().map(|f| f.first_paint_ms).collect()),
                median(figures.iter().map(|f| f.rendered_ms).collect()),
                figures[0].bytes,
                median(figures.iter().map(|f| f.bytes).collect()),
            ));
        }
        // A page that finds the summary stale pays the pass before it can draw.
        tokio::time::sleep(std::time::Duration::from_secs(11)).await;
        let cold = load(&b, &format!("{api}/")).await;
        rows.push((
            "overview, summary stale (one load)",
            cold.first_paint_ms,
            cold.rendered_ms,
            cold.bytes,
            cold.bytes,
        ));
        println!("\n| page | first paint | data on screen | bytes, first load | bytes, later loads |");
        println!("|---|---|---|---|---|");
        for (name, paint, rendered, first, later) in rows {
            println!(
                "| {name} | {paint:.0} ms | {rendered:.0} ms | {:.1} KiB | {:.1} KiB |",
                first / 1024.0,
                later / 1024.0
            );
        }
        println!("\n| request | wall | collector CPU | bytes |");
        println!("|---|---|---|---|");
        for (name, ms, cpu, bytes) in api_rows {
            println!(
                "| {name} | {ms:.0} ms | {cpu:.0} ms | {:.1} KiB |",
                bytes as f64 / 1024.0
            );
        }
        println!(
            "\ncollector, {} groups, {group_partitions} group-partitions:",
            GROUPS + 1
        );
        println!("- overview with a stale summary (one pass over the estate): {cold_ms:.0} ms, {cold_cpu:.0} ms CPU");
        println!(
            "- overview from the summary (50 pages, sorted by lag seconds): {warm_ms:.1} ms, {warm_cpu:.1} ms CPU each"
        );
        println!("- one round of the default alert rules: {:.0} ms", evaluation * 1000.0);
        println!("- collector RSS: {} MiB", rss_mib(pid));
    });
}
