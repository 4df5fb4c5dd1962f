//! Families of the consumers probe, and each consumer's pending entries
//! from the pending summary: one series per consumer exported by name (the
//! rest summed under `__other__`).

use super::*;

family! {
    CONSUMER_FAMILIES;

    metric!(
        CONSUMER_PENDING,
        "redis_streams_consumer_pending",
        Gauge,
        TSGC,
        "Entries the consumer holds in its PEL. Consumers beyond the per-group cap (max_consumers_per_group) are summed under consumer=\"__other__\"; a real consumer of that name gets the label value \\x5f_other__ (its first byte escaped; consumer=\"\\\\x5f_other__\" in PromQL) here and in the other consumer families, so the two never collide. Cached by the poller.",
        Source::Custom(Custom::ConsumerPending)
    );
    metric!(
        CONSUMER_IDLE,
        "redis_streams_consumer_idle_seconds",
        Gauge,
        TSGC,
        "Seconds since the consumer's last read attempt (since its last successful read before Redis 7.2). Cached by the poller.",
        Source::Consumer(|c| Some(c.idle_ms as f64 / 1000.0))
    );
    metric!(
        CONSUMER_INACTIVE,
        "redis_streams_consumer_inactive_seconds",
        Gauge,
        TSGC,
        "Seconds since the consumer's last successful read (Redis 7.2+; absent before, and for consumers that never read). Cached by the poller.",
        Source::Consumer(|c| c.inactive_ms.map(|ms| ms as f64 / 1000.0)),
        servers: Inactive
    );
}
