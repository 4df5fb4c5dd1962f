//! Two ordered maps walked together, key by key: how a family joins what
//! two probes know of the same groups without collecting either.

use std::collections::BTreeMap;

/// The keys of two maps in order, each with the values the maps hold.
pub(super) fn outer_join<'m, K: Ord, A, B>(
    a: &'m BTreeMap<K, A>,
    b: &'m BTreeMap<K, B>,
) -> impl Iterator<Item = (&'m K, Option<&'m A>, Option<&'m B>)> {
    let (mut a, mut b) = (a.iter().peekable(), b.iter().peekable());
    std::iter::from_fn(move || {
        let order = match (a.peek(), b.peek()) {
            (None, None) => return None,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some((ka, _)), Some((kb, _))) => ka.cmp(kb),
        };
        Some(match order {
            std::cmp::Ordering::Less => {
                let (k, v) = a.next()?;
                (k, Some(v), None)
            }
            std::cmp::Ordering::Greater => {
                let (k, v) = b.next()?;
                (k, None, Some(v))
            }
            std::cmp::Ordering::Equal => {
                let (k, va) = a.next()?;
                (k, Some(va), b.next().map(|(_, vb)| vb))
            }
        })
    })
}
