//! The scrape endpoints: `/metrics` serves the latest exposition (never
//! talking to Redis, never rendering), `/probe` a probed target's; both in
//! OpenMetrics when `Accept` prefers it, gzip when accepted, and only the
//! families named by `name[]` parameters when there are some.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use super::state::HttpState;
use crate::config::Config;
use crate::exposition::Chunks;
use crate::metrics::openmetrics::{
    EOF, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE, keep_families, prefers_openmetrics,
    selected_families, to_openmetrics,
};
use crate::multitarget::MultiTargetError;

/// Time kept back from Prometheus's scrape timeout, so the answer of a probe
/// that waited for a first collection still arrives in time.
const SCRAPE_TIMEOUT_MARGIN: std::time::Duration = std::time::Duration::from_millis(500);

/// `GET /probe?target=<redis URL>&auth_module=<name>`: the target's series,
/// polled in the background from its first probe. Refusals answer 403
/// (`/probe` off), 400 (bad or disallowed target, credentials in the URL,
/// unknown auth module) or 503 (too many probed targets), with the reason.
pub(super) async fn probe(
    state: &HttpState,
    config: &Config,
    uri: &Uri,
    headers: &HeaderMap,
) -> Response {
    let params = match axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri) {
        Ok(q) => q.0,
        Err(_) => {
            return (
                StatusCode::BAD_REQUEST,
                "the query string cannot be parsed\n",
            )
                .into_response();
        }
    };
    let mut target = None;
    let mut auth_module = None;
    let names = family_names(&params);
    for (key, value) in &params {
        let slot = match key.as_str() {
            "target" => &mut target,
            "auth_module" => &mut auth_module,
            _ => continue,
        };
        if slot.replace(value.as_str()).is_some() {
            return (
                StatusCode::BAD_REQUEST,
                format!("{key} is given more than once\n"),
            )
                .into_response();
        }
    }
    // Prometheus says how long it waits for the answer.
    let scrape_timeout = headers
        .get("x-prometheus-scrape-timeout-seconds")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| std::time::Duration::from_secs_f64(s).saturating_sub(SCRAPE_TIMEOUT_MARGIN));
    let wait = scrape_timeout.map_or(config.multi_target.first_collection_wait, |t| {
        t.min(config.multi_target.first_collection_wait)
    });
    let answer = match state.multi_targets.probe(target, auth_module, wait).await {
        Ok(answer) => answer,
        Err(e) => {
            let status = match &e {
                MultiTargetError::Refused(crate::config::MultiTargetRefusal::Disabled) => {
                    StatusCode::FORBIDDEN
                }
                MultiTargetError::Refused(_) => StatusCode::BAD_REQUEST,
                MultiTargetError::OverCap { .. } => StatusCode::SERVICE_UNAVAILABLE,
                MultiTargetError::Client(_) => StatusCode::INTERNAL_SERVER_ERROR,
            };
            tracing::debug!(status = status.as_u16(), reason = %e, "probe refused");
            return (status, format!("{e}\n")).into_response();
        }
    };
    let label_limit = config.metrics.max_label_value_bytes;
    let openmetrics = wants_openmetrics(headers);
    let rendered = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        if let Some(waited) = answer.waited_in_vain.filter(|_| !openmetrics) {
            out.extend_from_slice(
                format!(
                    "# redis-streams-exporter: the first collection of target {} did not finish within {:.1}s ({}); its data series follow in a later scrape\n",
                    crate::safe_names::printable(answer.snapshot.name.as_bytes()),
                    waited.as_secs_f64(),
                    crate::safe_names::printable(crate::exposition::not_ready_reason(&answer.snapshot).as_bytes()),
                )
                .as_bytes(),
            );
        }
        let mut out = if openmetrics {
            let converted = crate::metrics::render_probe_answer(
                &answer.snapshot,
                label_limit,
                to_openmetrics(Vec::new()),
            )?;
            let mut out = converted.finish()?;
            out.extend_from_slice(EOF);
            out
        } else {
            crate::metrics::render_probe_answer(&answer.snapshot, label_limit, out)?
        };
        if let Some(names) = names {
            let mut kept = keep_families(Vec::new(), selected_families(names.iter().map(String::as_str)));
            std::io::Write::write_all(&mut kept, &out)?;
            out = kept.finish()?;
        }
        Ok::<_, std::io::Error>(out)
    })
    .await;
    match rendered {
        Ok(Ok(body)) => ([(header::CONTENT_TYPE, content_type(openmetrics))], body).into_response(),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "rendering failed\n").into_response(),
    }
}

fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|enc| {
            let mut parts = enc.trim().split(';');
            let name = parts.next().unwrap_or_default().trim();
            let q_zero = parts.any(|p| p.trim().replace(' ', "") == "q=0");
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !q_zero
        })
}

/// The values of the `name[]` parameters (the client_golang convention for
/// "only these families"), or `None` when there are none.
fn family_names(params: &[(String, String)]) -> Option<Vec<String>> {
    let names: Vec<String> = params
        .iter()
        .filter(|(k, _)| k == "name[]")
        .map(|(_, v)| v.clone())
        .collect();
    (!names.is_empty()).then_some(names)
}

fn wants_openmetrics(headers: &HeaderMap) -> bool {
    prefers_openmetrics(
        headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    )
}

fn content_type(openmetrics: bool) -> header::HeaderValue {
    header::HeaderValue::from_static(if openmetrics {
        OPENMETRICS_CONTENT_TYPE
    } else {
        TEXT_CONTENT_TYPE
    })
}

pub(super) async fn metrics(state: &Arc<HttpState>, uri: &Uri, headers: &HeaderMap) -> Response {
    let names = match axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri) {
        Ok(q) => family_names(&q.0),
        Err(_) => {
            return (
                StatusCode::BAD_REQUEST,
                "the query string cannot be parsed\n",
            )
                .into_response();
        }
    };
    let latest = state.exposition.latest().await;
    let openmetrics = wants_openmetrics(headers);
    let compressed = if openmetrics {
        latest.openmetrics_gzip
    } else {
        latest.gzip
    };
    let gzip = accepts_gzip(headers) && names.is_none();
    let body = match names {
        // A few families of the whole: decompressed and filtered, sent as
        // is (what is left is small, and rarely asked for).
        Some(names) => {
            let keep = selected_families(names.iter().map(String::as_str));
            let filtered = tokio::task::spawn_blocking(move || {
                let mut kept = keep_families(Vec::new(), keep);
                std::io::copy(
                    &mut flate2::read::GzDecoder::new(compressed.reader()),
                    &mut kept,
                )?;
                kept.finish()
            })
            .await;
            match filtered {
                Ok(Ok(body)) => Body::from(body),
                _ => {
                    return (StatusCode::INTERNAL_SERVER_ERROR, "filtering failed\n")
                        .into_response();
                }
            }
        }
        None if gzip => Body::from_stream(futures_util::stream::iter(
            compressed.pieces().map(Ok::<_, std::io::Error>),
        )),
        None => Body::from_stream(inflate(compressed)),
    };
    let mut response = Response::new(body);
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, content_type(openmetrics));
    if gzip {
        h.insert(
            header::CONTENT_ENCODING,
            header::HeaderValue::from_static("gzip"),
        );
    }
    h.insert(
        header::VARY,
        header::HeaderValue::from_static("Accept, Accept-Encoding"),
    );
    response
}

/// The cached exposition decompressed chunk by chunk, for clients that do not
/// accept gzip, so they too never make the whole text sit in memory.
fn inflate(
    compressed: Chunks,
) -> impl futures_util::Stream<Item = std::io::Result<bytes::Bytes>> + Send {
    use std::io::Read;
    let mut decoder = flate2::read::GzDecoder::new(compressed.reader());
    let mut done = false;
    futures_util::stream::iter(std::iter::from_fn(move || {
        if done {
            return None;
        }
        let mut chunk = vec![0u8; 64 * 1024];
        match decoder.read(&mut chunk) {
            Ok(0) => None,
            Ok(n) => {
                chunk.truncate(n);
                Some(Ok(bytes::Bytes::from(chunk)))
            }
            Err(e) => {
                done = true;
                Some(Err(e))
            }
        }
    }))
}
