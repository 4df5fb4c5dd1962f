//! Stream entry IDs (`<ms>-<seq>`) and the arithmetic the probes need on them.
//!
//! IDs are compared as `(ms, seq)` pairs. Whether the `ms` part means wall-clock
//! time is a separate question answered by [`StreamId::is_plausible_time`]:
//! producers may use explicit IDs such as `1-0`.

use std::fmt;

/// A stream entry ID.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// Milliseconds part (wall-clock time for auto-generated IDs).
    pub ms: u64,
    /// Sequence part.
    pub seq: u64,
}

/// Milliseconds before which an ID is not taken as wall-clock time
/// (2001-09-09): explicit IDs such as `1-0` or business counters land below it.
pub const MIN_TIME_MS: u64 = 1_000_000_000_000;

/// How far in the future of the server clock an ID may be and still count as
/// time-based: IDs run ahead of `TIME` after a clock step or a failover to a
/// node with a slower clock, but never by a day.
pub const MAX_FUTURE_MS: u64 = 24 * 3600 * 1000;

impl StreamId {
    /// The smallest ID, `0-0`.
    pub const ZERO: StreamId = StreamId { ms: 0, seq: 0 };

    /// Builds an ID from its parts.
    pub const fn new(ms: u64, seq: u64) -> Self {
        StreamId { ms, seq }
    }

    /// Parses `ms-seq` or a bare `ms` (sequence 0), as Redis prints them.
    pub fn parse(raw: &[u8]) -> Option<StreamId> {
        let text = std::str::from_utf8(raw).ok()?;
        match text.split_once('-') {
            Some((ms, seq)) => Some(StreamId {
                ms: ms.parse().ok()?,
                seq: seq.parse().ok()?,
            }),
            None => Some(StreamId {
                ms: text.parse().ok()?,
                seq: 0,
            }),
        }
    }

    /// True for `0-0`, which Redis uses for "none" in several fields.
    pub fn is_zero(self) -> bool {
        self == StreamId::ZERO
    }

    /// The next possible ID, used as an inclusive start where Redis 6.2+
    /// would take an exclusive `(id`. Writing the successor ourselves keeps
    /// the commands valid on every server and avoids the overflow error Redis
    /// returns for `(` on the largest ID. `None` for the largest ID.
    pub fn successor(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }

    /// True when the milliseconds part plausibly is wall-clock time relative
    /// to the server's clock `now_ms`.
    pub fn is_plausible_time(self, now_ms: u64) -> bool {
        self.ms >= MIN_TIME_MS && self.ms <= now_ms.saturating_add(MAX_FUTURE_MS)
    }

    /// The milliseconds part in seconds.
    pub fn seconds(self) -> f64 {
        self.ms as f64 / 1000.0
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// Written as Redis prints it, `ms-seq` (the exporter's state file).
impl serde::Serialize for StreamId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for StreamId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        StreamId::parse(text.as_bytes()).ok_or_else(|| {
            serde::de::Error::invalid_value(serde::de::Unexpected::Str(&text), &"an ID ms-seq")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_writes_and_reads_ms_seq() {
        let id = StreamId::new(1_700_000_000_000, 7);
        let text = serde_json::to_string(&id).unwrap();
        assert_eq!(text, "\"1700000000000-7\"");
        assert_eq!(serde_json::from_str::<StreamId>(&text).unwrap(), id);
        assert!(serde_json::from_str::<StreamId>("\"x-1\"").is_err());
    }

    #[test]
    fn parses_and_orders() {
        assert_eq!(
            StreamId::parse(b"1526985054069-3"),
            Some(StreamId::new(1526985054069, 3))
        );
        assert_eq!(StreamId::parse(b"7"), Some(StreamId::new(7, 0)));
        assert_eq!(StreamId::parse(b"x-1"), None);
        assert_eq!(StreamId::parse(b"1-"), None);
        assert_eq!(
            StreamId::parse(b"18446744073709551615-18446744073709551615"),
            Some(StreamId::new(u64::MAX, u64::MAX))
        );
        assert!(StreamId::new(1, 5) < StreamId::new(2, 0));
        assert!(StreamId::new(2, 1) > StreamId::new(2, 0));
    }

    #[test]
    fn successor_carries() {
        assert_eq!(StreamId::new(5, 1).successor(), Some(StreamId::new(5, 2)));
        assert_eq!(
            StreamId::new(5, u64::MAX).successor(),
            Some(StreamId::new(6, 0))
        );
        assert_eq!(StreamId::new(u64::MAX, u64::MAX).successor(), None);
    }

    #[test]
    fn time_plausibility() {
        let now = 1_790_000_000_000;
        assert!(StreamId::new(now - 5, 0).is_plausible_time(now));
        assert!(StreamId::new(now + 1000, 0).is_plausible_time(now));
        assert!(!StreamId::new(42, 0).is_plausible_time(now));
        assert!(!StreamId::new(now + 2 * MAX_FUTURE_MS, 0).is_plausible_time(now));
    }
}
