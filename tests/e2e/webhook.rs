//! The Alertmanager webhook receiver of the end-to-end test: an HTTP server on a free loopback
//! port that records every notification (one POST: a receiver, a group, its alerts) with the time
//! it arrived. Alertmanager posts to `/<receiver name>`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::routing::post;
use serde_json::Value;

/// One alert of a notification.
#[derive(Clone, Debug)]
pub struct Received {
    /// `firing` or `resolved`.
    pub status: String,
    pub labels: BTreeMap<String, String>,
    /// `summary`, `description`, `runbook_url`: what the on-call reads.
    pub annotations: BTreeMap<String, String>,
}

impl Received {
    pub fn name(&self) -> &str {
        self.label("alertname")
    }

    pub fn label(&self, key: &str) -> &str {
        self.labels.get(key).map_or("", String::as_str)
    }
}

/// One notification: what a pager or a ticket system would receive.
#[derive(Clone, Debug)]
pub struct Notification {
    pub at: Instant,
    /// The receiver of the route (`pager`, `ticket`), from the URL path.
    pub receiver: String,
    pub alerts: Vec<Received>,
}

impl Notification {
    pub fn firing(&self) -> impl Iterator<Item = &Received> {
        self.alerts.iter().filter(|a| a.status == "firing")
    }

    pub fn resolved(&self) -> impl Iterator<Item = &Received> {
        self.alerts.iter().filter(|a| a.status == "resolved")
    }
}

pub type Inbox = Arc<Mutex<Vec<Notification>>>;

pub struct Webhook {
    pub port: u16,
    pub inbox: Inbox,
    /// Notifications that were not valid Alertmanager webhook JSON.
    pub malformed: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Shared {
    inbox: Inbox,
    malformed: Arc<Mutex<Vec<String>>>,
}

async fn receive(
    State(shared): State<Shared>,
    Path(receiver): Path<String>,
    body: Bytes,
) -> &'static str {
    let at = Instant::now();
    let parsed: Result<Value, _> = serde_json::from_slice(&body);
    let Some(alerts) = parsed
        .ok()
        .and_then(|v| v.get("alerts").and_then(Value::as_array).cloned())
    else {
        shared
            .malformed
            .lock()
            .unwrap()
            .push(String::from_utf8_lossy(&body).into_owned());
        return "ok";
    };
    let strings = |alert: &Value, field: &str| -> BTreeMap<String, String> {
        alert
            .get(field)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let alerts = alerts
        .iter()
        .map(|alert| Received {
            status: alert
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            labels: strings(alert, "labels"),
            annotations: strings(alert, "annotations"),
        })
        .collect();
    shared.inbox.lock().unwrap().push(Notification {
        at,
        receiver,
        alerts,
    });
    "ok"
}

pub async fn start() -> Webhook {
    let inbox: Inbox = Arc::default();
    let malformed: Arc<Mutex<Vec<String>>> = Arc::default();
    let shared = Shared {
        inbox: inbox.clone(),
        malformed: malformed.clone(),
    };
    let app = Router::new()
        .route("/{receiver}", post(receive))
        .with_state(shared);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Webhook {
        port,
        inbox,
        malformed,
        task,
    }
}
