//! Families of the consumers probe, and each consumer's pending entries
//! from the pending summary: one series per consumer exported by name (the
//! rest summed under `__other__`).

use super::def::*;

family! {
    CONSUMER_FAMILIES;

    metric!(
        GROUP_CONSUMERS_LIVE,
        "redis_streams_group_consumers_live",
        Gauge,
        TSG,
        "Consumers of the group whose last read attempt is within the status window (last successful read before Redis 7.2): the workers alive. The others are idle, and those idle for a day or more are also in redis_streams_group_consumers_stale; redis_streams_group_consumers counts them all. Cached by the poller.",
        Source::GroupConsumers(|cs| Some(cs.live as f64))
    );
    metric!(
        GROUP_CONSUMERS_STALE,
        "redis_streams_group_consumers_stale",
        Gauge,
        TSG,
        "Consumers of the group that have not tried to read for a day or more: workers gone without XGROUP DELCONSUMER (task queues that name every worker process anew leave one per restart). Harmless while they hold nothing; delete them to keep XINFO CONSUMERS short. Cached by the poller.",
        Source::GroupConsumers(|cs| Some(cs.stale as f64)),
        lean: Lean::Unless(0.0)
    );

    metric!(
        CONSUMER_PENDING,
        "redis_streams_consumer_pending",
        Gauge,
        TSGC,
        "Entries the consumer holds in its PEL. Consumers beyond the per-group cap (max_consumers_per_group) are summed under consumer=\"__other__\"; a real consumer of that name gets the label value \\x5f_other__ (its first byte escaped; consumer=\"\\\\x5f_other__\" in PromQL) here and in the other consumer families, so the two never collide. Cached by the poller.",
        Source::Custom(Custom::ConsumerPending),
        lean: Lean::Holders
    );
    metric!(
        GROUP_PENDING_CULPRIT,
        "redis_streams_group_pending_culprit_min_idle_seconds",
        Gauge,
        TSGKIC,
        "One series per consumer holding orphaned (kind=\"orphaned\") or poison (kind=\"poison\") entries of the group, while any does: at most 3 per kind, the holders of the most orphaned entries (under their real names, before consumer_names rewrites) and of the oldest poison entries; nothing while nothing is wrong. id is the oldest such entry the consumer holds, when it is among the group's 10 oldest pending entries (read at every pending summary), else empty; consumer is empty when a poison entry's holder has a name too long to keep. The value is the minimum idle time of a claim that takes those entries and no live work, in whole seconds: the group's orphan limit for orphaned entries (XAUTOCLAIM stream group LIVE_CONSUMER VALUE×1000 ID COUNT 100), the poison entry's idle time when read (XCLAIM stream group DEAD_LETTER_HANDLER VALUE×1000 ID). Cached by the poller.",
        Source::Custom(Custom::Culprit)
    );
    metric!(
        CONSUMER_IDLE,
        "redis_streams_consumer_idle_seconds",
        Gauge,
        TSGC,
        "Seconds since the consumer's last read attempt (since its last successful read before Redis 7.2). Cached by the poller.",
        Source::Consumer(|c| Some(c.idle_ms as f64 / 1000.0)),
        lean: Lean::Holders
    );
    metric!(
        CONSUMER_INACTIVE,
        "redis_streams_consumer_inactive_seconds",
        Gauge,
        TSGC,
        "Seconds since the consumer's last successful read (Redis 7.2+; absent before, and for consumers that never read). Cached by the poller.",
        Source::Consumer(|c| c.inactive_ms.map(|ms| ms as f64 / 1000.0)),
        servers: Inactive,
        lean: Lean::Holders
    );
}
