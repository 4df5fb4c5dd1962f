//! Build metadata: build.rs's revision and date logic (its functions, included here and fed a
//! fake environment, which is how a container build passes `REVISION` without `.git`), and the
//! built binary: `--version` and `redis_streams_exporter_build_info` agree with each other and
//! with git.

use crate::common;

#[allow(dead_code)] // build.rs's `main` is not called here.
#[path = "../../build.rs"]
mod build_script;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use common::exporter::Exporter;
use common::{RedisServer, Server};

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |key: &str| map.get(key).cloned()
}

fn git_says(revision: Option<&'static str>) -> impl Fn(&[&str]) -> Option<String> {
    move |args: &[&str]| match args {
        ["rev-parse", "--short=12", "HEAD"] => revision.map(str::to_string),
        _ => None,
    }
}

#[test]
fn revision_override_wins_over_git_and_full_hashes_are_shortened() {
    let full = "0123456789abcdef0123456789abcdef01234567";
    let with = |pairs: &[(&str, &str)], git: Option<&'static str>| {
        build_script::revision(&env_of(pairs), &git_says(git))
    };
    assert_eq!(
        with(&[("RSE_GIT_REVISION", full)], Some("fedcba987654")),
        "0123456789ab"
    );
    // Not a hash (a tag, say): kept as given, trimmed.
    assert_eq!(
        with(&[("RSE_GIT_REVISION", " v0.1.0-rc1 \n")], None),
        "v0.1.0-rc1"
    );
    // Empty override (the Dockerfile passes REVISION="" when the builder gives none): git's.
    assert_eq!(
        with(&[("RSE_GIT_REVISION", "")], Some("fedcba987654")),
        "fedcba987654"
    );
    assert_eq!(with(&[], Some("fedcba987654")), "fedcba987654");
    assert_eq!(with(&[], None), "unknown");
}

#[test]
fn source_date_epoch_sets_the_build_date() {
    let date = |pairs: &[(&str, &str)], now: u64| build_script::build_date(&env_of(pairs), now);
    assert_eq!(
        date(&[("SOURCE_DATE_EPOCH", "1700000000")], 5).unwrap(),
        "2023-11-14T22:13:20Z"
    );
    assert_eq!(
        date(&[("SOURCE_DATE_EPOCH", "")], 0).unwrap(),
        "1970-01-01T00:00:00Z"
    );
    assert_eq!(date(&[], 951_782_400).unwrap(), "2000-02-29T00:00:00Z");
    let err = date(&[("SOURCE_DATE_EPOCH", "yesterday")], 0).unwrap_err();
    assert!(err.contains("SOURCE_DATE_EPOCH"), "{err}");
}

/// The date formatter against GNU date over a spread of instants (leap days, century rules,
/// end of year, far future).
#[test]
fn rfc3339_agrees_with_gnu_date() {
    let mut instants: Vec<u64> = vec![0, 59, 86_399, 86_400, 951_868_799, 4_107_542_400];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..500 {
        // xorshift: deterministic spread over 1970..2300.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        instants.push(x % 10_413_792_000);
    }
    let input: String = instants.iter().map(|s| format!("@{s}\n")).collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("instants");
    std::fs::write(&file, input).unwrap();
    let out = Command::new("date")
        .args(["-u", "-f", file.to_str().unwrap(), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .expect("GNU date (coreutils) is required");
    assert!(out.status.success(), "{out:?}");
    let expected: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let ours: Vec<String> = instants.iter().map(|&s| build_script::rfc3339(s)).collect();
    assert_eq!(ours, expected);
}

#[test]
fn build_script_reruns_on_head_and_on_its_variables() {
    let lines = build_script::cargo_lines(
        &env_of(&[("RSE_GIT_REVISION", "abc"), ("SOURCE_DATE_EPOCH", "0")]),
        &|args: &[&str]| match args {
            ["rev-parse", "--git-dir"] => Some("/repo/.git/worktrees/w".into()),
            ["rev-parse", "--git-common-dir"] => Some("/repo/.git".into()),
            ["symbolic-ref", "-q", "HEAD"] => Some("refs/heads/main".into()),
            _ => None,
        },
        // No packed-refs here: watching a missing file would rerun the script on every build.
        &|path: &str| path != "/repo/.git/packed-refs",
        0,
    )
    .unwrap();
    for wanted in [
        "cargo:rustc-env=RSE_GIT_REVISION=abc",
        "cargo:rustc-env=RSE_BUILD_DATE=1970-01-01T00:00:00Z",
        "cargo:rerun-if-env-changed=RSE_GIT_REVISION",
        "cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH",
        "cargo:rerun-if-changed=/repo/.git/worktrees/w/HEAD",
        "cargo:rerun-if-changed=/repo/.git/refs/heads/main",
    ] {
        assert!(lines.iter().any(|l| l == wanted), "{wanted} in {lines:#?}");
    }
    assert!(
        !lines.iter().any(|l| l.contains("packed-refs")),
        "{lines:#?}"
    );
}

/// `(version, revision, build date)` from `--version`.
fn version_output() -> (String, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_redis-streams-exporter"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.trim();
    let rest = line
        .strip_prefix("redis-streams-exporter ")
        .unwrap_or_else(|| panic!("{line}"));
    let (version, rest) = rest
        .split_once(" (revision ")
        .unwrap_or_else(|| panic!("{line}"));
    let (revision, rest) = rest
        .split_once(", built ")
        .unwrap_or_else(|| panic!("{line}"));
    let date = rest.strip_suffix(')').unwrap_or_else(|| panic!("{line}"));
    (version.into(), revision.into(), date.into())
}

#[test]
fn version_flag_prints_version_revision_and_build_date() {
    let (version, revision, date) = version_output();
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    // The build date is RFC 3339 UTC, to the second.
    let b = date.as_bytes();
    assert!(
        b.len() == 20
            && b.iter().enumerate().all(|(i, c)| match i {
                4 | 7 => *c == b'-',
                10 => *c == b'T',
                13 | 16 => *c == b':',
                19 => *c == b'Z',
                _ => c.is_ascii_digit(),
            }),
        "build date {date}"
    );
    // Built from this checkout (CI builds a git clone): git's revision, unless the build was
    // told another one.
    let git = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("git is required");
    assert!(git.status.success(), "not a git checkout: {git:?}");
    let head = String::from_utf8(git.stdout).unwrap().trim().to_string();
    match std::env::var("RSE_GIT_REVISION") {
        Ok(given) if !given.trim().is_empty() => assert!(given.trim().starts_with(&revision)),
        _ => assert_eq!(revision, head, "--version revision"),
    }
}

#[tokio::test]
async fn build_info_metric_matches_the_version_flag() {
    let (version, revision, date) = version_output();
    let redis = RedisServer::start(Server::Redis70);
    let dir = tempfile::tempdir().unwrap();
    let exporter = Exporter::with_url(dir.path(), &redis.url()).start();
    let url = format!("{}/metrics", exporter.base());
    let client = reqwest::Client::new();
    let mut body = None;
    for _ in 0..200 {
        if let Ok(r) = client.get(&url).send().await {
            body = Some(r.text().await.unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(exporter);
    let body = body.expect("the exporter never answered /metrics");
    let line = body
        .lines()
        .find(|l| l.starts_with("redis_streams_exporter_build_info{"))
        .unwrap_or_else(|| panic!("no build_info in:\n{body}"));
    assert_eq!(
        line,
        format!(
            "redis_streams_exporter_build_info{{version=\"{version}\",revision=\"{revision}\",build_date=\"{date}\"}} 1"
        )
    );
}
