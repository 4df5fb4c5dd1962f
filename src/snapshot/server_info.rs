//! What INFO said of the server, as the snapshot keeps it: what the
//! `server_info` metrics are rendered from.

/// What `INFO server` and `INFO memory` said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerInfo {
    /// `redis` or `valkey`.
    pub server: String,
    /// The server's own version (`valkey_version` on Valkey).
    pub version: String,
    /// `standalone`, `cluster` or `sentinel`.
    pub mode: String,
    /// `maxmemory_policy`.
    pub maxmemory_policy: String,
    /// `maxmemory` in bytes.
    pub maxmemory: Option<u64>,
    /// `used_memory` in bytes.
    pub used_memory: Option<u64>,
    /// `run_id`, new at every start of the server (for a cluster, its
    /// primaries' joined): tells the same server, back after an outage,
    /// from another one; empty when unknown.
    pub run_id: String,
}
