//! The consumers over `max_consumers_per_group`, summed under one label
//! value, and a real consumer of that name escaped so the two never collide.

use std::io::Write;

use super::groups::Label;
use crate::metrics::text::Family;

/// The label value of the consumers over `max_consumers_per_group`, summed.
pub(super) const OTHER_CONSUMERS: &str = "__other__";

/// How a real consumer named like [`OTHER_CONSUMERS`] is written, already
/// escaped for the exposition: `\x5f_other__`, its first byte in the `\xNN`
/// form that [`crate::metrics::text::escape_label`] gives only to bytes that are not
/// UTF-8 (and a `\` of a name is doubled), so no other name is written so and
/// the aggregate never collides with it.
const REAL_OTHER_CONSUMER: &str = "\\\\x5f_other__";

/// One sample of a consumer of `group`: every consumer under its name, but
/// one named like the aggregate of the others, which is escaped.
pub(super) fn consumer_sample<W: Write>(
    f: &mut Family<'_, W>,
    group: [Label<'_>; 3],
    name: &[u8],
    value: f64,
) {
    let [l1, l2, l3] = group;
    if name == OTHER_CONSUMERS.as_bytes() {
        f.sample_with_literal(
            &[l1, l2, l3],
            Some(("consumer", REAL_OTHER_CONSUMER)),
            value,
        );
    } else {
        f.sample(&[l1, l2, l3, ("consumer", name)], value);
    }
}
