//! One module per scenario; each exposes `run(ctx)`, which drives it until
//! the process stops (`failing` is the consumer loop two of them share).

pub(crate) mod batch;
pub(crate) mod big_pel;
pub(crate) mod crashed_consumer;
pub(crate) mod dead_letter;
pub(crate) mod delete_unread;
pub(crate) mod evictable;
pub(crate) mod failing;
pub(crate) mod healthy;
pub(crate) mod many_streams;
pub(crate) mod noack;
pub(crate) mod outpace;
pub(crate) mod outpace_xdel;
pub(crate) mod poison;
pub(crate) mod recovered;
pub(crate) mod rewind;
pub(crate) mod stopped;
pub(crate) mod trim;
pub(crate) mod trim_catchup;
pub(crate) mod trim_overtake;
pub(crate) mod trim_window;
pub(crate) mod xdel_ghosts;
