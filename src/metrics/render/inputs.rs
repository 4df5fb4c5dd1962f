//! What a section's output depends on, the maps it reads compared by
//! identity: equal inputs, equal bytes, so the output can be reused.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::snapshot::{Consumers, GroupKey, Name, OldestPending, ScanState, StreamState};

/// One map a section reads, held (so it cannot be freed and its address
/// reused) and compared by identity.
#[derive(Clone, Debug)]
pub(super) enum Input {
    Streams(Arc<BTreeMap<Name, Arc<StreamState>>>),
    OldestPending(Arc<BTreeMap<GroupKey, OldestPending>>),
    PelScans(Arc<BTreeMap<GroupKey, ScanState>>),
    HeadPoison(Arc<BTreeMap<GroupKey, u64>>),
    Nacked(Arc<BTreeMap<GroupKey, u64>>),
    Consumers(Arc<BTreeMap<GroupKey, Arc<Consumers>>>),
}

impl PartialEq for Input {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Input::Streams(a), Input::Streams(b)) => Arc::ptr_eq(a, b),
            (Input::OldestPending(a), Input::OldestPending(b)) => Arc::ptr_eq(a, b),
            (Input::PelScans(a), Input::PelScans(b)) => Arc::ptr_eq(a, b),
            (Input::HeadPoison(a), Input::HeadPoison(b)) | (Input::Nacked(a), Input::Nacked(b)) => {
                Arc::ptr_eq(a, b)
            }
            (Input::Consumers(a), Input::Consumers(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// Everything a section's output depends on: equal inputs, equal bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct SectionInputs {
    pub(super) dedupe: bool,
    pub(super) limit: usize,
    pub(super) maps: Vec<(Arc<str>, Input)>,
}
