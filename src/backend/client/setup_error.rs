//! Why a client could not be built: the one failure that stops a target
//! before any connection, so it is refused at startup or reload.

/// Why a client could not be built: its TLS settings are unusable.
#[derive(Debug, thiserror::Error)]
#[error("target {target}: {detail}")]
pub struct ClientSetupError {
    pub(super) target: String,
    pub(super) detail: String,
}
