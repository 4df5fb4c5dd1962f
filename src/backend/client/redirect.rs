//! Cluster redirections read: `MOVED` (the slot map is stale: the client
//! counts a `cluster` error, re-reads the map before the next batch and
//! sends the command to the named node) and `ASK` (a slot being migrated:
//! normal during resharding, so the command is sent once to the named node
//! after `ASKING`, and only that `ASKING` is counted), as a [`Decision`]. At
//! most [`MAX_REDIRECTS`] hops are followed per command (the client follows
//! them when it settles a reply).

use super::connection::{NodeAddr, split_addr};

/// How many redirections one command may follow before giving up.
pub(super) const MAX_REDIRECTS: usize = 3;

/// What to do with a server error `code details` from the node at `at`.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Decision {
    /// Not a redirection: the command's own error.
    Refused,
    /// Send the command to `to`, after `ASKING` when `asking`.
    Follow { to: NodeAddr, asking: bool },
    /// A redirection without a usable address: stop following.
    Unreadable,
}

/// Reads a server error: `MOVED <slot> <host:port>` or `ASK <slot>
/// <host:port>`. The host is empty when the server does not know its own
/// address (`cluster-preferred-endpoint-type unknown-endpoint`): it is then
/// the host of `at`, the node just asked.
pub(super) fn decide(code: &str, details: &str, at: &str) -> Decision {
    let asking = match code {
        "MOVED" => false,
        "ASK" => true,
        _ => return Decision::Refused,
    };
    let Some(target) = details.split_whitespace().nth(1) else {
        return Decision::Unreadable;
    };
    let to: NodeAddr = match target.strip_prefix(':') {
        Some(port) => match split_addr(at) {
            Some((host, _)) => format!("{host}:{port}").into(),
            None => return Decision::Unreadable,
        },
        None => target.into(),
    };
    Decision::Follow { to, asking }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn follow(to: &str, asking: bool) -> Decision {
        Decision::Follow {
            to: to.into(),
            asking,
        }
    }

    #[test]
    fn moved_and_ask_name_the_node_to_follow() {
        assert_eq!(
            decide("MOVED", "3999 127.0.0.1:6381", "127.0.0.1:6380"),
            follow("127.0.0.1:6381", false)
        );
        assert_eq!(
            decide("ASK", "3999 10.0.0.2:7002", "10.0.0.1:7000"),
            follow("10.0.0.2:7002", true)
        );
        assert_eq!(
            decide("MOVED", "12182 redis-2.local:6379", "redis-1.local:6379"),
            follow("redis-2.local:6379", false)
        );
    }

    #[test]
    fn an_unknown_endpoint_is_the_host_just_asked() {
        assert_eq!(
            decide("MOVED", "3999 :7001", "10.0.0.1:7000"),
            follow("10.0.0.1:7001", false)
        );
        assert_eq!(
            decide("ASK", "3999 :7001", "[::1]:7000"),
            follow("::1:7001", true)
        );
        // The node just asked has no readable address: nowhere to go.
        assert_eq!(
            decide("MOVED", "3999 :7001", "not-an-address"),
            Decision::Unreadable
        );
    }

    #[test]
    fn a_redirection_without_an_address_is_not_followed() {
        assert_eq!(decide("MOVED", "3999", "a:1"), Decision::Unreadable);
        assert_eq!(decide("ASK", "", "a:1"), Decision::Unreadable);
    }

    #[test]
    fn other_errors_are_the_commands_own() {
        for (code, details) in [
            ("ERR", "unknown command"),
            ("NOGROUP", "No such key 's' or consumer group 'g'"),
            (
                "WRONGTYPE",
                "Operation against a key holding the wrong kind of value",
            ),
            ("NOPERM", "this user has no permissions"),
            ("TRYAGAIN", "Multiple keys request during rehashing of slot"),
            ("CLUSTERDOWN", "The cluster is down"),
            // Case matters: Redis sends the codes in capitals.
            ("moved", "3999 127.0.0.1:6381"),
        ] {
            assert_eq!(decide(code, details, "a:1"), Decision::Refused, "{code}");
        }
    }
}
