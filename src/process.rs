//! What Linux says about this process, for the `process_*` metrics that
//! every Prometheus client library exports (same names, same meanings as
//! client_golang's process collector), read from `/proc/self` with no
//! system call beyond reading files.
//!
//! - CPU seconds: `utime + stime` of `/proc/self/stat`, in clock ticks of
//!   `USER_HZ`, which the kernel fixes at 100 for every architecture's
//!   user-space ABI (prometheus/procfs hard-codes it the same way).
//! - Virtual memory: `vsize` of `/proc/self/stat`, in bytes.
//! - Resident memory: `VmRSS` of `/proc/self/status`, in kB (the same
//!   counter as `rss` pages of `/proc/self/stat`, without the page size).
//! - Open descriptors: the entries of `/proc/self/fd`; maximum: the soft
//!   `Max open files` of `/proc/self/limits`.
//! - Start time: `starttime` of `/proc/self/stat` (ticks after boot) plus
//!   `btime` of `/proc/stat`.
//!
//! A value that cannot be read is `None`, never 0 (on a system without
//! `/proc` every one is).

use std::path::Path;

/// Clock ticks per second of `/proc` times (`USER_HZ`).
const USER_HZ: f64 = 100.0;

/// One reading.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcessStats {
    /// User and system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    /// Resident set size, bytes.
    pub resident_memory_bytes: Option<u64>,
    /// Virtual memory size, bytes.
    pub virtual_memory_bytes: Option<u64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// Soft limit on open file descriptors.
    pub max_fds: Option<u64>,
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
}

/// Reads this process's figures; `None` where `/proc` does not exist.
pub fn read() -> Option<ProcessStats> {
    let stats = read_from(Path::new("/proc"), "self");
    (stats != ProcessStats::default()).then_some(stats)
}

/// Reads the figures of process `pid` (`self` for this one) under a proc
/// file system mounted at `proc`.
pub fn read_from(proc: &Path, pid: &str) -> ProcessStats {
    let dir = proc.join(pid);
    let text = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let stat = text("stat");
    let fields = stat.as_deref().and_then(stat_fields);
    let field = |i: usize| -> Option<u64> { fields.as_ref()?.get(i)?.parse().ok() };
    // Fields are numbered from 1 in proc(5); `stat_fields` starts at 3.
    let (utime, stime, starttime, vsize) =
        (field(14 - 3), field(15 - 3), field(22 - 3), field(23 - 3));
    let boot_time = std::fs::read_to_string(proc.join("stat"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<u64>().ok())
        });
    ProcessStats {
        cpu_seconds: utime.zip(stime).map(|(u, s)| (u + s) as f64 / USER_HZ),
        resident_memory_bytes: text("status").and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(kilobytes)
        }),
        virtual_memory_bytes: vsize,
        open_fds: std::fs::read_dir(dir.join("fd"))
            .ok()
            .map(|d| d.filter(Result::is_ok).count() as u64),
        max_fds: text("limits").and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Max open files"))
                .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        }),
        start_time_seconds: starttime
            .zip(boot_time)
            .map(|(ticks, boot)| boot as f64 + ticks as f64 / USER_HZ),
    }
}

/// The fields of a `stat` line from the third (`state`) on: the second,
/// the command name in parentheses, may itself hold spaces and parentheses,
/// so everything up to the last `)` is skipped.
fn stat_fields(line: &str) -> Option<Vec<&str>> {
    let (_, rest) = line.rsplit_once(')')?;
    Some(rest.split_whitespace().collect())
}

/// `"  123456 kB"` in bytes.
fn kilobytes(value: &str) -> Option<u64> {
    let mut parts = value.split_whitespace();
    let n: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") => Some(n * 1024),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A proc tree written by hand: every figure is known.
    #[test]
    fn parses_a_proc_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let p = root.join("42");
        std::fs::create_dir_all(p.join("fd")).unwrap();
        for fd in ["0", "1", "2", "7"] {
            std::fs::write(p.join("fd").join(fd), "").unwrap();
        }
        // comm with a space and a parenthesis, as a process may name itself.
        std::fs::write(
            p.join("stat"),
            "42 (my (odd) proc) S 1 42 42 0 -1 4194560 500 0 0 0 250 130 0 0 20 0 9 0 123456 987654321 2048 18446744073709551615\n",
        )
        .unwrap();
        std::fs::write(
            p.join("status"),
            "Name:\tx\nVmRSS:\t   8192 kB\nThreads:\t9\n",
        )
        .unwrap();
        std::fs::write(
            p.join("limits"),
            "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n",
        )
        .unwrap();
        std::fs::write(
            root.join("stat"),
            "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n",
        )
        .unwrap();
        let s = read_from(root, "42");
        assert_eq!(s.cpu_seconds, Some(3.8));
        assert_eq!(s.virtual_memory_bytes, Some(987_654_321));
        assert_eq!(s.resident_memory_bytes, Some(8192 * 1024));
        assert_eq!(s.open_fds, Some(4));
        assert_eq!(s.max_fds, Some(1024));
        assert_eq!(s.start_time_seconds, Some(1_700_000_000.0 + 1234.56));
    }

    #[test]
    fn missing_files_are_unknown_not_zero() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_from(dir.path(), "1"), ProcessStats::default());
    }

    /// This process on this machine: plausible, not exact.
    #[test]
    fn reads_this_process() {
        let s = read().expect("/proc");
        assert!(s.resident_memory_bytes.unwrap() > 0);
        assert!(s.virtual_memory_bytes.unwrap() >= s.resident_memory_bytes.unwrap());
        assert!(s.open_fds.unwrap() >= 3);
        assert!(s.max_fds.unwrap() >= s.open_fds.unwrap());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = s.start_time_seconds.unwrap();
        assert!(
            start <= now + 1.0 && start > now - 86_400.0 * 365.0,
            "{start}"
        );
        assert!(s.cpu_seconds.is_some());
    }
}
