//! The router: one handler matches every path (the metrics path can change
//! on reload), a known path asked with another method gets 405 and `Allow`,
//! and the web config in force admits each request (rate limit, basic auth)
//! and adds its headers. Only this module and its siblings know axum.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use super::health::{readyz, reload};
use super::landing::landing;
use super::scrape::{metrics, probe};
use super::state::HttpState;
use super::web_config::{Admission, Live, WebConfig};

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
