//! The estimator's model for one group, and the estimate it gives: entries
//! generated after the position when anchors pin them, else the retained
//! entries around the sample (see [`super::estimate`]).

use super::estimate;
use super::{Anchor, Evidence, MsEnds, Reading, UndeliveredSample};

/// The estimator's model for one group (see [`estimate`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Model {
    /// Entries generated after the position, between two anchors.
    Generated(Anchor, estimate::Split),
    /// Retained entries around the sample, or the answer it settles.
    Retained(Result<estimate::Split, Option<f64>>),
}

impl Reading<'_> {
    /// The anchors, with the tail's first entry when nothing after the
    /// position was deleted (then the entries generated up to it are
    /// entries-added minus the tail after it).
    pub(super) fn anchors_with_tail(
        &self,
        sample: &UndeliveredSample,
        anchors: &[Anchor],
    ) -> Vec<Anchor> {
        let mut all = anchors.to_vec();
        if let (Some(&t), Some(added)) = (sample.tail.first(), self.stream.entries_added) {
            if let Some(generated) = added.checked_sub(sample.tail.len() as u64 - 1) {
                all.push(Anchor { id: t, generated });
                all.sort_unstable();
                all.dedup_by_key(|a| a.id);
            }
        }
        all
    }

    /// The estimator's model: entries generated after the position when
    /// nothing after it was deleted and anchors surround it, else the
    /// retained entries around the sample.
    pub(super) fn model(&self, sample: &UndeliveredSample, anchors: &[Anchor]) -> Option<Model> {
        let ld = self.group.last_delivered_id;
        let nothing_deleted_after = self.stream.max_deleted_entry_id.is_some_and(|d| d <= ld);
        if nothing_deleted_after && self.stream.entries_added.is_some() {
            if let Some((below, split)) = estimate::generated_split(ld, anchors) {
                return Some(Model::Generated(below, split));
            }
        }
        Some(Model::Retained(estimate::retained_split(
            self.stream.first_entry_id?,
            self.stream.last_entry_id?,
            self.stream.length,
            &sample.ids,
            &sample.tail,
        )))
    }

    /// The estimate, before clamping.
    pub(super) fn estimate(
        &self,
        sample: &UndeliveredSample,
        evidence: &Evidence<'_>,
    ) -> Option<f64> {
        let empty = MsEnds::default();
        let ends = evidence.ends.unwrap_or(&empty);
        let anchors = self.anchors_with_tail(sample, evidence.anchors);
        match self.model(sample, &anchors)? {
            Model::Generated(..) => estimate::generated_after(
                self.group.last_delivered_id,
                &anchors,
                self.stream.entries_added?,
                ends,
            ),
            Model::Retained(_) => estimate::retained_after(
                self.stream.first_entry_id?,
                self.stream.last_entry_id?,
                self.stream.length,
                &sample.ids,
                &sample.tail,
                ends,
            ),
        }
    }
}
