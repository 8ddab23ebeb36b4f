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
//! because of where it is or what format it has, never because it "looks random". Bodies are read every
//! way they parse (JSON, form, multipart), whatever their content type says: jQuery sends JSON as a form,
//! `fetch` sends forms as `text/plain`. Replacing the values everywhere is the exporter's job, by
//! [`encoded_forms`] and [`encoded_pattern`]; [`values_to_check`] chooses, by other means, what its final
//! search of the written zip looks for.
//!
//! A value cannot be replaced everywhere when it is too short to tell apart from ordinary text, a word of
//! the web's or the bundle's own formats (`text`, `name`, `json`), or a word the recording's addresses
//! use: its placeholder would land in `text/plain`, in the HAR's field names, in `/account`. What happens
//! then depends on who chose it ([`Kept`]):
//! - typed into a credential field: [`Secrets::find`] refuses the export, naming the field, for the
//!   person chose that value and can record again with another;
//! - anything else (a cookie, a header, a parameter, field or storage entry chosen by its name): the value
//!   is left as it is and listed, by kind and name, in [`Secrets::kept`]. A rule of names is broad
//!   (`sort_key` says `key`), and what it chose is a secret only if it looks like one: a value chosen by
//!   name alone that is a plain word or a small number (`sort_key=price`, `pin_length=6`) is kept and
//!   listed too. Refusing those would refuse almost every real recording, for values nobody could misuse;
//!   and a cookie of 1 to 3 characters or a plain word under an innocent name (`lang=en`, `theme=dark`) is
//!   listed the same way rather than skipped silently.

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
                if let Some(text) = request_body_text(bundle, request) {
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
        // What sockets carried, read as bodies are.
        for record in events {
            if let trace_manifest::event::EventKind::WebSocket(frame) = &record.event.kind
                && let Some(text) = frame_text(frame)
            {
                secrets.scan_frame(&text);
            }
        }
        // The pages as the person saw them: what scripts put on a page is in no body.
        let snapshots: Vec<String> = bundle.files()?.into_keys().filter(|path| is_page_snapshot(path)).collect();
        for snapshot in snapshots {
            if let Some(text) = read_text(bundle, &snapshot) {
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
                let pairs: Vec<&str> = if lower == "cookie" { line.split(';').collect() } else { vec![line] };
                for pair in pairs {
                    let pair = pair.split(';').next().unwrap_or("");
                    if let Some((cookie, value)) = pair.split_once('=') {
                        self.scan_cookie(cookie.trim(), value.trim());
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
                self.add_by_name(SecretKind::BodyField, name, &html_unescaped(value));
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

/// Words no secret may be: parts of every URL and page, of content types, and field names of the HAR and
/// the bundle's other files, so that replacing them would wreck the bundle (`text/plain` turned into
/// `trace-redacted-…/plain`, a HAR whose entries lose their `name`), and leaving them would not be
/// redaction. Compared without regard to case.
pub const COMMON_WORDS: &[&str] = &[
    // The web's.
    "http",
    "https",
    "www",
    "html",
    "json",
    "xml",
    "text",
    "plain",
    "application",
    "javascript",
    "image",
    "font",
    "audio",
    "video",
    "multipart",
    "form-data",
    "charset",
    "utf-8",
    "index",
    "true",
    "false",
    "null",
    // The HAR's and the bundle's field names.
    "name",
    "value",
    "version",
    "creator",
    "entries",
    "pages",
    "pageref",
    "request",
    "response",
    "method",
    "url",
    "headers",
    "cookies",
    "content",
    "status",
    "statustext",
    "size",
    "time",
    "timings",
    "mimetype",
    "params",
    "postdata",
    "querystring",
    "redirecturl",
    "httpversion",
    "headerssize",
    "bodysize",
    "starteddatetime",
    "encoding",
    "comment",
    "path",
    "domain",
    "expires",
    "httponly",
    "secure",
    "cache",
    "send",
    "wait",
    "receive",
    "title",
    "kind",
    "type",
    "event",
    "events",
    "task",
    "files",
    "sha256",
];

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

/// A word of [`COMMON_WORDS`], in any case.
fn is_common_word(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    COMMON_WORDS.contains(&lower.as_str())
}

/// Words, as a name rule that is broad may find them (`sort_key=price`, `key=createdAt`,
/// `auth_mode=Single Sign-On`): at most 24 characters of words of letters, each of two or more, lower case
/// or capitalized, with a vowel, joined by `_`, `-`, a space or a change of case (or one all-capital word
/// of up to 6, `POST`). Tokens mix in digits and runs of capitals, and their short runs lack vowels.
fn is_word_like(value: &str) -> bool {
    if value.is_empty() || value.len() > 24 || !value.chars().all(|c| c.is_ascii_alphabetic() || "_- ".contains(c)) {
        return false;
    }
    if value.len() <= 6 && value.chars().all(|c| c.is_ascii_uppercase()) {
        return true;
    }
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    for c in value.chars() {
        if !c.is_ascii_alphabetic() || (c.is_ascii_uppercase() && !word.is_empty()) {
            words.push(std::mem::take(&mut word));
        }
        if c.is_ascii_alphabetic() {
            word.push(c);
        }
    }
    words.push(word);
    words.iter().filter(|word| !word.is_empty()).all(|word| {
        word.len() >= 2
            && word.chars().skip(1).all(|c| c.is_ascii_lowercase())
            && word.chars().any(|c| "aeiouyAEIOUY".contains(c))
    })
}

/// A number of fewer than 8 digits (`pin_length=6`, `sort_key=2`): it turns up by chance in every
/// timestamp and size of a bundle.
fn is_small_number(value: &str) -> bool {
    !value.is_empty() && value.len() < 8 && value.chars().all(|c| c.is_ascii_digit())
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

/// A request's body as text: inline in the HAR, or read from its file when that holds UTF-8 of at most
/// [`MAX_PARSED_BODY_BYTES`], decoded first when the page compressed it ([`body::ContentEncoding`]).
#[cfg(feature = "native")]
pub fn request_body_text(bundle: &mut Bundle, request: &trace_manifest::har::HarRequest) -> Option<String> {
    let post_data = request.post_data.as_ref()?;
    match (&post_data.text, &post_data.file, body::ContentEncoding::of_request(request)) {
        (Some(text), _, _) => Some(text.clone()),
        (None, Some(file), None) => read_text(bundle, file),
        (None, Some(file), Some(encoding)) => {
            let size = bundle.files().ok()?.get(file).copied()?;
            let compressed = bundle.read(file).ok().filter(|_| size <= MAX_PARSED_BODY_BYTES)?;
            String::from_utf8(encoding.decode(&compressed, MAX_PARSED_BODY_BYTES)?).ok()
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
/// - as typed, JSON-escaped (as in `events.jsonl` and the HAR, with `<`, `>` and `&` as `\u` escapes, as
///   some servers write them, and with `\/` and non-ASCII as `\u` escapes, as PHP and Python do) and
///   HTML-escaped (as in pages and DOM snapshots: a text node's `&`, `<` and `>`, and quotes by name or
///   number);
/// - percent-encoded as forms write it (`+` for a space), as `encodeURIComponent` writes it (`!'()*~`
///   bare), and strictly (only RFC 3986's unreserved characters bare), each with upper- and lower-case hex;
///   and JSON-escaped around those;
/// - inside base64 and base64url, at each of the three alignments a secret can have inside a longer
///   encoded text (a `user:password` pair, a JSON document): the characters that depend on the secret
///   alone, and those with their `+` and `/` percent-encoded or `/` JSON-escaped. Their stand-in has the
///   same length once decoded, and the same escapes, so that the text around still decodes;
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
    // A DOM text node escapes `&`, `<` and `>` only; attributes and escaping functions add quotes, by name
    // (`&quot;`) or number (PHP's `&#039;`, Python's `&#x27;`, `&#34;`).
    let text_node = value.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let html = text_node.replace('"', "&quot;");
    let numeric = text_node.replace('"', "&#34;").replace('\'', "&#39;");
    textual.extend([
        html.replace('\'', "&#39;"),
        html.replace('\'', "&#039;"),
        html.replace('\'', "&#x27;"),
        html,
        numeric,
        text_node,
    ]);
    let escaped: Vec<String> = textual
        .iter()
        .flat_map(|form| {
            let json = json_escaped(form);
            let unicode = json.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026");
            // PHP's `json_encode` and Python's `json.dumps` by default: `\/`, and `\u00e9` for `é`.
            let ascii = ascii_json_escaped(&json);
            [json, unicode, ascii]
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
                // Base64 put in a URL by `encodeURIComponent(btoa(…))` or a form, or in JSON by PHP: its
                // `+` and `/` escaped, and its stand-in's the same way.
                if form.contains(['+', '/']) {
                    for escape in [base64_percent_upper, base64_percent_lower, base64_json] {
                        forms.push(EncodedForm { form: escape(&form), stand_in: escape(&stand_in) });
                    }
                }
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

fn base64_percent_upper(text: &str) -> String {
    text.replace('+', "%2B").replace('/', "%2F")
}

fn base64_percent_lower(text: &str) -> String {
    text.replace('+', "%2b").replace('/', "%2f")
}

fn base64_json(text: &str) -> String {
    text.replace('/', "\\/")
}

/// JSON already escaped, with `/` escaped too and every character past ASCII as `\u` escapes (in lower
/// case, as PHP and Python write them; a surrogate pair past the BMP).
fn ascii_json_escaped(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '/' => out.push_str("\\/"),
            c if c.is_ascii() => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out
}

/// A pattern that finds one value in a bundle however each of its characters is written: the source of a
/// regular expression, and the most bytes one match of it can take (what a search of a stream must keep
/// from one chunk to the next).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedPattern {
    pub source: String,
    pub max_len: usize,
}

/// `value` with each character written any way a page, a server or a browser may write it, each
/// independently of the others, so that what no single encoder of [`encoded_forms`] makes is found too: a
/// DOM text node (`&` escaped, `"` bare), `encodeURI` (`@ / + : ; , ? & = $ #` bare), HTML numeric and named
/// references, `\/` and `\u00e9` in JSON, and any mix of them. Each character may be:
/// - as it is; a `"`, `'`, `/` or `\` after backslashes, as JSON or JavaScript escape it, in JSON inside
///   JSON too;
/// - for a space, `+`;
/// - percent-encoded byte by byte, hex in either case, and again (`%2540`);
/// - an HTML reference: decimal or hex, with leading zeros, or named (`&commat;`, `&eacute;`), its `&`
///   itself escaped or not (`&amp;#64;`, `\u0026#64;`);
/// - a JSON or JavaScript escape: `\u0040` (two past the BMP), `\x40`.
///
/// Base64 and hex, which encode bytes together, are [`encoded_forms`]'s. Built once per secret: matching
/// is linear in the text, whatever the secret.
pub fn encoded_pattern(value: &str) -> EncodedPattern {
    let mut source = String::new();
    let mut max_len = 0;
    for c in value.chars() {
        let alternatives = char_alternatives(c);
        max_len += alternatives.iter().map(|(_, len)| *len).max().unwrap_or(0);
        let patterns: Vec<&str> = alternatives.iter().map(|(pattern, _)| pattern.as_str()).collect();
        source.push_str(&format!("(?:{})", patterns.join("|")));
    }
    EncodedPattern { source, max_len }
}

/// The ways one character may be written (see [`encoded_pattern`]), each a pattern with the most bytes it
/// matches.
fn char_alternatives(c: char) -> Vec<(String, usize)> {
    // The `&` that starts a reference, as it is, HTML-escaped or JSON-escaped.
    const AMPERSAND: &str = r"(?:&|&amp;|\\{1,4}u0026)";
    const AMPERSAND_LEN: usize = 9;
    let code = u32::from(c);
    let mut alternatives = vec![match c {
        '"' => (r#"\\{0,7}""#.to_owned(), 8),
        '\'' | '/' => (format!(r"\\{{0,3}}{c}"), 4),
        '\\' => (r"\\{1,8}".to_owned(), 8),
        c => (regex::escape(c.encode_utf8(&mut [0; 4])), c.len_utf8()),
    }];
    if c == ' ' {
        alternatives.push((r"\+".to_owned(), 1));
    }
    let mut utf8 = [0u8; 4];
    let bytes = c.encode_utf8(&mut utf8).as_bytes();
    let percent: String = bytes.iter().map(|byte| format!("%(?:25)?{}", hex_pattern(u32::from(*byte), 2))).collect();
    alternatives.push((percent, 5 * bytes.len()));
    let decimal = code.to_string();
    alternatives.push((format!("{AMPERSAND}#0{{0,6}}{decimal};"), AMPERSAND_LEN + 8 + decimal.len()));
    let hex = format!("{code:x}");
    alternatives.push((format!("{AMPERSAND}#[xX]0{{0,6}}{};", hex_pattern(code, 1)), AMPERSAND_LEN + 9 + hex.len()));
    for name in entity_names(c) {
        alternatives.push((format!("{AMPERSAND}{name};"), AMPERSAND_LEN + name.len() + 1));
    }
    let mut units = [0u16; 2];
    let units = c.encode_utf16(&mut units);
    let unicode: String = units.iter().map(|unit| format!(r"\\{{1,4}}u{}", hex_pattern(u32::from(*unit), 4))).collect();
    alternatives.push((unicode, 9 * units.len()));
    if code < 0x100 {
        alternatives.push((format!(r"\\{{1,4}}x{}", hex_pattern(code, 2)), 7));
    }
    alternatives
}

/// `n` in hex of at least `width` digits, each letter in either case.
fn hex_pattern(n: u32, width: usize) -> String {
    format!("{n:0width$x}")
        .chars()
        .map(|digit| match digit {
            'a'..='f' => format!("[{digit}{}]", digit.to_ascii_uppercase()),
            digit => digit.to_string(),
        })
        .collect()
}

/// HTML's names for a character: ASCII punctuation's (HTML5) and Latin-1's (HTML 4, which PHP's
/// `htmlentities` writes).
fn entity_names(c: char) -> &'static [&'static str] {
    match c {
        '\t' => &["Tab"],
        '\n' => &["NewLine"],
        '!' => &["excl"],
        '"' => &["quot", "QUOT"],
        '#' => &["num"],
        '$' => &["dollar"],
        '%' => &["percnt"],
        '&' => &["amp", "AMP"],
        '\'' => &["apos"],
        '(' => &["lpar"],
        ')' => &["rpar"],
        '*' => &["ast", "midast"],
        '+' => &["plus"],
        ',' => &["comma"],
        '.' => &["period"],
        '/' => &["sol"],
        ':' => &["colon"],
        ';' => &["semi"],
        '<' => &["lt", "LT"],
        '=' => &["equals"],
        '>' => &["gt", "GT"],
        '?' => &["quest"],
        '@' => &["commat"],
        '[' => &["lsqb", "lbrack"],
        '\\' => &["bsol"],
        ']' => &["rsqb", "rbrack"],
        '^' => &["Hat"],
        '_' => &["lowbar", "UnderBar"],
        '`' => &["grave", "DiacriticalGrave"],
        '{' => &["lcub", "lbrace"],
        '|' => &["verbar", "vert", "VerticalLine"],
        '}' => &["rcub", "rbrace"],
        '\u{a0}'..='\u{ff}' => std::slice::from_ref(&LATIN_1_ENTITIES[c as usize - 0xa0]),
        _ => &[],
    }
}

/// HTML 4's names of U+00A0 to U+00FF, in order.
const LATIN_1_ENTITIES: [&str; 96] = [
    "nbsp", "iexcl", "cent", "pound", "curren", "yen", "brvbar", "sect", "uml", "copy", "ordf", "laquo", "not", "shy",
    "reg", "macr", "deg", "plusmn", "sup2", "sup3", "acute", "micro", "para", "middot", "cedil", "sup1", "ordm",
    "raquo", "frac14", "frac12", "frac34", "iquest", "Agrave", "Aacute", "Acirc", "Atilde", "Auml", "Aring", "AElig",
    "Ccedil", "Egrave", "Eacute", "Ecirc", "Euml", "Igrave", "Iacute", "Icirc", "Iuml", "ETH", "Ntilde", "Ograve",
    "Oacute", "Ocirc", "Otilde", "Ouml", "times", "Oslash", "Ugrave", "Uacute", "Ucirc", "Uuml", "Yacute", "THORN",
    "szlig", "agrave", "aacute", "acirc", "atilde", "auml", "aring", "aelig", "ccedil", "egrave", "eacute", "ecirc",
    "euml", "igrave", "iacute", "icirc", "iuml", "eth", "ntilde", "ograve", "oacute", "ocirc", "otilde", "ouml",
    "divide", "oslash", "ugrave", "uacute", "ucirc", "uuml", "yacute", "thorn", "yuml",
];

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
    fn words_and_small_numbers_are_told_from_tokens() {
        for word in ["price", "name", "createdAt", "Single Sign-On", "sort_by_date", "POST", "desc", "12", "1234567"] {
            assert!(is_word_like(word) || is_small_number(word), "{word} is a word");
        }
        for token in [
            "k3y-0123456789",
            "AbCdEfGh",
            "aBcDeFgHiJ",
            "xkcdqwrtz",
            "12345678",
            "correcthorsebatterystapleextra",
            "tok_9f2c",
        ] {
            assert!(!is_word_like(token) && !is_small_number(token), "{token} is no word");
        }
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

    /// Issue #11: each character of a secret may be written its own way, as no one encoder of
    /// [`encoded_forms`] writes it: the pattern finds every mix, and nothing else.
    #[test]
    fn a_secret_is_found_however_each_of_its_characters_is_written() {
        let secret = "p&ss \"wörd\"/@+1'";
        let pattern = encoded_pattern(secret);
        let whole = Regex::new(&format!("^(?:{})$", pattern.source)).unwrap();
        for written in [
            secret,
            // A DOM text node: `&` escaped, the quotes bare.
            "p&amp;ss \"wörd\"/@+1'",
            // HTML numeric references, decimal and hex, padded, in either case; and named ones, as PHP's
            // `htmlentities` writes them.
            "p&#38;ss&#32;&#34;w&#246;rd&#x22;&#x2F;&#64;&#43;1&#039;",
            "p&#X26;ss &#x0022;w&#xF6;rd&quot;&sol;&commat;&plus;1&apos;",
            "p&amp;ss &quot;w&ouml;rd&quot;/@+1&#039;",
            // `encodeURI` (`& / @ + '` bare), `encodeURIComponent` in lower case, the form encoding, and
            // percent-encoding twice.
            "p&ss%20%22w%C3%B6rd%22/@+1'",
            "p%26ss%20%22w%c3%b6rd%22%2f%40%2b1'",
            "p%26ss+%22w%C3%B6rd%22%2F%40%2B1%27",
            "p%2526ss%2520%2522w%25C3%25B6rd%2522%252F%2540%252B1%2527",
            // JSON as PHP and Python write it, with `\u` escapes, and JSON inside JSON.
            r#"p&ss \"w\u00f6rd\"\/@+1'"#,
            r#"p\u0026ss \"w\u00F6rd\"\/\u0040\u002b1\u0027"#,
            r#"p&ss \\\"wörd\\\"/@+1'"#,
            // JavaScript's `\x` escapes; HTML references escaped again, by HTML and by JSON.
            r#"p\x26ss \x22w\xf6rd\x22/@+1\x27"#,
            "p&amp;#38;ss \\u0026#34;wörd&#34;/@+1'",
        ] {
            assert!(whole.is_match(written), "{written}");
            assert!(written.len() <= pattern.max_len, "{written}: longer than {}", pattern.max_len);
        }
        for other in ["p&ss \"word\"/@+1'", "p&ss \"wörd\"/@+2'", "P&ss \"wörd\"/@+1'", "p&#38ss \"wörd\"/@+1'"] {
            assert!(!whole.is_match(other), "{other}");
        }
        // The enumerated forms hold the commonest of these too.
        let forms = encoded_forms(secret, "x");
        for written in ["p&amp;ss \"wörd\"/@+1'", "p&amp;ss &#34;wörd&#34;/@+1&#39;", r#"p&ss \"w\u00f6rd\"\/@+1'"#] {
            assert!(forms.iter().any(|encoded| encoded.form == written), "{written}");
        }
    }

    /// Issue #11: base64 put in a URL by `encodeURIComponent(btoa(user + ":" + password))`, or in JSON by
    /// PHP, has its `+` and `/` escaped; the secret's part is found all the same, and its stand-in escaped
    /// the same way.
    #[test]
    fn base64_with_its_plus_and_slash_escaped_is_found() {
        use base64::Engine as _;
        let secret = "open? sesame@vault!(7)>";
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("ann:{secret}"));
        assert!(basic[8..basic.len() - 4].contains(['+', '/']), "{basic}");
        let forms = encoded_forms(secret, "trace-redacted-credential-passphrase-1");
        let escaped = [
            basic.replace('+', "%2B").replace('/', "%2F").replace('=', "%3D"),
            basic.replace('+', "%2b").replace('/', "%2f"),
            basic.replace('/', "\\/"),
        ];
        for text in &escaped {
            let found = forms.iter().find(|encoded| text.contains(&encoded.form));
            let found = found.unwrap_or_else(|| panic!("{text}"));
            assert!(!found.stand_in.contains(['+', '/']) || found.stand_in.contains("\\/"), "{found:?}");
        }
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
