//! What the estimator may use beyond the group's own sample: the stream's
//! probed milliseconds and its anchors, shared by every group of the stream.

use super::{Anchor, MsEnds};

/// What the estimator may use beyond the group's own sample.
#[derive(Clone, Copy, Debug, Default)]
pub struct Evidence<'a> {
    /// Last sequence numbers of probed milliseconds.
    pub ends: Option<&'a MsEnds>,
    /// Points of the stream's generated-entries curve (see [`stream_anchors`]).
    ///
    /// [`stream_anchors`]: super::stream_anchors
    pub anchors: &'a [Anchor],
}
