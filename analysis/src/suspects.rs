//! Values that no rule of [`crate::secrets`] chose, but whose shape suggests a secret: long, random-looking
//! tokens where secrets travel (request URLs, headers and bodies; local and session storage). The rules
//! choose by structure and name, so that redaction is predictable and never breaks a bundle by guessing;
//! this scan is the safety net a person sees. `trace-host export --redact` lists what it finds, and each
//! one must be confirmed (redacted like a secret) or allowed (kept) by its id before the export goes on.
//!
//! A token is a run of letters, digits and `-_+=` (URL parts percent-decoded first). It is suspect when it
//! is [`MIN_SUSPECT_CHARS`] to [`MAX_SUSPECT_CHARS`] long (longer runs are data: uploads, inline images),
//! switches between letters and digits at least [`MIN_SWITCHES`] times (random text does; words with a
//! number, `ProductCategory2024Summary`, and slugs, `order-2024-11-24-summary`, do not), is not all hex
//! digits (content hashes, commit and trace ids are hex), is not a UUID (ids of things, not of people), and
//! spreads over its alphabet with at least [`MIN_BITS_PER_CHAR`] bits of entropy per character.
//!
//! Suspects are searched in what the rules left: every secret a rule chose is cut out of a text, in each
//! of its encoded forms ([`crate::secrets::encoded_forms`]), before the text is split into tokens, so
//! that a piece of a chosen password (a generated one, split by its `#` or its percent escapes) is never
//! asked about. Values already secrets, or inside one, are not listed again.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use trace_manifest::site_storage;

use crate::body::media_type_parameter;
use crate::secrets::{PLACEHOLDER_PREFIX, Secrets, encoded_forms};

/// Encoded forms of a chosen secret shorter than this are not cut out of texts: they would cut words.
const MIN_CUT_CHARS: usize = 4;

/// Shorter tokens are too many to ask about (ids, short hashes, words with digits).
pub const MIN_SUSPECT_CHARS: usize = 24;
/// Longer runs are data, not credentials (a file uploaded as base64, an image inlined in a body).
pub const MAX_SUSPECT_CHARS: usize = 256;
/// Random base64 of 24 characters switches between letters and digits about eight times.
pub const MIN_SWITCHES: usize = 4;
/// Random base64 of 24 characters or more has about 4.3 bits per character; camel-cased words and
/// repeated patterns have under 3.5.
pub const MIN_BITS_PER_CHAR: f64 = 3.5;

/// One value that looks like a secret, where it was first seen, and the id a person decides it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspect {
    /// The first 12 hex digits of the value's SHA-256: stable across runs, and says nothing of the value.
    pub id: String,
    pub value: String,
    /// Where it was first seen, for people (`the query of GET https://…/api`).
    pub place: String,
}

impl Suspect {
    /// The value's start and length, enough for the person who recorded it to know it again.
    pub fn preview(&self) -> String {
        let start: String = self.value.chars().take(6).collect();
        format!("{start}… ({} characters)", self.value.chars().count())
    }
}

/// The id of a suspect value (see [`Suspect::id`]).
pub fn id_of(value: &str) -> String {
    let digest = Sha256::digest(value.as_bytes());
    hex::encode(&digest[..6])
}

/// Whether `token` (one run of token characters) has the shape of a secret, by the module's rules.
pub fn looks_random(token: &str) -> bool {
    let length = token.chars().count();
    if !(MIN_SUSPECT_CHARS..=MAX_SUSPECT_CHARS).contains(&length)
        || !token.chars().all(is_token_char)
        || switches(token) < MIN_SWITCHES
        || token.chars().all(|c| c.is_ascii_hexdigit())
        || is_uuid(token)
    {
        return false;
    }
    bits_per_char(token) >= MIN_BITS_PER_CHAR
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+' | '=')
}

/// How many times the token goes from a letter to a digit or back, within its `-`/`_`-separated parts. A
/// part of eight or more hex digits counts none: it is a content hash, as a whole hex token is, and a file
/// named by its hash (`FiraSans-Medium-e1aa3f0a.woff2`, what bundlers and rustdoc emit) is no secret.
fn switches(token: &str) -> usize {
    token
        .split(['-', '_'])
        .filter(|part| part.len() < 8 || !part.chars().all(|c| c.is_ascii_hexdigit()))
        .map(|part| {
            let kinds: Vec<bool> =
                part.chars().filter(char::is_ascii_alphanumeric).map(|c| c.is_ascii_digit()).collect();
            kinds.windows(2).filter(|pair| pair[0] != pair[1]).count()
        })
        .sum()
}

fn is_uuid(token: &str) -> bool {
    let groups: Vec<&str> = token.split('-').collect();
    groups.iter().map(|group| group.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|group| group.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Shannon entropy of the token's characters, in bits per character.
fn bits_per_char(token: &str) -> f64 {
    let mut counts: BTreeMap<char, usize> = BTreeMap::new();
    for c in token.chars() {
        *counts.entry(c).or_default() += 1;
    }
    let total = token.chars().count() as f64;
    counts.values().map(|&n| n as f64 / total).map(|p| -p * p.log2()).sum()
}

/// The suspects of a recording, in the order first seen, each once.
#[derive(Debug, Default)]
pub struct Suspects {
    found: Vec<Suspect>,
    /// The chosen secrets' encoded forms, longest first, once made from the secrets of the first scan.
    chosen: Option<Vec<String>>,
}

impl Suspects {
    pub fn into_vec(self) -> Vec<Suspect> {
        self.found
    }

    /// Looks at every token of what the rules left of `text` (the secrets they chose cut out), seen at
    /// `place`, leaving out what `secrets` already holds.
    pub fn scan(&mut self, text: &str, place: &str, secrets: &Secrets) {
        let chosen = self.chosen.get_or_insert_with(|| {
            let mut forms: Vec<String> = secrets
                .iter()
                .flat_map(|secret| encoded_forms(&secret.value, &secret.placeholder))
                .map(|encoded| encoded.form)
                .filter(|form| form.chars().count() >= MIN_CUT_CHARS)
                .collect();
            forms.sort_by_key(|form| std::cmp::Reverse(form.len()));
            forms.dedup();
            forms
        });
        let mut left = std::borrow::Cow::Borrowed(text);
        for form in chosen.iter() {
            if left.contains(form.as_str()) {
                left = std::borrow::Cow::Owned(left.replace(form.as_str(), " "));
            }
        }
        for token in left.split(|c: char| !is_token_char(c)) {
            if !looks_random(token)
                || token.starts_with(PLACEHOLDER_PREFIX)
                || self.found.iter().any(|known| known.value == token)
                || secrets.iter().any(|secret| secret.value.contains(token) || token.contains(&secret.value))
            {
                continue;
            }
            self.found.push(Suspect { id: id_of(token), value: token.to_owned(), place: place.to_owned() });
        }
    }

    /// A request URL: its path segments and query values, percent-decoded.
    pub fn scan_url(&mut self, method: &str, url: &str, secrets: &Secrets) {
        let Ok(parsed) = url::Url::parse(url) else { return };
        let place = |part: &str| {
            let mut shown = parsed.clone();
            shown.set_query(None);
            shown.set_fragment(None);
            format!("the {part} of {method} {shown}")
        };
        if let Some(segments) = parsed.path_segments() {
            for segment in segments {
                // As a query value, but a path keeps its `+`.
                let pair = format!("x={}", segment.replace('+', "%2B"));
                if let Some((_, segment)) = url::form_urlencoded::parse(pair.as_bytes()).next() {
                    self.scan(&segment, &place("path"), secrets);
                }
            }
        }
        let pairs = parsed.query_pairs().chain(url::form_urlencoded::parse(parsed.fragment().unwrap_or("").as_bytes()));
        for (_, value) in pairs {
            self.scan(&value, &place("query"), secrets);
        }
    }

    /// A request header; `Cookie` and `Authorization` are the rules' and cache validators are the
    /// server's own fingerprints of a response, so neither is looked at.
    pub fn scan_header(&mut self, name: &str, value: &str, request: &str, secrets: &Secrets) {
        let lower = name.to_ascii_lowercase();
        let skipped = ["cookie", "authorization", "proxy-authorization", "if-none-match", "if-match"];
        if !lower.starts_with(':') && !skipped.contains(&lower.as_str()) {
            self.scan(value, &format!("the {lower} header of {request}"), secrets);
        }
    }

    /// One request: its URL, its headers and its body's text.
    pub fn scan_request(
        &mut self,
        method: &str,
        url: &str,
        headers: &[trace_manifest::event::Header],
        body: Option<&str>,
        secrets: &Secrets,
    ) {
        self.scan_url(method, url, secrets);
        let without_query = url.split(['?', '#']).next().unwrap_or(url);
        let label = format!("{method} {without_query}");
        // A multipart body's boundary is the browser's random separator between its parts, in the content
        // type and on the body's lines: the browser's, never a secret of the person's.
        let boundary = headers
            .iter()
            .filter(|header| header.name.eq_ignore_ascii_case("content-type"))
            .find_map(|header| media_type_parameter(&header.value, "boundary"))
            .filter(|boundary| !boundary.is_empty());
        let without_boundary = |text: &str| match boundary {
            Some(boundary) => text.replace(boundary, " "),
            None => text.to_owned(),
        };
        for header in headers {
            self.scan_header(&header.name, &without_boundary(&header.value), &label, secrets);
        }
        if let Some(text) = body {
            self.scan(&without_boundary(text), &format!("the body of {label}"), secrets);
        }
    }

    /// A recording's requests (URLs, headers, bodies through `body_text`, decoded as it decodes them),
    /// the frames of its WebSockets, and its storage snapshots.
    pub fn scan_recording(
        &mut self,
        har: &trace_manifest::har::Har,
        storage: &trace_manifest::bundle::StorageFile,
        secrets: &Secrets,
        body_text: &mut dyn FnMut(&trace_manifest::har::HarRequest) -> Option<String>,
    ) {
        for entry in &har.log.entries {
            let request = &entry.request;
            self.scan_request(&request.method, &request.url, &request.headers, body_text(request).as_deref(), secrets);
            let without_query = request.url.split(['?', '#']).next().unwrap_or(&request.url);
            for frame in &entry.web_socket_messages {
                let text = match frame.opcode {
                    2 => {
                        use base64::Engine;
                        let bytes = base64::engine::general_purpose::STANDARD.decode(&frame.data).unwrap_or_default();
                        String::from_utf8(bytes).unwrap_or_default()
                    }
                    _ => frame.data.clone(),
                };
                self.scan(&text, &format!("a WebSocket frame of {without_query}"), secrets);
            }
        }
        for snapshot in &storage.snapshots {
            let areas = [("local", &snapshot.snapshot.local_storage), ("session", &snapshot.snapshot.session_storage)];
            for (area, origins) in areas {
                for (origin, entries) in origins {
                    for (key, value) in entries {
                        self.scan(value, &format!("{area} storage {key:?} of {origin}"), secrets);
                    }
                }
            }
            for (origin, databases) in &snapshot.snapshot.indexed_db {
                for database in databases {
                    for store in &database.object_stores {
                        let label = format!("IndexedDB {}/{} of {origin}", database.name, store.name);
                        for text in store.records.iter().flat_map(|record| site_storage::texts(&record.value)) {
                            self.scan(text, &label, secrets);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_tokens_are_suspect_and_hashes_ids_and_words_are_not() {
        // An API key of a service no rule knows, and a session value in base64url.
        assert!(looks_random("q8Zr2LmX0vTnB4sYwKd7PfJ1"));
        assert!(looks_random("dGhpcy1pcy1hLXNlc3Npb24tNzQxOTI4Mw"));
        // A content hash, a commit id, a trace id: all hex.
        assert!(!looks_random("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"));
        assert!(!looks_random("4b825dc642cb6eb9a060e54bf8d69288fbee4904"));
        // A UUID names a thing.
        assert!(!looks_random("550e8400-e29b-41d4-a716-446655440000"));
        // Words, with or without digits, and repetition.
        assert!(!looks_random("ProductCategorySummaryReport"));
        assert!(!looks_random("order-2024-11-24-summary-page-1"));
        assert!(!looks_random("aaaaaaaaaaaa111111111111"));
        // Too short to ask about, or long enough to be data.
        assert!(!looks_random("q8Zr2LmX0vTn"));
        assert!(!looks_random(&"q8Zr2LmX0vTnB4sYwKd7PfJ1".repeat(12)));
    }

    /// Issue #43: what real sites send that only looks random.
    #[test]
    fn files_named_by_their_hash_and_multipart_boundaries_are_not_suspect() {
        // rustdoc's and bundlers' assets: a name, then a content hash.
        assert!(!looks_random("SourceSerif4-Regular-6b053e98"));
        assert!(!looks_random("FiraSans-Medium-e1aa3f0a"));
        // A random key beside a hash part is still random.
        assert!(looks_random("q8Zr2LmX0vTnB4sYwKd7-6b053e98"));

        // A form posted as multipart: the browser's boundary, in the content type and on every part's
        // line, is not asked about; a token typed into one of its parts still is.
        let boundary = "----WebKitFormBoundary7MA4YWxkTrZu0gWq";
        let key = "q8Zr2LmX0vTnB4sYwKd7PfJ1";
        let headers = [trace_manifest::event::Header {
            name: "Content-Type".into(),
            value: format!("multipart/form-data; boundary={boundary}"),
        }];
        let body = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nLantern\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"api\"\r\n\r\n{key}\r\n--{boundary}--\r\n"
        );
        let mut suspects = Suspects::default();
        suspects.scan_request("POST", "https://cms.test/pages/add/", &headers, Some(&body), &Secrets::default());
        let found: Vec<String> = suspects.into_vec().into_iter().map(|suspect| suspect.value).collect();
        assert_eq!(found, [key]);
    }

    #[test]
    fn a_scan_lists_each_value_once_where_first_seen_and_leaves_out_known_secrets() {
        let mut secrets = Secrets::default();
        secrets.add(trace_manifest::report::SecretKind::Cookie, "sid", "Zk3mQ9vX2rT7bN4wLp8sHc1Y");
        let mut suspects = Suspects::default();
        let key = "q8Zr2LmX0vTnB4sYwKd7PfJ1";
        suspects.scan_url("GET", &format!("https://api.example/v1/items?k={key}&page=2"), &secrets);
        suspects.scan_header("X-Client", key, "GET https://api.example/v1/items", &secrets);
        suspects.scan(r#"{"cookie":"Zk3mQ9vX2rT7bN4wLp8sHc1Y"}"#, "a body", &secrets);
        let found = suspects.into_vec();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].value, key);
        assert_eq!(found[0].place, "the query of GET https://api.example/v1/items");
        assert_eq!(found[0].id, id_of(key));
        assert_eq!(found[0].id.len(), 12);
        assert_eq!(found[0].preview(), "q8Zr2L… (24 characters)");
    }

    /// Issue #30: a generated password, chosen by the credential rule, split by its `#` into a run that looks
    /// random on its own, refused a plain login's redacted export.
    #[test]
    fn suspects_are_searched_in_what_the_rules_left() {
        let password = "Xk9mP2qL7vN4wR8tY3zB6cD1#Q5";
        let mut secrets = Secrets::default();
        secrets.add(trace_manifest::report::SecretKind::Credential, "password", password);
        let mut suspects = Suspects::default();
        let form = format!(
            "username=ann&password={}",
            url::form_urlencoded::byte_serialize(password.as_bytes()).collect::<String>()
        );
        suspects.scan(&form, "the body of POST https://shop.test/login", &secrets);
        suspects.scan(&format!("{{\"password\":\"{password}\"}}"), "the body of POST https://shop.test/api", &secrets);
        assert_eq!(suspects.into_vec(), [], "no piece of a chosen password is asked about");

        // An unchosen key beside the same password is still listed.
        let mut suspects = Suspects::default();
        suspects.scan(&format!("password={password}&key=q8Zr2LmX0vTnB4sYwKd7PfJ1"), "a body", &secrets);
        let found: Vec<String> = suspects.into_vec().into_iter().map(|suspect| suspect.value).collect();
        assert!(found.len() == 1 && found[0].ends_with("q8Zr2LmX0vTnB4sYwKd7PfJ1"), "{found:?}");
    }

    #[test]
    fn a_percent_encoded_token_is_found_decoded() {
        let mut suspects = Suspects::default();
        suspects.scan_url("GET", "https://example.test/a?t=q8Zr2LmX0vTn%2BB4sYwKd7PfJ1", &Secrets::default());
        assert_eq!(suspects.into_vec()[0].value, "q8Zr2LmX0vTn+B4sYwKd7PfJ1");
    }
}
