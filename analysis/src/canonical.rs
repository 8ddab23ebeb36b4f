//! Canonical forms of URLs and request bodies: what is left of a request once what changes from one page
//! load to the next without changing the answer is gone. Replay's matcher matches on them (its levels and
//! queues are its own), and the URL check of a re-run compares with them.
//!
//! Dropped: the URL fragment; volatile parameters (cache busters such as `_`, `t`, `ts`, `cb`; `utm_*`; the
//! JSONP `callback`: [`is_volatile_name`]) in the query, form fields, JSON keys at any depth and multipart
//! parts. Normalized: query and form parameters decoded, sorted by name and re-encoded one way; JSON
//! objects' keys sorted; multipart parts sorted by name and described without their boundary; host case
//! and default ports. Bodies are read by [`crate::body::parse`].
//!
//! The list of names is only the fast path. A value is volatile by what it is, whatever its name, when it
//! reads as a clock of the time the requests were made ([`Clocks`]): epoch seconds (10 digits, maybe with
//! a fraction) or milliseconds (13 digits) within a day of the recording. Such a query value, nameless
//! query key (`?1795452770043`), form field, multipart part or JSON leaf is dropped, and such a path
//! segment becomes [`CLOCK_SEGMENT`], in the endpoint key too. Ids are not clocks: they are too short,
//! too long, or far from the recording's time.

use std::cmp::Ordering;

use serde_json::Value;
use url::{Url, form_urlencoded};

use crate::body::{self, ParsedBody, Part};

/// Query parameters, form fields, multipart parts and JSON keys whose value changes on every load without
/// changing the answer. Compared without regard to ASCII case; `utm_*` is matched by prefix.
pub const VOLATILE_NAMES: &[&str] =
    &["_", "t", "ts", "cb", "cachebuster", "timestamp", "rand", "nocache", "callback", "jsonp"];

/// Prefixes of volatile names (campaign tracking parameters).
pub const VOLATILE_PREFIXES: &[&str] = &["utm_"];

/// Whether a query parameter, form field, multipart part or JSON key named `name` is left out of canonical
/// forms and fuzzy scores.
pub fn is_volatile_name(name: &str) -> bool {
    VOLATILE_NAMES.iter().any(|volatile| name.eq_ignore_ascii_case(volatile))
        || VOLATILE_PREFIXES.iter().any(|prefix| {
            name.len() >= prefix.len() && name.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
        })
}

/// How far from the requests' own time a number may be and still read as a clock: pages stamp requests
/// with the time they were made, which lies within the recording (or, replayed, within the replay).
pub const CLOCK_MARGIN_MS: f64 = 24.0 * 3600.0 * 1000.0;

/// What a path segment that reads as a clock becomes in canonical URLs and endpoint keys.
pub const CLOCK_SEGMENT: &str = "{clock}";

/// The times requests were made in, for telling a clock reading (a nameless cache buster, a timestamp in a
/// path) from an id that merely looks like one. [`Clocks::NONE`] reads no number as a clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clocks {
    from_ms: f64,
    to_ms: f64,
}

impl Clocks {
    /// No number is a clock: canonical forms drop only volatile names.
    pub const NONE: Clocks = Clocks { from_ms: f64::INFINITY, to_ms: f64::NEG_INFINITY };

    /// Requests made between `start_ms` and `end_ms` (epoch milliseconds), give or take [`CLOCK_MARGIN_MS`].
    pub fn around(start_ms: f64, end_ms: f64) -> Clocks {
        Clocks { from_ms: start_ms.min(end_ms) - CLOCK_MARGIN_MS, to_ms: start_ms.max(end_ms) + CLOCK_MARGIN_MS }
    }

    /// Whether `value` reads as epoch seconds (10 digits, maybe with a decimal fraction, as `time.time()`
    /// gives) or milliseconds (13 digits, as `Date.now()` gives) within these times.
    pub fn is_clock(&self, value: &str) -> bool {
        let (whole, fraction) = value.split_once('.').unwrap_or((value, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if !digits(whole) || !digits(fraction) || (value.contains('.') && fraction.is_empty()) {
            return false;
        }
        let Ok(number) = value.parse::<f64>() else { return false };
        let ms = match whole.len() {
            10 => number * 1000.0,
            13 if fraction.is_empty() => number,
            _ => return false,
        };
        self.from_ms <= ms && ms <= self.to_ms
    }
}

/// Where a parameter comes from: a query parameter `q` and a body field `q` are different parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Place {
    Query,
    Body,
}

/// A decoded, non-volatile parameter. JSON leaves are named by their path (`items[0].id`); a body that is
/// neither a form, JSON nor multipart is one parameter with an empty name.
#[derive(Debug, Clone)]
pub struct Param {
    pub place: Place,
    pub name: String,
    pub value: String,
    /// `value.chars().count()`, kept for the fuzzy score's upper bound.
    pub chars: usize,
}

impl Param {
    pub fn new(place: Place, name: String, value: String) -> Param {
        let chars = value.chars().count();
        Param { place, name, value, chars }
    }

    /// By place, then name: the order parameters are kept and compared in.
    pub fn order(&self, other: &Param) -> Ordering {
        (self.place, &self.name).cmp(&(other.place, &other.name))
    }
}

/// A request in canonical form, computed in one pass over its URL and body: what replay's canonical and
/// fuzzy levels match on.
#[derive(Debug, Clone)]
pub struct CanonicalRequest {
    /// Method, [`canonical_url`] and [`canonical_body`], as one key.
    pub key: Vec<u8>,
    /// The [`endpoint_key`]; `None` when the URL does not parse.
    pub endpoint: Option<String>,
    /// The non-volatile query and body parameters, sorted by (place, name); repeated names keep their order.
    pub params: Vec<Param>,
}

/// The URL with its fragment dropped, its volatile query parameters ([`is_volatile_name`]) removed and the
/// others decoded, sorted by name (repeated names keep their order, which can carry meaning) and re-encoded
/// one way. Host case and default ports are normalized by parsing; a URL that does not parse only loses its
/// fragment.
pub fn canonical_url(url: &str) -> String {
    canonical_url_with(url, &Clocks::NONE)
}

/// [`canonical_url`], with the numbers `clocks` reads as clocks dropped from the query and standing as
/// [`CLOCK_SEGMENT`] in the path.
pub fn canonical_url_with(url: &str, clocks: &Clocks) -> String {
    match Url::parse(url) {
        Ok(parsed) => {
            let params = query_params(&parsed, clocks);
            canonical_parsed_url(parsed, &params, clocks)
        }
        Err(_) => without_fragment(url).to_owned(),
    }
}

fn query_params(url: &Url, clocks: &Clocks) -> Vec<Param> {
    let mut params: Vec<Param> = url
        .query_pairs()
        .filter(|(name, value)| !is_volatile_param(name, value, clocks))
        .map(|(name, value)| Param::new(Place::Query, name.into_owned(), value.into_owned()))
        .collect();
    params.sort_by(Param::order);
    params
}

fn canonical_parsed_url(mut url: Url, params: &[Param], clocks: &Clocks) -> String {
    url.set_fragment(None);
    if params.is_empty() {
        url.set_query(None);
    } else {
        let query = encode_pairs(params);
        url.set_query(Some(&query));
    }
    if let Some(path) = path_without_clocks(&url, clocks) {
        url.set_path(&path);
    }
    url.into()
}

/// The URL's path with each segment that reads as a clock replaced by [`CLOCK_SEGMENT`], or `None` when
/// no segment does.
fn path_without_clocks(url: &Url, clocks: &Clocks) -> Option<String> {
    let segments = url.path_segments()?;
    let mut any = false;
    let replaced: Vec<&str> = segments
        .map(|segment| {
            if clocks.is_clock(segment) {
                any = true;
                CLOCK_SEGMENT
            } else {
                segment
            }
        })
        .collect();
    any.then(|| format!("/{}", replaced.join("/")))
}

fn without_fragment(url: &str) -> &str {
    url.split_once('#').map_or(url, |(before, _)| before)
}

fn encode_pairs(params: &[Param]) -> String {
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    for param in params {
        serializer.append_pair(&param.name, &param.value);
    }
    serializer.finish()
}

/// The body in a form where what does not change the answer is gone, by its content type:
/// `application/x-www-form-urlencoded` fields decoded, volatile ones removed, sorted by name and re-encoded;
/// JSON (`application/json`, `*+json`, or any other type whose body parses as a JSON object or array, since
/// `fetch` sends strings as `text/plain`) with object keys sorted at every depth and volatile keys removed;
/// `multipart/form-data` parts sorted by name, volatile ones removed, described without the boundary. Other
/// bodies, and bodies that do not parse as their type says, are kept as they are.
pub fn canonical_body(body: &[u8], content_type: Option<&str>) -> Vec<u8> {
    analyze_body(body, content_type, &Clocks::NONE).0
}

/// `method` (as given: the caller decides its case), `url` and `body` in canonical form, with the numbers
/// `clocks` reads as clocks dropped (see the module documentation).
pub fn request(method: &str, url: &str, body: &[u8], content_type: Option<&str>, clocks: &Clocks) -> CanonicalRequest {
    let (canonical_body, body_params) = analyze_body(body, content_type, clocks);
    let (canonical_url, endpoint, mut params) = match Url::parse(url) {
        Ok(parsed) => {
            let params = query_params(&parsed, clocks);
            let endpoint = endpoint_of(method, &parsed, clocks);
            (canonical_parsed_url(parsed, &params, clocks), Some(endpoint), params)
        }
        Err(_) => (without_fragment(url).to_owned(), None, Vec::new()),
    };
    // Query parameters sort before body ones, so appending keeps the order.
    params.extend(body_params);
    let mut canonical_key = Vec::with_capacity(method.len() + canonical_url.len() + canonical_body.len() + 2);
    canonical_key.extend_from_slice(method.as_bytes());
    canonical_key.push(b' ');
    canonical_key.extend_from_slice(canonical_url.as_bytes());
    canonical_key.push(b'\n');
    canonical_key.extend_from_slice(&canonical_body);
    CanonicalRequest { key: canonical_key, endpoint, params }
}

/// Method, host with its port when not the default, and path: an endpoint, which replay's fuzzy level
/// compares requests within. The scheme is left out so that a request upgraded to `https` still finds its
/// `http` recording. `None` when the URL does not parse.
pub fn endpoint_key(method: &str, url: &str) -> Option<String> {
    Url::parse(url).ok().map(|url| endpoint_of(method, &url, &Clocks::NONE))
}

fn endpoint_of(method: &str, url: &Url, clocks: &Clocks) -> String {
    let host = url.host_str().unwrap_or_default();
    let path = path_without_clocks(url, clocks);
    let path = path.as_deref().unwrap_or(url.path());
    match url.port() {
        Some(port) => format!("{method} {host}:{port} {path}"),
        None => format!("{method} {host} {path}"),
    }
}

/// The canonical body and its parameters for the fuzzy score.
/// The most a body a page compressed itself is decoded to, to be read as what it holds.
#[cfg(feature = "native")]
const MAX_DECODED_BODY: u64 = 16 << 20;

fn analyze_body(body: &[u8], content_type: Option<&str>, clocks: &Clocks) -> (Vec<u8>, Vec<Param>) {
    // A body the page gzipped itself (`CompressionStream`) is read as what it holds, whose type its header
    // cannot say: so that one whose secret was redacted inside still finds its recording. Known by its
    // first bytes (no form or JSON starts as a gzip or zlib stream does) and decoded once: what it holds is
    // not decoded again.
    #[cfg(feature = "native")]
    if let Some((_, decoded)) = body::decode_compressed(body, MAX_DECODED_BODY) {
        return analyze_decoded_body(&decoded, None, clocks);
    }
    analyze_decoded_body(body, content_type, clocks)
}

fn analyze_decoded_body(body: &[u8], content_type: Option<&str>, clocks: &Clocks) -> (Vec<u8>, Vec<Param>) {
    if body.is_empty() {
        return (Vec::new(), Vec::new());
    }
    match body::parse(body, content_type) {
        ParsedBody::Form(fields) => analyze_form(fields, clocks),
        ParsedBody::Json(value) => analyze_json(&value, body.len(), clocks),
        ParsedBody::Multipart(parts) => analyze_multipart(parts, body.len(), clocks),
        ParsedBody::Other => {
            let value = String::from_utf8_lossy(body).into_owned();
            (body.to_vec(), vec![Param::new(Place::Body, String::new(), value)])
        }
    }
}

fn analyze_form(fields: Vec<(String, String)>, clocks: &Clocks) -> (Vec<u8>, Vec<Param>) {
    let mut params: Vec<Param> = fields
        .into_iter()
        .filter(|(name, value)| !is_volatile_param(name, value, clocks))
        .map(|(name, value)| Param::new(Place::Body, name, value))
        .collect();
    params.sort_by(Param::order);
    (encode_pairs(&params).into_bytes(), params)
}

fn analyze_json(value: &Value, body_len: usize, clocks: &Clocks) -> (Vec<u8>, Vec<Param>) {
    let mut canonical = String::with_capacity(body_len);
    write_canonical_json(value, &mut canonical, clocks);
    let mut params = Vec::new();
    flatten_json(value, &mut String::new(), &mut params, clocks);
    params.sort_by(Param::order);
    (canonical.into_bytes(), params)
}

/// Whether a body field, as [`crate::body::form_fields`] names it (a JSON leaf by its path), is left out of
/// canonical forms: a member of its path has a volatile name, or its value reads as a clock. Checkpoints
/// leave out of their predicates what replay does not match on, by this rule.
pub fn is_volatile_field(path: &str, value: &str, clocks: &Clocks) -> bool {
    path.split(['.', '[']).any(|member| is_volatile_name(member.trim_end_matches(']')))
        || is_volatile_param(path, value, clocks)
}

/// Whether a query parameter, form field or multipart part is left out: a volatile name, a clock reading
/// as its value, or a clock reading as the name of a parameter without a value (`?1795452770043`).
fn is_volatile_param(name: &str, value: &str, clocks: &Clocks) -> bool {
    is_volatile_name(name) || clocks.is_clock(value) || (value.is_empty() && clocks.is_clock(name))
}

/// Whether a JSON member is left out: a volatile name, or a clock reading (a number or a string of digits).
fn is_volatile_member(key: &str, value: &Value, clocks: &Clocks) -> bool {
    is_volatile_name(key)
        || match value {
            Value::Number(number) => clocks.is_clock(&number.to_string()),
            Value::String(text) => clocks.is_clock(text),
            _ => false,
        }
}

/// Compact JSON with object keys sorted and volatile members removed at every depth. Sorting here rather
/// than relying on `serde_json::Map` keeps the result right if another crate turns on `preserve_order`.
fn write_canonical_json(value: &Value, out: &mut String, clocks: &Clocks) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> =
                map.iter().filter(|(key, item)| !is_volatile_member(key, item, clocks)).collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (position, (key, item)) in entries.into_iter().enumerate() {
                if position > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical_json(item, out, clocks);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (position, item) in items.iter().enumerate() {
                if position > 0 {
                    out.push(',');
                }
                write_canonical_json(item, out, clocks);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// One parameter per leaf, named by its path (`cart.items[0].id`); strings without their quotes.
fn flatten_json(value: &Value, path: &mut String, params: &mut Vec<Param>, clocks: &Clocks) {
    body::json_leaves(value, path, &mut |key, item| !is_volatile_member(key, item, clocks), &mut |path, leaf| {
        let value = match leaf {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        params.push(Param::new(Place::Body, path.to_owned(), value));
    });
}

/// Parts sorted by name, volatile ones removed, each described without the boundary.
fn analyze_multipart(mut parts: Vec<Part<'_>>, body_len: usize, clocks: &Clocks) -> (Vec<u8>, Vec<Param>) {
    parts.retain(|part| {
        let text = if part.filename.is_none() { std::str::from_utf8(part.content).unwrap_or_default() } else { "" };
        !is_volatile_param(&part.name, text, clocks)
    });
    parts.sort_by(|a, b| a.name.cmp(&b.name));
    let mut canonical = Vec::with_capacity(body_len);
    let mut params = Vec::with_capacity(parts.len());
    for part in parts {
        let header = format!(
            "part name={:?} filename={:?} type={:?} length={}\n",
            part.name,
            part.filename,
            part.content_type,
            part.content.len()
        );
        canonical.extend_from_slice(header.as_bytes());
        canonical.extend_from_slice(part.content);
        canonical.push(b'\n');
        params.push(Param::new(Place::Body, part.name, String::from_utf8_lossy(part.content).into_owned()));
    }
    (canonical, params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "native")]
    #[test]
    fn a_body_the_page_gzipped_itself_is_read_as_what_it_holds() {
        use crate::body::ContentEncoding;
        let json = br#"{"note":"hello","password":"hunter2"}"#;
        let url = "http://app.test/sealed/send";
        let plain = request("POST", url, json, Some("application/json"), &Clocks::NONE);
        for encoding in [ContentEncoding::Gzip, ContentEncoding::Deflate] {
            let sent = request("POST", url, &encoding.encode(json), Some("application/octet-stream"), &Clocks::NONE);
            assert_eq!(sent.key, plain.key, "{encoding:?}: the same canonical form as the JSON it holds");
            let names: Vec<&str> = sent.params.iter().map(|param| param.name.as_str()).collect();
            assert_eq!(names, ["note", "password"], "{encoding:?}: its fields, for the fuzzy level");
        }
        // Bytes that only start like a zlib stream ('x^' is a zlib header's shape) stay what they are.
        let text = b"x^2 + y^2";
        let read = request("POST", url, text, Some("text/plain"), &Clocks::NONE);
        assert!(read.key.ends_with(text) && read.params.len() == 1, "{:?}", read.params);
    }

    /// 2026-11-24 12:00:00 UTC, a recording of ten minutes from then.
    const START_MS: f64 = 1_795_521_600_000.0;
    fn recording() -> Clocks {
        Clocks::around(START_MS, START_MS + 600_000.0)
    }

    #[test]
    fn clocks_are_told_from_ids_by_shape_and_time() {
        let clocks = recording();
        for (value, is_clock) in [
            ("1795521600000", true),    // Date.now() at the start
            ("1795522200123", true),    // ten minutes on
            ("1795521600", true),       // epoch seconds
            ("1795521600.523", true),   // time.time()
            ("1795435300000", true),    // within a day before
            ("1795435100000", false),   // more than a day before
            ("1700000000000", false),   // a 2023 time: not this recording's
            ("1234567890", false),      // a ten-digit id
            ("179552160000", false),    // twelve digits
            ("17955216000000", false),  // fourteen
            ("1795521600.", false),     // not a number as pages write one
            ("+795521600000", false),   // a sign
            ("1795521600000.5", false), // milliseconds come whole
            ("", false),
            ("abc", false),
        ] {
            assert_eq!(clocks.is_clock(value), is_clock, "{value}");
        }
        assert!(!Clocks::NONE.is_clock("1795521600000"));
    }

    #[test]
    fn a_nameless_cache_buster_and_a_clock_in_any_name_are_dropped() {
        let clocks = recording();
        let check = |url: &str, expected: &str| assert_eq!(canonical_url_with(url, &clocks), expected, "{url}");
        check("https://app.test/api/users?1795521600000", "https://app.test/api/users");
        check("https://app.test/api/users?1795521712345", "https://app.test/api/users");
        check("https://app.test/api/users?page=2&stamp=1795521600", "https://app.test/api/users?page=2");
        check("https://app.test/api/users?id=1234567890", "https://app.test/api/users?id=1234567890");
        // The URL crate percent-encodes the braces of the placeholder in the path.
        check("https://app.test/poll/1795521600000/events", "https://app.test/poll/%7Bclock%7D/events");
        check("https://app.test/items/1234567890123", "https://app.test/items/1234567890123");
        // Without clocks only the names count.
        assert_eq!(
            canonical_url("https://app.test/api/users?1795521600000"),
            "https://app.test/api/users?1795521600000="
        );
    }

    #[test]
    fn clocks_in_bodies_are_dropped_and_endpoints_agree() {
        let clocks = recording();
        let recorded = request(
            "POST",
            "https://app.test/log/1795521600000",
            br#"{"event":"open","at":1795521600000,"sent":"1795521600.25"}"#,
            Some("application/json"),
            &clocks,
        );
        let replayed = request(
            "POST",
            "https://app.test/log/1795521654321",
            br#"{"sent":"1795521660.5","event":"open","at":1795521654321}"#,
            Some("application/json"),
            &clocks,
        );
        assert_eq!(recorded.key, replayed.key);
        assert_eq!(recorded.endpoint, replayed.endpoint);
        assert_eq!(recorded.endpoint.as_deref(), Some("POST app.test /log/{clock}"));
        assert_eq!(recorded.params.len(), 1, "only `event` is left");
        let form = "application/x-www-form-urlencoded";
        assert_eq!(
            request("POST", "https://app.test/f", b"a=1&when=1795521600", Some(form), &clocks).key,
            request("POST", "https://app.test/f", b"when=1795521699&a=1", Some(form), &clocks).key
        );
        assert_ne!(
            request("POST", "https://app.test/f", b"a=1&when=1795521600", Some(form), &Clocks::NONE).key,
            request("POST", "https://app.test/f", b"a=1&when=1795521699", Some(form), &Clocks::NONE).key
        );
    }
}
