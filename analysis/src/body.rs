//! The one parser of request bodies. Matching, checkpoints, the HAR and secret detection all read form,
//! JSON and multipart bodies through [`parse`], so that they agree on what a body's fields are.
//!
//! A body is read as its `Content-Type` says: `application/x-www-form-urlencoded` as a form;
//! `multipart/form-data` as parts (the boundary from the content type, else from the body's first line);
//! `application/json`, `text/json` and `*+json` as JSON, and so is a body of any other type that parses as a
//! JSON object or array (`fetch` sends strings as `text/plain`). A body with no content type at all that
//! looks like a form (`a=1&b=2`, no white space) is a form. Anything else, and a body that does not parse as
//! its type says, is [`ParsedBody::Other`].
//!
//! Finding secrets cannot take a page at its word: [`readings`] gives every way a body parses, whatever its
//! type says (JSON sent as a form by jQuery, a form sent as `text/plain` by `fetch`). A body the page
//! compressed before sending it (`Content-Encoding: gzip` or `deflate`, as `CompressionStream` makes) is read
//! decoded ([`ContentEncoding`]) and, once its secrets are replaced, encoded again the same way; so is one
//! whose headers say nothing of it (`application/octet-stream`), known by its first bytes
//! ([`ContentEncoding::sniff`], [`decode_compressed`]). DevTools gives a request body that is not UTF-8, a
//! compressed one among them, as text of one character per byte (`postData`): [`compressed_text`] reads such
//! text back as the bytes it stands for.

use serde_json::Value;

/// A request body, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum ParsedBody<'a> {
    /// Decoded fields in order; repeated names stay separate.
    Form(Vec<(String, String)>),
    Json(Value),
    Multipart(Vec<Part<'a>>),
    Other,
}

/// A content type's essence: its type and subtype, before any parameter, trimmed and in lower case
/// (`text/html` for `Text/HTML; charset=UTF-8`). The one reading of it: bodies, the viewer, replay and the
/// recorder all compare content types by it.
pub fn mime_essence(content_type: &str) -> String {
    content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase()
}

/// Parses `body` by its content type (see the module's rules).
pub fn parse<'a>(body: &'a [u8], content_type: Option<&str>) -> ParsedBody<'a> {
    if body.is_empty() {
        return ParsedBody::Other;
    }
    let essence = mime_essence(content_type.unwrap_or_default());
    let parsed = match essence.as_str() {
        "application/x-www-form-urlencoded" => Some(form(body)),
        "multipart/form-data" => {
            parse_multipart_body(body, content_type.and_then(|c| media_type_parameter(c, "boundary")))
                .map(ParsedBody::Multipart)
        }
        "application/json" | "text/json" => json(body),
        _ if essence.ends_with("+json") || looks_like_json(body) => json(body),
        "" if looks_like_form(body) => Some(form(body)),
        _ => None,
    };
    parsed.unwrap_or(ParsedBody::Other)
}

/// Every way `body` parses, whatever `content_type` says: as its type says ([`parse`]; but JSON declared a
/// form is only JSON), as JSON when it is a JSON object or array, as multipart when its first line is a
/// boundary that parts follow, and as a form when it has a form's shape ([`has_form_shape`]). Each reading
/// once; none for a body that is none of them. What secret detection reads, so that a page's declared type
/// hides no field.
pub fn readings<'a>(body: &'a [u8], content_type: Option<&str>) -> Vec<ParsedBody<'a>> {
    let mut readings = Vec::new();
    let mut add = |reading: ParsedBody<'a>| {
        if reading != ParsedBody::Other && !readings.contains(&reading) {
            readings.push(reading);
        }
    };
    let as_json = if looks_like_json(body) { json(body) } else { None };
    match parse(body, content_type) {
        // JSON declared a form is no form: its "fields" would be pieces of the JSON text.
        ParsedBody::Form(_) if as_json.is_some() => {}
        declared => add(declared),
    }
    if let Some(reading) = as_json {
        add(reading);
    }
    if body.starts_with(b"--")
        && let Some(parts) = parse_multipart_body(body, None)
    {
        add(ParsedBody::Multipart(parts));
    }
    if has_form_shape(body) {
        add(form(body));
    }
    readings
}

/// `name=value` pairs joined by `&` and nothing else: no white space, at least one `=`, and names of the
/// characters forms and query strings use (not JSON's quotes and braces, nor markup or script).
pub fn has_form_shape(body: &[u8]) -> bool {
    let name_byte = |byte: &u8| byte.is_ascii_alphanumeric() || b"%._-[]+*~:".contains(byte);
    !body.is_empty()
        && body.contains(&b'=')
        && !body.iter().any(u8::is_ascii_whitespace)
        && body.split(|&byte| byte == b'&').all(|pair| {
            let name = pair.split(|&byte| byte == b'=').next().unwrap_or_default();
            name.iter().all(name_byte)
        })
}

/// The fields of a form, JSON or multipart body, as text: a form's fields; a JSON body's leaves (strings,
/// numbers and booleans) named by their path (`title`, `variables.input.name`, `items[0].id`); a
/// multipart body's parts that are not files. What a checkpoint's `body_fields` are compared with.
pub fn form_fields(body: &str, content_type: Option<&str>) -> Vec<(String, String)> {
    match parse(body.as_bytes(), content_type) {
        ParsedBody::Form(fields) => fields,
        ParsedBody::Json(value) => {
            let mut fields = Vec::new();
            json_leaves(&value, &mut String::new(), &mut |_, _| true, &mut |path, leaf| {
                if let Some(text) = leaf_text(leaf) {
                    fields.push((path.to_owned(), text));
                }
            });
            fields
        }
        ParsedBody::Multipart(parts) => parts
            .into_iter()
            .filter(|part| part.filename.is_none())
            .filter_map(|part| Some((part.name, String::from_utf8(part.content.to_vec()).ok()?)))
            .collect(),
        ParsedBody::Other => Vec::new(),
    }
}

/// The fields of a text frame a page sent on a WebSocket, named as a JSON body's are ([`form_fields`]): the
/// JSON after any run of digits a protocol puts first (Socket.IO's `42["event",…]`), its strings that hold
/// JSON themselves read into (SockJS sends each message as a JSON string in an array). None for a frame
/// that holds no JSON object or array.
pub fn frame_fields(data: &str) -> Vec<(String, String)> {
    let json = data.trim_start_matches(|c: char| c.is_ascii_digit());
    let Ok(mut value) = serde_json::from_str::<Value>(json) else { return Vec::new() };
    if !(value.is_object() || value.is_array()) {
        return Vec::new();
    }
    read_into_json_strings(&mut value, 0);
    let mut fields = Vec::new();
    json_leaves(&value, &mut String::new(), &mut |_, _| true, &mut |path, leaf| {
        if let Some(text) = leaf_text(leaf) {
            fields.push((path.to_owned(), text));
        }
    });
    fields
}

/// Replaces each string of `value` that holds a JSON object or array by what it holds, a few levels deep.
fn read_into_json_strings(value: &mut Value, depth: usize) {
    const DEEPEST: usize = 3;
    if depth > DEEPEST {
        return;
    }
    match value {
        Value::String(text) if text.starts_with(['{', '[']) => {
            if let Ok(inner @ (Value::Object(_) | Value::Array(_))) = serde_json::from_str::<Value>(text) {
                *value = inner;
                read_into_json_strings(value, depth + 1);
            }
        }
        Value::Object(map) => map.values_mut().for_each(|item| read_into_json_strings(item, depth)),
        Value::Array(items) => items.iter_mut().for_each(|item| read_into_json_strings(item, depth)),
        _ => {}
    }
}

/// Walks a JSON value's leaves, each named by its path (`a.b`, `items[0]`): `keep` decides, member by
/// member, what is walked into; `leaf` gets every scalar kept, and every empty object and array.
pub fn json_leaves(
    value: &Value,
    path: &mut String,
    keep: &mut dyn FnMut(&str, &Value) -> bool,
    leaf: &mut dyn FnMut(&str, &Value),
) {
    let restore = path.len();
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, item) in map {
                if !keep(key, item) {
                    continue;
                }
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                json_leaves(item, path, keep, leaf);
                path.truncate(restore);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (position, item) in items.iter().enumerate() {
                path.push_str(&format!("[{position}]"));
                json_leaves(item, path, keep, leaf);
                path.truncate(restore);
            }
        }
        scalar => leaf(path, scalar),
    }
}

/// A JSON leaf as a field's text: strings as they are, numbers and booleans written out; `null` and empty
/// objects and arrays are none.
fn leaf_text(leaf: &Value) -> Option<String> {
    match leaf {
        Value::String(text) => Some(text.clone()),
        Value::Number(_) | Value::Bool(_) => Some(leaf.to_string()),
        Value::Null | Value::Object(_) | Value::Array(_) => None,
    }
}

fn form(body: &[u8]) -> ParsedBody<'static> {
    ParsedBody::Form(url::form_urlencoded::parse(body).map(|(k, v)| (k.into_owned(), v.into_owned())).collect())
}

fn json(body: &[u8]) -> Option<ParsedBody<'static>> {
    serde_json::from_slice(body).ok().map(ParsedBody::Json)
}

fn looks_like_form(body: &[u8]) -> bool {
    body.contains(&b'=') && !body.iter().any(u8::is_ascii_whitespace)
}

pub fn looks_like_json(body: &[u8]) -> bool {
    matches!(body.iter().find(|byte| !byte.is_ascii_whitespace()), Some(b'{' | b'['))
}

/// A parameter of a media type (`boundary` of `multipart/form-data; boundary=x`), unquoted.
pub fn media_type_parameter<'a>(content_type: &'a str, name: &str) -> Option<&'a str> {
    content_type.split(';').skip(1).find_map(|parameter| {
        let (key, value) = parameter.split_once('=')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim().trim_matches('"'))
    })
}

/// `None` when the body is not multipart after all, so that it is kept as it is. Without a boundary in the
/// content type, the boundary is read from the body's first line.
fn parse_multipart_body<'a>(body: &'a [u8], boundary: Option<&str>) -> Option<Vec<Part<'a>>> {
    let boundary = match boundary {
        Some(boundary) if !boundary.is_empty() => boundary.as_bytes(),
        _ => {
            let first_line = body.split(|&byte| byte == b'\n').next()?;
            first_line.strip_suffix(b"\r").unwrap_or(first_line).strip_prefix(b"--")?
        }
    };
    parse_multipart(body, boundary)
}

/// One part of a `multipart/form-data` body.
#[derive(Debug, Clone, PartialEq)]
pub struct Part<'a> {
    pub name: String,
    pub filename: Option<String>,
    pub content_type: Option<String>,
    pub content: &'a [u8],
}

fn parse_multipart<'a>(body: &'a [u8], boundary: &[u8]) -> Option<Vec<Part<'a>>> {
    let mut delimiter = Vec::with_capacity(boundary.len() + 2);
    delimiter.extend_from_slice(b"--");
    delimiter.extend_from_slice(boundary);
    let mut parts = Vec::new();
    let mut closed = false;
    // What comes before the first delimiter is a preamble, which carries nothing.
    for section in split_on(body, &delimiter).into_iter().skip(1) {
        if section.starts_with(b"--") {
            closed = true;
            break;
        }
        let section = strip_line_break_start(section);
        // The line break before a delimiter belongs to the delimiter.
        let section = section.strip_suffix(b"\r\n").or_else(|| section.strip_suffix(b"\n")).unwrap_or(section);
        let (headers, content) = split_once_on(section, b"\r\n\r\n").or_else(|| split_once_on(section, b"\n\n"))?;
        parts.push(parse_part_headers(headers, content));
    }
    (closed || !parts.is_empty()).then_some(parts)
}

fn parse_part_headers<'a>(headers: &[u8], content: &'a [u8]) -> Part<'a> {
    let mut part = Part { name: String::new(), filename: None, content_type: None, content };
    for line in String::from_utf8_lossy(headers).lines() {
        let Some((header, value)) = line.split_once(':') else { continue };
        let header = header.trim();
        if header.eq_ignore_ascii_case("content-disposition") {
            for parameter in value.split(';').skip(1) {
                let Some((key, value)) = parameter.split_once('=') else { continue };
                let value = value.trim().trim_matches('"').to_owned();
                match key.trim().to_ascii_lowercase().as_str() {
                    "name" => part.name = value,
                    "filename" => part.filename = Some(value),
                    _ => {}
                }
            }
        } else if header.eq_ignore_ascii_case("content-type") {
            part.content_type = Some(value.trim().to_owned());
        }
    }
    part
}

fn strip_line_break_start(section: &[u8]) -> &[u8] {
    section.strip_prefix(b"\r\n").or_else(|| section.strip_prefix(b"\n")).unwrap_or(section)
}

/// `haystack` split at each occurrence of `needle` (not empty).
fn split_on<'a>(haystack: &'a [u8], needle: &[u8]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut at = 0;
    while at + needle.len() <= haystack.len() {
        if haystack[at] == needle[0] && haystack[at..].starts_with(needle) {
            pieces.push(&haystack[start..at]);
            at += needle.len();
            start = at;
        } else {
            at += 1;
        }
    }
    pieces.push(&haystack[start..]);
    pieces
}

fn split_once_on<'a>(haystack: &'a [u8], needle: &[u8]) -> Option<(&'a [u8], &'a [u8])> {
    let at = haystack.windows(needle.len()).position(|window| window == needle)?;
    Some((&haystack[..at], &haystack[at + needle.len()..]))
}

/// A `Content-Encoding` a page may give a request body it compressed itself, which the browser sends as it is.
#[cfg(feature = "native")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentEncoding {
    Gzip,
    /// zlib's format, as HTTP's `deflate` means (and `CompressionStream("deflate")` writes).
    Deflate,
}

#[cfg(feature = "native")]
impl ContentEncoding {
    /// The encoding a `Content-Encoding` header names, when it is one of these alone.
    pub fn from_header(value: &str) -> Option<ContentEncoding> {
        match value.trim().to_ascii_lowercase().as_str() {
            "gzip" | "x-gzip" => Some(ContentEncoding::Gzip),
            "deflate" => Some(ContentEncoding::Deflate),
            _ => None,
        }
    }

    /// The encoding `bytes` start as, whatever any header says: a gzip stream's magic number, or a zlib
    /// header (deflate with a window of at most 32 KiB, and check bits that make its two bytes a multiple
    /// of 31). A guess until they decode ([`decode_compressed`]).
    pub fn sniff(bytes: &[u8]) -> Option<ContentEncoding> {
        match bytes {
            [0x1f, 0x8b, ..] => Some(ContentEncoding::Gzip),
            [first, second, ..]
                if first & 0x0f == 8 && first >> 4 <= 7 && (u16::from(*first) << 8 | u16::from(*second)) % 31 == 0 =>
            {
                Some(ContentEncoding::Deflate)
            }
            _ => None,
        }
    }

    /// The encoding of a HAR request's body, from its `Content-Encoding` header.
    pub fn of_request(request: &trace_manifest::har::HarRequest) -> Option<ContentEncoding> {
        trace_manifest::event::header_value(&request.headers, "content-encoding").and_then(ContentEncoding::from_header)
    }

    /// `bytes` decoded, or `None` when they do not decode to at most `limit` bytes.
    pub fn decode(self, bytes: &[u8], limit: u64) -> Option<Vec<u8>> {
        use std::io::Read;
        let mut decoded = Vec::new();
        let reader: Box<dyn Read + '_> = match self {
            ContentEncoding::Gzip => Box::new(flate2::read::MultiGzDecoder::new(bytes)),
            ContentEncoding::Deflate => Box::new(flate2::read::ZlibDecoder::new(bytes)),
        };
        reader.take(limit.saturating_add(1)).read_to_end(&mut decoded).ok()?;
        (decoded.len() as u64 <= limit).then_some(decoded)
    }

    /// `bytes` encoded.
    pub fn encode(self, bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let level = flate2::Compression::default();
        let written = match self {
            ContentEncoding::Gzip => {
                let mut encoder = flate2::write::GzEncoder::new(Vec::new(), level);
                encoder.write_all(bytes).and_then(|()| encoder.finish())
            }
            ContentEncoding::Deflate => {
                let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), level);
                encoder.write_all(bytes).and_then(|()| encoder.finish())
            }
        };
        written.expect("writing to memory does not fail")
    }
}

/// `bytes` decoded, when by their first bytes they are a gzip or zlib stream ([`ContentEncoding::sniff`])
/// and decode whole to at most `limit` bytes: a body a page compressed itself, whatever its headers say.
#[cfg(feature = "native")]
pub fn decode_compressed(bytes: &[u8], limit: u64) -> Option<(ContentEncoding, Vec<u8>)> {
    let encoding = ContentEncoding::sniff(bytes)?;
    Some((encoding, encoding.decode(bytes, limit)?))
}

/// The bytes a body's text stands for when it holds one character per byte (`U+0000` to `U+00FF`), as
/// DevTools gives a request body that is not UTF-8; `None` when a character is past `U+00FF`.
pub fn latin1_bytes(text: &str) -> Option<Vec<u8>> {
    text.chars().map(|c| u8::try_from(u32::from(c)).ok()).collect()
}

/// `bytes` as text of one character per byte, as DevTools gives a request body that is not UTF-8.
pub fn latin1_text(bytes: &[u8]) -> String {
    bytes.iter().map(|&byte| char::from(byte)).collect()
}

/// A request body's text that stands for a compressed stream, one character per byte ([`latin1_bytes`]):
/// its encoding and what it decodes to (at most `limit` bytes). What the recorder keeps of a body a page
/// gzipped itself and sent without saying so.
#[cfg(feature = "native")]
pub fn compressed_text(text: &str, limit: u64) -> Option<(ContentEncoding, Vec<u8>)> {
    // Its first two characters say whether it can be one, before the whole text is turned into bytes.
    let mut head = text.chars().map(|c| u8::try_from(u32::from(c)).ok());
    ContentEncoding::sniff(&[head.next()??, head.next()??])?;
    decode_compressed(&latin1_bytes(text)?, limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_frame_is_read_as_json_behind_its_protocols_prefix_and_inside_its_strings() {
        let fields = |data: &str| frame_fields(data);
        assert_eq!(fields(r#"{"add":3,"who":"ann"}"#), [("add".into(), "3".into()), ("who".into(), "ann".into())]);
        // Socket.IO: a packet type before the JSON.
        assert_eq!(
            fields(r#"42["event",{"id":6,"args":["7"]}]"#),
            [("[0]".to_owned(), "event".to_owned()), ("[1].args[0]".into(), "7".into()), ("[1].id".into(), "6".into())]
        );
        // SockJS: messages as JSON strings in an array.
        assert_eq!(fields(r#"["{\"order\":\"lamp\"}"]"#), [("[0].order".to_owned(), "lamp".to_owned())]);
        for nothing in ["2", "40", "ping", r#""text""#, "", "{not json"] {
            assert!(fields(nothing).is_empty(), "{nothing:?}");
        }
    }

    fn fields(body: &str, content_type: Option<&str>) -> Vec<(String, String)> {
        form_fields(body, content_type)
    }

    #[test]
    fn form_and_json_bodies_have_fields_by_type_or_by_shape() {
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        assert_eq!(fields("a=1&b=x+y", None), pairs(&[("a", "1"), ("b", "x y")]));
        assert_eq!(
            fields("a=1&b=x+y", Some("application/x-www-form-urlencoded; charset=UTF-8")),
            pairs(&[("a", "1"), ("b", "x y")])
        );
        assert_eq!(fields("{\"q\":\"mug\",\"n\":2,\"o\":{}}", None), pairs(&[("n", "2"), ("q", "mug")]));
        // Nested members by their path, as GraphQL variables and SPA payloads send them.
        assert_eq!(
            fields(r#"{"variables":{"input":{"name":"Eds","tags":["a",null]}},"ok":true}"#, None),
            pairs(&[("ok", "true"), ("variables.input.name", "Eds"), ("variables.input.tags[0]", "a")])
        );
        assert_eq!(fields("{\"q\":\"mug\"}", Some("text/plain;charset=UTF-8")), pairs(&[("q", "mug")]));
        assert!(fields("just text", None).is_empty());
        // A type that says text is taken at its word unless the body is JSON.
        assert!(fields("a=1", Some("text/plain")).is_empty());
        assert!(fields("{not json", Some("application/json")).is_empty());
    }

    /// Issue #11: what a body's type says does not hide its fields from secret detection.
    #[test]
    fn a_body_reads_every_way_it_parses_whatever_its_type_says() {
        let check = |body: &str, content_type: &str, expected: &[&str]| {
            let kinds: Vec<&str> = readings(body.as_bytes(), Some(content_type))
                .iter()
                .map(|reading| match reading {
                    ParsedBody::Form(_) => "form",
                    ParsedBody::Json(_) => "json",
                    ParsedBody::Multipart(_) => "multipart",
                    ParsedBody::Other => "other",
                })
                .collect();
            assert_eq!(kinds, expected, "{body:?} as {content_type}");
        };
        // jQuery's default type, on a JSON string: read as JSON, not as a form of pieces of JSON.
        check(r#"{"client_secret":"abc=1"}"#, "application/x-www-form-urlencoded; charset=UTF-8", &["json"]);
        // `fetch`'s default type, on a form and on multipart.
        check("user=ann&csrf_token=xyz", "text/plain;charset=UTF-8", &["form"]);
        check(
            "--XyZ\r\nContent-Disposition: form-data; name=\"csrf_token\"\r\n\r\nabc\r\n--XyZ--\r\n",
            "text/plain",
            &["multipart"],
        );
        check("a=1&b=x+y", "", &["form"]);
        // Markup, script and prose have no form's shape.
        check("<p>a=b</p>", "text/html", &[]);
        check("var a=1;", "application/javascript", &[]);
        check("token=abc and more", "text/plain", &[]);
        check("{\"a\":\"b=c&token=d\"}", "text/plain", &["json"]);
    }

    /// Issue #45: a page that gzips a JSON body itself and sends it as `application/octet-stream`, saying
    /// nothing of it: the body is known by its bytes, and so is the text DevTools gives of it (one
    /// character per byte, `\u{1f}\u{8b}…`); text that only looks like it at first is not.
    #[cfg(feature = "native")]
    #[test]
    fn a_body_compressed_without_saying_so_is_known_by_its_bytes_and_so_is_its_text() {
        let json = br#"{"user":"ann","password":"Tr0ub4dor&3-horse"}"#;
        for encoding in [ContentEncoding::Gzip, ContentEncoding::Deflate] {
            let compressed = encoding.encode(json);
            assert_eq!(ContentEncoding::sniff(&compressed), Some(encoding));
            assert_eq!(decode_compressed(&compressed, 1 << 20), Some((encoding, json.to_vec())));
            let text = latin1_text(&compressed);
            assert!(String::from_utf8(compressed.clone()).is_err(), "not UTF-8: why DevTools gives it so");
            assert_eq!(latin1_bytes(&text).as_deref(), Some(compressed.as_slice()));
            assert_eq!(compressed_text(&text, 1 << 20), Some((encoding, json.to_vec())));
            assert_eq!(compressed_text(&text, 8), None, "past the limit it is not decoded");
        }
        for text in ["user=ann&pass=x", "x=1", "xylophone", "\u{1f}\u{8b} not gzip", "grüße", "{\"a\":1}", ""] {
            assert_eq!(compressed_text(text, 1 << 20), None, "{text:?}");
        }
        assert_eq!(latin1_bytes("ok €"), None, "a character past U+00FF stands for no byte");
    }

    #[test]
    fn multipart_parts_are_read_with_or_without_the_boundary_in_the_type() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nMug\r\n--XyZ\r\n\
                     Content-Disposition: form-data; name=\"photo\"; filename=\"m.png\"\r\nContent-Type: image/png\r\n\r\n\x89PNG\r\n--XyZ--\r\n";
        for content_type in ["multipart/form-data; boundary=XyZ", "multipart/form-data"] {
            let ParsedBody::Multipart(parts) = parse(body, Some(content_type)) else {
                panic!("{content_type}: not multipart")
            };
            let summary: Vec<_> = parts.iter().map(|p| (p.name.as_str(), p.filename.as_deref(), p.content)).collect();
            assert_eq!(summary, [("title", None, &b"Mug"[..]), ("photo", Some("m.png"), &b"\x89PNG"[..])]);
        }
        assert_eq!(parse(b"no parts here", Some("multipart/form-data; boundary=XyZ")), ParsedBody::Other);
    }
}
