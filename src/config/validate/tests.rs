//! The validator's unit tests: every problem reported with its key path.

use std::time::Duration;

use super::*;
use crate::config::loading::{ConfigError, from_str};
use crate::config::target::KeyspaceEvents;
use crate::glob::Glob;

fn load(text: &str) -> Result<Config, ConfigError> {
    from_str("test.toml", text, &CliOverrides::default())
}

fn problems(text: &str) -> Vec<String> {
    load(text)
        .unwrap_err()
        .to_string()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn empty_file_watches_local_redis_and_every_stream() {
    let c = load("").unwrap();
    assert_eq!(c.targets.len(), 1);
    let t = &c.targets[0];
    assert_eq!(t.endpoint.to_string(), "redis://127.0.0.1:6379/0");
    assert_eq!(t.patterns, vec![Glob::new("*")]);
    assert_eq!(c.web.listen_address, "0.0.0.0:9763");
    assert_eq!(c.schedule, Schedule::default());
    assert_eq!(c.limits, Limits::default());
}

#[test]
fn unknown_keys_name_the_path() {
    let p = problems("[schedule]\nstrem = \"5s\"\n");
    assert_eq!(p.len(), 1);
    assert!(
        p[0].starts_with("test.toml: schedule.strem: unknown key `strem`: did you mean `stream`?"),
        "{}",
        p[0]
    );
    assert!(p[0].contains("line 2"), "{}", p[0]);
}

/// Unknown keys, values of the wrong type and values the validator
/// refuses, all in one error: fixing one never reveals another.
#[test]
fn unknown_keys_and_bad_values_are_reported_together() {
    let p = problems(
        "[schedule]\nstrem = \"5s\"\nstream = \"soon\"\n\
         [limits]\ncommands_per_second = \"many\"\ncommand_timeout = \"0s\"\n\
         [[targets]]\nurl = \"http://x\"\ncolor = \"blue\"\npatterns = [\"a\", 5]\n",
    );
    let has = |start: &str| p.iter().any(|l| l.starts_with(start));
    assert!(
        has("test.toml: schedule.strem: unknown key `strem`"),
        "{p:?}"
    );
    assert!(
        has("test.toml: targets[0].color: unknown key `color`"),
        "{p:?}"
    );
    assert!(
        has("test.toml: limits.commands_per_second: invalid type: string"),
        "{p:?}"
    );
    assert!(
        has("test.toml: targets[0].patterns[1]: invalid type"),
        "{p:?}"
    );
    // The file's own problems in the order of its lines, then the values.
    let lines: Vec<&String> = p.iter().filter(|l| l.contains("(line ")).collect();
    assert_eq!(lines.len(), 4, "{p:?}");
    assert!(
        lines[0].contains("(line 2)") && lines[3].contains("(line 10)"),
        "{p:?}"
    );
    assert!(
        has("test.toml: schedule.stream: \"soon\" is not a duration"),
        "{p:?}"
    );
    assert!(
        has("test.toml: limits.command_timeout: must be greater than zero"),
        "{p:?}"
    );
    assert!(has("test.toml: targets[0].url: "), "{p:?}");
    // A key left out for its type is not also reported as missing.
    assert_eq!(
        p.iter()
            .filter(|l| l.starts_with("test.toml: limits.commands_per_second:"))
            .count(),
        1,
        "{p:?}"
    );
}

#[test]
fn an_unknown_key_far_from_any_lists_the_keys_on_a_second_line() {
    let p = problems("[[targets]]\nurl = \"redis://x\"\ncolour = \"blue\"\n");
    assert_eq!(
        p[0],
        "test.toml: targets[0].colour: unknown key `colour` (line 3)"
    );
    assert!(p[1].starts_with("  valid keys here: name, url, "), "{p:?}");
    assert!(p[1].contains("patterns"), "{p:?}");
    assert_eq!(p.len(), 2, "{p:?}");
}

#[test]
fn a_misspelt_target_key_suggests_patterns() {
    let p = problems("[[targets]]\npatern = [\"orders:*\"]\n");
    assert_eq!(
        p,
        ["test.toml: targets[0].patern: unknown key `patern`: did you mean `patterns`? (line 2)"]
    );
}

#[test]
fn bad_values_are_all_reported() {
    let p = problems(
        "[schedule]\nstream = \"soon\"\n[limits]\ncommands_per_second = 0\n[[targets]]\nurl = \"http://x\"\n",
    );
    assert!(
        p.iter()
            .any(|l| l.starts_with("test.toml: schedule.stream: \"soon\" is not a duration")),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|l| l.starts_with("test.toml: limits.commands_per_second: must be between 1")),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|l| l == "test.toml: targets[0].url: must start with redis:// or rediss://"),
        "{p:?}"
    );
}

#[test]
fn missing_password_env_is_an_error() {
    let p = problems("[[targets]]\nname = \"a\"\npassword_env = \"RSE_TEST_SURELY_UNSET_VAR\"\n");
    assert_eq!(
        p,
        vec![
            "test.toml: targets[0].password_env: environment variable RSE_TEST_SURELY_UNSET_VAR is not set"
        ]
    );
}

#[test]
fn stream_rules_first_match_wins_over_defaults() {
    let c = load(
        "[stream_defaults]\npoison_delivery_count = 7\n\
         [[streams]]\nmatch = \"orders:*\"\nmax_delay = \"5m\"\ndead_letter = \"orders:dead\"\n\
         [[streams]]\nmatch = \"*\"\nconsumer_inactive_after = \"1m\"\n",
    )
    .unwrap();
    let orders = c.streams.for_stream(b"orders:eu");
    assert_eq!(orders.max_delay, Some(Duration::from_secs(300)));
    assert_eq!(orders.poison_delivery_count, 7);
    assert_eq!(
        orders.dead_letter_for(b"orders:eu"),
        Some(b"orders:dead".to_vec())
    );
    let other = c.streams.for_stream(b"audit");
    assert_eq!(other.max_delay, None);
    assert_eq!(other.consumer_inactive_after, Some(Duration::from_secs(60)));
    assert_eq!(orders.consumer_inactive_after, None, "learned unless set");
}

/// `read_every` (batch consumers) in the defaults and a rule; zero and
/// nonsense are refused with the key named.
#[test]
fn read_every_is_a_positive_duration_per_stream() {
    let c = load(
        "[stream_defaults]\nread_every = \"1h\"\n\
         [[streams]]\nmatch = \"nightly:*\"\nread_every = \"24h\"\n\
         [[streams]]\nmatch = \"*\"\nmax_delay = \"5m\"\n",
    )
    .unwrap();
    assert_eq!(
        c.streams.for_stream(b"nightly:eu").read_every,
        Some(Duration::from_secs(86_400))
    );
    assert_eq!(
        c.streams.for_stream(b"orders").read_every,
        Some(Duration::from_secs(3_600)),
        "from the defaults"
    );
    for bad in ["0s", "soon"] {
        let e = load(&format!(
            "[[streams]]\nmatch = \"*\"\nread_every = \"{bad}\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("streams[0].read_every"), "{bad}: {e}");
    }
}

#[test]
fn include_and_exclude_filters() {
    let c = load(
        "[[targets]]\nname = \"a\"\nexclude_streams = [\"tmp:*\"]\nexclude_groups = [\"debug-*\"]\n\
         [stream_defaults]\nexclude_streams = [\"*:dlq\"]\n\
         [[streams]]\nmatch = \"orders:*\"\ninclude_groups = [\"billing\", \"ship*\"]\nexclude_streams = [\"orders:test:*\"]\n\
         [[streams]]\nmatch = \"audit\"\nmax_delay = \"1m\"\n",
    )
    .unwrap();
    let t = &c.targets[0];
    let watched = |s: &str| t.watches_stream(&c.streams.for_stream(s.as_bytes()), s.as_bytes());
    assert!(watched("orders:eu"));
    assert!(!watched("orders:test:1"), "the rule's exclusion");
    assert!(!watched("tmp:1"), "the target's exclusion");
    assert!(!watched("jobs:dlq"), "the defaults' exclusion");
    // A rule that sets exclude_streams replaces the default's list.
    assert!(watched("orders:dlq"));
    assert!(!watched("audit:dlq") && watched("audit"));
    let group =
        |s: &str, g: &str| t.watches_group(&c.streams.for_stream(s.as_bytes()), g.as_bytes());
    assert!(group("orders:eu", "billing") && group("orders:eu", "shipping"));
    assert!(!group("orders:eu", "analytics"), "not included by the rule");
    assert!(!group("audit", "debug-1"), "excluded by the target");
    assert!(group("audit", "analytics"));
    // Empty bucket lists turn the families off; 0 consumers is allowed.
    let c = load(
        "[metrics]\npending_idle_buckets = []\ndelivery_count_buckets = []\nmax_consumers_per_group = 0\n",
    )
    .unwrap();
    assert!(c.metrics.pending_idle_buckets.is_empty());
    assert!(c.metrics.delivery_count_buckets.is_empty());
    assert_eq!(c.metrics.max_consumers_per_group, 0);
    let p = problems(
        "[[targets]]\nname = \"a\"\nexclude_groups = [\"\"]\n[[streams]]\nmatch = \"x\"\ninclude_groups = [\"\"]\n",
    );
    assert_eq!(
        p,
        vec![
            "test.toml: targets[0].exclude_groups[0]: must not be empty",
            "test.toml: streams[0].include_groups[0]: must not be empty"
        ]
    );
}

#[test]
fn duplicate_target_names_rejected() {
    let p = problems("[[targets]]\nname = \"a\"\n[[targets]]\nname = \"a\"\n");
    assert_eq!(
        p,
        vec!["test.toml: targets[1].name: duplicate target name \"a\""]
    );
}

/// Without a name a target is named after its address (two servers' series never merge), never
/// a constant every exporter would share.
#[test]
fn unnamed_targets_are_named_after_their_address() {
    let names = |text: &str| -> Vec<String> {
        from_str("test.toml", text, &CliOverrides::default())
            .unwrap()
            .targets
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert_eq!(names(""), ["127.0.0.1:6379"]);
    assert_eq!(
        names("[[targets]]\nurl = \"redis://10.0.0.5:6380/3\"\n"),
        ["10.0.0.5:6380/3"]
    );
    assert_eq!(
        names("[[targets]]\nurl = \"redis://[::1]:7000\"\n"),
        ["[::1]:7000"]
    );
    let cli = CliOverrides {
        redis_url: Some("redis://cache.internal:6379/0".into()),
        ..CliOverrides::default()
    };
    let c = from_str("test.toml", "", &cli).unwrap();
    assert_eq!(c.targets[0].name, "cache.internal:6379");
}

#[test]
fn cli_overrides_win() {
    let cli = CliOverrides {
        listen_address: Some("127.0.0.1:9999".into()),
        redis_url: Some("redis://127.0.0.1:7777/3".into()),
        ..CliOverrides::default()
    };
    let c = from_str("f", "[web]\nlisten_address = \":1\"\n", &cli).unwrap();
    assert_eq!(c.web.listen_address, "127.0.0.1:9999");
    assert_eq!(c.targets[0].endpoint.port, 7777);
    assert_eq!(c.targets[0].endpoint.db, 3);
}

#[test]
fn keyspace_events_are_auto_unless_turned_off() {
    let c = load("").unwrap();
    assert_eq!(c.targets[0].keyspace_events, KeyspaceEvents::Auto);
    let c = load(
        "[[targets]]\nname = \"a\"\nkeyspace_events = \"off\"\n\
         [[targets]]\nname = \"b\"\nurl = \"redis://10.0.0.2:6379\"\nkeyspace_events = \"auto\"\n\
         [auth_modules.quiet]\nkeyspace_events = \"off\"\n",
    )
    .unwrap();
    assert_eq!(c.targets[0].keyspace_events, KeyspaceEvents::Off);
    assert_eq!(c.targets[1].keyspace_events, KeyspaceEvents::Auto);
    assert_eq!(c.auth_modules["quiet"].keyspace_events, KeyspaceEvents::Off);
    let p = problems(
        "[[targets]]\nname = \"a\"\nkeyspace_events = \"on\"\n\
         [auth_modules.m]\nkeyspace_events = \"yes\"\n",
    );
    assert_eq!(
        p,
        [
            "test.toml: targets[0].keyspace_events: must be \"auto\" or \"off\", not \"on\"",
            "test.toml: auth_modules.m.keyspace_events: must be \"auto\" or \"off\", not \"yes\"",
        ],
        "{p:?}"
    );
}

/// `trimming`: "any" (the default) or "acked", per stream; anything else
/// is refused with its key.
#[test]
fn trimming_is_any_or_acked() {
    let c = load("[[streams]]\nmatch = \"jobs:*\"\ntrimming = \"acked\"\n").unwrap();
    assert_eq!(c.streams.for_stream(b"jobs:a").trimming, Trimming::Acked);
    assert_eq!(c.streams.for_stream(b"orders").trimming, Trimming::Any);
    let e = load("[[streams]]\nmatch = \"*\"\ntrimming = \"sometimes\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("streams[0].trimming"), "{e}");
}

/// `series` is lean unless a rule says full; `consumer_names` compile
/// anchored, and a replacement naming a group the regex lacks is refused
/// (it would merge every consumer into one name).
#[test]
fn series_and_consumer_names_per_stream() {
    let c = load(
        "[stream_defaults]\n\
         consumer_names = [{ regex = \"(?P<kind>[a-z]+)-[0-9]+\", replacement = \"${kind}\" }]\n\
         [[streams]]\nmatch = \"debug:*\"\nseries = \"full\"\n",
    )
    .unwrap();
    let debug = c.streams.for_stream(b"debug:x");
    let other = c.streams.for_stream(b"orders");
    assert_eq!((debug.series, other.series), (Series::Full, Series::Lean));
    assert_eq!(
        other.renamed_consumer(b"worker-12"),
        Some(b"worker".to_vec())
    );
    assert_eq!(other.renamed_consumer(b"xworker-12y"), None, "anchored");
    assert_eq!(
        debug.renamed_consumer(b"worker-12"),
        Some(b"worker".to_vec())
    );
    let p = problems(
        "[[streams]]\nmatch = \"x\"\nseries = \"medium\"\n\
         consumer_names = [{ regex = \"(a\", replacement = \"b\" }, \
         { regex = \"w-(.*)\", replacement = \"$2\" }, { replacement = \"x\" }]\n",
    );
    assert_eq!(
        p,
        [
            "test.toml: streams[0].series: must be \"lean\" or \"full\", not \"medium\"",
            "test.toml: streams[0].consumer_names[0].regex: is not a regular expression: regex parse error:     (a     ^ error: unclosed group",
            "test.toml: streams[0].consumer_names[1].replacement: refers to $2, which the regex does not capture",
            "test.toml: streams[0].consumer_names[2].regex: is required (a regular expression)",
        ]
    );
}
