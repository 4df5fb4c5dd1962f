//! Walking the groups of the targets that are up, and the labels of a
//! group's series: what most families of the renderer share.

use crate::snapshot::{GroupState, Name, StreamState, TargetSnapshot};

pub(super) type Label<'a> = (&'static str, &'a [u8]);

pub(super) fn group_labels<'a>(
    t: &'a TargetSnapshot,
    stream: &'a Name,
    group: &'a Name,
) -> [Label<'a>; 3] {
    [
        ("target", t.name.as_bytes()),
        ("stream", stream),
        ("group", group),
    ]
}

/// Every group of the targets that are up, with its target and stream.
pub(super) fn groups_of<'a>(
    up: &'a [&'a TargetSnapshot],
) -> impl Iterator<
    Item = (
        &'a TargetSnapshot,
        &'a Name,
        &'a StreamState,
        &'a Name,
        &'a GroupState,
    ),
> {
    up.iter().flat_map(|t| {
        t.streams
            .iter()
            .flat_map(move |(s, st)| st.groups.iter().map(move |(g, gs)| (*t, s, &**st, g, gs)))
    })
}
