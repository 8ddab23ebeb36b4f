//! The `trace-replay` binary: the command line, its checks, and the exit code; the work is in the library,
//! and how each ending maps to its exit code is [`trace_replay::Error`]'s.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use trace_bundle::archive::ZipLimits;
use trace_replay::Error;
use trace_replay::archive::ReplayArchive;
use trace_replay::audit::AuditOptions;
use trace_replay::batch::{BatchOptions, Layout, Shard};
use trace_replay::eval::{Agent, EvalOptions, Reference};
use trace_replay::judge::Judge;
use trace_replay::proxy::ProxyOptions;
use trace_replay::proxy_episodes::EpisodeOptions;
use trace_replay::run::RunOptions;
use trace_replay::serve::Options;
use trace_replay::session::Budget;
use trace_replay::stop::{asked_to_stop, stdin_closed, until_stopped};

/// Serve a TRACE bundle to Chromium offline, and re-run its recorded trajectory.
#[derive(Debug, Parser)]
#[command(name = "trace-replay", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Summarize a bundle (directory or zip): task, pages, hosts with request counts and bytes.
    Inspect {
        bundle: PathBuf,
        #[command(flatten)]
        limits: LimitArgs,
        #[arg(long)]
        json: bool,
    },
    /// Serve a bundle (directory or zip) to Chromium with no network, until Ctrl+C.
    Serve {
        bundle: PathBuf,
        #[command(flatten)]
        browser: BrowserArgs,
        #[command(flatten)]
        limits: LimitArgs,
        /// Let requests that nothing recorded answers go to the live network.
        #[arg(long)]
        allow_network_fallback: bool,
        /// A JSON array of scheme-less URL substrings to fail at once, instead of the bundle's ignored.json.
        #[arg(long, value_name = "FILE")]
        ignore_list: Option<PathBuf>,
        /// Leave the pages' clock and random numbers alone.
        #[arg(long)]
        no_determinism: bool,
        /// The DevTools port agents connect to (default: a free one).
        #[arg(long, value_name = "PORT", conflicts_with = "proxy_port")]
        cdp_port: Option<u16>,
        /// Launch no browser: serve the bundle as an HTTP proxy on this loopback port (0: a free one,
        /// printed) to a browser the agent launches itself.
        #[arg(long, value_name = "PORT")]
        proxy_port: Option<u16>,
        /// With --proxy-port: keep the proxy's certificate authority in this folder (made there on first
        /// use), so that a browser told to trust it once trusts every run's.
        #[arg(long, value_name = "DIR", requires = "proxy_port")]
        ca_dir: Option<PathBuf>,
        /// With --proxy-port: record the episode into this folder, written when the proxy stops: every
        /// request that crossed and its answer (DIR/session/, a bundle, as `eval` records an agent's) and
        /// what was served (DIR/served.json). `trace-replay score` scores it.
        #[arg(long, value_name = "DIR", requires = "proxy_port", group = "recorded")]
        episode: Option<PathBuf>,
        /// With --episode or --episodes-on-stdin: what each episode keeps of the request and response
        /// bodies that cross the proxy, in bytes; past it a body is kept as its SHA-256 and size alone, and
        /// served.json says how many were.
        #[arg(
            long,
            value_name = "BYTES",
            requires = "recorded",
            default_value_t = trace_replay::session::bodies::DEFAULT_BUDGET_BYTES
        )]
        max_episode_bytes: u64,
        /// With --proxy-port: stop, writing the episode, when standard input ends: the caller that holds a
        /// pipe to it has closed it or is gone (killed, crashed), and the proxy goes with it.
        #[arg(long, requires = "proxy_port")]
        stop_when_stdin_closes: bool,
        /// With --proxy-port: serve episode after episode from this one process, as standard input asks,
        /// a JSON object a line: `{"begin": {"episode": DIR}}` records the next into DIR, `{"end":
        /// {"answer": TEXT, "steps": N}}` writes and scores it (`{"score": false}`: writes it only); each
        /// is answered with a line of JSON. Standard input ending writes the episode being recorded and
        /// stops the proxy.
        #[arg(long, requires = "proxy_port", group = "recorded", conflicts_with = "stop_when_stdin_closes")]
        episodes_on_stdin: bool,
    },
    /// List the tasks of a bundle or dataset as `eval` runs them: id, bundle, description and the page each
    /// starts at, checked as `eval` checks them (BrowserGym's tasks are registered from this list).
    List {
        /// A bundle (directory or zip), or a dataset (with tasks.jsonl).
        source: PathBuf,
        #[command(flatten)]
        limits: LimitArgs,
        /// Print the tasks as one JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Score an episode that `serve --proxy-port --episode DIR` recorded, as `eval` scores its own: writes
    /// DIR/result.json and prints its summary.
    Score {
        bundle: PathBuf,
        #[arg(long, value_name = "DIR")]
        episode: PathBuf,
        /// The agent's answer (an information-retrieval task's is compared with the person's).
        #[arg(long, value_name = "TEXT")]
        answer: Option<String>,
        /// The actions the agent took (its answer not counted), as its harness counted them; without it,
        /// the pages it reached after the first stand in (fewer, when it acted within a page).
        #[arg(long, value_name = "N")]
        steps: Option<usize>,
        /// Print result.json instead of the summary.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Re-run the recorded human trajectory in the replayed site and report its fidelity (exit 1 when a
    /// step fails or anything tried to reach the network).
    Run {
        bundle: PathBuf,
        /// Re-run the person's demonstration (the only runner built in; agents attach to `serve`).
        #[arg(long)]
        human: bool,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
        /// The longest a step waits for its page to settle, its element to appear or its effect to show.
        #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
        step_timeout: f64,
        #[command(flatten)]
        browser: BrowserArgs,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Run an agent on a bundle, or on every task of a dataset, in the replayed site, record what it did,
    /// and score it: checkpoints, success, rubric, SPL (RUN/summary.md).
    Eval {
        /// A bundle (directory or zip), or a dataset (with tasks.jsonl): a path, or an object store URL.
        source: String,
        #[command(flatten)]
        eval: EvalArgs,
        #[command(flatten)]
        browser: BrowserArgs,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Prove that the checkpoints of a bundle, or of every task of a dataset, discriminate: offline, re-run
    /// the demonstration (it must reach every checkpoint in order and succeed), an agent that does nothing
    /// (it must reach none) and the demonstration without each state-changing step or with each value it
    /// typed into a state change altered (each must fail). Writes OUT/<task>/audit.json and prints a table;
    /// exit 1 when a bundle is invalid, 3 when there is no Chromium.
    Audit {
        /// A bundle (directory or zip), or a dataset (with tasks.jsonl).
        source: PathBuf,
        /// Where each task's audit and runs go.
        #[arg(long, value_name = "DIR", default_value = "audit")]
        out: PathBuf,
        /// Drop the checkpoints that do not discriminate and judge the rest (OUT/<task>/checkpoints.json),
        /// as `trace-host process` does.
        #[arg(long)]
        prune: bool,
        /// Also ask this model, at the OpenAI-compatible endpoint of OPENAI_BASE_URL (with OPENAI_API_KEY),
        /// for checkpoints; with --prune, each is kept only if it discriminates.
        #[arg(long, value_name = "MODEL")]
        llm: Option<String>,
        /// Where the model's replies are cached [default: $XDG_CACHE_HOME/trace/checkpoints or
        /// ~/.cache/trace/checkpoints].
        #[arg(long, value_name = "DIR", requires = "llm")]
        llm_cache: Option<PathBuf>,
        /// Runs at once, each in a browser context of its own in browsers kept between runs (a run mostly
        /// waits for its pages to settle and for the person's pauses; docs/benchmarks.md has the figures).
        #[arg(long, value_name = "N", default_value_t = 6)]
        parallel: usize,
        /// Print the audits as one JSON array.
        #[arg(long)]
        json: bool,
        /// Leave out the demonstration's re-run through the proxy: the bundle is then proven on the
        /// DevTools path (`eval`) alone, not on the proxy path BrowserGym's package takes.
        #[arg(long)]
        skip_proxy: bool,
        /// Launch a browser for every run, rather than keep browsers and give each run a browser context
        /// of its own (as `eval --browser-per-episode`).
        #[arg(long)]
        browser_per_run: bool,
        #[command(flatten)]
        browser: BrowserArgs,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Run Chromium with ARGS and TRACE's offline flags (no background traffic, WebRTC only through the
    /// proxy, no mDNS), for a harness that launches its own browser: BrowserGym's tasks point Playwright's
    /// executable at a script that runs this. Replaces itself by Chromium.
    Chromium {
        /// The Chromium to run [default: $TRACE_CHROMIUM, else Debian's].
        #[arg(long, value_name = "PATH")]
        chromium: Option<PathBuf>,
        /// Chromium's own arguments, after `--`.
        #[arg(last = true)]
        arguments: Vec<std::ffi::OsString>,
    },
    /// An agent's keeper, started by `eval` (not for people): runs the agent and ends all it started when
    /// trace-replay is gone (see `trace_replay::processes`).
    #[command(name = "agent-keeper", hide = true)]
    AgentKeeper {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Join the runs of shards into one results file and summary, as one machine would have written them.
    EvalMerge {
        /// Runs (directories or object store URLs, each with its results files).
        #[arg(required = true)]
        runs: Vec<String>,
        /// Where the joined results and summary go [default: the first run].
        #[arg(long, value_name = "DIR_OR_URL")]
        out: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

/// What `eval` takes beyond the browser and the limits.
#[derive(Debug, clap::Args)]
struct EvalArgs {
    /// The agent: a command line run by the shell, with TRACE_CDP_URL, TRACE_TASK, TRACE_TASK_TYPE,
    /// TRACE_START_URL, TRACE_CREDENTIALS and TRACE_OUT (and TRACE_MAP with --map) in its environment; or
    /// `human`, the person's demonstration re-run.
    #[arg(long)]
    agent: String,
    /// The agent's name where a model's goes (WebArena-Infinity's layout) [default: `human`, or the name of
    /// the script the command runs].
    #[arg(long, value_name = "NAME")]
    agent_name: Option<String>,
    /// Where the run's outputs go, a directory or an object store URL (s3://, gs://, az://, file://; made if
    /// missing; a run already there is resumed).
    #[arg(long, value_name = "DIR_OR_URL", default_value = "eval-run")]
    out: String,
    /// Stop an agent once it has taken more steps than this.
    #[arg(long, value_name = "N")]
    max_steps: Option<usize>,
    /// Stop an agent after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    timeout: f64,
    /// Episodes at once, each in a browser kept for the episodes after it, in a browser context of its own.
    #[arg(long, value_name = "N", default_value_t = 1)]
    parallel: usize,
    /// Launch a browser for every episode, its pages in the browser's default context, rather than keep
    /// browsers and give each episode a context of its own: for an agent that opens its own pages in the
    /// default context (Playwright's `browser.contexts[0].new_page()` after `connect_over_cdp`), where
    /// the recording's cookies are then.
    #[arg(long)]
    browser_per_episode: bool,
    /// Run one shard of the tasks: `I/N`, or `N` with the index from JOB_COMPLETION_INDEX (Kubernetes
    /// Indexed Job) or SLURM_ARRAY_TASK_ID (Slurm array); join the shards with `eval-merge`.
    #[arg(long, value_name = "I/N")]
    shard: Option<String>,
    /// How task directories are named: by task id, or by its digits for WebArena Verified's evaluator.
    #[arg(long, value_enum, default_value = "trace")]
    layout: Layout,
    /// Also ask this model, at the OpenAI-compatible endpoint of OPENAI_BASE_URL (with OPENAI_API_KEY), for
    /// TRACE's binary and checkpoint judges and the rubric's text items; its verdicts are reported apart
    /// and cached by the hash of each question.
    #[arg(long, value_name = "MODEL")]
    judge: Option<String>,
    /// Where the judge's replies are cached [default: $XDG_CACHE_HOME/trace/judge or ~/.cache/trace/judge].
    #[arg(long, value_name = "DIR", requires = "judge")]
    judge_cache: Option<PathBuf>,
    /// An environment map's folder (`trace-host map`), handed to the agent as TRACE_MAP, so that agents can
    /// be compared with and without a map.
    #[arg(long, value_name = "DIR")]
    map: Option<PathBuf>,
    /// What each episode keeps of the request and response bodies that cross it, in bytes; past it a
    /// body is kept as its SHA-256 and size alone, and the result says how many were.
    #[arg(long, value_name = "BYTES", default_value_t = trace_replay::session::bodies::DEFAULT_BUDGET_BYTES)]
    max_episode_bytes: u64,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
}

/// The sizes past which a bundle is refused before anything of it is read: it may come from a stranger.
#[derive(Debug, clap::Args)]
struct LimitArgs {
    /// Refuse a bundle holding a file (a body, a screenshot) larger than this; a body is held in memory
    /// while it is served.
    #[arg(long, value_name = "BYTES", default_value_t = ZipLimits::default().max_entry_bytes)]
    max_file_size: u64,
    /// Refuse a bundle whose manifest, events, HAR or other JSON file (parsed whole) is larger than this.
    #[arg(long, value_name = "BYTES", default_value_t = ZipLimits::default().max_document_bytes)]
    max_document_size: u64,
}

impl LimitArgs {
    fn limits(&self) -> ZipLimits {
        ZipLimits {
            max_entry_bytes: self.max_file_size,
            max_document_bytes: self.max_document_size,
            ..ZipLimits::default()
        }
    }
}

#[derive(Debug, clap::Args)]
struct BrowserArgs {
    /// The Chromium to drive [default: $TRACE_CHROMIUM, else Debian's].
    #[arg(long, value_name = "PATH")]
    chromium: Option<PathBuf>,
    /// Without a window (the default when there is no display).
    #[arg(long)]
    headless: bool,
}

impl BrowserArgs {
    fn options(&self) -> Options {
        Options::launching(self.chromium.clone(), self.headless)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Replay decisions are logged at info: a user reads them to see why a page differs (TRACE_LOG filters).
    // An audit's perturbed runs differ from the recording on purpose: its table says what counts.
    let default = if matches!(cli.command, Command::Audit { .. }) { "error" } else { "info" };
    let filter = std::env::var("TRACE_LOG").unwrap_or_else(|_| default.to_owned());
    let filter = tracing_subscriber::EnvFilter::try_new(trace_replay::chromium::quiet_chromiumoxide(&filter))
        .unwrap_or_else(|_| default.into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    match run(cli).map_err(Error::from) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("trace-replay: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Inspect { bundle, limits, json } => {
            let summary = trace_replay::inspect::inspect(&bundle, limits.limits())?;
            print_output(json, &summary, trace_replay::inspect::text)
        }
        Command::Serve {
            bundle,
            browser,
            limits,
            allow_network_fallback,
            ignore_list,
            no_determinism,
            cdp_port,
            proxy_port,
            ca_dir,
            episode,
            max_episode_bytes,
            stop_when_stdin_closes,
            episodes_on_stdin,
        } => {
            let mut archive = ReplayArchive::open_with_limits(&bundle, limits.limits())?;
            if let Some(file) = ignore_list {
                archive.set_ignore_list_from(&file)?;
            }
            if let Some(port) = proxy_port {
                anyhow::ensure!(
                    !allow_network_fallback,
                    "--allow-network-fallback needs the browser replay launches; the proxy answers from the bundle alone"
                );
                let options = ProxyOptions { port, ca_dir, determinism: !no_determinism };
                if episodes_on_stdin {
                    // Read through the bundle the archive has open: no second opening.
                    let reference = archive.with_bundle(Reference::of_bundle)?;
                    let episodes = EpisodeOptions { budget: Budget(max_episode_bytes), limits: limits.limits() };
                    let serving = trace_replay::proxy_episodes::serve_episodes(
                        &bundle,
                        archive,
                        reference,
                        &options,
                        episodes,
                        asked_to_stop(),
                    );
                    return tokio::runtime::Runtime::new()?.block_on(serving);
                }
                let episode = episode.as_deref().map(|dir| (dir, Budget(max_episode_bytes)));
                let stop = async move {
                    if !stop_when_stdin_closes {
                        return asked_to_stop().await;
                    }
                    tokio::select! {
                        asked = asked_to_stop() => asked,
                        () = stdin_closed() => {
                            tracing::info!("standard input ended: the proxy stops");
                            Ok(())
                        }
                    }
                };
                let serving = trace_replay::proxy::serve_until(&bundle, archive, &options, episode, stop);
                return tokio::runtime::Runtime::new()?.block_on(serving);
            }
            let options =
                Options { cdp_port, allow_network_fallback, determinism: !no_determinism, ..browser.options() };
            let serving = trace_replay::serve::serve_until(&bundle, archive, &options, asked_to_stop());
            tokio::runtime::Runtime::new()?.block_on(serving)
        }
        Command::List { source, limits, json } => {
            let listed = trace_replay::tasks::tasks(&source, limits.limits())?
                .iter()
                .map(|task| trace_replay::eval::task_to_run(task, limits.limits()))
                .collect::<anyhow::Result<Vec<_>>>()?;
            print_output(json, &listed, |listed| {
                listed
                    .iter()
                    .map(|task| format!("{}  {}  {}\n", task.task_id, task.start_url, task.bundle.display()))
                    .collect()
            })
        }
        Command::Score { bundle, episode, answer, steps, json, limits } => {
            let result = trace_replay::eval::score_proxied(&bundle, &episode, answer, steps, limits.limits())?;
            print_output(json, &result, |result| trace_replay::eval::proxied_text(result, &episode))
        }
        Command::Eval { source, eval, browser, limits } => {
            let timeout = seconds(eval.timeout, "--timeout")?;
            anyhow::ensure!(eval.parallel > 0, "--parallel takes at least 1");
            if let Some(map) = &eval.map {
                anyhow::ensure!(
                    map.join(trace_manifest::map::MAP_FILE).is_file(),
                    "{} is not a map folder (it has no {}); `trace-host map` makes one",
                    map.display(),
                    trace_manifest::map::MAP_FILE
                );
            }
            let agent = Agent::parse(&eval.agent);
            let judge = match &eval.judge {
                Some(model) => Some(Arc::new(Judge::from_env(model, eval.judge_cache.clone())?)),
                None => None,
            };
            let options = BatchOptions {
                episode: EvalOptions {
                    agent_name: match &eval.agent_name {
                        Some(name) => trace_manifest::dataset::model_name(name),
                        None => agent.short_name(),
                    },
                    agent,
                    max_steps: eval.max_steps,
                    timeout,
                    browser: browser.options(),
                    limits: limits.limits(),
                    judge,
                    map: eval.map.clone(),
                    webarena_infinity: true,
                    episode_budget: Budget(eval.max_episode_bytes),
                    browser_per_episode: eval.browser_per_episode,
                },
                parallel: eval.parallel,
                shard: eval.shard.as_deref().map(Shard::parse).transpose()?,
                layout: eval.layout,
                progress: !eval.json && std::io::IsTerminal::is_terminal(&std::io::stderr()),
            };
            let summary = until_stopped(trace_replay::batch::run(&source, &eval.out, &options))?;
            print_summary(&summary, eval.json, &eval.out)
        }
        Command::Audit {
            source,
            out,
            prune,
            llm,
            llm_cache,
            parallel,
            json,
            skip_proxy,
            browser_per_run,
            browser,
            limits,
        } => {
            anyhow::ensure!(parallel > 0, "--parallel takes at least 1");
            trace_replay::chromium::find(browser.chromium.as_deref())
                .map_err(|error| Error::NoBrowser(format!("{error:#}")))?;
            let proposer = match &llm {
                Some(model) => Some(trace_replay::proposals::Proposer::from_env(model, llm_cache)?),
                None => None,
            };
            let options = AuditOptions {
                episode: EvalOptions {
                    agent: Agent::Human,
                    agent_name: "human".to_owned(),
                    max_steps: None,
                    timeout: Duration::from_secs(600),
                    browser: browser.options(),
                    limits: limits.limits(),
                    judge: None,
                    map: None,
                    webarena_infinity: false,
                    episode_budget: Budget::default(),
                    browser_per_episode: browser_per_run,
                },
                prune,
                parallel,
                proposer,
                through_proxy: !skip_proxy,
            };
            let audits = until_stopped(trace_replay::audit::audit_tasks(&source, &out, &options, |audit| {
                if !json {
                    print!("{}", trace_analysis::audit::table(audit));
                }
            }))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&audits)?);
            } else {
                println!("audits in {}", out.display());
            }
            match audits.iter().filter(|audit| !audit.valid).count() {
                0 => Ok(()),
                invalid => Err(Error::Invalid(invalid).into()),
            }
        }
        Command::Chromium { chromium, arguments } => {
            let chromium = trace_replay::chromium::find(chromium.as_deref())
                .map_err(|error| Error::NoBrowser(format!("{error:#}")))?;
            match trace_replay::chromium::exec_offline(Some(&chromium), &arguments)? {}
        }
        #[cfg(target_os = "linux")]
        Command::AgentKeeper { command } => trace_replay::processes::keep_agent(&command),
        #[cfg(not(target_os = "linux"))]
        Command::AgentKeeper { .. } => anyhow::bail!("an agent's keeper runs on Linux only"),
        Command::EvalMerge { runs, out, json } => {
            let summary = until_stopped(trace_replay::batch::merge(&runs, out.as_deref()))?;
            print_summary(&summary, json, out.as_deref().unwrap_or(&runs[0]))
        }
        Command::Run { bundle, human, json, step_timeout, browser, limits } => {
            anyhow::ensure!(human, "say --human: the recorded demonstration is the only runner built in");
            let run_options =
                RunOptions { step_timeout: seconds(step_timeout, "--step-timeout")?, ..RunOptions::default() };
            let options = browser.options();
            let rerun = trace_replay::run::rerun_demonstration(&bundle, limits.limits(), &options, run_options);
            let report = until_stopped(rerun)?;
            print_output(json, &report, trace_replay::run::text)?;
            if report.is_faithful() { Ok(()) } else { Err(Error::Unfaithful.into()) }
        }
    }
}

/// `value` as one pretty JSON object with `--json`, else as `text` says it.
fn print_output<T: serde::Serialize>(json: bool, value: &T, text: impl FnOnce(&T) -> String) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(value)?);
    } else {
        print!("{}", text(value));
    }
    Ok(())
}

fn print_summary(summary: &trace_manifest::eval::EvalSummary, json: bool, run: &str) -> anyhow::Result<()> {
    print_output(json, summary, |summary| format!("{}\nresults in {run}\n", trace_replay::batch::summary_line(summary)))
}

/// The positive number of seconds `value` given to `flag`, as a duration.
fn seconds(value: f64, flag: &str) -> anyhow::Result<Duration> {
    anyhow::ensure!(value.is_finite() && value > 0.0, "{flag} takes a positive number of seconds");
    Ok(Duration::from_secs_f64(value))
}
