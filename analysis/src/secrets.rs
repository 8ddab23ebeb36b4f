//! Which values of a bundle are secrets, and the forms a secret takes in it. The one list of secret names
//! ([`is_secret_name`]) and the one list of encoded forms ([`encoded_forms`]) live here: the trajectory
//! scrubs with them, checkpoints leave secret fields out by them, and redaction replaces and searches by
//! them. (The in-page capture script keeps a copy of the names for the page, which a test compares.)
//!
//! Two sources of secrets: what the person typed into credential fields (as [`crate::trajectory`] finds
//! them), and the session secrets the recording carries: every cookie value but plain words,
//! `Authorization` and other token-bearing headers, secret-named URL parameters, form fields, JSON fields,
//! hidden inputs and storage entries, and secrets told by their shape ([`SECRET_SHAPES`]: JSON Web Tokens,
//! keys of common services) wherever they appear in text.
//!
//! Finding is by structure, by name and by known shapes only, so it is predictable: a value is a secret
//! because of where it is or what format it has, never because it "looks random". Replacing the values
//! everywhere is the exporter's job; [`values_to_check`] chooses, by other means, what its final search
//! of the written zip looks for.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::body::{self, ParsedBody};
use trace_manifest::report::SecretKind;
#[cfg(feature = "native")]
use trace_manifest::{archive::Bundle, bundle::StorageFile, event::EventRecord, har::Har};

/// Shorter values cannot be told apart from ordinary text: replacing them everywhere would damage the
/// bundle, and searching for them would find them by chance.
pub const MIN_SECRET_CHARS: usize = 4;
/// How every placeholder starts.
pub const PLACEHOLDER_PREFIX: &str = "trace-redacted-";
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

    /// Adds a secret unless it is too short, inert, or already known (under another name).
    ///
    /// A placeholder is no secret: a bundle redacted once is redacted again (as `trace-host dataset` does
    /// with the redacted zips it is given) without its stand-ins being taken for secrets.
    pub fn add(&mut self, kind: SecretKind, name: &str, value: &str) {
        let value = value.trim();
        if value.chars().count() < MIN_SECRET_CHARS
            || is_inert(value)
            || value.starts_with(PLACEHOLDER_PREFIX)
            || self.by_value.contains_key(value)
        {
            return;
        }
        let placeholder = format!("{PLACEHOLDER_PREFIX}{}-{}-{}", kind.as_str(), slug(name), self.list.len() + 1);
        self.by_value.insert(value.to_owned(), self.list.len());
        self.list.push(Secret { kind, name: name.to_owned(), value: value.to_owned(), placeholder });
    }

    /// Finds the secrets of a bundle: the credentials typed (from `events`), then what the HAR, the storage
    /// snapshots and the text bodies the HAR points to carry.
    ///
    /// Fails when a credential is too short to be redacted reliably: the export cannot promise its absence.
    #[cfg(feature = "native")]
    pub fn find(
        bundle: &mut Bundle,
        events: &[EventRecord],
        har: &Har,
        storage: &StorageFile,
    ) -> anyhow::Result<Secrets> {
        let mut secrets = Secrets::default();
        let task_id = bundle.manifest()?.task.id;
        for credential in crate::trajectory::derive(task_id, events, None).credentials {
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
            let in_urls = har.log.entries.iter().any(|entry| {
                let url = &entry.request.url;
                let path = url.split(['?', '#']).next().unwrap_or(url);
                path.contains(value)
            });
            if in_urls || COMMON_WORDS.contains(&value.to_ascii_lowercase().as_str()) {
                anyhow::bail!(
                    "the credential typed into {} on {} is a word the recording's own addresses use: replacing \
                     it everywhere would break the bundle, and leaving it would not redact it; record again \
                     with another value",
                    credential.target.selector,
                    credential.site
                );
            }
            secrets.add(SecretKind::Credential, &credential.field, &credential.value);
        }

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
                if let Some(text) = request_body_text(bundle, post_data) {
                    secrets.scan_body(&post_data.mime_type, &text);
                }
            }
            let content = &entry.response.content;
            if let Some(file) = &content.file
                && is_parsed_text(&content.mime_type)
                && let Some(text) = read_text(bundle, file)
            {
                secrets.scan_body(&content.mime_type, &text);
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
                self.add(SecretKind::UrlParameter, &name, &value);
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
                let pairs: Vec<&str> = if lower == "cookie" { line.split(';').collect() } else { vec![line] };
                for pair in pairs {
                    let pair = pair.split(';').next().unwrap_or("");
                    if let Some((cookie, value)) = pair.split_once('=') {
                        self.scan_cookie(cookie.trim(), value.trim());
                    }
                }
            }
        } else if is_secret_name(&lower) && !matches!(lower.as_str(), "www-authenticate" | "proxy-authenticate") {
            self.add(SecretKind::Header, &lower, value);
        }
        self.shapes_in(value);
    }

    /// Every value a site keeps in a cookie is taken for a secret, whatever its name or length (a session id
    /// may be short and named `s`), unless it is shown to be public: a plain word (`dark`, `en`), which a
    /// site keeps for preferences and which replacing everywhere would damage the bundle.
    pub fn scan_cookie(&mut self, name: &str, value: &str) {
        let value = value.trim_matches('"');
        if is_secret_name(name) || !is_plain_word(value) {
            self.add(SecretKind::Cookie, name, value);
        }
        self.shapes_in(value);
    }

    pub fn scan_field(&mut self, name: &str, value: &str) {
        if is_secret_name(name) {
            self.add(SecretKind::BodyField, name, value);
        }
        self.shapes_in(value);
    }

    pub fn scan_storage(&mut self, key: &str, value: &str) {
        if is_secret_name(key) {
            self.add(SecretKind::Storage, key, value);
        }
        // Apps keep tokens inside JSON values (`{"auth":{"access_token":…}}`).
        if let Ok(json) = serde_json::from_str::<serde_json::Value>(value) {
            self.json_fields(&json, None, SecretKind::Storage);
        }
        self.shapes_in(value);
    }

    /// A request or response body: its form fields, JSON fields, hidden inputs and JWTs.
    pub fn scan_body(&mut self, mime_type: &str, text: &str) {
        match body::parse(text.as_bytes(), Some(mime_type)) {
            ParsedBody::Form(fields) => {
                for (name, value) in fields {
                    self.scan_field(&name, &value);
                }
            }
            ParsedBody::Json(json) => self.json_fields(&json, None, SecretKind::BodyField),
            ParsedBody::Multipart(parts) => {
                for part in parts {
                    if let Ok(value) = std::str::from_utf8(part.content) {
                        self.scan_field(&part.name, value);
                    }
                }
            }
            ParsedBody::Other if mime_type.to_ascii_lowercase().contains("html") => self.hidden_inputs(text),
            ParsedBody::Other => {}
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
                self.add(kind, key.unwrap_or(""), text)
            }
            serde_json::Value::Number(number) if key.is_some_and(is_secret_name) => {
                self.add(kind, key.unwrap_or(""), &number.to_string())
            }
            _ => {}
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
                self.add(SecretKind::BodyField, name, &html_unescaped(value));
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

#[cfg(feature = "native")]
/// Words a credential may not be: they are parts of every URL and page, so replacing them would wreck the
/// bundle, and leaving them would not be redaction.
const COMMON_WORDS: &[&str] = &["http", "https", "www", "html", "json", "true", "false", "null", "index"];

/// Words that make a name secret wherever they appear inside one of its words (`user_password`,
/// `csrfmiddlewaretoken`, `PHPSESSID`).
pub const SECRET_NAME_CONTAINED: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "token",
    "secret",
    "csrf",
    "xsrf",
    "session",
    "sessid",
    "apikey",
    "jwt",
    "bearer",
    "credential",
    // Per-session values a page hands to its forms: a replay or a stranger must not get them.
    "nonce",
    "captcha",
];
/// Words that make a name secret only as a whole word (`pin` but not `spinner`, `auth` but not `author`).
pub const SECRET_NAME_WHOLE: &[&str] = &[
    "pass",
    "pwd",
    "passcode",
    "pin",
    "sid",
    "otp",
    "sig",
    "signature",
    "auth",
    "authorization",
    "cvv",
    "cvc",
    "csc",
    "card",
    "ssn",
    // `key`, `form_key`, `license_key`: a word of its own (not `keyword`, `monkey`).
    "key",
];
/// Secret compounds, found in the name with `-` and `_` removed (`X-Api-Key`, `one_time_code`).
pub const SECRET_NAME_COMPOUNDS: &[&str] = &["apikey", "accesskey", "privatekey", "clientsecret", "onetime"];

/// Does a cookie, header, parameter, field or key name say that its value is a secret? The name is split
/// into words (at punctuation and lower-to-upper case changes), each word compared with
/// [`SECRET_NAME_CONTAINED`] and [`SECRET_NAME_WHOLE`], and the name without `-` and `_` searched for
/// [`SECRET_NAME_COMPOUNDS`]. The in-page capture script (`trace_manifest::capture`) applies the same rule
/// with the same lists to the fields the person types into; a test keeps the two the same.
pub fn is_secret_name(name: &str) -> bool {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() || (c.is_uppercase() && previous_lower) {
            words.push(std::mem::take(&mut word));
        }
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    words.push(word);
    let joined = name.to_ascii_lowercase().replace(['-', '_'], "");
    SECRET_NAME_COMPOUNDS.iter().any(|compound| joined.contains(compound))
        || words.iter().any(|word| {
            SECRET_NAME_CONTAINED.iter().any(|part| word.contains(part)) || SECRET_NAME_WHOLE.contains(&word.as_str())
        })
}

/// A plain word: letters only, all lower case or capitalized, at most 16 of them (`dark`, `English`).
/// Tokens mix cases and digits.
pub fn is_plain_word(value: &str) -> bool {
    let mut chars = value.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    first_ok && value.len() <= 16 && chars.all(|c| c.is_ascii_lowercase())
}

/// Values that are never secrets whatever their name: booleans, empties and the like.
fn is_inert(value: &str) -> bool {
    matches!(value.to_ascii_lowercase().as_str(), "true" | "false" | "null" | "undefined" | "none" | "yes" | "no")
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

/// A request body as text: inline in the HAR, or read from its file when that holds UTF-8 of at most
/// [`MAX_PARSED_BODY_BYTES`].
#[cfg(feature = "native")]
pub fn request_body_text(bundle: &mut Bundle, post_data: &trace_manifest::har::PostData) -> Option<String> {
    match (&post_data.text, &post_data.file) {
        (Some(text), _) => Some(text.clone()),
        (None, Some(file)) => read_text(bundle, file),
        (None, None) => None,
    }
}

#[cfg(feature = "native")]
fn read_text(bundle: &mut Bundle, file: &str) -> Option<String> {
    let size = bundle.files().ok()?.get(file).copied()?;
    if size > MAX_PARSED_BODY_BYTES {
        return None;
    }
    String::from_utf8(bundle.read(file).ok()?).ok()
}

/// One form a secret takes in a bundle, and the same form of what stands in for it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct EncodedForm {
    pub form: String,
    pub stand_in: String,
}

/// Base64 and hex forms shorter than this are not looked for: they would turn up by chance in the bundle's
/// other encoded data.
const MIN_BINARY_FORM_CHARS: usize = 8;

/// The forms `value` may take in a bundle, each with the same form of `stand_in`, longest first:
/// - as typed, JSON-escaped (as in `events.jsonl` and the HAR, and with `<`, `>` and `&` as `\u` escapes,
///   as some servers write them) and HTML-escaped (as in pages and DOM snapshots);
/// - percent-encoded as forms write it (`+` for a space), as `encodeURIComponent` writes it (`!'()*~`
///   bare), and strictly (only RFC 3986's unreserved characters bare), each with upper- and lower-case hex;
///   and JSON-escaped around those;
/// - inside base64 and base64url, at each of the three alignments a secret can have inside a longer
///   encoded text (a `user:password` pair, a JSON document): the characters that depend on the secret
///   alone. Their stand-in has the same length, so that the text around still decodes;
/// - as hex, lower and upper case.
///
/// `stand_in` is a placeholder of letters, digits, `-`, `.`, `{` and `}`, which the textual encodings leave
/// as it is.
pub fn encoded_forms(value: &str, stand_in: &str) -> Vec<EncodedForm> {
    let text = |form: String| EncodedForm { form, stand_in: stand_in.to_owned() };
    let mut forms: Vec<EncodedForm> = Vec::new();
    let mut textual = vec![value.to_owned()];
    for keep in [FORM_BARE, URI_COMPONENT_BARE, UNRESERVED_BARE] {
        for upper in [true, false] {
            let encoded = percent_encoded(value, keep, upper);
            if keep == FORM_BARE {
                textual.push(encoded.replace("%20", "+"));
            }
            textual.push(encoded);
        }
    }
    let html = value.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
    textual.extend([html.replace('\'', "&#39;"), html.replace('\'', "&#x27;"), html]);
    let escaped: Vec<String> = textual
        .iter()
        .flat_map(|form| {
            let json = json_escaped(form);
            let unicode = json.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026");
            [json, unicode]
        })
        .collect();
    textual.extend(escaped);
    forms.extend(textual.into_iter().map(text));

    let (secret, filler) = (value.as_bytes(), stand_in.as_bytes().repeat(value.len() / stand_in.len().max(1) + 2));
    for engine in [&base64::engine::general_purpose::STANDARD, &base64::engine::general_purpose::URL_SAFE] {
        for alignment in 0..3 {
            let form = base64_core(engine, secret, alignment);
            if form.len() >= MIN_BINARY_FORM_CHARS {
                let mut stand_in = base64_core(engine, &filler, alignment);
                stand_in.truncate(form.len());
                forms.push(EncodedForm { form, stand_in });
            }
        }
    }
    if secret.len() * 2 >= MIN_BINARY_FORM_CHARS {
        let hex = |bytes: &[u8], upper: bool| -> String {
            bytes.iter().map(|b| if upper { format!("{b:02X}") } else { format!("{b:02x}") }).collect()
        };
        for upper in [false, true] {
            forms.push(EncodedForm { form: hex(secret, upper), stand_in: hex(stand_in.as_bytes(), upper) });
        }
    }
    forms.sort_by(|a, b| b.form.len().cmp(&a.form.len()).then_with(|| a.cmp(b)));
    forms.dedup_by(|a, b| a.form == b.form);
    forms
}

/// What `application/x-www-form-urlencoded` leaves bare (besides letters and digits; a space is `+`).
const FORM_BARE: &str = "*-._";
/// What `encodeURIComponent` leaves bare.
const URI_COMPONENT_BARE: &str = "!'()*-._~";
/// RFC 3986's unreserved characters.
const UNRESERVED_BARE: &str = "-._~";

fn percent_encoded(value: &str, bare: &str, upper: bool) -> String {
    value
        .bytes()
        .map(|b| match b {
            b if b.is_ascii_alphanumeric() || bare.as_bytes().contains(&b) => (b as char).to_string(),
            b if upper => format!("%{b:02X}"),
            b => format!("%{b:02x}"),
        })
        .collect()
}

/// The base64 characters that encode `bytes` alone when they start `alignment` bytes into a 3-byte group:
/// the characters shared with the bytes before and after are left out.
fn base64_core(engine: &base64::engine::GeneralPurpose, bytes: &[u8], alignment: usize) -> String {
    use base64::Engine as _;
    let mut padded = vec![0u8; alignment];
    padded.extend_from_slice(bytes);
    let encoded = engine.encode(&padded);
    // Characters of 6 bits: the first that holds no bit of the padding, and the last whose bits are all
    // the secret's.
    let start = (alignment * 8).div_ceil(6);
    let end = (padded.len() * 8) / 6;
    encoded.get(start..end).map_or_else(String::new, str::to_owned)
}

fn json_escaped(text: &str) -> String {
    let quoted = serde_json::to_string(text).expect("a string always serializes");
    quoted[1..quoted.len() - 1].to_owned()
}

fn percent_decoded(text: &str) -> String {
    url::form_urlencoded::parse(format!("x={text}").as_bytes()).next().map_or_else(String::new, |(_, v)| v.into_owned())
}

fn html_unescaped(text: &str) -> String {
    text.replace("&quot;", "\"").replace("&#39;", "'").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_told_by_their_words() {
        for name in [
            "password",
            "user_password",
            "csrf",
            "csrfmiddlewaretoken",
            "authenticity_token",
            "X-CSRF-Token",
            "sessionid",
            "PHPSESSID",
            "access_token",
            "accessToken",
            "api_key",
            "X-Api-Key",
            "client_secret",
            "sid",
            "pin",
            "Authorization",
            "one_time_code",
            "passphrase",
            "card_csc",
            "key",
            "form_key",
            "licenseKey",
        ] {
            assert!(is_secret_name(name), "{name} names a secret");
        }
        for name in ["q", "author", "passenger", "compass", "page", "sort", "lang", "product", "shipping", "keyword"] {
            assert!(!is_secret_name(name), "{name} names no secret");
        }
    }

    /// The in-page script flags the fields a person types a secret into by the same lists and the same rule:
    /// the lists it holds are these, and run by Node on the script's own code, it agrees with
    /// [`is_secret_name`] name by name.
    #[test]
    fn the_capture_script_names_secrets_as_this_module_does() {
        let script = include_str!("../../manifest/page/capture.js");
        let list = |name: &str| -> Vec<String> {
            let start = script.find(&format!("const {name} = [")).unwrap_or_else(|| panic!("capture.js has no {name}"));
            let rest = &script[start..];
            let array = &rest[rest.find('[').unwrap()..=rest.find(']').unwrap()];
            serde_json::from_str(array).unwrap_or_else(|e| panic!("{name} in capture.js: {e}: {array}"))
        };
        assert_eq!(list("SECRET_NAME_CONTAINED"), SECRET_NAME_CONTAINED);
        assert_eq!(list("SECRET_NAME_WHOLE"), SECRET_NAME_WHOLE);
        assert_eq!(list("SECRET_NAME_COMPOUNDS"), SECRET_NAME_COMPOUNDS);

        // The rule itself, run on the script's own function.
        let start = script.find("const isSecretName = ").expect("capture.js has isSecretName");
        let end = start + script[start..].find("\n  };\n").expect("isSecretName ends") + "\n  };\n".len();
        let names = [
            "password",
            "user_password",
            "csrfmiddlewaretoken",
            "X-CSRF-Token",
            "PHPSESSID",
            "accessToken",
            "api_key",
            "X-Api-Key",
            "one_time_code",
            "pin",
            "spinner",
            "author",
            "passenger",
            "keyword",
            "q",
            "cardNumber",
            "newPassword",
            "otp",
            "sig",
            "signature_v2",
        ];
        let program = format!(
            "const SECRET_NAME_CONTAINED = {};\nconst SECRET_NAME_WHOLE = {};\nconst SECRET_NAME_COMPOUNDS = {};\n{}\n\
             console.log(JSON.stringify({}.map(isSecretName)));",
            serde_json::to_string(SECRET_NAME_CONTAINED).unwrap(),
            serde_json::to_string(SECRET_NAME_WHOLE).unwrap(),
            serde_json::to_string(SECRET_NAME_COMPOUNDS).unwrap(),
            &script[start..end],
            serde_json::to_string(&names).unwrap(),
        );
        let output = std::process::Command::new("node")
            .args(["-e", &program])
            .output()
            .expect("the capture script's test needs Node (.ci/install installs it)");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let in_page: Vec<bool> = serde_json::from_slice(&output.stdout).unwrap();
        let here: Vec<bool> = names.iter().map(|name| is_secret_name(name)).collect();
        assert_eq!(in_page, here, "for {names:?}");
    }

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
               <input type=hidden name=csrf value=unquoted-token></form>
               <meta name='csrf-token' content='meta-987654'>"#,
        );
        let values: Vec<&str> = secrets.iter().map(|secret| secret.value.as_str()).collect();
        assert_eq!(
            values,
            ["hunter&2", "abcdef0123", "rt-654321", "at-123456", "a&b-token", "unquoted-token", "meta-987654"]
        );
        assert_eq!(secrets.get(0).placeholder, "trace-redacted-body-field-password-1");
    }

    #[test]
    fn bodies_are_read_as_the_body_parser_reads_them_whatever_their_type_says() {
        let mut secrets = Secrets::default();
        // `fetch` sends a JSON string as text/plain.
        secrets.scan_body("text/plain;charset=UTF-8", r#"{"query":"mugs","api_token":"tok-in-plain-text"}"#);
        secrets.scan_body(
            "multipart/form-data; boundary=XyZ",
            "--XyZ\r\nContent-Disposition: form-data; name=\"csrf_token\"\r\n\r\nmultipart-csrf\r\n--XyZ--\r\n",
        );
        let values: Vec<&str> = secrets.iter().map(|secret| secret.value.as_str()).collect();
        assert_eq!(values, ["tok-in-plain-text", "multipart-csrf"]);
    }

    #[test]
    fn a_secret_is_found_in_every_encoding_a_page_may_use() {
        use base64::Engine as _;
        let secret = "hunter2@Blue!(x)";
        let forms = encoded_forms(secret, "trace-redacted-credential-password-1");
        let found_in = |text: &str| forms.iter().any(|encoded| text.contains(&encoded.form));
        let standard = base64::engine::general_purpose::STANDARD;
        let url_safe = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let mut texts = vec![
            secret.to_owned(),
            "hunter2%40Blue!(x)".to_owned(), // encodeURIComponent
            "hunter2%40Blue%21%28x%29".to_owned(),
            "hunter2%40blue".to_owned(), // not the secret: a prefix in another case
            "\"hunter2@Blue!(x)\"".to_owned(),
            "hunter2@Blue!(x)".bytes().map(|b| format!("{b:02x}")).collect(),
        ];
        // Inside base64 at every alignment: a `user:password` pair, and a JSON document.
        for prefix in ["", "a", "an", "ann:", "{\"pass\":\""] {
            texts.push(standard.encode(format!("{prefix}{secret}\"}}")));
            texts.push(url_safe.encode(format!("{prefix}{secret}")));
        }
        for text in &texts {
            let expected = !text.ends_with("%40blue");
            assert_eq!(found_in(text), expected, "{text}");
        }
        // Stand-ins of base64 forms keep the length, so that the text around still decodes.
        for engine in [&base64::engine::general_purpose::STANDARD, &base64::engine::general_purpose::URL_SAFE] {
            for alignment in 0..3 {
                let core = base64_core(engine, secret.as_bytes(), alignment);
                let encoded = forms.iter().find(|encoded| encoded.form == core).expect("every alignment's form");
                assert_eq!(encoded.stand_in.len(), core.len(), "{encoded:?}");
            }
        }
        // A secret too short for a base64 form to be told from chance has none.
        assert!(encoded_forms("abcd", "x").iter().all(|encoded| encoded.form.len() < 8 || encoded.form == "61626364"));
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
