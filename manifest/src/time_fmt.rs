//! Recorded times are milliseconds since the Unix epoch (as JavaScript's `Date.now()` gives them); files
//! meant for people and other tools (HAR, `manifest.json`) use RFC 3339 in UTC. This is the one conversion.

use time::OffsetDateTime;
use time::format_description::FormatItem;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;

/// Always three fractional digits, so that times sort as text and line up in files.
const MILLIS_UTC: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// Formats epoch milliseconds as RFC 3339 UTC with millisecond precision, e.g. `2026-11-22T10:00:00.123Z`.
/// Out-of-range values are clamped to the epoch rather than failing: a bad clock must not lose a recording.
pub fn rfc3339_from_millis(millis: f64) -> String {
    let nanos = if millis.is_finite() { (millis * 1e6).round() as i128 } else { 0 };
    let nanos = nanos - nanos % 1_000_000;
    let at = OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    at.format(MILLIS_UTC).unwrap_or_else(|_| "1970-01-01T00:00:00.000Z".to_owned())
}

/// Now, in epoch milliseconds: the one clock of the native tools (the extension reads JavaScript's).
#[cfg(not(target_arch = "wasm32"))]
pub fn now_ms() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// Parses RFC 3339 back to epoch milliseconds.
pub fn millis_from_rfc3339(text: &str) -> Option<f64> {
    let at = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    Some(at.unix_timestamp_nanos() as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_round_trip_through_rfc3339() {
        let text = rfc3339_from_millis(1_763_805_600_123.0);
        assert_eq!(text, "2025-11-22T10:00:00.123Z");
        assert_eq!(millis_from_rfc3339(&text), Some(1_763_805_600_123.0));
        assert_eq!(rfc3339_from_millis(f64::NAN), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_from_millis(1000.0), "1970-01-01T00:00:01.000Z");
    }
}
