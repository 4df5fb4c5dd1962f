//! Which lag arithmetic a server runs, from its name and version: what
//! decides whether Redis's own count is taken as is or must be proven.

/// Which lag arithmetic a server runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arithmetic {
    /// Redis 8.0.0 and later: `lag` is right whenever it is not nil. These
    /// releases carry the three fixes that make it so: redis#13338 (a
    /// deletion after the group's position), redis#13473 (a group behind a
    /// trim) and redis#13958 (a group that reads again after a trim passed
    /// it re-estimates entries-read; listed among 8.0.0's fixes over
    /// 8.0-RC1 in the release notes, and checked on 8.6 by the tests).
    Current,
    /// Everything else: Redis 7.0.x–7.4.x (7.2.7+ and 7.4.2+ carry the first
    /// two fixes, and no release note of theirs lists redis#13958, so their
    /// lag stays too high after a trim overtook a group that read on),
    /// the 8.0 milestones and release candidates (7.9.x), Valkey, and
    /// servers whose version is unknown: `lag` can keep counting trimmed
    /// entries, so it is trusted only where it can be proven.
    Miscounting,
}

impl Arithmetic {
    /// The arithmetic of a server, from `INFO server` (`redis` or `valkey`
    /// and the server's own version).
    pub fn of(server: &str, version: &str) -> Arithmetic {
        if server != "redis" {
            // Valkey (it reports redis_version 7.2.4) keeps the old code for
            // trimmed groups.
            return Arithmetic::Miscounting;
        }
        let major = version
            .split('.')
            .next()
            .and_then(|p| p.parse::<u64>().ok());
        match major {
            Some(8..) => Arithmetic::Current,
            _ => Arithmetic::Miscounting,
        }
    }
}
