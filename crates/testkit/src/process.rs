//! What a test reads off a running process or its files: resident memory and
//! its peak, whether it may have transparent huge pages, and the bytes a
//! directory holds.

/// (current, peak) resident set of process `pid`, in KiB.
pub fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Whether process `pid` may be given transparent huge pages, and the anonymous
/// memory it holds in them now, in KiB: (`THP_enabled` from its status, which
/// kernels before 6.x do not report; `AnonHugePages` from `smaps_rollup`).
pub fn huge_pages(pid: u32) -> (Option<bool>, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let enabled = status
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .map(|v| v.trim() != "0");
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let held = rollup
        .lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
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
