//! The label sets and the small conversions the family files share (flags,
//! timestamps, IDs as time), so an entry's source reads as one expression.

use std::sync::atomic::Ordering::Relaxed;
use std::time::SystemTime;

use crate::snapshot::{ExporterState, PelScan, ScanState, StreamState};
use crate::vocab::StreamId;

pub(super) const T: &[&str] = &["target"];
pub(super) const TS: &[&str] = &["target", "stream"];
pub(super) const TSG: &[&str] = &["target", "stream", "group"];
pub(super) const TSGL: &[&str] = &["target", "stream", "group", "le"];
pub(super) const TSGSR: &[&str] = &["target", "stream", "group", "status", "reason"];
pub(super) const TSGCAUSE: &[&str] = &["target", "stream", "group", "cause"];
pub(super) const TSGREASON: &[&str] = &["target", "stream", "group", "reason"];
pub(super) const TSGC: &[&str] = &["target", "stream", "group", "consumer"];
pub(super) const TP: &[&str] = &["target", "probe"];
pub(super) const TCMD: &[&str] = &["target", "command"];

/// 1 or 0.
pub(super) fn flag(on: bool) -> Option<f64> {
    Some(if on { 1.0 } else { 0.0 })
}

/// Seconds since the epoch.
pub(super) fn secs(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The time part of an ID of `stream`, when its IDs carry time.
pub(super) fn id_ts(stream: &StreamState, id: StreamId) -> Option<f64> {
    (stream.time_based_ids && !id.is_zero()).then(|| id.seconds())
}

pub(super) fn last_scan(scan: &ScanState) -> Option<&PelScan> {
    scan.last.as_deref()
}

/// The largest idle time of a scan's entries: 0 when there were none (nothing
/// idles), unknown when none of them had an owner.
pub(super) fn max_idle_seconds(scan: &PelScan) -> Option<f64> {
    match scan.max_idle_ms {
        Some(ms) => Some(ms as f64 / 1000.0),
        None => (scan.entries == 0).then_some(0.0),
    }
}

/// `value`, while `/probe` is on (its cap is then at least 1).
pub(super) fn probe_on(e: &ExporterState, value: u64) -> Option<f64> {
    (e.multi_target.max_targets.load(Relaxed) > 0).then_some(value as f64)
}
