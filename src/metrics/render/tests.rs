//! Unit tests of the renderer: what is not in the snapshot is not written,
//! unknown stays unwritten, estimates are marked, and each answer has its
//! own families.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::golden::{exporter, group, stream, targets};
use super::{BuildInfo, render, render_probe_answer};
use crate::metrics::catalog::METRICS;
use crate::snapshot::{ExporterState, Name, TargetSnapshot};

fn name(s: &str) -> Name {
    Arc::from(s.as_bytes())
}

fn text(targets: &[Arc<TargetSnapshot>]) -> String {
    let (out, _) = render(targets, &exporter(), BuildInfo::CURRENT, Vec::new()).unwrap();
    String::from_utf8(out).unwrap()
}

/// The sample lines of family `metric`.
fn samples<'t>(text: &'t str, metric: &str) -> Vec<&'t str> {
    text.lines()
        .filter(|l| l.strip_prefix(metric).is_some_and(|r| r.starts_with('{')))
        .collect()
}

fn one_target(streams: &[(&str, Vec<(&str, crate::snapshot::GroupState)>)]) -> TargetSnapshot {
    TargetSnapshot {
        name: "t".into(),
        up: true,
        ready: true,
        streams: Arc::new(
            streams
                .iter()
                .map(|(s, groups)| {
                    let groups = groups.iter().map(|(g, gs)| (name(g), gs.clone())).collect();
                    (name(s), Arc::new(stream(10, groups)))
                })
                .collect(),
        ),
        ..TargetSnapshot::default()
    }
}

#[test]
fn vanished_streams_and_groups_vanish() {
    let before = one_target(&[
        (
            "a",
            vec![("g", group(1, Some(2))), ("h", group(0, Some(0)))],
        ),
        ("b", vec![("g", group(0, Some(0)))]),
    ]);
    let t = text(&[Arc::new(before)]);
    assert_eq!(samples(&t, "redis_streams_stream_length").len(), 2, "{t}");
    assert_eq!(samples(&t, "redis_streams_group_lag").len(), 3, "{t}");

    let after = one_target(&[("a", vec![("g", group(1, Some(2)))])]);
    let t = text(&[Arc::new(after)]);
    assert_eq!(
        samples(&t, "redis_streams_stream_length"),
        ["redis_streams_stream_length{target=\"t\",stream=\"a\"} 10"]
    );
    assert_eq!(
        samples(&t, "redis_streams_group_lag"),
        ["redis_streams_group_lag{target=\"t\",stream=\"a\",group=\"g\"} 2"]
    );
    assert!(!t.contains("stream=\"b\""), "{t}");
    assert!(!t.contains("group=\"h\""), "{t}");
}

#[test]
fn absent_values_stay_absent() {
    let mut unknown = group(0, None);
    // An unknown lag is never Redis's count: the stream poll marks it so.
    unknown.lag_estimated = true;
    unknown.entries_read = None;
    unknown.lag_seconds = None;
    unknown.lost = None;
    unknown.status = None;
    let mut t = one_target(&[("s", vec![("g", unknown)])]);
    let st = Arc::make_mut(Arc::make_mut(&mut t.streams).get_mut(&name("s")).unwrap());
    st.info.entries_added = None;
    st.info.idempotence.ids = None;
    st.info.idempotence.ids_added = None;
    st.info.idempotence.duplicates = None;
    st.info.idempotence.producers = None;
    st.dead_letter = None;
    let out = text(&[Arc::new(t)]);
    for family in [
        "redis_streams_group_lag",
        "redis_streams_group_lag_seconds",
        "redis_streams_group_entries_read",
        "redis_streams_group_lost_entries_total",
        "redis_streams_group_status",
        "redis_streams_stream_entries_added_total",
        "redis_streams_stream_idempotent_ids",
        "redis_streams_stream_dead_letter_length",
        "redis_streams_group_oldest_pending_age_seconds",
        "redis_streams_consumer_pending",
        "redis_streams_target_info",
    ] {
        assert!(samples(&out, family).is_empty(), "{family} written:\n{out}");
        assert!(
            !out.contains(&format!("# TYPE {family} ")),
            "{family} has a header without samples:\n{out}"
        );
    }
    // What is known is written, 0 included.
    assert_eq!(
        samples(&out, "redis_streams_group_pending"),
        ["redis_streams_group_pending{target=\"t\",stream=\"s\",group=\"g\"} 0"]
    );
    assert_eq!(
        samples(&out, "redis_streams_group_lag_estimated"),
        ["redis_streams_group_lag_estimated{target=\"t\",stream=\"s\",group=\"g\"} 1"]
    );
}

#[test]
fn estimated_lag_is_marked() {
    let mut estimated = group(3, Some(40));
    estimated.lag_estimated = true;
    let t = one_target(&[("s", vec![("est", estimated), ("exact", group(3, Some(5)))])]);
    let out = text(&[Arc::new(t)]);
    assert_eq!(
        samples(&out, "redis_streams_group_lag_estimated"),
        [
            "redis_streams_group_lag_estimated{target=\"t\",stream=\"s\",group=\"est\"} 1",
            "redis_streams_group_lag_estimated{target=\"t\",stream=\"s\",group=\"exact\"} 0",
        ]
    );
    assert_eq!(
        samples(&out, "redis_streams_group_lag"),
        [
            "redis_streams_group_lag{target=\"t\",stream=\"s\",group=\"est\"} 40",
            "redis_streams_group_lag{target=\"t\",stream=\"s\",group=\"exact\"} 5",
        ]
    );
}

#[test]
fn a_target_that_is_down_keeps_only_its_self_metrics() {
    let mut t = one_target(&[("s", vec![("g", group(1, Some(1)))])]);
    t.up = false;
    let out = text(&[Arc::new(t)]);
    assert!(!out.contains("redis_streams_stream_"), "{out}");
    assert!(!out.contains("redis_streams_group_"), "{out}");
    assert_eq!(
        samples(&out, "redis_streams_exporter_target_up"),
        ["redis_streams_exporter_target_up{target=\"t\"} 0"]
    );
}

#[test]
fn a_target_down_within_its_grace_keeps_its_data_with_target_up_0() {
    let mut t = one_target(&[("s", vec![("g", group(1, Some(1)))])]);
    let up = text(&[Arc::new(t.clone())]);
    t.up = false;
    t.held = true;
    let held = text(&[Arc::new(t)]);
    assert_eq!(
        samples(&held, "redis_streams_exporter_target_up"),
        ["redis_streams_exporter_target_up{target=\"t\"} 0"]
    );
    let data = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| {
                l.starts_with("redis_streams_stream_") || l.starts_with("redis_streams_group_")
            })
            .map(String::from)
            .collect()
    };
    assert!(!data(&up).is_empty());
    assert_eq!(data(&held), data(&up), "the same data series, as last read");
}

/// `/metrics` has every family but readiness; a `/probe` answer has the
/// target's families and readiness, and nothing about the exporter.
#[test]
fn each_answer_has_its_families() {
    let targets = targets();
    let metrics = text(&targets);
    let main = targets.iter().find(|t| &*t.name == "main").unwrap();
    let probe = String::from_utf8(render_probe_answer(main, 1_024, Vec::new()).unwrap()).unwrap();
    let families = |text: &str| -> BTreeSet<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .map(String::from)
            .collect()
    };
    let (metrics, probe) = (families(&metrics), families(&probe));
    assert!(!metrics.contains("redis_streams_exporter_target_ready"));
    assert!(probe.contains("redis_streams_exporter_target_ready"));
    for exporter_wide in [
        "redis_streams_exporter_build_info",
        "redis_streams_exporter_config_reloads_total",
        "redis_streams_exporter_probe_requests_total",
        "redis_streams_exporter_label_values_shortened",
        "process_cpu_seconds_total",
    ] {
        assert!(metrics.contains(exporter_wide), "{exporter_wide}");
        assert!(!probe.contains(exporter_wide), "{exporter_wide}");
    }
    assert!(probe.contains("redis_streams_group_lag"));
}

/// With `/probe` off, its families are not written.
#[test]
fn probe_families_only_while_probe_is_on() {
    let out = render(
        &targets(),
        &ExporterState::default(),
        BuildInfo::CURRENT,
        Vec::new(),
    )
    .unwrap()
    .0;
    let out = String::from_utf8(out).unwrap();
    assert!(
        !out.contains("redis_streams_exporter_probed_targets"),
        "{out}"
    );
    assert!(
        !out.contains("redis_streams_exporter_probe_requests_total"),
        "{out}"
    );
    assert!(out.contains("redis_streams_exporter_config_reloads_total 0\n"));
}

#[test]
fn catalog_names_are_unique() {
    let mut seen = BTreeMap::new();
    for (i, m) in METRICS.iter().enumerate() {
        assert_eq!(seen.insert(m.name, i), None, "{} twice", m.name);
    }
}

/// Every family about Redis (not the exporter's own `redis_streams_exporter_`
/// ones) is served from the poller's snapshot, and its HELP says so.
#[test]
fn cached_families_say_so() {
    let silent: Vec<&str> = METRICS
        .iter()
        .filter(|m| m.name.starts_with("redis_streams_"))
        .filter(|m| !m.name.starts_with("redis_streams_exporter_"))
        .filter(|m| !m.help.contains("Cached by the poller"))
        .map(|m| m.name)
        .collect();
    assert!(
        silent.is_empty(),
        "HELP without \"Cached by the poller\": {silent:?}"
    );
}
