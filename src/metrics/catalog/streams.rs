//! Families of the stream poll: one series per watched stream, and one per
//! group the stream poll knows.

use super::def::*;

family! {
    STREAM_FAMILIES;

    metric!(
        STREAM_LENGTH,
        "redis_streams_stream_length",
        Gauge,
        TS,
        "Entries in the stream (XINFO STREAM length). Cached by the poller.",
        Source::Stream(|s| Some(s.info.length as f64))
    );
    metric!(
        STREAM_ENTRIES_ADDED,
        "redis_streams_stream_entries_added_total",
        Counter,
        TS,
        "Entries ever added to the stream (XINFO STREAM entries-added, Redis 7.0+). Cached by the poller.",
        Source::Stream(|s| s.info.entries_added.map(|v| v as f64)),
        servers: EntriesRead
    );
    metric!(
        STREAM_FIRST_ENTRY_TS,
        "redis_streams_stream_first_entry_timestamp_seconds",
        Gauge,
        TS,
        "Time part of the first entry ID, in seconds since the epoch. Absent for empty streams and non-time IDs. Cached by the poller.",
        Source::Stream(|s| s.info.first_entry_id.and_then(|id| id_ts(s, id)))
    );
    metric!(
        STREAM_LAST_ENTRY_TS,
        "redis_streams_stream_last_entry_timestamp_seconds",
        Gauge,
        TS,
        "Time part of last-generated-id, in seconds since the epoch. Absent for non-time IDs. Cached by the poller.",
        Source::Stream(|s| id_ts(s, s.info.last_generated_id))
    );
    metric!(
        STREAM_GROUPS,
        "redis_streams_stream_groups",
        Gauge,
        TS,
        "Consumer groups of the stream (XINFO STREAM groups), including groups the exporter's group filters exclude. Cached by the poller.",
        Source::Stream(|s| Some(s.info.groups as f64))
    );
    metric!(
        STREAM_TIME_BASED_IDS,
        "redis_streams_stream_time_based_ids",
        Gauge,
        TS,
        "1 when the stream's IDs carry wall-clock milliseconds, so ID-derived ages are exported; 0 when they do not (explicit or far-future IDs) and ages are withheld. Cached by the poller.",
        Source::Stream(|s| flag(s.time_based_ids))
    );
    metric!(
        STREAM_DEAD_LETTER_LENGTH,
        "redis_streams_stream_dead_letter_length",
        Gauge,
        TS,
        "Entries in the stream's configured dead-letter stream (XLEN). Cached by the poller.",
        Source::Stream(|s| s.dead_letter.map(|dl| dl.length as f64))
    );
    metric!(
        STREAM_DEAD_LETTER_ADDED,
        "redis_streams_stream_dead_letter_entries_added_total",
        Counter,
        TS,
        "Entries ever added to the stream's configured dead-letter stream (Redis 7.0+). Cached by the poller.",
        Source::Stream(|s| s
            .dead_letter
            .and_then(|dl| dl.entries_added)
            .map(|v| v as f64)),
        servers: EntriesRead
    );
    metric!(
        STREAM_MAX_DELAY,
        "redis_streams_stream_max_delay_seconds",
        Gauge,
        TS,
        "Configured max_delay of the stream: the delay the business tolerates. Alert thresholds derive from it. Cached by the poller (the configuration its last stream poll applied).",
        Source::Stream(|s| s.settings.max_delay.map(|d| d.as_secs_f64()))
    );
    metric!(
        STREAM_READ_EVERY,
        "redis_streams_stream_read_every_seconds",
        Gauge,
        TS,
        "Configured read_every of the stream: its groups are read at least this often (batch consumers). Until read_every plus the status window passes without a read, work waiting is not stalled or stopped. Cached by the poller (the configuration its last stream poll applied).",
        Source::Stream(|s| s.settings.read_every.map(|d| d.as_secs_f64()))
    );
    metric!(
        STREAM_DEAD_LETTER_OLDEST_AGE,
        "redis_streams_stream_dead_letter_oldest_age_seconds",
        Gauge,
        TS,
        "Age of the oldest entry in the stream's configured dead-letter stream, by the server's clock (XRANGE dlq - + COUNT 1): how long the oldest dead letter has waited for someone. Absent when it holds none or its IDs are not time-based. Cached by the poller.",
        Source::Stream(|s| s.dead_letter.and_then(|dl| dl.oldest_age))
    );
    metric!(
        STREAM_RADIX_TREE_KEYS,
        "redis_streams_stream_radix_tree_keys",
        Gauge,
        TS,
        "Keys of the stream's radix tree (XINFO STREAM radix-tree-keys): its listpack nodes, a free proxy for its size in memory. Cached by the poller.",
        Source::Stream(|s| s.info.radix_tree_keys.map(|v| v as f64))
    );
    metric!(
        STREAM_RADIX_TREE_NODES,
        "redis_streams_stream_radix_tree_nodes",
        Gauge,
        TS,
        "Nodes of the stream's radix tree (XINFO STREAM radix-tree-nodes). Cached by the poller.",
        Source::Stream(|s| s.info.radix_tree_nodes.map(|v| v as f64))
    );
    metric!(
        STREAM_IDEMPOTENT_IDS_ADDED,
        "redis_streams_stream_idempotent_ids_added_total",
        Counter,
        TS,
        "Idempotency IDs ever added to the stream by idempotent producers (XINFO STREAM iids-added, Redis 8.6+). Absent on servers without it. Cached by the poller.",
        Source::Stream(|s| s.info.idempotence.ids_added.map(|v| v as f64)),
        servers: Idempotent
    );
    metric!(
        STREAM_IDEMPOTENT_DUPLICATES,
        "redis_streams_stream_idempotent_duplicates_total",
        Counter,
        TS,
        "Adds refused as duplicates of a remembered idempotency ID (XINFO STREAM iids-duplicates, Redis 8.6+): producer retries caught. Cached by the poller.",
        Source::Stream(|s| s.info.idempotence.duplicates.map(|v| v as f64)),
        servers: Idempotent
    );
    metric!(
        STREAM_IDEMPOTENT_PRODUCERS,
        "redis_streams_stream_idempotent_producers",
        Gauge,
        TS,
        "Producers whose idempotency IDs the stream remembers (XINFO STREAM pids-tracked, Redis 8.6+). Cached by the poller.",
        Source::Stream(|s| s.info.idempotence.producers.map(|v| v as f64)),
        servers: Idempotent
    );
    metric!(
        STREAM_IDEMPOTENT_IDS,
        "redis_streams_stream_idempotent_ids",
        Gauge,
        TS,
        "Idempotency IDs the stream remembers (XINFO STREAM iids-tracked, Redis 8.6+). Cached by the poller.",
        Source::Stream(|s| s.info.idempotence.ids.map(|v| v as f64)),
        servers: Idempotent
    );
    metric!(
        GROUP_LAG,
        "redis_streams_group_lag",
        Gauge,
        TSG,
        "Entries not yet delivered to the group. From XINFO GROUPS lag when sound, corrected after trimming, else estimated (see redis_streams_group_lag_estimated). Absent when unknown. Cached by the poller.",
        Source::Group(|_, g| g.lag.map(|v| v as f64))
    );
    metric!(
        GROUP_LAG_ESTIMATED,
        "redis_streams_group_lag_estimated",
        Gauge,
        TSG,
        "0 when redis_streams_group_lag is Redis's count: XINFO GROUPS lag as reported, or recounted or trim-corrected where that lag could not be trusted. 1 when Redis gave no usable lag (NULL after XDEL or XGROUP SETID, none before 7.0) and the exporter's own figure stands in: counted exactly with XRANGE when few entries follow the group, else estimated within the bounds Redis's counters prove; with nothing sound to go on the lag is absent and this stays 1. Cached by the poller.",
        Source::Group(|_, g| flag(g.lag_estimated)),
        lean: Lean::Unless(0.0)
    );
    metric!(
        GROUP_LAG_SECONDS,
        "redis_streams_group_lag_seconds",
        Gauge,
        TSG,
        "Age of the oldest undelivered entry by the Redis clock (TIME minus the ID's time part); 0 when nothing is undelivered. Absent for non-time IDs. Cached by the poller.",
        Source::Group(|_, g| g.lag_seconds)
    );
    metric!(
        GROUP_ENTRIES_READ,
        "redis_streams_group_entries_read",
        Gauge,
        TSG,
        "Entries read by the group (XINFO GROUPS entries-read), when Redis knows it. A gauge, not a counter: it goes back when the group is set back (XGROUP SETID, counted by redis_streams_group_rewinds_total), which rate() would read as a counter reset; take the read rate with deriv(). Cached by the poller.",
        Source::Group(|_, g| g.entries_read.map(|v| v as f64)),
        servers: EntriesRead
    );
    metric!(
        GROUP_LAST_DELIVERED_TS,
        "redis_streams_group_last_delivered_timestamp_seconds",
        Gauge,
        TSG,
        "Time part of the group's last-delivered-id, in seconds since the epoch. Absent for non-time IDs and 0-0. Cached by the poller.",
        Source::Group(|s, g| id_ts(s, g.last_delivered_id))
    );
    metric!(
        GROUP_CONSUMERS,
        "redis_streams_group_consumers",
        Gauge,
        TSG,
        "Consumers in the group. Cached by the poller.",
        Source::Group(|_, g| Some(g.consumers as f64))
    );
    metric!(
        GROUP_PENDING,
        "redis_streams_group_pending",
        Gauge,
        TSG,
        "Entries delivered to the group but not acknowledged (PEL size). Cached by the poller.",
        Source::Group(|_, g| Some(g.pending as f64))
    );
    metric!(
        GROUP_TRIMMED_UNDELIVERED,
        "redis_streams_group_trimmed_undelivered",
        Gauge,
        TSG,
        "Entries removed from the stream before this group read them: lost messages. Absent when the server gives no way to know. Cached by the poller.",
        Source::Group(|_, g| g.trimmed_undelivered.map(|v| v as f64)),
        servers: EntriesRead,
        lean: Lean::Unless(0.0)
    );
    metric!(
        GROUP_REWINDS,
        "redis_streams_group_rewinds_total",
        Counter,
        TSG,
        "Times the group's last-delivered-id or entries-read moved backwards (XGROUP SETID to an earlier ID, or the group recreated under the same name), as observed since the exporter started (a state file carries the count across its restarts). Cached by the poller.",
        Source::Group(|_, g| Some(g.rewinds as f64)),
        lean: Lean::Unless(0.0)
    );
    metric!(
        GROUP_LAST_REWIND_TIMESTAMP,
        "redis_streams_group_last_rewind_timestamp_seconds",
        Gauge,
        TSG,
        "Server time (Unix seconds) of the last stream poll that counted a rewind in redis_streams_group_rewinds_total. The rewind alert reads it beside increase(), which cannot see the first rewind of a series that appears with it. Absent until a rewind was counted. Cached by the poller.",
        Source::Group(|_, g| g.rewound_at_ms.map(|ms| ms as f64 / 1000.0))
    );
    metric!(
        GROUP_AHEAD_OF_STREAM,
        "redis_streams_group_ahead_of_stream",
        Gauge,
        TSG,
        "1 when the group's last-delivered-id is beyond the stream's last generated ID (XGROUP SETID into the future): entries added with smaller IDs will never be delivered to it. Cached by the poller.",
        Source::Group(|_, g| flag(g.ahead_of_stream)),
        lean: Lean::Unless(0.0)
    );
    metric!(
        GROUP_RETENTION_MARGIN,
        "redis_streams_group_retention_margin_seconds",
        Gauge,
        TSG,
        "Time part of the group's first undelivered entry minus that of the stream's first entry, in seconds: how far the trimming edge is from entries this group has not read. Absent when nothing is undelivered, IDs are not time-based, the stream is set to trimming = \"acked\", or what removes the head waits for the group: deletions moved the stream's first entry (workers deleting what they processed), or the group's first undelivered entry is the stream's first and the poll proved no loss (a retention job trimming to its position, ACKED trimming). Cached by the poller.",
        Source::Group(|_, g| g.retention_margin)
    );
    metric!(
        GROUP_TRIM_OVERTAKE_ETA,
        "redis_streams_group_trim_overtake_eta_seconds",
        Gauge,
        TSG,
        "At the recent rates (a robust slope over the last polls) at which the stream's first entry and the group's first undelivered entry advance, seconds until trimming reaches entries this group has not read; 0 when it already has. Absent when the edge is not closing in: the margin must fall over most pairs of polls and, where the lag is exact, so must the entries retained before the group's first undelivered one (a burst of production shrinks the margin in ID time, not the group's distance in entries). Cached by the poller.",
        Source::Group(|_, g| g.overtake_eta)
    );
    metric!(
        GROUP_DRAIN_ETA,
        "redis_streams_group_drain_eta_seconds",
        Gauge,
        TSG,
        "At the recent rates (a robust slope of the lag over the last polls: consumption minus production), seconds until the lag reaches 0; 0 when there is none. Absent while the lag is not shrinking. Cached by the poller.",
        Source::Group(|_, g| g.drain_eta),
        lean: Lean::Unless(0.0)
    );
    metric!(
        GROUP_READ_INTERVAL,
        "redis_streams_group_read_interval_seconds",
        Gauge,
        TSG,
        "The group's learned read cadence: how long new work waits before the group reads it, as the polls see it (to one stream interval: work read between two polls counts for one scheduled interval at most, however late a poll ran). Waits are kept per hour of the last 12 (a job every 3 hours or more often is learned; rarer ones need read_every); an hour's value is its second-longest wait, and this is the lower median of the hours' values (of the hours that saw two waits or more, when one did), so one outage is not taken for the group's rhythm and quiet hours teach nothing. Twice this, at least 4 stream polls, is how long work may wait unread before the group is stopped or stalled, and how long a consumer may be inactive before its entries are orphaned (unless consumer_inactive_after is set). Absent until 3 waits were seen. Cached by the poller.",
        Source::Group(|_, g| g.read_interval)
    );
    metric!(
        GROUP_LAST_READ_TIMESTAMP,
        "redis_streams_group_last_read_timestamp_seconds",
        Gauge,
        TSG,
        "Server time (seconds since the epoch) of the group's latest read the polls saw: a consumer's last read (its last successful read on Redis 7.2+, its last attempt before), or the group's position or entries-read advancing. time() minus this is how long the group has not read; the status waits twice the learned cadence before calling that stopped. Absent until a read was seen. Cached by the poller.",
        Source::Group(|_, g| g.last_read_at_ms.map(|ms| ms as f64 / 1000.0))
    );
    metric!(
        GROUP_READ_EVERY,
        "redis_streams_group_read_every_seconds",
        Gauge,
        TSG,
        "How often the group is read at least, in seconds: the stream's read_every when configured; otherwise, for a group that reads in runs (twice its learned read cadence, redis_streams_group_read_interval_seconds, is longer than the status window), twice that cadence. Its work then waits for the next run: the status is neither stopped nor lagging (short of max_delay) until the run is overdue by the status window, and the shipped lag, backlog and outpacing alerts count their thresholds from it. Absent for groups read continuously or whose cadence is not learned yet. Cached by the poller.",
        Source::Group(|_, g| g.read_every)
    );
    metric!(
        GROUP_LOST_ENTRIES,
        "redis_streams_group_lost_entries_total",
        Counter,
        TSGCAUSE,
        "Entries removed from the stream before this group read them, as observed since the exporter started (a state file carries the count across its restarts) (never decreases), counted only where the server's figures exclude every order in which the group read them first: entries gone after its position at a poll (behind the trimming edge, or before a deleted entry), and on Redis 7.x every rise of entries-added - entries-read - lag. cause=trimmed: XTRIM or XADD MAXLEN/MINID (no deletion can explain it); cause=deleted: XDEL, XDELEX or XACKDEL (a deletion reached past the group's position, and no trim can explain it: the entries lay after the first one, or no trim reached past the position); cause=trimmed_or_deleted: a deletion reached the first entries and a trim may have too, the figures cannot tell (a worker of another group deleting the head entries it read looks like a trim up to there and one deletion; the alerts page it as a trim); with keyspace events on, only xdel announced between the two reads makes it deleted, only xtrim trimmed. What may have been lost beyond this is in redis_streams_group_possibly_lost_entries_total. Absent before Redis 7.0. Cached by the poller.",
        Source::Custom(Custom::LostEntries),
        servers: EntriesRead,
        lean: Lean::Unless(0.0)
    );
    metric!(
        GROUP_LAST_LOSS_TIMESTAMP,
        "redis_streams_group_last_loss_timestamp_seconds",
        Gauge,
        TSGCAUSE,
        "Server time (Unix seconds) of the last stream poll that counted a loss of this cause in redis_streams_group_lost_entries_total. The loss alerts read it beside increase(), which cannot see a loss counted before Prometheus's first scrape of the group. Absent until such a loss was counted. Cached by the poller.",
        Source::Custom(Custom::LastLoss),
        servers: EntriesRead
    );
    metric!(
        GROUP_POSSIBLY_LOST,
        "redis_streams_group_possibly_lost_entries_total",
        Counter,
        TSGCAUSE,
        "Entries that may have been removed before this group read them beyond those counted in redis_streams_group_lost_entries_total, as observed since the exporter started (a state file carries the count across its restarts) (never decreases): an upper bound, for intervals in which the group read past entries removed meanwhile and the server's figures cannot tell the order (Redis 8 and Valkey after a trim; every server after a deletion the group read past). Information, not a page. Absent before Redis 7.0. Cached by the poller.",
        Source::Custom(Custom::PossiblyLost),
        servers: EntriesRead,
        lean: Lean::Unless(0.0)
    );
    metric!(
        GROUP_LOSS_UNPROVEN,
        "redis_streams_group_loss_unproven_total",
        Counter,
        TSGREASON,
        "Stream polls after which entries may have been lost beyond those proven, as observed since the exporter started (a state file carries the count across its restarts). reason=order_unknown: the group read past entries removed in the same interval and the server's figures are the same whether it read them first; reason=no_entries_read: entries-read was unknown at one of the two polls; reason=no_counters: a trim passed the group's position on a server without entries-added (before Redis 7.0), where nothing can be counted. A series appears with its first interval. Cached by the poller.",
        Source::Custom(Custom::LossUnproven)
    );
    metric!(
        GROUP_STATUS,
        "redis_streams_group_status",
        Gauge,
        TSGSR,
        "1, one series per group: its status (warming_up, ok, idle, lagging, stalled, stopped, data_loss), judged over a sliding window of polls, and the rule that decided it as reason. data_loss: loss_counted, entries_gone_ahead, loss_held; stopped: no_consumers, no_read (nobody read for the group's patience), run_overdue (a group read in runs missed its run); stalled: poison, ghost, orphaned, position_stuck, oldest_pending_stuck; lagging: lag_seconds, past_max_delay, trim_overtake, retention_margin, lag_growing; warming_up (not judged yet): window_filling (work waits and the window is not full), no_read_seen (work waits and nobody has read since the group was first polled: stopped once its patience passes, never stalled meanwhile); ok: keeping_up (nothing waits), within_limits (work waits, under the thresholds), between_runs; idle: no_work. The series changes with either label: alerts on a status aggregate the reason away (max without (reason)). Cached by the poller.",
        Source::Custom(Custom::Status)
    );
    metric!(
        GROUP_WITHIN_OBJECTIVE,
        "redis_streams_group_within_objective",
        Gauge,
        TSG,
        "1 when the group's lag in seconds is within its stream's max_delay, 0 when it is not; absent where max_delay is not set or the lag in seconds is unknown. The good-events signal of a delay objective (Pyrra's bool gauge, Sloth's raw ratio; see docs/slo.md). Cached by the poller.",
        Source::Group(|s, g| {
            let max_delay = s.settings.max_delay?.as_secs_f64();
            flag(g.lag_seconds? <= max_delay)
        })
    );
}
