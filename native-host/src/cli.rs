//! The command line: `trace-host install | uninstall | tasks | export | validate | import | dataset | process`, plus the
//! native messaging mode that Chrome starts by passing the extension's origin as the only argument.
//! Each command is glue from arguments to a library call and from its result to text or `--json`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use indicatif::HumanBytes;
use trace_bundle::archive::{self, Bundle, ZipLimits};
use trace_chat::ChatModel;
use trace_manifest::task::{TaskId, TaskStatus};
use trace_manifest::time_fmt::rfc3339_from_millis;

use trace_manifest::report::{DatasetFormat, ExportFormat, ProcessAudit, TaskSummary, ValidateReport};

use crate::dataset::{self, DatasetOptions};
use crate::export::{self, ExportOptions};
use crate::install::{self, Browser};
use crate::paths::DataDir;
use crate::process::ProcessOptions;
use crate::redact::{SuspectDecisions, SuspectPolicy};
use crate::tasks::{CannotWrite, Purpose, TaskRow, TaskStore};

/// `println!` that returns the write's error instead of panicking: a reader that goes away
/// (`trace-host tasks --json | head -1`) closes the pipe, and `main` takes that for success.
macro_rules! outln {
    ($($arg:tt)*) => {
        std::io::Write::write_fmt(&mut std::io::stdout(), format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// TRACE's native host: stores what the TRACE extension records and builds capture bundles.
///
/// Chrome starts it with the extension's origin (chrome-extension://ID/) as its argument; it then speaks
/// native messaging on stdin and stdout. Run by hand, it manages recorded tasks.
#[derive(Debug, Parser)]
#[command(name = "trace-host", version)]
pub struct Cli {
    /// The data directory [default: $TRACE_DATA, else ~/.local/share/trace or the platform's equivalent].
    #[arg(long, global = true, value_name = "DIR")]
    pub data: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Register trace-host with Chrome and/or Chromium for this user.
    Install(InstallArgs),
    /// Remove what `install` wrote.
    Uninstall(InstallArgs),
    /// List recorded and imported tasks.
    Tasks {
        /// Include discarded tasks.
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// Write a task's bundle as one zip file, or as a WACZ web archive.
    Export {
        task: TaskId,
        #[arg(long, value_name = "FILE.zip")]
        out: PathBuf,
        #[arg(long, value_enum, default_value_t = ExportFormatArg::Zip)]
        format: ExportFormatArg,
        /// Put every body inline in recording.har, for tools that read a single HAR file.
        #[arg(long)]
        embed_bodies: bool,
        /// Replace every credential and session secret by a placeholder, for sharing; fails if the written
        /// zip still holds any of them.
        #[arg(long)]
        redact: bool,
        #[command(flatten)]
        suspects: SuspectArgs,
        #[arg(long)]
        json: bool,
    },
    /// Check a bundle (directory or zip) against its own index. Exits 1 if anything is wrong.
    Validate {
        bundle: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Add a bundle zip made elsewhere to this data directory.
    Import {
        zip: PathBuf,
        /// Refuse zips that expand to more than this many bytes.
        #[arg(long, value_name = "BYTES", default_value_t = ZipLimits::default().max_total_bytes)]
        max_size: u64,
        /// Refuse a bundle holding a file (a body, a screenshot) larger than this.
        #[arg(long, value_name = "BYTES", default_value_t = ZipLimits::default().max_entry_bytes)]
        max_file_size: u64,
        /// Refuse a document (manifest, events, HAR and the other JSON files read whole) larger than this.
        #[arg(long, value_name = "BYTES", default_value_t = ZipLimits::default().max_document_bytes)]
        max_document_size: u64,
        #[arg(long)]
        json: bool,
    },
    /// Make a dataset folder from many recordings: each validated, exported (redacted) and described.
    ///
    /// Bundles that fail validation or redaction are reported and skipped.
    Dataset {
        /// Bundles (zips or directories), folders of bundles, or task ids of the data directory.
        #[arg(value_name = "DIR_OR_TASKS", required = true)]
        sources: Vec<String>,
        /// The folder to write; it must not exist yet, or be empty.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        #[arg(long, value_enum, default_value = "trace")]
        format: FormatArg,
        /// Keep every secret in the bundles and in tasks.jsonl (for private use only).
        #[arg(long)]
        keep_secrets: bool,
        /// Add bundles whose checkpoints do not discriminate too (their audit failed, or they hold on the
        /// start page); they are listed as invalid.
        #[arg(long)]
        allow_invalid: bool,
        #[command(flatten)]
        suspects: SuspectArgs,
        #[arg(long)]
        json: bool,
    },
    /// Look at recordings and agents' runs in the browser: a local, read-only web app on 127.0.0.1.
    ///
    /// Prints the URL to open (with its token; nothing answers without it) and serves until stopped.
    View {
        /// A task id of the data directory, a bundle (zip or directory), or a run of `trace-replay eval`
        /// [default: the data directory's recordings].
        #[arg(value_name = "TASK|BUNDLE|RUN")]
        what: Option<String>,
        /// The port to listen on [default: a free one].
        #[arg(long)]
        port: Option<u16>,
        /// Open the URL in the default browser.
        #[arg(long)]
        open: bool,
        /// Stop once nothing has been asked of the viewer for this many seconds (as when the extension's
        /// "View" starts it) [default: serve until stopped].
        #[arg(long, value_name = "SECONDS")]
        stop_when_idle: Option<u64>,
    },
    /// Submit a recording to a campaign: exported redacted, annotated, put into the campaign's store (or
    /// kept in the outbox until it can be, if the store cannot be reached). Exits 1 if it was not sent.
    Submit {
        task: TaskId,
        /// The campaign's `campaign.json`.
        #[arg(long, value_name = "FILE")]
        campaign: PathBuf,
        /// The campaign's task the recording does [default: the recording's source, if a task of it].
        #[arg(long = "as", value_name = "CAMPAIGN_TASK")]
        campaign_task: Option<String>,
        #[command(flatten)]
        suspects: SuspectArgs,
        #[arg(long)]
        json: bool,
    },
    /// The submissions waiting to be sent, and those sent; `--send` tries the waiting ones again first.
    /// Exits 1 if any is still waiting.
    Outbox {
        #[arg(long)]
        send: bool,
        #[arg(long)]
        json: bool,
    },
    /// Bring a campaign's submissions together into a dataset: each zip checked against its annotation
    /// and validated, duplicates dropped, the review's rejections left out; journeys joined.
    Collect {
        /// Where the campaign's submissions went: an object store URL or a directory.
        #[arg(value_name = "STORE")]
        store: String,
        /// The folder to write; it must not exist yet, or be empty.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The coordinator's decisions: `{"campaign/pseudonym/task": {"accept": false, "reason": "..."}}`.
        #[arg(long, value_name = "FILE")]
        review: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// The journeys of a Chrome profile's browsing history (Chrome's own clusters, else TRACE's rule), with
    /// secret-looking URL parameters replaced, for annotation. Reads a copy; never writes to the profile.
    Journeys {
        /// The profile's `History` database [default: Chrome's default profile's, else Chromium's].
        #[arg(long, value_name = "FILE")]
        history: Option<PathBuf>,
        /// How many days back to read.
        #[arg(long, default_value_t = 7)]
        days: u32,
        /// Leave out this domain and its subdomains; repeatable.
        #[arg(long = "exclude", value_name = "DOMAIN")]
        excluded: Vec<String>,
        /// One journey per line, as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Build an environment map of a site from many recordings: its contexts (URL patterns), the actions
    /// taken and offered in each, the recordings as workflows, and procedures that recur.
    ///
    /// The same recordings always give the same map, byte for byte; `--merge` of new recordings into a
    /// map gives the map of all of them.
    Map {
        /// Bundles (zips or directories), folders of bundles, dataset folders, or task ids of the data
        /// directory.
        #[arg(value_name = "BUNDLES_OR_DATASET", required_unless_present = "merge")]
        sources: Vec<String>,
        /// The folder to write the map into (created if needed; an earlier map there is replaced).
        #[arg(long, value_name = "DIR", required_unless_present = "coverage")]
        out: Option<PathBuf>,
        /// A map folder whose recordings are added to these (a recording of the same task is replaced).
        #[arg(long, value_name = "DIR")]
        merge: Option<PathBuf>,
        /// Print leave-one-out coverage: for each recording, the share of its actions that the map of the
        /// others covers (context, action, parameter value).
        #[arg(long)]
        coverage: bool,
        /// Ask this model, at the OpenAI-compatible endpoint of OPENAI_BASE_URL (with OPENAI_API_KEY), for
        /// definitions of the site's terms; each says it came from the model. Cached by the question.
        #[arg(long, value_name = "MODEL", requires = "out")]
        llm: Option<String>,
        /// Where the model's replies are cached [default: $XDG_CACHE_HOME/trace/model or
        /// ~/.cache/trace/model].
        #[arg(long, value_name = "DIR", requires = "llm")]
        llm_cache: Option<PathBuf>,
        /// Print the coverage as JSON (`report-map-coverage.schema.json`).
        #[arg(long, requires = "coverage")]
        json: bool,
    },
    /// Derive trajectory.json, credentials.json, checkpoints.json and ignored.json into a bundle.
    Process {
        /// A task id of the data directory, or a bundle directory.
        #[arg(value_name = "TASK|BUNDLE")]
        target: String,
        /// Do not audit the checkpoints (by default `trace-replay audit --prune` replays the bundle offline
        /// and keeps only the checkpoints that tell the demonstration from doing nothing).
        #[arg(long)]
        no_audit: bool,
        /// Also ask this model, at the OpenAI-compatible endpoint of OPENAI_BASE_URL (with OPENAI_API_KEY),
        /// for checkpoints; each is kept only if the audit finds that it discriminates.
        #[arg(long, value_name = "MODEL", conflicts_with = "no_audit")]
        llm: Option<String>,
        /// Where the model's replies are cached [default: $XDG_CACHE_HOME/trace/checkpoints or
        /// ~/.cache/trace/checkpoints].
        #[arg(long, value_name = "DIR", requires = "llm")]
        llm_cache: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

/// Submissions, a line each (or as JSON); a failure when any is still waiting.
fn print_outbox(entries: &[trace_manifest::campaign::OutboxEntry], json: bool) -> Result<Outcome> {
    if json {
        outln!("{}", serde_json::to_string_pretty(entries)?)?;
    }
    for entry in entries.iter().filter(|_| !json) {
        match &entry.last_error {
            _ if entry.is_sent() => outln!("sent     {}", entry.name)?,
            Some(error) => outln!("waiting  {} (attempt {}: {error})", entry.name, entry.attempts)?,
            None => outln!("waiting  {}", entry.name)?,
        }
    }
    Ok(if entries.iter().all(|entry| entry.is_sent()) { Outcome::Success } else { Outcome::Failure })
}

/// Decisions on values that look like secrets but that no redaction rule chose (listed by id when an
/// export with `--redact` meets one undecided).
#[derive(Debug, clap::Args)]
pub struct SuspectArgs {
    /// Redact this suspect value, as a secret (its id as the refused export listed it); repeatable.
    #[arg(long = "redact-suspect", value_name = "ID")]
    redact_suspect: Vec<String>,
    /// Keep this suspect value as it is; repeatable.
    #[arg(long = "allow-suspect", value_name = "ID")]
    allow_suspect: Vec<String>,
    /// What to do with suspects no id names: ask (refuse the export, listing them), redact or allow.
    #[arg(long = "suspects", value_enum, default_value = "ask")]
    suspects: SuspectPolicy,
}

impl SuspectArgs {
    fn decisions(&self) -> SuspectDecisions {
        SuspectDecisions {
            redact: self.redact_suspect.iter().cloned().collect(),
            allow: self.allow_suspect.iter().cloned().collect(),
            otherwise: self.suspects,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    #[arg(long, value_enum, default_value = "all")]
    browser: Browser,
    /// For a browser started with --user-data-dir=DIR instead.
    #[arg(long, value_name = "DIR")]
    user_data_dir: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

/// What a command asks `main` to exit with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// The command ran, and its answer is "no" (an invalid bundle).
    Failure,
}

pub fn run(cli: Cli) -> Result<Outcome> {
    let data = || DataDir::resolve(cli.data.as_deref());
    match &cli.command {
        Command::Install(InstallArgs { browser, user_data_dir, json }) => {
            let written = install::install(*browser, user_data_dir.as_deref())?;
            print_list(*json, &written, |item| {
                format!("registered {} for {}: {}", trace_manifest::HOST_NAME, item.browser, item.manifest.display())
            })?;
        }
        Command::Uninstall(InstallArgs { browser, user_data_dir, json }) => {
            let removed = install::uninstall(*browser, user_data_dir.as_deref())?;
            if removed.is_empty() && !json {
                outln!("nothing to remove: {} was not registered", trace_manifest::HOST_NAME)?;
            }
            print_list(*json, &removed, |item| format!("removed {}", item.manifest.display()))?;
        }
        Command::Tasks { all, json } => {
            let data = data()?;
            // Listing must work when nothing else does (a full disk: the database may open, and then refuse to
            // mark a recording cut off as interrupted); what could not be set right is said.
            let (store, cannot_write) = TaskStore::open_to_read(&data)?;
            if let Some(cannot_write) = cannot_write {
                let cause = match cannot_write {
                    CannotWrite::ReadOnly => String::new(),
                    CannotWrite::RecoveryFailed(error) => format!(" ({error:#})"),
                };
                eprintln!(
                    "trace-host: the data directory cannot be written to{cause} (is the disk full?): tasks are \
                     listed as last recorded, and a recording that was cut off may still show as recording"
                );
            }
            let tasks: Vec<TaskRow> =
                store.tasks()?.into_iter().filter(|t| *all || t.status != TaskStatus::Discarded).collect();
            print_tasks(&tasks, *json)?;
        }
        Command::Export { task, out, format, embed_bodies, redact, suspects, json } => {
            if *embed_bodies && matches!(format, ExportFormatArg::Wacz) {
                anyhow::bail!("--embed-bodies is for zips: a WACZ's WARC holds every body already");
            }
            let data = data()?;
            let store = TaskStore::open(&data)?;
            let options = ExportOptions {
                format: (*format).into(),
                embed_bodies: *embed_bodies,
                progress: !json && std::io::stderr().is_terminal(),
                redact: *redact,
                suspects: suspects.decisions(),
            };
            let report = export::export(&store, task, out, &options)?;
            if *json {
                outln!("{}", serde_json::to_string_pretty(&report)?)?;
            } else {
                outln!(
                    "exported {} task {} to {} ({}: {} files, {})",
                    report.status.as_str(),
                    report.task_id,
                    report.zip.display(),
                    report.format.as_str(),
                    report.files,
                    HumanBytes(report.bytes)
                )?;
                if let Some(exchanges) = report.exchanges {
                    outln!("archived {exchanges} HTTP exchanges, each a response and a request record")?;
                }
                if let Some(left_out) = report.exchanges_left_out {
                    outln!("left out {left_out} exchange(s) whose URL is no URL (see the warning above)")?;
                }
                if report.processed {
                    outln!("processed it first: trajectory, credentials, checkpoints and ignore list are included")?;
                }
                if let Some(redaction) = &report.redaction {
                    outln!(
                        "redacted: {}; the {} was searched and holds none of them",
                        crate::redact::describe(redaction),
                        report.format.as_str()
                    )?;
                }
            }
        }
        Command::Validate { bundle, json } => return validate(bundle, *json),
        Command::Import { zip, max_size, max_file_size, max_document_size, json } => {
            let data = data()?;
            let store = TaskStore::open(&data)?;
            let limits = ZipLimits {
                max_total_bytes: *max_size,
                max_entry_bytes: *max_file_size,
                max_document_bytes: *max_document_size,
                ..ZipLimits::default()
            };
            let report = crate::import::import(&store, zip, limits)?;
            if *json {
                outln!("{}", serde_json::to_string_pretty(&report)?)?;
            } else {
                outln!(
                    "imported task {} ({} events, {} files, {})",
                    report.task_id,
                    report.events,
                    report.files,
                    HumanBytes(report.bytes)
                )?;
            }
        }
        Command::Dataset { sources, out, format, keep_secrets, allow_invalid, suspects, json } => {
            let options = DatasetOptions {
                format: (*format).into(),
                redact: !keep_secrets,
                suspects: suspects.decisions(),
                allow_invalid: *allow_invalid,
                progress: !json && std::io::stderr().is_terminal(),
            };
            return dataset(sources, out, &options, *json, cli.data.as_deref());
        }
        Command::Map { sources, out, merge, coverage, llm, llm_cache, json } => {
            let llm = match llm {
                Some(model) => Some(ChatModel::from_env("model", model, llm_cache.clone(), "--llm-cache")?),
                None => None,
            };
            let options = MapOptions { out: out.as_deref(), merge: merge.as_deref(), coverage: *coverage, llm };
            return map(sources, &options, *json, cli.data.as_deref());
        }
        Command::View { what, port, open, stop_when_idle } => {
            let (target, first) = crate::view::Target::resolve(what.as_deref(), &data()?)?;
            let options = crate::view::Options {
                port: port.unwrap_or(0),
                stop_when_idle: stop_when_idle.map(std::time::Duration::from_secs),
            };
            let runtime = tokio::runtime::Runtime::new()?;
            // What the browser was given to open, kept while the viewer serves.
            let mut opened = None;
            runtime.block_on(crate::view::serve(target, first, options, |url| {
                let _ = outln!("TRACE viewer at {url} (Ctrl+C stops it)");
                if *open {
                    opened = open_in_browser(url);
                }
            }))?;
            drop(opened);
        }
        Command::Submit { task, campaign, campaign_task, suspects, json } => {
            let data = data()?;
            let bytes = std::fs::read(campaign).with_context(|| format!("cannot read {}", campaign.display()))?;
            let campaign = trace_manifest::campaign::Campaign::parse(&bytes)?;
            let (store, cannot_write) = TaskStore::open_to_read(&data)?;
            // Exporting the recording reads its status, which must be true by then.
            if let Some(CannotWrite::RecoveryFailed(error)) = cannot_write {
                return Err(error);
            }
            let row = store.task(task)?.with_context(|| format!("no task {task}"))?;
            let campaign_task = match campaign_task {
                Some(chosen) => chosen.clone(),
                None if campaign.task(&row.source).is_some() => row.source.clone(),
                None => anyhow::bail!(
                    "{task} was recorded as {:?}, which is not a task of the campaign {}; name the task with --as",
                    row.source,
                    campaign.id
                ),
            };
            let pseudonym = crate::submit::pseudonym(&data)?;
            crate::submit::enqueue(&store, &campaign, &campaign_task, task, &pseudonym, &suspects.decisions())?;
            let runtime = tokio::runtime::Runtime::new()?;
            let sent = runtime.block_on(crate::submit::send(&data, &crate::submit::BACKOFF))?;
            return print_outbox(&sent, *json);
        }
        Command::Outbox { send, json } => {
            let data = data()?;
            if *send {
                let runtime = tokio::runtime::Runtime::new()?;
                runtime.block_on(crate::submit::send(&data, &crate::submit::BACKOFF))?;
            }
            let entries: Vec<_> = crate::submit::outbox(&data)?.into_iter().map(|(_, entry)| entry).collect();
            return print_outbox(&entries, *json);
        }
        Command::Collect { store, out, review, json } => {
            let review = match review {
                Some(path) => crate::collect::Review::read(path)?,
                None => crate::collect::Review::default(),
            };
            let runtime = tokio::runtime::Runtime::new()?;
            let report = runtime.block_on(crate::collect::collect(store, out, &review))?;
            if *json {
                outln!("{}", serde_json::to_string_pretty(&report)?)?;
            } else {
                outln!("collected {} submissions into {}", report.submissions.len(), out.display())?;
                for (task, count) in &report.per_task {
                    outln!("  task {task}: {count}")?;
                }
                for (pseudonym, count) in &report.per_pseudonym {
                    outln!("  {pseudonym}: {count}")?;
                }
                if let Some(labels) = report.label_chars {
                    outln!(
                        "  {} journeys; labels of {}–{} characters (median {}); would automate: {} yes, {} no",
                        report.journeys,
                        labels.min,
                        labels.max,
                        labels.median,
                        report.automate.yes,
                        report.automate.no
                    )?;
                    for (judgement, count) in &report.feasibility {
                        outln!("    {judgement}: {count}")?;
                    }
                    for (pseudonym, count) in &report.journeys_per_pseudonym {
                        outln!("    {pseudonym}: {count} journeys")?;
                    }
                }
                for skipped in &report.skipped {
                    outln!("skipped {}: {}", skipped.submission, skipped.reason)?;
                }
            }
        }
        Command::Journeys { history, days, excluded, json } => {
            let history = match history {
                Some(history) => history.clone(),
                None => crate::journeys::default_history()
                    .context("no Chrome or Chromium profile history found; name one with --history")?,
            };
            let since_ms = trace_manifest::time_fmt::now_ms() - f64::from(*days) * 24.0 * 3600.0 * 1000.0;
            let options = crate::journeys::Options { since_ms, excluded: excluded.clone() };
            let journeys = crate::journeys::from_history(&history, &options)?;
            for journey in &journeys {
                if *json {
                    outln!("{}", serde_json::to_string(journey)?)?;
                    continue;
                }
                outln!("{} ({} steps)", journey.id, journey.steps.len())?;
                for step in &journey.steps {
                    outln!("  {}  {}  {}", step.time, step.title, step.url)?;
                }
            }
        }
        Command::Process { target, no_audit, llm, llm_cache, json } => {
            let options = ProcessOptions { audit: !no_audit, llm: llm.clone(), llm_cache: llm_cache.clone() };
            let report = process(target, cli.data.as_deref(), &options)?;
            if *json {
                outln!("{}", serde_json::to_string_pretty(&report)?)?;
            } else {
                outln!(
                    "processed {} in {}: {} tool calls, {} credentials, {} checkpoints, {} ignored patterns",
                    report.task_id,
                    report.bundle.display(),
                    report.tool_calls,
                    report.credentials,
                    report.checkpoints,
                    report.ignored
                )?;
                outln!("wrote {}", report.files.join(", "))?;
                if let ProcessAudit::Audited { .. } = &report.audit
                    && let Ok(bytes) = std::fs::read(report.bundle.join(trace_manifest::audit::AUDIT_FILE))
                    && let Ok(audit) = serde_json::from_slice(&bytes)
                {
                    outln!("{}", trace_analysis::audit::table(&audit).trim_end())?;
                }
                match &report.audit {
                    ProcessAudit::NotAsked => {}
                    ProcessAudit::Skipped { reason } => outln!("checkpoints not audited: {reason}")?,
                    ProcessAudit::Audited { valid: true, dropped, .. } => outln!(
                        "audit: valid (the demonstration reaches every checkpoint, doing nothing none; {dropped} \
                         checkpoint(s) dropped that did not discriminate)"
                    )?,
                    ProcessAudit::Audited { valid: false, problems, .. } => {
                        outln!("audit: INVALID")?;
                        for problem in problems {
                            outln!("  {problem}")?;
                        }
                    }
                }
            }
            if matches!(report.audit, ProcessAudit::Audited { valid: false, .. }) {
                return Ok(Outcome::Failure);
            }
        }
    }
    Ok(Outcome::Success)
}

/// Opens the viewer's `url` with the desktop's opener; a failure is said, never fatal (the URL is printed).
///
/// The opener is handed a page that leads to the URL, never the URL itself: a program's arguments are
/// visible to every user of the machine (`ps`, `/proc/<pid>/cmdline`), and the URL holds the token that opens
/// every recording the viewer shows to whoever has it. The page is a file only its owner can read, in a
/// fresh directory only its owner can enter; the returned directory is removed when dropped, once the viewer
/// stops (a viewer killed leaves it behind, holding a token nothing answers any more).
fn open_in_browser(url: &str) -> Option<tempfile::TempDir> {
    let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
    let page = match redirect_page(url) {
        Ok(page) => page,
        Err(error) => {
            eprintln!("trace-host: cannot write the page that opens the viewer: {error:#}; open the URL above");
            return None;
        }
    };
    if let Err(error) = std::process::Command::new(opener).arg(page.path().join(REDIRECT_PAGE)).spawn() {
        eprintln!("trace-host: cannot open a browser with {opener}: {error}; open the URL above");
    }
    Some(page)
}

/// The file [`redirect_page`] writes.
const REDIRECT_PAGE: &str = "open-trace-viewer.html";

/// A fresh private directory (mode 0700) holding [`REDIRECT_PAGE`] (mode 0600), which leads to `url`.
fn redirect_page(url: &str) -> Result<tempfile::TempDir> {
    use std::io::Write;
    let mut builder = tempfile::Builder::new();
    builder.prefix("trace-view-");
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
    let dir = builder.tempdir().context("no temporary directory")?;
    let path = dir.path().join(REDIRECT_PAGE);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&path).with_context(|| format!("cannot create {}", path.display()))?;
    let url = maud::html! { (url) }.into_string();
    writeln!(
        file,
        "<!DOCTYPE html><meta charset=\"utf-8\"><meta name=\"referrer\" content=\"no-referrer\">\
         <meta http-equiv=\"refresh\" content=\"0; url={url}\"><title>TRACE viewer</title>\
         <a href=\"{url}\">Open the TRACE viewer</a>"
    )
    .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(dir)
}

/// A task id names a task of the data directory; anything else, or an id no task has, is a bundle directory.
fn process(
    target: &str,
    data_dir: Option<&Path>,
    options: &ProcessOptions,
) -> Result<trace_manifest::report::ProcessReport> {
    let path = Path::new(target);
    let looks_like_path = target.contains(std::path::MAIN_SEPARATOR) || target.contains('/');
    if !looks_like_path && let Ok(task_id) = target.parse::<TaskId>() {
        let data = DataDir::resolve(data_dir)?;
        let store = TaskStore::open(&data)?;
        if store.task(&task_id)?.is_some() || !path.is_dir() {
            return crate::process::process_task(&store, &task_id, options);
        }
        return crate::process::process_path(path, Some(&store), options);
    }
    // A bundle in the data directory is processed as its task; elsewhere, as a bundle alone.
    let data = DataDir::resolve(data_dir).ok().filter(|data| data.database().exists());
    let store = data.as_ref().map(TaskStore::open).transpose()?;
    crate::process::process_path(path, store.as_ref(), options)
}

/// `export --format`, as clap reads it; the format crate's [`ExportFormat`] is what reports say.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ExportFormatArg {
    /// The bundle, in a bundle directory's layout, for `trace-replay`, `validate` and Playwright.
    Zip,
    /// A WACZ 1.1.1 web archive (a WARC of the recorded exchanges, its CDXJ index, the pages visited) for
    /// ReplayWeb.page and the webrecorder tools.
    Wacz,
}

impl From<ExportFormatArg> for ExportFormat {
    fn from(format: ExportFormatArg) -> ExportFormat {
        match format {
            ExportFormatArg::Zip => ExportFormat::Zip,
            ExportFormatArg::Wacz => ExportFormat::Wacz,
        }
    }
}

/// `--format`, as clap reads it; the format crate's [`DatasetFormat`] is what reports say.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum FormatArg {
    /// `tasks.jsonl` and the bundles.
    Trace,
    /// WebArena-Infinity's trajectory layout: `data/manifest.json`, and in `data/human/<environment>/<task>/`
    /// a browser-use `history.json`, `result.json` and `screenshots/step_N.webp` (or the screenshot's own
    /// `.png`/`.jpg`); the bundles beside.
    WebarenaInfinity,
}

impl From<FormatArg> for DatasetFormat {
    fn from(format: FormatArg) -> DatasetFormat {
        match format {
            FormatArg::Trace => DatasetFormat::Trace,
            FormatArg::WebarenaInfinity => DatasetFormat::WebarenaInfinity,
        }
    }
}

fn dataset(
    args: &[String],
    out: &Path,
    options: &DatasetOptions,
    json: bool,
    data_dir: Option<&Path>,
) -> Result<Outcome> {
    // The data directory is opened only when there is one: a folder of zips needs none.
    let data = DataDir::resolve(data_dir).ok().filter(|data| data.database().exists());
    let store = data.as_ref().map(TaskStore::open).transpose()?;
    let sources = dataset::sources(args, store.as_ref())?;
    let report = dataset::build(&sources, store.as_ref(), out, options)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        outln!(
            "wrote a {} dataset of {} task(s) to {}{}",
            match options.format {
                DatasetFormat::Trace => "TRACE",
                DatasetFormat::WebarenaInfinity => "WebArena-Infinity",
            },
            report.tasks.len(),
            out.display(),
            if options.redact { ", redacted" } else { ", with secrets kept" }
        )?;
        for skipped in &report.skipped {
            outln!("skipped {}: {}", skipped.source, skipped.reason)?;
        }
        if !report.invalid.is_empty() {
            let invalid: Vec<&str> = report.invalid.iter().map(TaskId::as_str).collect();
            outln!("added though their checkpoints do not discriminate (--allow-invalid): {}", invalid.join(", "))?;
        }
        if !report.unaudited.is_empty() {
            let unaudited: Vec<&str> = report.unaudited.iter().map(TaskId::as_str).collect();
            outln!(
                "never audited (`trace-host process` audits where Chromium is installed): {}",
                unaudited.join(", ")
            )?;
        }
        if !report.devtools_only.is_empty() {
            let devtools_only: Vec<&str> = report.devtools_only.iter().map(TaskId::as_str).collect();
            outln!(
                "proven for `trace-replay eval` only, not through the proxy BrowserGym's package uses (see each \
                 bundle's audit.json): {}",
                devtools_only.join(", ")
            )?;
        }
    }
    Ok(if report.tasks.is_empty() { Outcome::Failure } else { Outcome::Success })
}

/// What `trace-host map` was asked beyond its sources.
struct MapOptions<'a> {
    out: Option<&'a Path>,
    merge: Option<&'a Path>,
    coverage: bool,
    llm: Option<ChatModel>,
}

fn map(args: &[String], options: &MapOptions, json: bool, data_dir: Option<&Path>) -> Result<Outcome> {
    let MapOptions { out, merge, coverage, .. } = *options;
    let data = DataDir::resolve(data_dir).ok().filter(|data| data.database().exists());
    let store = data.as_ref().map(TaskStore::open).transpose()?;
    let args: Vec<String> = args.iter().map(|arg| crate::map::bundles_of_dataset(arg)).collect();
    let mut held = Vec::new();
    let mut paths = Vec::new();
    for source in dataset::sources(&args, store.as_ref())? {
        match source {
            dataset::Source::Bundle(path) => paths.push(path),
            dataset::Source::Task(task_id) => {
                let store = store.as_ref().context("task ids need the data directory")?;
                let (task_bundle, _) = export::processed_task_bundle(store, &task_id, Purpose::Map)?;
                paths.push(task_bundle.dir().to_owned());
                held.push(task_bundle);
            }
        }
    }
    let added = crate::map::sources_of(&paths)?;
    drop(held);
    let sources = match merge {
        Some(existing) => crate::map::merged(crate::map::read_sources(existing)?, added)?,
        None => added,
    };
    if let Some(out) = out {
        let built = crate::map::write(out, &sources, options.llm.as_ref())?;
        if !coverage {
            let statistics = &built.map.statistics;
            outln!(
                "wrote the map of {} to {}: {} recording(s), {} context(s), {} action(s) ({} taken, {} parameterized), \
                 {} procedure(s), {} definition(s)",
                built.map.name,
                out.display(),
                statistics.recordings,
                statistics.contexts,
                statistics.actions,
                statistics.taken_actions,
                statistics.parameterized_actions,
                statistics.procedures,
                statistics.definitions
            )?;
        }
    }
    if coverage {
        let report = trace_analysis::map::coverage(&sources);
        if json {
            outln!("{}", serde_json::to_string_pretty(&report)?)?;
        } else {
            let share = |part: usize, whole: usize| {
                if whole == 0 { "-".to_owned() } else { format!("{:.0}%", 100.0 * part as f64 / whole as f64) }
            };
            outln!("leave-one-out coverage of {} ({} recording(s)):", report.site, report.recordings.len())?;
            outln!("{:<28} {:>6} {:>10} {:>8} {:>8}", "held out", "steps", "context", "action", "value")?;
            let rows = report.recordings.iter().map(|r| (r.task.as_str(), r.counts)).chain([("all", report.total)]);
            for (task, counts) in rows {
                outln!(
                    "{:<28} {:>6} {:>10} {:>8} {:>8}",
                    task,
                    counts.steps,
                    share(counts.in_context, counts.steps),
                    share(counts.action_known, counts.steps),
                    share(counts.value_seen, counts.steps)
                )?;
            }
        }
    }
    Ok(Outcome::Success)
}

fn validate(path: &Path, json: bool) -> Result<Outcome> {
    let mut bundle = Bundle::open(path).with_context(|| format!("cannot open the bundle {}", path.display()))?;
    let report = archive::validate(&mut bundle, &mut |_| {})?;
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&ValidateReport {
                bundle: path.to_owned(),
                valid: report.is_valid(),
                files_checked: report.files_checked,
                bytes_checked: report.bytes_checked,
                problems: report.problems.clone(),
            })?
        )?;
    } else if report.is_valid() {
        outln!(
            "{}: valid ({} indexed files, {})",
            path.display(),
            report.files_checked,
            HumanBytes(report.bytes_checked)
        )?;
    } else {
        outln!("{}: {} problem(s)", path.display(), report.problems.len())?;
        for problem in &report.problems {
            let file = if problem.file.is_empty() { "bundle" } else { &problem.file };
            outln!("  {file}: {}", problem.message)?;
        }
    }
    Ok(if report.is_valid() { Outcome::Success } else { Outcome::Failure })
}

fn print_list<T: serde::Serialize>(json: bool, items: &[T], line: impl Fn(&T) -> String) -> Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(items)?)?;
    } else {
        for item in items {
            outln!("{}", line(item))?;
        }
    }
    Ok(())
}

fn print_tasks(tasks: &[TaskRow], json: bool) -> Result<()> {
    if json {
        let rows: Vec<TaskSummary> = tasks
            .iter()
            .map(|t| TaskSummary {
                id: t.id.clone(),
                status: t.status,
                task_type: t.task_type,
                source: t.source.clone(),
                description: t.description.clone(),
                website: t.website.clone(),
                started_at: rfc3339_from_millis(t.started_at),
                ended_at: t.ended_at.map(rfc3339_from_millis),
                duration_seconds: duration_seconds(t),
                events: t.event_count,
                bytes: t.byte_count,
                imported: t.imported,
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(());
    }
    if tasks.is_empty() {
        outln!("no tasks yet: record one with the TRACE extension, or `trace-host import FILE.zip`")?;
        return Ok(());
    }
    let header = ["ID", "STATUS", "STARTED", "DURATION", "EVENTS", "BYTES", "SITE", "DESCRIPTION"].map(String::from);
    let rows: Vec<[String; 8]> = tasks
        .iter()
        .map(|t| {
            [
                t.id.to_string(),
                t.status.as_str().to_owned(),
                rfc3339_from_millis(t.started_at)[..19].replace('T', " "),
                duration_seconds(t).map_or_else(|| "-".to_owned(), |s| format!("{s:.0}s")),
                t.event_count.to_string(),
                HumanBytes(t.byte_count).to_string(),
                t.website.clone(),
                t.description.chars().take(60).collect(),
            ]
        })
        .collect();
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row.iter().zip(widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        outln!("{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

fn duration_seconds(task: &TaskRow) -> Option<f64> {
    task.ended_at.map(|end| ((end - task.started_at) / 1000.0).max(0.0))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// clap checks a command line's definition (unique names, valid defaults) only when it is built, so a
    /// mistake would otherwise surface as a panic in the user's hands.
    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
