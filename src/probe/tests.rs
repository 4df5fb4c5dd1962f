//! The probes' shared behaviour, tested across probes: the budget's notices, the loss
//! ledgers, which probe owns which part of the snapshot, the packed group maps, and the
//! walked milliseconds.

mod budget;
mod ledgers;
mod ownership;
mod packing;
mod walked;
