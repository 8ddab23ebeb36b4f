//! `trace-host export --format wacz`: a bundle as a WACZ 1.1.1 file, the web archive that ReplayWeb.page,
//! pywb and the webrecorder tools open. This module owns the WACZ layout and the WARC records in it;
//! [`crate::export`] chooses the format, writes the file atomically and redacts.
//!
//! The WACZ is a zip of `archive/data.warc.gz` (a `warcinfo` record, then a `response` and a `request`
//! record for each recorded HTTP exchange of the bundle's HAR, bodies from its content-addressed store),
//! `indexes/index.cdxj` (one line per response, pointing at its record), `pages/pages.jsonl` (the start
//! URL and each main-frame navigation), `datapackage.json` (every file's size and SHA-256) and
//! `datapackage-digest.json` (the package's own hash). The WARC and the index are stored, not deflated,
//! so that a reader seeks into them as the specification recommends.
//!
//! Each WARC record is a gzip member of its own, so that the index's offset and length name one member
//! that decodes to one record. Bodies are written exactly as the bundle holds them, which is as Chrome
//! gave them, already decoded: the response's `Content-Encoding` and `Transfer-Encoding` are dropped and
//! its `Content-Length` is the body's, as webrecorder's own recorder does for bodies it reads through
//! DevTools. HTTP/2 responses are written as HTTP/1.1 messages (pseudo-headers dropped), the only form
//! WARC's `application/http` has.
//!
//! The records are written here by hand rather than through the `warc` crate (0.4): that crate gzips a
//! whole file as one stream, so no record could be seeked to, writes with `write` rather than `write_all`,
//! and would bring chrono, nom, uuid and libflate for what is a header block and a body. Record ids are
//! UUIDs derived from the task and the exchange (a SHA-256, version 8), so the same bundle gives the same
//! records. Digests are `sha256:` and hex, which warcio and the WACZ tools read.

use std::io::{BufWriter, Seek, Write};

use anyhow::{Context, Result};
use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::json;
use sha2::{Digest, Sha256};
use trace_bundle::archive::{Bundle, HashingWriter};
use trace_manifest::event::{EventKind, NavigationCause, header_value};
use trace_manifest::har::Entry;
use trace_manifest::time_fmt::{millis_from_rfc3339, now_ms, rfc3339_from_millis};
use zip::CompressionMethod;
use zip::write::SimpleFileOptions;

/// The WARC file, inside the WACZ.
pub const WARC_PATH: &str = "archive/data.warc.gz";
/// The CDXJ index of the WARC's responses.
pub const INDEX_PATH: &str = "indexes/index.cdxj";
/// The pages a person visited, one JSON object a line.
pub const PAGES_PATH: &str = "pages/pages.jsonl";
pub const DATAPACKAGE_PATH: &str = "datapackage.json";
pub const DATAPACKAGE_DIGEST_PATH: &str = "datapackage-digest.json";
pub const WACZ_VERSION: &str = "1.1.1";

/// What [`write_wacz`] wrote: the files of the package and their bytes (the two package files included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaczWritten {
    pub files: usize,
    pub bytes: u64,
    /// HTTP exchanges archived, each a response and a request record.
    pub exchanges: usize,
    /// Exchanges left out because their URL is no URL ([`target_uri`]).
    pub left_out: usize,
}

/// Writes `source` as a WACZ into `out` (an empty file).
pub fn write_wacz(source: &mut Bundle, out: &mut (impl Write + Seek)) -> Result<WaczWritten> {
    let manifest = source.manifest()?;
    let har = source.har().context("recording.har cannot be read")?;
    let task_id = manifest.task.id.to_string();
    let software = format!("trace-host {}", env!("CARGO_PKG_VERSION"));
    let mut zip = zip::ZipWriter::new(BufWriter::new(out));
    let stored = SimpleFileOptions::default().large_file(true).compression_method(CompressionMethod::Stored);
    let deflated = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
    let mut resources = Vec::new();

    // The WARC, streamed into its entry, a record at a time.
    zip.start_file(WARC_PATH, stored)?;
    let mut hashing = HashingWriter::new(&mut zip);
    let mut warc = WarcWriter { out: &mut hashing, offset: 0 };
    let info = format!(
        "software: {software}\r\nformat: WARC File Format 1.1\r\nconformsTo: \
         https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\nisPartOf: {task_id}\r\n"
    );
    warc.record(
        &[
            ("WARC-Type", "warcinfo".to_owned()),
            ("WARC-Record-ID", record_id(&[&task_id, "warcinfo"])),
            ("WARC-Date", warc_date(&manifest.started_at)),
            ("WARC-Filename", file_name(WARC_PATH).to_owned()),
            ("Content-Type", "application/warc-fields".to_owned()),
        ],
        info.as_bytes(),
    )?;
    let mut index = Vec::new();
    let mut exchanges = 0;
    let mut left_out = Vec::new();
    for (entry_index, entry) in har.log.entries.iter().enumerate() {
        if !is_archived(entry) {
            if is_web_url(&entry.request.url) && target_uri(&entry.request.url).is_none() {
                left_out.push(entry.request.url.as_str());
            }
            continue;
        }
        let body = response_body(source, entry)?;
        let url = target_uri(&entry.request.url).expect("archived entries have one").to_string();
        let date = warc_date(&entry.started_date_time);
        let response_id = record_id(&[&task_id, &entry_index.to_string(), "response"]);
        let block = response_block(entry, &body);
        let payload_digest = sha256_digest(&body);
        let (offset, length) = warc.record(
            &[
                ("WARC-Type", "response".to_owned()),
                ("WARC-Record-ID", response_id.clone()),
                ("WARC-Date", date.clone()),
                ("WARC-Target-URI", url.clone()),
                ("WARC-Payload-Digest", payload_digest.clone()),
                ("WARC-Block-Digest", sha256_digest(&block)),
                ("Content-Type", "application/http; msgtype=response".to_owned()),
            ],
            &block,
        )?;
        let request_body = request_body(source, entry)?;
        let block = request_block(entry, &request_body);
        warc.record(
            &[
                ("WARC-Type", "request".to_owned()),
                ("WARC-Record-ID", record_id(&[&task_id, &entry_index.to_string(), "request"])),
                ("WARC-Date", date.clone()),
                ("WARC-Target-URI", url.clone()),
                ("WARC-Concurrent-To", response_id),
                ("WARC-Payload-Digest", sha256_digest(&request_body)),
                ("WARC-Block-Digest", sha256_digest(&block)),
                ("Content-Type", "application/http; msgtype=request".to_owned()),
            ],
            &block,
        )?;
        index.push(cdxj_line(entry, &url, &date, &payload_digest, offset, length));
        exchanges += 1;
    }
    let (_, size, sha256) = hashing.finish();
    resources.push(resource(WARC_PATH, size, &sha256));

    index.sort();
    let index = index.concat();
    zip.start_file(INDEX_PATH, stored)?;
    zip.write_all(index.as_bytes())?;
    resources.push(resource(INDEX_PATH, index.len() as u64, &sha256_hex(index.as_bytes())));

    let pages = pages(source, &manifest.task.website)?;
    let mut pages_file =
        serde_json::to_string(&json!({"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}))?;
    pages_file.push('\n');
    for page in &pages {
        pages_file.push_str(&serde_json::to_string(&page.json())?);
        pages_file.push('\n');
    }
    zip.start_file(PAGES_PATH, deflated)?;
    zip.write_all(pages_file.as_bytes())?;
    resources.push(resource(PAGES_PATH, pages_file.len() as u64, &sha256_hex(pages_file.as_bytes())));

    let bytes: u64 = resources.iter().map(|r| r["bytes"].as_u64().unwrap_or(0)).sum();
    let mut package = json!({
        "profile": "data-package",
        "wacz_version": WACZ_VERSION,
        "title": if manifest.task.description.is_empty() { task_id.clone() } else { manifest.task.description.clone() },
        "description": format!("TRACE recording {task_id} of {}", manifest.task.website),
        "created": rfc3339_seconds(now_ms()),
        "software": software,
        "resources": resources,
    });
    if let Some(main) = pages.first() {
        package["mainPageURL"] = json!(main.url);
        package["mainPageDate"] = json!(main.ts);
    }
    let package = serde_json::to_vec_pretty(&package)?;
    zip.start_file(DATAPACKAGE_PATH, deflated)?;
    zip.write_all(&package)?;
    let digest = serde_json::to_vec_pretty(&json!({
        "path": DATAPACKAGE_PATH,
        "hash": format!("sha256:{}", sha256_hex(&package)),
    }))?;
    zip.start_file(DATAPACKAGE_DIGEST_PATH, deflated)?;
    zip.write_all(&digest)?;
    zip.finish()?.flush()?;
    if let Some(first) = left_out.first() {
        tracing::warn!(
            "{} recorded exchange(s) left out of the WACZ: their URL holds a line break or another control \
             character, which no browser sends (the bundle was made or altered by hand), e.g. {first:?}",
            left_out.len()
        );
    }
    let bytes = bytes + package.len() as u64 + digest.len() as u64;
    Ok(WaczWritten { files: resources.len() + 2, bytes, exchanges, left_out: left_out.len() })
}

/// Writes WARC records, each compressed as a gzip member of its own, and counts where each one lands.
struct WarcWriter<W: Write> {
    out: W,
    offset: u64,
}

impl<W: Write> WarcWriter<W> {
    /// Writes one record: `WARC/1.1`, `headers` and the `Content-Length` of `block`, then `block`. Returns
    /// its member's offset and compressed length.
    fn record(&mut self, headers: &[(&str, String)], block: &[u8]) -> Result<(u64, u64)> {
        let mut gzip = GzEncoder::new(Vec::with_capacity(block.len() / 2 + 512), Compression::default());
        gzip.write_all(b"WARC/1.1\r\n")?;
        for (name, value) in headers {
            // A value never spans lines: a line break would end the header block.
            let value = one_line(value);
            write!(gzip, "{name}: {value}\r\n")?;
        }
        write!(gzip, "Content-Length: {}\r\n\r\n", block.len())?;
        gzip.write_all(block)?;
        gzip.write_all(b"\r\n\r\n")?;
        let member = gzip.finish()?;
        self.out.write_all(&member).context("cannot write the WARC")?;
        let offset = self.offset;
        self.offset += member.len() as u64;
        Ok((offset, member.len() as u64))
    }
}

/// Whether an entry is an HTTP exchange with a response to archive: not a WebSocket, not a request that
/// failed before any status, not a `data:` or `blob:` URL, and not a URL that is no URL at all (a bundle
/// made by hand can hold anything: one with a line break would write a line of its own into the index).
fn is_archived(entry: &Entry) -> bool {
    target_uri(&entry.request.url).is_some()
        && entry.response.status > 0
        && entry.response.status != 101
        && entry.web_socket_messages.is_empty()
}

/// Whether `url` names an `http` or `https` resource, whether or not it is a well-formed URL.
fn is_web_url(url: &str) -> bool {
    let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme.trim());
    scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")
}

/// An `http` or `https` URL as the records and the index name it: parsed and written again, so that it
/// holds no white space or control character (a browser's URLs are this form already).
fn target_uri(url: &str) -> Option<url::Url> {
    let parsed = url::Url::parse(url).ok().filter(|parsed| matches!(parsed.scheme(), "http" | "https"))?;
    // The parser drops tabs and line breaks where it finds them; a URL that had any is not the one recorded.
    (!url.chars().any(char::is_control)).then_some(parsed)
}

/// The response body as recorded: its file in the bundle, or the HAR's inline text.
fn response_body(source: &mut Bundle, entry: &Entry) -> Result<Vec<u8>> {
    let content = &entry.response.content;
    if let Some(file) = &content.file {
        let url = &entry.request.url;
        return source.read(file).with_context(|| format!("the response body of {url} cannot be read"));
    }
    inline_text(content.text.as_deref(), content.encoding.as_deref())
}

/// The most a compressed request body is decoded to, to tell it is one.
const MAX_DECODED_REQUEST_BYTES: u64 = 256 << 20;

/// The request body as it was sent: its file, or the HAR's inline text, which for a body a page compressed
/// itself is one character per byte (DevTools gives it so) and is written as the bytes it stands for.
fn request_body(source: &mut Bundle, entry: &Entry) -> Result<Vec<u8>> {
    let Some(post_data) = &entry.request.post_data else { return Ok(Vec::new()) };
    if let Some(file) = &post_data.file {
        return Ok(source.read(file)?);
    }
    if let Some(text) = &post_data.text
        && trace_analysis::body::compressed_text(text, MAX_DECODED_REQUEST_BYTES).is_some()
    {
        return Ok(trace_analysis::body::latin1_bytes(text).unwrap_or_default());
    }
    inline_text(post_data.text.as_deref(), None)
}

fn inline_text(text: Option<&str>, encoding: Option<&str>) -> Result<Vec<u8>> {
    use base64::Engine as _;
    match (text, encoding) {
        (None, _) => Ok(Vec::new()),
        (Some(text), Some("base64")) => Ok(base64::engine::general_purpose::STANDARD
            .decode(text)
            .context("a HAR body marked base64 does not decode")?),
        (Some(text), _) => Ok(text.as_bytes().to_vec()),
    }
}

/// Response headers that described the body as it crossed the network, not as it was recorded.
const TRANSFER_HEADERS: [&str; 3] = ["content-encoding", "transfer-encoding", "content-length"];

/// The HTTP response as the record's block: status line, headers (a value Chrome joined with line breaks,
/// as it joins `Set-Cookie`s, split back into one header each; `Content-Type` from the HAR's MIME type when
/// no header gave it), and the body.
fn response_block(entry: &Entry, body: &[u8]) -> Vec<u8> {
    let response = &entry.response;
    let mut block = format!("HTTP/1.1 {}", response.status);
    if !response.status_text.is_empty() {
        block.push(' ');
        block.push_str(&one_line(&response.status_text));
    }
    block.push_str("\r\n");
    for header in &response.headers {
        if TRANSFER_HEADERS.iter().any(|name| header.name.eq_ignore_ascii_case(name)) {
            continue;
        }
        push_header(&mut block, &header.name, &header.value);
    }
    // The type the browser gave the body, when no header says it (a replay would have to guess).
    let mime_type = &response.content.mime_type;
    if header_value(&response.headers, "content-type").is_none() && !mime_type.is_empty() {
        push_header(&mut block, "Content-Type", mime_type);
    }
    block.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut block = block.into_bytes();
    block.extend_from_slice(body);
    block
}

/// The HTTP request as the record's block: request line, headers (`Host` added when HTTP/2's `:authority`
/// carried it) and the body.
fn request_block(entry: &Entry, body: &[u8]) -> Vec<u8> {
    let request = &entry.request;
    let parsed = url::Url::parse(&request.url).ok();
    let target = parsed.as_ref().map_or_else(
        || "/".to_owned(),
        |url| match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        },
    );
    let mut block = format!("{} {target} HTTP/1.1\r\n", one_token(&request.method));
    let has_host = request.headers.iter().any(|header| header.name.eq_ignore_ascii_case("host"));
    if !has_host && let Some(url) = &parsed {
        let host = url.host_str().unwrap_or_default();
        match url.port() {
            Some(port) => block.push_str(&format!("Host: {host}:{port}\r\n")),
            None => block.push_str(&format!("Host: {host}\r\n")),
        }
    }
    for header in &request.headers {
        push_header(&mut block, &header.name, &header.value);
    }
    block.push_str("\r\n");
    let mut block = block.into_bytes();
    block.extend_from_slice(body);
    block
}

/// Appends `name: value` lines, one per line of `value`; a pseudo-header (`:status`) or a name that is no
/// HTTP token is left out.
fn push_header(block: &mut String, name: &str, value: &str) {
    let token =
        !name.is_empty() && name.bytes().all(|byte| byte.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&byte));
    if !token {
        return;
    }
    for line in value.split('\n') {
        block.push_str(name);
        block.push_str(": ");
        // A carriage return left inside a line (or any other control character) would end the header
        // for some readers and not for others: it becomes a space.
        block.push_str(&one_line(line.trim_end_matches('\r')));
        block.push_str("\r\n");
    }
}

/// `text` on one line: every control character (a line break, a bare carriage return, a NUL) a space.
fn one_line(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// A method as a request line and an index key take it: an HTTP token, else `GET`'s place taken by what
/// the recording could not have sent (`INVALID`).
fn one_token(method: &str) -> String {
    let token = !method.is_empty()
        && method.bytes().all(|byte| byte.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&byte));
    if token { method.to_owned() } else { "INVALID".to_owned() }
}

/// One CDXJ line for an exchange's response record: SURT key (with the method for other than `GET`, as
/// pywb's indexer appends it), the 14-digit timestamp, and the record's place in the WARC.
fn cdxj_line(entry: &Entry, url: &str, date: &str, digest: &str, offset: u64, length: u64) -> String {
    let method = one_token(&entry.request.method.to_ascii_uppercase());
    let mut key = surt(url);
    let mut fields = json!({
        "url": url,
        "mime": mime(entry),
        "status": entry.response.status.to_string(),
        "digest": digest,
        "length": length.to_string(),
        "offset": offset.to_string(),
        "filename": file_name(WARC_PATH),
    });
    if method != "GET" {
        key.push(if key.contains('?') { '&' } else { '?' });
        key.push_str(&format!("__wb_method={}", method.to_ascii_lowercase()));
        fields["method"] = json!(method);
    }
    format!("{key} {} {fields}\n", timestamp14(date))
}

fn mime(entry: &Entry) -> String {
    let header = header_value(&entry.response.headers, "content-type");
    let essence = trace_analysis::body::mime_essence(header.unwrap_or(&entry.response.content.mime_type));
    if essence.is_empty() { "unk".to_owned() } else { essence }
}

/// The Sort-friendly URI Reordering Transform of `url`, as the CDXJ indexes of pywb and py-wacz key their
/// lines: scheme and `www.` dropped, host labels reversed (an IP address kept), default port dropped,
/// lowercased, query parameters sorted, fragment dropped. `http://www.Example.com/a?b=1&a=2` is
/// `com,example)/a?a=2&b=1`.
pub fn surt(url: &str) -> String {
    let Ok(parsed) = url::Url::parse(url) else { return url.to_ascii_lowercase() };
    let host = parsed.host_str().unwrap_or_default().to_ascii_lowercase();
    let host = match parsed.host() {
        Some(url::Host::Domain(_)) => {
            let host = host.strip_prefix("www.").unwrap_or(&host);
            host.split('.').rev().collect::<Vec<_>>().join(",")
        }
        _ => host,
    };
    let port = parsed.port().map(|port| format!(":{port}")).unwrap_or_default();
    let mut key = format!("{host}{port})");
    key.push_str(&parsed.path().to_ascii_lowercase());
    if let Some(query) = parsed.query().filter(|query| !query.is_empty()) {
        let mut parameters: Vec<&str> = query.split('&').collect();
        parameters.sort_unstable();
        key.push('?');
        key.push_str(&parameters.join("&").to_ascii_lowercase());
    }
    key
}

/// A page of `pages.jsonl`.
struct Page {
    url: String,
    ts: String,
    title: Option<String>,
}

impl Page {
    fn json(&self) -> serde_json::Value {
        let mut page = json!({"id": record_id(&[&self.url, &self.ts]), "url": self.url, "ts": self.ts});
        if let Some(title) = self.title.as_ref().filter(|title| !title.is_empty()) {
            page["title"] = json!(title);
        }
        page
    }
}

/// The top-level pages of the recording: each main-frame navigation to a new document (not one a script
/// made within its document, not a repeat of the page before), titled by the load that followed it; the
/// task's website when the recording has no navigation.
fn pages(source: &mut Bundle, website: &str) -> Result<Vec<Page>> {
    let mut pages: Vec<Page> = Vec::new();
    source.for_each_event(|record| -> Result<()> {
        let at = rfc3339_from_millis(record.event.ts);
        match record.event.kind {
            EventKind::Navigation(navigation)
                if navigation.main_frame
                    && navigation.cause != NavigationCause::Script
                    && record.event.frame_id.is_none()
                    && pages.last().is_none_or(|last| last.url != navigation.url) =>
            {
                pages.push(Page { url: navigation.url, ts: at, title: None });
            }
            EventKind::PageLoad(load) if record.event.frame_id.is_none() => {
                if let Some(page) = pages.iter_mut().rev().find(|page| page.url == load.url)
                    && page.title.is_none()
                {
                    page.title = Some(load.title);
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    if pages.is_empty() && !website.is_empty() {
        pages.push(Page { url: website.to_owned(), ts: rfc3339_from_millis(0.0), title: None });
    }
    Ok(pages)
}

fn resource(path: &str, bytes: u64, sha256: &str) -> serde_json::Value {
    json!({"name": file_name(path), "path": path, "hash": format!("sha256:{sha256}"), "bytes": bytes})
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A WARC-Date: RFC 3339 UTC with milliseconds (WARC 1.1 allows fractions of seconds).
fn warc_date(rfc3339: &str) -> String {
    rfc3339_from_millis(millis_from_rfc3339(rfc3339).unwrap_or(0.0))
}

/// RFC 3339 UTC to the second, as `datapackage.json`'s `created` is written by the WACZ tools.
fn rfc3339_seconds(millis: f64) -> String {
    let text = rfc3339_from_millis(millis);
    format!("{}Z", &text[..19])
}

/// `2026-11-22T10:00:00.123Z` as `20261122100000`.
fn timestamp14(date: &str) -> String {
    date.chars().filter(char::is_ascii_digit).take(14).collect()
}

/// A record's `<urn:uuid:…>`, derived from `parts` (a SHA-256, shaped as a version 8 UUID).
fn record_id(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    let mut bytes: [u8; 16] = hasher.finalize()[..16].try_into().expect("16 of 32 bytes");
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = hex::encode(bytes);
    format!("<urn:uuid:{}-{}-{}-{}-{}>", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

fn sha256_hex(bytes: &[u8]) -> String {
    trace_bundle::archive::sha256_hex(bytes)
}

fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surt_keys_sort_hosts_by_their_reversed_labels() {
        for (url, key) in [
            ("http://www.Example.com/A?b=1&a=2#top", "com,example)/a?a=2&b=1"),
            ("https://shop.example.org:8443/cart", "org,example,shop:8443)/cart"),
            ("http://127.0.0.1:8000/login", "127.0.0.1:8000)/login"),
            ("http://example.com:80/", "com,example)/"),
        ] {
            assert_eq!(surt(url), key, "{url}");
        }
    }

    #[test]
    fn a_record_is_one_gzip_member_that_decodes_to_itself() {
        let mut out = Vec::new();
        let mut warc = WarcWriter { out: &mut out, offset: 0 };
        let first = warc.record(&[("WARC-Type", "resource".to_owned())], b"one").unwrap();
        let second = warc.record(&[("WARC-Type", "resource".to_owned())], b"two").unwrap();
        assert_eq!(first.0, 0);
        assert_eq!(second.0, first.1);
        let member = &out[second.0 as usize..(second.0 + second.1) as usize];
        let mut decoded = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(member), &mut decoded).unwrap();
        assert_eq!(decoded, "WARC/1.1\r\nWARC-Type: resource\r\nContent-Length: 3\r\n\r\ntwo\r\n\r\n");
    }

    #[test]
    fn record_ids_are_version_8_uuids_and_stable() {
        let id = record_id(&["task", "1", "response"]);
        assert_eq!(id, record_id(&["task", "1", "response"]));
        assert_ne!(id, record_id(&["task", "1", "request"]));
        assert_eq!(id.len(), "<urn:uuid:>".len() + 36, "{id}");
        assert_eq!(&id[24..25], "8", "{id}");
    }

    #[test]
    fn timestamps_have_fourteen_digits() {
        assert_eq!(timestamp14("2026-11-22T10:00:00.123Z"), "20261122100000");
        assert_eq!(rfc3339_seconds(1_763_805_600_123.0), "2025-11-22T10:00:00Z");
    }
}
