//! Canonical forms of URLs and request bodies: what is left of a request once what changes from one page
//! load to the next without changing the answer is gone. Replay's matcher matches on them (its levels and
//! queues are its own), and the URL check of a re-run compares with them.
//!
//! Dropped: the URL fragment; volatile parameters (cache busters such as `_`, `t`, `ts`, `cb`; `utm_*`; the
//! JSONP `callback`: [`is_volatile_name`]) in the query, form fields, JSON keys at any depth and multipart
//! parts. Normalized: query and form parameters decoded, sorted by name and re-encoded one way; JSON
//! objects' keys sorted; multipart parts sorted by name and described without their boundary; host case
//! and default ports. Bodies are read by [`crate::body::parse`].

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
    match Url::parse(url) {
        Ok(parsed) => {
            let params = query_params(&parsed);
            canonical_parsed_url(parsed, &params)
        }
        Err(_) => without_fragment(url).to_owned(),
    }
}

fn query_params(url: &Url) -> Vec<Param> {
    let mut params: Vec<Param> = url
        .query_pairs()
        .filter(|(name, _)| !is_volatile_name(name))
        .map(|(name, value)| Param::new(Place::Query, name.into_owned(), value.into_owned()))
        .collect();
    params.sort_by(Param::order);
    params
}

fn canonical_parsed_url(mut url: Url, params: &[Param]) -> String {
    url.set_fragment(None);
    if params.is_empty() {
        url.set_query(None);
    } else {
        let query = encode_pairs(params);
        url.set_query(Some(&query));
    }
    url.into()
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
    analyze_body(body, content_type).0
}

/// `method` (as given: the caller decides its case), `url` and `body` in canonical form.
pub fn request(method: &str, url: &str, body: &[u8], content_type: Option<&str>) -> CanonicalRequest {
    let (canonical_body, body_params) = analyze_body(body, content_type);
    let (canonical_url, endpoint, mut params) = match Url::parse(url) {
        Ok(parsed) => {
            let params = query_params(&parsed);
            let endpoint = endpoint_of(method, &parsed);
            (canonical_parsed_url(parsed, &params), Some(endpoint), params)
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
    Url::parse(url).ok().map(|url| endpoint_of(method, &url))
}

fn endpoint_of(method: &str, url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{method} {host}:{port} {}", url.path()),
        None => format!("{method} {host} {}", url.path()),
    }
}

/// The canonical body and its parameters for the fuzzy score.
fn analyze_body(body: &[u8], content_type: Option<&str>) -> (Vec<u8>, Vec<Param>) {
    if body.is_empty() {
        return (Vec::new(), Vec::new());
    }
    match body::parse(body, content_type) {
        ParsedBody::Form(fields) => analyze_form(fields),
        ParsedBody::Json(value) => analyze_json(&value, body.len()),
        ParsedBody::Multipart(parts) => analyze_multipart(parts, body.len()),
        ParsedBody::Other => {
            let value = String::from_utf8_lossy(body).into_owned();
            (body.to_vec(), vec![Param::new(Place::Body, String::new(), value)])
        }
    }
}

fn analyze_form(fields: Vec<(String, String)>) -> (Vec<u8>, Vec<Param>) {
    let mut params: Vec<Param> = fields
        .into_iter()
        .filter(|(name, _)| !is_volatile_name(name))
        .map(|(name, value)| Param::new(Place::Body, name, value))
        .collect();
    params.sort_by(Param::order);
    (encode_pairs(&params).into_bytes(), params)
}

fn analyze_json(value: &Value, body_len: usize) -> (Vec<u8>, Vec<Param>) {
    let mut canonical = String::with_capacity(body_len);
    write_canonical_json(value, &mut canonical);
    let mut params = Vec::new();
    flatten_json(value, &mut String::new(), &mut params);
    params.sort_by(Param::order);
    (canonical.into_bytes(), params)
}

/// Compact JSON with object keys sorted and volatile keys removed at every depth. Sorting here rather than
/// relying on `serde_json::Map` keeps the result right if another crate turns on `preserve_order`.
fn write_canonical_json(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().filter(|(key, _)| !is_volatile_name(key)).collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (position, (key, item)) in entries.into_iter().enumerate() {
                if position > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical_json(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (position, item) in items.iter().enumerate() {
                if position > 0 {
                    out.push(',');
                }
                write_canonical_json(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// One parameter per leaf, named by its path (`cart.items[0].id`); strings without their quotes.
fn flatten_json(value: &Value, path: &mut String, params: &mut Vec<Param>) {
    let restore = path.len();
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, item) in map.iter().filter(|(key, _)| !is_volatile_name(key)) {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                flatten_json(item, path, params);
                path.truncate(restore);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (position, item) in items.iter().enumerate() {
                path.push_str(&format!("[{position}]"));
                flatten_json(item, path, params);
                path.truncate(restore);
            }
        }
        Value::String(text) => params.push(Param::new(Place::Body, path.clone(), text.clone())),
        other => params.push(Param::new(Place::Body, path.clone(), other.to_string())),
    }
}

/// Parts sorted by name, volatile ones removed, each described without the boundary.
fn analyze_multipart(mut parts: Vec<Part<'_>>, body_len: usize) -> (Vec<u8>, Vec<Param>) {
    parts.retain(|part| !is_volatile_name(&part.name));
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
