//! The configuration file as a user meets it: the example loads and equals
//! the defaults, and bad files fail with the file, key path and problem, and
//! exit code 2 from the real binary.

use std::path::PathBuf;
use std::process::Command;

use redis_streams_exporter::config::{self, CliOverrides};

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/example.toml")
}

#[test]
fn example_documents_the_defaults() {
    let loaded =
        config::load(Some(&example()), &CliOverrides::default()).unwrap_or_else(|e| panic!("{e}"));
    let mut defaults = config::load(None, &CliOverrides::default()).unwrap();
    defaults.source = loaded.source.clone();
    assert_eq!(
        loaded, defaults,
        "config/example.toml must show exactly the defaults"
    );
}

#[test]
fn example_mentions_every_key_the_loader_accepts() {
    let text = std::fs::read_to_string(example()).unwrap();
    for key in [
        "listen_address",
        "telemetry_path",
        "config_file",
        "config_file_check_interval",
        "max_connections",
        "max_tls_handshakes",
        "tls_handshake_timeout",
        "header_read_timeout",
        "idle_timeout",
        "max_header_bytes",
        "max_body_bytes",
        "format",
        "level",
        "name",
        "url",
        "username",
        "password_env",
        "password_file",
        "mode",
        "cluster_nodes",
        "sentinels",
        "master_name",
        "sentinel_username",
        "sentinel_password_env",
        "sentinel_password_file",
        "tls_ca_file",
        "tls_cert_file",
        "tls_key_file",
        "tls_server_name",
        "tls_insecure_skip_verify",
        "allowed_targets",
        "target_ttl",
        "max_targets",
        "first_collection_wait",
        "streams",
        "patterns",
        "exclude_streams",
        "include_groups",
        "exclude_groups",
        "max_streams",
        "scan_count",
        "discovery",
        "info",
        "stream",
        "pending_summary",
        "consumers",
        "pending_scan",
        "commands_per_second",
        "pending_entries_per_second",
        "pending_page",
        "command_timeout",
        "pipeline_size",
        "lag_exact_count",
        "ghost_checks_per_scan",
        "max_consumers_per_group",
        "pending_idle_buckets",
        "delivery_count_buckets",
        "window",
        "max_delay",
        "dead_letter",
        "poison_delivery_count",
        "consumer_inactive_after",
        "match",
    ] {
        assert!(
            text.contains(&format!("{key} =")),
            "config/example.toml does not document `{key}`"
        );
    }
}

fn run_binary(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_redis-streams-exporter"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_config_accepts_the_example() {
    let (code, stdout, _) =
        run_binary(&["--config", example().to_str().unwrap(), "--check-config"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("configuration is valid"), "{stdout}");
}

#[test]
fn bad_files_exit_2_with_file_key_and_problem() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[schedule]\nstream = \"often\"\n",
            "schedule.stream: \"often\" is not a duration",
        ),
        (
            "[web]\nlisten = \":1\"\n",
            "web.listen: unknown key `listen`: did you mean `listen_address`?",
        ),
        (
            "[[targets]]\nurl = \"http://localhost\"\n",
            "targets[0].url: must start with redis:// or rediss://",
        ),
        (
            "[[targets]]\nmode = \"ring\"\n",
            "targets[0].mode: must be \"standalone\", \"cluster\" or \"sentinel\"",
        ),
        (
            "[limits]\npending_page = -5\n",
            "limits.pending_page: must be between 1",
        ),
        (
            "[[streams]]\nmax_delay = \"5m\"\n",
            "streams[0].match: is required",
        ),
        (
            "[metrics]\npending_idle_buckets = [\"5m\", \"1m\"]\n",
            "metrics.pending_idle_buckets: buckets must be strictly ascending",
        ),
        (
            "[[targets]]\nmode = \"sentinel\"\n",
            "targets[0].master_name: is required in sentinel mode",
        ),
        ("schedule = 3\n", "schedule: invalid type"),
    ];
    for (i, (text, expected)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let (code, _, stderr) = run_binary(&["--config", path.to_str().unwrap(), "--check-config"]);
        assert_eq!(code, 2, "{text}: {stderr}");
        let want = format!("{}: {expected}", path.display());
        assert!(
            stderr.contains(&want),
            "for {text:?} expected {want:?} in:\n{stderr}"
        );
    }
    let (code, _, stderr) = run_binary(&["--config", "/nonexistent/rse.toml", "--check-config"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("/nonexistent/rse.toml: cannot read the file"),
        "{stderr}"
    );
}

/// `--check-config` lists every problem of a file at once: an unknown key does not hide the
/// bad values beside it (fixing one never reveals the next).
#[test]
fn check_config_lists_unknown_keys_and_bad_values_together() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.toml");
    std::fs::write(
        &path,
        "[schedule]\nstrem = \"5s\"\nstream = \"often\"\n\
         [limits]\npending_page = -5\n[[targets]]\nurl = \"http://x\"\ncolour = \"red\"\n",
    )
    .unwrap();
    let (code, _, stderr) = run_binary(&["--config", path.to_str().unwrap(), "--check-config"]);
    assert_eq!(code, 2, "{stderr}");
    let file = path.display().to_string();
    for expected in [
        "schedule.strem: unknown key `strem`: did you mean `stream`? (line 2)",
        "targets[0].colour: unknown key `colour` (line 8)",
        "schedule.stream: \"often\" is not a duration",
        "limits.pending_page: must be between 1",
        "targets[0].url: must start with redis:// or rediss://",
    ] {
        let want = format!("{file}: {expected}");
        assert!(stderr.contains(&want), "expected {want:?} in:\n{stderr}");
    }
}

#[test]
fn passwords_never_appear_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pw.toml");
    std::fs::write(
        &path,
        "[[targets]]\nurl = \"redis://user:hunter2-secret@host:notaport/0\"\n",
    )
    .unwrap();
    let (code, stdout, stderr) =
        run_binary(&["--config", path.to_str().unwrap(), "--check-config"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("targets[0].url: has an invalid port"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2") && !stdout.contains("hunter2"));
}
