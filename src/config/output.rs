//! Output shaping ([`MetricsSettings`]): how many consumers and groups are
//! exported, the histogram bounds, and how long a label value may be.

use super::DEFAULT_MAX_LABEL_VALUE_BYTES;

/// Output shaping.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricsSettings {
    /// Consumers exported per group; the rest are summed under `__other__`
    /// (0: only `__other__`). A real consumer named `__other__` is exported
    /// as `\x5f_other__`, so it never collides with the sum.
    pub max_consumers_per_group: usize,
    /// Groups watched per stream, the first by name; the rest are not
    /// watched and are counted (`redis_streams_exporter_groups_dropped`).
    /// At most the rows a reply keeps (`XINFO GROUPS` is cut there). The
    /// default, 200, holds a stream of thousands of per-session groups to
    /// about 2,000 series (docs/cost.md).
    pub max_groups_per_stream: usize,
    /// `le` bounds of `pending_by_idle`, in seconds, ascending; empty: the
    /// family is not exported.
    pub pending_idle_buckets: Vec<f64>,
    /// `le` bounds of `pending_by_delivery_count`, ascending; empty: the
    /// family is not exported.
    pub delivery_count_buckets: Vec<u64>,
    /// Bytes of a name from Redis written in a label value; longer names
    /// are shortened and marked (see `metrics::text`).
    pub max_label_value_bytes: usize,
}

impl Default for MetricsSettings {
    fn default() -> Self {
        MetricsSettings {
            max_consumers_per_group: 50,
            max_groups_per_stream: 200,
            pending_idle_buckets: vec![10.0, 60.0, 300.0, 900.0, 3600.0, 21600.0],
            delivery_count_buckets: vec![1, 2, 3, 5, 10, 20],
            max_label_value_bytes: DEFAULT_MAX_LABEL_VALUE_BYTES,
        }
    }
}
