//! Keyspace events and invalidations: polls made timelier, and quiet
//! streams cheaper, by what the server announces.
//!
//! With `keyspace_events = "auto"` or `client_tracking = "auto"` (both the
//! default) a target's poller runs [`run`]: one subscription per primary
//! (the backend's [`TargetClient::subscribe`], a connection of its own) to
//! the keyevent channels of stream commands and `del`, and to the
//! invalidations of the node's poll connection (see the backend's
//! `tracking`). Redis publishes keyevents only when its
//! `notify-keyspace-events` has `E`, `t` (or `A`) and `g`; the exporter
//! never changes that, and without it nothing arrives and nothing changes.
//! Invalidations need no configuration: each says that a stream the poll
//! connection read has changed since (`XADD`, `XDEL`, `XTRIM`, `DEL`, …).
//!
//! Whatever the message, the stream's quiet read no longer stands for it
//! (see the stream probe's `quiet`). An invalidation of a watched stream
//! where a group was behind at the last poll asks for an extra poll at once,
//! like a removal event: it may be a trim or deletion of entries the group
//! has not read, which only a poll before the group reads past proves on
//! Redis 8 and Valkey. An invalidation where every group was caught up asks
//! for nothing more (the next scheduled poll reads the stream).
//!
//! An event for a watched stream (`xadd` is not subscribed: it is
//! ordinary traffic the schedule covers) asks for an extra poll of that
//! stream, at the front of the budget, at most one per stream per
//! [`EXTRA_POLL_SPACING`] ([`Debounce`]), within [`EXTRA_POLL_SHARE`] of the
//! target's command budget ([`ExtraBudget`]). A stream event on a key not yet
//! watched that the target's patterns match watches it at once, without
//! waiting for discovery. Nothing else depends on events: the loss ledgers
//! prove losses across any two polls, and events only bring a poll closer
//! to the fault (a stream born and faulted between two discoveries is seen
//! before the fault instead of after).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backend::{KeyEvent, Listen, NodeAddr, Notice, PRIORITY, TargetClient, TargetError};
use crate::config::{ClientTracking, KeyspaceEvents};
use crate::probe::{ProbeContext, stream};
use crate::snapshot::Name;

/// The least time between two extra polls of one stream.
pub const EXTRA_POLL_SPACING: Duration = Duration::from_secs(1);

/// The share of a target's `commands_per_second` extra polls may spend:
/// they run at the front of the budget, so without a share of their own a
/// flood of events (`~` trimming publishes `xtrim` every 40–100 entries on
/// every busy capped stream) would starve the scheduled probes. Beyond it,
/// the streams asked for wait for their scheduled poll (the loss ledgers
/// prove losses across any two polls; events only bring a poll closer).
pub const EXTRA_POLL_SHARE: f64 = 0.2;

/// What extra polls may spend: a token bucket of commands filled at
/// [`EXTRA_POLL_SHARE`] of the target's budget, holding at most one
/// second's worth. A batch of polls runs while the bucket is not empty and
/// is charged what it really sent afterwards (the bucket may go below zero,
/// and the next batch waits until it refills).
#[derive(Debug)]
pub(crate) struct ExtraBudget {
    rate: f64,
    tokens: f64,
    at: Instant,
}

impl ExtraBudget {
    pub(crate) fn new(commands_per_second: u32, now: Instant) -> ExtraBudget {
        let rate = f64::from(commands_per_second) * EXTRA_POLL_SHARE;
        ExtraBudget {
            rate,
            tokens: rate,
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.rate);
        self.at = now;
    }

    /// Whether a batch may run at `now`.
    pub(crate) fn allows(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens > 0.0
    }

    /// Charges the commands a batch sent.
    pub(crate) fn spend(&mut self, commands: u64, now: Instant) {
        self.refill(now);
        self.tokens -= commands as f64;
    }
}

/// How often a subscription's connection is checked with `PING`, and the
/// primaries are listed again (a failover or resharding changes them).
const HEALTH_CHECK: Duration = Duration::from_secs(10);

/// The first wait before subscribing again after a failure; it doubles up
/// to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);
/// How often a subscription the ACL refused (NOPERM) is tried again: the
/// user's permissions change rarely, and each try is a refused command in
/// the server's ACL log.
const RETRY_REFUSED: Duration = Duration::from_secs(600);

/// The most events that wait for [`on_event`]: a subscription's reader
/// only moves each message into this queue (the redis crate's own channel
/// between the socket and the reader is unbounded, so the reader must never
/// wait), and when the handler falls behind (the target's state is locked by
/// a probe) the newest events are dropped and counted. A dropped event
/// costs only timeliness: its stream waits for its scheduled poll, as with
/// `keyspace_events = "off"`, and the loss ledgers prove losses across any
/// two polls without it.
pub const EVENT_QUEUE_EVENTS: usize = 4096;

/// The most key bytes the queued events may hold between them (a key may be
/// up to 64 KiB long: 4,096 of those would be 256 MiB).
pub const EVENT_QUEUE_KEY_BYTES: usize = 4 * 1024 * 1024;

/// Events waiting for [`on_event`], within [`EVENT_QUEUE_EVENTS`] and
/// [`EVENT_QUEUE_KEY_BYTES`].
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    waiting: VecDeque<KeyEvent>,
    key_bytes: usize,
}

impl EventQueue {
    /// Queues `event`; false when the queue is full and it was dropped.
    pub(crate) fn push(&mut self, event: KeyEvent) -> bool {
        let bytes = event.key.len();
        if self.waiting.len() >= EVENT_QUEUE_EVENTS
            || self.key_bytes + bytes > EVENT_QUEUE_KEY_BYTES
        {
            return false;
        }
        self.key_bytes += bytes;
        self.waiting.push_back(event);
        true
    }

    /// The oldest event waiting.
    pub(crate) fn pop(&mut self) -> Option<KeyEvent> {
        let event = self.waiting.pop_front()?;
        self.key_bytes -= event.key.len();
        Some(event)
    }
}

/// What an event asks of the poller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Nothing.
    Ignore,
    /// An extra poll of the (watched) stream.
    Poll,
    /// Watch the new stream now, then poll it.
    WatchAndPoll,
}

/// What `event` on a key asks: `watched` says whether the key is watched,
/// `matches` whether the target's patterns match it.
pub(crate) fn action(event: &str, watched: bool, matches: bool) -> Action {
    // Every event starting with `x` comes from a stream command, so its key
    // is a stream; `del` can be any key.
    let stream_event = event.starts_with('x');
    if watched {
        if event == "xadd" {
            Action::Ignore
        } else {
            Action::Poll
        }
    } else if stream_event && matches {
        Action::WatchAndPoll
    } else {
        Action::Ignore
    }
}

/// Extra polls asked for, at most one per stream per
/// [`EXTRA_POLL_SPACING`]: the first event polls at once, later ones within
/// the spacing are folded into one poll when it has passed (so the last
/// event of a burst is always followed by a poll).
#[derive(Debug, Default)]
pub(crate) struct Debounce {
    /// When each stream was last polled on request.
    last: HashMap<Name, Instant>,
    /// Polls asked for and when they are due.
    due: BTreeMap<Name, Instant>,
}

impl Debounce {
    /// Asks for a poll of `stream`.
    pub(crate) fn request(&mut self, stream: Name, now: Instant) {
        let at = self
            .last
            .get(&stream)
            .map_or(now, |&last| (last + EXTRA_POLL_SPACING).max(now));
        self.due.entry(stream).or_insert(at);
    }

    /// When the next poll is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.due.values().min().copied()
    }

    /// The streams due at `now`, marked polled.
    pub(crate) fn take_due(&mut self, now: Instant) -> Vec<Name> {
        let ready: Vec<Name> = self
            .due
            .iter()
            .filter(|&(_, &at)| at <= now)
            .map(|(s, _)| s.clone())
            .collect();
        for s in &ready {
            self.due.remove(s);
            self.last.insert(s.clone(), now);
        }
        // A stream polled longer ago than the spacing needs no memory.
        self.last
            .retain(|_, &mut at| now.saturating_duration_since(at) < EXTRA_POLL_SPACING);
        ready
    }
}

/// What the subscriptions share with the extra-poll loop.
#[derive(Debug, Default)]
struct Shared {
    /// Polls asked by removals (`xtrim`, `xdel`), spaced on their own: a
    /// poll that finds a group still behind a trim or before a deletion is
    /// what proves a loss that the group reads past a moment later, so no
    /// other event's poll may delay it.
    removals: Mutex<Debounce>,
    debounce: Mutex<Debounce>,
    wake: Notify,
    /// Events read from the subscriptions, waiting for [`on_event`].
    events: Mutex<EventQueue>,
    /// Wakes [`handle_events`] when an event is queued.
    queued: Notify,
    /// Each subscribed node and whether its subscription is healthy.
    health: Mutex<BTreeMap<NodeAddr, bool>>,
}

impl Shared {
    fn debounce(&self) -> std::sync::MutexGuard<'_, Debounce> {
        self.debounce.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn removals(&self) -> std::sync::MutexGuard<'_, Debounce> {
        self.removals.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues an event for [`handle_events`], or drops and counts it when
    /// the queue is full (a dropped invalidation makes every quiet read
    /// stand for nothing).
    fn queue(&self, client: &TargetClient, event: KeyEvent) {
        let invalidation = event.event == INVALIDATE;
        let queued = self
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event);
        if queued {
            self.queued.notify_one();
        } else if invalidation {
            client.tracking().lost(true);
        } else {
            client.stats().keyspace_event_dropped();
        }
    }

    /// The oldest queued event, once there is one.
    async fn next_event(&self) -> KeyEvent {
        loop {
            let queued = self.queued.notified();
            if let Some(event) = self.events.lock().unwrap_or_else(|p| p.into_inner()).pop() {
                return event;
            }
            queued.await;
        }
    }

    /// When the next extra poll is due, of either kind.
    fn next_due(&self) -> Option<Instant> {
        let (a, b) = (self.debounce().next_due(), self.removals().next_due());
        a.into_iter().chain(b).min()
    }

    /// The streams due at `now`, once each.
    fn take_due(&self, now: Instant) -> Vec<Name> {
        let mut due = self.removals().take_due(now);
        due.extend(self.debounce().take_due(now));
        due.sort_unstable();
        due.dedup();
        due
    }

    /// Records a node's health; true when the target's verdict changed.
    fn set_health(&self, client: &TargetClient, node: &NodeAddr, healthy: Option<bool>) -> bool {
        let mut health = self.health.lock().unwrap_or_else(|p| p.into_inner());
        let before = !health.is_empty() && health.values().all(|&h| h);
        match healthy {
            Some(h) => {
                health.insert(node.clone(), h);
            }
            None => {
                health.remove(node);
            }
        }
        let after = !health.is_empty() && health.values().all(|&h| h);
        client.stats().keyspace_events_active(after);
        before != after
    }
}

/// Subscribes to the target's keyevents and runs the extra polls they ask
/// for, until `shutdown`. `publish` makes the poller publish the target's
/// snapshot (after an extra poll, or when the subscription's health
/// changes).
pub(crate) async fn run(
    ctx: ProbeContext,
    publish: impl Fn() + Send + Sync + 'static,
    shutdown: CancellationToken,
) {
    let shared = Arc::new(Shared::default());
    let publish = Arc::new(publish);
    let listen = Listen {
        keyevents: ctx.target.keyspace_events == KeyspaceEvents::Auto,
        invalidations: ctx.target.client_tracking == ClientTracking::Auto,
    };
    if listen.keyevents {
        ctx.client.stats().keyspace_events_active(false);
    }
    ctx.client.stats().extra_polls(0, 0);
    let mut tasks = JoinSet::new();
    tasks.spawn(handle_events(ctx.clone(), shared.clone(), shutdown.clone()));
    tasks.spawn(extra_polls(
        ctx.clone(),
        shared.clone(),
        publish.clone(),
        shutdown.clone(),
    ));
    let mut subscribed: BTreeMap<NodeAddr, CancellationToken> = BTreeMap::new();
    loop {
        // The primaries, again every health check: a failover or a
        // resharding moves the subscriptions with them.
        if let Ok(nodes) = ctx.client.nodes().await {
            let wanted: BTreeSet<NodeAddr> = nodes.into_iter().collect();
            subscribed.retain(|node, stop| {
                let keep = wanted.contains(node);
                if !keep {
                    stop.cancel();
                }
                keep
            });
            for node in wanted {
                if subscribed.contains_key(&node) {
                    continue;
                }
                let stop = shutdown.child_token();
                subscribed.insert(node.clone(), stop.clone());
                tasks.spawn(subscription(
                    ctx.clone(),
                    node,
                    listen,
                    shared.clone(),
                    publish.clone(),
                    stop,
                ));
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(HEALTH_CHECK) => {}
        }
    }
    while tasks.join_next().await.is_some() {}
}

/// The event name an invalidation is queued under.
const INVALIDATE: &str = "invalidate";

/// One node's subscription: subscribes, hands its messages on, checks it
/// with `PING`, and subscribes again with a backoff when it fails or drops.
/// Its client ID is registered with the client's tracking while it is
/// subscribed to the invalidations, and withdrawn when it is not.
async fn subscription(
    ctx: ProbeContext,
    node: NodeAddr,
    listen: Listen,
    shared: Arc<Shared>,
    publish: Arc<impl Fn() + Send + Sync + 'static>,
    stop: CancellationToken,
) {
    let name = &ctx.target.name;
    let tracking = ctx.client.tracking();
    let mut retry = RETRY_FIRST;
    let mut failing_logged = false;
    let mut refusals_logged = false;
    let health = |healthy: Option<bool>| {
        if listen.keyevents && shared.set_health(&ctx.client, &node, healthy) {
            publish();
        }
    };
    health(Some(false));
    loop {
        let attempt = tokio::select! {
            _ = stop.cancelled() => break,
            r = ctx.client.subscribe(&node, listen) => r,
        };
        match attempt {
            Err(e) => {
                // Refused by the ACL (or the credentials): retrying soon
                // changes nothing.
                let refused = e.kind() == crate::vocab::ErrorKind::Auth;
                if !failing_logged {
                    if refused {
                        tracing::warn!(redis_target = %name, %node, error = %e, retry = ?RETRY_REFUSED, "subscriptions: the ACL user may not subscribe; keyspace events and client tracking are off for this node and polls keep their schedule (the user needs +subscribe, the keyevent channels, +client|id, +client|tracking and &__redis__:invalidate, see docs/keyspace-events.md)");
                    } else if matches!(e, TargetError::ServerFull { .. }) {
                        tracing::warn!(redis_target = %name, %node, error = %e, ?retry, "subscriptions: the server is at its maxclients and refused the subscription's connection; polls keep their schedule (keyspace events and client tracking need one more connection per primary: raise maxclients, or set keyspace_events and client_tracking = \"off\")");
                    } else {
                        tracing::warn!(redis_target = %name, %node, error = %e, ?retry, "subscriptions: cannot subscribe; polls keep their schedule");
                    }
                    failing_logged = true;
                }
                if refused && listen.invalidations && tracking.refused(&node, Instant::now()) {
                    tracing::debug!(redis_target = %name, %node, "client tracking: refused with the subscription");
                }
                let wait = if refused { RETRY_REFUSED } else { retry };
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(wait) => {}
                }
                retry = (retry * 2).min(RETRY_MAX);
            }
            Ok(mut sub) => {
                tracing::info!(redis_target = %name, %node, keyevents = listen.keyevents, invalidations = sub.redirect.is_some(), "subscribed (keyevents arrive only when the server's notify-keyspace-events has E, t or A, and g)");
                if !sub.refused.is_empty() && !refusals_logged {
                    tracing::warn!(redis_target = %name, %node, refused = ?sub.refused, "subscriptions: part refused; the rest stands (see docs/keyspace-events.md for the ACL)");
                    refusals_logged = true;
                }
                if listen.invalidations && sub.redirect.is_none() {
                    tracking.refused(&node, Instant::now());
                }
                failing_logged = false;
                retry = RETRY_FIRST;
                tracking.register(&node, sub.redirect);
                let removals = ctx.client.removals();
                let (connection, barrier_asked) =
                    sub.keyevents().then(|| removals.connected(&node)).unzip();
                let notices = Notices {
                    client: &ctx.client,
                    shared: &shared,
                    removals,
                    node: &node,
                };
                health(Some(true));
                publish();
                let mut check =
                    tokio::time::interval_at(Instant::now() + HEALTH_CHECK, HEALTH_CHECK);
                let stopped = loop {
                    let asked = async {
                        match &barrier_asked {
                            Some(ask) => ask.notified().await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        _ = stop.cancelled() => break true,
                        notice = sub.next(&ctx.client) => match notice {
                            Some(notice) => notices.on_notice(notice),
                            None => break false,
                        },
                        _ = check.tick() => if !sub.ping(&ctx.client).await {
                            break false;
                        },
                        () = asked => {
                            let asked = removals.asked(&node);
                            if !sub.ping(&ctx.client).await || !notices.drain(&mut sub) {
                                break false;
                            }
                            if let Some(connection) = connection {
                                removals.answer(&node, connection, asked);
                            }
                        },
                    }
                };
                if let Some(connection) = connection {
                    removals.disconnected(&node, connection);
                }
                tracking.register(&node, None);
                health(Some(false));
                publish();
                if stopped {
                    sub.close(&ctx.client).await;
                    break;
                }
                match sub.violation() {
                    Some(reason) => {
                        tracing::warn!(redis_target = %name, %node, %reason, "subscriptions: a message broke the protocol; subscribing again")
                    }
                    None => {
                        tracing::warn!(redis_target = %name, %node, "subscriptions: the connection dropped; subscribing again")
                    }
                }
            }
        }
    }
    tracking.unregister(&node);
    health(None);
}

/// Where one node's subscription hands its messages.
struct Notices<'a> {
    client: &'a TargetClient,
    shared: &'a Shared,
    removals: &'a crate::backend::RemovalLog,
    node: &'a NodeAddr,
}

impl Notices<'_> {
    /// Hands one message on: counted, recorded in the removal log when it
    /// is a removal (before the queue, which may drop it), and queued for
    /// [`on_event`] (a flush, or an invalidation whose key could not be
    /// kept, makes every quiet read stand for nothing at once).
    fn on_notice(&self, notice: Notice) {
        let client = self.client;
        match notice {
            Notice::KeyEvent(event) => {
                client.stats().keyspace_event(event.event.starts_with('x'));
                self.removals.record(self.node, &event);
                self.shared.queue(client, event);
            }
            Notice::KeyEventUnreadable => self.removals.unreadable(self.node),
            Notice::Invalidated(keys) => {
                for key in keys {
                    client.tracking().invalidated();
                    let event = KeyEvent {
                        event: INVALIDATE.to_string(),
                        key,
                    };
                    self.shared.queue(client, event);
                }
            }
            Notice::InvalidatedAll => {
                client.tracking().invalidated();
                client.tracking().lost(false);
            }
        }
    }

    /// Hands on every message already read from the connection (after a
    /// `PING`'s answer: every message published before it); false when the
    /// connection is gone.
    fn drain(&self, sub: &mut crate::backend::Subscription) -> bool {
        loop {
            match sub.next(self.client).now_or_never() {
                Some(Some(notice)) => self.on_notice(notice),
                Some(None) => return false,
                None => return true,
            }
        }
    }
}

/// Takes the queued events one by one, until `shutdown`.
async fn handle_events(ctx: ProbeContext, shared: Arc<Shared>, shutdown: CancellationToken) {
    loop {
        let event = tokio::select! {
            _ = shutdown.cancelled() => return,
            e = shared.next_event() => e,
        };
        on_event(&ctx, &shared, event);
    }
}

/// Asks for what an event means.
fn on_event(ctx: &ProbeContext, shared: &Shared, event: KeyEvent) {
    let key: Name = Arc::from(event.key.as_slice());
    if event.event == INVALIDATE {
        let behind = {
            let mut state = ctx.state();
            state.quiet.forget(&key);
            state.is_watched(&key) && state.any_group_behind(&key)
        };
        if behind {
            shared.removals().request(key, Instant::now());
            shared.wake.notify_one();
        }
        return;
    }
    let asked = {
        let mut state = ctx.state();
        // Whatever it did, the stream's last read no longer stands for it.
        state.quiet.forget(&key);
        let watched = state.is_watched(&key);
        if crate::loss::sets_from_outside(&event.event) {
            state.set_outside(key.clone());
        }
        // The patterns matter only for a key not watched yet.
        let matches = !watched && ctx.target.patterns.iter().any(|p| p.matches(&key));
        match action(&event.event, watched, matches) {
            Action::Ignore => false,
            Action::Poll => true,
            Action::WatchAndPoll => state.watch_now(&ctx.config, &ctx.target, key.clone()),
        }
    };
    if asked {
        if matches!(event.event.as_str(), "xtrim" | "xdel") {
            shared.removals().request(key, Instant::now());
        } else {
            shared.debounce().request(key, Instant::now());
        }
        shared.wake.notify_one();
    }
}

/// Runs the extra polls as they fall due, at the front of the budget.
async fn extra_polls(
    ctx: ProbeContext,
    shared: Arc<Shared>,
    publish: Arc<impl Fn() + Send + Sync + 'static>,
    shutdown: CancellationToken,
) {
    let mut budget = ExtraBudget::new(ctx.config.limits.commands_per_second, Instant::now());
    loop {
        let next = shared.next_due();
        let wait = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = shared.wake.notified() => {}
            _ = wait => {}
        }
        let due = shared.take_due(Instant::now());
        if due.is_empty() {
            continue;
        }
        let stats = ctx.client.stats();
        if !budget.allows(Instant::now()) {
            stats.extra_polls(0, due.len() as u64);
            continue;
        }
        let sent = stats.commands_sent();
        let polled = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = PRIORITY.scope(0, stream::run_some(&ctx, &due)) => r,
        };
        budget.spend(stats.commands_sent().saturating_sub(sent), Instant::now());
        stats.extra_polls(due.len() as u64, 0);
        if let Err(e) = polled {
            // The scheduled probes say whether the target is down.
            tracing::debug!(redis_target = %ctx.target.name, error = %e, "extra stream poll failed");
        }
        publish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_events_ask() {
        assert_eq!(action("xadd", true, true), Action::Ignore);
        for e in [
            "xdel",
            "xtrim",
            "xsetid",
            "xgroup-setid",
            "xgroup-create",
            "xgroup-destroy",
            "del",
        ] {
            assert_eq!(action(e, true, true), Action::Poll, "{e}");
        }
        assert_eq!(action("xadd", false, true), Action::WatchAndPoll);
        assert_eq!(action("xgroup-create", false, true), Action::WatchAndPoll);
        assert_eq!(action("xadd", false, false), Action::Ignore);
        // A deleted key that was not watched may not even be a stream.
        assert_eq!(action("del", false, true), Action::Ignore);
    }

    #[test]
    fn the_event_queue_is_bounded_by_events_and_by_key_bytes() {
        let event = |key_len: usize| KeyEvent {
            event: "xtrim".into(),
            key: vec![b'k'; key_len],
        };
        let mut q = EventQueue::default();
        for _ in 0..EVENT_QUEUE_EVENTS {
            assert!(q.push(event(10)));
        }
        assert!(!q.push(event(10)), "full by count: dropped");
        assert_eq!(q.pop(), Some(event(10)));
        assert!(q.push(event(10)), "room for one again");
        while q.pop().is_some() {}
        assert_eq!(q.key_bytes, 0);
        // Keys of 64 KiB: 64 of them fill the 4 MiB.
        let long = 64 * 1024;
        for _ in 0..EVENT_QUEUE_KEY_BYTES / long {
            assert!(q.push(event(long)));
        }
        assert!(!q.push(event(long)), "full by bytes");
        assert!(!q.push(event(1)), "not a byte more");
        q.pop();
        assert!(q.push(event(1)));
    }

    #[test]
    fn extra_polls_spend_their_share_of_the_budget() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        // 500 commands a second: 100 for extra polls, one second's worth.
        let mut b = ExtraBudget::new(500, t0);
        assert!(b.allows(t0));
        b.spend(60, t0);
        assert!(b.allows(t0), "40 left");
        b.spend(70, t0);
        assert!(!b.allows(t0), "30 owed");
        // 0.3 s repays the debt; 0.31 s leaves a command.
        assert!(!b.allows(t0 + Duration::from_millis(300)));
        assert!(b.allows(t0 + Duration::from_millis(310)));
        // Quiet for a minute: one second's worth, not sixty.
        let later = t0 + s(60);
        assert!(b.allows(later));
        b.spend(100, later);
        assert!(!b.allows(later));
        // Over a long flood, what runs is the share: 100 commands a second.
        let mut spent = 0;
        let mut at = later;
        for _ in 0..1000 {
            at += Duration::from_millis(10);
            if b.allows(at) {
                b.spend(8, at);
                spent += 8;
            }
        }
        assert!((1000..=1100).contains(&spent), "{spent} in 10 s");
    }

    #[test]
    fn at_most_one_extra_poll_per_stream_per_spacing() {
        let t0 = Instant::now();
        let s: Name = Arc::from(&b"s"[..]);
        let other: Name = Arc::from(&b"o"[..]);
        let mut d = Debounce::default();
        assert_eq!(d.next_due(), None);
        d.request(s.clone(), t0);
        assert_eq!(d.take_due(t0), vec![s.clone()]);
        // Three events within the spacing: one poll, when it has passed.
        let ms = Duration::from_millis;
        for at in [ms(10), ms(200), ms(900)] {
            d.request(s.clone(), t0 + at);
        }
        d.request(other.clone(), t0 + ms(200));
        assert_eq!(d.next_due(), Some(t0 + ms(200)));
        assert_eq!(d.take_due(t0 + ms(200)), vec![other.clone()]);
        assert_eq!(d.next_due(), Some(t0 + EXTRA_POLL_SPACING));
        assert!(d.take_due(t0 + ms(999)).is_empty());
        assert_eq!(d.take_due(t0 + EXTRA_POLL_SPACING), vec![s.clone()]);
        assert_eq!(d.next_due(), None);
        // Long after, an event polls at once again.
        let later = t0 + Duration::from_secs(5);
        d.request(s.clone(), later);
        assert_eq!(d.take_due(later), vec![s]);
    }
}
