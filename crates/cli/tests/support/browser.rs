// Included by the tests and the benchmark that drive the dashboard.
#![allow(dead_code, unreachable_pub)]

//! Headless Chromium from Debian's `chromium` and `chromium-driver`, driven over
//! WebDriver (fantoccini): pages, console, failed requests, axe-core, screenshots.

use fantoccini::wd::{Capabilities, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder};
use serde_json::{Value, json};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Debian's `/usr/bin/chromium` is a shell wrapper; the driver wants the binary.
const CHROMIUM: [&str; 2] = ["/usr/lib/chromium/chromium", "/usr/bin/chromium"];
/// axe-core 4.10.3 (MPL-2.0), vendored for the tests only.
const AXE: &str = include_str!("../vendor/axe-core-4.10.3.min.js");

pub struct Browser {
    pub client: Client,
    driver: Child,
}

impl Drop for Browser {
    /// Ends chromedriver and the Chromium it started: they share a process
    /// group of their own. Killing the driver alone left every browser running
    /// (and refreshing its page) for as long as the machine was up.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.driver.id())])
            .status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `POST /session/{id}/se/log`: chromedriver's browser log (console messages,
/// failed loads), which the W3C protocol has no command for.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(&self, base: &url::Url, session: Option<&str>) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(r#"{"type":"browser"}"#.to_owned()))
    }
}

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium session.
    pub async fn start(width: u32, height: u32) -> Browser {
        assert!(
            std::path::Path::new(CHROMEDRIVER).exists(),
            "{CHROMEDRIVER} is missing: scripts/test installs Debian's chromium and chromium-driver"
        );
        let chromium = CHROMIUM
            .iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect("no chromium binary");
        let port = super::free_port();
        let driver = Command::new(CHROMEDRIVER)
            .process_group(0)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let caps: Capabilities = serde_json::from_value(json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         format!("--window-size={width},{height}"), "--lang=en-US"],
            },
            "goog:loggingPrefs": { "browser": "ALL" },
        }))
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(c) => break c,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("no WebDriver session from {CHROMEDRIVER}: {e}"),
            }
        };
        Browser { client, driver }
    }

    /// Opens `url` and waits until the dashboard's script has rendered it.
    pub async fn open(&self, url: &str) {
        self.client.goto(url).await.unwrap();
        self.wait_until(
            &format!("loading {url}"),
            "return document.body.dataset.loaded === 'true'",
        )
        .await;
    }

    /// Waits, up to 30 s, for `script` to return true.
    pub async fn wait_until(&self, what: &str, script: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if self.client.execute(script, vec![]).await.unwrap() == Value::Bool(true) {
                return;
            }
            assert!(Instant::now() < deadline, "timed out {what}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for the page's `n` charts to be drawn.
    pub async fn wait_for_charts(&self, n: usize) {
        self.wait_until(
            &format!("{n} charts drawn"),
            &format!("return document.querySelectorAll('.uplot').length === {n}"),
        )
        .await;
    }

    pub async fn eval(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.unwrap()
    }

    pub async fn text(&self, selector: &str) -> String {
        self.eval(&format!(
            "const e = document.querySelector({}); return e ? e.innerText : null",
            json!(selector)
        ))
        .await
        .as_str()
        .unwrap_or_else(|| panic!("nothing matches {selector}"))
        .to_owned()
    }

    /// Console messages at SEVERE (errors, failed loads) since the last call.
    pub async fn console_errors(&self) -> Vec<String> {
        let log = self.client.issue_cmd(BrowserLog).await.unwrap();
        log.as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Requests of this page that failed or were answered 4xx/5xx.
    pub async fn failed_requests(&self) -> Vec<String> {
        let v = self
            .eval(
                "return performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
                   .filter(e => !(e.responseStatus >= 200 && e.responseStatus < 400))
                   .map(e => `${e.name} ${e.responseStatus}`)",
            )
            .await;
        serde_json::from_value(v).unwrap()
    }

    /// axe-core's WCAG 2.1 A/AA violations on the page, as "rule: targets".
    pub async fn accessibility_violations(&self) -> Vec<String> {
        self.client.execute(AXE, vec![]).await.unwrap();
        let v = self
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } })
                   .then(r => done(r.violations.map(v => `${v.id} (${v.impact}): ${v.help}: ${v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | ')}`)))
                   .catch(e => done([`axe failed: ${e}`]));",
                vec![],
            )
            .await
            .unwrap();
        serde_json::from_value(v).unwrap()
    }

    /// Writes a screenshot to `target/dashboard-screenshots/NAME.png`.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.unwrap();
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/dashboard-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }

    /// Asserts the page loaded clean: no console error, no failed request, no
    /// accessibility violation; then saves its screenshot.
    pub async fn check_page(&self, name: &str) {
        let errors = self.console_errors().await;
        assert!(errors.is_empty(), "{name}: console errors {errors:#?}");
        let failed = self.failed_requests().await;
        assert!(failed.is_empty(), "{name}: failed requests {failed:#?}");
        let violations = self.accessibility_violations().await;
        assert!(violations.is_empty(), "{name}: accessibility {violations:#?}");
        self.screenshot(name).await;
    }
}

/// Seconds in a dashboard duration ("45 s", "2 m 40 s", "≥ 1 h 5 m"); `None` for "unknown".
pub fn seconds(text: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut words = text.trim_start_matches('≥').split_whitespace();
    let mut any = false;
    while let (Some(n), Some(unit)) = (words.next(), words.next()) {
        let n: f64 = n.parse().ok()?;
        total += n * match unit {
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            _ => return None,
        };
        any = true;
    }
    any.then_some(total)
}
