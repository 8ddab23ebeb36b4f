//! `ignored.json`: the requests replay may fail at once because the page never needed their answer.
//! Two sources, both checked against what the recording really requested, so that the list names only
//! traffic the bundle has:
//!
//! - [`KNOWN_TRACKERS`], a maintained list of analytics, advertising and session-recording hosts and paths;
//! - beacons recognised by their shape: DevTools' `Ping` type (`navigator.sendBeacon`, `<a ping>`), or a
//!   fetch with an empty answer (204 or no body) whose path ends in a word such as `collect` or `track`.
//!
//! Conservative on purpose: an ignored request that mattered breaks replay, a missed tracker only costs a
//! recorded answer. Documents, scripts, stylesheets, images, fonts and the site's API (`/api/` paths) are
//! never listed by shape.

use crate::exchange::Exchange;
use crate::urls::{self, scheme_less};

/// Well-known tracker hosts and paths, as scheme-less URL substrings (what `ignored.json` holds).
pub const KNOWN_TRACKERS: &[&str] = &[
    "google-analytics.com",
    "analytics.google.com",
    "googletagmanager.com",
    "googletagservices.com",
    "doubleclick.net",
    "googlesyndication.com",
    "googleadservices.com",
    "facebook.com/tr",
    "facebook.net/tr",
    "connect.facebook.net",
    "analytics.twitter.com",
    "ads-twitter.com",
    "bat.bing.com",
    "clarity.ms",
    "px.ads.linkedin.com",
    "snap.licdn.com",
    "segment.io",
    "segment.com/v1",
    "cdn.segment.com",
    "hotjar.com",
    "hotjar.io",
    "mixpanel.com",
    "amplitude.com",
    "fullstory.com",
    "heapanalytics.com",
    "mouseflow.com",
    "newrelic.com",
    "nr-data.net",
    "browser-intake-datadoghq.com",
    "scorecardresearch.com",
    "quantserve.com",
    "adnxs.com",
    "criteo.com",
    "criteo.net",
    "taboola.com",
    "outbrain.com",
    "adsrvr.org",
    "pinimg.com/ct",
    "ct.pinterest.com",
    "analytics.tiktok.com",
    "plausible.io/api/event",
    "stats.wp.com",
];

/// Last path segments that name a beacon endpoint.
const BEACON_WORDS: &[&str] = &["collect", "track", "tracking", "beacon", "log", "pixel", "telemetry", "analytics"];

/// DevTools resource types a page needs to render or run: never ignored by shape.
const PAGE_RESOURCE_TYPES: &[&str] =
    &["Document", "Stylesheet", "Script", "Image", "Font", "Media", "Manifest", "TextTrack", "WebSocket"];

/// The ignore list of a recording: known trackers it contacted, then beacons by shape, each once, in the
/// order the recording first made them.
pub fn ignore_list(exchanges: &[Exchange]) -> Vec<String> {
    let mut list: Vec<String> = Vec::new();
    let mut add = |pattern: String| {
        if !list.contains(&pattern) {
            list.push(pattern);
        }
    };
    for exchange in exchanges {
        let url = scheme_less(&exchange.url);
        if let Some(known) = KNOWN_TRACKERS.iter().find(|known| url.contains(*known)) {
            // A tracker that served a page the person saw is not one here (a tracker's own site).
            let serves_a_document =
                exchanges.iter().any(|e| is_type(e, "Document") && scheme_less(&e.url).contains(known));
            if !serves_a_document {
                add((*known).to_owned());
            }
        } else if is_beacon(exchange) {
            add(beacon_pattern(url));
        }
    }
    list
}

/// The first entry of `ignored` that names `url` (by [`urls::matches`]): the one replay reports a request
/// under.
pub fn ignore_pattern<'a>(ignored: &'a [String], url: &str) -> Option<&'a str> {
    ignored.iter().map(String::as_str).find(|pattern| urls::matches(pattern, url))
}

/// Reads an ignore list (`ignored.json`, or a file given to replay): a JSON array of scheme-less URL
/// substrings; blank entries are dropped.
pub fn parse_ignore_list(bytes: &[u8]) -> Result<Vec<String>, serde_json::Error> {
    let list: Vec<String> = serde_json::from_slice(bytes)?;
    Ok(list.into_iter().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect())
}

/// A bundle's ignore list: what post-processing wrote (`ignored.json`), or, for a bundle never processed,
/// the same derivation from its `events`.
#[cfg(feature = "native")]
pub fn of_bundle(
    bundle: &mut trace_bundle::archive::Bundle,
    events: &[trace_manifest::event::EventRecord],
) -> anyhow::Result<Vec<String>> {
    use anyhow::Context as _;
    use trace_manifest::postprocess::IGNORED_FILE;
    if !bundle.contains(IGNORED_FILE) {
        return Ok(ignore_list(&crate::exchange::exchanges(events)));
    }
    parse_ignore_list(&bundle.read(IGNORED_FILE)?)
        .context("an ignore list is a JSON array of strings")
        .context(IGNORED_FILE)
}

fn is_type(exchange: &Exchange, resource_type: &str) -> bool {
    exchange.resource_type.as_deref() == Some(resource_type)
}

/// A request that cannot have changed what the page shows.
fn is_beacon(exchange: &Exchange) -> bool {
    let url = scheme_less(&exchange.url);
    let path = url.split_once('/').map_or("", |(_, path)| path);
    let path = path.split_once('?').map_or(path, |(path, _)| path);
    if path.split('/').any(|segment| segment.eq_ignore_ascii_case("api")) {
        return false;
    }
    if let Some(kind) = exchange.resource_type.as_deref()
        && PAGE_RESOURCE_TYPES.contains(&kind)
    {
        return false;
    }
    if matches!(exchange.resource_type.as_deref(), Some("Ping" | "CSPViolationReport")) {
        return true;
    }
    let empty_answer = exchange.status == Some(204)
        || (exchange.succeeded() && exchange.response_body_size.is_none_or(|size| size == 0));
    let last_segment = path.rsplit('/').find(|segment| !segment.is_empty()).unwrap_or("");
    let word = last_segment.split('.').next().unwrap_or("").to_ascii_lowercase();
    empty_answer && BEACON_WORDS.contains(&word.as_str())
}

/// Host and path, with `?` when the beacon had a query so that `/collect?` does not also name `/collection`.
fn beacon_pattern(url: &str) -> String {
    match url.split_once('?') {
        Some((before, _)) => format!("{before}?"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(method: &str, url: &str, resource_type: &str, status: u16, body: Option<u64>) -> Exchange {
        Exchange {
            request_id: "1".into(),
            request_event: 0,
            response_event: Some(1),
            method: method.into(),
            url: url.into(),
            resource_type: Some(resource_type.into()),
            status: Some(status),
            response_body_size: body,
            ..Exchange::default()
        }
    }

    #[test]
    fn trackers_and_beacons_are_listed_but_not_the_sites_own_traffic() {
        let exchanges = [
            exchange("GET", "http://shop.test/", "Document", 200, Some(900)),
            exchange("POST", "http://shop.test/collect?e=pageview&p=/", "Ping", 204, None),
            exchange("POST", "http://shop.test/collect?e=pageview&p=/cart", "Ping", 204, None),
            exchange("GET", "https://www.google-analytics.com/g/collect?v=2", "Fetch", 204, None),
            exchange("GET", "http://shop.test/api/products?_=1", "Fetch", 200, Some(120)),
            exchange("POST", "http://shop.test/api/log", "Fetch", 204, None),
            exchange("GET", "http://shop.test/static/pixel.gif", "Image", 200, Some(43)),
            exchange("POST", "http://shop.test/v1/track", "XHR", 200, Some(0)),
            exchange("POST", "http://shop.test/cart", "Fetch", 204, None),
        ];
        assert_eq!(ignore_list(&exchanges), ["shop.test/collect?", "google-analytics.com", "shop.test/v1/track"]);
    }

    #[test]
    fn a_url_is_ignored_under_the_first_pattern_naming_it() {
        let ignored = parse_ignore_list(br#"["shop.test/collect?", " ", "shop.test/"]"#).unwrap();
        assert_eq!(ignored, ["shop.test/collect?", "shop.test/"]);
        assert_eq!(ignore_pattern(&ignored, "https://shop.test/collect?e=1#x"), Some("shop.test/collect?"));
        assert_eq!(ignore_pattern(&ignored, "http://cdn.test/app.js"), None);
        assert!(parse_ignore_list(br#"{"not": "a list"}"#).is_err());
    }
}
