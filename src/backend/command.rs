//! The commands the exporter may send, as a closed enum.
//!
//! This enum *is* the read-only allowlist (docs/design.md): there is no way to send
//! anything else, so a write, `KEYS`, `XAUTOCLAIM` or an unbounded
//! `XINFO STREAM FULL` cannot be issued by mistake. Each command knows its spelling, the key it
//! touches (for cluster routing) and its `command` label.

use crate::vocab::StreamId;

/// Start of an `XPENDING`/`XRANGE` range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RangeStart {
    /// `-`: from the smallest ID.
    Min,
    /// From this ID, inclusive.
    From(StreamId),
}

/// End of a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RangeEnd {
    /// `+`: to the largest ID.
    Max,
    /// To this ID, inclusive.
    To(StreamId),
}

/// A command the exporter may send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Command {
    /// `PING`.
    Ping,
    /// `INFO server`.
    InfoServer,
    /// `INFO memory`.
    InfoMemory,
    /// `TIME`: the server's clock, for ages.
    Time,
    /// `SCAN cursor [MATCH pattern] COUNT n TYPE stream`.
    Scan {
        /// Cursor from the previous page (0 to start).
        cursor: u64,
        /// MATCH pattern.
        pattern: Option<Vec<u8>>,
        /// COUNT hint.
        count: u32,
    },
    /// `XINFO STREAM key` (summary form).
    XinfoStream {
        /// Stream.
        key: Vec<u8>,
    },
    /// `XINFO STREAM key FULL COUNT 1`, only to servers with `XNACK`
    /// (Redis 8.8+), whose groups report `nacked-count` there and nowhere
    /// else. The connection reads the groups' own figures only: the entry,
    /// each group's PEL row and its consumers are counted past
    /// (`client::bounded`), and the groups are cut at the rows a reply
    /// keeps.
    XinfoStreamNacks {
        /// Stream.
        key: Vec<u8>,
    },
    /// `XINFO GROUPS key`.
    XinfoGroups {
        /// Stream.
        key: Vec<u8>,
    },
    /// `XINFO CONSUMERS key group`.
    XinfoConsumers {
        /// Stream.
        key: Vec<u8>,
        /// Group.
        group: Vec<u8>,
    },
    /// `XPENDING key group` (summary).
    XpendingSummary {
        /// Stream.
        key: Vec<u8>,
        /// Group.
        group: Vec<u8>,
    },
    /// `XPENDING key group start end count` (extended form, no IDLE filter:
    /// IDLE scans the whole range when nothing matches).
    XpendingRange {
        /// Stream.
        key: Vec<u8>,
        /// Group.
        group: Vec<u8>,
        /// First ID.
        start: RangeStart,
        /// Last ID: a count that completes figures read earlier stops where
        /// they did, so entries delivered since do not enter it.
        end: RangeEnd,
        /// Entries to return.
        count: u32,
    },
    /// `XRANGE key start end COUNT n`.
    Xrange {
        /// Stream.
        key: Vec<u8>,
        /// First ID.
        start: RangeStart,
        /// Last ID.
        end: RangeEnd,
        /// Entries to return (always bounded).
        count: u32,
    },
    /// `XREVRANGE key end start COUNT n`: the last entries of a range.
    Xrevrange {
        /// Stream.
        key: Vec<u8>,
        /// Last ID (where the reverse walk starts).
        end: RangeEnd,
        /// First ID.
        start: RangeStart,
        /// Entries to return (always bounded).
        count: u32,
    },
    /// `CLIENT SETNAME name`, so operators can tell our connection apart.
    ClientSetname,
    /// `CLIENT ID`, on a subscriber connection before it subscribes: the
    /// ID the poll connection's invalidations are redirected to.
    ClientId,
    /// `CLIENT TRACKING ON REDIRECT id`, on a node's poll connection: the
    /// server announces each key it read at the key's next change (see
    /// `tracking`).
    ClientTracking {
        /// The subscriber's client ID.
        redirect: u64,
    },
    /// `CLUSTER SHARDS` (7.0+).
    ClusterShards,
    /// `CLUSTER SLOTS` (before 7.0).
    ClusterSlots,
    /// `ASKING`, sent before a command redirected by `-ASK` during resharding.
    Asking,
    /// `SENTINEL GET-MASTER-ADDR-BY-NAME name` (to a sentinel).
    SentinelMasterAddr {
        /// Master name.
        name: String,
    },
    /// `MULTI`, before the reads of one stream that must describe one
    /// moment (see `TargetClient::execute_atomically`). Only read commands
    /// follow it.
    Multi,
    /// `EXEC`, after them.
    Exec,
    /// `SUBSCRIBE channel…`, on a subscriber connection of its own: the
    /// keyevent channels of the stream events the exporter uses and `del`,
    /// and `__redis__:invalidate` (see `subscriber`).
    Subscribe {
        /// Channels.
        channels: Vec<String>,
    },
    /// `UNSUBSCRIBE channel…`, when a subscription is stopped.
    Unsubscribe {
        /// Channels.
        channels: Vec<String>,
    },
}

/// The client name the exporter sets on its connections.
pub const CLIENT_NAME: &str = "redis-streams-exporter";

impl Command {
    /// The `command` label and log field.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Command::Ping => "ping",
            Command::InfoServer | Command::InfoMemory => "info",
            Command::Time => "time",
            Command::Scan { .. } => "scan",
            Command::XinfoStream { .. } => "xinfo_stream",
            Command::XinfoStreamNacks { .. } => "xinfo_stream_full",
            Command::XinfoGroups { .. } => "xinfo_groups",
            Command::XinfoConsumers { .. } => "xinfo_consumers",
            Command::XpendingSummary { .. } => "xpending_summary",
            Command::XpendingRange { .. } => "xpending_range",
            Command::Xrange { .. } => "xrange",
            Command::Xrevrange { .. } => "xrevrange",
            Command::ClientSetname => "client_setname",
            Command::ClientId => "client_id",
            Command::ClientTracking { .. } => "client_tracking",
            Command::ClusterShards => "cluster_shards",
            Command::ClusterSlots => "cluster_slots",
            Command::Asking => "asking",
            Command::SentinelMasterAddr { .. } => "sentinel_get_master_addr",
            Command::Multi => "multi",
            Command::Exec => "exec",
            Command::Subscribe { .. } => "subscribe",
            Command::Unsubscribe { .. } => "unsubscribe",
        }
    }

    /// The most entries, rows or keys its reply may hold (1 for the
    /// commands that return one item or a few fields): what a pipeline
    /// budgets its replies' memory by.
    pub(crate) fn reply_items(&self) -> u64 {
        match self {
            Command::Xrange { count, .. }
            | Command::Xrevrange { count, .. }
            | Command::XpendingRange { count, .. }
            | Command::Scan { count, .. } => u64::from(*count),
            _ => 1,
        }
    }

    /// The command as redis-rs will send it.
    pub(crate) fn to_cmd(&self) -> redis::Cmd {
        fn start_arg(s: RangeStart) -> String {
            match s {
                RangeStart::Min => "-".to_string(),
                RangeStart::From(id) => id.to_string(),
            }
        }
        fn end_arg(e: RangeEnd) -> String {
            match e {
                RangeEnd::Max => "+".to_string(),
                RangeEnd::To(id) => id.to_string(),
            }
        }
        match self {
            Command::Ping => redis::cmd("PING"),
            Command::InfoServer => redis::cmd("INFO").arg("server").to_owned(),
            Command::InfoMemory => redis::cmd("INFO").arg("memory").to_owned(),
            Command::Time => redis::cmd("TIME"),
            Command::Scan {
                cursor,
                pattern,
                count,
            } => {
                let mut c = redis::cmd("SCAN");
                c.arg(*cursor);
                if let Some(p) = pattern {
                    c.arg("MATCH").arg(p.as_slice());
                }
                c.arg("COUNT").arg(*count).arg("TYPE").arg("stream");
                c
            }
            Command::XinfoStream { key } => redis::cmd("XINFO")
                .arg("STREAM")
                .arg(key.as_slice())
                .to_owned(),
            Command::XinfoStreamNacks { key } => redis::cmd("XINFO")
                .arg("STREAM")
                .arg(key.as_slice())
                .arg("FULL")
                .arg("COUNT")
                .arg(1)
                .to_owned(),
            Command::XinfoGroups { key } => redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(key.as_slice())
                .to_owned(),
            Command::XinfoConsumers { key, group } => redis::cmd("XINFO")
                .arg("CONSUMERS")
                .arg(key.as_slice())
                .arg(group.as_slice())
                .to_owned(),
            Command::XpendingSummary { key, group } => redis::cmd("XPENDING")
                .arg(key.as_slice())
                .arg(group.as_slice())
                .to_owned(),
            Command::XpendingRange {
                key,
                group,
                start,
                end,
                count,
            } => redis::cmd("XPENDING")
                .arg(key.as_slice())
                .arg(group.as_slice())
                .arg(start_arg(*start))
                .arg(end_arg(*end))
                .arg(*count)
                .to_owned(),
            Command::Xrange {
                key,
                start,
                end,
                count,
            } => redis::cmd("XRANGE")
                .arg(key.as_slice())
                .arg(start_arg(*start))
                .arg(end_arg(*end))
                .arg("COUNT")
                .arg(*count)
                .to_owned(),
            Command::Xrevrange {
                key,
                end,
                start,
                count,
            } => redis::cmd("XREVRANGE")
                .arg(key.as_slice())
                .arg(end_arg(*end))
                .arg(start_arg(*start))
                .arg("COUNT")
                .arg(*count)
                .to_owned(),
            Command::ClientSetname => redis::cmd("CLIENT")
                .arg("SETNAME")
                .arg(CLIENT_NAME)
                .to_owned(),
            Command::ClientId => redis::cmd("CLIENT").arg("ID").to_owned(),
            Command::ClientTracking { redirect } => redis::cmd("CLIENT")
                .arg("TRACKING")
                .arg("ON")
                .arg("REDIRECT")
                .arg(*redirect)
                .to_owned(),
            Command::ClusterShards => redis::cmd("CLUSTER").arg("SHARDS").to_owned(),
            Command::ClusterSlots => redis::cmd("CLUSTER").arg("SLOTS").to_owned(),
            Command::Asking => redis::cmd("ASKING"),
            Command::SentinelMasterAddr { name } => redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(name.as_str())
                .to_owned(),
            Command::Multi => redis::cmd("MULTI"),
            Command::Exec => redis::cmd("EXEC"),
            Command::Subscribe { channels } => redis::cmd("SUBSCRIBE").arg(channels).to_owned(),
            Command::Unsubscribe { channels } => redis::cmd("UNSUBSCRIBE").arg(channels).to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(c: &Command) -> Vec<String> {
        c.to_cmd()
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => "<cursor>".into(),
            })
            .collect()
    }

    #[test]
    fn spelling() {
        assert_eq!(
            words(&Command::Scan {
                cursor: 0,
                pattern: Some(b"o:*".to_vec()),
                count: 1000
            }),
            [
                "SCAN", "0", "MATCH", "o:*", "COUNT", "1000", "TYPE", "stream"
            ]
        );
        assert_eq!(
            words(&Command::XpendingRange {
                key: b"s".to_vec(),
                group: b"g".to_vec(),
                start: RangeStart::From(StreamId::new(5, 1)),
                end: RangeEnd::Max,
                count: 500
            }),
            ["XPENDING", "s", "g", "5-1", "+", "500"]
        );
        assert_eq!(
            words(&Command::Xrange {
                key: b"s".to_vec(),
                start: RangeStart::Min,
                end: RangeEnd::To(StreamId::new(3, 0)),
                count: 1
            }),
            ["XRANGE", "s", "-", "3-0", "COUNT", "1"]
        );
        assert_eq!(
            words(&Command::Xrevrange {
                key: b"s".to_vec(),
                end: RangeEnd::To(StreamId::new(7, u64::MAX)),
                start: RangeStart::From(StreamId::new(7, 0)),
                count: 1
            }),
            [
                "XREVRANGE",
                "s",
                "7-18446744073709551615",
                "7-0",
                "COUNT",
                "1"
            ]
        );
        assert_eq!(words(&Command::ClientId), ["CLIENT", "ID"]);
        assert_eq!(
            words(&Command::ClientTracking { redirect: 42 }),
            ["CLIENT", "TRACKING", "ON", "REDIRECT", "42"]
        );
        assert_eq!(
            words(&Command::XinfoStream { key: b"s".to_vec() }),
            ["XINFO", "STREAM", "s"]
        );
        let channels = vec![
            "__keyevent@0__:xtrim".to_string(),
            "__keyevent@0__:del".to_string(),
        ];
        assert_eq!(
            words(&Command::Subscribe {
                channels: channels.clone()
            }),
            ["SUBSCRIBE", "__keyevent@0__:xtrim", "__keyevent@0__:del"]
        );
        assert_eq!(
            words(&Command::Unsubscribe { channels }),
            ["UNSUBSCRIBE", "__keyevent@0__:xtrim", "__keyevent@0__:del"]
        );
    }
}
