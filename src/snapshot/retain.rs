//! Pruning a shared map without copying it for nothing: a published
//! snapshot keeps its maps while the next one drops what vanished.

use std::collections::BTreeMap;
use std::sync::Arc;

/// Keeps the entries whose key passes `keep`, copying a map shared with a
/// published snapshot only when something is to be removed.
pub fn retain_keys<K: Ord + Clone, V: Clone>(
    map: &mut Arc<BTreeMap<K, V>>,
    keep: impl Fn(&K) -> bool,
) {
    if map.keys().any(|k| !keep(k)) {
        Arc::make_mut(map).retain(|k, _| keep(k));
    }
}
