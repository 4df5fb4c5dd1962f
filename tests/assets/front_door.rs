//! The README as a front door: short, and what it shows works. It holds at most
//! 300 lines; its Prometheus snippets pass `promtool check config` (with the
//! shipped rules beside them, as it tells the reader to put them) and
//! `promtool check rules`; every metric it names is in the catalog; its alert
//! table names every shipped alert under its severity; every relative link of
//! the README and of `docs/` lands on a file; every key of
//! `config/example.toml` is in `docs/configuration.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use redis_streams_exporter::metrics::catalog;

const README_MAX_LINES: usize = 300;
const RULES: &str = "alerts/redis-streams.rules.yml";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The fenced blocks of `markdown` whose info string is `lang`.
fn blocks(markdown: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match &mut current {
            None if line.trim_start() == format!("```{lang}") => current = Some(String::new()),
            Some(text) if line.trim_start() == "```" => {
                out.push(std::mem::take(text));
                current = None;
            }
            Some(text) => {
                text.push_str(line);
                text.push('\n');
            }
            None => {}
        }
    }
    out
}

/// `promtool ARGS` succeeds; a missing promtool fails the test.
fn promtool(args: &[&str]) {
    let program = std::env::var("PROMTOOL").unwrap_or_else(|_| "promtool".to_string());
    let out = Command::new(&program)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("`{program}`: {e}: install the Debian package prometheus (or set PROMTOOL)")
        });
    assert!(
        out.status.success(),
        "promtool {args:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn readme_is_at_most_300_lines() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines; reference material belongs in docs/"
    );
}

#[test]
fn readme_scrape_config_passes_promtool_with_the_shipped_rules() {
    let readme = read("README.md");
    let configs: Vec<String> = blocks(&readme, "yaml")
        .into_iter()
        .filter(|b| b.contains("scrape_configs:"))
        .collect();
    assert_eq!(configs.len(), 1, "one prometheus.yml snippet: {configs:?}");
    let config = &configs[0];
    assert!(config.contains("rule_files:"), "{config}");
    assert!(
        config.contains("job_name: redis-streams-exporter"),
        "{config}"
    );
    let dir = tempfile::tempdir().unwrap();
    // As the README says: the rules next to prometheus.yml.
    std::fs::copy(
        root().join(RULES),
        dir.path().join("redis-streams.rules.yml"),
    )
    .unwrap();
    let file = dir.path().join("prometheus.yml");
    std::fs::write(&file, config).unwrap();
    promtool(&["check", "config", file.to_str().unwrap()]);
}

#[test]
fn readme_rules_snippet_passes_promtool_and_uses_catalog_metrics() {
    let readme = read("README.md");
    let rules: Vec<String> = blocks(&readme, "yaml")
        .into_iter()
        .filter(|b| b.starts_with("groups:"))
        .collect();
    assert_eq!(rules.len(), 1, "one rules snippet: {rules:?}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yml");
    std::fs::write(&file, &rules[0]).unwrap();
    promtool(&["check", "rules", file.to_str().unwrap()]);
    assert!(!metric_names(&rules[0]).is_empty(), "{}", rules[0]);
}

/// The metric names in `text`: the words that start with `redis_streams_`.
fn metric_names(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("redis_streams_") && w.len() > "redis_streams_".len())
        .map(str::to_string)
        .collect()
}

#[test]
fn metrics_the_readme_names_exist() {
    let names = metric_names(&read("README.md"));
    assert!(names.len() >= 10, "{names:?}");
    let unknown: Vec<&String> = names
        .iter()
        .filter(|n| catalog::find(n).is_none())
        .collect();
    assert!(unknown.is_empty(), "not in the catalog: {unknown:?}");
}

#[test]
fn readme_alert_table_names_every_alert_under_its_severity() {
    let rules: serde_norway::Value = serde_norway::from_str(&read(RULES)).unwrap();
    let mut shipped: BTreeMap<String, String> = BTreeMap::new();
    for group in rules["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            if let Some(alert) = rule["alert"].as_str() {
                let severity = rule["labels"]["severity"].as_str().unwrap();
                shipped.insert(alert.to_string(), severity.to_string());
            }
        }
    }
    let readme = read("README.md");
    let mut listed: BTreeMap<String, String> = BTreeMap::new();
    for line in readme.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, severity, _, alerts, _] = cells[..] else {
            continue;
        };
        if !["critical", "warning", "info"].contains(&severity) {
            continue;
        }
        for alert in alerts.split(", ") {
            let alert = alert.trim_matches('`').to_string();
            assert!(
                listed.insert(alert.clone(), severity.to_string()).is_none(),
                "{alert} listed twice"
            );
        }
    }
    assert_eq!(listed, shipped, "the README's alert table and {RULES}");
}

/// Relative link targets of a markdown text, `](path)` and
/// `](path#anchor)`, as (path, anchor); a link within the page has the empty
/// path.
fn relative_links(markdown: &str) -> Vec<(String, Option<String>)> {
    markdown
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|target| !target.contains("://"))
        .map(|target| match target.split_once('#') {
            Some((path, anchor)) => (path.to_string(), Some(anchor.to_string())),
            None => (target.to_string(), None),
        })
        .collect()
}

/// The anchors GitHub gives a markdown file's headings: lower case, spaces
/// to `-`, punctuation other than `-` and `_` dropped.
fn anchors(markdown: &str) -> BTreeSet<String> {
    markdown
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            l.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

#[test]
fn links_of_the_readme_and_docs_land_on_files_and_headings() {
    let mut files = vec![root().join("README.md"), root().join("bench/HISTORY.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let dir = file.parent().unwrap();
        for (path, anchor) in relative_links(&text) {
            let target = if path.is_empty() {
                file.clone()
            } else {
                dir.join(&path)
            };
            if !target.exists() {
                broken.push(format!("{}: {path}", file.display()));
                continue;
            }
            if let Some(anchor) = anchor.filter(|_| target.extension().is_some_and(|e| e == "md")) {
                let headings = anchors(&std::fs::read_to_string(&target).unwrap());
                if !headings.contains(&anchor) {
                    broken.push(format!("{}: {path}#{anchor}", file.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "links to nothing: {broken:#?}");
}

#[test]
fn the_readme_picture_is_a_small_png() {
    let readme = read("README.md");
    assert!(readme.contains("](docs/images/landing.png)"));
    let png = std::fs::read(root().join("docs/images/landing.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(png.len() < 400 * 1024, "{} bytes", png.len());
}

/// The keys of `config/example.toml`, set or commented out (`# key = …`).
fn example_keys() -> BTreeSet<String> {
    read("config/example.toml")
        .lines()
        .filter_map(|line| {
            let line = line.trim_start_matches('#').trim();
            let (key, _) = line.split_once(" = ")?;
            key.chars()
                .all(|c| c.is_ascii_lowercase() || c == '_')
                .then(|| key.to_string())
        })
        .collect()
}

#[test]
fn configuration_doc_names_every_example_key() {
    let keys = example_keys();
    assert!(keys.len() > 40, "{keys:?}");
    let doc = read("docs/configuration.md");
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| !doc.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "keys not in docs/configuration.md: {missing:?}"
    );
}

#[test]
fn markdown_helpers() {
    let md =
        "a\n```yaml\nx: 1\n```\n```toml\ny = 2\n```\n[l](docs/a.md#b) [w](https://x) [h](#top)\n";
    assert_eq!(blocks(md, "yaml"), ["x: 1\n"]);
    assert_eq!(
        relative_links(md),
        [
            ("docs/a.md".to_string(), Some("b".to_string())),
            (String::new(), Some("top".to_string()))
        ]
    );
    assert!(anchors("## Multi-target: `/probe`\n# A, b\n").contains("multi-target-probe"));
    assert!(anchors("## A fixed budget, and outages").contains("a-fixed-budget-and-outages"));
    assert_eq!(
        metric_names("x{a=\"1\"} redis_streams_group_lag_seconds > 0"),
        BTreeSet::from(["redis_streams_group_lag_seconds".to_string()])
    );
}

/// Every file under `dir` (recursively), or `dir` itself when it is a file.
fn files_under(path: &std::path::Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            files_under(&entry.unwrap().path(), out);
        }
    } else if path.is_file() {
        out.push(path.to_path_buf());
    }
}

/// Whether `line` points at a document that is not in the repository: the
/// product specification, research notes, an issue by number, or the
/// directory they live in outside the checkout.
fn cites_outside(line: &str) -> bool {
    let lower = line.to_lowercase();
    let issue_number = lower.match_indices("issue").any(|(at, word)| {
        let rest = lower[at + word.len()..].trim_start_matches('s');
        rest.strip_prefix(' ')
            .or_else(|| rest.strip_prefix(" #"))
            .and_then(|r| r.chars().next())
            .is_some_and(|c| c.is_ascii_digit())
    });
    line.contains("SPEC")
        || line.contains('§')
        || lower.contains("research")
        || issue_number
        || line.contains("../shared")
}

#[test]
fn nothing_cites_a_document_outside_the_repository() {
    let mut files = Vec::new();
    for place in [
        "src",
        "tests",
        "scripts",
        "docs",
        "README.md",
        "alerts",
        "dashboards",
        "deploy",
        "bench",
        "config",
        ".ci",
        "Dockerfile",
        "docker-compose.yml",
        "debian",
        "Cargo.toml",
        "build.rs",
    ] {
        files_under(&root().join(place), &mut files);
    }
    let this = root().join(file!());
    let mut found = Vec::new();
    for file in files.iter().filter(|f| **f != this) {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue; // not text (the picture)
        };
        for (n, line) in text.lines().enumerate() {
            if cites_outside(line) {
                found.push(format!("{}:{}: {line}", file.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "say the reason, or link into docs/:\n{}",
        found.join("\n")
    );
}

#[test]
fn citations_outside_are_recognised() {
    assert!(cites_outside("// as issue 17 says"));
    assert!(cites_outside("//! Issues 18.1 and 16.3: bounded"));
    assert!(cites_outside("see research notes"));
    assert!(cites_outside("(SPEC section 10)"));
    assert!(!cites_outside("an issue with the server"));
    assert!(!cites_outside("deployment[\"spec\"][\"template\"]"));
}

#[test]
fn readme_configuration_passes_check_config() {
    let readme = read("README.md");
    let configs = blocks(&readme, "toml");
    assert!(!configs.is_empty(), "no toml snippet in the README");
    let dir = tempfile::tempdir().unwrap();
    for (i, config) in configs.iter().enumerate() {
        let file = dir.path().join(format!("readme{i}.toml"));
        std::fs::write(&file, config).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_redis-streams-exporter"))
            .arg("--config")
            .arg(&file)
            .arg("--check-config")
            .env_remove("REDIS_PASSWORD")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{config}\n{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // A secret whose variable is not set where the file is checked is
        // named for the run, not refused.
        if config.contains("password_env = \"REDIS_PASSWORD\"") {
            assert!(
                stdout.contains(
                    "the run needs these environment variables, not set now: targets[0].password_env: REDIS_PASSWORD"
                ),
                "{stdout}"
            );
        }
    }
}
