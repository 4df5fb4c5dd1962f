//! What the snapshot keeps of `XINFO STREAM` and `XINFO GROUPS`: the figures
//! the exporter renders as the server gave them. A group's own `lag` is left
//! out: the snapshot holds only the lag the stream probe judged
//! ([`crate::lag`]), so nothing can render the server's figure where Redis
//! gets it wrong. The stream's last entry and recorded first entry serve the
//! probes only. Consumers are kept as `XINFO CONSUMERS` decodes them.

use crate::backend::reply::{GroupInfo, StreamInfo};
use crate::snapshot::{GroupFigures, StreamFigures};

/// XINFO STREAM, as the snapshot keeps it.
pub fn stream(info: &StreamInfo) -> StreamFigures {
    StreamFigures {
        length: info.length,
        groups: info.groups,
        last_generated_id: info.last_generated_id,
        first_entry_id: info.first_entry_id,
        entries_added: info.entries_added,
        max_deleted_entry_id: info.max_deleted_entry_id,
        radix_tree_keys: info.radix_tree_keys,
        radix_tree_nodes: info.radix_tree_nodes,
        idempotent_producers: info.idempotence.producers,
        idempotent_ids: info.idempotence.ids,
        idempotent_ids_added: info.idempotence.ids_added,
        idempotent_duplicates: info.idempotence.duplicates,
    }
}

/// One group of XINFO GROUPS (its lag is judged by the stream probe).
pub fn group(group: &GroupInfo) -> GroupFigures {
    GroupFigures {
        consumers: group.consumers,
        pending: group.pending,
        last_delivered_id: group.last_delivered_id,
        entries_read: group.entries_read,
    }
}
