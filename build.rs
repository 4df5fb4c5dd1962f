//! Build metadata for `--version` and `redis_streams_exporter_build_info`: the git revision
//! (`RSE_GIT_REVISION`) and the build date (`RSE_BUILD_DATE`, RFC 3339 UTC).
//!
//! - Revision: the `RSE_GIT_REVISION` environment variable when set (container builds have no
//!   `.git`: the Dockerfile passes its `REVISION` build argument this way), else
//!   `git rev-parse --short=12 HEAD`, else `unknown`. A full hexadecimal hash is cut to 12 digits.
//! - Build date: `SOURCE_DATE_EPOCH` (reproducible builds) when set, else the time this script
//!   ran. A malformed `SOURCE_DATE_EPOCH` fails the build, as reproducible-builds.org asks.
//!
//! The functions below are pure so that `tests/daemon/build_info.rs` can include this file and test
//! them with a fake environment.

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    let env = |key: &str| std::env::var(key).ok();
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let exists = |path: &str| std::path::Path::new(path).exists();
    match cargo_lines(&env, &git, &exists, now) {
        Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
        // A panic is how a build script fails the build.
        Err(e) => panic!("{e}"),
    }
}

/// Everything the build script prints: the two `rustc-env` values and what makes it rerun.
pub fn cargo_lines(
    env: &dyn Fn(&str) -> Option<String>,
    git: &dyn Fn(&[&str]) -> Option<String>,
    exists: &dyn Fn(&str) -> bool,
    now: u64,
) -> Result<Vec<String>, String> {
    let mut lines = vec![
        format!("cargo:rustc-env=RSE_GIT_REVISION={}", revision(env, git)),
        format!("cargo:rustc-env=RSE_BUILD_DATE={}", build_date(env, now)?),
        "cargo:rerun-if-env-changed=RSE_GIT_REVISION".to_string(),
        "cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH".to_string(),
        "cargo:rerun-if-changed=build.rs".to_string(),
    ];
    // Rerun when HEAD moves. In a worktree `.git` is a file, so ask git where HEAD and the
    // branch's ref really live instead of watching `.git/HEAD`. Only files that exist: cargo
    // reruns the script on every build for a missing one (packed-refs often is).
    let mut watch = Vec::new();
    if let Some(git_dir) = git(&["rev-parse", "--git-dir"]) {
        watch.push(format!("{git_dir}/HEAD"));
        if let (Some(common), Some(reference)) = (
            git(&["rev-parse", "--git-common-dir"]),
            git(&["symbolic-ref", "-q", "HEAD"]),
        ) {
            watch.push(format!("{common}/{reference}"));
            watch.push(format!("{common}/packed-refs"));
        }
    }
    lines.extend(
        watch
            .into_iter()
            .filter(|path| exists(path))
            .map(|path| format!("cargo:rerun-if-changed={path}")),
    );
    Ok(lines)
}

/// The source revision: the override, else git's, else `unknown`.
pub fn revision(
    env: &dyn Fn(&str) -> Option<String>,
    git: &dyn Fn(&[&str]) -> Option<String>,
) -> String {
    let given = env("RSE_GIT_REVISION")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let revision = given
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    if revision.len() > 12 && revision.bytes().all(|b| b.is_ascii_hexdigit()) {
        revision[..12].to_string()
    } else {
        revision
    }
}

/// The build date, RFC 3339 in UTC: `SOURCE_DATE_EPOCH` when set, else `now` (Unix seconds).
pub fn build_date(env: &dyn Fn(&str) -> Option<String>, now: u64) -> Result<String, String> {
    let seconds = match env("SOURCE_DATE_EPOCH").filter(|s| !s.trim().is_empty()) {
        Some(s) => s.trim().parse::<u64>().map_err(|_| {
            format!("SOURCE_DATE_EPOCH must be a number of seconds since 1970, not {s:?}")
        })?,
        None => now,
    };
    Ok(rfc3339(seconds))
}

/// `YYYY-MM-DDTHH:MM:SSZ` for Unix seconds (proleptic Gregorian calendar, UTC).
pub fn rfc3339(seconds: u64) -> String {
    let days = seconds / 86_400;
    let rest = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Howard Hinnant's `civil_from_days`, for days since 1970-01-01 (non-negative here).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}
