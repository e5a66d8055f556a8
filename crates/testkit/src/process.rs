//! What a test reads off a running process or its files: resident memory and
//! its peak, whether it may have transparent huge pages, and the bytes a
//! directory holds.

/// The whole text of `/proc/{pid}/{file}`, or none when it cannot be read.
fn proc_text(pid: u32, file: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap_or_default()
}

/// The value after `name` (such as `VmRSS:`) on its line of a `/proc` file.
fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|l| l.strip_prefix(name)).map(str::trim)
}

/// A `/proc` field given in kB (`VmRSS:   1234 kB`), or 0 when absent.
fn kib_field(text: &str, name: &str) -> u64 {
    field(text, name)
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// (current, peak) resident set of process `pid`, in KiB.
pub fn rss_kib(pid: u32) -> (u64, u64) {
    let status = proc_text(pid, "status");
    (kib_field(&status, "VmRSS:"), kib_field(&status, "VmHWM:"))
}

/// Whether process `pid` may be given transparent huge pages, and the anonymous
/// memory it holds in them now, in KiB: (`THP_enabled` from its status, which
/// older kernels do not report; `AnonHugePages` from `smaps_rollup`).
pub fn huge_pages(pid: u32) -> (Option<bool>, u64) {
    let enabled = field(&proc_text(pid, "status"), "THP_enabled:").map(|v| v != "0");
    let held = kib_field(&proc_text(pid, "smaps_rollup"), "AnonHugePages:");
    (enabled, held)
}

/// Sets process `pid`'s peak resident set (`VmHWM`) back to its current one,
/// so the next [`rss_kib`] peak is what came after (Linux's `clear_refs` 5).
pub fn reset_peak(pid: u32) -> std::io::Result<()> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
}

/// Bytes held by the files directly in `dir`.
pub fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}
