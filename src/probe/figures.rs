//! What the snapshot keeps of the replies the probes decode: plain figures,
//! so the snapshot and the exposition never hold the client's reply types.

use crate::backend::reply::{ConsumerInfo, GroupInfo, StreamInfo};
use crate::snapshot::{ConsumerState, GroupFigures, StreamFigures};

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

/// One consumer of XINFO CONSUMERS.
pub fn consumer(c: ConsumerInfo) -> ConsumerState {
    ConsumerState {
        name: c.name,
        pending: c.pending,
        idle_ms: c.idle_ms,
        inactive_ms: c.inactive_ms,
    }
}
