//! Redaction for sharing: every secret of a bundle (see [`secrets`]) replaced by its placeholder in every
//! file, in every encoding it appears in (as is, form- and percent-encoded, JSON- and HTML-escaped), and a
//! search of the written zip that fails loudly if any original is left.
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
use trace_manifest::archive::{Bundle, HashingWriter, parse_events, parse_manifest};
use trace_manifest::bundle::{self, Counts, FileEntry, StorageFile};
use trace_manifest::event::EventKind;
use trace_manifest::har::Har;
use trace_manifest::pack;

use trace_analysis::secrets::{Secrets, encoded_forms, request_body_text, values_to_check};
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
    let mut body_text = |post: &trace_manifest::har::PostData| request_body_text(source, post);
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

/// Every encoded form of every secret, and what replaces it.
pub struct Replacer {
    automaton: AhoCorasick,
    /// The same patterns with standard semantics, which streaming search needs.
    finder: AhoCorasick,
    /// Per pattern: the secret it is a form of.
    secret_of_pattern: Vec<usize>,
    /// Per pattern: the placeholder that replaces it.
    replacement_of_pattern: Vec<String>,
}

impl Replacer {
    pub fn new(secrets: &Secrets) -> Result<Replacer> {
        let mut patterns = Vec::new();
        let mut secret_of_pattern = Vec::new();
        let mut replacement_of_pattern = Vec::new();
        for (index, secret) in secrets.iter().enumerate() {
            for encoded in encoded_forms(&secret.value, &secret.placeholder) {
                patterns.push(encoded.form);
                secret_of_pattern.push(index);
                replacement_of_pattern.push(encoded.stand_in);
            }
        }
        // Leftmost-longest: a token inside a longer secret (a cookie header holding a session id) is replaced
        // as part of the longer one.
        let automaton = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&patterns)?;
        let finder = AhoCorasick::new(&patterns)?;
        Ok(Replacer { automaton, finder, secret_of_pattern, replacement_of_pattern })
    }

    /// `bytes` with every secret replaced, and how many were.
    pub fn replace(&self, bytes: &[u8]) -> (Vec<u8>, usize) {
        let mut count = 0;
        let mut out = Vec::with_capacity(bytes.len());
        self.automaton.replace_all_with_bytes(bytes, &mut out, |found, _, out| {
            count += 1;
            out.extend_from_slice(self.replacement_of_pattern[found.pattern().as_usize()].as_bytes());
            true
        });
        (out, count)
    }

    /// The index of the first secret found in `reader`, if any.
    pub fn find_in(&self, reader: impl Read) -> Result<Option<usize>> {
        if self.secret_of_pattern.is_empty() {
            return Ok(None);
        }
        match self.finder.stream_find_iter(reader).next() {
            Some(found) => Ok(Some(self.secret_of_pattern[found?.pattern().as_usize()])),
            None => Ok(None),
        }
    }
}

/// The final search's own list: every encoded form of every value `values_to_check` chose, which is not
/// the list the replacement worked from, so that what slipped past the rules that chose the secrets is
/// still caught.
struct Check {
    finder: AhoCorasick,
    /// Per pattern: what the value was (`credential`, `cookie`).
    what_of_pattern: Vec<&'static str>,
}

impl Check {
    fn new(values: &[(&'static str, String)]) -> Result<Check> {
        let mut patterns = Vec::new();
        let mut what_of_pattern = Vec::new();
        for (what, value) in values {
            for encoded in encoded_forms(value, "") {
                patterns.push(encoded.form);
                what_of_pattern.push(*what);
            }
        }
        Ok(Check { finder: AhoCorasick::new(&patterns)?, what_of_pattern })
    }

    fn find_in(&self, reader: impl Read) -> Result<Option<&'static str>> {
        if self.what_of_pattern.is_empty() {
            return Ok(None);
        }
        match self.finder.stream_find_iter(reader).next() {
            Some(found) => Ok(Some(self.what_of_pattern[found?.pattern().as_usize()])),
            None => Ok(None),
        }
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

    /// Searches every entry of the zip at `path`, decompressed (the snapshot pack's files unpacked), and
    /// every entry's name, for every form of every original secret. Names the first one found (by kind and
    /// name, never by value).
    pub fn verify_zip(&self, path: &Path) -> Result<()> {
        // Two passes, each streaming every file: a body may be larger than memory.
        each_file(path, |name, contents| {
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
        each_file(path, |name, contents| {
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

/// Calls `visit` with each file of the zip at `path` and a reader of its contents: each entry streamed as
/// it decompresses, except the snapshot pack, whose files are visited one by one, unpacked.
fn each_file(path: &Path, mut visit: impl FnMut(&str, &mut dyn Read) -> Result<()>) -> Result<()> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file))
        .with_context(|| format!("{} is not a readable zip", path.display()))?;
    let mut has_pack = false;
    for index in 0..zip.len() {
        let mut entry = zip.by_index(index)?;
        let name = entry.name().to_owned();
        has_pack |= name == pack::PACK_FILE;
        if name != pack::PACK_FILE {
            visit(&name, &mut entry)?;
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
    let mut secrets = Secrets::find(source, &events, &har, &storage)?;
    let mut summary = RedactionSummary::default();
    decide_suspects(source, &har, &storage, &mut secrets, suspects, &mut summary)?;
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
    for entry in manifest.files.iter().filter(|entry| entry.path.starts_with(&resources_prefix)) {
        let bytes = redact(source.read(&entry.path)?);
        let written = write_file(dest, &bundle::resource_path(&trace_manifest::archive::sha256_hex(&bytes)), &bytes)?;
        moved.insert(entry.sha256.clone(), (written.sha256.clone(), written.size));
        index.insert(written.path.clone(), written);
    }
    let mut counts = manifest.counts.clone();
    // A snapshot pack is compressed: its files are redacted one by one instead, and packed anew on export.
    let rest = manifest.files.iter().filter(|entry| !entry.path.starts_with(&resources_prefix));
    for entry in rest.filter(|entry| entry.path != pack::PACK_FILE) {
        let bytes = redact(source.read(&entry.path)?);
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
    redacted.files = index.into_values().collect();
    redacted.counts = counts;
    write_file(dest, bundle::MANIFEST_FILE, &serde_json::to_vec_pretty(&redacted)?)?;
    Ok(Redacted { summary, secrets, replacer, check })
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
        zip.start_file(pack::PACK_FILE, zip::write::SimpleFileOptions::default()).unwrap();
        let snapshot = b"<p>session q7Zx9-sid</p>";
        let files = [("dom/000001.html".to_owned(), snapshot.len() as u64)];
        pack::write_pack(&mut zip, &files, |_, sink| sink.write_all(snapshot).map(|()| snapshot.len() as u64)).unwrap();
        zip.finish().unwrap();
        let error = redacted.verify_zip(file.path()).unwrap_err().to_string();
        assert!(error.contains("dom/000001.html") && error.contains("cookie value"), "{error}");
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
