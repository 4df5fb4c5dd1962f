//! Whether a render must check its series for duplicates: only names
//! shortened to the label limit can be written alike, so most renders need
//! not pay for the check.

use crate::metrics::text::needs_escape;
use crate::snapshot::TargetSnapshot;

/// True when two different names could be written alike (only shortened
/// ones can), so every family must check for duplicate series.
pub(super) fn any_name_escapes_alike(up: &[&TargetSnapshot], limit: usize) -> bool {
    let long = |n: &[u8]| needs_escape(n, limit);
    up.iter().any(|t| {
        t.streams
            .iter()
            .any(|(s, st)| long(s) || st.groups.keys().any(|g| long(g)))
            || t.consumers
                .values()
                .any(|c| c.top.iter().any(|c| long(&c.info.name)))
    })
}
