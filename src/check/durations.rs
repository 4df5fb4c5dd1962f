//! Durations as the report and the warnings write them (`2m30s`): short,
//! and to the second.

use std::time::Duration;

/// A duration as `2m30s`.
pub fn short(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return format!("{}ms", d.as_millis());
    }
    humantime::format_duration(Duration::from_secs(secs))
        .to_string()
        .replace(' ', "")
}

/// Seconds as `2m30s`.
pub fn short_secs(seconds: f64) -> String {
    if seconds < 1.0 {
        return "0s".to_string();
    }
    short(Duration::from_secs(seconds as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_short() {
        assert_eq!(short(Duration::from_secs(150)), "2m30s");
        assert_eq!(short(Duration::from_millis(300)), "300ms");
        assert_eq!(short_secs(0.4), "0s");
        assert_eq!(short_secs(3725.9), "1h2m5s");
    }
}
