//! The HTTP endpoints: `/metrics` (path configurable), `/healthz`, `/readyz`,
//! `/probe?target=&auth_module=` (multi-target, see [`crate::multitarget`]),
//! the `/` landing page (targets; groups with the columns of `check`, a
//! legend of the statuses; it reloads itself every stream poll) and
//! `POST /-/reload` (with `--web.enable-lifecycle`);
//! a known path asked with another method gets 405 and `Allow`. Only this
//! module and [`crate::server`], which runs the connections, know axum.
//!
//! `/metrics` never talks to Redis and never renders: it serves the latest
//! exposition, which [`crate::exposition`] keeps current in the background.
//! Both `/metrics` and `/probe` answer in OpenMetrics when `Accept` prefers
//! it, and keep only the families named by `name[]` parameters when there
//! are some.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::{mpsc, oneshot};

use crate::config::Config;
use crate::exposition::{Chunks, Exposition};
use crate::metrics::BuildInfo;
use crate::metrics::openmetrics::{
    EOF, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE, keep_families, prefers_openmetrics,
    selected_families, to_openmetrics,
};
use crate::multitarget::{MultiTargetError, MultiTargets};
use crate::snapshot::{SnapshotStore, TargetSnapshot};
use crate::status::GroupStatus;
use crate::web::{Admission, Live, WebConfig};

/// A reload request: the reply says whether the new file was accepted, and
/// if not why, in words fit for an HTTP client (no file paths).
pub type ReloadRequest = oneshot::Sender<Result<(), String>>;

/// What the handlers share.
#[derive(Debug)]
pub struct HttpState {
    /// Snapshots to render.
    pub store: Arc<SnapshotStore>,
    /// The configuration in force (reloads replace it).
    pub config: Arc<RwLock<Arc<Config>>>,
    /// Where reload requests go.
    pub reload: mpsc::Sender<ReloadRequest>,
    /// The targets `/probe` polls.
    pub multi_targets: Arc<MultiTargets>,
    exposition: Arc<Exposition>,
    /// `/readyz` said ready once: it stays so (see [`readyz`]).
    ready: AtomicBool,
}

impl HttpState {
    /// Shared state for the router, serving what `exposition` renders.
    /// `/probe` gets a registry of its own, whose tasks nobody stops (see
    /// [`Self::with_multi_targets`] to share the daemon's).
    pub fn new(
        store: Arc<SnapshotStore>,
        config: Arc<RwLock<Arc<Config>>>,
        reload: mpsc::Sender<ReloadRequest>,
        exposition: Arc<Exposition>,
    ) -> Arc<Self> {
        let multi_targets = MultiTargets::start(
            config.clone(),
            store.clone(),
            tokio_util::sync::CancellationToken::new(),
            tokio_util::task::TaskTracker::new(),
        );
        Self::with_multi_targets(store, config, reload, multi_targets, exposition)
    }

    /// Shared state with the daemon's `/probe` registry and renderer (both
    /// started, and stopped, by [`crate::app::run`]).
    pub fn with_multi_targets(
        store: Arc<SnapshotStore>,
        config: Arc<RwLock<Arc<Config>>>,
        reload: mpsc::Sender<ReloadRequest>,
        multi_targets: Arc<MultiTargets>,
        exposition: Arc<Exposition>,
    ) -> Arc<Self> {
        Arc::new(HttpState {
            exposition,
            store,
            config,
            reload,
            multi_targets,
            ready: AtomicBool::new(false),
        })
    }

    /// How many times the exposition was rendered (once per snapshot
    /// generation that was scraped, however many scrapes).
    pub fn renders(&self) -> u64 {
        self.exposition.renders()
    }

    fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The router. Paths are matched in one handler because the metrics path
/// can change on reload. With a web config, every request passes its rate
/// limit and basic auth, and every response gets its headers, as the config
/// in force at that request says.
pub fn router(state: Arc<HttpState>, web: Option<Arc<Live>>) -> Router {
    let router = Router::new().fallback(dispatch).with_state(state);
    match web {
        Some(web) => router.layer(axum::middleware::from_fn_with_state(web, web_config)),
        None => router,
    }
}

async fn web_config(
    State(web): State<Arc<Live>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let web = web.current();
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut response = match admit(&web, authorization.as_deref()).await {
        Some(refusal) => refusal,
        None => next.run(request).await,
    };
    for (name, value) in &web.headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

/// The refusal, if the web config refuses this request.
async fn admit(web: &WebConfig, authorization: Option<&str>) -> Option<Response> {
    if web.rate_limit.as_ref().is_some_and(|l| !l.allow()) {
        return Some((StatusCode::TOO_MANY_REQUESTS, "Too Many Requests\n").into_response());
    }
    let auth = web.auth.as_ref()?;
    match auth.check(authorization).await {
        Admission::Allowed => None,
        Admission::Denied => Some(
            (
                StatusCode::UNAUTHORIZED,
                [(
                    header::WWW_AUTHENTICATE,
                    "Basic realm=\"redis-streams-exporter\"",
                )],
                "Unauthorized\n",
            )
                .into_response(),
        ),
        Admission::Busy => Some(
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "too many password checks in progress, try again\n",
            )
                .into_response(),
        ),
    }
}

/// 405 with the methods the path takes.
fn method_not_allowed(allow: &'static str) -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, allow)],
        format!("method not allowed: use {allow}\n"),
    )
        .into_response()
}

async fn dispatch(
    State(state): State<Arc<HttpState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let config = state.config();
    let path = uri.path();
    let known = path == config.web.telemetry_path
        || matches!(path, "/" | "/healthz" | "/readyz" | "/probe" | "/-/reload");
    if !known {
        return (StatusCode::NOT_FOUND, "not found\n").into_response();
    }
    if path == "/-/reload" {
        if method != Method::POST && method != Method::PUT {
            return method_not_allowed("POST, PUT");
        }
        if !config.web.enable_lifecycle {
            return (
                StatusCode::FORBIDDEN,
                "Lifecycle API is not enabled: start the exporter with --web.enable-lifecycle, or send it SIGHUP\n",
            )
                .into_response();
        }
        return reload(&state).await;
    }
    if method != Method::GET && method != Method::HEAD {
        return method_not_allowed("GET, HEAD");
    }
    match path {
        p if p == config.web.telemetry_path => metrics(&state, &uri, &headers).await,
        "/probe" => probe(&state, &config, &uri, &headers).await,
        "/" => landing(&state, &config, uri.query()),
        "/healthz" => (StatusCode::OK, "ok\n").into_response(),
        _ => readyz(&state, &config),
    }
}

/// `GET /readyz`: 200 once the exporter serves what it knows, that is once
/// the exposition `/metrics` serves holds the outcome of every configured
/// target's first collection (its data, or `target_up 0` and why), and from
/// then on for the life of the process. Redis's health is not the
/// exporter's readiness: it is `redis_streams_exporter_target_up`, so an
/// outage of Redis neither takes the exporter out of its Service nor
/// stalls a rollout, and a reload that adds a target does not either. 503
/// only before that first time. The body lists each target still
/// collecting for the first time, down or not ready, with why.
fn readyz(state: &HttpState, config: &Config) -> Response {
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
        String::from(
            "not ready: the first collection of every target has not ended yet (in data, or in redis_streams_exporter_target_up 0)\n",
        )
    };
    if current.is_none() {
        body.push_str("the first exposition is being rendered\n");
    }
    let notes = current.iter().flat_map(|r| r.notes.iter());
    for (target, note) in notes.clone() {
        body.push_str(&format!(
            "{}: {}\n",
            crate::text::printable(target.as_bytes()),
            note
        ));
    }
    if !ready && current.is_some() {
        // Configured, not yet in what /metrics serves (its poller starting).
        for name in waiting {
            if !notes.clone().any(|(target, _)| &**target == name) {
                body.push_str(&format!(
                    "{}: first collection not started\n",
                    crate::text::printable(name.as_bytes())
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

/// Time kept back from Prometheus's scrape timeout, so the answer of a probe
/// that waited for a first collection still arrives in time.
const SCRAPE_TIMEOUT_MARGIN: std::time::Duration = std::time::Duration::from_millis(500);

/// `GET /probe?target=<redis URL>&auth_module=<name>`: the target's series,
/// polled in the background from its first probe. Refusals answer 403
/// (`/probe` off), 400 (bad or disallowed target, credentials in the URL,
/// unknown auth module) or 503 (too many probed targets), with the reason.
async fn probe(state: &HttpState, config: &Config, uri: &Uri, headers: &HeaderMap) -> Response {
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
                    crate::text::printable(answer.snapshot.name.as_bytes()),
                    waited.as_secs_f64(),
                    crate::text::printable(crate::exposition::not_ready_reason(&answer.snapshot).as_bytes()),
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

async fn metrics(state: &Arc<HttpState>, uri: &Uri, headers: &HeaderMap) -> Response {
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

async fn reload(state: &Arc<HttpState>) -> Response {
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

fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Groups per page of the landing page's status table.
pub const LANDING_ROWS: usize = 500;

/// A group on the landing page: severity, target, stream, group, state,
/// and where its checks come from (the target's PEL scans and consumers,
/// the stream's dead letters).
type LandingRow<'a> = (
    u8,
    &'a str,
    &'a [u8],
    &'a [u8],
    &'a crate::snapshot::GroupState,
    &'a TargetSnapshot,
    &'a crate::snapshot::StreamState,
);

/// What each status means, in the order problems come on the page.
const STATUS_LEGEND: [(&str, &str); 7] = [
    (
        "data_loss",
        "entries were trimmed or deleted before the group read them; it holds for data_loss_hold after the last loss",
    ),
    (
        "stopped",
        "work waits and no consumer has read for a whole status window (with read_every, for read_every plus the window), or the group has no consumer",
    ),
    (
        "stalled",
        "consumers are there but the group makes no progress: its position or its oldest pending entry did not move while work waited, or poison, ghost or orphaned entries are pending",
    ),
    (
        "lagging",
        "falling behind: the oldest undelivered entry is older than half of max_delay (5 minutes without max_delay), trimming is closing in on unread entries, or, without lag seconds, the lag did not fall over the window",
    ),
    (
        "unknown",
        "not judged yet: too few polls, or the server clock could not be read",
    ),
    ("ok", "keeping up"),
    (
        "idle",
        "nothing was produced, pending or undelivered during the window",
    ),
];

/// A count of the page's check columns: `-` when it is not known yet.
fn known(value: Option<u64>) -> String {
    value.map_or("-".to_string(), |n| n.to_string())
}

/// A name from Redis (or a configured one) fit for the page: control
/// characters escaped, long names cut with a marker, then HTML-escaped.
fn name(bytes: &[u8]) -> String {
    html(&crate::text::shorten(&crate::text::printable(bytes), 120))
}

/// The landing page's targets, problems first.
fn targets_table(page: &mut String, config: &Config, targets: &[Arc<TargetSnapshot>]) {
    let mut rows: Vec<(bool, String)> = config
        .targets
        .iter()
        .map(|t| {
            let snap = targets.iter().find(|s| *s.name == *t.name);
            let problem = match snap {
                Some(s) => crate::exposition::target_problem(s),
                None => Some("not started yet".to_string()),
            };
            let row = format!(
                "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if problem.is_some() { " class=\"bad\"" } else { "" },
                name(t.name.as_bytes()),
                html(&t.endpoint.to_string()),
                t.mode.as_str(),
                snap.map_or("no", |s| if s.up { "yes" } else { "no" }),
                snap.map_or("no", |s| if s.ready { "yes" } else { "no" }),
                snap.and_then(|s| s.streams_watched)
                    .map_or("?".to_string(), |n| n.to_string()),
                problem.as_deref().map_or(String::new(), html),
            );
            (problem.is_none(), row)
        })
        .collect();
    rows.sort_by_key(|(fine, _)| *fine);
    page.push_str("<h2>Targets</h2><table><tr><th>target</th><th>address</th><th>mode</th><th>up</th><th>ready</th><th>streams</th><th>problem</th></tr>");
    for (_, row) in &rows {
        page.push_str(row);
    }
    page.push_str("</table>");
}

fn landing(state: &HttpState, config: &Config, query: Option<&str>) -> Response {
    use std::fmt::Write as _;
    let build = BuildInfo::CURRENT;
    let targets = state.store.targets();
    let mut page = String::new();
    page.push_str("<!doctype html><html><head><meta charset=\"utf-8\">");
    // The page follows the stream poll, which judges the statuses.
    let _ = write!(
        page,
        "<meta http-equiv=\"refresh\" content=\"{}\"><title>redis-streams-exporter</title>",
        config.schedule.stream.as_secs_f64().ceil().max(1.0)
    );
    page.push_str("<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}.bad{background:#fdd}</style></head><body>");
    let _ = write!(
        page,
        "<h1>redis-streams-exporter</h1><p>Version {} (revision {}, built {}). <a href=\"{}\">Metrics</a> · <a href=\"/healthz\">healthz</a> · <a href=\"/readyz\">readyz</a></p>",
        html(build.version),
        html(build.revision),
        html(build.build_date),
        html(&config.web.telemetry_path)
    );
    targets_table(&mut page, config, &targets);

    // Groups of the targets that are up, problems first, a page at a time.
    let mut groups: Vec<LandingRow<'_>> = targets
        .iter()
        .filter(|t| t.up)
        .flat_map(|t| {
            t.streams.iter().flat_map(move |(s, st)| {
                st.groups.iter().map(move |(g, gs)| {
                    (
                        GroupStatus::urgency(gs.status),
                        &*t.name,
                        &**s,
                        &**g,
                        gs,
                        &**t,
                        &**st,
                    )
                })
            })
        })
        .collect();
    // The most urgent status first, then the oldest undelivered entry.
    groups.sort_by(|a, b| {
        let key = |r: &LandingRow<'_>| (r.0, GroupStatus::lag_key(r.4.lag_seconds));
        (key(a), a.1, a.2, a.3).cmp(&(key(b), b.1, b.2, b.3))
    });
    let total = groups.len();
    let pages = total.div_ceil(LANDING_ROWS).max(1);
    let wanted = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|kv| kv.strip_prefix("page="))
        .and_then(|p| p.parse::<usize>().ok())
        .unwrap_or(1)
        .clamp(1, pages);
    let first = (wanted - 1) * LANDING_ROWS;
    let shown = &groups[first.min(total)..(first + LANDING_ROWS).min(total)];
    let mut by_status: std::collections::BTreeMap<u8, (&str, usize)> = Default::default();
    for g in &groups {
        by_status
            .entry(g.0)
            .or_insert((g.4.status.map_or("unknown", |s| s.label()), 0))
            .1 += 1;
    }
    let counts: Vec<String> = by_status
        .values()
        .map(|(label, n)| format!("{n} {label}"))
        .collect();
    let _ = write!(
        page,
        "<h2>Groups</h2><p>{total} groups{}{}. Problems first.",
        if counts.is_empty() { "" } else { ": " },
        counts.join(", ")
    );
    if total > 0 {
        let _ = write!(
            page,
            " Showing {}–{} (page {wanted} of {pages}).",
            first + 1,
            first + shown.len()
        );
    }
    if wanted > 1 {
        let _ = write!(page, " <a href=\"/?page={}\">« previous</a>", wanted - 1);
    }
    if wanted < pages {
        let _ = write!(page, " <a href=\"/?page={}\">next »</a>", wanted + 1);
    }
    page.push_str("</p><table><tr><th>target</th><th>stream</th><th>group</th><th>status</th><th>lag</th><th>lag seconds</th><th>pending</th><th>poison</th><th>ghosts</th><th>orphaned</th><th>lost</th><th>dead letters</th><th>read every</th></tr>");
    for (sev, target, stream, group, gs, t, st) in shown {
        let key = (
            crate::snapshot::Name::from(*stream),
            crate::snapshot::Name::from(*group),
        );
        let scan = t.scans.get(&key).and_then(|sc| sc.last.as_ref());
        let lag = match (gs.lag, gs.lag_estimated) {
            (Some(l), true) => format!("~{l}"),
            (Some(l), false) => l.to_string(),
            (None, _) => "unknown".into(),
        };
        let _ = write!(
            page,
            "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if *sev < 4 { " class=\"bad\"" } else { "" },
            name(target.as_bytes()),
            name(stream),
            name(group),
            status_cell(gs, config),
            lag,
            gs.lag_seconds
                .map_or("unknown".to_string(), |s| format!("{s:.1}")),
            gs.info.pending,
            known(scan.map(|sc| sc.poison)),
            known(scan.map(|sc| sc.ghost)),
            known(t.consumers.get(&key).map(|c| c.orphaned)),
            known(gs.lost.map(|l| l.trimmed + l.deleted)),
            known(st.dead_letter.map(|d| d.length)),
            st.settings.read_every.map_or(String::new(), |d| html(
                &humantime::format_duration(d).to_string()
            )),
        );
    }
    page.push_str("</table>");
    legend(&mut page, config);
    page.push_str("</body></html>\n");
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

/// The status and why (the rule that decided it), and for `data_loss`
/// until when it holds: since the last counted loss (server time) for
/// `data_loss_hold`, or for as long as entries after the group's position
/// are gone.
fn status_cell(gs: &crate::snapshot::GroupState, config: &Config) -> String {
    let Some(status) = gs.status else {
        return "unknown".to_string();
    };
    if status != GroupStatus::DataLoss {
        return match gs.status_reason {
            Some(reason) => format!("{} ({})", status.label(), reason.label().replace('_', " ")),
            None => status.label().to_string(),
        };
    }
    let last = gs.lost_at.trimmed.max(gs.lost_at.deleted);
    let at = |ms: u64| {
        humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms),
        )
        .to_string()
    };
    match last {
        Some(ms) => format!(
            "data_loss ({}: last loss {}, held until {})",
            gs.status_reason
                .map_or("loss", |r| r.label())
                .replace('_', " "),
            at(ms),
            at(ms.saturating_add(config.data_loss_hold.as_millis() as u64))
        ),
        None => {
            "data_loss (entries after its position are gone; until it is set past them)".to_string()
        }
    }
}

/// What the statuses and the group table's columns mean.
fn legend(page: &mut String, config: &Config) {
    use std::fmt::Write as _;
    let window = config.schedule.stream * config.status_window as u32;
    let _ = write!(
        page,
        "<h2>Legend</h2><p>Statuses, judged at every stream poll over a window of the last {} polls ({}):</p><dl>",
        config.status_window,
        html(&humantime::format_duration(window).to_string())
    );
    for (status, meaning) in STATUS_LEGEND {
        let _ = write!(page, "<dt>{status}</dt><dd>{}.</dd>", html(meaning));
    }
    page.push_str(
        "</dl><p>Columns: <b>lag</b> entries not yet delivered to the group; <b>~</b> before it: \
         Redis gave no usable lag and the figure is the exporter's own (counted, or estimated \
         within the bounds Redis's counters prove; redis_streams_group_lag_estimated is 1). \
         <b>lag seconds</b> the age of the oldest undelivered entry. <b>pending</b> entries \
         delivered and not acknowledged. <b>poison</b> pending entries delivered at least \
         poison_delivery_count times and <b>ghosts</b> pending entries whose bodies are gone, \
         both from the last complete PEL scan. <b>orphaned</b> pending entries held by consumers \
         inactive past consumer_inactive_after. <b>lost</b> entries trimmed or deleted before the \
         group read them, since the exporter started. <b>dead letters</b> entries in the \
         stream's dead-letter stream. <b>-</b>: not known yet (or no dead-letter stream \
         configured). <b>read every</b> the stream's read_every, when set: a batch consumer \
         reads at least this often, and work waiting between two runs is not stalled or \
         stopped until read_every plus the window passes without a read. The page reloads \
         itself every stream poll.</p>",
    );
}
