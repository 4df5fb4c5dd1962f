//! Anchors of the estimator: the points where Redis's counters pin how many
//! entries were ever added up to an ID, at this poll and at earlier ones.

use super::estimate::Anchor;
use super::reading::Arithmetic;
use crate::vocab::{GroupInfo, StreamInfo};

/// The exact points of a stream's generated-entries curve known at one poll:
/// its last generated ID (entries-added), its first entry when nothing inside
/// the window was deleted (every removed entry lies before it), the groups
/// whose entries-read is right (servers with the current arithmetic), and
/// `earlier`, the last IDs of earlier polls. Empty before 7.0.
pub fn stream_anchors(
    stream: &StreamInfo,
    groups: &[GroupInfo],
    arithmetic: Arithmetic,
    earlier: &[Anchor],
) -> Vec<Anchor> {
    let Some(added) = stream.entries_added else {
        return Vec::new();
    };
    let mut anchors: Vec<Anchor> = earlier.to_vec();
    anchors.push(Anchor {
        id: stream.last_generated_id,
        generated: added,
    });
    if let (Some(first), Some(deleted)) = (stream.first_entry_id, stream.max_deleted_entry_id) {
        if deleted < first {
            if let Some(before) = stream.removed() {
                anchors.push(Anchor {
                    id: first,
                    generated: before + 1,
                });
            }
        }
    }
    if arithmetic == Arithmetic::Current {
        anchors.extend(groups.iter().filter_map(|g| {
            Some(Anchor {
                id: g.last_delivered_id,
                generated: g.entries_read?,
            })
        }));
    }
    anchors.sort_unstable();
    anchors.dedup_by_key(|a| a.id);
    anchors
}

/// Adds this poll's last ID to a stream's anchor history, keeping at most
/// `cap` points: when full, the point whose removal merges the two
/// smallest neighbouring gaps goes, so the history keeps its detail where
/// entries arrived in bursts. A history the stream contradicts (entries-added
/// went down or the last ID went back: the stream was recreated) restarts.
pub fn remember_anchor(history: &mut Vec<Anchor>, stream: &StreamInfo, cap: usize) {
    let Some(added) = stream.entries_added else {
        history.clear();
        return;
    };
    let now = Anchor {
        id: stream.last_generated_id,
        generated: added,
    };
    if history
        .last()
        .is_some_and(|last| last.id > now.id || last.generated > now.generated)
    {
        history.clear();
    }
    if history.last().is_some_and(|last| last.id == now.id) {
        return;
    }
    history.push(now);
    while history.len() > cap.max(2) {
        let victim = (1..history.len() - 1)
            .min_by_key(|&i| history[i + 1].generated - history[i - 1].generated)
            .unwrap_or(0);
        history.remove(victim);
    }
}
