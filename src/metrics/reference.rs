//! `docs/metrics.md`, the metric reference, generated from the catalog: every
//! family's name, type, unit, labels, the endpoints that serve it, the servers
//! that give it, and its HELP text. The tests fail when the file drifts from
//! the catalog, or the catalog from what the exporter serves (the golden
//! expositions); `scripts/regen.sh` rewrites the file.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::catalog::*;

/// Where a family is served: everywhere, or on one endpoint only.
fn endpoints(m: &MetricDef) -> &'static str {
    match m.source {
        Source::Exporter(_) | Source::Process(_) => "`/metrics`",
        Source::Custom(Custom::BuildInfo | Custom::LabelsShortened | Custom::ProbeRequests) => {
            "`/metrics`"
        }
        Source::Custom(Custom::TargetReady) => "`/probe`",
        _ => "both",
    }
}

/// The sections of the reference, by name prefix, in catalog order within.
const SECTIONS: &[(&str, &str)] = &[
    ("redis_streams_stream_", "Streams"),
    ("redis_streams_group_pending", "Pending entries"),
    ("redis_streams_group_oldest_pending", "Pending entries"),
    ("redis_streams_group_", "Consumer groups"),
    ("redis_streams_consumer_", "Consumers"),
    ("redis_streams_target_", "Targets"),
    ("redis_streams_exporter_", "The exporter"),
    ("process_", "The process"),
];

fn section(m: &MetricDef) -> &'static str {
    SECTIONS
        .iter()
        .find(|(prefix, _)| m.name.starts_with(prefix))
        .map_or("Other", |(_, title)| title)
}

/// A table cell: `|` would end it.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The whole reference, from [`METRICS`].
pub(crate) fn markdown() -> String {
    let mut out = String::new();
    out.push_str(
        "# Metrics\n\n\
         <!-- Generated from src/metrics/catalog/ by \
         `scripts/regen.sh`: edit the catalog, not this file. -->\n\n\
         Every family the exporter can serve, from its metric catalog (`src/metrics/catalog/`). \
         A test fails when this page differs from the catalog, or the catalog from what the \
         exporter serves ([`tests/golden/exposition.prom`](../tests/golden/exposition.prom) \
         for `/metrics`, [`tests/golden/probe_answer.prom`](../tests/golden/probe_answer.prom) \
         for `/probe`).\n\n\
         - **Type**: as written on the `# TYPE` line. The two bucket families are untyped: \
         they carry an `le` label, which `promtool check metrics` rejects on gauges; \
         Prometheus stores untyped samples as gauges.\n\
         - **Unit**: from the name's suffix (`_seconds`, `_bytes`, `_ratio`); none is a count \
         or a 0/1 flag.\n\
         - **Served on**: `both` is `/metrics` (configured targets) and `/probe` answers \
         (each probed target's own series).\n\
         - **Servers**: `all` is every supported server (Redis 6.2 and later, Valkey). A value \
         a server does not give is absent, never 0 (see [lag and losses](lag-and-losses.md)).\n\
         - **Lean**: what a stream whose `series` is `\"lean\"` (the default) writes of the \
         family; `series = \"full\"` writes every sample. `always`: every sample; \
         `unless 0` (or `1`): not the value that says nothing happened (no problem counted, \
         a flag down, a scan with nothing left to read); `while pending`: only for groups \
         with pending entries; `long holders`: only for consumers that hold entries longer than \
         their group usually does (half its orphan limit or more: a crashed or stuck worker) \
         or carry a rewritten name (`consumer_names`), the others counted per group; `full only`: not \
         at all. [Cost](cost.md#series) gives what a group costs in each.\n\
         - Labels: `target` (the configured name, or `host:port` for a probed target), \
         `stream`, `group`, `consumer` (per group at most `max_consumers_per_group`, 50 by \
         default: those holding the most entries, then the most recent readers; the rest \
         are summed under `consumer=\"__other__\"`), and `le`, `status`, `reason`, `cause`, \
         `probe`, `command`, `kind` where they apply. Streams per target are capped by \
         `max_streams`.\n\n\
         Values read from Redis are polled in the background and served from a cached \
         snapshot; `redis_streams_exporter_probe_last_success_timestamp_seconds` says how old \
         each probe's data is.\n",
    );
    let mut current = "";
    for m in METRICS {
        let title = section(m);
        if title != current {
            current = title;
            let _ = write!(
                out,
                "\n## {title}\n\n\
                 | name | type | unit | labels | served on | servers | lean | help |\n\
                 |---|---|---|---|---|---|---|---|\n"
            );
        }
        let labels = if m.labels.is_empty() {
            String::new()
        } else {
            format!("`{}`", m.labels.join("`, `"))
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} | {} | {} |",
            m.name,
            m.kind.as_str(),
            m.unit().unwrap_or(""),
            labels,
            endpoints(m),
            m.servers.describe(),
            m.lean.describe(),
            cell(m.help)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn path(relative: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative)
    }

    #[test]
    fn metric_reference_matches_the_catalog() {
        let text = markdown();
        let file = path("docs/metrics.md");
        if let Err(e) = crate::derived::compare_or_rewrite(&file, &text, "the catalog") {
            panic!("{e}");
        }
        for m in METRICS {
            assert!(text.contains(&format!("| `{}` |", m.name)), "{}", m.name);
        }
    }

    /// What the exporter serves (the golden expositions, which the golden
    /// test holds to the renderer) says the same as the catalog: each family
    /// with the catalog's type and HELP, and no family the catalog lacks.
    #[test]
    fn metric_reference_catalog_is_what_is_served() {
        let mut served: BTreeMap<String, (String, String)> = BTreeMap::new();
        for file in [
            "tests/golden/exposition.prom",
            "tests/golden/probe_answer.prom",
        ] {
            let text = std::fs::read_to_string(path(file)).unwrap();
            for line in text.lines() {
                if let Some(rest) = line.strip_prefix("# HELP ") {
                    let (name, help) = rest.split_once(' ').unwrap();
                    served.entry(name.to_string()).or_default().1 = help.to_string();
                } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                    let (name, kind) = rest.split_once(' ').unwrap();
                    served.entry(name.to_string()).or_default().0 = kind.to_string();
                }
            }
        }
        for m in METRICS {
            let (kind, help) = served
                .remove(m.name)
                .unwrap_or_else(|| panic!("{} is not served", m.name));
            assert_eq!(kind, m.kind.as_str(), "{}", m.name);
            assert_eq!(help, m.help.replace('\\', "\\\\"), "{}", m.name);
        }
        assert!(served.is_empty(), "served, not in the catalog: {served:?}");
    }

    /// A HELP text that names a server floor agrees with the family's `servers`.
    #[test]
    fn metric_reference_server_floors_agree_with_help() {
        for m in METRICS {
            for (floor, want) in [
                ("Redis 7.0+", Servers::EntriesRead),
                ("Redis 8.6+", Servers::Idempotent),
                ("Redis 8.8+", Servers::Nack),
                ("(Redis 7.2+", Servers::Inactive),
            ] {
                if m.help.contains(floor) {
                    assert_eq!(m.servers, want, "{}", m.name);
                }
            }
        }
    }

    #[test]
    fn metric_reference_units_and_sections() {
        assert_eq!(GROUP_LAG_SECONDS.unit(), Some("seconds"));
        assert_eq!(PROCESS_CPU_SECONDS.unit(), Some("seconds"));
        assert_eq!(PROCESS_RESIDENT_MEMORY.unit(), Some("bytes"));
        assert_eq!(GROUP_PENDING_SCAN_PROGRESS.unit(), Some("ratio"));
        assert_eq!(GROUP_LAG.unit(), None);
        assert_eq!(section(&GROUP_PENDING_POISON), "Pending entries");
        assert_eq!(section(&GROUP_LAG), "Consumer groups");
        assert!(
            METRICS.iter().all(|m| section(m) != "Other"),
            "a family outside every section"
        );
    }
}
