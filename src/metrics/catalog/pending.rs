//! Families of the per-group probes: the pending summary, the PEL scan and
//! the consumers probe.

use super::def::*;

family! {
    PENDING_FAMILIES;

    metric!(
        GROUP_OLDEST_PENDING_AGE,
        "redis_streams_group_oldest_pending_age_seconds",
        Gauge,
        TSG,
        "Redis TIME minus the time part of the smallest pending ID: how long ago the oldest unacknowledged entry was produced. Absent when nothing is pending or IDs are not time-based. Cached by the poller.",
        Source::Custom(Custom::OldestPendingAge)
    );
    metric!(
        GROUP_PENDING_POISON,
        "redis_streams_group_pending_poison",
        Gauge,
        TSG,
        "PEL entries delivered at least poison_delivery_count times: the larger of the last complete PEL scan's count and the count among the 10 oldest pending entries, read at every pending summary (a poison entry is retried forever, so it stays among the oldest). Cached by the poller.",
        Source::Custom(Custom::Poison),
        lean: Lean::Unless(0.0)
    );
    metric!(
        GROUP_PENDING_NACKED,
        "redis_streams_group_pending_nacked",
        Gauge,
        TSG,
        "PEL entries released by XNACK (XINFO STREAM FULL nacked-count, Redis 8.8+): without an owner, delivered first to the next reader that claims them. Read at every pending summary of a stream with entries pending, on servers with XNACK only; absent on the others. Cached by the poller.",
        Source::Custom(Custom::Nacked),
        servers: Nack,
        lean: Lean::Unless(0.0)
    );
    metric!(
        GROUP_PENDING_MAX_IDLE,
        "redis_streams_group_pending_max_idle_seconds",
        Gauge,
        TSG,
        "Largest idle time (since last delivery) over every PEL entry, from the last complete PEL scan: 0 for an empty PEL, absent when no entry has an owner (released by XNACK). Cached by the poller.",
        Source::Scan(|sc| last_scan(sc).and_then(max_idle_seconds)),
        lean: Lean::WhilePending
    );
    metric!(
        GROUP_PENDING_GHOST,
        "redis_streams_group_pending_ghost",
        Gauge,
        TSG,
        "PEL entries whose body no longer exists in the stream (trimmed or deleted): the larger of the last complete PEL scan's count and the count among the 10 oldest pending entries read at every pending summary (those older than the stream's first entry, and the oldest one an XRANGE finds deleted), which sees them before the next scan. Cached by the poller.",
        Source::Custom(Custom::Ghost),
        lean: Lean::Unless(0.0)
    );
    metric!(
        GROUP_PENDING_GHOST_UNCHECKED,
        "redis_streams_group_pending_ghost_unchecked",
        Gauge,
        TSG,
        "PEL entries that may be ghosts (at or below max-deleted-entry-id) but were not checked in the last complete PEL scan because the check budget ran out. Cached by the poller.",
        Source::Scan(|sc| last_scan(sc).map(|s| s.ghost_unchecked as f64)),
        lean: Lean::Unless(0.0)
    );
    metric!(
        GROUP_PENDING_SCAN_TS,
        "redis_streams_group_pending_scan_timestamp_seconds",
        Gauge,
        TSG,
        "When the last complete PEL scan of the group finished, in seconds since the epoch. Cached by the poller.",
        Source::Scan(|sc| last_scan(sc).map(|s| secs(s.finished_at))),
        lean: Lean::WhilePending
    );
    metric!(
        GROUP_PENDING_SCAN_PROGRESS,
        "redis_streams_group_pending_scan_progress_ratio",
        Gauge,
        TSG,
        "Fraction of the PEL read by the PEL scan pass in progress (1 when no pass is unfinished). A value below 1 across several intervals means the PEL is too large for the scan budget. Cached by the poller.",
        Source::Scan(|sc| Some(sc.progress)),
        lean: Lean::Unless(1.0)
    );
    metric!(
        GROUP_PENDING_BY_IDLE,
        "redis_streams_group_pending_by_idle_bucket",
        GaugeHistogram,
        TSGL,
        "PEL entries whose idle time is at most le seconds, from the last complete PEL scan (cumulative buckets); absent for an empty PEL. Cached by the poller.",
        Source::Custom(Custom::PendingByIdle),
        lean: Lean::Never
    );
    metric!(
        GROUP_PENDING_BY_DELIVERY_COUNT,
        "redis_streams_group_pending_by_delivery_count_bucket",
        GaugeHistogram,
        TSGL,
        "PEL entries delivered at most le times, from the last complete PEL scan (cumulative buckets); absent for an empty PEL. Cached by the poller.",
        Source::Custom(Custom::PendingByDeliveryCount),
        lean: Lean::Never
    );
    metric!(
        GROUP_PENDING_ORPHANED,
        "redis_streams_group_pending_orphaned",
        Gauge,
        TSG,
        "PEL entries held by consumers inactive longer than consumer_inactive_after, or, unset, than the group's learned limit: twice its read cadence (at least 4 stream polls) and twice how long its consumers hold entries before reading again; 5 minutes until the cadence is learned (idle on servers before 7.2). Cached by the poller.",
        Source::GroupConsumers(|cs| Some(cs.orphaned as f64)),
        lean: Lean::Unless(0.0)
    );
}
