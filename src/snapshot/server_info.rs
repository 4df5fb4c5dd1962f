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

impl ServerInfo {
    /// Whether the server has `XNACK` (Redis 8.8+), whose groups report
    /// `nacked-count` in `XINFO STREAM … FULL` and nowhere else: the only
    /// servers that command is sent to. Valkey has no `XNACK` yet.
    pub fn has_xnack(&self) -> bool {
        let mut parts = self.version.split('.').map(|p| p.parse::<u64>().ok());
        let (major, minor) = (parts.next().flatten(), parts.next().flatten());
        self.server == "redis" && (major, minor) >= (Some(8), Some(8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xnack_from_redis_8_8_on() {
        let of = |server: &str, version: &str| ServerInfo {
            server: server.into(),
            version: version.into(),
            ..ServerInfo::default()
        };
        for (server, version, has) in [
            ("redis", "8.8.0", true),
            ("redis", "8.10.1", true),
            ("redis", "9.0.0", true),
            ("redis", "8.6.3", false),
            ("redis", "7.0.15", false),
            ("redis", "", false),
            ("valkey", "9.1.2", false),
        ] {
            assert_eq!(of(server, version).has_xnack(), has, "{server} {version}");
        }
    }
}
