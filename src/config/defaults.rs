//! The defaults of the settings that have a plain value, as constants:
//! validation falls back on them, and `config/example.toml` mirrors them key
//! by key.

use std::time::Duration;

/// Default Redis URL when no target is configured.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
/// Default cap on streams watched per target.
pub const DEFAULT_MAX_STREAMS: usize = 10_000;
/// Groups watched per target unless `max_groups` says otherwise: at about
/// 10 series a healthy group (lean series), some 250,000 series, what one
/// Prometheus holds comfortably for one target beside others (docs/cost.md).
pub const DEFAULT_MAX_GROUPS: usize = 25_000;
/// Default cap on a name's bytes in a label value: long enough for any
/// name a person chose, short enough that 200 names of 10 KB (each written
/// in some 36 series) cannot turn a scrape into hundreds of megabytes.
pub const DEFAULT_MAX_LABEL_VALUE_BYTES: usize = 1024;
/// Default SCAN COUNT hint. Measured by the exporter's own walks of a
/// million keys on Redis 7.0 (4 walks each, twice): COUNT 500 cost 0.45 ms
/// of Redis time per call and 0.89–0.94 s per walk, with 10–33 calls over
/// 1 ms; COUNT 200 cost 0.2 ms per call and 1.02 s per walk, with 3–9. A
/// little more work per walk buys calls that stay well under SLOWLOG's 1 ms.
pub const DEFAULT_SCAN_COUNT: u32 = 200;

/// Default number of polls in the status window.
pub const DEFAULT_STATUS_WINDOW: usize = 10;
/// Default time `data_loss` holds after the last counted loss: long enough
/// for whoever is paged to see it, even when the group caught up at once.
pub const DEFAULT_DATA_LOSS_HOLD: Duration = Duration::from_secs(3600);

/// Inactivity after which a consumer's entries are orphaned while its
/// group's cadence is not learned and `consumer_inactive_after` is unset.
pub const DEFAULT_CONSUMER_INACTIVE_AFTER: Duration = Duration::from_secs(300);
