//! Keyspace-event subscriptions: a connection of its own per node (a
//! subscribed connection can send nothing but (un)subscriptions and `PING`,
//! so it cannot be the pooled one), opened the one way every connection is
//! ([`Dialer::open`]: the target's credentials and TLS, read through the
//! same bounds, [`super::bounded`]: a key name too long to keep arrives as
//! a null, and the message is left out and counted), subscribed with
//! `SUBSCRIBE` to the keyevent channels of the stream events the exporter
//! uses and `del`, and its messages decoded into [`KeyEvent`]s.
//!
//! [`Dialer::open`]: super::connection::Dialer::open

use std::time::Duration;

use futures_util::StreamExt;
use redis::Value;
use redis::aio::{PubSub, PubSubSink, PubSubStream};

use super::bounded::{BoundedReplies, Violation};
use super::connection::{NodeAddr, data_settings, is_server_full};
use super::target_client::TargetClient;
use crate::backend::command::Command;
use crate::backend::error::TargetError;
use crate::config::Mode;
use crate::vocab::{ErrorKind, SkipKind};

/// One keyevent message: the event's name (`xadd`, `xdel`, `del`, …) and
/// the key it happened to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyEvent {
    /// The event, as Redis names it.
    pub(crate) event: String,
    /// The key.
    pub(crate) key: Vec<u8>,
}

/// The stream events the exporter uses, as `t_stream.c` publishes them
/// (`XDELEX` and `XACKDEL` publish `xdel`). Not `xadd`: it is ordinary
/// traffic the schedule covers, one message per entry added (a third more
/// work for the server per `XADD` at 100k/s, and a flood the subscriber
/// would have to read); a new stream used as a queue is watched on its
/// `xgroup-create`, one without groups at the next discovery.
pub(crate) const STREAM_EVENTS: [&str; 8] = [
    "xtrim",
    "xdel",
    "xsetid",
    "xgroup-create",
    "xgroup-setid",
    "xgroup-destroy",
    "xgroup-createconsumer",
    "xgroup-delconsumer",
];

/// The keyevent channels for database `db`: [`STREAM_EVENTS`] and `del`.
/// Channels, not a pattern: an ACL's `&__keyevent@0__:x*` allows each of
/// them to `SUBSCRIBE`, while `PSUBSCRIBE` must name the ACL's pattern
/// literally.
pub(crate) fn keyevent_channels(db: i64) -> Vec<String> {
    STREAM_EVENTS
        .iter()
        .chain(&["del"])
        .map(|event| format!("__keyevent@{db}__:{event}"))
        .collect()
}

/// The event and key of a keyevent message on `channel`, `None` for a
/// channel that is not a keyevent one.
pub(crate) fn decode_keyevent(channel: &str, payload: &[u8]) -> Option<KeyEvent> {
    let rest = channel.strip_prefix("__keyevent@")?;
    let (_db, event) = rest.split_once("__:")?;
    Some(KeyEvent {
        event: event.to_string(),
        key: payload.to_vec(),
    })
}

/// A subscribed connection to one node.
pub(crate) struct Subscription {
    sink: PubSubSink,
    messages: PubSubStream,
    channels: Vec<String>,
    timeout: Duration,
    violation: Violation,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("channels", &self.channels)
            .finish_non_exhaustive()
    }
}

impl Subscription {
    /// The next keyevent message; `None` once the connection is gone.
    /// Messages on other channels (none are subscribed) are skipped, and so
    /// are those whose key was too long to keep (counted in `client`'s
    /// skipped events).
    pub(crate) async fn next(&mut self, client: &TargetClient) -> Option<KeyEvent> {
        loop {
            let msg = self.messages.next().await?;
            let Ok(Some(key)) = msg.get_payload::<Option<Vec<u8>>>() else {
                client.stats.skipped(SkipKind::Event, 1);
                continue;
            };
            if let Some(event) = decode_keyevent(msg.get_channel_name(), &key) {
                return Some(event);
            }
        }
    }

    /// Why the connection was dropped, when a message broke the protocol.
    pub(crate) fn violation(&self) -> Option<String> {
        self.violation.get().map(str::to_string)
    }

    /// Whether the server still answers on this connection (a `PING`
    /// within the command timeout).
    pub(crate) async fn ping(&mut self, client: &TargetClient) -> bool {
        client.stats.command(Command::Ping.label());
        let answered = tokio::time::timeout(self.timeout, self.sink.ping::<Value>()).await;
        match answered {
            Ok(Ok(_)) => true,
            Ok(Err(_)) => {
                client.stats.error(ErrorKind::Connection);
                false
            }
            Err(_) => {
                client.stats.error(ErrorKind::Timeout);
                false
            }
        }
    }

    /// Unsubscribes (`UNSUBSCRIBE`, within the command timeout) before the
    /// connection is dropped: a clean stop on shutdown or reload.
    pub(crate) async fn close(mut self, client: &TargetClient) {
        let cmd = Command::Unsubscribe {
            channels: self.channels.clone(),
        };
        client.stats.command(cmd.label());
        let _ = tokio::time::timeout(self.timeout, self.sink.unsubscribe(&self.channels)).await;
    }
}

impl TargetClient {
    /// Opens a connection of its own to `addr` (the one way,
    /// [`Dialer::open`], its messages read as such) and subscribes it to
    /// the keyevent channels of the target's database, all within the
    /// command timeout.
    ///
    /// # Errors
    /// When the node cannot be reached, refuses the credentials or the
    /// subscription (`NOPERM` for a user without those channels; a
    /// [`TargetError::ServerFull`] at its `maxclients`), or does not answer
    /// within the command timeout.
    ///
    /// [`Dialer::open`]: super::connection::Dialer::open
    pub(crate) async fn subscribe_keyevents(
        &self,
        addr: &NodeAddr,
    ) -> Result<Subscription, TargetError> {
        let db = match self.target.mode {
            Mode::Cluster { .. } => 0,
            _ => self.target.endpoint.db,
        };
        let channels = keyevent_channels(db);
        let cmd = Command::Subscribe {
            channels: channels.clone(),
        };
        let refused = |e: redis::RedisError| match e.code() {
            Some(_) if is_server_full(&e) => {
                self.stats.error(ErrorKind::Connection);
                TargetError::ServerFull {
                    target: self.target.name.clone(),
                    node: addr.to_string(),
                }
            }
            Some(code) => {
                let kind = ErrorKind::from_server(code, e.detail().unwrap_or_default());
                // A user without the subscribe permissions: a setting, not
                // a failed collection.
                let auth = kind == ErrorKind::NoPerm;
                if !auth {
                    self.stats.error(kind);
                }
                TargetError::Connection {
                    target: self.target.name.clone(),
                    node: addr.to_string(),
                    detail: format!("SUBSCRIBE refused: {e}"),
                    auth,
                }
            }
            None => self.dialer().connection_failure(addr, &e),
        };
        let deadline = tokio::time::Instant::now() + self.timeout;
        let opened = self.dialer().open(
            addr,
            data_settings(&self.target),
            deadline,
            BoundedReplies::subscribed,
            |settings, stream| async move {
                let violation = stream.violation();
                let (mut sink, messages) = PubSub::new(&settings, stream)
                    .await
                    .map_err(refused)?
                    .split();
                self.stats.command(cmd.label());
                sink.subscribe(&channels).await.map_err(refused)?;
                Ok(Subscription {
                    sink,
                    messages,
                    channels,
                    timeout: self.timeout,
                    violation,
                })
            },
        );
        match tokio::time::timeout_at(deadline, opened).await {
            Err(_) => {
                self.stats.error(ErrorKind::Timeout);
                Err(self.dialer().connect_timeout(addr, "SUBSCRIBE"))
            }
            Ok(subscribed) => subscribed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_of_the_target_database() {
        let channels = keyevent_channels(3);
        assert_eq!(channels.len(), 9);
        assert!(channels.contains(&"__keyevent@3__:xtrim".to_string()));
        assert!(channels.contains(&"__keyevent@3__:xgroup-create".to_string()));
        assert!(channels.contains(&"__keyevent@3__:del".to_string()));
        // Every entry added would be a message: not subscribed.
        assert!(!channels.iter().any(|c| c.ends_with(":xadd")));
    }

    #[test]
    fn keyevent_messages_decode_to_event_and_key() {
        assert_eq!(
            decode_keyevent("__keyevent@0__:xgroup-setid", b"orders"),
            Some(KeyEvent {
                event: "xgroup-setid".into(),
                key: b"orders".to_vec()
            })
        );
        assert_eq!(
            decode_keyevent("__keyevent@12__:del", b"a:b"),
            Some(KeyEvent {
                event: "del".into(),
                key: b"a:b".to_vec()
            })
        );
        assert_eq!(decode_keyevent("__keyspace@0__:orders", b"xadd"), None);
        assert_eq!(decode_keyevent("other", b"x"), None);
    }
}
