//! The metric catalog: every metric name, type, HELP text and label set the
//! exporter can emit, in one place.
//!
//! Nothing else in the crate spells a metric name. Rendering refers to these
//! definitions by constant, and the tests check the dashboards and alert rules
//! against [`METRICS`], so a renamed metric cannot silently break them.

/// The Prometheus type of a metric family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    /// A value that can go up and down.
    Gauge,
    /// A value that only goes up (resets when its source resets).
    Counter,
    /// A gauge-like value written without a type. Used only for the two
    /// bucket families whose contract name ends in `_count` and carries an
    /// `le` label: typed as gauges they fail `promtool check metrics`, while
    /// Prometheus stores untyped samples exactly like gauges.
    Untyped,
}

impl MetricType {
    /// The type name as written on a `# TYPE` line.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricType::Gauge => "gauge",
            MetricType::Counter => "counter",
            MetricType::Untyped => "untyped",
        }
    }
}

/// One metric family: its name, type, HELP text and label names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricDef {
    /// Full metric name, with the `redis_streams_` prefix (`process_` for
    /// the process metrics every client library exports).
    pub name: &'static str,
    /// Gauge or counter.
    pub kind: MetricType,
    /// HELP text. Values read from Redis say that the poller caches them.
    pub help: &'static str,
    /// Label names, in the order they are written.
    pub labels: &'static [&'static str],
}

const T: &[&str] = &["target"];
const TS: &[&str] = &["target", "stream"];
const TSG: &[&str] = &["target", "stream", "group"];
const TSGL: &[&str] = &["target", "stream", "group", "le"];
const TSGS: &[&str] = &["target", "stream", "group", "status"];
const TSGCAUSE: &[&str] = &["target", "stream", "group", "cause"];
const TSGC: &[&str] = &["target", "stream", "group", "consumer"];
const TP: &[&str] = &["target", "probe"];
const TCMD: &[&str] = &["target", "command"];

macro_rules! metric {
    ($id:ident, $name:literal, $kind:ident, $labels:expr, $help:literal) => {
        #[doc = $help]
        pub const $id: MetricDef = MetricDef {
            name: $name,
            kind: MetricType::$kind,
            help: $help,
            labels: $labels,
        };
    };
}

// Stream metrics.
metric!(
    STREAM_LENGTH,
    "redis_streams_stream_length",
    Gauge,
    TS,
    "Entries in the stream (XINFO STREAM length). Cached by the poller."
);
metric!(
    STREAM_ENTRIES_ADDED,
    "redis_streams_stream_entries_added_total",
    Counter,
    TS,
    "Entries ever added to the stream (XINFO STREAM entries-added, Redis 7.0+). Cached by the poller."
);
metric!(
    STREAM_FIRST_ENTRY_TS,
    "redis_streams_stream_first_entry_timestamp_seconds",
    Gauge,
    TS,
    "Time part of the first entry ID, in seconds since the epoch. Absent for empty streams and non-time IDs. Cached by the poller."
);
metric!(
    STREAM_LAST_ENTRY_TS,
    "redis_streams_stream_last_entry_timestamp_seconds",
    Gauge,
    TS,
    "Time part of last-generated-id, in seconds since the epoch. Absent for non-time IDs. Cached by the poller."
);
metric!(
    STREAM_GROUPS,
    "redis_streams_stream_groups",
    Gauge,
    TS,
    "Consumer groups of the stream (XINFO STREAM groups), including groups the exporter's group filters exclude. Cached by the poller."
);
metric!(
    STREAM_TIME_BASED_IDS,
    "redis_streams_stream_time_based_ids",
    Gauge,
    TS,
    "1 when the stream's IDs carry wall-clock milliseconds, so ID-derived ages are exported; 0 when they do not (explicit or far-future IDs) and ages are withheld. Cached by the poller."
);
metric!(
    STREAM_DEAD_LETTER_LENGTH,
    "redis_streams_stream_dead_letter_length",
    Gauge,
    TS,
    "Entries in the stream's configured dead-letter stream (XLEN). Cached by the poller."
);
metric!(
    STREAM_DEAD_LETTER_ADDED,
    "redis_streams_stream_dead_letter_entries_added_total",
    Counter,
    TS,
    "Entries ever added to the stream's configured dead-letter stream (Redis 7.0+). Cached by the poller."
);
metric!(
    STREAM_MAX_DELAY,
    "redis_streams_stream_max_delay_seconds",
    Gauge,
    TS,
    "Configured max_delay of the stream: the delay the business tolerates. Alert thresholds derive from it."
);

// Group metrics.
metric!(
    STREAM_DEAD_LETTER_OLDEST_AGE,
    "redis_streams_stream_dead_letter_oldest_age_seconds",
    Gauge,
    TS,
    "Age of the oldest entry in the stream's configured dead-letter stream, by the server's clock (XRANGE dlq - + COUNT 1): how long the oldest dead letter has waited for someone. Absent when it holds none or its IDs are not time-based. Cached by the poller."
);
metric!(
    STREAM_RADIX_TREE_KEYS,
    "redis_streams_stream_radix_tree_keys",
    Gauge,
    TS,
    "Keys of the stream's radix tree (XINFO STREAM radix-tree-keys): its listpack nodes, a free proxy for its size in memory. Cached by the poller."
);
metric!(
    STREAM_RADIX_TREE_NODES,
    "redis_streams_stream_radix_tree_nodes",
    Gauge,
    TS,
    "Nodes of the stream's radix tree (XINFO STREAM radix-tree-nodes). Cached by the poller."
);
metric!(
    STREAM_IDEMPOTENT_IDS_ADDED,
    "redis_streams_stream_idempotent_ids_added_total",
    Counter,
    TS,
    "Idempotency IDs ever added to the stream by idempotent producers (XINFO STREAM iids-added, Redis 8.6+). Absent on servers without it. Cached by the poller."
);
metric!(
    STREAM_IDEMPOTENT_DUPLICATES,
    "redis_streams_stream_idempotent_duplicates_total",
    Counter,
    TS,
    "Adds refused as duplicates of a remembered idempotency ID (XINFO STREAM iids-duplicates, Redis 8.6+): producer retries caught. Cached by the poller."
);
metric!(
    STREAM_IDEMPOTENT_PRODUCERS,
    "redis_streams_stream_idempotent_producers",
    Gauge,
    TS,
    "Producers whose idempotency IDs the stream remembers (XINFO STREAM pids-tracked, Redis 8.6+). Cached by the poller."
);
metric!(
    STREAM_IDEMPOTENT_IDS,
    "redis_streams_stream_idempotent_ids",
    Gauge,
    TS,
    "Idempotency IDs the stream remembers (XINFO STREAM iids-tracked, Redis 8.6+). Cached by the poller."
);

metric!(
    GROUP_LAG,
    "redis_streams_group_lag",
    Gauge,
    TSG,
    "Entries not yet delivered to the group. From XINFO GROUPS lag when sound, corrected after trimming, else estimated (see redis_streams_group_lag_estimated). Absent when unknown. Cached by the poller."
);
metric!(
    GROUP_LAG_ESTIMATED,
    "redis_streams_group_lag_estimated",
    Gauge,
    TSG,
    "1 when redis_streams_group_lag came from the exporter's fallback estimator (Redis reported NULL or no lag), 0 when Redis's count was used. Cached by the poller."
);
metric!(
    GROUP_LAG_SECONDS,
    "redis_streams_group_lag_seconds",
    Gauge,
    TSG,
    "Age of the oldest undelivered entry by the Redis clock (TIME minus the ID's time part); 0 when nothing is undelivered. Absent for non-time IDs. Cached by the poller."
);
metric!(
    GROUP_ENTRIES_READ,
    "redis_streams_group_entries_read_total",
    Counter,
    TSG,
    "Entries read by the group (XINFO GROUPS entries-read), when Redis knows it. Cached by the poller."
);
metric!(
    GROUP_LAST_DELIVERED_TS,
    "redis_streams_group_last_delivered_timestamp_seconds",
    Gauge,
    TSG,
    "Time part of the group's last-delivered-id, in seconds since the epoch. Absent for non-time IDs and 0-0. Cached by the poller."
);
metric!(
    GROUP_CONSUMERS,
    "redis_streams_group_consumers",
    Gauge,
    TSG,
    "Consumers in the group. Cached by the poller."
);
metric!(
    GROUP_PENDING,
    "redis_streams_group_pending",
    Gauge,
    TSG,
    "Entries delivered to the group but not acknowledged (PEL size). Cached by the poller."
);
metric!(
    GROUP_OLDEST_PENDING_AGE,
    "redis_streams_group_oldest_pending_age_seconds",
    Gauge,
    TSG,
    "Redis TIME minus the time part of the smallest pending ID: how long ago the oldest unacknowledged entry was produced. Absent when nothing is pending or IDs are not time-based. Cached by the poller."
);
metric!(
    GROUP_PENDING_MAX_IDLE,
    "redis_streams_group_pending_max_idle_seconds",
    Gauge,
    TSG,
    "Largest idle time (since last delivery) over every PEL entry, from the last complete PEL scan. Cached by the poller."
);
metric!(
    GROUP_PENDING_BY_IDLE,
    "redis_streams_group_pending_by_idle",
    Untyped,
    TSGL,
    "PEL entries whose idle time is at most le seconds, from the last complete PEL scan (cumulative buckets). Cached by the poller."
);
metric!(
    GROUP_PENDING_BY_DELIVERY_COUNT,
    "redis_streams_group_pending_by_delivery_count",
    Untyped,
    TSGL,
    "PEL entries delivered at most le times, from the last complete PEL scan (cumulative buckets). Cached by the poller."
);
metric!(
    GROUP_PENDING_POISON,
    "redis_streams_group_pending_poison",
    Gauge,
    TSG,
    "PEL entries delivered at least poison_delivery_count times, from the last complete PEL scan. Cached by the poller."
);
metric!(
    GROUP_PENDING_GHOST,
    "redis_streams_group_pending_ghost",
    Gauge,
    TSG,
    "PEL entries whose body no longer exists in the stream (trimmed or deleted), from the last complete PEL scan. Cached by the poller."
);
metric!(
    GROUP_PENDING_GHOST_UNCHECKED,
    "redis_streams_group_pending_ghost_unchecked",
    Gauge,
    TSG,
    "PEL entries that may be ghosts (at or below max-deleted-entry-id) but were not checked in the last complete PEL scan because the check budget ran out. Cached by the poller."
);
metric!(
    GROUP_PENDING_ORPHANED,
    "redis_streams_group_pending_orphaned",
    Gauge,
    TSG,
    "PEL entries held by consumers inactive longer than consumer_inactive_after (idle on servers before 7.2). Cached by the poller."
);
metric!(
    GROUP_TRIMMED_UNDELIVERED,
    "redis_streams_group_trimmed_undelivered",
    Gauge,
    TSG,
    "Entries removed from the stream before this group read them: lost messages. Absent when the server gives no way to know. Cached by the poller."
);
metric!(
    GROUP_LOST_ENTRIES,
    "redis_streams_group_lost_entries_total",
    Counter,
    TSGCAUSE,
    "Entries removed from the stream before this group read them, as observed since the exporter started (every increase of entries-added - entries-read - lag, exact figures only; never decreases). cause=trimmed: the group was behind the trimming edge; cause=deleted: XDEL, XDELEX, XACKDEL or a DELREF trim removed unread entries inside its window. Absent where it cannot be known (before Redis 7.0, or entries-read never known)."
);
metric!(
    GROUP_REWINDS,
    "redis_streams_group_rewinds_total",
    Counter,
    TSG,
    "Times the group's last-delivered-id or entries-read moved backwards (XGROUP SETID to an earlier ID, or the group recreated under the same name), as observed since the exporter started."
);
metric!(
    GROUP_AHEAD_OF_STREAM,
    "redis_streams_group_ahead_of_stream",
    Gauge,
    TSG,
    "1 when the group's last-delivered-id is beyond the stream's last generated ID (XGROUP SETID into the future): entries added with smaller IDs will never be delivered to it. Cached by the poller."
);
metric!(
    GROUP_RETENTION_MARGIN,
    "redis_streams_group_retention_margin_seconds",
    Gauge,
    TSG,
    "Time part of the group's first undelivered entry minus that of the stream's first entry, in seconds: how far the trimming edge is from entries this group has not read. Absent when nothing is undelivered or IDs are not time-based. Cached by the poller."
);
metric!(
    GROUP_TRIM_OVERTAKE_ETA,
    "redis_streams_group_trim_overtake_eta_seconds",
    Gauge,
    TSG,
    "At the recent rates (a robust slope over the last polls) at which the stream's first entry and the group's first undelivered entry advance, seconds until trimming reaches entries this group has not read; 0 when it already has. Absent when the edge is not closing in. Cached by the poller."
);
metric!(
    GROUP_DRAIN_ETA,
    "redis_streams_group_drain_eta_seconds",
    Gauge,
    TSG,
    "At the recent rates (a robust slope of the lag over the last polls: consumption minus production), seconds until the lag reaches 0; 0 when there is none. Absent while the lag is not shrinking. Cached by the poller."
);
metric!(
    GROUP_STATUS,
    "redis_streams_group_status",
    Gauge,
    TSGS,
    "1 for the group's current status (ok, idle, lagging, stalled, stopped, data_loss), 0 for the others, evaluated over a sliding window of polls. Cached by the poller."
);
metric!(
    GROUP_PENDING_SCAN_TS,
    "redis_streams_group_pending_scan_timestamp_seconds",
    Gauge,
    TSG,
    "When the last complete PEL scan of the group finished, in seconds since the epoch."
);
metric!(
    GROUP_PENDING_SCAN_PROGRESS,
    "redis_streams_group_pending_scan_progress_ratio",
    Gauge,
    TSG,
    "Fraction of the PEL read by the PEL scan pass in progress (1 when no pass is unfinished). A value below 1 across several intervals means the PEL is too large for the scan budget."
);

// Consumer metrics.
metric!(
    CONSUMER_PENDING,
    "redis_streams_consumer_pending",
    Gauge,
    TSGC,
    "Entries the consumer holds in its PEL. Consumers beyond the per-group cap are summed under consumer=\"__other__\". Cached by the poller."
);
metric!(
    CONSUMER_IDLE,
    "redis_streams_consumer_idle_seconds",
    Gauge,
    TSGC,
    "Seconds since the consumer's last read attempt (since its last successful read before Redis 7.2). Cached by the poller."
);
metric!(
    CONSUMER_INACTIVE,
    "redis_streams_consumer_inactive_seconds",
    Gauge,
    TSGC,
    "Seconds since the consumer's last successful read (Redis 7.2+; absent before, and for consumers that never read). Cached by the poller."
);

// Target metrics.
metric!(
    TARGET_INFO,
    "redis_streams_target_info",
    Gauge,
    &["target", "server", "version", "mode", "maxmemory_policy"],
    "Always 1; labels describe the server (redis or valkey), its version, mode and maxmemory policy. Cached by the poller."
);
metric!(
    TARGET_MAXMEMORY,
    "redis_streams_target_maxmemory_bytes",
    Gauge,
    T,
    "maxmemory from INFO memory (0 means no limit). With an allkeys-* policy Redis may evict a whole stream and its PEL. Cached by the poller."
);
metric!(
    TARGET_USED_MEMORY,
    "redis_streams_target_used_memory_bytes",
    Gauge,
    T,
    "used_memory from INFO memory. Cached by the poller."
);

// Exporter self-metrics.
metric!(
    EXPORTER_TARGET_UP,
    "redis_streams_exporter_target_up",
    Gauge,
    T,
    "1 when the last connection attempt to the target succeeded, else 0 (and no data series of the target are served)."
);
metric!(
    EXPORTER_PROBE_SUCCESS,
    "redis_streams_exporter_probe_success",
    Gauge,
    TP,
    "1 when the probe's last run succeeded, else 0."
);
metric!(
    EXPORTER_PROBE_DURATION,
    "redis_streams_exporter_probe_duration_seconds",
    Gauge,
    TP,
    "Duration of the probe's last run, including time waiting on the rate limit."
);
metric!(
    EXPORTER_PROBE_LAST_SUCCESS,
    "redis_streams_exporter_probe_last_success_timestamp_seconds",
    Gauge,
    TP,
    "When the probe last succeeded, in seconds since the epoch. Values of that probe are as fresh as this."
);
metric!(
    EXPORTER_PROBE_INTERVAL,
    "redis_streams_exporter_probe_interval_seconds",
    Gauge,
    TP,
    "Time from the probe's last run to its next scheduled one: the configured interval, or discovery's current cadence (sized to the keyspace, shorter while retrying a failure). Staleness thresholds derive from it."
);
metric!(
    EXPORTER_PROBE_COMMANDS_NEEDED,
    "redis_streams_exporter_probe_commands_per_second_needed",
    Gauge,
    TP,
    "Commands per second the probe's interval needs: its last run's commands over its interval. When the sum over a target's probes exceeds limits.commands_per_second, the lower-priority probes stretch."
);
metric!(
    EXPORTER_PROBE_ACHIEVED_INTERVAL,
    "redis_streams_exporter_probe_achieved_interval_seconds",
    Gauge,
    TP,
    "Time between the starts of the probe's last two runs: the cadence it achieved (above redis_streams_exporter_probe_interval_seconds when its runs stretch)."
);
metric!(
    EXPORTER_PROBE_PANICS,
    "redis_streams_exporter_probe_panics_total",
    Counter,
    TP,
    "Runs of the probe that panicked (a bug: each is logged with the panic's message). The probe runs again after a backoff of 1 s, doubling up to its interval; the other probes are not affected."
);
metric!(
    EXPORTER_COMMANDS,
    "redis_streams_exporter_redis_commands_total",
    Counter,
    &["target", "command"],
    "Commands sent to the target, by command."
);
metric!(
    EXPORTER_ERRORS,
    "redis_streams_exporter_errors_total",
    Counter,
    &["target", "kind"],
    "Errors while polling the target, by kind (timeout, connection, auth, noperm, wrongtype, nogroup, nosuchkey, protocol, cluster: MOVED redirections and topology failures, ...). ASK during resharding is not an error; it shows as command=\"asking\"."
);
metric!(
    EXPORTER_STREAMS,
    "redis_streams_exporter_streams",
    Gauge,
    T,
    "Streams watched on the target after discovery (at most max_streams)."
);
metric!(
    EXPORTER_STREAMS_DROPPED,
    "redis_streams_exporter_streams_dropped",
    Gauge,
    T,
    "Streams found by discovery but not watched because of max_streams."
);
metric!(
    EXPORTER_RATE_LIMITED,
    "redis_streams_exporter_rate_limited_seconds_total",
    Counter,
    T,
    "Time spent waiting on the target's rate limits (commands_per_second, pending_entries_per_second)."
);
metric!(
    EXPORTER_PENDING_SCANNED,
    "redis_streams_exporter_pending_scan_entries_total",
    Counter,
    T,
    "PEL entries read by the PEL scan."
);
metric!(
    EXPORTER_PAGE_SIZE,
    "redis_streams_exporter_page_size",
    Gauge,
    TCMD,
    "Current COUNT of the paged commands (command=scan: discovery; command=xpending_range: the PEL scan). It halves when a call takes longer than limits.page_target and grows back while calls are quick, between limits.min_page and the configured size."
);
metric!(
    EXPORTER_BUILD_INFO,
    "redis_streams_exporter_build_info",
    Gauge,
    &["version", "revision", "build_date"],
    "Always 1; labels give the exporter's version, source revision and build date (as --version prints them)."
);
metric!(
    EXPORTER_CONFIG_RELOADS,
    "redis_streams_exporter_config_reloads_total",
    Counter,
    &[],
    "Configuration reloads attempted (SIGHUP or POST /-/reload)."
);
metric!(
    EXPORTER_CONFIG_RELOAD_FAILURES,
    "redis_streams_exporter_config_reload_failures_total",
    Counter,
    &[],
    "Configuration reloads rejected because the new file was invalid; the previous configuration stays in force."
);
metric!(
    EXPORTER_CONFIG_LAST_RELOAD_OK,
    "redis_streams_exporter_config_last_reload_successful",
    Gauge,
    &[],
    "1 when the last configuration reload succeeded (or none was attempted), else 0."
);
metric!(
    EXPORTER_LABELS_SHORTENED,
    "redis_streams_exporter_label_values_shortened",
    Gauge,
    &[],
    "Label values in this exposition whose stream, group or consumer name was longer than metrics.max_label_value_bytes, written shortened (first bytes, then \\… and a hash of the whole name)."
);
metric!(
    EXPORTER_TARGET_READY,
    "redis_streams_exporter_target_ready",
    Gauge,
    T,
    "In /probe answers: 1 when the probed target's first discovery and stream poll have succeeded, else 0 (its data series follow in a later scrape)."
);
metric!(
    EXPORTER_PROBED_TARGETS,
    "redis_streams_exporter_probed_targets",
    Gauge,
    &[],
    "Targets polled because /probe asked for them (each until [probe] target_ttl passes without a probe)."
);
metric!(
    EXPORTER_PROBED_TARGETS_MAX,
    "redis_streams_exporter_probed_targets_max",
    Gauge,
    &[],
    "[probe] max_targets: a probe of one target more is refused (503) and counted as over_cap."
);
metric!(
    EXPORTER_PROBED_TARGETS_EXPIRED,
    "redis_streams_exporter_probed_targets_expired_total",
    Counter,
    &[],
    "Probed targets dropped after [probe] target_ttl without a probe (poller stopped, series gone)."
);
metric!(
    EXPORTER_PROBE_REQUESTS,
    "redis_streams_exporter_probe_requests_total",
    Counter,
    &["result"],
    "/probe requests by result: ok, or why it was refused (disabled, bad_target, credentials_in_url, not_allowed, auth_module, over_cap, error); a refused probe dials nothing."
);

// Process metrics, named and described as the Prometheus client libraries
// export them (no `redis_streams_` prefix: dashboards and rules written for
// any exporter use these names). Read from /proc when the exposition is
// rendered, which follows every probe run.
metric!(
    PROCESS_CPU_SECONDS,
    "process_cpu_seconds_total",
    Counter,
    &[],
    "Total user and system CPU time spent in seconds."
);
metric!(
    PROCESS_OPEN_FDS,
    "process_open_fds",
    Gauge,
    &[],
    "Number of open file descriptors."
);
metric!(
    PROCESS_MAX_FDS,
    "process_max_fds",
    Gauge,
    &[],
    "Maximum number of open file descriptors."
);
metric!(
    PROCESS_VIRTUAL_MEMORY,
    "process_virtual_memory_bytes",
    Gauge,
    &[],
    "Virtual memory size in bytes."
);
metric!(
    PROCESS_RESIDENT_MEMORY,
    "process_resident_memory_bytes",
    Gauge,
    &[],
    "Resident memory size in bytes."
);
metric!(
    PROCESS_START_TIME,
    "process_start_time_seconds",
    Gauge,
    &[],
    "Start time of the process since unix epoch in seconds."
);

/// Every metric the exporter can emit, in the order families are rendered.
pub const METRICS: &[MetricDef] = &[
    STREAM_LENGTH,
    STREAM_ENTRIES_ADDED,
    STREAM_FIRST_ENTRY_TS,
    STREAM_LAST_ENTRY_TS,
    STREAM_GROUPS,
    STREAM_TIME_BASED_IDS,
    STREAM_DEAD_LETTER_LENGTH,
    STREAM_DEAD_LETTER_ADDED,
    STREAM_MAX_DELAY,
    STREAM_DEAD_LETTER_OLDEST_AGE,
    STREAM_RADIX_TREE_KEYS,
    STREAM_RADIX_TREE_NODES,
    STREAM_IDEMPOTENT_IDS_ADDED,
    STREAM_IDEMPOTENT_DUPLICATES,
    STREAM_IDEMPOTENT_PRODUCERS,
    STREAM_IDEMPOTENT_IDS,
    GROUP_LAG,
    GROUP_LAG_ESTIMATED,
    GROUP_LAG_SECONDS,
    GROUP_ENTRIES_READ,
    GROUP_LAST_DELIVERED_TS,
    GROUP_CONSUMERS,
    GROUP_PENDING,
    GROUP_OLDEST_PENDING_AGE,
    GROUP_PENDING_MAX_IDLE,
    GROUP_PENDING_BY_IDLE,
    GROUP_PENDING_BY_DELIVERY_COUNT,
    GROUP_PENDING_POISON,
    GROUP_PENDING_GHOST,
    GROUP_PENDING_GHOST_UNCHECKED,
    GROUP_PENDING_ORPHANED,
    GROUP_TRIMMED_UNDELIVERED,
    GROUP_LOST_ENTRIES,
    GROUP_REWINDS,
    GROUP_AHEAD_OF_STREAM,
    GROUP_RETENTION_MARGIN,
    GROUP_TRIM_OVERTAKE_ETA,
    GROUP_DRAIN_ETA,
    GROUP_STATUS,
    GROUP_PENDING_SCAN_TS,
    GROUP_PENDING_SCAN_PROGRESS,
    CONSUMER_PENDING,
    CONSUMER_IDLE,
    CONSUMER_INACTIVE,
    TARGET_INFO,
    TARGET_MAXMEMORY,
    TARGET_USED_MEMORY,
    EXPORTER_TARGET_UP,
    EXPORTER_PROBE_SUCCESS,
    EXPORTER_PROBE_DURATION,
    EXPORTER_PROBE_LAST_SUCCESS,
    EXPORTER_PROBE_INTERVAL,
    EXPORTER_PROBE_COMMANDS_NEEDED,
    EXPORTER_PROBE_ACHIEVED_INTERVAL,
    EXPORTER_PROBE_PANICS,
    EXPORTER_COMMANDS,
    EXPORTER_ERRORS,
    EXPORTER_STREAMS,
    EXPORTER_STREAMS_DROPPED,
    EXPORTER_RATE_LIMITED,
    EXPORTER_PENDING_SCANNED,
    EXPORTER_PAGE_SIZE,
    EXPORTER_BUILD_INFO,
    EXPORTER_CONFIG_RELOADS,
    EXPORTER_CONFIG_RELOAD_FAILURES,
    EXPORTER_CONFIG_LAST_RELOAD_OK,
    EXPORTER_TARGET_READY,
    EXPORTER_PROBED_TARGETS,
    EXPORTER_PROBED_TARGETS_MAX,
    EXPORTER_PROBED_TARGETS_EXPIRED,
    EXPORTER_PROBE_REQUESTS,
    EXPORTER_LABELS_SHORTENED,
    PROCESS_CPU_SECONDS,
    PROCESS_OPEN_FDS,
    PROCESS_MAX_FDS,
    PROCESS_VIRTUAL_MEMORY,
    PROCESS_RESIDENT_MEMORY,
    PROCESS_START_TIME,
];

/// Looks a metric up by its full name.
pub fn find(name: &str) -> Option<&'static MetricDef> {
    METRICS.iter().find(|m| m.name == name)
}
