//! A recording as the viewer shows it, read once when first opened and kept: the manifest, the steps (the
//! trajectory the bundle was processed into, else derived from its events, by `trace_analysis`), the
//! network entries (the bundle's HAR, else built from its events) with how replay answers each, the
//! screenshots and DOM snapshots with when they were taken, the checkpoints with the evidence that
//! satisfies each, the credentials, the console messages, the storage snapshots and the ignore list. Files
//! (screenshots, bodies, DOM snapshots, accessibility trees) stay in the bundle, a zip read in place or a
//! directory, and are read when a page asks for one.
//!
//! What the viewer hands out of a bundle goes through [`Recording::file`]: only files in its folders, never
//! a top-level document (`credentials.json` holds the values behind the credentials' placeholders,
//! `events.jsonl` what was typed into every field, `recording.har` the request bodies sent), and with the
//! credentials' values replaced by their placeholders in request bodies and DOM snapshots. What one
//! request reads is capped by the file's real size in the bundle, never by the size the HAR declares.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Mutex;

use aho_corasick::{AhoCorasick, MatchKind};
use anyhow::{Context, Result};
use trace_analysis::answering::{self, HowAnswered};
use trace_analysis::canonical::Clocks;
use trace_analysis::evidence::{self, Evidence};
use trace_analysis::request_state::RequestState;
use trace_analysis::{har, ignore, trajectory};
use trace_bundle::archive::{Bundle, ZipLimits};
use trace_manifest::bundle::{BundleManifest, HAR_FILE, STORAGE_FILE, StorageFile, is_safe_relative_path};
use trace_manifest::event::{ConsoleMessage, EventKind, Viewport};
use trace_manifest::har::{Creator, Entry, Har};
use trace_manifest::postprocess::{CHECKPOINTS_FILE, Checkpoint, Predicate};
use trace_manifest::time_fmt::millis_from_rfc3339;
use trace_manifest::trajectory::{Credential, ToolCall};

pub struct Recording {
    pub manifest: BundleManifest,
    pub steps: Vec<ToolCall>,
    /// Network entries in time order, each with its start in milliseconds since the Unix epoch.
    pub entries: Vec<(f64, Entry)>,
    /// How replay answers each network entry, in the entries' order.
    pub answering: Vec<HowAnswered>,
    /// Screenshots in time order: when each was taken (epoch milliseconds), its tab, file and viewport.
    pub screenshots: Vec<Screenshot>,
    /// DOM snapshot file → what it shows and when.
    pub snapshots: HashMap<String, Snapshot>,
    /// The processed checkpoints, when the bundle was processed, each with the evidence that satisfies it
    /// in the recording.
    pub checkpoints: Option<Vec<(Checkpoint, Vec<Proof>)>>,
    pub credentials: Vec<Credential>,
    /// The pages' console messages, each with its time in milliseconds since the Unix epoch.
    pub console: Vec<(f64, ConsoleMessage)>,
    /// Cookies and web storage at the start and the end, when the bundle has them.
    pub storage: Option<StorageFile>,
    /// The ignore list replay applies: URL patterns it fails at once instead of answering.
    pub ignored: Vec<String>,
    /// Network entries by URL (fragment left out), in time order: the recorded responses a DOM snapshot's
    /// stylesheets and images are taken from.
    by_url: HashMap<String, Vec<usize>>,
    /// Every file of the bundle with its real size, as it was when opened: what a file's size is taken from,
    /// never the HAR's `bodySize` or `content.size`, which a bundle may declare as it likes.
    sizes: BTreeMap<String, u64>,
    /// Files of the bundle that are a request's body: what a person typed was sent in one.
    request_body_files: HashSet<String>,
    /// The credentials' values, found to be replaced by their placeholders.
    credential_values: Option<CredentialValues>,
    bundle: Mutex<Bundle>,
}

/// The start of a file or a body: at most the bytes asked for, and whether that is all of it.
pub struct Excerpt {
    pub bytes: Vec<u8>,
    pub whole: bool,
}

pub struct Screenshot {
    pub ts: f64,
    pub tab_id: Option<i64>,
    pub file: String,
    pub viewport: Option<Viewport>,
}

pub struct Snapshot {
    pub ts: f64,
    /// The document's URL, which its relative links resolve against.
    pub url: String,
    /// Its accessibility tree (`dom/<id>.a11y.json`), when one was captured.
    pub accessibility_file: Option<String>,
}

/// The recorded responses as a page loaded at one time had them, for rendering its snapshot.
pub struct ResponsesAt<'r> {
    recording: &'r Recording,
    at: f64,
}

impl super::snapshot::Responses for ResponsesAt<'_> {
    fn response(&self, url: &str, most: usize) -> Option<(String, Vec<u8>)> {
        self.recording.recorded_response(url, self.at, most)
    }
}

/// One piece of the recording that satisfies a checkpoint.
pub struct Proof {
    /// What it is, in words: the request and its status, the page reached, the page showing the text.
    pub what: String,
    /// The step it happened during.
    pub step: Option<usize>,
    /// The network entry, for a request.
    pub entry: Option<usize>,
}

/// Request bodies stored apart up to this size (the file's, not what the HAR declares) are read to tell how
/// replay answers their requests...
const MAX_READ_REQUEST_BODY: u64 = 4 << 20;
/// ...and up to this much of them in all: a bundle may name one large file as the body of many requests.
const MAX_READ_REQUEST_BODIES: u64 = 64 << 20;

/// The most of one file the viewer reads to serve it, render it (a DOM snapshot) or outline it (an
/// accessibility tree): a request holds what it read until it is answered.
pub const MAX_FILE_BYTES: usize = 64 << 20;

/// The most pieces of evidence listed per checkpoint.
const MAX_PROOFS: usize = 5;

impl Recording {
    pub fn open(path: &Path) -> Result<Recording> {
        let mut bundle = Bundle::open_with_limits(path, ZipLimits::default())
            .with_context(|| format!("cannot open the bundle {}", path.display()))?;
        let manifest = bundle.manifest()?;
        let events = bundle.events().context("the bundle's events")?;
        let (steps, credentials) = trajectory::of_bundle(&mut bundle)?;
        let har: Har = if bundle.contains(HAR_FILE) {
            bundle.har().with_context(|| format!("{HAR_FILE} cannot be read"))?
        } else {
            let creator = Creator { name: "trace-host".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() };
            har::build(creator, None, &events)
        };
        let mut entries: Vec<(f64, Entry)> = har
            .log
            .entries
            .into_iter()
            .map(|entry| (millis_from_rfc3339(&entry.started_date_time).unwrap_or(0.0), entry))
            .collect();
        entries.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut screenshots: Vec<Screenshot> = events
            .iter()
            .filter_map(|record| match &record.event.kind {
                EventKind::Screenshot(shot) => Some(Screenshot {
                    ts: record.event.ts,
                    tab_id: record.event.tab_id,
                    file: shot.file.clone(),
                    viewport: shot.viewport,
                }),
                _ => None,
            })
            .collect();
        screenshots.sort_by(|a, b| a.ts.total_cmp(&b.ts));
        let snapshots = events
            .iter()
            .filter_map(|record| match &record.event.kind {
                EventKind::DomSnapshot(snapshot) => Some((
                    snapshot.file.clone(),
                    Snapshot {
                        ts: record.event.ts,
                        url: snapshot.url.clone(),
                        accessibility_file: snapshot.accessibility_file.clone(),
                    },
                )),
                _ => None,
            })
            .collect();
        let console = events
            .iter()
            .filter_map(|record| match &record.event.kind {
                EventKind::Console(message) => Some((record.event.ts, message.clone())),
                _ => None,
            })
            .collect();
        let storage = if bundle.contains(STORAGE_FILE) {
            Some(
                serde_json::from_slice(&bundle.read(STORAGE_FILE)?)
                    .with_context(|| format!("{STORAGE_FILE} does not parse"))?,
            )
        } else {
            None
        };
        let ignored = ignore::of_bundle(&mut bundle, &events)?;
        let checkpoints: Option<Vec<Checkpoint>> = if bundle.contains(CHECKPOINTS_FILE) {
            serde_json::from_slice(&bundle.read(CHECKPOINTS_FILE)?).ok()
        } else {
            None
        };
        let checkpoints = match checkpoints {
            Some(checkpoints) => {
                let evidence =
                    Evidence::load_with_events(&mut bundle, events.clone()).context("the recording's evidence")?;
                let proven = checkpoints
                    .into_iter()
                    .map(|checkpoint| {
                        let proofs = proofs(&checkpoint.predicate, &evidence, &steps, &entries);
                        (checkpoint, proofs)
                    })
                    .collect();
                Some(proven)
            }
            None => None,
        };
        // The sizes the files have, which a bundle cannot misstate as it can the HAR's `bodySize`.
        let sizes = bundle.files().context("the bundle's files")?;
        let answering = answering_of(&mut bundle, &sizes, &manifest, &entries);
        let request_body_files =
            entries.iter().filter_map(|(_, entry)| entry.request.post_data.as_ref()?.file.clone()).collect();
        let credential_values = CredentialValues::of(&credentials);
        let mut by_url: HashMap<String, Vec<usize>> = HashMap::new();
        for (index, (_, entry)) in entries.iter().enumerate() {
            by_url.entry(without_fragment(&entry.request.url).to_owned()).or_default().push(index);
        }
        Ok(Recording {
            manifest,
            steps,
            entries,
            answering,
            screenshots,
            snapshots,
            checkpoints,
            by_url,
            credentials,
            console,
            storage,
            ignored,
            sizes,
            request_body_files,
            credential_values,
            bundle: Mutex::new(bundle),
        })
    }

    /// A file of the bundle as the viewer may show it, as [`Recording::file_start`] gives it, when it is at
    /// most [`MAX_FILE_BYTES`] (else an error saying so).
    pub fn file(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let too_large = || {
            let most = MAX_FILE_BYTES >> 20;
            anyhow::anyhow!("{name} is larger than the {most} MiB the viewer reads of a file; it is in the bundle")
        };
        // Refused before any of it is read; `file_start` stops at the limit should it have grown since.
        if is_shown(name) && self.sizes.get(name).is_some_and(|&size| size > MAX_FILE_BYTES as u64) {
            return Err(too_large());
        }
        let Some(read) = self.file_start(name, MAX_FILE_BYTES)? else { return Ok(None) };
        if !read.whole {
            return Err(too_large());
        }
        Ok(Some(read.bytes))
    }

    /// A file of the bundle as the viewer may show it, its first `most` bytes at most: `None` unless `name`
    /// is a file in one of the bundle's folders (screenshots, DOM snapshots, bodies). Never a path that
    /// leaves the bundle, nor a top-level document: those hold the credentials' values
    /// (`credentials.json`), what was typed (`events.jsonl`) and the request bodies (`recording.har`), and
    /// the pages show what they say with each secret as its placeholder. A request body or a DOM snapshot
    /// comes with the credentials' values replaced by their placeholders.
    pub fn file_start(&self, name: &str, most: usize) -> Result<Option<Excerpt>> {
        if !is_shown(name) {
            return Ok(None);
        }
        let mut bundle = self.bundle.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !bundle.contains(name) {
            return Ok(None);
        }
        // One byte more than asked tells whether there is more, without reading any further.
        let mut bytes = bundle.read_start(name, most.saturating_add(1))?;
        drop(bundle);
        let whole = bytes.len() <= most;
        bytes.truncate(most);
        if let Some(values) = &self.credential_values
            && (self.request_body_files.contains(name) || name.starts_with("dom/"))
        {
            // A value the cut goes through would be left half shown: the start ends before any could begin.
            if !whole {
                bytes.truncate(bytes.len().saturating_sub(values.longest));
            }
            bytes = self.without_credentials(&bytes);
        }
        Ok(Some(Excerpt { bytes, whole }))
    }

    /// `bytes` with each credential's value (as typed, form-encoded or JSON-escaped) replaced by its
    /// placeholder.
    pub fn without_credentials(&self, bytes: &[u8]) -> Vec<u8> {
        match &self.credential_values {
            Some(values) => values.finder.replace_all_bytes(bytes, &values.placeholders),
            None => bytes.to_vec(),
        }
    }

    /// The recorded response to a GET of `url` (fragment left out) that a page loaded at `at` (epoch
    /// milliseconds) had: the latest successful one started by then, else the first. Its MIME type and body,
    /// when the body is at most `most` bytes.
    pub fn recorded_response(&self, url: &str, at: f64, most: usize) -> Option<(String, Vec<u8>)> {
        let answered: Vec<usize> = self
            .by_url
            .get(without_fragment(url))?
            .iter()
            .copied()
            .filter(|&index| {
                let entry = &self.entries[index].1;
                entry.request.method == "GET" && (200..300).contains(&entry.response.status)
            })
            .collect();
        let chosen = *answered.iter().rev().find(|&&index| self.entries[index].0 <= at).or(answered.first())?;
        let body = self.response_body(chosen, most).ok()??;
        body.whole.then(|| (self.entries[chosen].1.response.content.mime_type.clone(), body.bytes))
    }

    /// The response body of network entry `index`, its first `most` bytes at most: stored apart in the
    /// bundle, or inline in the HAR (as text, or base64 when its `encoding` says so). `None` when none was
    /// recorded.
    pub fn response_body(&self, index: usize, most: usize) -> Result<Option<Excerpt>> {
        let Some((_, entry)) = self.entries.get(index) else { return Ok(None) };
        let content = &entry.response.content;
        let start =
            |bytes: &[u8]| Excerpt { bytes: bytes[..bytes.len().min(most)].to_vec(), whole: bytes.len() <= most };
        Ok(match (&content.file, &content.text) {
            (Some(file), _) => self.file_start(file, most)?,
            (None, Some(text)) if content.encoding.as_deref() == Some("base64") => {
                // No more of the text decoded than gives `most` bytes and one more (3 bytes for 4 characters).
                let needed = (most / 3 + 1).saturating_mul(4).min(text.len());
                let decoded =
                    base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &text.as_bytes()[..needed]);
                decoded.ok().map(|bytes| start(&bytes))
            }
            (None, Some(text)) => Some(start(text.as_bytes())),
            (None, None) => None,
        })
    }

    /// The bytes of the bundle's files.
    pub fn bytes(&self) -> u64 {
        self.sizes.values().sum()
    }

    /// The recorded responses as a page loaded at `at` (epoch milliseconds) had them.
    pub fn responses_at(&self, at: f64) -> ResponsesAt<'_> {
        ResponsesAt { recording: self, at }
    }

    /// The page as step `index` found it: the latest screenshot of its tab taken before the step, how long
    /// before the step it was taken (in milliseconds), and whether it was taken after the step before (so
    /// that it shows what this one acted on). The recorder takes a picture once the page has settled after
    /// each action (reason `settled`), besides those when pages load and after actions; a person who acted
    /// again before the page settled leaves an older one, where the page may have changed since.
    pub fn screenshot_before(&self, index: usize) -> Option<ScreenshotBefore<'_>> {
        let step = self.steps.get(index)?;
        let tab = self.tab_of_step(index);
        let before = self.screenshots.partition_point(|shot| shot.ts < step.ts);
        let shot =
            self.screenshots[..before].iter().rev().find(|shot| tab.is_none_or(|tab| shot.tab_id == Some(tab)))?;
        let after_previous_step = index.checked_sub(1).and_then(|previous| self.steps.get(previous));
        Some(ScreenshotBefore {
            shot,
            age_ms: step.ts - shot.ts,
            after_previous_step: after_previous_step.is_none_or(|previous| shot.ts >= previous.ts),
        })
    }

    /// The browser's id of the tab step `index` acted in. A step names its tab by order of appearance; the
    /// id is the tab most of that tab's steps have their picture after in. One step's own picture does not
    /// say: a click that opens a tab has its picture after in the new one.
    fn tab_of_step(&self, index: usize) -> Option<i64> {
        let tab_of_picture = |step: &ToolCall| {
            let file = step.screenshot.as_deref()?;
            self.screenshots.iter().find(|shot| shot.file == file)?.tab_id
        };
        let step = self.steps.get(index)?;
        let Some(ordinal) = step.tab else { return tab_of_picture(step) };
        // Tabs in the order their steps are first seen, each with its count: a tie goes to the first.
        let mut votes: Vec<(i64, usize)> = Vec::new();
        for tab in self.steps.iter().filter(|other| other.tab == Some(ordinal)).filter_map(tab_of_picture) {
            match votes.iter_mut().find(|(voted, _)| *voted == tab) {
                Some((_, count)) => *count += 1,
                None => votes.push((tab, 1)),
            }
        }
        let most = votes.iter().map(|(_, count)| *count).max()?;
        votes.into_iter().find(|(_, count)| *count == most).map(|(tab, _)| tab)
    }

    /// The viewport a screenshot was taken at.
    pub fn viewport_of(&self, file: &str) -> Option<Viewport> {
        self.screenshots.iter().find(|shot| shot.file == file)?.viewport
    }

    /// The network entries that started while step `index` was the latest: from its start (the very first
    /// for the first step, whose navigation is timed once it commits) to the next step's.
    pub fn entries_of_step(&self, index: usize) -> std::ops::Range<usize> {
        let start = match index {
            0 => f64::NEG_INFINITY,
            _ => self.steps.get(index).map_or(f64::INFINITY, |step| step.ts),
        };
        let end = self.steps.get(index + 1).map_or(f64::INFINITY, |step| step.ts);
        let first = self.entries.partition_point(|(ts, _)| *ts < start);
        let last = self.entries.partition_point(|(ts, _)| *ts < end);
        first..last.max(first)
    }

    /// The ignore list's pattern that makes replay fail network entry `index` at once, if one does.
    pub fn ignored_by(&self, index: usize) -> Option<&str> {
        ignore::ignore_pattern(&self.ignored, &self.entries.get(index)?.1.request.url)
    }

    /// The step during which network entry `index` started (the first, for what came before any step).
    pub fn step_of_entry(&self, index: usize) -> Option<usize> {
        step_at(&self.steps, self.entries.get(index)?.0)
    }
}

/// Whether the viewer hands out the bundle's file `name`: a file in one of its folders, never a path that
/// leaves it nor a top-level document.
fn is_shown(name: &str) -> bool {
    is_safe_relative_path(name) && name.contains('/')
}

/// The picture of the page a step acted on ([`Recording::screenshot_before`]).
pub struct ScreenshotBefore<'r> {
    pub shot: &'r Screenshot,
    /// How long before the step it was taken, in milliseconds.
    pub age_ms: f64,
    /// Taken after the step before (or the step is the first): what the step acted on, unless the page
    /// changed by itself.
    pub after_previous_step: bool,
}

/// The step that was the latest at `ts` (the first, for what came before any step).
fn step_at(steps: &[ToolCall], ts: f64) -> Option<usize> {
    if steps.is_empty() {
        return None;
    }
    Some(steps.iter().rposition(|step| step.ts <= ts).unwrap_or(0))
}

fn without_fragment(url: &str) -> &str {
    url.split_once('#').map_or(url, |(before, _)| before)
}

/// How replay answers each entry, read as replay reads the recording: request bodies from `postData.text`,
/// or from the bundle when stored apart (`sizes`, the files' real sizes, saying which are small enough to
/// read); numbers read as clocks within the recording's times.
fn answering_of(
    bundle: &mut Bundle,
    sizes: &BTreeMap<String, u64>,
    manifest: &BundleManifest,
    entries: &[(f64, Entry)],
) -> Vec<HowAnswered> {
    // Each file once, however many requests name it. An upload is not read to be told about: its twins are
    // found by the rest. The HAR's `bodySize` is not asked: a bundle may declare 0 for a body of gigabytes.
    let mut stored_apart: HashMap<&str, Vec<u8>> = HashMap::new();
    let mut read_in_all = 0;
    for (_, entry) in entries {
        let Some(post) = entry.request.post_data.as_ref().filter(|post| post.text.is_none()) else { continue };
        let Some(file) = post.file.as_deref() else { continue };
        let Some(&size) = sizes.get(file) else { continue };
        if stored_apart.contains_key(file)
            || size > MAX_READ_REQUEST_BODY
            || read_in_all + size > MAX_READ_REQUEST_BODIES
        {
            continue;
        }
        // No further than the limit, should the file have grown since it was listed.
        let Ok(bytes) = bundle.read_start(file, MAX_READ_REQUEST_BODY as usize + 1) else { continue };
        if bytes.len() as u64 <= MAX_READ_REQUEST_BODY {
            read_in_all += bytes.len() as u64;
            stored_apart.insert(file, bytes);
        }
    }
    let bodies: Vec<&[u8]> = entries
        .iter()
        .map(|(_, entry)| match &entry.request.post_data {
            Some(post) => match (&post.text, &post.file) {
                (Some(text), _) => text.as_bytes(),
                (None, Some(file)) => stored_apart.get(file.as_str()).map_or(&[][..], Vec::as_slice),
                (None, None) => &[],
            },
            None => &[],
        })
        .collect();
    let recorded: Vec<answering::Recorded<'_>> = entries
        .iter()
        .zip(&bodies)
        .map(|((_, entry), body)| answering::Recorded {
            method: &entry.request.method,
            url: &entry.request.url,
            body,
            content_type: entry
                .request
                .post_data
                .as_ref()
                .map(|post| post.mime_type.as_str())
                .filter(|m| !m.is_empty()),
            state: RequestState::from_headers(
                entry.request.headers.iter().map(|header| (header.name.as_str(), header.value.as_str())),
            ),
        })
        .collect();
    let started = millis_from_rfc3339(&manifest.started_at).unwrap_or(0.0);
    let ended = manifest.ended_at.as_deref().and_then(millis_from_rfc3339).unwrap_or(started);
    answering::explain(&recorded, &Clocks::around(started, ended))
}

/// What in the recording satisfies `predicate`, as [`evidence::holds`] finds it, told in words and linked
/// to its step and network entry.
fn proofs(predicate: &Predicate, evidence: &Evidence, steps: &[ToolCall], entries: &[(f64, Entry)]) -> Vec<Proof> {
    let event =
        |id: u64| evidence.events.binary_search_by_key(&id, |record| record.id).ok().map(|i| &evidence.events[i]);
    evidence::holds(predicate, evidence)
        .into_iter()
        .take(MAX_PROOFS)
        .filter_map(|id| {
            let step = event(id).and_then(|record| step_at(steps, record.event.ts));
            match predicate {
                Predicate::Request { .. } => {
                    let exchange = evidence.exchanges.iter().find(|exchange| exchange.request_event == id)?;
                    let entry = entries.iter().position(|(_, entry)| {
                        entry.request_id.as_deref() == Some(exchange.request_id.as_str())
                            && entry.request.url == exchange.url
                    });
                    let status = exchange.status.map_or_else(|| "no answer".to_owned(), |status| status.to_string());
                    Some(Proof { what: format!("{} {} → {status}", exchange.method, exchange.url), step, entry })
                }
                Predicate::Frame { .. } => match &event(id)?.event.kind {
                    EventKind::WebSocket(socket) => {
                        let data = socket.data.as_deref().unwrap_or_default();
                        let shown: String = data.chars().take(120).collect();
                        Some(Proof { what: format!("sent on its socket: {shown}"), step, entry: None })
                    }
                    _ => None,
                },
                Predicate::Url { .. } => match &event(id)?.event.kind {
                    EventKind::Navigation(navigation) => {
                        Some(Proof { what: format!("reached {}", navigation.url), step, entry: None })
                    }
                    _ => None,
                },
                Predicate::Text { .. } => {
                    let page = evidence.pages.iter().find(|page| page.event_id == id)?;
                    let step = steps.iter().position(|s| s.dom_snapshot.as_deref() == Some(&page.file)).or(step);
                    Some(Proof { what: format!("shown on {}", page.url), step, entry: None })
                }
            }
        })
        .collect()
}

/// The credentials' values in every form a request body or a page may hold them
/// ([`trace_analysis::secrets::encoded_forms`], the forms the exporter redacts), each with its placeholder.
struct CredentialValues {
    finder: AhoCorasick,
    placeholders: Vec<String>,
    /// The length of the longest form, in bytes.
    longest: usize,
}

impl CredentialValues {
    /// `None` when there is nothing to find.
    fn of(credentials: &[Credential]) -> Option<CredentialValues> {
        let mut patterns: Vec<String> = Vec::new();
        let mut placeholders = Vec::new();
        for credential in credentials.iter().filter(|credential| !credential.value.is_empty()) {
            let placeholder = credential.placeholder();
            // The viewer names the credential by its placeholder whatever form it was found in: each form's
            // own stand-in is for rewriting a bundle, not for showing it.
            for encoded in trace_analysis::secrets::encoded_forms(&credential.value, &placeholder) {
                if !patterns.contains(&encoded.form) {
                    patterns.push(encoded.form);
                    placeholders.push(placeholder.clone());
                }
            }
        }
        if patterns.is_empty() {
            return None;
        }
        let finder = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&patterns).ok()?;
        let longest = patterns.iter().map(String::len).max().unwrap_or(0);
        Some(CredentialValues { finder, placeholders, longest })
    }
}
