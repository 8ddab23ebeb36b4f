//! A bundle opened for replay: its recorded exchanges in the order they happened, each response's body
//! read from the bundle when it is first asked for, the storage to restore, the ignore list, the
//! WebSockets to play back, and what determinism needs (the recording's start time and a seed).
//! Everything is checked when the bundle opens, so that a damaged bundle is refused with the reason before
//! any browser starts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use sha2::{Digest, Sha256};
use trace_analysis::canonical::Clocks;
use trace_analysis::ignore::{self, ignore_pattern};
use trace_analysis::websocket::{self, Transcript};
use trace_bundle::archive::{ArchiveError, Bundle, ZipLimits};
use trace_manifest::bundle::{self, BundleManifest, StorageFile};
use trace_manifest::event::{ActionKind, EventKind, StorageSnapshot, Viewport};
use trace_manifest::har::Entry;
use trace_manifest::time_fmt::millis_from_rfc3339;

use crate::matcher::{self, RecordedRequest};

/// One recorded request and what answered it.
#[derive(Debug, Clone)]
pub struct RecordedExchange {
    pub request: RecordedRequest,
    pub status: u16,
    pub status_text: String,
    /// Response headers as received (names keep their case, repeats stay separate).
    pub headers: Vec<(String, String)>,
    /// The body's path inside the bundle, if one was recorded.
    pub body_file: Option<String>,
    /// An inline body (HAR `content.text`), when the body was embedded rather than stored as a file.
    pub body_text: Option<Vec<u8>>,
    /// The response body's size in bytes as the HAR records it (decoded), without reading the body.
    pub body_size: u64,
    /// Why the recording has no response (a network error, a cancelled request).
    pub error: Option<String>,
}

pub struct ReplayArchive {
    path: PathBuf,
    pub manifest: BundleManifest,
    /// The title of each page of the recording (HAR `log.pages`), in order.
    pub page_titles: Vec<String>,
    pub exchanges: Vec<RecordedExchange>,
    /// The storage as it was when the recording started: each origin's as the recording first found it.
    pub start_storage: Option<StorageSnapshot>,
    /// Scheme-less URL substrings whose requests replay fails at once.
    pub ignored: Vec<String>,
    /// Milliseconds since the Unix epoch at which the recording started: replayed pages start their clock there.
    pub started_at_ms: f64,
    /// When the recording ended (its start plus its duration when the manifest has no end).
    pub ended_at_ms: f64,
    /// Seeds the replayed pages' random numbers; derived from the task id, so every replay of a bundle agrees.
    pub seed: u64,
    /// The viewport the person's tab had (its first screenshot's), which replayed pages get.
    pub viewport: Option<Viewport>,
    /// The viewport each screenshot was taken at, by its file: a window resized mid-task.
    pub viewports: HashMap<String, Viewport>,
    /// The recording's WebSockets, which replayed pages get played back.
    pub websockets: Vec<Transcript>,
    /// What the person typed and chose, which is never an id the page made (see
    /// [`trace_analysis::client_ids::Origin`]).
    pub typed: Vec<String>,
    /// What the person typed into credential fields (passwords, tokens): a request that sends another
    /// value where the recording sent one of these is no sign-in the recording answers
    /// ([`crate::matcher::Matcher::with_credentials`]).
    pub credentials: Vec<String>,
    bundle: Mutex<Bundle>,
    /// Bodies already served, kept to be served again, up to [`BODY_CACHE_BYTES`] in all.
    bodies: Mutex<BodyCache>,
    limits: ZipLimits,
}

/// The most body bytes kept in memory between requests; past it, a body is read from the bundle each
/// time it is served, so that memory stays bounded however many large bodies a bundle holds.
const BODY_CACHE_BYTES: usize = 256 << 20;

#[derive(Default)]
struct BodyCache {
    by_file: HashMap<String, std::sync::Arc<Vec<u8>>>,
    bytes: usize,
}

/// The bundle at `path`, opened for what replay reads of it besides serving it (a task's reference, its
/// demonstration), with the error every command gives for a bundle it cannot open.
pub fn open_bundle(path: &Path, limits: ZipLimits) -> Result<Bundle> {
    Bundle::open_with_limits(path, limits).with_context(|| format!("cannot open the bundle {}", path.display()))
}

impl ReplayArchive {
    /// Opens a bundle directory or an exported zip with the default limits, refusing it with the reason
    /// if anything replay needs is missing or damaged.
    pub fn open(path: &Path) -> Result<ReplayArchive> {
        ReplayArchive::open_with_limits(path, ZipLimits::default())
    }

    /// [`ReplayArchive::open`] with the given limits on the bundle's files.
    pub fn open_with_limits(path: &Path, limits: ZipLimits) -> Result<ReplayArchive> {
        let cannot_open = || format!("cannot open the bundle {}", path.display());
        let metadata = std::fs::metadata(path).with_context(cannot_open)?;
        // A FIFO would block opening until something writes to it, and a device can stream forever.
        if !metadata.is_dir() && !metadata.is_file() {
            bail!("cannot open the bundle {}: it is neither a directory nor a zip file", path.display());
        }
        let bundle = Bundle::open_with_limits(path, limits).map_err(flatten).with_context(cannot_open)?;
        ReplayArchive::from_bundle(bundle)
    }

    /// [`ReplayArchive::open`] over a bundle already open, with the limits it was opened with: what an
    /// episode read first (its task, its checkpoints) is read from the same bundle, and a snapshot pack
    /// that reading unpacked is not unpacked again.
    pub fn from_bundle(bundle: Bundle) -> Result<ReplayArchive> {
        let path = bundle.path().to_owned();
        ReplayArchive::load(&path, bundle).with_context(|| format!("{} is not a usable bundle", path.display()))
    }

    fn load(path: &Path, mut bundle: Bundle) -> Result<ReplayArchive> {
        let limits = bundle.limits();
        let manifest = bundle.manifest().map_err(flatten)?;
        // Parsed as it streams in, and refused first when it would take more memory than the limit.
        let har = match bundle.har() {
            Ok(har) => har,
            Err(ArchiveError::Invalid { message, .. }) => bail!("{} does not parse: {message}", bundle::HAR_FILE),
            Err(missing @ ArchiveError::Missing(_)) => return Err(flatten(missing)),
            Err(error) => return Err(flatten(error).context(format!("cannot read {}", bundle::HAR_FILE))),
        };
        let mut exchanges = Vec::with_capacity(har.log.entries.len());
        let mut request_bodies = RequestBodies::new(bundle.files().map_err(flatten)?, limits);
        // A socket's entry holds its frames for other tools: replay plays sockets back from their
        // transcripts (`trace_analysis::websocket`), never through the request matcher.
        for entry in
            har.log.entries.iter().filter(|entry| entry.web_socket_messages.is_empty() && entry.response.status != 101)
        {
            let mut exchange = exchange(entry)?;
            // Every body is checked now, so that a damaged bundle is refused before a browser starts
            // rather than leaving one page short of a response. The matcher needs request bodies, so they
            // are read; response bodies are only looked for, and read when asked for.
            if let Some(file) = entry.request.post_data.as_ref().and_then(|post| post.file.as_ref()) {
                if !bundle.contains(file) {
                    bail!("{} names the request body {file}, which the bundle does not hold", entry.request.url);
                }
                exchange.request.body = Some(request_bodies.get(&mut bundle, file)?);
            }
            if let Some(file) = &exchange.body_file
                && !bundle.contains(file)
            {
                bail!("{} names the body {file}, which the bundle does not hold", entry.request.url);
            }
            exchanges.push(exchange);
        }
        let start_storage = if bundle.contains(bundle::STORAGE_FILE) {
            let storage: StorageFile = serde_json::from_slice(&read(&mut bundle, bundle::STORAGE_FILE)?)
                .context("storage.json does not parse")?;
            trace_analysis::storage::at_start(&storage)
        } else {
            None
        };
        let mut events = bundle.events().map_err(flatten).context("events.jsonl")?;
        events.sort_by_key(|record| record.id);
        let ignored = ignore::of_bundle(&mut bundle, &events)?;
        let shots: Vec<(&str, Viewport)> = events
            .iter()
            .filter_map(|record| match &record.event.kind {
                EventKind::Screenshot(shot) => Some((shot.file.as_str(), shot.viewport?)),
                _ => None,
            })
            .collect();
        let viewport = shots.first().map(|&(_, viewport)| viewport);
        let viewports = shots.into_iter().map(|(file, viewport)| (file.to_owned(), viewport)).collect();
        let websockets = websocket::transcripts(&events);
        let typed = events
            .iter()
            .filter_map(|record| match &record.event.kind {
                EventKind::Action(action)
                    if !action.page_made && matches!(action.action, ActionKind::Input | ActionKind::Change) =>
                {
                    action.value.clone()
                }
                _ => None,
            })
            .collect();
        let mut credentials: Vec<String> = events
            .iter()
            .filter_map(|record| match &record.event.kind {
                EventKind::Action(action) if action.credential && !action.page_made => action.value.clone(),
                _ => None,
            })
            .filter(|value| !value.is_empty())
            .collect();
        credentials.sort_unstable();
        credentials.dedup();
        drop(events);
        let started_at_ms = millis_from_rfc3339(&manifest.started_at)
            .with_context(|| format!("manifest.json: started_at {:?} is not a time", manifest.started_at))?;
        let ended_at_ms = manifest
            .ended_at
            .as_deref()
            .and_then(millis_from_rfc3339)
            .unwrap_or(started_at_ms + manifest.duration_seconds.max(0.0) * 1000.0);
        let digest = Sha256::digest(manifest.task.id.as_str().as_bytes());
        let seed = u64::from_le_bytes(digest[..8].try_into().expect("a SHA-256 has 32 bytes"));
        Ok(ReplayArchive {
            path: path.to_owned(),
            manifest,
            page_titles: har.log.pages.iter().map(|page| page.title.clone()).collect(),
            exchanges,
            start_storage,
            ignored,
            started_at_ms,
            ended_at_ms,
            seed,
            viewport,
            viewports,
            websockets,
            typed,
            credentials,
            bundle: Mutex::new(bundle),
            bodies: Mutex::default(),
            limits,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The recording's times, for telling its clock readings (in requests, in page text) from other numbers.
    pub fn recorded_clocks(&self) -> Clocks {
        Clocks::around(self.started_at_ms, self.ended_at_ms)
    }

    /// The URL the demonstration started at.
    pub fn start_url(&self) -> &str {
        &self.manifest.task.website
    }

    /// The recorded response body of an exchange (empty when none was recorded), kept for the next ask.
    pub fn body(&self, index: usize) -> Result<std::sync::Arc<Vec<u8>>> {
        self.load_body(index, true)
    }

    /// The recorded response body of an exchange, as [`ReplayArchive::body`], without keeping it: for reading
    /// many bodies once.
    pub fn peek_body(&self, index: usize) -> Result<std::sync::Arc<Vec<u8>>> {
        self.load_body(index, false)
    }

    fn load_body(&self, index: usize, keep: bool) -> Result<std::sync::Arc<Vec<u8>>> {
        let exchange = &self.exchanges[index];
        if let Some(text) = &exchange.body_text {
            return Ok(std::sync::Arc::new(text.clone()));
        }
        let Some(file) = &exchange.body_file else { return Ok(std::sync::Arc::new(Vec::new())) };
        if let Some(body) = self.bodies.lock().expect("no panics while locked").by_file.get(file) {
            return Ok(body.clone());
        }
        let body = std::sync::Arc::new(read(&mut self.bundle.lock().expect("no panics while locked"), file)?);
        let mut cache = self.bodies.lock().expect("no panics while locked");
        if keep && cache.bytes + body.len() <= BODY_CACHE_BYTES {
            cache.bytes += body.len();
            cache.by_file.insert(file.clone(), body.clone());
        }
        Ok(body)
    }

    /// The limits the bundle was opened with, which whatever else reads it uses too.
    pub fn limits(&self) -> ZipLimits {
        self.limits
    }

    /// Runs `read` on the open bundle, for what replay reads of it besides the responses (the re-run's
    /// snapshots and screenshots): through the one open bundle, its snapshot pack is decoded once when they
    /// are read in order. The
    /// bundle is the responses' too, so `read` should read, not parse at length.
    pub fn with_bundle<T>(&self, read: impl FnOnce(&mut Bundle) -> T) -> T {
        read(&mut self.bundle.lock().expect("no panics while locked"))
    }

    /// Replaces the ignore list (`--ignore-list`).
    pub fn set_ignore_list(&mut self, ignored: Vec<String>) {
        self.ignored = ignored;
    }

    /// Replaces the ignore list with the one in `file`, a JSON array of scheme-less URL substrings.
    pub fn set_ignore_list_from(&mut self, file: &Path) -> Result<()> {
        let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
        let list = ignore::parse_ignore_list(&bytes).context("an ignore list is a JSON array of strings");
        self.set_ignore_list(list.with_context(|| file.display().to_string())?);
        Ok(())
    }

    /// The ignore-list entry that names `url`, if any (by [`trace_analysis::urls`]'s rule).
    pub fn ignore_pattern(&self, url: &str) -> Option<&str> {
        ignore_pattern(&self.ignored, url)
    }
}

/// The request bodies stored as files, as the matcher holds them: each read once however many requests
/// name it, a large one held as its digest ([`matcher::large_body_stand_in`]), and all of them counted,
/// by their real sizes, against the memory limit.
struct RequestBodies {
    sizes: std::collections::BTreeMap<String, u64>,
    read: HashMap<String, Vec<u8>>,
    /// The bytes the matcher will hold: each request keeps its own copy of its body (and another in its
    /// canonical form), so a body counts once per request that sent it.
    held: u64,
    limits: ZipLimits,
}

/// Copies of a request body replay holds: the request's own, the matcher's exact key and its canonical form.
const REQUEST_BODY_COPIES: u64 = 3;

impl RequestBodies {
    fn new(sizes: std::collections::BTreeMap<String, u64>, limits: ZipLimits) -> RequestBodies {
        RequestBodies { sizes, read: HashMap::new(), held: 0, limits }
    }

    fn get(&mut self, bundle: &mut Bundle, file: &str) -> Result<Vec<u8>> {
        let size = self.sizes.get(file).copied().unwrap_or(0);
        if !self.read.contains_key(file) {
            let body = if size > matcher::LARGE_BODY_BYTES as u64 {
                let (_, sha256) = bundle.hash(file).map_err(flatten).with_context(|| format!("cannot read {file}"))?;
                matcher::large_body_stand_in(&sha256)
            } else {
                read(bundle, file)?
            };
            self.read.insert(file.to_owned(), body);
        }
        let body = self.read[file].clone();
        self.held = self.held.saturating_add(body.len() as u64 * REQUEST_BODY_COPIES);
        if self.held > self.limits.max_memory_bytes {
            bail!(
                "the recorded requests' bodies would take more than the limit of {} bytes of memory; set {} to a \
                 number of bytes to raise it",
                self.limits.max_memory_bytes,
                trace_bundle::archive::MAX_MEMORY_VARIABLE
            );
        }
        Ok(body)
    }
}

/// Reads one file of the bundle, naming it when it cannot be read: a zip names only itself when an entry
/// fails its checksum.
fn read(bundle: &mut Bundle, name: &str) -> Result<Vec<u8>> {
    match bundle.read(name) {
        Ok(bytes) => Ok(bytes),
        // Already says which file.
        Err(missing @ ArchiveError::Missing(_)) => Err(flatten(missing)),
        Err(error) => Err(flatten(error).context(format!("cannot read {name}"))),
    }
}

/// An [`ArchiveError`] as a message alone. Its messages already end with their cause, which the error also
/// reports as its source, so the `{:#}` that `main` prints would give every cause twice ("No such file or
/// directory (os error 2): No such file or directory (os error 2)").
fn flatten(error: ArchiveError) -> anyhow::Error {
    anyhow::Error::msg(error.to_string())
}

fn exchange(entry: &Entry) -> Result<RecordedExchange> {
    let mut request = RecordedRequest::from_har(&entry.request);
    if request.body.is_none()
        && let Some(post) = &entry.request.post_data
        && post.text.is_none()
        && !post.params.is_empty()
    {
        let form: String = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(post.params.iter().map(|p| (&p.name, &p.value)))
            .finish();
        request.body = Some(form.into_bytes());
    }
    let content = &entry.response.content;
    let body_text = match content.text.as_ref().filter(|_| content.file.is_none()) {
        // Refused rather than served empty: an empty body would break the page with no hint why.
        Some(text) if content.encoding.as_deref() == Some("base64") => Some(
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .with_context(|| format!("recording.har: the body of {} is not valid base64", entry.request.url))?,
        ),
        Some(text) => Some(text.clone().into_bytes()),
        None => None,
    };
    Ok(RecordedExchange {
        request,
        status: entry.response.status,
        status_text: entry.response.status_text.clone(),
        headers: entry.response.headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect(),
        body_file: content.file.clone(),
        body_text,
        body_size: content.size.max(0) as u64,
        error: entry.error.clone().filter(|_| entry.response.status == 0),
    })
}
