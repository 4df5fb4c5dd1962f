//! The HTTP endpoints: `/metrics` (path configurable), `/healthz`, `/readyz`,
//! `/probe?target=&auth_module=` (multi-target, see [`crate::multitarget`]),
//! the `/` landing page (targets; groups with the columns of `check`, a
//! legend of the statuses; it reloads itself every stream poll) and
//! `POST /-/reload` (with `--web.enable-lifecycle`);
//! a known path asked with another method gets 405 and `Allow`. Only this
//! module knows axum.
//!
//! `/metrics` never talks to Redis and never renders: it serves the latest
//! exposition, which [`crate::exposition`] keeps current in the background.
//! Both `/metrics` and `/probe` answer in OpenMetrics when `Accept` prefers
//! it, and keep only the families named by `name[]` parameters when there
//! are some.
//!
//! The rooms: `state` (what the handlers share), `router` (the one handler,
//! admission by the web config), `scrape` (`/metrics` and `/probe`), `health` (`/readyz`,
//! `/-/reload`), `landing` (`/`), `server` (the bounded connections) and
//! `web_config` (the exporter-toolkit web config, kept current with its file).

mod health;
mod landing;
mod router;
mod scrape;
pub mod server;
mod state;
pub mod web_config;

pub use router::router;
pub use state::{HttpState, ReloadRequest};
