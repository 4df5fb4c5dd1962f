//! The fingerprint of the web config file and the files it names: how
//! [`super::Live`] tells that the settings on disk changed.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;

use super::raw::{RawWebConfig, parse};

/// A fingerprint of the web config file and every file it names: when it
/// changes, the config is loaded again. Unreadable files count by their
/// error, so a file that appears or vanishes is a change too.
pub(super) fn fingerprint(path: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    let mut add = |p: &Path| match std::fs::read(p) {
        Ok(bytes) => bytes.hash(&mut h),
        Err(e) => e.kind().hash(&mut h),
    };
    add(path);
    if let Ok(text) = std::fs::read_to_string(path) {
        if let Ok(RawWebConfig {
            tls_server_config: Some(t),
            ..
        }) = parse(&text)
        {
            let base = path.parent().unwrap_or(Path::new("."));
            for file in t.files(base) {
                add(&file);
            }
        }
    }
    h.finish()
}
