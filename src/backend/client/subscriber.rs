//! Keyspace-event subscriptions: a connection of its own per node (a
//! subscribed connection can send nothing but (un)subscriptions and `PING`,
//! so it cannot be the pooled one), opened with the target's credentials and
//! TLS like every other, read through the same bounds
//! ([`super::bounded`]: a key name too long to keep arrives as a null, and
//! the message is left out and counted), subscribed with `SUBSCRIBE` to
//! the keyevent channels of the stream events the exporter uses and `del`,
//! and its messages decoded into [`KeyEvent`]s.

use std::time::Duration;

use futures_util::StreamExt;
use redis::Value;
use redis::aio::{PubSub, PubSubSink, PubSubStream};
use tokio::net::TcpStream;

use super::bounded::{BoundedReplies, Violation};
use super::connection::{data_settings, split_addr};
use super::{NodeAddr, TargetClient};
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
    /// Opens a connection of its own to `node` and subscribes it to the
    /// keyevent channels of the target's database.
    ///
    /// # Errors
    /// When the node cannot be reached, refuses the credentials or the
    /// subscription (`NOPERM` for a user without those channels), or does
    /// not answer within the command timeout.
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
        let settings = data_settings(&self.target);
        if settings.password().is_some() {
            self.stats.command("auth");
        }
        if settings.db() != 0 {
            self.stats.command("select");
        }
        let conn_err = |detail: String| TargetError::Connection {
            target: self.target.name.clone(),
            node: addr.to_string(),
            detail,
            auth: false,
        };
        let (host, port) =
            split_addr(addr).ok_or_else(|| conn_err("not a host:port address".into()))?;
        let opened = async {
            let (pubsub, violation) = match &self.tls {
                Some(tls) => {
                    let stream = tls
                        .connect(&host, port)
                        .await
                        .map_err(redis::RedisError::from)?;
                    let stream = BoundedReplies::subscribed(stream);
                    let violation = stream.violation();
                    (PubSub::new(&settings, stream).await?, violation)
                }
                None => {
                    let stream = TcpStream::connect((host.as_str(), port))
                        .await
                        .map_err(redis::RedisError::from)?;
                    let _ = stream.set_nodelay(true);
                    let stream = BoundedReplies::subscribed(stream);
                    let violation = stream.violation();
                    (PubSub::new(&settings, stream).await?, violation)
                }
            };
            let (mut sink, messages) = pubsub.split();
            self.stats.command(cmd.label());
            sink.subscribe(&channels).await?;
            Ok::<_, redis::RedisError>((sink, messages, violation))
        };
        match tokio::time::timeout(self.timeout, opened).await {
            Err(_) => {
                self.stats.error(ErrorKind::Timeout);
                Err(self.connect_timeout(addr, "SUBSCRIBE"))
            }
            Ok(Err(e)) => {
                let err = match e.code() {
                    Some(code) => {
                        let kind = ErrorKind::from_server(code, e.detail().unwrap_or_default());
                        if kind == ErrorKind::NoPerm {
                            // A user without the subscribe permissions: a
                            // setting, not a failed collection.
                            TargetError::Connection {
                                target: self.target.name.clone(),
                                node: addr.to_string(),
                                detail: format!("SUBSCRIBE refused: {e}"),
                                auth: true,
                            }
                        } else {
                            self.stats.error(kind);
                            conn_err(format!("SUBSCRIBE refused: {e}"))
                        }
                    }
                    None => {
                        let err = self.connection_error(addr, &e);
                        self.stats.error(err.kind());
                        err
                    }
                };
                Err(err)
            }
            Ok(Ok((sink, messages, violation))) => Ok(Subscription {
                sink,
                messages,
                channels,
                timeout: self.timeout,
                violation,
            }),
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
