//! Redaction for sharing: every secret of a bundle (see [`secrets`]) replaced by its placeholder in every
//! file, in every encoding it appears in, and a search of the written zip that fails loudly if any
//! original is left. Two searches find a secret: its enumerated forms ([`encoded_forms`]: as is, form- and
//! percent-encoded, JSON- and HTML-escaped, base64 and hex, each with a stand-in of the same shape), then
//! its per-character pattern ([`encoded_pattern`]: each character raw, percent-encoded, an HTML reference
//! or a JSON escape, whatever its neighbours are), which finds the mixes no one encoder makes (`encodeURI`,
//! a text node with `&` escaped and `"` bare, `&#64;`). Both are built once per export, the patterns as
//! one regular expression, so that a file is read through once by each whatever the number of secrets.
//!
//! Values a rule chose but that cannot be replaced safely are listed, not replaced (see
//! [`trace_analysis::secrets::Kept`]); a typed credential among them refuses the export instead.
//!
//! The replacement is consistent: one secret has one placeholder everywhere, so that the login form's CSRF
//! token still equals the `csrf` cookie, the password typed still equals the password posted, and the
//! redacted bundle replays like the original. The stand-in for a typed credential is what `credentials.json`
//! then holds: the value that signs in to the redacted environment.
//!
//! Bodies are content-addressed, so a body that changes moves to the name of its new hash, and the events,
//! the HAR and the index follow it.
//!
//! Values no rule chose but that look like secrets ([`trace_analysis::suspects`]) are the person's to
//! decide: each is redacted or kept as [`SuspectDecisions`] say, and an export with one left undecided is
//! refused, listing them by id.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;

use aho_corasick::{AhoCorasick, MatchKind};
use anyhow::{Context, Result, bail};
use trace_bundle::archive::{Bundle, HashingWriter, parse_events, parse_manifest};
use trace_bundle::pack;
use trace_manifest::bundle::{self, Counts, FileEntry, StorageFile};
use trace_manifest::event::EventKind;
use trace_manifest::har::Har;

use regex::bytes::{Regex, RegexBuilder};
use trace_analysis::body::{self, ContentEncoding};
use trace_analysis::secrets::{Kept, Secrets, encoded_forms, encoded_pattern, request_body_text, values_to_check};
use trace_analysis::suspects::{Suspect, Suspects};
use trace_manifest::report::{RedactionSummary, SecretKind};

/// What to do with a suspect no id names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SuspectPolicy {
    /// Refuse the export, listing the suspects by id.
    #[default]
    Ask,
    /// Redact them all, as secrets.
    Redact,
    /// Keep them all.
    Allow,
}

/// The person's decisions on a recording's suspects: by id, then by policy.
#[derive(Debug, Clone, Default)]
pub struct SuspectDecisions {
    pub redact: BTreeSet<String>,
    pub allow: BTreeSet<String>,
    pub otherwise: SuspectPolicy,
}

impl SuspectDecisions {
    fn decide(&self, suspect: &Suspect) -> SuspectPolicy {
        if self.redact.contains(&suspect.id) {
            SuspectPolicy::Redact
        } else if self.allow.contains(&suspect.id) {
            SuspectPolicy::Allow
        } else {
            self.otherwise
        }
    }
}

/// Adds the suspects the person chose to redact to `secrets`, counting them in `summary`; fails, listing
/// them, when any is left undecided.
fn decide_suspects(
    source: &mut Bundle,
    har: &Har,
    storage: &StorageFile,
    secrets: &mut Secrets,
    decisions: &SuspectDecisions,
    summary: &mut RedactionSummary,
) -> Result<()> {
    let file_sizes = source.files()?;
    let mut body_text = |request: &trace_manifest::har::HarRequest| request_body_text(source, &file_sizes, request);
    let mut suspects = Suspects::default();
    suspects.scan_recording(har, storage, secrets, &mut body_text);
    let mut undecided = Vec::new();
    for suspect in suspects.into_vec() {
        match decisions.decide(&suspect) {
            SuspectPolicy::Redact => {
                secrets.add(SecretKind::Shape, "suspect", &suspect.value);
                summary.suspects_redacted += 1;
            }
            SuspectPolicy::Allow => summary.suspects_allowed += 1,
            SuspectPolicy::Ask => undecided.push(suspect),
        }
    }
    if !undecided.is_empty() {
        let listed: Vec<String> =
            undecided.iter().map(|s| format!("  {}  {} in {}", s.id, s.preview(), s.place)).collect();
        bail!(
            "the recording holds {} value(s) that look like secrets but that no redaction rule chose; redact \
             each with --redact-suspect ID or keep it with --allow-suspect ID (or decide for all with \
             --suspects redact|allow); nothing was exported:\n{}",
            undecided.len(),
            listed.join("\n")
        );
    }
    Ok(())
}

/// What redaction did, in a line for people.
pub fn describe(summary: &RedactionSummary) -> String {
    let total: usize = summary.secrets.values().sum();
    let kinds: Vec<String> = summary.secrets.iter().map(|(kind, n)| format!("{n} {}", kind.as_str())).collect();
    let mut line = format!(
        "{total} secrets ({}) replaced in {} places across {} files",
        if kinds.is_empty() { "none found".to_owned() } else { kinds.join(", ") },
        summary.replacements,
        summary.files_changed
    );
    if summary.suspects_redacted + summary.suspects_allowed > 0 {
        line += &format!(
            "; of the values that looked like secrets, {} redacted and {} kept",
            summary.suspects_redacted, summary.suspects_allowed
        );
    }
    line
}

/// Every encoded form and the per-character pattern of every secret, and what replaces each.
pub struct Replacer {
    automaton: AhoCorasick,
    /// The same forms with standard semantics, for searching.
    finder: AhoCorasick,
    /// Per form: the secret it is a form of.
    secret_of_pattern: Vec<usize>,
    /// Per form: its stand-in.
    replacement_of_pattern: Vec<String>,
    /// What the forms leave, found character by character.
    patterns: Option<Patterns>,
    /// Per secret: its placeholder, which replaces what its pattern finds.
    placeholders: Vec<String>,
    /// Every secret as it is, for the payloads of binary frames ([`Replacer::replace_in_binary`]).
    raw: AhoCorasick,
    /// Per secret: its placeholder repeated and cut to the secret's length in bytes.
    same_length: Vec<Vec<u8>>,
}

impl Replacer {
    pub fn new(secrets: &Secrets) -> Result<Replacer> {
        let mut forms = Vec::new();
        let mut secret_of_pattern = Vec::new();
        let mut replacement_of_pattern = Vec::new();
        for (index, secret) in secrets.iter().enumerate() {
            for encoded in encoded_forms(&secret.value, &secret.placeholder) {
                forms.push(encoded.form);
                secret_of_pattern.push(index);
                replacement_of_pattern.push(encoded.stand_in);
            }
        }
        // Leftmost-longest: a token inside a longer secret (a cookie header holding a session id) is replaced
        // as part of the longer one.
        let automaton = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&forms)?;
        let finder = AhoCorasick::new(&forms)?;
        let values: Vec<&str> = secrets.iter().map(|secret| secret.value.as_str()).collect();
        let patterns = Patterns::new(&values)?;
        let placeholders = secrets.iter().map(|secret| secret.placeholder.clone()).collect();
        let raw = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&values)?;
        let same_length = secrets
            .iter()
            .map(|secret| secret.placeholder.bytes().cycle().take(secret.value.len()).collect())
            .collect();
        Ok(Replacer {
            automaton,
            finder,
            secret_of_pattern,
            replacement_of_pattern,
            patterns,
            placeholders,
            raw,
            same_length,
        })
    }

    /// A binary payload (a WebSocket frame's) with every secret replaced by a stand-in of its length: a
    /// binary protocol counts its parts' lengths in offsets, which a longer placeholder would break.
    pub fn replace_in_binary(&self, bytes: &[u8]) -> (Vec<u8>, usize) {
        let mut count = 0;
        let mut out = Vec::with_capacity(bytes.len());
        self.raw.replace_all_with_bytes(bytes, &mut out, |found, _, out| {
            count += 1;
            out.extend_from_slice(&self.same_length[found.pattern().as_usize()]);
            true
        });
        (out, count)
    }

    /// `bytes` with every secret replaced, and how many were: the enumerated forms first (base64 and hex
    /// need their stand-ins of the same shape), then whatever the patterns still find, by the placeholder,
    /// which every textual encoding leaves as it is.
    pub fn replace(&self, bytes: &[u8]) -> (Vec<u8>, usize) {
        let mut count = 0;
        let mut out = Vec::with_capacity(bytes.len());
        self.automaton.replace_all_with_bytes(bytes, &mut out, |found, _, out| {
            count += 1;
            out.extend_from_slice(self.replacement_of_pattern[found.pattern().as_usize()].as_bytes());
            true
        });
        if let Some(patterns) = &self.patterns
            && patterns.regex.is_match(&out)
        {
            let mut replaced = Vec::with_capacity(out.len());
            let mut copied = 0;
            for found in patterns.regex.find_iter(&out) {
                let secret = patterns.which(found.as_bytes());
                replaced.extend_from_slice(&out[copied..found.start()]);
                replaced.extend_from_slice(self.placeholders[secret].as_bytes());
                copied = found.end();
                count += 1;
            }
            replaced.extend_from_slice(&out[copied..]);
            out = replaced;
        }
        (out, count)
    }

    /// The index of the first secret found in `reader`, if any.
    pub fn find_in(&self, reader: impl Read) -> Result<Option<usize>> {
        find_in_stream(&self.finder, self.patterns.as_ref(), reader, |found| match found {
            Found::Form(pattern) => self.secret_of_pattern[pattern],
            Found::Pattern(value) => value,
        })
    }
}

/// The per-character patterns of a list of values ([`encoded_pattern`]), as one regular expression: each
/// value a group of its own, the longest first, so that a value inside a longer one is found as part of it.
struct Patterns {
    regex: Regex,
    /// Per group, in order: the index of its value in the list.
    value_of_group: Vec<usize>,
    /// The most bytes one match can take.
    max_len: usize,
}

impl Patterns {
    fn new(values: &[&str]) -> Result<Option<Patterns>> {
        if values.is_empty() {
            return Ok(None);
        }
        let mut value_of_group: Vec<usize> = (0..values.len()).collect();
        value_of_group.sort_by_key(|&index| std::cmp::Reverse(values[index].len()));
        let mut sources = Vec::new();
        let mut max_len = 0;
        for &index in &value_of_group {
            let pattern = encoded_pattern(values[index]);
            max_len = max_len.max(pattern.max_len);
            sources.push(format!("({})", pattern.source));
        }
        // Generous limits: the expression grows with the secrets' length, and a lazy DFA that keeps
        // resetting its cache falls back to a slower engine.
        let regex = RegexBuilder::new(&sources.join("|"))
            .size_limit(1 << 30)
            .dfa_size_limit(64 << 20)
            .build()
            .context("cannot build the secrets' patterns")?;
        Ok(Some(Patterns { regex, value_of_group, max_len }))
    }

    /// Which value a match is, by running the expression again on the match alone (matches are rare, and
    /// finding without groups is the fast path).
    fn which(&self, matched: &[u8]) -> usize {
        let group = self.regex.captures(matched).and_then(|captures| {
            (1..captures.len()).find(|&group| captures.get(group).is_some()).map(|group| group - 1)
        });
        self.value_of_group[group.expect("a match matches itself")]
    }
}

/// What a search found: a pattern of an Aho-Corasick automaton, or a value of [`Patterns`].
enum Found {
    Form(usize),
    Pattern(usize),
}

/// How much of a stream is searched at once.
const SEARCH_CHUNK_BYTES: usize = 8 << 20;

/// The first of `finder`'s forms or `patterns`' values found in `reader`, told by `tell`. The stream is
/// read a chunk at a time (a body may be larger than memory), each chunk searched with the end of the one
/// before it, as long as the longest match can be, so that nothing across two chunks is missed.
fn find_in_stream<T>(
    finder: &AhoCorasick,
    patterns: Option<&Patterns>,
    mut reader: impl Read,
    tell: impl Fn(Found) -> T,
) -> Result<Option<T>> {
    if finder.patterns_len() == 0 && patterns.is_none() {
        return Ok(None);
    }
    let overlap = finder.max_pattern_len().max(patterns.map_or(0, |patterns| patterns.max_len));
    let mut window: Vec<u8> = Vec::with_capacity(SEARCH_CHUNK_BYTES + overlap);
    let mut chunk = vec![0u8; SEARCH_CHUNK_BYTES];
    loop {
        let read = reader.read(&mut chunk)?;
        if read == 0 {
            return Ok(None);
        }
        window.extend_from_slice(&chunk[..read]);
        if let Some(found) = finder.find(&window[..]) {
            return Ok(Some(tell(Found::Form(found.pattern().as_usize()))));
        }
        if let Some(patterns) = patterns
            && let Some(found) = patterns.regex.find(&window)
        {
            return Ok(Some(tell(Found::Pattern(patterns.which(found.as_bytes())))));
        }
        let keep = window.len().min(overlap);
        window.drain(..window.len() - keep);
    }
}

/// The final search's own list: every encoded form and the pattern of every value `values_to_check`
/// chose, which is not the list the replacement worked from, so that what slipped past the rules that
/// chose the secrets is still caught.
struct Check {
    finder: AhoCorasick,
    /// Per form: what its value was (`credential`, `cookie`).
    what_of_pattern: Vec<&'static str>,
    patterns: Option<Patterns>,
    /// Per value: what it was.
    what_of_value: Vec<&'static str>,
}

impl Check {
    fn new(values: &[(&'static str, String)]) -> Result<Check> {
        let mut forms = Vec::new();
        let mut what_of_pattern = Vec::new();
        for (what, value) in values {
            for encoded in encoded_forms(value, "") {
                forms.push(encoded.form);
                what_of_pattern.push(*what);
            }
        }
        let texts: Vec<&str> = values.iter().map(|(_, value)| value.as_str()).collect();
        Ok(Check {
            finder: AhoCorasick::new(&forms)?,
            what_of_pattern,
            patterns: Patterns::new(&texts)?,
            what_of_value: values.iter().map(|(what, _)| *what).collect(),
        })
    }

    fn find_in(&self, reader: impl Read) -> Result<Option<&'static str>> {
        find_in_stream(&self.finder, self.patterns.as_ref(), reader, |found| match found {
            Found::Form(pattern) => self.what_of_pattern[pattern],
            Found::Pattern(value) => self.what_of_value[value],
        })
    }
}

/// A bundle redacted into a directory, with what it takes to check a zip made of it.
pub struct Redacted {
    pub summary: RedactionSummary,
    secrets: Secrets,
    replacer: Replacer,
    check: Check,
}

impl Redacted {
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// The values rules chose that were left as they are, and why (see [`Kept`]).
    pub fn kept(&self) -> impl Iterator<Item = &Kept> {
        self.secrets.kept()
    }

    /// Searches every entry of the zip at `path`, decompressed (the snapshot pack's files unpacked), and
    /// every entry's name, for every form of every original secret. Names the first one found (by kind and
    /// name, never by value).
    pub fn verify_zip(&self, path: &Path) -> Result<()> {
        self.verify(path, each_file)
    }

    /// [`Redacted::verify_zip`] for a WACZ (see [`crate::export::wacz`]): its WARC's records are gzip
    /// members the zip stores as they are, so each is searched decompressed (and its HTTP payload decoded
    /// too when that is itself a gzip or zlib stream); the index, the pages and the package as stored.
    pub fn verify_wacz(&self, path: &Path) -> Result<()> {
        self.verify(path, each_wacz_file)
    }

    fn verify(&self, path: &Path, each: EachFile) -> Result<()> {
        // Two passes, each streaming every file: a body may be larger than memory.
        each(path, &mut |name, contents| {
            let found = match self.replacer.find_in(name.as_bytes())? {
                Some(secret) => Some(secret),
                None => self.replacer.find_in(contents).with_context(|| format!("cannot read {name} back"))?,
            };
            if let Some(secret) = found {
                let secret = self.secrets.get(secret);
                bail!(
                    "{name} in the redacted zip still holds a secret (the {} {:?}); nothing was exported",
                    secret.kind.as_str(),
                    secret.name
                );
            }
            Ok(())
        })?;
        // Again, for the values chosen apart from the rules.
        each(path, &mut |name, contents| {
            let found = match self.check.find_in(name.as_bytes())? {
                Some(what) => Some(what),
                None => self.check.find_in(contents).with_context(|| format!("cannot read {name} back"))?,
            };
            if let Some(what) = found {
                bail!(
                    "{name} in the redacted zip still holds a {what} value that no redaction rule chose; nothing \
                     was exported"
                );
            }
            Ok(())
        })
    }
}

/// A walk over the files of a written export, each given to a visitor with a reader of its contents.
type EachFile = fn(&Path, &mut dyn FnMut(&str, &mut dyn Read) -> Result<()>) -> Result<()>;

/// Calls `visit` with each record of each WARC (`*.warc.gz`) of the WACZ at `path`, decompressed, named
/// by its WARC and its place in it, and with each other file as [`each_file`] does (a WACZ has no
/// snapshot pack). A WARC is read one gzip member at a time: each record is one.
fn each_wacz_file(path: &Path, visit: &mut dyn FnMut(&str, &mut dyn Read) -> Result<()>) -> Result<()> {
    use std::io::BufRead;
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file))
        .with_context(|| format!("{} is not a readable zip", path.display()))?;
    for index in 0..zip.len() {
        let entry = zip.by_index(index)?;
        let name = entry.name().to_owned();
        let mut entry = std::io::BufReader::new(entry);
        if !name.ends_with(".warc.gz") {
            visit(&name, &mut entry)?;
            continue;
        }
        let mut number = 0;
        while !entry.fill_buf().with_context(|| format!("cannot read {name} back"))?.is_empty() {
            number += 1;
            let what = format!("{name} (record {number})");
            let mut member = flate2::bufread::GzDecoder::new(&mut entry);
            let mut record = Vec::new();
            (&mut member)
                .take(MAX_DECODED_BODY_BYTES)
                .read_to_end(&mut record)
                .with_context(|| format!("{what} does not decompress"))?;
            if record.len() as u64 == MAX_DECODED_BODY_BYTES {
                // Too large to hold: searched as it streams, its payload not decoded.
                visit(&what, &mut record.as_slice().chain(&mut member))?;
                std::io::copy(&mut member, &mut std::io::sink()).with_context(|| format!("cannot read {what}"))?;
                continue;
            }
            visit(&what, &mut record.as_slice())?;
            if let Some(decoded) = http_payload(&record).and_then(decoded_if_compressed) {
                visit(&what, &mut decoded.as_slice())?;
            }
        }
    }
    Ok(())
}

/// The payload of a WARC record holding an HTTP message: what follows the record's header block and the
/// message's head, less the record's closing line breaks.
fn http_payload(record: &[u8]) -> Option<&[u8]> {
    let split = |bytes: &[u8]| bytes.windows(4).position(|window| window == b"\r\n\r\n").map(|at| at + 4);
    let block = &record[split(record)?..];
    let payload = &block[split(block)?..];
    Some(payload.strip_suffix(b"\r\n\r\n").unwrap_or(payload))
}

/// Calls `visit` with each file of the zip at `path` and a reader of its contents: each entry streamed as
/// it decompresses, except the snapshot pack, whose files are visited one by one, unpacked.
fn each_file(path: &Path, visit: &mut dyn FnMut(&str, &mut dyn Read) -> Result<()>) -> Result<()> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file))
        .with_context(|| format!("{} is not a readable zip", path.display()))?;
    let mut has_pack = false;
    for index in 0..zip.len() {
        let mut entry = zip.by_index(index)?;
        let name = entry.name().to_owned();
        has_pack |= name == pack::PACK_FILE;
        if name == pack::PACK_FILE {
            continue;
        }
        if name == bundle::EVENTS_FILE || name == bundle::HAR_FILE {
            // Request bodies a page compressed itself are text in them, one character per byte: searched
            // decoded too.
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).with_context(|| format!("cannot read {name} back"))?;
            visit(&name, &mut bytes.as_slice())?;
            for decoded in compressed_request_texts(&bytes) {
                visit(&format!("{name} (a compressed request body)"), &mut decoded.as_slice())?;
            }
            continue;
        }
        if !name.starts_with(bundle::RESOURCES_DIR) || entry.size() > MAX_DECODED_BODY_BYTES {
            visit(&name, &mut entry)?;
            continue;
        }
        // A body may be one a page compressed: searched as it is and decoded.
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).with_context(|| format!("cannot read {name} back"))?;
        visit(&name, &mut bytes.as_slice())?;
        if let Some(decoded) = decoded_if_compressed(&bytes) {
            visit(&name, &mut decoded.as_slice())?;
        }
    }
    if has_pack {
        let mut bundle = Bundle::open(path)?;
        let packed: Vec<String> = bundle.files()?.into_keys().filter(|name| pack::is_packed(name)).collect();
        for name in packed {
            let contents = bundle.read(&name)?;
            visit(&name, &mut contents.as_slice())?;
        }
    }
    Ok(())
}

/// What the request bodies a page compressed itself decode to, where a JSON document (`recording.har`) or
/// a file of JSON lines (`events.jsonl`) holds them as text ([`body::compressed_text`]): every string of it
/// is looked at, whatever field holds it. What does not parse holds none.
fn compressed_request_texts(bytes: &[u8]) -> Vec<Vec<u8>> {
    let documents: Vec<serde_json::Value> = match serde_json::from_slice(bytes) {
        Ok(document) => vec![document],
        Err(_) => bytes.split(|byte| *byte == b'\n').filter_map(|line| serde_json::from_slice(line).ok()).collect(),
    };
    let mut decoded = Vec::new();
    let mut values: Vec<&serde_json::Value> = documents.iter().collect();
    while let Some(value) = values.pop() {
        match value {
            serde_json::Value::String(text) => {
                decoded.extend(body::compressed_text(text, MAX_DECODED_BODY_BYTES).map(|(_, bytes)| bytes));
            }
            serde_json::Value::Array(items) => values.extend(items),
            serde_json::Value::Object(members) => values.extend(members.values()),
            _ => {}
        }
    }
    decoded
}

/// `bytes` decoded when they are a gzip or zlib stream by their first bytes (and decode).
fn decoded_if_compressed(bytes: &[u8]) -> Option<Vec<u8>> {
    body::decode_compressed(bytes, MAX_DECODED_BODY_BYTES).map(|(_, decoded)| decoded)
}

/// Writes `source`, redacted, into the empty directory `dest` as a complete bundle (indexed, valid).
///
/// Fails, writing nothing useful, when the bundle is not one this program can read or a credential is too
/// short to redact reliably.
pub fn redact_bundle(source: &mut Bundle, dest: &Path, suspects: &SuspectDecisions) -> Result<Redacted> {
    let manifest = source.manifest()?;
    let events = source.events()?;
    let har: Har = serde_json::from_slice(&source.read(bundle::HAR_FILE)?).context("recording.har does not parse")?;
    let storage: StorageFile =
        serde_json::from_slice(&source.read(bundle::STORAGE_FILE)?).context("storage.json does not parse")?;
    // The credentials typed, as the trajectory finds them: `Secrets::find` takes them from here, so that
    // the secrets module does not depend on the trajectory, which scrubs by the secrets' encodings.
    let credentials = trace_analysis::trajectory::derive(manifest.task.id.clone(), &events, None).credentials;
    let mut secrets = Secrets::find(source, &credentials, &events, &har, &storage)?;
    let mut summary = RedactionSummary::default();
    decide_suspects(source, &har, &storage, &mut secrets, suspects, &mut summary)?;
    // Listed where the person reads the export's outcome (stderr), by where each was found, never by value.
    for kept in secrets.kept() {
        tracing::warn!(
            "left as it is, not redacted: the {} {:?}, {}",
            kept.kind.as_str(),
            kept.name,
            kept.reason.describe()
        );
    }
    summary.secrets = secrets.counts();
    let replacer = Replacer::new(&secrets)?;
    let check = Check::new(&values_to_check(&events, &har, &storage))?;
    let mut redact = |bytes: Vec<u8>| {
        let (bytes, count) = replacer.replace(&bytes);
        summary.replacements += count;
        summary.files_changed += usize::from(count > 0);
        bytes
    };

    // Bodies first: where each one moves decides what the events and the HAR say.
    let mut index = BTreeMap::new();
    let mut moved = HashMap::new();
    let resources_prefix = format!("{}/", bundle::RESOURCES_DIR);
    let compressed = compressed_request_bodies(&har);
    for entry in manifest.files.iter().filter(|entry| entry.path.starts_with(&resources_prefix)) {
        let bytes = source.read(&entry.path)?;
        let bytes = match compressed.get(entry.path.as_str()) {
            // Redacted as the page wrote it, then compressed again as it was sent.
            Some(&encoding) => {
                let decoded = encoding.decode(&bytes, MAX_DECODED_BODY_BYTES).with_context(|| {
                    format!(
                        "the request body {} is compressed ({encoding:?}) and does not decode to at most \
                         {MAX_DECODED_BODY_BYTES} bytes: it cannot be searched for secrets; nothing was exported",
                        entry.path
                    )
                })?;
                let redacted = redact(decoded.clone());
                if redacted == decoded { bytes } else { encoding.encode(&redacted) }
            }
            // One compressed without a word of it in its headers is known by its bytes.
            None => match body::decode_compressed(&bytes, MAX_DECODED_BODY_BYTES) {
                Some((encoding, decoded)) => {
                    let redacted = redact(decoded.clone());
                    if redacted == decoded { bytes } else { encoding.encode(&redacted) }
                }
                None => redact(bytes),
            },
        };
        let written = write_file(dest, &bundle::resource_path(&trace_bundle::archive::sha256_hex(&bytes)), &bytes)?;
        moved.insert(entry.sha256.clone(), (written.sha256.clone(), written.size));
        index.insert(written.path.clone(), written);
    }
    let mut counts = manifest.counts.clone();
    // A snapshot pack is compressed: its files are redacted one by one instead, and packed anew on export.
    let rest = manifest.files.iter().filter(|entry| !entry.path.starts_with(&resources_prefix));
    let mut binary_replacements = 0;
    for entry in rest.filter(|entry| entry.path != pack::PACK_FILE) {
        let mut bytes = source.read(&entry.path)?;
        if entry.path == bundle::EVENTS_FILE {
            let (decoded, count) = redact_inside_events(&bytes, &replacer)?;
            binary_replacements += count;
            bytes = decoded;
        }
        if entry.path == bundle::HAR_FILE {
            let (decoded, count) = redact_inside_har(&bytes, &replacer)?;
            binary_replacements += count;
            bytes = decoded;
        }
        let bytes = redact(bytes);
        let bytes = match entry.path.as_str() {
            bundle::EVENTS_FILE => {
                let (bytes, new_counts) = move_event_bodies(&bytes, &moved)?;
                counts = new_counts;
                bytes
            }
            bundle::HAR_FILE => move_har_bodies(&bytes, &moved)?,
            _ => bytes,
        };
        index.insert(entry.path.clone(), write_file(dest, &entry.path, &bytes)?);
    }

    // The task's description or answer may quote a secret too.
    let mut redacted = parse_manifest(&redact(serde_json::to_vec(&manifest)?))?;
    summary.replacements += binary_replacements;
    redacted.files = index.into_values().collect();
    redacted.counts = counts;
    write_file(dest, bundle::MANIFEST_FILE, &serde_json::to_vec_pretty(&redacted)?)?;
    Ok(Redacted { summary, secrets, replacer, check })
}

/// The most a compressed request body may decode to: it is redacted decoded, in memory.
const MAX_DECODED_BODY_BYTES: u64 = 256 << 20;

/// The request bodies a page compressed before sending them, by their file, with how.
fn compressed_request_bodies(har: &Har) -> HashMap<&str, ContentEncoding> {
    har.log
        .entries
        .iter()
        .filter_map(|entry| {
            let file = entry.request.post_data.as_ref()?.file.as_deref()?;
            Some((file, ContentEncoding::of_request(&entry.request)?))
        })
        .collect()
}

/// `events.jsonl` with the secrets replaced inside what its text hides them in: each binary WebSocket
/// frame's decoded payload, and each request body a page compressed itself, which DevTools gives as text
/// of one character per byte ([`redact_compressed_text`]).
///
/// A binary frame is redacted decoded: kept in base64, a secret's own base64 forms could be replaced only
/// up to the characters it shares with its neighbours (a byte of the secret left at each end); decoded, its
/// stand-in is whole, the same in every frame (a replayed page's id is matched against it), and of the
/// secret's length (see [`Replacer::replace_in_binary`]). Returns the file as it was when nothing inside
/// held a secret.
fn redact_inside_events(bytes: &[u8], replacer: &Replacer) -> Result<(Vec<u8>, usize)> {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD;
    let mut events = parse_events(bytes).context("events.jsonl does not parse")?;
    let mut count = 0;
    for record in &mut events {
        if let EventKind::Request(request) = &mut record.event.kind
            && let Some(text) = request.post_data.as_mut()
        {
            count += redact_compressed_text(text, replacer);
        }
        let EventKind::WebSocket(frame) = &mut record.event.kind else { continue };
        let Some(data) = frame.data.as_mut().filter(|_| frame.opcode == Some(2)) else { continue };
        let Ok(payload) = engine.decode(data.as_bytes()) else { continue };
        let (redacted, found) = replacer.replace_in_binary(&payload);
        if found > 0 {
            *data = engine.encode(redacted);
            count += found;
        }
    }
    if count == 0 {
        return Ok((bytes.to_vec(), 0));
    }
    let mut out = Vec::with_capacity(bytes.len());
    for record in &events {
        serde_json::to_writer(&mut out, record)?;
        out.push(b'\n');
    }
    Ok((out, count))
}

/// `recording.har` with the secrets replaced inside each request body a page compressed itself
/// ([`redact_compressed_text`]); the file as it was when none held one.
fn redact_inside_har(bytes: &[u8], replacer: &Replacer) -> Result<(Vec<u8>, usize)> {
    let mut har: Har = serde_json::from_slice(bytes).context("recording.har does not parse")?;
    let mut count = 0;
    for entry in &mut har.log.entries {
        if let Some(text) = entry.request.post_data.as_mut().and_then(|post| post.text.as_mut()) {
            count += redact_compressed_text(text, replacer);
        }
    }
    if count == 0 {
        return Ok((bytes.to_vec(), 0));
    }
    Ok((serde_json::to_vec_pretty(&har)?, count))
}

/// A request body's text that stands for a compressed stream ([`body::compressed_text`]: a page gzipped
/// it, and DevTools gave it one character per byte), with its secrets replaced in what it decodes to and
/// compressed again the same way; how many were. Text of anything else is left to the replacement of the
/// whole file.
fn redact_compressed_text(text: &mut String, replacer: &Replacer) -> usize {
    let Some((encoding, decoded)) = body::compressed_text(text, MAX_DECODED_BODY_BYTES) else { return 0 };
    let (redacted, found) = replacer.replace(&decoded);
    if found > 0 {
        *text = body::latin1_text(&encoding.encode(&redacted));
    }
    found
}

/// `events.jsonl` with each body event pointing at where its body moved, and the counts of the new events.
fn move_event_bodies(bytes: &[u8], moved: &HashMap<String, (String, u64)>) -> Result<(Vec<u8>, Counts)> {
    let mut events = parse_events(bytes).context("events.jsonl does not parse after redaction")?;
    let mut out = Vec::with_capacity(bytes.len());
    for record in &mut events {
        if let EventKind::Body(body) = &mut record.event.kind
            && let Some((sha256, size)) = moved.get(&body.sha256)
        {
            body.sha256.clone_from(sha256);
            body.size = *size;
        }
        serde_json::to_writer(&mut out, record)?;
        out.push(b'\n');
    }
    Ok((out, Counts::of(&events)))
}

/// `recording.har` with each `_file` pointing at where its body moved, and the new sizes.
fn move_har_bodies(bytes: &[u8], moved: &HashMap<String, (String, u64)>) -> Result<Vec<u8>> {
    let mut har: Har = serde_json::from_slice(bytes).context("recording.har does not parse after redaction")?;
    let resources_prefix = format!("{}/", bundle::RESOURCES_DIR);
    let new_place = |file: &str| {
        let old = file.strip_prefix(&resources_prefix)?;
        moved.get(old).map(|(sha256, size)| (bundle::resource_path(sha256), *size))
    };
    for entry in &mut har.log.entries {
        let content = &mut entry.response.content;
        if let Some((file, size)) = content.file.as_deref().and_then(new_place) {
            content.file = Some(file);
            content.size = size as i64;
        }
        if let Some(post_data) = entry.request.post_data.as_mut()
            && let Some((file, _)) = post_data.file.as_deref().and_then(new_place)
        {
            post_data.file = Some(file);
        }
    }
    Ok(serde_json::to_vec_pretty(&har)?)
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<FileEntry> {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let file = File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = HashingWriter::new(BufWriter::new(file));
    out.write_all(bytes).with_context(|| format!("cannot write {}", path.display()))?;
    let (buffered, size, sha256) = out.finish();
    buffered.into_inner().map_err(|e| e.into_error())?;
    Ok(FileEntry { path: name.to_owned(), size, sha256 })
}

#[cfg(test)]
mod tests {
    use trace_manifest::report::SecretKind;

    use super::*;

    fn secrets(values: &[(SecretKind, &str, &str)]) -> Secrets {
        let mut secrets = Secrets::default();
        for (kind, name, value) in values {
            secrets.add(*kind, name, value);
        }
        secrets
    }

    #[test]
    fn every_encoded_form_of_a_secret_becomes_its_one_placeholder() {
        let secrets = secrets(&[
            (SecretKind::Credential, "password", "p&ss \"word\"!"),
            (SecretKind::Cookie, "session", "abcdef123456"),
        ]);
        let replacer = Replacer::new(&secrets).unwrap();
        let text = concat!(
            "typed p&ss \"word\"! | form p%26ss+%22word%22%21 | url p%26ss%20%22word%22%21 | ",
            "html p&amp;ss &quot;word&quot;! | json p&ss \\\"word\\\"! | cookie session=abcdef123456;"
        );
        let (out, count) = replacer.replace(text.as_bytes());
        let out = String::from_utf8(out).unwrap();
        let password = &secrets.get(0).placeholder;
        assert_eq!(
            out,
            format!(
                "typed {password} | form {password} | url {password} | html {password} | json {password} | \
                 cookie session=trace-redacted-cookie-session-2;"
            )
        );
        assert_eq!(count, 6);
        assert_eq!(replacer.find_in(out.as_bytes()).unwrap(), None);
        assert_eq!(replacer.find_in(&b"...abcdef123456..."[..]).unwrap(), Some(1));
    }

    /// A binary frame (a kernel message: offsets, then JSON parts) keeps its length and every offset; its
    /// secret becomes the one stand-in every frame holds, with nothing of the secret left at its ends.
    #[test]
    fn a_binary_frames_secret_is_replaced_in_its_decoded_payload_by_a_stand_in_of_its_length() {
        use base64::Engine;
        let engine = base64::engine::general_purpose::STANDARD;
        let session = "ca0facde-d789-48de-b6a7-3774adfbb3bd";
        let secrets = secrets(&[(SecretKind::UrlParameter, "session_id", session)]);
        let replacer = Replacer::new(&secrets).unwrap();
        let payload = |session: &str, pad: usize| {
            [&[2u8, 0, 0, 0, 0, 0, 0, 0, 24, 0, 0, 0, 0, 0, 0, 0][..], &vec![b'x'; pad], session.as_bytes(), b"}"]
                .concat()
        };
        let frame = |pad: usize| {
            let data = engine.encode(payload(session, pad));
            format!(
                r#"{{"id":{pad},"ts":1.0,"type":"websocket","request_id":"w","op":"sent","opcode":2,"data":"{data}"}}"#
            )
        };
        let events = (0..3).map(frame).collect::<Vec<_>>().join("\n") + "\n";
        let (out, count) = redact_inside_events(events.as_bytes(), &replacer).unwrap();
        assert_eq!(count, 3);
        let stand_in = "trace-redacted-url-parameter-session";
        assert_eq!(stand_in.len(), session.len());
        for (pad, record) in parse_events(&out).unwrap().iter().enumerate() {
            let EventKind::WebSocket(frame) = &record.event.kind else { panic!("{record:?}") };
            let decoded = engine.decode(frame.data.as_deref().unwrap()).unwrap();
            assert_eq!(decoded, payload(stand_in, pad), "at every alignment");
        }
        assert_eq!(replacer.find_in(&out[..]).unwrap(), None);
        // A file with no secret in a frame is left byte for byte.
        let plain = frame(0).replace(&engine.encode(payload(session, 0)), &engine.encode(b"hello"));
        assert_eq!(redact_inside_events(plain.as_bytes(), &replacer).unwrap(), (plain.into_bytes(), 0));
    }

    /// Issue #11: what no enumerated form holds (a text node's `&amp;` beside a bare `"`, HTML numeric
    /// references, `encodeURI`) the secret's pattern replaces, and both searches find, across the chunks a
    /// stream is read in too.
    #[test]
    fn what_no_enumerated_form_holds_is_replaced_by_the_pattern_and_found_by_both_searches() {
        let typed = "p&ss \"wörd\"@1";
        let secrets = secrets(&[(SecretKind::Credential, "password", typed)]);
        let replacer = Replacer::new(&secrets).unwrap();
        let text = concat!(
            "node p&amp;ss \"wörd\"@1 | numeric p&#38;ss &#34;w&#246;rd&#34;&#64;1 | ",
            "uri p&ss%20%22w%C3%B6rd%22@1 | json p&ss \\\"w\\u00f6rd\\\"@1"
        );
        let (out, count) = replacer.replace(text.as_bytes());
        let password = &secrets.get(0).placeholder;
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("node {password} | numeric {password} | uri {password} | json {password}")
        );
        assert_eq!(count, 4);

        let mut stream = vec![b'x'; SEARCH_CHUNK_BYTES - 5];
        stream.extend_from_slice(b"p&#38;ss &#34;w&#246;rd&#34;&#64;1");
        assert_eq!(replacer.find_in(&stream[..]).unwrap(), Some(0));
        let check = Check::new(&[("credential", typed.to_owned())]).unwrap();
        assert_eq!(check.find_in(&stream[..]).unwrap(), Some("credential"));
        assert_eq!(check.find_in(&stream[..SEARCH_CHUNK_BYTES]).unwrap(), None);
    }

    #[test]
    fn a_zip_that_still_holds_a_secret_is_refused_by_name_not_by_value() {
        let secrets = secrets(&[(SecretKind::Header, "authorization", "tok-0123456789")]);
        let redacted = Redacted {
            summary: RedactionSummary::default(),
            replacer: Replacer::new(&secrets).unwrap(),
            secrets,
            check: Check::new(&[]).unwrap(),
        };
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut zip = zip::ZipWriter::new(file.reopen().unwrap());
        for (name, bytes) in [("events.jsonl", &b"{}"[..]), ("dom/000001.html", b"<p>Bearer tok-0123456789</p>")] {
            zip.start_file(name, zip::write::SimpleFileOptions::default()).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
        let error = redacted.verify_zip(file.path()).unwrap_err().to_string();
        assert!(error.contains("dom/000001.html") && error.contains("header \"authorization\""), "{error}");
        assert!(!error.contains("tok-0123456789"), "{error}");
    }

    /// A redaction whose rules chose nothing, and whose final search still looks for a cookie's value.
    fn checking_a_cookie_no_rule_chose() -> Redacted {
        Redacted {
            summary: RedactionSummary::default(),
            replacer: Replacer::new(&Secrets::default()).unwrap(),
            secrets: Secrets::default(),
            check: Check::new(&[("cookie", "q7Zx9-sid".to_owned())]).unwrap(),
        }
    }

    #[test]
    fn the_final_search_looks_inside_the_snapshot_pack() {
        let redacted = checking_a_cookie_no_rule_chose();
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut zip = zip::ZipWriter::new(file.reopen().unwrap());
        let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        zip.start_file(pack::PACK_FILE, stored).unwrap();
        let snapshot = b"<p>session q7Zx9-sid</p>";
        let files = [("dom/000001.html".to_owned(), snapshot.len() as u64)];
        pack::write_pack(&mut zip, &files, |_, sink| sink.write_all(snapshot).map(|()| snapshot.len() as u64)).unwrap();
        zip.finish().unwrap();
        let error = redacted.verify_zip(file.path()).unwrap_err().to_string();
        assert!(error.contains("dom/000001.html") && error.contains("cookie value"), "{error}");
    }

    /// A WACZ of two WARC records (a warcinfo, a response with `payload`), each a gzip member, the WARC
    /// stored in the zip as the WACZ's writer stores it.
    fn wacz_with_payload(payload: &[u8]) -> tempfile::NamedTempFile {
        use flate2::{Compression, write::GzEncoder};
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut zip = zip::ZipWriter::new(file.reopen().unwrap());
        let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        zip.start_file("archive/data.warc.gz", stored).unwrap();
        for block in [b"software: test\r\n".to_vec(), [&b"HTTP/1.1 200 OK\r\n\r\n"[..], payload].concat()] {
            let head = format!("WARC/1.1\r\nContent-Length: {}\r\n\r\n", block.len());
            let mut gzip = GzEncoder::new(Vec::new(), Compression::default());
            gzip.write_all(&[head.as_bytes(), &block, b"\r\n\r\n"].concat()).unwrap();
            zip.write_all(&gzip.finish().unwrap()).unwrap();
        }
        zip.start_file("pages/pages.jsonl", zip::write::SimpleFileOptions::default()).unwrap();
        zip.write_all(b"{}\n").unwrap();
        zip.finish().unwrap();
        file
    }

    /// A WACZ's records are gzip members the zip stores as they are: the zip's search sees only compressed
    /// bytes and passes a secret by; the WACZ's decompresses each record, and decodes a payload that is
    /// itself gzip.
    #[test]
    fn the_final_search_of_a_wacz_looks_inside_its_compressed_records() {
        let redacted = checking_a_cookie_no_rule_chose();
        // Text long enough that deflate codes it (a few bytes it would store as they are).
        let page = format!("<p>{}</p><p>session q7Zx9-sid</p>", "lorem ipsum dolor ".repeat(40));
        let holding = wacz_with_payload(page.as_bytes());
        redacted.verify_zip(holding.path()).expect("blind to what is compressed: why the WACZ has its own search");
        let error = redacted.verify_wacz(holding.path()).unwrap_err().to_string();
        assert!(error.contains("archive/data.warc.gz (record 2)") && error.contains("cookie value"), "{error}");
        assert!(!error.contains("q7Zx9-sid"), "{error}");

        let compressed = ContentEncoding::Gzip.encode(page.as_bytes());
        let error = redacted.verify_wacz(wacz_with_payload(&compressed).path()).unwrap_err().to_string();
        assert!(error.contains("archive/data.warc.gz (record 2)"), "{error}");

        redacted.verify_wacz(wacz_with_payload(b"<p>nothing to see</p>").path()).unwrap();
    }

    /// Issue #45: the export's own search read `events.jsonl` and `recording.har` as text, where a body a
    /// page gzipped itself is text of one character per byte: it said the zip held no secret while the
    /// body gunzipped to one. It decodes such bodies too.
    #[test]
    fn the_final_search_decodes_the_compressed_bodies_the_documents_hold_as_text() {
        let redacted = checking_a_cookie_no_rule_chose();
        let compressed = body::latin1_text(&ContentEncoding::Gzip.encode(br#"{"session":"q7Zx9-sid"}"#));
        let event = serde_json::json!({
            "id": 0, "ts": 1.0, "type": "request", "request_id": "1", "url": "http://h/api", "method": "POST",
            "headers": [], "post_data": compressed,
        });
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut zip = zip::ZipWriter::new(file.reopen().unwrap());
        zip.start_file(bundle::EVENTS_FILE, zip::write::SimpleFileOptions::default()).unwrap();
        zip.write_all(format!("{event}\n").as_bytes()).unwrap();
        zip.finish().unwrap();
        let error = redacted.verify_zip(file.path()).unwrap_err().to_string();
        assert!(
            error.contains("events.jsonl (a compressed request body)") && error.contains("cookie value"),
            "{error}"
        );
    }

    #[test]
    fn the_final_search_catches_what_no_rule_chose() {
        // The rules chose nothing; the values chosen apart from them (a cookie's) are still searched for.
        let redacted = checking_a_cookie_no_rule_chose();
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut zip = zip::ZipWriter::new(file.reopen().unwrap());
        zip.start_file("recording.har", zip::write::SimpleFileOptions::default()).unwrap();
        zip.write_all(b"{\"value\":\"q7Zx9-sid\"}").unwrap();
        zip.finish().unwrap();
        let error = redacted.verify_zip(file.path()).unwrap_err().to_string();
        assert!(error.contains("recording.har") && error.contains("cookie value"), "{error}");
        assert!(!error.contains("q7Zx9-sid"), "{error}");
    }
}
