//! Replies of the stream commands, decoded into plain data (the decoders
//! are the Redis client's, in `backend::reply`): what the probes, the lag
//! arithmetic, the loss ledger and the snapshot share, one struct per reply.
//! A field Redis sends as nil, or does not send at all (older servers), is
//! `None`: unknown stays unknown. Beside `XINFO STREAM`'s struct, the
//! arithmetic its counters give, written once: the entries removed, the
//! unread entries gone (entries-added − entries-read − lag) and the bounds
//! of a group's lag.

use super::id::StreamId;

/// The most rows of a list without a `COUNT` (groups, consumers, the
/// pending summary's holders) a decoded reply holds: the client cuts the
/// list there as it arrives, and the configuration caps what may ask for
/// more (`max_groups_per_stream`).
pub const ROWS_KEPT: u64 = 10_000;

/// `XINFO STREAM key` (summary form).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StreamInfo {
    /// XLEN.
    pub length: u64,
    /// Number of consumer groups.
    pub groups: u64,
    /// Largest ID ever generated (survives deletion of the last entry).
    pub last_generated_id: StreamId,
    /// ID of the first entry; `None` when the stream is empty.
    pub first_entry_id: Option<StreamId>,
    /// ID of the last entry; `None` when the stream is empty.
    pub last_entry_id: Option<StreamId>,
    /// Entries ever added (7.0+).
    pub entries_added: Option<u64>,
    /// Largest ID removed by XDEL (7.0+); `0-0` when none.
    pub max_deleted_entry_id: Option<StreamId>,
    /// Cached first non-deleted ID (7.0+).
    pub recorded_first_entry_id: Option<StreamId>,
    /// Nodes of the stream's radix tree (listpacks), a free size proxy.
    pub radix_tree_keys: Option<u64>,
    /// Nodes of the radix tree, inner ones included.
    pub radix_tree_nodes: Option<u64>,
    /// Idempotent-producer tracking (Redis 8.6+, `XCFGSET`).
    pub idempotence: Idempotence,
}

impl StreamInfo {
    /// Entries removed in all, trimmed or deleted: entries-added − length
    /// (7.0+).
    pub fn removed(&self) -> Option<u64> {
        self.entries_added?.checked_sub(self.length)
    }

    /// The counters' figure of a group that has read `entries_read` entries
    /// and has `lag` undelivered: entries-added − entries-read − lag, the
    /// entries it will never read because a trim or a deletion removed them
    /// first (on servers whose entries-read keeps gaps out, also the gaps
    /// it skipped). `None` before 7.0, or when the figures contradict each
    /// other. Meaningful only when all three are exact.
    pub fn unread_gone(&self, entries_read: u64, lag: u64) -> Option<u64> {
        self.entries_added?
            .checked_sub(entries_read)?
            .checked_sub(lag)
    }

    /// The bounds the counters prove for the undelivered entries of a group
    /// that has read `entries_read` entries: at least length − min(length,
    /// entries-read) (no more than that many retained entries can be among
    /// those it read), and, when entries-added is known and not below
    /// entries-read, at most min(length, entries-added − entries-read)
    /// (entries-read never exceeds the entries added up to the group's
    /// position); `None` for that bound otherwise.
    pub fn lag_bounds(&self, entries_read: u64) -> (u64, Option<u64>) {
        let length = self.length;
        let low = length - length.min(entries_read);
        let high = self
            .entries_added
            .and_then(|added| added.checked_sub(entries_read))
            .map(|after| length.min(after));
        (low, high)
    }
}

/// The idempotent-producer fields of `XINFO STREAM` (Redis 8.6+); each is
/// `None` on servers that do not report it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Idempotence {
    /// `pids-tracked`: producers whose IDs are remembered.
    pub producers: Option<u64>,
    /// `iids-tracked`: idempotency IDs remembered.
    pub ids: Option<u64>,
    /// `iids-added`: idempotency IDs ever added.
    pub ids_added: Option<u64>,
    /// `iids-duplicates`: adds refused as duplicates.
    pub duplicates: Option<u64>,
}

/// One group of `XINFO GROUPS key`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupInfo {
    /// Group name (binary-safe).
    pub name: Vec<u8>,
    /// Consumers in the group.
    pub consumers: u64,
    /// PEL size.
    pub pending: u64,
    /// Last ID delivered to the group.
    pub last_delivered_id: StreamId,
    /// Entries read; `None` when nil (unknown) or before 7.0.
    pub entries_read: Option<u64>,
    /// Redis's lag; `None` when nil (unknown) or before 7.0.
    pub lag: Option<u64>,
}

/// One consumer of `XINFO CONSUMERS key group`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsumerInfo {
    /// Consumer name (binary-safe).
    pub name: Vec<u8>,
    /// Entries it holds.
    pub pending: u64,
    /// Milliseconds since its last read attempt (last success before 7.2).
    pub idle_ms: u64,
    /// Milliseconds since its last successful read (7.2+). `None` before
    /// 7.2 and when Redis reports -1 (never succeeded; see `never_active`).
    pub inactive_ms: Option<u64>,
    /// Redis reported `inactive` -1: the consumer never read successfully.
    pub never_active: bool,
}

/// One group of `XINFO STREAM key FULL` as the exporter reads it: its
/// name and, on servers with `XNACK` (Redis 8.8+), the pending entries
/// `XNACK` released.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupNacks {
    /// Group name (binary-safe).
    pub name: Vec<u8>,
    /// `nacked-count`; `None` where the server does not report it.
    pub nacked: Option<u64>,
}

/// `XPENDING key group` (summary form).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PendingSummary {
    /// PEL size.
    pub count: u64,
    /// Smallest pending ID.
    pub min_id: Option<StreamId>,
    /// Largest pending ID.
    pub max_id: Option<StreamId>,
    /// Consumers holding entries (their names are not kept: nothing reads
    /// them).
    pub holders: u64,
}

/// One row of the extended `XPENDING key group start end count`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingEntry {
    /// Entry ID.
    pub id: StreamId,
    /// Released by XNACK (Redis 8.8+): no consumer holds it, and its idle
    /// time means nothing. (The holder's name is not kept: nothing reads
    /// it.)
    pub released: bool,
    /// Milliseconds since last delivery.
    pub idle_ms: u64,
    /// Times delivered.
    pub deliveries: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(length: u64, entries_added: Option<u64>) -> StreamInfo {
        StreamInfo {
            length,
            entries_added,
            ..StreamInfo::default()
        }
    }

    #[test]
    fn removed_is_entries_added_less_the_length() {
        let cases = [
            // length, entries-added, removed
            (10, Some(10), Some(0)),
            (10, Some(25), Some(15)),
            (0, Some(7), Some(7)),
            (10, None, None),
            (10, Some(9), None),
        ];
        for (length, added, want) in cases {
            assert_eq!(stream(length, added).removed(), want, "{length} {added:?}");
        }
    }

    #[test]
    fn unread_gone_is_entries_added_less_entries_read_less_the_lag() {
        let cases = [
            // entries-added, entries-read, lag, unread gone
            (Some(100), 60, 40, Some(0)),
            (Some(100), 60, 30, Some(10)),
            (Some(100), 0, 0, Some(100)),
            (None, 60, 30, None),
            // Figures that contradict each other prove nothing.
            (Some(100), 120, 0, None),
            (Some(100), 60, 50, None),
        ];
        for (added, read, lag, want) in cases {
            let s = stream(50, added);
            assert_eq!(s.unread_gone(read, lag), want, "{added:?} {read} {lag}");
        }
    }

    #[test]
    fn lag_bounds_follow_the_counters() {
        let cases = [
            // length, entries-added, entries-read, (at least, at most)
            (100, Some(1_000), 900, (0, Some(100))),
            (100, Some(1_000), 950, (0, Some(50))),
            (100, Some(1_000), 0, (100, Some(100))),
            (100, Some(100), 10, (90, Some(90))),
            (100, Some(1_000), 40, (60, Some(100))),
            (0, Some(10), 5, (0, Some(0))),
            // No entries-added, or one below entries-read: no upper bound.
            (100, None, 40, (60, None)),
            (100, Some(30), 40, (60, None)),
        ];
        for (length, added, read, want) in cases {
            let s = stream(length, added);
            assert_eq!(s.lag_bounds(read), want, "{length} {added:?} {read}");
        }
    }
}
