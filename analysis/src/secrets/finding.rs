//! The search of a bundle for its secrets ([`Secrets::find`]): the credentials typed, then what the HAR's
//! headers, cookies, URLs and bodies, the sockets' frames, the pages' DOM snapshots and the storage carry,
//! found by structure, by name ([`super::names`]) and by known shapes ([`SECRET_SHAPES`]); each secret
//! given its placeholder, and what cannot be replaced safely kept and listed ([`Kept`]).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use super::names::{is_common_word, is_inert, is_plain_word, is_secret_name, is_small_number, is_word_like};
use super::{MIN_SECRET_CHARS, PLACEHOLDER_PREFIX};
use crate::body::{self, ParsedBody};
#[cfg(feature = "native")]
use trace_bundle::archive::Bundle;
use trace_manifest::report::SecretKind;
#[cfg(feature = "native")]
use trace_manifest::{bundle::StorageFile, event::EventRecord, har::Har, trajectory::Credential};

/// Bodies larger than this are not parsed for secret fields (they are still searched and replaced).
#[cfg(feature = "native")]
const MAX_PARSED_BODY_BYTES: u64 = 4 << 20;

/// One secret value and what stands in for it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    pub kind: SecretKind,
    /// The cookie, header, parameter, field or storage key it was found under.
    pub name: String,
    pub value: String,
    /// `trace-redacted-<kind>-<name>-<n>`: letters, digits and `-` only, so that it needs no escaping in a
    /// URL, a header, a cookie, JSON or HTML, and every encoded form of the secret maps to it unchanged.
    pub placeholder: String,
}

// By hand, so that logging a secret never prints it.
impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret").field("kind", &self.kind).field("name", &self.name).finish_non_exhaustive()
    }
}

/// The secrets of one bundle, each value once (named after where it was first found).
#[derive(Debug, Default)]
pub struct Secrets {
    list: Vec<Secret>,
    by_value: BTreeMap<String, usize>,
    /// Values a rule chose but that are left as they are, each once, with the value itself (never shown).
    kept: Vec<(Kept, String)>,
    /// The recording's addresses without query and fragment: a word they use cannot be replaced.
    addresses: Vec<String>,
}

/// A value a rule chose that the redaction leaves as it is, and why: listed for the person by where it
/// was found, never by its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub kind: SecretKind,
    /// The cookie, header, parameter, field or storage key it was found under.
    pub name: String,
    pub reason: KeptReason,
}

/// Why a value a rule chose is not replaced (see the module's rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeptReason {
    /// Fewer than [`MIN_SECRET_CHARS`] characters.
    TooShort,
    /// A word of the web's or the bundle's own formats ([`COMMON_WORDS`]), or one the recording's
    /// addresses use.
    Common,
    /// Chosen by its name alone, and a plain word or a small number, as a site keeps preferences.
    Word,
}

impl KeptReason {
    pub fn describe(self) -> &'static str {
        match self {
            KeptReason::TooShort => "too short to tell apart from ordinary text",
            KeptReason::Common => "a word the web's formats or the recording's addresses use",
            KeptReason::Word => "a plain word or small number, not a secret's shape",
        }
    }
}

impl Secrets {
    pub fn iter(&self) -> impl Iterator<Item = &Secret> {
        self.list.iter()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn get(&self, index: usize) -> &Secret {
        &self.list[index]
    }

    /// How many secrets of each kind.
    pub fn counts(&self) -> BTreeMap<SecretKind, usize> {
        let mut counts = BTreeMap::new();
        for secret in &self.list {
            *counts.entry(secret.kind).or_default() += 1;
        }
        counts
    }

    /// The placeholder that replaced `value`, if it is a secret.
    pub fn placeholder_of(&self, value: &str) -> Option<&str> {
        self.by_value.get(value).map(|&index| self.list[index].placeholder.as_str())
    }

    /// The values rules chose but that are left as they are (see the module's rules), each once, in the
    /// order found; none that is a secret under another name.
    pub fn kept(&self) -> impl Iterator<Item = &Kept> {
        self.kept.iter().filter(|(_, value)| !self.by_value.contains_key(value)).map(|(kept, _)| kept)
    }

    /// Adds a secret unless it is empty, inert, or already known (under another name). A value that cannot
    /// be replaced safely (too short, a common word, a word of the recording's addresses) is kept and
    /// listed instead ([`Secrets::kept`]).
    ///
    /// A placeholder is no secret: a bundle redacted once is redacted again (as `trace-host dataset` does
    /// with the redacted zips it is given) without its stand-ins being taken for secrets.
    pub fn add(&mut self, kind: SecretKind, name: &str, value: &str) {
        let value = value.trim();
        if value.is_empty()
            || is_inert(value)
            || value.starts_with(PLACEHOLDER_PREFIX)
            || self.by_value.contains_key(value)
        {
            return;
        }
        let reason = if value.chars().count() < MIN_SECRET_CHARS {
            Some(KeptReason::TooShort)
        } else if is_common_word(value) || (is_word_like(value) && self.in_addresses(value)) {
            Some(KeptReason::Common)
        } else {
            None
        };
        if let Some(reason) = reason {
            self.keep(kind, name, value, reason);
            return;
        }
        let placeholder = format!("{PLACEHOLDER_PREFIX}{}-{}-{}", kind.as_str(), slug(name), self.list.len() + 1);
        self.by_value.insert(value.to_owned(), self.list.len());
        self.list.push(Secret { kind, name: name.to_owned(), value: value.to_owned(), placeholder });
    }

    /// Adds a value chosen by its name alone: kept and listed when it is a plain word or a small number
    /// (`sort_key=price`), which no site uses as a secret and replacing would damage the bundle.
    fn add_by_name(&mut self, kind: SecretKind, name: &str, value: &str) {
        let value = value.trim();
        if (is_word_like(value) || is_small_number(value)) && !is_inert(value) {
            self.keep(kind, name, value, KeptReason::Word);
        } else {
            self.add(kind, name, value);
        }
    }

    fn keep(&mut self, kind: SecretKind, name: &str, value: &str, reason: KeptReason) {
        if !self.kept.iter().any(|(_, known)| known == value) {
            self.kept.push((Kept { kind, name: name.to_owned(), reason }, value.to_owned()));
        }
    }

    fn in_addresses(&self, value: &str) -> bool {
        self.addresses.iter().any(|address| address.contains(value))
    }

    /// Finds the secrets of a bundle: the `credentials` typed (as [`crate::trajectory`] finds them in
    /// `events`), then what the HAR, the sockets' frames in `events`, the storage snapshots, the pages and
    /// the text bodies the HAR points to carry.
    ///
    /// Fails when a credential is too short to be redacted reliably: the export cannot promise its absence.
    #[cfg(feature = "native")]
    pub fn find(
        bundle: &mut Bundle,
        credentials: &[Credential],
        events: &[EventRecord],
        har: &Har,
        storage: &StorageFile,
    ) -> anyhow::Result<Secrets> {
        let mut secrets = Secrets::default();
        let mut addresses: Vec<String> = har
            .log
            .entries
            .iter()
            .map(|entry| {
                let url = &entry.request.url;
                url.split(['?', '#']).next().unwrap_or(url).to_owned()
            })
            .collect();
        addresses.sort();
        addresses.dedup();
        secrets.addresses = addresses;
        for credential in credentials {
            if credential.value.trim().chars().count() < MIN_SECRET_CHARS {
                anyhow::bail!(
                    "the credential typed into {} on {} is shorter than {MIN_SECRET_CHARS} characters: it cannot be \
                     told apart from ordinary text, so redaction cannot promise to remove it",
                    credential.target.selector,
                    credential.site
                );
            }
            // A value the recording's own addresses contain (a password of `account` on a site with an
            // `/account` page) cannot be replaced without breaking them.
            let value = credential.value.trim();
            if secrets.in_addresses(value) {
                anyhow::bail!(
                    "the credential typed into {} on {} is a word the recording's own addresses use: replacing \
                     it everywhere would break the bundle, and leaving it would not redact it; record again \
                     with another value",
                    credential.target.selector,
                    credential.site
                );
            }
            if is_common_word(value) {
                anyhow::bail!(
                    "the credential typed into {} on {} is a common word of the web's formats (as `text`, `json` \
                     or `name`): replacing it everywhere would break the bundle, and leaving it would not redact \
                     it; record again with another value",
                    credential.target.selector,
                    credential.site
                );
            }
            secrets.add(SecretKind::Credential, &credential.field, &credential.value);
        }

        // The bundle's index is read once: every body below is looked up in it.
        let file_sizes = bundle.files()?;
        for entry in &har.log.entries {
            let request = &entry.request;
            secrets.scan_url(&request.url);
            for header in request.headers.iter().chain(&entry.response.headers) {
                secrets.scan_header(&header.name, &header.value);
            }
            for cookie in request.cookies.iter().chain(&entry.response.cookies) {
                secrets.scan_cookie(&cookie.name, &cookie.value);
            }
            if let Some(post_data) = &request.post_data {
                for param in &post_data.params {
                    secrets.scan_field(&param.name, &param.value);
                }
                if let Some(text) = request_body_text(bundle, &file_sizes, request) {
                    secrets.scan_body(&post_data.mime_type, &text);
                }
            }
            let content = &entry.response.content;
            if let Some(file) = &content.file
                && is_parsed_text(&content.mime_type)
                && let Some(text) = read_text(bundle, &file_sizes, file)
            {
                secrets.scan_body(&content.mime_type, &text);
            }
        }
        // What sockets carried, read as bodies are.
        for record in events {
            if let trace_manifest::event::EventKind::WebSocket(frame) = &record.event.kind
                && let Some(text) = frame_text(frame)
            {
                secrets.scan_frame(&text);
            }
        }
        // The pages as the person saw them: what scripts put on a page is in no body.
        for snapshot in file_sizes.keys().filter(|path| is_page_snapshot(path)) {
            if let Some(text) = read_text(bundle, &file_sizes, snapshot) {
                secrets.scan_body("text/html", &text);
            }
        }

        for snapshot in &storage.snapshots {
            for cookie in &snapshot.snapshot.cookies {
                secrets.scan_cookie(&cookie.name, &cookie.value);
            }
            let areas = snapshot.snapshot.local_storage.values().chain(snapshot.snapshot.session_storage.values());
            for (key, value) in areas.flatten() {
                secrets.scan_storage(key, value);
            }
            for database in snapshot.snapshot.indexed_db.values().flatten() {
                for record in database.object_stores.iter().flat_map(|store| &store.records) {
                    secrets.json_fields(&record.value, None, SecretKind::Storage);
                    for text in trace_manifest::site_storage::texts(&record.value) {
                        secrets.shapes_in(text);
                    }
                }
            }
        }
        Ok(secrets)
    }

    pub fn scan_url(&mut self, url: &str) {
        let Ok(parsed) = url::Url::parse(url) else { return };
        if let Some(password) = parsed.password() {
            self.add(SecretKind::UrlParameter, "password", &percent_decoded(password));
        }
        // OAuth's implicit flow puts tokens in the fragment, in query syntax.
        let pairs = parsed.query_pairs().chain(url::form_urlencoded::parse(parsed.fragment().unwrap_or("").as_bytes()));
        for (name, value) in pairs {
            if is_secret_name(&name) {
                self.add_by_name(SecretKind::UrlParameter, &name, &value);
            }
            self.shapes_in(&value);
        }
    }

    pub fn scan_header(&mut self, name: &str, value: &str) {
        let lower = name.to_ascii_lowercase();
        if lower == "authorization" || lower == "proxy-authorization" {
            // `Bearer <token>`, `Basic <base64>`: the credentials follow the scheme.
            let credentials = value.split_once(' ').map_or(value, |(_, rest)| rest);
            self.add(SecretKind::Header, &lower, credentials);
        } else if lower == "cookie" || lower == "set-cookie" {
            // The HAR's cookie lists hold the same pairs; these lines may hold more (several Set-Cookie).
            for line in value.split('\n') {
                // A `Set-Cookie` line holds one pair, and its attributes (`Path=/`) after it.
                let pairs = if lower == "cookie" { line } else { line.split(';').next().unwrap_or("") };
                for (cookie, value) in crate::http::cookie_pairs(pairs) {
                    if let Some(value) = value {
                        self.scan_cookie(cookie, value);
                    }
                }
            }
        } else if is_secret_name(&lower) && !matches!(lower.as_str(), "www-authenticate" | "proxy-authenticate") {
            self.add_by_name(SecretKind::Header, &lower, value);
        }
        self.shapes_in(value);
    }

    /// Every value a site keeps in a cookie is taken for a secret, whatever its name (a session id may be
    /// named `s`), unless it is shown to be public: a plain word under a name that says nothing secret
    /// (`theme=dark`), which a site keeps for preferences and which replacing everywhere would damage the
    /// bundle. That, and a value too short to replace (`lang=en`), is kept and listed.
    pub fn scan_cookie(&mut self, name: &str, value: &str) {
        let value = value.trim_matches('"');
        if is_secret_name(name) || !is_plain_word(value) {
            self.add(SecretKind::Cookie, name, value);
        } else if !is_inert(value) {
            let reason = if value.chars().count() < MIN_SECRET_CHARS { KeptReason::TooShort } else { KeptReason::Word };
            self.keep(SecretKind::Cookie, name, value, reason);
        }
        self.shapes_in(value);
    }

    pub fn scan_field(&mut self, name: &str, value: &str) {
        if is_secret_name(name) {
            self.add_by_name(SecretKind::BodyField, name, value);
        }
        self.shapes_in(value);
    }

    pub fn scan_storage(&mut self, key: &str, value: &str) {
        if is_secret_name(key) {
            self.add_by_name(SecretKind::Storage, key, value);
        }
        // Apps keep tokens inside JSON values (`{"auth":{"access_token":…}}`).
        if let Ok(json) = serde_json::from_str::<serde_json::Value>(value) {
            self.json_fields(&json, None, SecretKind::Storage);
        }
        self.shapes_in(value);
    }

    /// A request or response body: its form fields, JSON fields, multipart fields, hidden inputs and JWTs.
    /// The body is read every way it parses ([`body::readings`]), whatever `mime_type` says: a page
    /// decides what it declares, and jQuery declares a form for JSON, `fetch` plain text for a form.
    pub fn scan_body(&mut self, mime_type: &str, text: &str) {
        let readings = body::readings(text.as_bytes(), Some(mime_type));
        for reading in &readings {
            match reading {
                ParsedBody::Form(fields) => {
                    for (name, value) in fields {
                        self.scan_field(name, value);
                    }
                }
                ParsedBody::Json(json) => self.json_fields(json, None, SecretKind::BodyField),
                ParsedBody::Multipart(parts) => {
                    for part in parts {
                        let Ok(value) = std::str::from_utf8(part.content) else { continue };
                        self.scan_field(&part.name, value);
                        // A part may carry a JSON document of its own.
                        if body::looks_like_json(part.content)
                            && let Ok(json) = serde_json::from_str::<serde_json::Value>(value)
                        {
                            self.json_fields(&json, None, SecretKind::BodyField);
                        }
                    }
                }
                ParsedBody::Other => {}
            }
        }
        if readings.is_empty() {
            self.hidden_inputs(text);
            if mime_type.to_ascii_lowercase().contains("html") {
                self.labelled_values(text);
            }
        }
        self.shapes_in(text);
    }

    fn json_fields(&mut self, value: &serde_json::Value, key: Option<&str>, kind: SecretKind) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    self.json_fields(value, Some(key), kind);
                }
            }
            serde_json::Value::Array(items) => {
                for item in items {
                    self.json_fields(item, key, kind);
                }
            }
            serde_json::Value::String(text) if key.is_some_and(is_secret_name) => {
                self.add_by_name(kind, key.unwrap_or(""), text)
            }
            serde_json::Value::Number(number) if key.is_some_and(is_secret_name) => {
                self.add_by_name(kind, key.unwrap_or(""), &number.to_string())
            }
            _ => {}
        }
    }

    /// A WebSocket frame: a body of its own, and the framings real apps wrap JSON in, read too: Socket.IO's
    /// packet type before it (`42["auth",{…}]`), and JSON documents sent as strings inside it (SockJS's
    /// `a["{…}"]`, JupyterLab's messages).
    pub fn scan_frame(&mut self, text: &str) {
        self.scan_body("", text);
        let unframed = text.trim_start_matches(|c: char| c.is_ascii_digit());
        let unframed = unframed.strip_prefix('a').filter(|rest| rest.starts_with('[')).unwrap_or(unframed);
        if unframed.len() < text.len() && unframed.starts_with(['[', '{']) {
            self.scan_body("application/json", unframed);
        }
        if let Ok(json) = serde_json::from_str::<serde_json::Value>(unframed) {
            for inner in json_strings(&json).filter(|inner| body::looks_like_json(inner.as_bytes())) {
                self.scan_body("application/json", inner);
            }
        }
    }

    /// A value shown on a page under a label that names a secret (`API key: 3f9c…`, `<dt>Token</dt>
    /// <dd>…</dd>`): the page's text (an HTML document's, its tags, scripts and styles left out, since code
    /// is full of `name = value` that shows nothing) searched for a secret-named label of at most four words
    /// followed by `:`, `=` or a line break and a token of 16 to 256 characters that mixes letters and digits.
    fn labelled_values(&mut self, html: &str) {
        static CODE: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r"(?is)<(script|style)\b[^>]*>.*?</(?:script|style)\s*>").expect("the pattern is valid")
        });
        static TAGS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?s)<[^>]*>").expect("the pattern is valid"));
        static LABELLED: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r"(?m)([A-Za-z][A-Za-z_-]*(?:[ \t][A-Za-z][A-Za-z_-]*){0,3})[ \t]*(?:[:=]|\n)\s*([A-Za-z0-9_+/=-]{16,256})\b")
                .expect("the pattern is valid")
        });
        let text = crate::html::decode_entities(&TAGS.replace_all(&CODE.replace_all(html, "\n"), "\n"));
        for found in LABELLED.captures_iter(&text) {
            let (label, value) = (&found[1], &found[2]);
            let mixes = value.chars().any(|c| c.is_ascii_digit()) && value.chars().any(|c| c.is_ascii_alphabetic());
            if mixes && is_secret_name(label) {
                self.add_by_name(SecretKind::BodyField, label, value);
            }
        }
    }

    /// `<input name="csrf" value="…">` and `<meta name="csrf-token" content="…">`: tokens a page hands to
    /// its forms and scripts.
    fn hidden_inputs(&mut self, html: &str) {
        static TAG: LazyLock<Regex> =
            LazyLock::new(|| Regex::new(r"(?is)<(?:input|meta)\b[^>]*>").expect("the pattern is valid"));
        static ATTRIBUTE: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r#"(?is)\b(name|value|content)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+))"#)
                .expect("the pattern is valid")
        });
        for tag in TAG.find_iter(html) {
            let (mut name, mut value) = (None, None);
            for attribute in ATTRIBUTE.captures_iter(tag.as_str()) {
                let text = attribute.get(2).or(attribute.get(3)).or(attribute.get(4)).map_or("", |m| m.as_str());
                match attribute[1].to_ascii_lowercase().as_str() {
                    "name" => name = Some(text),
                    _ => value = Some(text),
                }
            }
            if let (Some(name), Some(value)) = (name, value)
                && is_secret_name(name)
            {
                self.add_by_name(SecretKind::BodyField, name, &crate::html::decode_entities(value));
            }
        }
    }

    /// Secrets known by their shape wherever they appear: JSON Web Tokens and the key formats of common
    /// services ([`SECRET_SHAPES`]).
    fn shapes_in(&mut self, text: &str) {
        static SHAPES: LazyLock<Vec<(&str, Regex)>> = LazyLock::new(|| {
            SECRET_SHAPES
                .iter()
                .map(|(name, pattern)| (*name, Regex::new(pattern).expect("the pattern is valid")))
                .collect()
        });
        for (name, shape) in SHAPES.iter() {
            for found in shape.find_iter(text) {
                self.add(SecretKind::Shape, name, found.as_str());
            }
        }
    }
}

/// Secrets told by their shape alone, by name: tokens and keys of common services, which a page may carry
/// anywhere (a script, a storage entry, a response) under any name.
pub const SECRET_SHAPES: &[(&str, &str)] = &[
    ("token", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    ("aws-access-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b"),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"),
    ("stripe-key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b"),
    ("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}\b"),
    ("private-key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[A-Za-z0-9+/=\s]+-----END [A-Z ]*PRIVATE KEY-----"),
];

/// The values a redacted bundle must not hold, chosen by where they were and independently of the name
/// rules that [`Secrets::find`] applies, for the exporter's final search: every value typed into a field
/// the recorder flagged as a credential (read from the events themselves), and every cookie value the site
/// set or the browser sent, in the HAR or the storage snapshots, but plain words, placeholders and values
/// too short to tell apart. Each with what it was (`credential`, `cookie`), never printed with its value.
#[cfg(feature = "native")]
pub fn values_to_check(events: &[EventRecord], har: &Har, storage: &StorageFile) -> Vec<(&'static str, String)> {
    use trace_manifest::event::EventKind;
    let mut values: Vec<(&'static str, String)> = Vec::new();
    let mut keep = |what: &'static str, value: &str| {
        let value = value.trim().trim_matches('"');
        if value.chars().count() >= MIN_SECRET_CHARS
            && !is_inert(value)
            && !is_plain_word(value)
            && !value.starts_with(PLACEHOLDER_PREFIX)
            && !values.iter().any(|(_, known)| known == value)
        {
            values.push((what, value.to_owned()));
        }
    };
    for record in events {
        if let EventKind::Action(action) = &record.event.kind
            && action.credential
            && !action.page_made
            && let Some(value) = &action.value
        {
            keep("credential", value);
        }
    }
    for entry in &har.log.entries {
        for cookie in entry.request.cookies.iter().chain(&entry.response.cookies) {
            keep("cookie", &cookie.value);
        }
    }
    for snapshot in &storage.snapshots {
        for cookie in &snapshot.snapshot.cookies {
            keep("cookie", &cookie.value);
        }
    }
    values
}

fn slug(name: &str) -> String {
    let slug: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .take(32)
        .collect::<String>()
        .trim_matches('-')
        .to_owned();
    if slug.is_empty() { "value".to_owned() } else { slug }
}

#[cfg(feature = "native")]
fn is_parsed_text(mime_type: &str) -> bool {
    let mime_type = mime_type.to_ascii_lowercase();
    ["json", "html", "text/", "javascript", "xml", "x-www-form-urlencoded"].iter().any(|kind| mime_type.contains(kind))
}

/// A request's body as text: inline in the HAR, or read from its file when that holds UTF-8 of at most
/// [`MAX_PARSED_BODY_BYTES`], decoded first when the page compressed it: as its `Content-Encoding` says
/// ([`body::ContentEncoding`]), or as its bytes show when it says nothing ([`body::decode_compressed`],
/// [`body::compressed_text`] for the text DevTools gives of such a body). `file_sizes` is the bundle's
/// index ([`Bundle::files`]), read once by the caller for every body.
#[cfg(feature = "native")]
pub fn request_body_text(
    bundle: &mut Bundle,
    file_sizes: &BTreeMap<String, u64>,
    request: &trace_manifest::har::HarRequest,
) -> Option<String> {
    let post_data = request.post_data.as_ref()?;
    match (&post_data.text, &post_data.file, body::ContentEncoding::of_request(request)) {
        (Some(text), _, _) => match body::compressed_text(text, MAX_PARSED_BODY_BYTES) {
            Some((_, decoded)) => String::from_utf8(decoded).ok(),
            None => Some(text.clone()),
        },
        (None, Some(file), declared) => {
            let size = file_sizes.get(file).copied()?;
            let bytes = bundle.read(file).ok().filter(|_| size <= MAX_PARSED_BODY_BYTES)?;
            let decoded = match declared {
                Some(encoding) => encoding.decode(&bytes, MAX_PARSED_BODY_BYTES)?,
                None => match body::decode_compressed(&bytes, MAX_PARSED_BODY_BYTES) {
                    Some((_, decoded)) => decoded,
                    None => bytes,
                },
            };
            String::from_utf8(decoded).ok()
        }
        (None, None, _) => None,
    }
}

/// A WebSocket frame's payload as text: a text frame's as it is, a binary frame's when it is UTF-8.
#[cfg(feature = "native")]
pub fn frame_text(frame: &trace_manifest::event::WebSocketEvent) -> Option<std::borrow::Cow<'_, str>> {
    use base64::Engine;
    use trace_manifest::event::WebSocketOp;
    let data = frame.data.as_deref().filter(|_| matches!(frame.op, WebSocketOp::Sent | WebSocketOp::Received))?;
    if frame.opcode == Some(2) {
        let bytes = base64::engine::general_purpose::STANDARD.decode(data).ok()?;
        return String::from_utf8(bytes).ok().map(std::borrow::Cow::Owned);
    }
    Some(std::borrow::Cow::Borrowed(data))
}

/// A DOM snapshot of a page (not its accessibility tree, nor a screenshot).
#[cfg(feature = "native")]
fn is_page_snapshot(path: &str) -> bool {
    path.strip_prefix(trace_manifest::bundle::DOM_DIR)
        .is_some_and(|rest| rest.starts_with('/') && rest.ends_with(".html"))
}

/// Every string inside a JSON document.
fn json_strings(value: &serde_json::Value) -> Box<dyn Iterator<Item = &str> + '_> {
    match value {
        serde_json::Value::String(text) => Box::new(std::iter::once(text.as_str())),
        serde_json::Value::Array(items) => Box::new(items.iter().flat_map(json_strings)),
        serde_json::Value::Object(map) => Box::new(map.values().flat_map(json_strings)),
        _ => Box::new(std::iter::empty()),
    }
}

#[cfg(feature = "native")]
fn read_text(bundle: &mut Bundle, file_sizes: &BTreeMap<String, u64>, file: &str) -> Option<String> {
    let size = file_sizes.get(file).copied()?;
    if size > MAX_PARSED_BODY_BYTES {
        return None;
    }
    String::from_utf8(bundle.read(file).ok()?).ok()
}

fn percent_decoded(text: &str) -> String {
    url::form_urlencoded::parse(format!("x={text}").as_bytes()).next().map_or_else(String::new, |(_, v)| v.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_give_their_secret_fields_and_nothing_else() {
        let mut secrets = Secrets::default();
        secrets.scan_body("application/x-www-form-urlencoded", "q=mugs&password=hunter%262&csrf=abcdef0123&page=2");
        secrets.scan_body(
            "application/json",
            r#"{"user":{"name":"ann","access_token":"at-123456"},"items":[{"refresh_token":"rt-654321"}]}"#,
        );
        secrets.scan_body(
            "text/html",
            r#"<form><input type=hidden name="authenticity_token" value="a&amp;b-token"><input name=q value="mug">
               <input type=hidden name=csrf value=unquoted-token-7></form>
               <meta name='csrf-token' content='meta-987654'>"#,
        );
        let values: Vec<&str> = secrets.iter().map(|secret| secret.value.as_str()).collect();
        assert_eq!(
            values,
            ["hunter&2", "abcdef0123", "rt-654321", "at-123456", "a&b-token", "unquoted-token-7", "meta-987654"]
        );
        assert_eq!(secrets.get(0).placeholder, "trace-redacted-body-field-password-1");
    }

    #[test]
    fn bodies_are_read_as_the_body_parser_reads_them_whatever_their_type_says() {
        let mut secrets = Secrets::default();
        // `fetch` sends a JSON string as text/plain.
        secrets.scan_body("text/plain;charset=UTF-8", r#"{"query":"mugs","api_token":"tok-in-plain-text-1"}"#);
        secrets.scan_body(
            "multipart/form-data; boundary=XyZ",
            "--XyZ\r\nContent-Disposition: form-data; name=\"csrf_token\"\r\n\r\nmultipart-csrf\r\n--XyZ--\r\n",
        );
        // Issue #11: jQuery sends JSON as a form; `fetch` sends a form, or multipart, as text.
        secrets.scan_body(
            "application/x-www-form-urlencoded; charset=UTF-8",
            r#"{"user":"ann","client_secret":"cl13nt-s3cr3t-01"}"#,
        );
        secrets.scan_body("text/plain;charset=UTF-8", "user=ann&csrf_token=f0rm-as-t3xt");
        secrets.scan_body(
            "text/plain",
            concat!(
                "--b0undary\r\nContent-Disposition: form-data; name=\"api_token\"\r\n\r\n",
                "mult1part-as-t3xt\r\n--b0undary--\r\n"
            ),
        );
        let values: Vec<&str> = secrets.iter().map(|secret| secret.value.as_str()).collect();
        assert_eq!(
            values,
            ["tok-in-plain-text-1", "multipart-csrf", "cl13nt-s3cr3t-01", "f0rm-as-t3xt", "mult1part-as-t3xt"]
        );
        // Read as a form, the JSON would have given a "field" of pieces of itself.
        assert!(secrets.kept().next().is_none(), "{:?}", secrets.kept().collect::<Vec<_>>());
    }

    /// Issue #11: a value a broad name rule chose that is a common word, a plain word or a small number
    /// (`?sort_key=text`, which became `trace-redacted-…/plain` in every content type; `?sort_key=name`, which
    /// took the HAR's `name` fields away) is not replaced but listed; so is what a cookie holds that is too
    /// short or a plain word, which used to be skipped silently.
    #[test]
    fn values_that_cannot_be_replaced_safely_are_kept_and_listed_by_name() {
        let mut secrets = Secrets::default();
        secrets.scan_url(
            "https://shop.example/search?sort_key=text&key=name&pin=12&auth_mode=Single+Sign-On&api_key=k3y-0123456789",
        );
        secrets.scan_body("application/json", r#"{"session_kind":"guest","csrf_token":"c5rf-0123456789"}"#);
        secrets.scan_cookie("lang", "en");
        secrets.scan_cookie("theme", "dark");
        secrets.scan_cookie("sid", "a1");
        secrets.scan_cookie("session", "text");
        secrets.scan_header("Authorization", "Bearer json");
        // Known under another name as a secret: not listed as kept.
        secrets.scan_url("https://shop.example/?next_token=c5rf-0123456789");
        let values: Vec<&str> = secrets.iter().map(|secret| secret.value.as_str()).collect();
        assert_eq!(values, ["k3y-0123456789", "c5rf-0123456789"]);
        let kept: Vec<(SecretKind, &str, KeptReason)> =
            secrets.kept().map(|kept| (kept.kind, kept.name.as_str(), kept.reason)).collect();
        assert_eq!(
            kept,
            [
                (SecretKind::UrlParameter, "sort_key", KeptReason::Word),
                (SecretKind::UrlParameter, "key", KeptReason::Word),
                (SecretKind::UrlParameter, "pin", KeptReason::Word),
                (SecretKind::UrlParameter, "auth_mode", KeptReason::Word),
                (SecretKind::BodyField, "session_kind", KeptReason::Word),
                (SecretKind::Cookie, "lang", KeptReason::TooShort),
                (SecretKind::Cookie, "theme", KeptReason::Word),
                (SecretKind::Cookie, "sid", KeptReason::TooShort),
                (SecretKind::Header, "authorization", KeptReason::Common),
            ]
        );
        // A cookie's or a header's value is not judged by its shape: `session=text` is common, but a
        // session cookie of letters only is a secret.
        let mut secrets = Secrets::default();
        secrets.scan_cookie("session", "Guest");
        secrets.scan_cookie("session_id", "abcdefghij");
        let values: Vec<&str> = secrets.iter().map(|secret| secret.value.as_str()).collect();
        assert_eq!(values, ["Guest", "abcdefghij"]);
    }

    #[test]
    fn headers_urls_and_cookies_give_their_tokens() {
        let mut secrets = Secrets::default();
        secrets.scan_header("Authorization", "Bearer tok-abcdef");
        secrets.scan_header("Cookie", "lang=en; session=s3ss10n-id-value; _ga=GA1.1.99999.88888");
        secrets.scan_header("Content-Type", "text/html");
        secrets.scan_url("https://user:p%40ss-word@example.com/cb?state=xyz&code=123#access_token=frag-token-1&x=1");
        secrets.scan_url("https://example.com/api?api_key=key-777777&q=shoes");
        let found: Vec<(SecretKind, &str)> = secrets.iter().map(|s| (s.kind, s.value.as_str())).collect();
        assert_eq!(
            found,
            [
                (SecretKind::Header, "tok-abcdef"),
                (SecretKind::Cookie, "s3ss10n-id-value"),
                (SecretKind::Cookie, "GA1.1.99999.88888"),
                (SecretKind::UrlParameter, "p@ss-word"),
                (SecretKind::UrlParameter, "frag-token-1"),
                (SecretKind::UrlParameter, "key-777777"),
            ]
        );
        assert_eq!(secrets.placeholder_of("tok-abcdef"), Some("trace-redacted-header-authorization-1"));
    }

    #[test]
    fn every_cookie_value_but_a_plain_word_is_a_secret_and_known_key_shapes_anywhere() {
        let mut secrets = Secrets::default();
        secrets.scan_cookie("s", "ab12cd3"); // a 7-character session id under an innocuous name
        secrets.scan_cookie("theme", "dark");
        secrets.scan_cookie("lang", "English");
        secrets.scan_header("Set-Cookie", "prefs=MixedCase; Path=/");
        secrets.scan_body(
            "text/javascript",
            "const stripe = 'sk_live_0123456789abcdefABCD'; const maps = 'AIzaSyA-0123456789abcdefghijklmnopqrstu';",
        );
        secrets.scan_storage("cfg", "AKIAIOSFODNN7EXAMPLE");
        let found: Vec<(SecretKind, &str, &str)> =
            secrets.iter().map(|s| (s.kind, s.name.as_str(), s.value.as_str())).collect();
        assert_eq!(
            found,
            [
                (SecretKind::Cookie, "s", "ab12cd3"),
                (SecretKind::Cookie, "prefs", "MixedCase"),
                (SecretKind::Shape, "stripe-key", "sk_live_0123456789abcdefABCD"),
                (SecretKind::Shape, "google-api-key", "AIzaSyA-0123456789abcdefghijklmnopqrstu"),
                (SecretKind::Shape, "aws-access-key", "AKIAIOSFODNN7EXAMPLE"),
            ]
        );
    }

    /// Issue #31: a key a page shows under a label that names a secret is found in the page's text, tags
    /// and entities left out; a value under any other label, a masked one and a word are not.
    #[test]
    fn a_value_a_page_shows_under_a_secret_label_is_found_and_others_are_not() {
        let mut secrets = Secrets::default();
        secrets.scan_body(
            "text/html",
            "<dl><dt>API key</dt><dd><code>9f86d081884c7d659a2feaa0c55ad015</code></dd>\
             <dt>Order number</dt><dd>ORD2024A11B27C0042X</dd></dl>\
             <p>Client secret: <b>cs_7Hq2Lm9Xz4Pw8Rt1</b></p><p>Password: ••••••••••••••••</p>\
             <p>Token = <i>abcdefghijklmnopqrstuv</i></p><p>Access token: <span>Zt6&#43;Wq3mPo9Lk2Jh8Gf5</span></p>\
             <script>var sessionToken = readCookie2024session;</script>",
        );
        // Not a page: a script's or a JSON text's `name = value` is code, read by the other rules.
        secrets.scan_body("application/javascript", "var sessionToken = readCookie2024session;");
        let values: Vec<&str> = secrets.iter().map(|secret| secret.value.as_str()).collect();
        assert_eq!(values, ["9f86d081884c7d659a2feaa0c55ad015", "cs_7Hq2Lm9Xz4Pw8Rt1", "Zt6+Wq3mPo9Lk2Jh8Gf5"]);
    }

    /// Issue #31: a socket's frames are read as bodies are, through the framings real apps use.
    #[test]
    fn socket_frames_give_their_secret_fields_through_socket_io_and_sockjs_framing() {
        let mut secrets = Secrets::default();
        secrets.scan_frame(r#"42["auth",{"session_token":"st-0a1b2c3d4e5f"}]"#);
        secrets.scan_frame(r#"a["{\"msg\":\"connect\",\"api_key\":\"ak-99887766\"}"]"#);
        secrets.scan_frame(r#"{"header":{"msg_id":"3f2504e0-4f89-41d3-9a0c-0305e82c3301"},"content":{"code":"1+1"}}"#);
        secrets.scan_frame("2probe");
        let values: Vec<&str> = secrets.iter().map(|secret| secret.value.as_str()).collect();
        assert_eq!(values, ["st-0a1b2c3d4e5f", "ak-99887766"]);
    }

    #[test]
    fn json_web_tokens_are_found_anywhere_and_short_or_inert_values_never() {
        let mut secrets = Secrets::default();
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl";
        secrets.scan_storage("profile", &format!(r#"{{"name":"ann","note":"{jwt}","session":{{"id":"abc"}}}}"#));
        secrets.scan_storage("auth_token", "true");
        secrets.scan_cookie("session", "x1");
        // A bundle redacted before holds placeholders where its secrets were: they are not secrets again.
        secrets.scan_cookie("session", "trace-redacted-cookie-session-2");
        secrets.add(SecretKind::Credential, "password", "trace-redacted-credential-password-1");
        let values: Vec<&str> = secrets.iter().map(|secret| secret.value.as_str()).collect();
        assert_eq!(values, [jwt]);
    }
}
