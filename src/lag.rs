//! Group lag done right (SPEC §5): pure arithmetic over what the stream probe
//! read, with no I/O and no clock.
//!
//! The probe calls [`sample_request`] to learn whether it must read the first
//! undelivered entries (`XRANGE key <successor of last-delivered-id> + COUNT
//! k`), then [`compute`] with everything it has. The result says which
//! number to export, whether it is Redis's own count or ours
//! (`lag_estimated`), how many entries were trimmed before the group read them,
//! and which entry is the oldest undelivered one (for `lag_seconds`).
//!
//! # Method
//! 1. **Redis's count** (`XINFO GROUPS lag`) is used when present, when the
//!    group's last-delivered-id is inside the retained stream, and when it does
//!    not exceed the stream's length (nothing can be undelivered that is not
//!    in the stream). `lag_estimated` is 0.
//! 2. **Trim correction**: when last-delivered-id is older than the first
//!    entry, every retained entry is undelivered, so lag is the length; old
//!    servers (7.0.x, 7.2.0–7.2.6, 7.4.0–7.4.1) still count the trimmed
//!    entries. Entries-added − entries-read − length is `trimmed_undelivered`
//!    when Redis knows entries-read (otherwise it is unknown: absent).
//!    `lag_estimated` is 0: the length is exact.
//! 3. **Fallback** when Redis gives no sound count (nil after XDEL or SETID,
//!    absent before 7.0): count the undelivered entries with XRANGE when there
//!    are fewer than `k` (exact), else interpolate over the IDs of the retained
//!    window: with `N` entries between the first ID `f` and the last ID `l`,
//!    and `u` the first undelivered ID, lag ≈ 1 + (N − 1)·(l − u)/(l − f),
//!    clamped to `[k, N]`. Positions are the ID's milliseconds (its sequence
//!    when all IDs share one millisecond). For a producer at a steady rate the
//!    error is about one entry per millisecond of ID granularity at each end
//!    (under 1% once the lag exceeds a few hundred entries; the integration
//!    tests measure it); bursts within the window bias it towards the average
//!    density. `lag_estimated` is 1, and with no usable sample the lag is
//!    absent (unknown), never 0.

use crate::redis::StreamId;
use crate::redis::reply::{GroupInfo, StreamInfo};

/// How a lag figure was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LagMethod {
    /// Redis's `lag` field.
    Reported,
    /// The stream length, because the group is behind the first entry.
    TrimCorrected,
    /// Counted with XRANGE (fewer than `k` undelivered entries).
    Counted,
    /// Interpolated over the retained window's IDs.
    Interpolated,
    /// Nothing sound was available.
    Unknown,
}

/// The lag of one group.
#[derive(Clone, Debug, PartialEq)]
pub struct LagFigure {
    /// Undelivered entries; `None` when unknown.
    pub lag: Option<u64>,
    /// How `lag` was obtained.
    pub method: LagMethod,
    /// Entries removed before the group read them; `None` when unknowable.
    pub trimmed_undelivered: Option<u64>,
    /// The oldest undelivered entry still in the stream, when known (for
    /// `lag_seconds`); `None` with `lag == Some(0)` means nothing is undelivered.
    pub first_undelivered: Option<StreamId>,
}

impl LagFigure {
    /// True when `lag` is the exporter's own figure rather than Redis's count.
    pub fn estimated(&self) -> bool {
        !matches!(self.method, LagMethod::Reported | LagMethod::TrimCorrected)
    }
}

/// The first undelivered entries, as read by the probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UndeliveredSample {
    /// IDs returned by `XRANGE key <successor> + COUNT count`.
    pub ids: Vec<StreamId>,
    /// The COUNT asked for.
    pub count: u32,
}

impl UndeliveredSample {
    /// True when the reply held every undelivered entry.
    fn is_complete(&self) -> bool {
        (self.ids.len() as u64) < u64::from(self.count)
    }
}

fn behind_first_entry(stream: &StreamInfo, group: &GroupInfo) -> Option<StreamId> {
    stream
        .first_entry_id
        .filter(|first| group.last_delivered_id < *first)
}

fn caught_up(stream: &StreamInfo, group: &GroupInfo) -> bool {
    stream.length == 0
        || stream
            .last_entry_id
            .is_none_or(|last| group.last_delivered_id >= last)
}

fn sound_report(stream: &StreamInfo, group: &GroupInfo) -> Option<u64> {
    group.lag.filter(|&l| l <= stream.length)
}

/// How many undelivered entries the probe must read for this group, or
/// `None` when the lag and its age follow from XINFO alone.
pub fn sample_request(stream: &StreamInfo, group: &GroupInfo, exact_limit: u32) -> Option<u32> {
    if caught_up(stream, group) || behind_first_entry(stream, group).is_some() {
        return None;
    }
    match sound_report(stream, group) {
        Some(0) => None,
        // Only the first entry's ID is needed, for its age.
        Some(_) => Some(1),
        None => Some(exact_limit.max(1)),
    }
}

/// Entries trimmed before the group read them, for a group that is behind
/// the first entry (or on an emptied stream), `retained_undelivered` being
/// the undelivered entries still in the stream.
///
/// Known only when Redis knows how many entries the group read; when
/// entries-read is nil, Redis's lag is itself derived from the stream length
/// and says nothing about what was trimmed. One exception: a group still at
/// `0-0` on a stream without deletions has read nothing, so everything
/// removed was lost.
fn trimmed(stream: &StreamInfo, group: &GroupInfo, retained_undelivered: u64) -> Option<u64> {
    let added = stream.entries_added?;
    let read = match group.entries_read {
        Some(read) => read,
        None if group.last_delivered_id.is_zero()
            && stream.max_deleted_entry_id == Some(StreamId::ZERO) =>
        {
            0
        }
        None => return None,
    };
    Some(
        added
            .saturating_sub(read)
            .saturating_sub(retained_undelivered),
    )
}

/// Computes the lag of `group` from XINFO and, when [`sample_request`] asked
/// for one, the sample of undelivered entries.
pub fn compute(
    stream: &StreamInfo,
    group: &GroupInfo,
    sample: Option<&UndeliveredSample>,
) -> LagFigure {
    let ld = group.last_delivered_id;
    // An empty stream: nothing to deliver; anything generated after the
    // group's position was removed before it read it.
    if stream.length == 0 {
        let lost = if ld >= stream.last_generated_id {
            Some(0)
        } else {
            trimmed(stream, group, 0)
        };
        let method = if group.lag.is_some() {
            LagMethod::Reported
        } else {
            LagMethod::Counted
        };
        return LagFigure {
            lag: Some(0),
            method,
            trimmed_undelivered: lost,
            first_undelivered: None,
        };
    }
    if let Some(first) = behind_first_entry(stream, group) {
        return LagFigure {
            lag: Some(stream.length),
            method: LagMethod::TrimCorrected,
            trimmed_undelivered: trimmed(stream, group, stream.length),
            first_undelivered: Some(first),
        };
    }
    // From here the group is inside the retained window, so no undelivered
    // entry can have been trimmed (trimming removes from the head).
    let no_loss = Some(0);
    if caught_up(stream, group) {
        let method = if sound_report(stream, group).is_some() {
            LagMethod::Reported
        } else {
            LagMethod::Counted
        };
        return LagFigure {
            lag: Some(0),
            method,
            trimmed_undelivered: no_loss,
            first_undelivered: None,
        };
    }
    if let Some(reported) = sound_report(stream, group) {
        // A sample that shows nothing after last-delivered-id overrides a
        // non-zero report (a miscount): the stream itself is the truth.
        return match sample {
            Some(s) if s.ids.is_empty() && reported > 0 => LagFigure {
                lag: Some(0),
                method: LagMethod::Counted,
                trimmed_undelivered: no_loss,
                first_undelivered: None,
            },
            _ => LagFigure {
                lag: Some(reported),
                method: LagMethod::Reported,
                trimmed_undelivered: no_loss,
                first_undelivered: sample.and_then(|s| s.ids.first().copied()),
            },
        };
    }
    let Some(sample) = sample else {
        return LagFigure {
            lag: None,
            method: LagMethod::Unknown,
            trimmed_undelivered: no_loss,
            first_undelivered: None,
        };
    };
    let first_undelivered = sample.ids.first().copied();
    if sample.is_complete() {
        return LagFigure {
            lag: Some(sample.ids.len() as u64),
            method: LagMethod::Counted,
            trimmed_undelivered: no_loss,
            first_undelivered,
        };
    }
    let lag = first_undelivered
        .and_then(|u| interpolate(stream, u))
        .map(|estimate| {
            estimate.clamp(
                u64::from(sample.count),
                stream.length.max(u64::from(sample.count)),
            )
        });
    LagFigure {
        lag,
        method: if lag.is_some() {
            LagMethod::Interpolated
        } else {
            LagMethod::Unknown
        },
        trimmed_undelivered: no_loss,
        first_undelivered,
    }
}

/// Entries at or after `u`, assuming entries are spread evenly between the
/// stream's first and last IDs.
fn interpolate(stream: &StreamInfo, u: StreamId) -> Option<u64> {
    let (first, last) = (stream.first_entry_id?, stream.last_entry_id?);
    if u > last || u < first {
        return None;
    }
    let n = stream.length as f64;
    let (span, ahead) = if last.ms > first.ms {
        ((last.ms - first.ms) as f64, (last.ms - u.ms) as f64)
    } else if last.seq > first.seq {
        ((last.seq - first.seq) as f64, (last.seq - u.seq) as f64)
    } else {
        return Some(1);
    };
    Some((1.0 + (n - 1.0) * ahead / span).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64) -> StreamId {
        StreamId::new(ms, 0)
    }

    fn stream(len: u64, first: u64, last: u64) -> StreamInfo {
        StreamInfo {
            length: len,
            groups: 1,
            last_generated_id: id(last),
            first_entry_id: (len > 0).then(|| id(first)),
            last_entry_id: (len > 0).then(|| id(last)),
            entries_added: Some(len),
            max_deleted_entry_id: Some(StreamId::ZERO),
            recorded_first_entry_id: Some(id(first)),
        }
    }

    fn group(ld: u64, lag: Option<u64>, read: Option<u64>) -> GroupInfo {
        GroupInfo {
            name: b"g".to_vec(),
            consumers: 1,
            pending: 0,
            last_delivered_id: id(ld),
            entries_read: read,
            lag,
        }
    }

    #[test]
    fn sound_report_is_used_and_needs_only_the_first_id() {
        let s = stream(10, 1, 10);
        let g = group(4, Some(6), Some(4));
        assert_eq!(sample_request(&s, &g, 100), Some(1));
        let f = compute(
            &s,
            &g,
            Some(&UndeliveredSample {
                ids: vec![id(5)],
                count: 1,
            }),
        );
        assert_eq!(f.lag, Some(6));
        assert!(!f.estimated());
        assert_eq!(f.first_undelivered, Some(id(5)));
        assert_eq!(f.trimmed_undelivered, Some(0));
    }

    #[test]
    fn caught_up_needs_no_sample() {
        let s = stream(10, 1, 10);
        let g = group(10, Some(0), Some(10));
        assert_eq!(sample_request(&s, &g, 100), None);
        let f = compute(&s, &g, None);
        assert_eq!(
            (f.lag, f.estimated(), f.first_undelivered),
            (Some(0), false, None)
        );
    }

    /// The 7.0.15 miscount from research §1.2: 10 entries, group read 2,
    /// XDEL 5, XTRIM MINID 7 → XLEN 4, Redis says lag 8.
    #[test]
    fn trim_past_group_corrects_old_server_overcount() {
        let mut s = stream(4, 7, 10);
        s.entries_added = Some(10);
        s.max_deleted_entry_id = Some(id(5));
        let g = group(2, Some(8), Some(2));
        assert_eq!(sample_request(&s, &g, 100), None);
        let f = compute(&s, &g, None);
        assert_eq!(f.lag, Some(4));
        assert_eq!(f.method, LagMethod::TrimCorrected);
        assert!(!f.estimated());
        // 10 added − 2 read − 4 retained: entries 3, 4, 6 were trimmed, 5 deleted.
        assert_eq!(f.trimmed_undelivered, Some(4));
        assert_eq!(f.first_undelivered, Some(id(7)));
    }

    /// New servers report lag = length after the trim; entries-read still
    /// tells what was lost.
    #[test]
    fn trim_past_group_on_new_server_uses_entries_read() {
        let mut s = stream(4, 7, 10);
        s.entries_added = Some(10);
        let f = compute(&s, &group(2, Some(4), Some(2)), None);
        assert_eq!((f.lag, f.trimmed_undelivered), (Some(4), Some(4)));
    }

    #[test]
    fn trim_past_group_without_counters_loss_is_unknown() {
        let mut s = stream(4, 7, 10);
        s.entries_added = None;
        let f = compute(&s, &group(2, None, None), None);
        assert_eq!((f.lag, f.trimmed_undelivered), (Some(4), None));
    }

    /// A group created at `$` that never caught up: Redis's lag equals the
    /// length and entries-read is nil, so the loss cannot be known.
    #[test]
    fn trim_past_group_with_nil_entries_read_is_unknown_not_zero() {
        let mut s = stream(10, 51, 60);
        s.entries_added = Some(60);
        let f = compute(&s, &group(0, Some(10), None), None);
        assert_eq!(f.lag, Some(10));
        // At 0-0 without deletions, nothing was read: 50 lost.
        assert_eq!(f.trimmed_undelivered, Some(50));
        let f = compute(&s, &group(3, Some(10), None), None);
        assert_eq!(f.trimmed_undelivered, None);
        s.max_deleted_entry_id = Some(id(20));
        let f = compute(&s, &group(0, Some(10), None), None);
        assert_eq!(
            f.trimmed_undelivered, None,
            "deletions make the loss unknown"
        );
    }

    #[test]
    fn null_lag_small_range_is_counted_exactly() {
        let s = stream(10, 1, 10);
        let g = group(7, None, None);
        assert_eq!(sample_request(&s, &g, 100), Some(100));
        let f = compute(
            &s,
            &g,
            Some(&UndeliveredSample {
                ids: vec![id(8), id(9), id(10)],
                count: 100,
            }),
        );
        assert_eq!(f.lag, Some(3));
        assert_eq!(f.method, LagMethod::Counted);
        assert!(f.estimated());
    }

    #[test]
    fn null_lag_large_range_is_interpolated_and_clamped() {
        // 1001 entries, one per ms from 1000 to 2000; group at 1499.
        let s = stream(1001, 1000, 2000);
        let g = group(1499, None, None);
        let ids: Vec<StreamId> = (1500..1600).map(id).collect();
        let f = compute(&s, &g, Some(&UndeliveredSample { ids, count: 100 }));
        assert_eq!(f.lag, Some(501));
        assert_eq!(f.method, LagMethod::Interpolated);
        assert!(f.estimated());
        // A window with a burst at the end still yields at least k.
        let s2 = stream(1001, 1000, 100_000);
        let ids: Vec<StreamId> = (99_000..99_100).map(id).collect();
        let f2 = compute(
            &s2,
            &group(98_999, None, None),
            Some(&UndeliveredSample { ids, count: 100 }),
        );
        assert_eq!(f2.lag, Some(100));
    }

    #[test]
    fn null_lag_without_sample_is_unknown_not_zero() {
        let s = stream(10, 1, 10);
        let f = compute(&s, &group(3, None, None), None);
        assert_eq!(f.lag, None);
        assert_eq!(f.method, LagMethod::Unknown);
        assert!(f.estimated());
    }

    #[test]
    fn report_larger_than_length_is_not_trusted() {
        let s = stream(10, 1, 10);
        let g = group(5, Some(50), None);
        assert_eq!(sample_request(&s, &g, 100), Some(100));
        let f = compute(
            &s,
            &g,
            Some(&UndeliveredSample {
                ids: (6..=10).map(id).collect(),
                count: 100,
            }),
        );
        assert_eq!((f.lag, f.method), (Some(5), LagMethod::Counted));
    }

    #[test]
    fn emptied_stream_reports_loss_when_counters_allow() {
        let mut s = stream(0, 0, 10);
        s.entries_added = Some(10);
        let f = compute(&s, &group(4, Some(6), Some(4)), None);
        assert_eq!((f.lag, f.trimmed_undelivered), (Some(0), Some(6)));
        let caught = compute(&s, &group(10, Some(0), Some(10)), None);
        assert_eq!(caught.trimmed_undelivered, Some(0));
    }

    #[test]
    fn setid_into_the_future_means_nothing_undelivered() {
        let s = stream(10, 1, 10);
        let g = group(99, None, None);
        assert_eq!(sample_request(&s, &g, 100), None);
        assert_eq!(compute(&s, &g, None).lag, Some(0));
    }

    #[test]
    fn sequence_only_ids_interpolate_on_seq() {
        let mut s = stream(1000, 0, 0);
        s.first_entry_id = Some(StreamId::new(5, 1));
        s.last_entry_id = Some(StreamId::new(5, 1000));
        s.last_generated_id = StreamId::new(5, 1000);
        let mut g = group(0, None, None);
        g.last_delivered_id = StreamId::new(5, 400);
        let ids: Vec<StreamId> = (401..501).map(|q| StreamId::new(5, q)).collect();
        let f = compute(&s, &g, Some(&UndeliveredSample { ids, count: 100 }));
        assert_eq!(f.lag, Some(600));
    }
}
