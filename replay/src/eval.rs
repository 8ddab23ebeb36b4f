//! `trace-replay eval`: one episode of an agent on a replayed bundle, recorded and scored.
//!
//! The bundle is served as `serve` serves it, with the session recorded ([`crate::session`]). The agent is
//! a command line run by the shell, with the task in its environment (see [`Episode::environment`]); it
//! reaches the browser through a loopback port of the runner's that forwards to Chromium's DevTools port,
//! so that an agent that never connected is told apart from one that did nothing. It is stopped at the
//! time or step limit, its process group and all.
//!
//! The agent is an untrusted program, and its episode must end however it behaves. Its output goes to
//! `agent.log` through a pipe read to its end, keeping the first and last few MiB and saying how much was
//! cut between them (`AgentLog`). When it ends, its process group is killed, then whatever it detached
//! from the group ([`crate::processes`]). Its answer files are read as files only, never through a link or
//! from a FIFO, and up to a size (`read_agent_file`); one that is refused is the agent's fault, said in
//! the result's `error`.
//!
//! The built-in `human` agent re-runs the person's demonstration ([`crate::run`]) and writes the re-run's
//! report (`rerun.json`); the built-in `nothing` agent opens the start page and does nothing (the baseline
//! every checkpoint must fail); the audit ([`crate::audit`]) runs perturbed demonstrations too.
//!
//! Then the session is processed by the code that processes a person's recording (`trace_analysis`):
//! its trajectory, its HAR (with text bodies inline, as WebArena Verified reads them), its evidence, and
//! the scores of `trace_analysis::score` against the bundle's checkpoints, answer and rubric, and, when
//! asked for, the judge's verdicts ([`crate::judge`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use trace_analysis::evidence::Evidence;
use trace_analysis::{postprocess, score, trajectory, webarena_infinity};
use trace_bundle::archive::{self, Bundle, ZipLimits};
use trace_manifest::audit::AuditSummary;
use trace_manifest::bundle::{self, TaskInfo};
use trace_manifest::dataset;
use trace_manifest::eval::{
    self as files, AgentDone, AgentResponse, CheckpointScores, EpisodeEnd, EvalResult, ResponseStatus,
    ResponseTaskType, Rubric, RubricScores, Served, Spl, StepBasis,
};
use trace_manifest::event::EventKind;
use trace_manifest::har::Har;
use trace_manifest::postprocess::{CHECKPOINTS_FILE, Checkpoint, Predicate, TRAJECTORY_FILE};
use trace_manifest::task::{TaskStatus, TaskType};
use trace_manifest::time_fmt::{now_ms, rfc3339_from_millis};
use trace_manifest::trajectory::{Credential, ToolAction, ToolCall, Trajectory};
use trace_store::atomic;

use crate::archive::{ReplayArchive, open_bundle};
use crate::browsers::Browsers;
use crate::judge::{self, Judge};
use crate::responder::Stats;
use crate::run::{OffPathWaits, RunOptions, run_human};
use crate::serve::{Options, Replay};
use crate::session::{self, Captures, SessionRecorder};
use crate::tasks::TaskSource;

/// Who acts in the episode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agent {
    /// The person's demonstration, re-run.
    Human,
    /// The person's demonstration with one step left out or its value altered.
    Perturbed(Perturbation),
    /// Opens the start page and does nothing.
    Nothing,
    /// A command line, run by `sh -c`.
    Command(String),
}

/// How the audit changes the demonstration (`trace_analysis::audit::perturbations`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Perturbation {
    /// The call at this index is left out.
    StepLeftOut(usize),
    /// The value the call at this index typed or chose is altered ([`RunOptions::alter_step`]).
    ValueAltered(usize),
    /// The credential the call at this index typed is altered, and the re-run stops once a later step
    /// fails ([`RunOptions::stop_after_failure`]).
    CredentialAltered(usize),
}

impl Perturbation {
    /// The index of the call perturbed: once it is left out, the index of the call after it, where the run
    /// may first act otherwise than the person did.
    pub fn step(self) -> usize {
        match self {
            Perturbation::StepLeftOut(step)
            | Perturbation::ValueAltered(step)
            | Perturbation::CredentialAltered(step) => step,
        }
    }
}

impl Agent {
    pub fn parse(text: &str) -> Agent {
        match text {
            "human" => Agent::Human,
            "nothing" => Agent::Nothing,
            _ => Agent::Command(text.to_owned()),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Agent::Human => "human",
            Agent::Perturbed(Perturbation::StepLeftOut(_)) => "human, a step left out",
            Agent::Perturbed(Perturbation::ValueAltered(_)) => "human, a value altered",
            Agent::Perturbed(Perturbation::CredentialAltered(_)) => "human, a wrong credential",
            Agent::Nothing => "nothing",
            Agent::Command(command) => command,
        }
    }

    /// A short name for the agent, where a model's name goes: `human`, `nothing`, or the name of the script
    /// its command runs (`python agents/planner.py --fast` → `planner`), else of its program.
    pub fn short_name(&self) -> String {
        let command = match self {
            Agent::Human | Agent::Perturbed(_) => return "human".to_owned(),
            Agent::Nothing => return "nothing".to_owned(),
            Agent::Command(command) => command,
        };
        let words: Vec<&str> = command.split_whitespace().collect();
        let script = words.iter().find(|word| {
            [".py", ".js", ".mjs", ".cjs", ".ts", ".sh"].iter().any(|extension| word.ends_with(extension))
        });
        let word = script.or(words.first()).copied().unwrap_or("agent");
        let file = word.rsplit('/').next().unwrap_or(word);
        dataset::model_name(file.split('.').next().unwrap_or(file))
    }
}

#[derive(Debug, Clone)]
pub struct EvalOptions {
    pub agent: Agent,
    /// The agent's name where a model's goes (WebArena-Infinity's layout).
    pub agent_name: String,
    /// Stop the agent once it has taken more steps than this.
    pub max_steps: Option<usize>,
    /// Stop the agent after this long.
    pub timeout: Duration,
    pub browser: Options,
    pub limits: ZipLimits,
    /// The optional judge (`--judge MODEL`), shared by the episodes of a run.
    pub judge: Option<Arc<Judge>>,
    /// An environment map's folder (`trace-host map`), handed to the agent as `TRACE_MAP`.
    pub map: Option<PathBuf>,
    /// Also write the episode in WebArena-Infinity's layout, beside the task's outputs.
    pub webarena_infinity: bool,
    /// What the episode's session keeps of the bodies that cross it ([`session::bodies`]).
    pub episode_budget: session::Budget,
    /// Launch a browser for every episode, its pages in the browser's default context, rather than keep
    /// browsers and give each episode a context of its own ([`crate::browsers`]).
    pub browser_per_episode: bool,
}

/// What the bundle says the task is and what reaching it looks like.
#[derive(Clone)]
pub struct Reference {
    pub task: TaskInfo,
    pub calls: Vec<ToolCall>,
    pub credentials: Vec<Credential>,
    pub checkpoints: Vec<Checkpoint>,
    pub rubric: Option<Rubric>,
    /// The verdict of the bundle's audit, as its manifest carries it.
    pub audit: Option<AuditSummary>,
}

impl Reference {
    /// Reads the bundle's task, demonstration, checkpoints (derived when it was never processed) and rubric.
    pub fn read(path: &Path, limits: ZipLimits) -> Result<Reference> {
        Reference::of_bundle(&mut open_bundle(path, limits)?)
    }

    /// [`Reference::read`] from a bundle already open, which goes on to serve the episode: its snapshot
    /// pack, if deriving the checkpoints unpacked it, is not unpacked again.
    pub fn of_bundle(bundle: &mut Bundle) -> Result<Reference> {
        let path = bundle.path().to_owned();
        let manifest = bundle.manifest()?;
        let task = manifest.task.clone();
        let audit = manifest.audit.clone();
        let checkpoints = if bundle.contains(CHECKPOINTS_FILE) {
            serde_json::from_slice(&bundle.read(CHECKPOINTS_FILE)?)
                .with_context(|| format!("{CHECKPOINTS_FILE} of {} does not parse", path.display()))?
        } else {
            postprocess::derive(&task, &Evidence::load_recording(bundle)?).checkpoints
        };
        let rubric = if bundle.contains(files::RUBRIC_FILE) {
            let rubric: Rubric = serde_json::from_slice(&bundle.read(files::RUBRIC_FILE)?)
                .with_context(|| format!("{} of {} does not parse", files::RUBRIC_FILE, path.display()))?;
            if let Some(item) = rubric.items.iter().find(|item| !(item.weight.is_finite() && item.weight > 0.0)) {
                bail!("the rubric item {} has the weight {}; weights are positive", item.id, item.weight);
            }
            Some(rubric)
        } else {
            None
        };
        let (calls, credentials) = trajectory::of_bundle(bundle)?;
        Ok(Reference { task, calls, credentials, checkpoints, rubric, audit })
    }

    /// What a session earned, from what it holds (`evidence`, judged with the task's credentials:
    /// [`Evidence::judged_with_credentials`]), the agent's answer, and how many steps it took: the scores
    /// of `result.json`.
    pub fn score(&self, evidence: &Evidence, answer: Option<&str>, steps: usize) -> Scores {
        let checkpoints = score::checkpoints(&self.checkpoints, evidence);
        let (success, success_basis) = match (self.task.task_type, &self.task.answer) {
            (TaskType::InformationRetrieval, Some(expected)) => {
                let given = answer.unwrap_or_default();
                let matched = score::answers_match(expected, given);
                (
                    matched,
                    format!("the answer {given:?} {} the person's", if matched { "equals" } else { "differs from" }),
                )
            }
            (TaskType::InformationRetrieval, None) => {
                (false, "the recording holds no answer to compare the agent's with".to_owned())
            }
            (TaskType::Action, _) => score::action_success(&checkpoints),
        };
        let rubric = score::rubric(self.rubric.as_ref(), &self.checkpoints, evidence);
        let spl = score::spl(&rubric, steps, score::navigation_spl(success, steps, self.person_steps()));
        Scores { checkpoints, success, success_basis, rubric, spl }
    }

    /// The person's steps, counted as an agent's are ([`count_steps`]): the demonstration's path length.
    pub fn person_steps(&self) -> usize {
        Reference::count_person_steps(&self.calls)
    }

    /// The steps of `calls` of the person's (all of the demonstration's, or some left out), their first
    /// call, the opening of the start page, not counted.
    fn count_person_steps(calls: &[ToolCall]) -> usize {
        count_steps(calls, |index, call| index == 0 && matches!(call.action, ToolAction::Navigate { .. }))
    }

    /// The task's start: the URL the demonstration first navigated to.
    pub fn start_url(&self) -> Option<&str> {
        first_navigation(&self.calls)
    }
}

/// The URL the demonstration first navigated to.
fn first_navigation(calls: &[ToolCall]) -> Option<&str> {
    calls.iter().find_map(|call| match &call.action {
        ToolAction::Navigate { url } => Some(url.as_str()),
        _ => None,
    })
}

/// Where an episode starts: the demonstration's first navigation, else the task's website. The one rule
/// for `eval` and for BrowserGym's tasks (`trace-replay list`): a web page only (`http` or `https`), since
/// the agent is shown its first page, and a bundle starting at a local file (`file://`) or a browser's
/// own page would show it what is outside the replay.
pub fn episode_start(calls: &[ToolCall], website: &str) -> Result<String> {
    let url = first_navigation(calls).unwrap_or(website);
    match url::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => Ok(url.to_owned()),
        _ => bail!("the task starts at {url:?}, which is no web page (http or https): an agent is shown nothing else"),
    }
}

/// A task of `source` ([`crate::tasks::tasks`]) as `eval` would run it: its bundle's absolute path and
/// where its episode starts ([`episode_start`]), read from the bundle.
pub fn task_to_run(task: &TaskSource, limits: ZipLimits) -> Result<trace_manifest::report::TaskToRun> {
    let mut bundle = Bundle::open_with_limits(&task.bundle, limits)
        .with_context(|| format!("cannot open the bundle {} of task {}", task.bundle.display(), task.task_id))?;
    let manifest = bundle.manifest()?;
    let (calls, _) = trajectory::of_bundle(&mut bundle)?;
    Ok(trace_manifest::report::TaskToRun {
        task_id: task.task_id.clone(),
        bundle: absolute(&task.bundle)?,
        description: task.description.clone(),
        task_type: task.task_type,
        website: task.website.clone(),
        start_url: episode_start(&calls, &manifest.task.website).with_context(|| format!("task {}", task.task_id))?,
        paths: manifest.audit.map(|audit| audit.paths).unwrap_or_default(),
    })
}

/// Scores an episode that `serve --proxy-port --episode DIR` recorded (`DIR/session/`, `DIR/served.json`),
/// as `eval` scores its own, with the agent's `answer` and its `steps` (the actions it took, which its
/// harness knows: BrowserGym's package passes them); writes and returns `DIR/result.json`. The session
/// holds what crossed the proxy: requests, the documents the browser was sent, and the pages its tabs
/// reached, but no actions: without `steps`, the agent's pages after the first stand in for them, fewer
/// than its actions whenever it acted within a page, and the result says so in `step_basis`.
pub fn score_proxied(
    bundle: &Path,
    episode: &Path,
    answer: Option<String>,
    steps: Option<usize>,
    limits: ZipLimits,
) -> Result<EvalResult> {
    score_proxied_with(&Reference::read(bundle, limits)?, episode, answer, steps, limits)
}

/// [`score_proxied`] against a reference already read (the audit's proxy run has it from its own open).
pub fn score_proxied_with(
    reference: &Reference,
    episode: &Path,
    answer: Option<String>,
    steps: Option<usize>,
    limits: ZipLimits,
) -> Result<EvalResult> {
    let served_file = episode.join(files::SERVED_FILE);
    let served: Served = serde_json::from_slice(
        &std::fs::read(&served_file).with_context(|| format!("cannot read {}", served_file.display()))?,
    )
    .with_context(|| format!("{} does not parse", served_file.display()))?;
    let session = episode.join(files::SESSION_DIR);
    let mut bundle = Bundle::open_with_limits(&session, limits)
        .with_context(|| format!("cannot open the session {}", session.display()))?;
    let evidence = Evidence::load(&mut bundle)?.judged_with_credentials(&reference.credentials);
    let pages = || {
        let reached = evidence
            .events
            .iter()
            .filter(|record| matches!(&record.event.kind, EventKind::Navigation(navigation) if navigation.main_frame));
        reached.count().saturating_sub(1)
    };
    let (steps, step_basis) = match steps {
        Some(steps) => (steps, StepBasis::Actions),
        None => (pages(), StepBasis::Pages),
    };
    let Scores { checkpoints, success, success_basis, rubric, spl } =
        reference.score(&evidence, answer.as_deref(), steps);
    let result = EvalResult {
        task_id: reference.task.id.clone(),
        website: reference.task.website.clone(),
        task_type: reference.task.task_type,
        description: reference.task.description.clone(),
        agent: "proxied".to_owned(),
        started_at: served.started_at,
        duration_seconds: served.duration_seconds,
        ended: EpisodeEnd::Proxied,
        error: None,
        steps,
        step_basis,
        said_done: answer.is_some(),
        answer,
        success: if success { 1.0 } else { 0.0 },
        success_basis,
        checkpoints,
        rubric,
        spl,
        requests: served.requests,
        live_attempts: served.live_attempts,
        bodies_left_out: served.bodies_left_out,
        judge: None,
        audit: reference.audit.clone(),
    };
    write_json(&episode.join(files::RESULT_FILE), &result)?;
    Ok(result)
}

/// What `trace-replay score` prints of a proxied episode's `result` (in `episode`): its verdict, and
/// where its `result.json` is.
pub fn proxied_text(result: &EvalResult, episode: &Path) -> String {
    format!(
        "{}: success {} ({}); checkpoints {} of {} in order; live attempts {}\nresult: {}\n",
        result.task_id,
        result.success,
        result.success_basis,
        result.checkpoints.reached_in_order,
        result.checkpoints.items.len(),
        result.live_attempts,
        episode.join(files::RESULT_FILE).display()
    )
}

/// The scores of one session ([`Reference::score`]).
pub struct Scores {
    pub checkpoints: CheckpointScores,
    pub success: bool,
    pub success_basis: String,
    pub rubric: RubricScores,
    pub spl: Spl,
}

/// One episode: the task (as its dataset names it), where its outputs go, and how it is run.
pub struct Episode<'a> {
    pub task: &'a TaskSource,
    /// The task's output directory (`RUN/<task>`).
    pub out: &'a Path,
    pub options: &'a EvalOptions,
    /// The task's bundle already open, shared with its other episodes (the audit's runs); `None` opens it
    /// for this episode alone.
    pub opened: Option<&'a OpenedTask>,
}

/// A task's bundle opened and read once, for episodes of the task that run side by side (the audit's): one
/// archive serves them all, its bodies read and kept in memory once ([`ReplayArchive`]'s cache), where each
/// episode opening the bundle for itself would read and keep them once per episode. Each episode still
/// has a responder, a session and a browser context of its own.
#[derive(Clone)]
pub struct OpenedTask {
    pub reference: Reference,
    pub archive: Arc<ReplayArchive>,
}

impl OpenedTask {
    /// Opens `bundle`, reads its [`Reference`] from it, and keeps it open to serve.
    pub fn open(bundle: &Path, limits: ZipLimits) -> Result<OpenedTask> {
        OpenedTask::of_bundle(open_bundle(bundle, limits)?)
    }

    /// [`OpenedTask::open`] from a bundle already open.
    pub fn of_bundle(mut bundle: Bundle) -> Result<OpenedTask> {
        let reference = Reference::of_bundle(&mut bundle)?;
        Ok(OpenedTask { reference, archive: Arc::new(ReplayArchive::from_bundle(bundle)?) })
    }
}

impl Episode<'_> {
    /// Runs the episode, writes its outputs and returns its result. An agent that fails (crashes, hangs,
    /// writes a malformed answer, never connects) gives a result with its `error`; an unusable bundle or
    /// browser is an `Err`.
    pub async fn run(&self) -> Result<EvalResult> {
        let browsers = Browsers::new(self.options.browser.clone(), !self.options.browser_per_episode);
        let result = self.run_in(&browsers).await;
        browsers.close().await;
        result
    }

    /// Runs the episode as [`Episode::run`] does, in one of `browsers`.
    pub async fn run_in(&self, browsers: &Browsers) -> Result<EvalResult> {
        self.prepare().await?.run(None, browsers).await
    }

    /// The episode made ready for its turn: the bundle opened and read (its snapshot pack decoded), unless
    /// the episode was given it open, and the output folder made. A run of many episodes prepares the next
    /// while the ones before it run ([`Prepared::run`]).
    pub async fn prepare(&self) -> Result<Prepared<'_>> {
        // One open bundle serves the episode (its own, or the task's shared one): the reference is read
        // from it, then it is served, and the re-run's captures are read through it ([`run_human`]), so
        // that its snapshot pack is decoded once.
        let OpenedTask { reference, archive } = match self.opened {
            Some(opened) => opened.clone(),
            None => OpenedTask::open(&self.task.bundle, self.options.limits)?,
        };
        let start_url = episode_start(&reference.calls, &reference.task.website)?;
        if self.out.exists() {
            std::fs::remove_dir_all(self.out).with_context(|| format!("cannot clear {}", self.out.display()))?;
        }
        let agent_out = self.out.join("agent");
        std::fs::create_dir_all(&agent_out).with_context(|| format!("cannot create {}", agent_out.display()))?;
        // A perturbed run is judged by its checkpoints alone, which read pages' text: it keeps no pictures.
        let captures = match self.options.agent {
            Agent::Perturbed(_) => Captures::DomOnly,
            _ => Captures::ScreenshotAndDom,
        };
        let session = SessionRecorder::create_with_budget(
            &self.out.join(files::SESSION_DIR),
            self.options.episode_budget,
            captures,
        )?;
        Ok(Prepared { episode: self, reference, archive, start_url, agent_out, session })
    }
}

/// An episode ready for its turn ([`Episode::prepare`]).
pub struct Prepared<'e> {
    episode: &'e Episode<'e>,
    reference: Reference,
    archive: Arc<ReplayArchive>,
    start_url: String,
    agent_out: PathBuf,
    session: Arc<SessionRecorder>,
}

impl Prepared<'_> {
    /// Runs the episode, as [`Episode::run`] says, in one of `browsers` ([`crate::browsers`]): its replayed
    /// clock starts as the agent's turn does. With `turns`, the agent's turn is one of theirs, given back
    /// as soon as the agent is done and the browser's last captures taken: the scoring then goes on
    /// beside the next episode's turn.
    pub async fn run(self, turns: Option<&tokio::sync::Semaphore>, browsers: &Browsers) -> Result<EvalResult> {
        let Prepared { episode, reference, archive, start_url, agent_out, session } = self;
        let turn = match turns {
            Some(turns) => Some(turns.acquire().await.context("the run's turns were closed")?),
            None => None,
        };
        let replay = browsers.episode(archive, session.clone()).await?;
        let started = Instant::now();
        let started_at_ms = now_ms();
        let outcome = episode.agent_outcome(&reference, &start_url, &agent_out, &session, &replay).await;
        last_captures(&replay, &session).await;
        let stats = browsers.give_back(replay).await?;
        drop(turn);
        episode.finish(reference, session, stats, outcome?, started, started_at_ms).await
    }
}

/// The last capture of every tab once the agent is done, the replay quiet and the session caught up.
async fn last_captures(replay: &Replay, session: &Arc<SessionRecorder>) {
    settle(replay).await;
    session.caught_up(replay.browser(), CATCH_UP).await;
    for page in replay.pages().await.unwrap_or_default() {
        // A page that no longer answers (a script that never yields) is left without one.
        match tokio::time::timeout(CATCH_UP, session::capture_page(session, &page, "final")).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::debug!("no final capture: {error:#}"),
            Err(_) => tracing::debug!("no final capture: the page did not answer within {CATCH_UP:?}"),
        }
    }
}

impl Episode<'_> {
    /// What the agent did, in the replayed browser.
    async fn agent_outcome(
        &self,
        reference: &Reference,
        start_url: &str,
        agent_out: &Path,
        session: &Arc<SessionRecorder>,
        replay: &Replay,
    ) -> Result<AgentOutcome> {
        Ok(match &self.options.agent {
            agent @ (Agent::Human | Agent::Perturbed(_)) => {
                let mut calls = reference.calls.clone();
                let mut run_options = RunOptions::default();
                if let Agent::Perturbed(perturbation) = agent {
                    let waits = OffPathWaits { from_step: perturbation.step(), timeout: PERTURBED_WAIT_AFTER_FAILURE };
                    run_options.off_path_waits = Some(waits);
                    run_options.compare_screens = false;
                }
                match agent {
                    Agent::Perturbed(Perturbation::StepLeftOut(step)) if *step < calls.len() => {
                        calls.remove(*step);
                    }
                    Agent::Perturbed(Perturbation::ValueAltered(step)) => run_options.alter_step = Some(*step),
                    Agent::Perturbed(Perturbation::CredentialAltered(step)) => {
                        run_options.alter_step = Some(*step);
                        run_options.stop_after_failure = true;
                    }
                    _ => {}
                }
                let report = run_human(replay, &calls, &reference.credentials, run_options).await;
                if let Ok(report) = &report {
                    write_json(&self.out.join(files::RERUN_FILE), report)?;
                }
                let error = match report {
                    Ok(report) if report.steps_failed == 0 => None,
                    Ok(report) => Some(format!("{} of the person's steps failed in the replay", report.steps_failed)),
                    Err(error) => Some(format!("the re-run failed: {error:#}")),
                };
                let done = AgentDone { text: reference.task.answer.clone(), success: Some(error.is_none()) };
                AgentOutcome {
                    ended: EpisodeEnd::Replayed,
                    error,
                    done: Some(done),
                    response: None,
                    connected: true,
                    // Its steps are the person's it took, not what its session derives from them: a value
                    // the re-run types after a click into its field derives as two calls, as an agent's
                    // would, though the person's one `input` is what it re-ran.
                    steps: Steps::Known(Reference::count_person_steps(&calls)),
                }
            }
            Agent::Nothing => {
                open_start(replay, start_url).await?;
                session.until_first_capture().await;
                settle(replay).await;
                session.caught_up(replay.browser(), CATCH_UP).await;
                AgentOutcome {
                    ended: EpisodeEnd::Idle,
                    error: None,
                    done: None,
                    response: None,
                    connected: true,
                    steps: Steps::FromSession { first_event: session.next_event_id() },
                }
            }
            Agent::Command(command) => {
                open_start(replay, start_url).await?;
                let environment = self.environment(reference, start_url, agent_out)?;
                run_command(replay, session, command, environment, agent_out, self.options).await?
            }
        })
    }

    /// The episode once its agent is done and its browser given back: the session scored and every output
    /// written.
    async fn finish(
        &self,
        reference: Reference,
        session: Arc<SessionRecorder>,
        stats: Stats,
        outcome: AgentOutcome,
        started: Instant,
        started_at_ms: f64,
    ) -> Result<EvalResult> {
        let browser = self.options.browser.chromium.as_ref().map(|path| path.display().to_string());
        let session_task = TaskInfo { status: TaskStatus::Stopped, ..reference.task.clone() };
        let events = session.finish(session_task, browser)?;
        let duration_seconds = started.elapsed().as_secs_f64();

        // The session, processed as a person's recording is.
        let mut bundle = Bundle::open_with_limits(session.dir(), self.options.limits)?;
        // The session's events are in hand: they are not read back from the bundle just written.
        let evidence = Evidence::load_with_events(&mut bundle, events)?.judged_with_credentials(&reference.credentials);
        let answer = outcome.answer();
        let derived = trajectory::derive(self.task.task_id.clone(), &evidence.events, answer.as_deref());
        let steps = outcome.steps(&derived.trajectory.tool_calls);
        let Scores { checkpoints, success, success_basis, rubric, spl } =
            reference.score(&evidence, answer.as_deref(), steps);
        let mut error = outcome.error.clone();
        if !outcome.connected && error.is_none() {
            error = Some("the agent never connected to the browser (TRACE_CDP_URL)".to_owned());
        }
        let mut result = EvalResult {
            task_id: self.task.task_id.clone(),
            website: reference.task.website.clone(),
            task_type: reference.task.task_type,
            description: reference.task.description.clone(),
            agent: self.options.agent.name().to_owned(),
            started_at: rfc3339_from_millis(started_at_ms),
            duration_seconds,
            ended: outcome.ended.clone(),
            error,
            steps,
            step_basis: StepBasis::Actions,
            said_done: outcome.said_done(),
            answer,
            success: if success { 1.0 } else { 0.0 },
            success_basis,
            checkpoints,
            rubric,
            spl,
            requests: stats.request_counts(),
            live_attempts: stats.live_attempts,
            bodies_left_out: session.bodies_left_out(),
            judge: None,
            audit: reference.audit.clone(),
        };
        if let Some(judge) = &self.options.judge {
            let answer = result.answer.clone();
            let episode = trace_analysis::judge::Episode {
                task: &reference.task,
                demonstration: &reference.calls,
                agent_steps: &derived.trajectory.tool_calls,
                answer: answer.as_deref(),
                evidence: &evidence,
            };
            judge::judge_episode(judge, &episode, &reference.checkpoints, reference.rubric.as_ref(), &mut result).await;
        }

        write_json(&self.out.join(TRAJECTORY_FILE), &derived.trajectory)?;
        let demonstration = Trajectory { task_id: reference.task.id.clone(), tool_calls: reference.calls.clone() };
        write_json(&self.out.join(files::DEMONSTRATION_FILE), &demonstration)?;
        let har = network_har(&mut bundle)?;
        write_json(&self.out.join(files::NETWORK_HAR_FILE), &har)?;
        let response_file = self.out.join(files::AGENT_RESPONSE_FILE);
        match &outcome.response {
            Some(raw) => atomic::write(&response_file, |out| Ok(out.write_all(raw)?)).map(drop)?,
            None => write_json(&response_file, &outcome.runner_response(&reference, &result))?,
        }
        write_json(&self.out.join(files::RESULT_FILE), &result)?;
        if self.options.webarena_infinity {
            self.write_webarena_infinity(&reference, &derived.trajectory.tool_calls, &evidence, &mut bundle, &result)?;
        }
        Ok(result)
    }

    /// The episode in WebArena-Infinity's trajectory layout, under `RUN/webarena-infinity/`, the agent's
    /// name as the model.
    fn write_webarena_infinity(
        &self,
        reference: &Reference,
        calls: &[ToolCall],
        evidence: &Evidence,
        session: &mut Bundle,
        result: &EvalResult,
    ) -> Result<()> {
        let environment = dataset::environment_name(&reference.task.website);
        let run = self.out.parent().context("a task's outputs are inside its run")?;
        let dir = run.join(files::WEBARENA_INFINITY_DIR).join(dataset::webarena_task_dir(
            &self.options.agent_name,
            &environment,
            self.task.task_id.as_str(),
        ));
        std::fs::create_dir_all(dir.join("screenshots")).with_context(|| format!("cannot create {}", dir.display()))?;
        let outcome = webarena_infinity::Outcome {
            task_id: self.task.task_id.to_string(),
            instruction: reference.task.description.clone(),
            demonstration_steps: reference.calls.len(),
            passed: result.success > 0.0,
            verifier_message: result.success_basis.clone(),
            elapsed_seconds: result.duration_seconds,
            error: result.error.clone(),
        };
        let start_url = reference.start_url().unwrap_or(&reference.task.website).to_owned();
        let ended_at_ms = calls.last().map_or(0.0, |call| call.ts);
        let task = webarena_infinity::task(calls, evidence, &start_url, ended_at_ms, outcome);
        for (name, file) in &task.screenshots {
            atomic::write(&dir.join(name), |out| Ok(session.copy_to(file, out).map(drop)?))?;
        }
        write_json(&dir.join(dataset::HISTORY_FILE), &task.history)?;
        write_json(&dir.join(dataset::RESULT_FILE), &task.result)
    }

    /// The agent's environment: where the browser is, what to do, where to start, the credentials (in
    /// browser-use's `sensitive_data` shape, placeholder name → value), and where to write its answer.
    fn environment(&self, reference: &Reference, start_url: &str, agent_out: &Path) -> Result<Vec<(String, String)>> {
        let credentials: serde_json::Map<String, serde_json::Value> = reference
            .credentials
            .iter()
            .map(|credential| (placeholder_name(&credential.placeholder()), credential.value.clone().into()))
            .collect();
        let credentials_file = self.out.join("credentials.json");
        write_json(&credentials_file, &credentials)?;
        let task_type = match reference.task.task_type {
            TaskType::Action => "action",
            TaskType::InformationRetrieval => "information_retrieval",
        };
        let mut environment = vec![
            ("TRACE_TASK".to_owned(), reference.task.description.clone()),
            ("TRACE_TASK_ID".to_owned(), self.task.task_id.to_string()),
            ("TRACE_TASK_TYPE".to_owned(), task_type.to_owned()),
            ("TRACE_START_URL".to_owned(), start_url.to_owned()),
            ("TRACE_CREDENTIALS".to_owned(), absolute(&credentials_file)?.display().to_string()),
            ("TRACE_OUT".to_owned(), absolute(agent_out)?.display().to_string()),
        ];
        if let Some(map) = &self.options.map {
            environment.push(("TRACE_MAP".to_owned(), absolute(map)?.display().to_string()));
        }
        Ok(environment)
    }
}

/// `{{credentials.example.com.password}}` → `example.com.password`: the key an agent's `sensitive_data`
/// uses, which the trajectory's placeholder wraps.
fn placeholder_name(placeholder: &str) -> String {
    placeholder.trim_start_matches("{{").trim_end_matches("}}").trim_start_matches("credentials.").to_owned()
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot resolve {}", path.display()))
}

/// `value` as pretty JSON at `path`, written whole or not at all ([`atomic::write`]).
fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    atomic::write(path, |out| Ok(serde_json::to_writer_pretty(out, value)?)).map(drop)
}

/// What the agent left: how it ended, what went wrong, what it said.
struct AgentOutcome {
    ended: EpisodeEnd,
    error: Option<String>,
    done: Option<AgentDone>,
    /// Its own `agent_response.json`, as written (kept byte for byte).
    response: Option<Vec<u8>>,
    /// Whether it ever reached the browser.
    connected: bool,
    steps: Steps,
}

/// How an agent's steps are counted ([`count_steps`]).
enum Steps {
    /// The runner knows them: the person's calls the re-run took.
    Known(usize),
    /// From the tool calls its session derives; `first_event` is the first session event that can be the
    /// agent's, the ones before being the runner opening the start page.
    FromSession { first_event: u64 },
}

/// Steps as every path counts them ([`files::Spl`]): the tool calls but the opening of the start page
/// (`initial`, by index and call) and the final `done`.
fn count_steps(calls: &[ToolCall], initial: impl Fn(usize, &ToolCall) -> bool) -> usize {
    calls
        .iter()
        .enumerate()
        .filter(|(index, call)| !initial(*index, call) && !matches!(call.action, ToolAction::Done { .. }))
        .count()
}

impl AgentOutcome {
    /// The agent's steps, of its session's tool calls `calls` unless the runner knows them.
    fn steps(&self, calls: &[ToolCall]) -> usize {
        match self.steps {
            Steps::Known(steps) => steps,
            Steps::FromSession { first_event } => count_steps(calls, |_, call| {
                !call.event_ids.is_empty() && call.event_ids.iter().all(|id| *id < first_event)
            }),
        }
    }

    fn parsed_response(&self) -> Option<AgentResponse> {
        self.response.as_deref().and_then(|raw| serde_json::from_slice(raw).ok())
    }

    fn said_done(&self) -> bool {
        self.done.is_some() || self.parsed_response().is_some_and(|response| response.status == ResponseStatus::Success)
    }

    /// The answer: `done.json`'s text, else what its `agent_response.json` retrieved, joined as a list.
    fn answer(&self) -> Option<String> {
        if let Some(text) = self.done.as_ref().and_then(|done| done.text.clone()) {
            return Some(text);
        }
        let data = self.parsed_response()?.retrieved_data?;
        let items: Vec<String> = data
            .iter()
            .map(|value| match value {
                serde_json::Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .collect();
        Some(items.join(", "))
    }

    /// The `agent_response.json` the runner writes for an agent that wrote none: MUTATE when the task
    /// changes state (a state-changing request or socket frame among its checkpoints), RETRIEVE with the
    /// answer for information retrieval, NAVIGATE otherwise; SUCCESS when the agent said it was done.
    fn runner_response(&self, reference: &Reference, result: &EvalResult) -> AgentResponse {
        let changes_state = reference
            .checkpoints
            .iter()
            .any(|checkpoint| matches!(checkpoint.predicate, Predicate::Request { .. } | Predicate::Frame { .. }));
        let task_type = match reference.task.task_type {
            TaskType::InformationRetrieval => ResponseTaskType::Retrieve,
            TaskType::Action if changes_state => ResponseTaskType::Mutate,
            TaskType::Action => ResponseTaskType::Navigate,
        };
        let said_done = self.done.is_some();
        AgentResponse {
            task_type,
            status: if said_done { ResponseStatus::Success } else { ResponseStatus::UnknownError },
            retrieved_data: (task_type == ResponseTaskType::Retrieve)
                .then(|| result.answer.iter().map(|answer| answer.clone().into()).collect()),
            error_details: result.error.clone().filter(|_| !said_done),
        }
    }
}

/// Runs the agent's command until it exits or a limit stops it, then reads what it wrote.
async fn run_command(
    replay: &Replay,
    session: &SessionRecorder,
    command: &str,
    environment: Vec<(String, String)>,
    agent_out: &Path,
    options: &EvalOptions,
) -> Result<AgentOutcome> {
    let port = AgentPort::open(replay.cdp_endpoint()).await?;
    session.until_first_capture().await;
    settle(replay).await;
    session.caught_up(replay.browser(), CATCH_UP).await;
    let first_event = session.next_event_id();
    // Held from before the agent starts: answers are read from this directory even if the agent replaces
    // its path by a link elsewhere.
    let answers = AnswerDir::open(agent_out)?;
    crate::processes::adopt_orphans();
    let mark = crate::processes::AgentMark::new();
    let (output, output_end) = std::io::pipe().context("cannot make a pipe for the agent's output")?;
    let log = AgentLog::start(&agent_out.join(AGENT_LOG_FILE), output)?;
    // Under its keeper: however trace-replay ends, even killed, the agent ends with it.
    let crate::processes::KeptAgent { command: mut shell, lifeline, reading_end } =
        crate::processes::kept_agent(command).context("cannot prepare the agent's keeper")?;
    shell
        .envs(environment)
        .env("TRACE_CDP_URL", format!("http://127.0.0.1:{}", port.port))
        .env(mark.variable().0, mark.variable().1)
        .stdin(std::process::Stdio::null())
        .stdout(output_end.try_clone().context("cannot share the agent's output pipe")?)
        .stderr(output_end)
        .process_group(0)
        .kill_on_drop(true);
    let mut child = crate::processes::spawn_known(|| shell.spawn(), tokio::process::Child::id)
        .with_context(|| format!("cannot start the agent {command:?}"))?;
    // The command holds the pipe's writing end until dropped: the log would never see its end.
    drop(shell);
    drop(reading_end);
    let shell_id = child.id();
    let running =
        RunningGroup { group: process_group(&child), shell: shell_id, mark: Some(mark), lifeline: Some(lifeline) };
    let deadline = Instant::now() + options.timeout;
    let ended = loop {
        if let Some(status) = child.try_wait()? {
            break EpisodeEnd::Exited { code: status.code() };
        }
        if Instant::now() >= deadline {
            break EpisodeEnd::Timeout { seconds: options.timeout.as_secs_f64() };
        }
        if let Some(max) = options.max_steps
            && session.actions() > max
        {
            break EpisodeEnd::MaxSteps { steps: max };
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    if !matches!(ended, EpisodeEnd::Exited { .. }) {
        stop(&mut child).await;
    }
    // What the agent left running (its group, and what it detached) is ended before its files are read.
    tokio::task::spawn_blocking(move || running.ended()).await.context("ending the agent's processes")?;
    log.finish().await;
    let connected = port.connections.load(Ordering::SeqCst) > 0;
    port.close();

    let mut errors = Vec::new();
    match &ended {
        EpisodeEnd::Exited { code: Some(0) } => {}
        EpisodeEnd::Exited { code: Some(code) } => errors.push(format!("the agent exited with code {code}")),
        EpisodeEnd::Exited { code: None } => errors.push("the agent was killed by a signal".to_owned()),
        EpisodeEnd::Timeout { seconds } => errors.push(format!("the agent was stopped after {seconds} s (--timeout)")),
        EpisodeEnd::MaxSteps { steps } => {
            errors.push(format!("the agent was stopped past {steps} steps (--max-steps)"))
        }
        EpisodeEnd::Replayed | EpisodeEnd::Idle | EpisodeEnd::Proxied => {}
    }
    let done = parse_answer_file::<AgentDone>(files::DONE_FILE, answers.read(files::DONE_FILE).await)
        .unwrap_or_else(|error| {
            errors.push(error);
            None
        })
        .map(|(done, _)| done);
    // Kept as the agent wrote it, byte for byte, once it is known to parse.
    let response =
        parse_answer_file::<AgentResponse>(files::AGENT_RESPONSE_FILE, answers.read(files::AGENT_RESPONSE_FILE).await)
            .unwrap_or_else(|error| {
                errors.push(error);
                None
            })
            .map(|(_, raw)| raw);
    if done.is_none() && response.is_none() && errors.is_empty() {
        errors.push(format!(
            "the agent wrote no answer ({} or {} in TRACE_OUT)",
            files::DONE_FILE,
            files::AGENT_RESPONSE_FILE
        ));
    }
    let error = (!errors.is_empty()).then(|| errors.join("; "));
    Ok(AgentOutcome { ended, error, done, response, connected, steps: Steps::FromSession { first_event } })
}

/// Opens the start page as the only page: the browser's own first tab (a new-tab page) would be one more
/// page for an agent to choose from, and some agents take the first they see.
async fn open_start(replay: &Replay, start_url: &str) -> Result<()> {
    let start = replay.open(start_url).await?;
    for page in replay.browser().pages().await? {
        if page.target_id() != start.target_id() {
            let _ = page.close().await;
        }
    }
    Ok(())
}

/// The agent's processes while the episode runs: its process group, its shell, and its mark
/// ([`crate::processes::AgentMark`]). An episode dropped before its end (trace-replay asked to stop) kills
/// the whole group, not only the shell `kill_on_drop` knows of, then what the agent detached.
struct RunningGroup {
    group: Option<rustix::process::Pid>,
    shell: Option<u32>,
    mark: Option<crate::processes::AgentMark>,
    /// The agent's keeper's lifeline ([`crate::processes::kept_agent`]), closed when the episode ends.
    lifeline: Option<std::io::PipeWriter>,
}

impl RunningGroup {
    /// The episode ended as it should, the agent waited for or stopped: what it left in its group and
    /// what it detached are ended (this blocks for as long as that takes, [`crate::processes::end_orphans`]).
    fn ended(self) {
        // Dropped: the same as an episode dropped before its end.
    }
}

impl Drop for RunningGroup {
    fn drop(&mut self) {
        // The keeper ends what the agent left, wherever it is, once its lifeline closes.
        drop(self.lifeline.take());
        if let Some(group) = self.group {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        if let Some(shell) = self.shell {
            crate::processes::forget(shell);
        }
        // Said done last: its orphans are then ended.
        drop(self.mark.take());
    }
}

/// Stops the agent's whole process group: politely, then for good.
async fn stop(child: &mut tokio::process::Child) {
    if let Some(group) = process_group(child) {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::TERM);
        if tokio::time::timeout(Duration::from_secs(3), child.wait()).await.is_ok() {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            return;
        }
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
    let _ = child.kill().await;
}

/// The process group the agent leads (it was started with `process_group(0)`), while it runs.
fn process_group(child: &tokio::process::Child) -> Option<rustix::process::Pid> {
    child.id().and_then(|id| rustix::process::Pid::from_raw(id as i32))
}

/// The file the agent's standard output and error go to, in `TRACE_OUT`.
pub const AGENT_LOG_FILE: &str = "agent.log";
/// How much of the start of the agent's output its log keeps.
pub const AGENT_LOG_HEAD_BYTES: usize = 2 << 20;
/// How much of the end of the agent's output its log keeps, past its start.
pub const AGENT_LOG_TAIL_BYTES: usize = 2 << 20;
/// How large an answer file of the agent's (`done.json`, `agent_response.json`) may be: an answer and
/// the data it retrieved, with room to spare.
pub const AGENT_FILE_MAX_BYTES: u64 = 4 << 20;

/// The agent's output, written to its log as it comes, up to [`AGENT_LOG_HEAD_BYTES`]; past that only the
/// last [`AGENT_LOG_TAIL_BYTES`] are kept, in memory, and written after a line saying how many bytes were
/// cut, when the episode ends. The pipe is read to its end all along, so that the agent never blocks on a
/// full pipe, however much it writes.
struct AgentLog {
    state: Arc<std::sync::Mutex<LogState>>,
    reader: std::thread::JoinHandle<()>,
}

struct LogState {
    file: std::fs::File,
    head: usize,
    tail: std::collections::VecDeque<u8>,
    cut: u64,
    finished: bool,
}

impl AgentLog {
    fn start(path: &Path, mut output: std::io::PipeReader) -> Result<AgentLog> {
        let file = std::fs::File::create(path).context("cannot create the agent's log")?;
        let state = Arc::new(std::sync::Mutex::new(LogState {
            file,
            head: 0,
            tail: std::collections::VecDeque::new(),
            cut: 0,
            finished: false,
        }));
        let shared = state.clone();
        let reader = std::thread::Builder::new()
            .name("agent-log".to_owned())
            .spawn(move || {
                let mut buffer = vec![0u8; 64 << 10];
                loop {
                    match std::io::Read::read(&mut output, &mut buffer) {
                        Ok(0) => break,
                        Ok(n) => lock(&shared).take(&buffer[..n]),
                        Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                lock(&shared).finish();
            })
            .context("cannot start a thread to read the agent's output")?;
        Ok(AgentLog { state, reader })
    }

    /// Completes the log once the agent is gone: what its processes wrote until the pipe closed, a moment
    /// at most (a process that escaped with the pipe would hold it open for good).
    async fn finish(self) {
        let deadline = Instant::now() + Duration::from_secs(2);
        while !self.reader.is_finished() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        lock(&self.state).finish();
    }
}

impl LogState {
    fn take(&mut self, mut bytes: &[u8]) {
        if self.finished {
            return;
        }
        let room = AGENT_LOG_HEAD_BYTES - self.head;
        if room > 0 {
            let head = &bytes[..room.min(bytes.len())];
            if let Err(error) = std::io::Write::write_all(&mut self.file, head) {
                tracing::warn!("cannot write the agent's log: {error}");
            }
            self.head += head.len();
            bytes = &bytes[head.len()..];
        }
        self.tail.extend(bytes);
        let over = self.tail.len().saturating_sub(AGENT_LOG_TAIL_BYTES);
        if over > 0 {
            self.tail.drain(..over);
            self.cut += over as u64;
        }
    }

    fn finish(&mut self) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        let mut end = Vec::with_capacity(self.tail.len() + 200);
        if self.cut > 0 {
            end.extend_from_slice(
                format!(
                    "\n[trace-replay: {} bytes of the agent's output cut here; the log keeps its first {} and its \
                     last {} bytes]\n",
                    self.cut, AGENT_LOG_HEAD_BYTES, AGENT_LOG_TAIL_BYTES
                )
                .as_bytes(),
            );
        }
        end.extend(self.tail.drain(..));
        if let Err(error) = std::io::Write::write_all(&mut self.file, &end) {
            tracing::warn!("cannot write the agent's log: {error}");
        }
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How long reading the agent's answer files may take (a regular file of at most
/// [`AGENT_FILE_MAX_BYTES`] takes far less, but a file can be served by anything, FUSE included).
const ANSWER_READ_TIME: Duration = Duration::from_secs(10);

/// The agent's `TRACE_OUT`, where it writes its answer, opened before it starts.
struct AnswerDir(Arc<std::os::fd::OwnedFd>);

impl AnswerDir {
    fn open(agent_out: &Path) -> Result<AnswerDir> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let dir = rustix::fs::open(agent_out, flags, Mode::empty())
            .with_context(|| format!("cannot open {}", agent_out.display()))?;
        Ok(AnswerDir(Arc::new(dir)))
    }

    /// One of the agent's answer files ([`read_agent_file`]), within [`ANSWER_READ_TIME`].
    async fn read(&self, name: &'static str) -> Result<Option<Vec<u8>>, String> {
        let dir = self.0.clone();
        let reading = tokio::task::spawn_blocking(move || read_agent_file(&dir, name));
        match tokio::time::timeout(ANSWER_READ_TIME, reading).await {
            Ok(Ok(read)) => read,
            Ok(Err(error)) => Err(format!("the agent's {name} could not be read: {error}")),
            Err(_) => Err(format!(
                "the agent's {name} could not be read within {ANSWER_READ_TIME:?}: write it as a plain file in \
                 TRACE_OUT"
            )),
        }
    }
}

/// One of the agent's answer files in its directory `dir`, `Ok(None)` when it wrote none. Read as the
/// agent's untrusted output: only a regular file, not through a link (`O_NOFOLLOW`), opened without
/// waiting for a writer (`O_NONBLOCK`: a FIFO would block the open) and up to [`AGENT_FILE_MAX_BYTES`];
/// what is refused is said as the agent's fault.
fn read_agent_file(dir: &std::os::fd::OwnedFd, name: &str) -> Result<Option<Vec<u8>>, String> {
    use std::io::ErrorKind;
    let refused = |why: String| format!("the agent's {name} {why}: write it as a plain file in TRACE_OUT");
    let mut file = match archive::open_beneath_folder(dir, name) {
        Ok(file) => file,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
        Err(error) if archive::is_link_refused(&error) => return Err(refused("is a symbolic link".to_owned())),
        Err(error) if error.kind() == ErrorKind::InvalidInput => {
            return Err(refused(format!("cannot be taken: {error}")));
        }
        Err(error) => return Err(refused(format!("cannot be opened ({error})"))),
    };
    let mut bytes = Vec::new();
    match archive::copy_file_bounded(&mut file, AGENT_FILE_MAX_BYTES, &mut bytes) {
        Ok(_) => Ok(Some(bytes)),
        Err(archive::BoundedCopyError::Io(error)) => Err(refused(format!("cannot be read ({error})"))),
        // Too large by its size, or grown past the limit while it was read.
        Err(_) => Err(refused(format!("is larger than {} MiB", AGENT_FILE_MAX_BYTES >> 20))),
    }
}

/// One of the agent's answer files, as [`AnswerDir::read`] read it, parsed as a `T`: the parsed answer and
/// its bytes, `Ok(None)` when the agent wrote none, and what went wrong (it could not be read, it does not
/// parse) as the agent's fault, for the result's `error`.
fn parse_answer_file<T: serde::de::DeserializeOwned>(
    name: &str,
    read: Result<Option<Vec<u8>>, String>,
) -> Result<Option<(T, Vec<u8>)>, String> {
    let Some(raw) = read? else { return Ok(None) };
    match serde_json::from_slice::<T>(&raw) {
        Ok(parsed) => Ok(Some((parsed, raw))),
        Err(error) => Err(format!("the agent's {name} is malformed: {error}")),
    }
}

/// The longest each wait of a perturbed run takes once it has left the person's path ([`OffPathWaits`]):
/// in the demo's audit, each failed step after a left-out one had waited the whole 10 s for an element
/// that never came.
const PERTURBED_WAIT_AFTER_FAILURE: Duration = Duration::from_secs(3);

/// How long the session may take to handle what the browser sent before an episode starts or ends.
const CATCH_UP: Duration = Duration::from_secs(10);

/// Waits for the replay to go quiet (the agent's last action's requests answered), a few seconds at most.
async fn settle(replay: &Replay) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline && replay.responder().quiet_for() < Duration::from_millis(500) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The agent's door to the browser: a loopback port forwarding to Chromium's DevTools port, counting the
/// connections made through it. (Chromium's `/json/version` names the WebSocket by the `Host` the request
/// came to, so a client that starts from the HTTP endpoint stays on this port.)
struct AgentPort {
    port: u16,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl AgentPort {
    async fn open(cdp_endpoint: &str) -> Result<AgentPort> {
        let url = url::Url::parse(cdp_endpoint).context("the browser's DevTools endpoint")?;
        let upstream = format!("{}:{}", url.host_str().unwrap_or("127.0.0.1"), url.port().unwrap_or(9222));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.context("cannot open the agent's port")?;
        let port = listener.local_addr()?.port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let task = tokio::spawn(async move {
            // The connections die with this task: an agent's connection must not outlive its episode in a
            // browser kept for the next one.
            let mut forwarded = tokio::task::JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let upstream = upstream.clone();
                forwarded.spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                while forwarded.try_join_next().is_some() {}
            }
        });
        Ok(AgentPort { port, connections, task })
    }

    fn close(self) {
        self.task.abort();
    }
}

/// The largest body [`network_har`] puts inline: real forms, JSON and pages are far smaller, and a body a
/// page made huge stays a file rather than making the HAR as large.
const MAX_NETWORK_HAR_INLINE_BYTES: u64 = 4 << 20;
/// The most body text [`network_har`] puts inline in all.
const MAX_NETWORK_HAR_INLINE_TOTAL: u64 = 64 << 20;

/// The session's HAR as WebArena Verified reads it: bodies that are text inline in `text` (each up to
/// [`MAX_NETWORK_HAR_INLINE_BYTES`], [`MAX_NETWORK_HAR_INLINE_TOTAL`] in all), others left as files of the
/// session (`session/resources/<sha256>`).
fn network_har(session: &mut Bundle) -> Result<Har> {
    let mut har: Har = serde_json::from_slice(&session.read(bundle::HAR_FILE)?)
        .with_context(|| format!("the session's {} does not parse", bundle::HAR_FILE))?;
    let sizes = session.files()?;
    let mut inline_left = MAX_NETWORK_HAR_INLINE_TOTAL;
    let mut inline = |session: &mut Bundle, file: &str| -> Result<Option<Vec<u8>>> {
        let size = sizes.get(file).copied().unwrap_or(u64::MAX);
        if size > MAX_NETWORK_HAR_INLINE_BYTES || size > inline_left {
            return Ok(None);
        }
        inline_left -= size;
        Ok(Some(session.read(file)?))
    };
    let in_session = |file: &str| format!("{}/{file}", files::SESSION_DIR);
    for entry in &mut har.log.entries {
        let content = &mut entry.response.content;
        if let Some(file) = content.file.clone()
            && !inline(session, &file)?.is_some_and(|bytes| content.set_inline_if_text(&bytes))
        {
            content.file = Some(in_session(&file));
        }
        if let Some(post) = entry.request.post_data.as_mut()
            && let Some(file) = post.file.clone()
            && !inline(session, &file)?.is_some_and(|bytes| post.set_inline_if_text(bytes))
        {
            post.file = Some(in_session(&file));
        }
    }
    Ok(har)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An agent's DevTools connections go through its port both ways while the episode runs, and end
    /// with the port: in a browser kept for the next episode, a connection left open (by a process the
    /// agent left behind) would reach the next agent's pages. Chromium's DevTools port is stood in for by
    /// a loopback server that echoes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_agents_connections_end_with_its_episodes_port() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let devtools = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let devtools_port = devtools.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut connection, _)) = devtools.accept().await {
                tokio::spawn(async move {
                    let (mut reading, mut writing) = connection.split();
                    let _ = tokio::io::copy(&mut reading, &mut writing).await;
                });
            }
        });
        let port = AgentPort::open(&format!("ws://127.0.0.1:{devtools_port}/devtools/browser/id")).await.unwrap();
        let agents_port = port.port;
        let mut agent = tokio::net::TcpStream::connect(("127.0.0.1", agents_port)).await.unwrap();
        agent.write_all(b"Target.getTargets").await.unwrap();
        let mut answer = [0; 17];
        agent.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"Target.getTargets", "forwarded there and back");
        assert_eq!(port.connections.load(Ordering::SeqCst), 1);

        port.close();
        let mut more = [0; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), agent.read(&mut more)).await;
        assert!(
            matches!(read, Ok(Ok(0) | Err(_))),
            "the agent's connection was still open after its port closed: {read:?}"
        );
        assert!(
            tokio::net::TcpStream::connect(("127.0.0.1", agents_port)).await.is_err(),
            "the port takes no new connection"
        );
    }

    #[test]
    fn an_agent_is_named_by_the_script_it_runs() {
        let name = |command: &str| Agent::parse(command).short_name();
        assert_eq!(name("human"), "human");
        assert_eq!(name("python examples/browser-use/agent.py --fast"), "agent");
        assert_eq!(name("node /x/shop-agent.mjs /y/node_modules other-path"), "shop-agent");
        assert_eq!(name("./my_agent --model gpt"), "my_agent");
    }

    #[test]
    fn an_agents_log_keeps_its_head_and_tail_and_says_what_was_cut_between() {
        let log_of = |output: &[u8]| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(AGENT_LOG_FILE);
            let mut state = LogState {
                file: std::fs::File::create(&path).unwrap(),
                head: 0,
                tail: std::collections::VecDeque::new(),
                cut: 0,
                finished: false,
            };
            for chunk in output.chunks(100_000) {
                state.take(chunk);
            }
            state.finish();
            state.take(b"after the end");
            std::fs::read(&path).unwrap()
        };
        // Within the head and the tail: whole.
        let short: Vec<u8> = (0..AGENT_LOG_HEAD_BYTES + 1000).map(|i| (i % 251) as u8).collect();
        assert_eq!(log_of(&short), short);
        // Past them: the head, the note, the tail.
        let cut = 3000;
        let long: Vec<u8> = (0..AGENT_LOG_HEAD_BYTES + AGENT_LOG_TAIL_BYTES + cut).map(|i| (i % 251) as u8).collect();
        let log = log_of(&long);
        let note = format!(
            "\n[trace-replay: {cut} bytes of the agent's output cut here; the log keeps its first {AGENT_LOG_HEAD_BYTES} \
             and its last {AGENT_LOG_TAIL_BYTES} bytes]\n"
        );
        assert_eq!(&log[..AGENT_LOG_HEAD_BYTES], &long[..AGENT_LOG_HEAD_BYTES]);
        assert_eq!(&log[AGENT_LOG_HEAD_BYTES..AGENT_LOG_HEAD_BYTES + note.len()], note.as_bytes());
        assert_eq!(&log[AGENT_LOG_HEAD_BYTES + note.len()..], &long[long.len() - AGENT_LOG_TAIL_BYTES..]);
    }

    #[test]
    fn an_agents_answer_is_read_only_from_a_regular_file_of_bounded_size() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let answers = AnswerDir::open(out).unwrap();
        let read = |name: &str| read_agent_file(&answers.0, name);
        assert_eq!(read("missing.json"), Ok(None));
        std::fs::write(out.join("plain.json"), b"{}").unwrap();
        assert_eq!(read("plain.json"), Ok(Some(b"{}".to_vec())));
        let refused = |name: &str, why: &str| {
            let error = read(name).unwrap_err();
            assert!(error.contains(name) && error.contains(why) && error.contains("plain file"), "{error}");
        };
        std::os::unix::fs::symlink(out.join("plain.json"), out.join("link.json")).unwrap();
        refused("link.json", "is a symbolic link");
        rustix::fs::mknodat(rustix::fs::CWD, out.join("fifo.json"), rustix::fs::FileType::Fifo, 0o600.into(), 0)
            .unwrap();
        refused("fifo.json", "a FIFO");
        std::fs::create_dir(out.join("dir.json")).unwrap();
        refused("dir.json", "a folder");
        std::fs::File::create(out.join("huge.json")).unwrap().set_len(AGENT_FILE_MAX_BYTES + 1).unwrap();
        refused("huge.json", "is larger than 4 MiB");
    }

    #[test]
    fn an_agents_answer_file_is_parsed_or_its_fault_said() {
        let parse = |read: Result<Option<&[u8]>, &str>| {
            parse_answer_file::<AgentDone>(
                files::DONE_FILE,
                read.map(|raw| raw.map(<[u8]>::to_vec)).map_err(str::to_owned),
            )
        };
        let written = br#"{"text": "42", "success": true}"#;
        let (done, raw) = parse(Ok(Some(written))).unwrap().unwrap();
        assert_eq!((done.text.as_deref(), done.success), (Some("42"), Some(true)));
        assert_eq!(raw, written, "the bytes as the agent wrote them");
        // None written: no answer, and no fault of the file's own.
        assert!(parse(Ok(None)).unwrap().is_none());
        let malformed = parse(Ok(Some(b"{not json"))).err().unwrap();
        assert!(malformed.starts_with("the agent's done.json is malformed: "), "{malformed}");
        // Refused as it was read: said as the reading said it.
        assert_eq!(
            parse(Err("the agent's done.json is a symbolic link")).err().unwrap(),
            "the agent's done.json is a symbolic link"
        );
    }

    #[test]
    fn a_credential_is_named_for_an_agent_as_its_placeholder_says() {
        assert_eq!(placeholder_name("{{credentials.shop.test.password}}"), "shop.test.password");
    }
}
