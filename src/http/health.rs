//! `/readyz` (ready once the exporter serves what it knows, whatever Redis
//! does) and `/-/reload` (the reply of the reload it asked for).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio::sync::oneshot;

use super::state::HttpState;
use crate::config::Config;
use crate::metrics::catalog::EXPORTER_TARGET_UP;

/// `GET /readyz`: 200 once the exporter serves what it knows, that is once
/// the exposition `/metrics` serves holds the outcome of every configured
/// target's first collection (its data, or `target_up 0` and why), and from
/// then on for the life of the process. Redis's health is not the
/// exporter's readiness: it is [`EXPORTER_TARGET_UP`], so an
/// outage of Redis neither takes the exporter out of its Service nor
/// stalls a rollout, and a reload that adds a target does not either. 503
/// only before that first time. The body lists each target still
/// collecting for the first time, down or not ready, with why.
pub(super) fn readyz(state: &HttpState, config: &Config) -> Response {
    let current = state.exposition.current();
    let waiting: Vec<&str> = config
        .targets
        .iter()
        .map(|t| t.name.as_str())
        .filter(|name| {
            current
                .as_ref()
                .is_none_or(|r| !r.collected.contains(*name))
        })
        .collect();
    let ready = state.ready.load(Ordering::Relaxed) || (current.is_some() && waiting.is_empty());
    let mut body = if ready {
        state.ready.store(true, Ordering::Relaxed);
        String::from("ready\n")
    } else {
        format!(
            "not ready: the first collection of every target has not ended yet (in data, or in {} 0)\n",
            EXPORTER_TARGET_UP.name
        )
    };
    if current.is_none() {
        body.push_str("the first exposition is being rendered\n");
    }
    let notes = current.iter().flat_map(|r| r.notes.iter());
    for (target, note) in notes.clone() {
        body.push_str(&format!(
            "{}: {}\n",
            crate::safe_names::printable(target.as_bytes()),
            note
        ));
    }
    if !ready && current.is_some() {
        // Configured, not yet in what /metrics serves (its poller starting).
        for name in waiting {
            if !notes.clone().any(|(target, _)| &**target == name) {
                body.push_str(&format!(
                    "{}: first collection not started\n",
                    crate::safe_names::printable(name.as_bytes())
                ));
            }
        }
    }
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, body).into_response()
}

/// `POST /-/reload`: asks the daemon to reload and answers what it replied.
pub(super) async fn reload(state: &Arc<HttpState>) -> Response {
    let (tx, rx) = oneshot::channel();
    if state.reload.send(tx).await.is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
    }
    match rx.await {
        Ok(Ok(())) => (StatusCode::OK, "reloaded\n").into_response(),
        Ok(Err(message)) => (StatusCode::BAD_REQUEST, format!("{message}\n")).into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response(),
    }
}
