//! Families about each target's server and the exporter itself: probe
//! health, client counters, reloads, `/probe`, and the process metrics every
//! client library exports (named as they name them, with no
//! `redis_streams_` prefix, so dashboards and rules written for any exporter
//! use them; read from /proc when the exposition is rendered).

use std::sync::atomic::Ordering::Relaxed;

use super::def::*;

family! {
    EXPORTER_FAMILIES;

    metric!(
        TARGET_INFO,
        "redis_streams_target_info",
        Info,
        &["target", "server", "version", "mode", "maxmemory_policy"],
        "Always 1; labels describe the server (redis or valkey), its version, mode and maxmemory policy. Cached by the poller.",
        Source::Custom(Custom::TargetInfo)
    );
    metric!(
        TARGET_MAXMEMORY,
        "redis_streams_target_maxmemory_bytes",
        Gauge,
        T,
        "maxmemory from INFO memory (0 means no limit). With an allkeys-* policy Redis may evict a whole stream and its PEL. Cached by the poller.",
        Source::Target(|t| t
            .server
            .as_ref()
            .and_then(|i| i.maxmemory)
            .map(|v| v as f64))
    );
    metric!(
        TARGET_USED_MEMORY,
        "redis_streams_target_used_memory_bytes",
        Gauge,
        T,
        "used_memory from INFO memory. Cached by the poller.",
        Source::Target(|t| t
            .server
            .as_ref()
            .and_then(|i| i.used_memory)
            .map(|v| v as f64))
    );
    metric!(
        EXPORTER_TARGET_UP,
        "redis_streams_exporter_target_up",
        Gauge,
        T,
        "1 when the last connection attempt to the target succeeded, else 0. For 3 stream intervals after the target went down (45 s by default) its data series stay served as its last good polls read them (their age: redis_streams_exporter_probe_last_success_timestamp_seconds{probe=\"stream\"}), so that a blip does not reset the for: of alerts; then they are withdrawn until it answers again.",
        Source::TargetHealth(|t| flag(t.up))
    );
    metric!(
        EXPORTER_STREAMS,
        "redis_streams_exporter_streams",
        Gauge,
        T,
        "Streams watched on the target after discovery (at most max_streams).",
        Source::TargetHealth(|t| t.streams_watched.map(|n| n as f64))
    );
    metric!(
        EXPORTER_STREAMS_DROPPED,
        "redis_streams_exporter_streams_dropped",
        Gauge,
        T,
        "Streams found by discovery but not watched because of max_streams.",
        Source::TargetHealth(|t| t.streams_dropped.map(|n| n as f64))
    );
    metric!(
        EXPORTER_GROUPS_DROPPED,
        "redis_streams_exporter_groups_dropped",
        Gauge,
        T,
        "Consumer groups not watched because of max_groups_per_stream or the target's max_groups, over the streams watched (each stream keeps its first groups by name, up to its share).",
        Source::Target(|t| Some(t.streams.values().map(|s| s.groups_dropped as f64).sum()))
    );
    metric!(
        EXPORTER_RATE_LIMITED,
        "redis_streams_exporter_rate_limited_seconds_total",
        Counter,
        T,
        "Time spent waiting on the target's rate limits (commands_per_second, pending_entries_per_second), waits under way included.",
        Source::TargetHealth(|t| Some(t.stats.rate_limited_seconds))
    );
    metric!(
        EXPORTER_PENDING_SCANNED,
        "redis_streams_exporter_pending_scan_entries_total",
        Counter,
        T,
        "PEL entries read by the PEL scan.",
        Source::TargetHealth(|t| Some(t.stats.pending_scanned as f64))
    );
    metric!(
        EXPORTER_KEYSPACE_EVENTS,
        "redis_streams_exporter_keyspace_events_total",
        Counter,
        T,
        "Keyevent messages received from the target (keyspace_events = \"auto\"; the server publishes them only when its notify-keyspace-events has E, t or A, and g). Absent when keyspace_events = \"off\".",
        Source::TargetHealth(|t| t.stats.keyspace_events.map(|k| k.received as f64))
    );
    metric!(
        EXPORTER_KEYSPACE_EVENTS_DROPPED,
        "redis_streams_exporter_keyspace_events_dropped_total",
        Counter,
        T,
        "Keyevent messages received and dropped because the queue before their handler was full (4,096 events or 4 MiB of keys): their streams waited for their scheduled poll, as with keyspace_events = \"off\". Absent when keyspace_events = \"off\".",
        Source::TargetHealth(|t| t.stats.keyspace_events.map(|k| k.dropped as f64))
    );
    metric!(
        EXPORTER_EXTRA_POLLS,
        "redis_streams_exporter_extra_polls_total",
        Counter,
        T,
        "Extra stream polls keyspace events and client-tracking invalidations asked for and the exporter ran. They run at the front of the command budget but may spend only a fifth of commands_per_second; see redis_streams_exporter_extra_polls_skipped_total. Absent when keyspace_events and client_tracking are both \"off\".",
        Source::TargetHealth(|t| t.stats.extra_polls.map(|k| k.run as f64))
    );
    metric!(
        EXPORTER_EXTRA_POLLS_SKIPPED,
        "redis_streams_exporter_extra_polls_skipped_total",
        Counter,
        T,
        "Extra stream polls keyspace events and invalidations asked for while the extra polls' share of commands_per_second (a fifth) was spent: those streams waited for their scheduled poll, so the scheduled probes keep their schedule whatever the event rate. Absent when keyspace_events and client_tracking are both \"off\".",
        Source::TargetHealth(|t| t.stats.extra_polls.map(|k| k.skipped as f64))
    );
    metric!(
        EXPORTER_KEYSPACE_EVENTS_ACTIVE,
        "redis_streams_exporter_keyspace_events_active",
        Gauge,
        T,
        "1 while the keyspace-event subscription is up on every primary of the target and answers, else 0. Subscribed does not mean the server publishes: see redis_streams_exporter_keyspace_events_total. Absent when keyspace_events = \"off\".",
        Source::TargetHealth(|t| t.stats.keyspace_events.and_then(|k| flag(k.active)))
    );
    metric!(
        EXPORTER_CLIENT_TRACKING_ACTIVE,
        "redis_streams_exporter_client_tracking_active",
        Gauge,
        T,
        "1 while every primary of the target announces changes to the streams the exporter read (client_tracking = \"auto\": CLIENT TRACKING on the poll connection, invalidations to a subscribed connection), so a quiet stream is read again only once it changed or at its safety read; 0 while a node refused it (the ACL or a managed service without CLIENT TRACKING or CLIENT ID: every stream is polled every time, as with client_tracking = \"off\") or a connection is being opened again. Absent when client_tracking = \"off\".",
        Source::TargetHealth(|t| t.stats.client_tracking.and_then(|k| flag(k.active)))
    );
    metric!(
        EXPORTER_CLIENT_TRACKING_INVALIDATIONS,
        "redis_streams_exporter_client_tracking_invalidations_total",
        Counter,
        T,
        "Invalidations received: one per stream read and then changed (XADD, XDEL, XTRIM, DEL, ...), until it is read again. Absent when client_tracking = \"off\".",
        Source::TargetHealth(|t| t.stats.client_tracking.map(|k| k.invalidations as f64))
    );
    metric!(
        EXPORTER_CLIENT_TRACKING_DROPPED,
        "redis_streams_exporter_client_tracking_invalidations_dropped_total",
        Counter,
        T,
        "Invalidations received and dropped because the queue before their handler was full (4,096 messages or 4 MiB of keys): every quiet stream of the target was read again at its next poll. Absent when client_tracking = \"off\".",
        Source::TargetHealth(|t| t.stats.client_tracking.map(|k| k.dropped as f64))
    );
    metric!(
        EXPORTER_PAGE_SIZE,
        "redis_streams_exporter_page_size",
        Gauge,
        TCMD,
        "Current COUNT of the paged commands (command=scan: discovery; command=xpending_range: the PEL scan). It shrinks in proportion (by half at most) when a call takes longer than limits.page_target and grows back while calls are quick, between limits.min_page and the configured size.",
        Source::Custom(Custom::PageSizes)
    );
    metric!(
        EXPORTER_PROBE_SUCCESS,
        "redis_streams_exporter_probe_success",
        Gauge,
        TP,
        "1 when the probe's last run succeeded, else 0.",
        Source::Probe(|p| flag(p.success))
    );
    metric!(
        EXPORTER_PROBE_DURATION,
        "redis_streams_exporter_probe_duration_seconds",
        Gauge,
        TP,
        "Duration of the probe's last run, including time waiting on the rate limit.",
        Source::Probe(|p| Some(p.duration.as_secs_f64()))
    );
    metric!(
        EXPORTER_PROBE_LAST_SUCCESS,
        "redis_streams_exporter_probe_last_success_timestamp_seconds",
        Gauge,
        TP,
        "When the probe last succeeded, in seconds since the epoch. Values of that probe are as fresh as this.",
        Source::Probe(|p| p.last_success.map(secs))
    );
    metric!(
        EXPORTER_PROBE_INTERVAL,
        "redis_streams_exporter_probe_interval_seconds",
        Gauge,
        TP,
        "Time from the probe's last run to its next scheduled one: the configured interval, or discovery's current cadence (sized to the keyspace, shorter while retrying a failure). Staleness thresholds derive from it.",
        Source::Probe(|p| p.interval.map(|d| d.as_secs_f64()))
    );
    metric!(
        EXPORTER_PROBE_COMMANDS_NEEDED,
        "redis_streams_exporter_probe_commands_per_second_needed",
        Gauge,
        TP,
        "Commands per second the probe's interval needs: its last run's commands over its interval (less the first reads of idle groups' consumers, which later runs spread over five). When the sum over a target's probes exceeds limits.commands_per_second, the lower-priority probes stretch.",
        Source::Probe(|p| p.commands_needed_per_second())
    );
    metric!(
        EXPORTER_PROBE_ACHIEVED_INTERVAL,
        "redis_streams_exporter_probe_achieved_interval_seconds",
        Gauge,
        TP,
        "Time between the starts of the probe's last two runs: the cadence it achieved (above redis_streams_exporter_probe_interval_seconds when its runs stretch).",
        Source::Probe(|p| p.achieved_interval.map(|d| d.as_secs_f64()))
    );
    metric!(
        EXPORTER_PROBE_PANICS,
        "redis_streams_exporter_probe_panics_total",
        Counter,
        TP,
        "Runs of the probe that panicked (a bug: each is logged with the panic's message). The probe runs again after a backoff of 1 s, doubling up to its interval; the other probes are not affected.",
        Source::Probe(|p| Some(p.panics as f64))
    );
    metric!(
        EXPORTER_COMMANDS,
        "redis_streams_exporter_redis_commands_total",
        Counter,
        &["target", "command"],
        "Commands sent to the target, by command.",
        Source::Custom(Custom::Commands)
    );
    metric!(
        EXPORTER_ERRORS,
        "redis_streams_exporter_errors_total",
        Counter,
        &["target", "kind"],
        "Errors while polling the target, by kind (timeout, connection, auth, noperm, wrongtype, nogroup, nosuchkey, protocol, cluster: MOVED redirections and topology failures, ...). ASK during resharding is not an error; it shows as command=\"asking\".",
        Source::Custom(Custom::Errors)
    );
    metric!(
        EXPORTER_RECONNECTS,
        "redis_streams_exporter_reconnects_total",
        Counter,
        &["target", "reason"],
        "Connections to the target's servers opened again after one was dropped, by why it went: closed (the server or something between closed it: an idle timeout, a proxy's idle limit, CLIENT KILL, a restart), timeout (no answer within command_timeout), protocol (a reply that could not be trusted). A connection found closed by a read-only command is opened again and the command sent once more within the same poll; only a failure on the fresh connection fails the poll. Connections idle for 2 s get a PING, which keeps them open under a server timeout of 3 s or more.",
        Source::Custom(Custom::Reconnects)
    );
    metric!(
        EXPORTER_ITEMS_SKIPPED,
        "redis_streams_exporter_items_skipped_total",
        Counter,
        &["target", "kind"],
        "Items left out of the target's replies because a name in them was longer than the exporter keeps (64 KiB), by kind: group (a consumer group of XINFO GROUPS; the stream's other groups stay), consumer (of XINFO CONSUMERS; also the consumers past the 10,000 rows a reply keeps, whose pending entries are summed under consumer=\"__other__\"), key (found by discovery, not watched), event (a keyspace event, which then asks for no poll). Counted at every reply that leaves one out.",
        Source::Custom(Custom::ItemsSkipped)
    );
    metric!(
        EXPORTER_TARGET_READY,
        "redis_streams_exporter_target_ready",
        Gauge,
        T,
        "In /probe answers: 1 when the probed target's first discovery and stream poll have succeeded, else 0 (its data series follow in a later scrape).",
        Source::Custom(Custom::TargetReady)
    );
    metric!(
        EXPORTER_SERIES,
        "redis_streams_exporter_series",
        Gauge,
        T,
        "Series of the target in this exposition (or /probe answer): its streams', groups' and consumers' series, and the exporter's own series about it, this one included. What the target costs Prometheus; docs/cost.md gives the cost of a group in lean and full series.",
        Source::Custom(Custom::Series)
    );
    metric!(
        EXPORTER_BUILD_INFO,
        "redis_streams_exporter_build_info",
        Info,
        &["version", "revision", "build_date"],
        "Always 1; labels give the exporter's version, source revision and build date (as --version prints them).",
        Source::Custom(Custom::BuildInfo)
    );
    metric!(
        EXPORTER_CONFIG_RELOADS,
        "redis_streams_exporter_config_reloads_total",
        Counter,
        &[],
        "Configuration reloads attempted (SIGHUP or POST /-/reload).",
        Source::Exporter(|e| Some(e.reloads.load(Relaxed) as f64))
    );
    metric!(
        EXPORTER_CONFIG_RELOAD_FAILURES,
        "redis_streams_exporter_config_reload_failures_total",
        Counter,
        &[],
        "Configuration reloads rejected because the new file was invalid; the previous configuration stays in force.",
        Source::Exporter(|e| Some(e.reload_failures.load(Relaxed) as f64))
    );
    metric!(
        EXPORTER_CONFIG_LAST_RELOAD_OK,
        "redis_streams_exporter_config_last_reload_successful",
        Gauge,
        &[],
        "1 when the last configuration reload succeeded (or none was attempted), else 0.",
        Source::Exporter(|e| flag(e.last_reload_ok.load(Relaxed)))
    );
    metric!(
        EXPORTER_LABELS_SHORTENED,
        "redis_streams_exporter_label_values_shortened",
        Gauge,
        &[],
        "Label values in this exposition whose stream, group or consumer name was longer than metrics.max_label_value_bytes, written shortened (first bytes, then \\… and a hash of the whole name).",
        Source::Custom(Custom::LabelsShortened)
    );
    metric!(
        EXPORTER_PROBED_TARGETS,
        "redis_streams_exporter_probed_targets",
        Gauge,
        &[],
        "Targets polled because /probe asked for them (each until [probe] target_ttl passes without a probe).",
        Source::Exporter(|e| probe_on(e, e.multi_target.targets.load(Relaxed)))
    );
    metric!(
        EXPORTER_PROBED_TARGETS_MAX,
        "redis_streams_exporter_probed_targets_max",
        Gauge,
        &[],
        "[probe] max_targets: a probe of one target more is refused (503) and counted as over_cap.",
        Source::Exporter(|e| probe_on(e, e.multi_target.max_targets.load(Relaxed)))
    );
    metric!(
        EXPORTER_PROBED_TARGETS_EXPIRED,
        "redis_streams_exporter_probed_targets_expired_total",
        Counter,
        &[],
        "Probed targets dropped after [probe] target_ttl without a probe (poller stopped, series gone).",
        Source::Exporter(|e| probe_on(e, e.multi_target.expired.load(Relaxed)))
    );
    metric!(
        EXPORTER_PROBE_REQUESTS,
        "redis_streams_exporter_probe_requests_total",
        Counter,
        &["result"],
        "/probe requests by result: ok, or why it was refused (disabled, bad_target, credentials_in_url, not_allowed, auth_module, over_cap, error); a refused probe dials nothing.",
        Source::Custom(Custom::ProbeRequests)
    );
    metric!(
        PROCESS_CPU_SECONDS,
        "process_cpu_seconds_total",
        Counter,
        &[],
        "Total user and system CPU time spent in seconds.",
        Source::Process(|p| p.cpu_seconds)
    );
    metric!(
        PROCESS_OPEN_FDS,
        "process_open_fds",
        Gauge,
        &[],
        "Number of open file descriptors.",
        Source::Process(|p| p.open_fds.map(|v| v as f64))
    );
    metric!(
        PROCESS_MAX_FDS,
        "process_max_fds",
        Gauge,
        &[],
        "Maximum number of open file descriptors.",
        Source::Process(|p| p.max_fds.map(|v| v as f64))
    );
    metric!(
        PROCESS_VIRTUAL_MEMORY,
        "process_virtual_memory_bytes",
        Gauge,
        &[],
        "Virtual memory size in bytes.",
        Source::Process(|p| p.virtual_memory_bytes.map(|v| v as f64))
    );
    metric!(
        PROCESS_RESIDENT_MEMORY,
        "process_resident_memory_bytes",
        Gauge,
        &[],
        "Resident memory size in bytes.",
        Source::Process(|p| p.resident_memory_bytes.map(|v| v as f64))
    );
    metric!(
        PROCESS_START_TIME,
        "process_start_time_seconds",
        Gauge,
        &[],
        "Start time of the process since unix epoch in seconds.",
        Source::Process(|p| p.start_time_seconds)
    );
}
