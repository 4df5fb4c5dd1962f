//! The web config in force, checked against its files on a timer: new
//! settings for new requests and handshakes, the previous ones kept when a
//! change does not load.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::config::{WebConfig, WebConfigError, fingerprint, load};

/// The web config in force, kept current with its file.
#[derive(Debug)]
pub struct Live {
    path: PathBuf,
    tls: bool,
    current: RwLock<Arc<WebConfig>>,
    seen: std::sync::Mutex<u64>,
}

impl Live {
    /// Loads the file; whether TLS is on is decided here, for the process's
    /// life.
    ///
    /// # Errors
    /// When the file is unusable.
    pub fn load(path: &Path) -> Result<Arc<Live>, WebConfigError> {
        let seen = fingerprint(path);
        let config = load(path)?;
        Ok(Arc::new(Live {
            path: path.to_path_buf(),
            tls: config.tls.is_some(),
            current: RwLock::new(Arc::new(config)),
            seen: std::sync::Mutex::new(seen),
        }))
    }

    /// True when connections are TLS.
    pub fn tls(&self) -> bool {
        self.tls
    }

    /// The settings for a new request or handshake.
    pub fn current(&self) -> Arc<WebConfig> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Loads the file again if it or a file it names changed since the last
    /// check. Returns whether new settings took effect.
    pub fn refresh(&self) -> bool {
        let now = fingerprint(&self.path);
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if *seen == now {
                return false;
            }
            // Remembered even when the load fails, so a broken file is
            // reported once, not on every check.
            *seen = now;
        }
        match load(&self.path) {
            Ok(next) if next.tls.is_some() != self.tls => {
                tracing::error!(
                    "web config change rejected: turning TLS on or off needs a restart; the previous web settings stay in force"
                );
                false
            }
            Ok(next) => {
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
                tracing::info!(file = %self.path.display(), "web config reloaded");
                true
            }
            Err(e) => {
                tracing::error!(error = %e, "web config change rejected; the previous web settings stay in force");
                false
            }
        }
    }

    /// Checks for changes every `interval` until `stop`.
    pub async fn watch(self: Arc<Self>, interval: Duration, stop: CancellationToken) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.cancelled() => return,
            }
            let live = self.clone();
            // File reads and certificate parsing stay off the async threads.
            let _ = tokio::task::spawn_blocking(move || live.refresh()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_keeps_the_previous_settings_when_the_new_file_is_broken() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("web.yml");
        std::fs::write(
            &p,
            "http_server_config:\n  headers:\n    X-Frame-Options: deny\n",
        )
        .unwrap();
        let live = Live::load(&p).unwrap();
        assert!(!live.refresh(), "nothing changed");
        std::fs::write(
            &p,
            "http_server_config:\n  headers:\n    X-Frame-Options: sameorigin\n",
        )
        .unwrap();
        assert!(live.refresh());
        assert_eq!(live.current().headers[0].1, "sameorigin");
        std::fs::write(&p, "http_server_config: [\n").unwrap();
        assert!(!live.refresh());
        assert_eq!(live.current().headers[0].1, "sameorigin", "kept");
    }
}
