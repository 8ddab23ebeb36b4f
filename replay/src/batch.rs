//! A run of episodes: the task of one bundle, or every task of a TRACE dataset (`tasks.jsonl` and its
//! bundles), sharded across machines by the schedulers people already run, episodes in parallel, and
//! resumable: each result is appended to the run's results file as it comes, one whole line at a time,
//! and a task already there is not run again (a line cut short by a killed run is dropped when the run
//! resumes, the file written anew through `trace_store::atomic` before anything is appended). Then the
//! run's summary. [`merge`] joins the runs of shards into the summary one machine would have written
//! (a summary depends only on the results, taken in task order).
//!
//! The dataset and the run may be in an object store ([`crate::store`]): shards on many machines then
//! share one run there, each putting its files as they are done.
//!
//! Task directories are named by the task id, or, in WebArena Verified's layout, by the id's digits, so
//! that its evaluator finds `<run>/<digits>/agent_response.json` and `network.har`.

use std::collections::{BTreeMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use trace_analysis::score;
use trace_manifest::dataset::{self, WebArenaEntry, WebArenaResult};
use trace_manifest::eval::{
    self as files, CheckpointScores, EpisodeEnd, EvalResult, EvalSummary, RubricScores, Spl, StepBasis,
};
use trace_manifest::report::RequestCounts;
use trace_manifest::task::TaskId;
use trace_manifest::time_fmt::{now_ms, rfc3339_from_millis};

use crate::browsers::Browsers;
use crate::eval::{Episode, EvalOptions};
use crate::tasks::{TaskSource, tasks};
use trace_store::{Location, atomic};

/// How task directories are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Layout {
    /// `<run>/<task id>/`.
    Trace,
    /// `<run>/<digits of the task id>/`, as WebArena Verified's evaluator reads a run.
    WebarenaVerified,
}

/// Which part of the tasks this machine runs: task `k` (in id order) belongs to shard `k mod count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// `I/N`, or `N` alone with the index from the scheduler: `JOB_COMPLETION_INDEX` (a Kubernetes Indexed
    /// Job), else `SLURM_ARRAY_TASK_ID` (a Slurm array, counted from `SLURM_ARRAY_TASK_MIN`).
    pub fn parse(spec: &str) -> Result<Shard> {
        let (index, count) = match spec.split_once('/') {
            Some((index, count)) => (index.trim().parse().context("the shard index is a number")?, count),
            None => (Shard::index_from_scheduler()?, spec),
        };
        let count: usize = count.trim().parse().context("the shard count is a number")?;
        if count == 0 || index >= count {
            bail!("shard {index} of {count} does not exist (shards are numbered from 0 to {})", count.max(1) - 1);
        }
        Ok(Shard { index, count })
    }

    fn index_from_scheduler() -> Result<usize> {
        let read = |name: &str| std::env::var(name).ok().and_then(|value| value.trim().parse::<usize>().ok());
        if let Some(index) = read("JOB_COMPLETION_INDEX") {
            return Ok(index);
        }
        if let Some(id) = read("SLURM_ARRAY_TASK_ID") {
            return Ok(id - read("SLURM_ARRAY_TASK_MIN").unwrap_or(0).min(id));
        }
        bail!("--shard N needs JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID in the environment; else say --shard I/N")
    }

    /// The results file of this shard, so that shards sharing one run directory never write the same file.
    fn results_file(self) -> String {
        format!("results.shard-{}-of-{}.jsonl", self.index, self.count)
    }
}

#[derive(Debug, Clone)]
pub struct BatchOptions {
    pub episode: EvalOptions,
    pub parallel: usize,
    pub shard: Option<Shard>,
    pub layout: Layout,
    /// Show a progress bar (on a terminal).
    pub progress: bool,
}

/// The directory of a task's outputs within the run.
pub fn task_dir(run: &Path, task_id: &TaskId, layout: Layout) -> Result<PathBuf> {
    match layout {
        Layout::Trace => Ok(run.join(task_id.as_str())),
        Layout::WebarenaVerified => {
            let digits: String = task_id.as_str().chars().filter(char::is_ascii_digit).collect();
            let digits = digits.trim_start_matches('0');
            let digits = if digits.is_empty() && task_id.as_str().contains('0') { "0" } else { digits };
            if digits.is_empty() {
                bail!("the task id {task_id} has no digits to name its directory in WebArena Verified's layout");
            }
            Ok(run.join(digits))
        }
    }
}

/// Runs the tasks of `source` (a local path or an object store URL) into `run` (the same) and returns the
/// summary of this run (or shard).
pub async fn run(source: &str, run: &str, options: &BatchOptions) -> Result<EvalSummary> {
    let source = Location::parse(source)?;
    if source.is_store() {
        let fetched = source.fetch(|_| true).await?;
        tracing::info!("fetched the dataset's {fetched} file(s)");
    }
    let location = Location::parse(run)?;
    let run = location.local().to_owned();
    let run = run.as_path();
    let mut tasks = tasks(source.local(), options.episode.limits)?;
    if let Some(shard) = options.shard {
        tasks = tasks.into_iter().enumerate().filter(|(k, _)| k % shard.count == shard.index).map(|(_, t)| t).collect();
    }
    // Each task with its directory, relative to the run.
    let mut named: BTreeMap<PathBuf, TaskId> = BTreeMap::new();
    let mut tasks_in_dirs = Vec::with_capacity(tasks.len());
    for task in tasks {
        let dir = task_dir(Path::new(""), &task.task_id, options.layout)?;
        if let Some(other) = named.insert(dir.clone(), task.task_id.clone()) {
            bail!("the tasks {other} and {} would share the directory {}", task.task_id, run.join(&dir).display());
        }
        tasks_in_dirs.push((task, dir));
    }
    std::fs::create_dir_all(run).with_context(|| format!("cannot create {}", run.display()))?;
    let results_name = options.shard.map_or_else(|| files::RESULTS_FILE.to_owned(), Shard::results_file);
    location.fetch(|relative| relative == results_name).await?;
    let results_path = run.join(&results_name);
    // The results file as it is written anew below: the lines already there, less one cut short.
    let mut results = Vec::new();
    let mut results_jsonl = String::new();
    for (result, line) in read_result_lines(&results_path)? {
        results.push(result);
        results_jsonl.push_str(&line);
        results_jsonl.push('\n');
    }
    let done: HashSet<TaskId> = results.iter().map(|result| result.task_id.clone()).collect();
    let pending: Vec<(TaskSource, PathBuf)> =
        tasks_in_dirs.into_iter().filter(|(task, _)| !done.contains(&task.task_id)).collect();
    if !done.is_empty() {
        tracing::info!("{} task(s) already in {}: not run again", done.len(), results_path.display());
    }

    let bar = indicatif::ProgressBar::new(pending.len() as u64);
    if options.progress {
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} episodes, {elapsed} ({eta} left) {msg}")
                .expect("a valid template"),
        );
    } else {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    // Written anew once, whole lines only (a line a killed run cut short is dropped here, not appended
    // to), and so that the file is there (empty with no task to run, as a shard may be) for `eval-merge`.
    // Then each result is appended: rewriting the file per episode would cost a run of n tasks n² bytes.
    write_results_file(&results_path, &results_jsonl)?;
    drop(results_jsonl);
    let mut results_file = std::fs::OpenOptions::new()
        .append(true)
        .open(&results_path)
        .with_context(|| format!("cannot open {}", results_path.display()))?;
    // `parallel` agents at a time, each in its turn, in browsers kept between turns; one episode more is
    // prepared meanwhile (its bundle opened and read), and one whose agent is done is scored beside the
    // next turn.
    let turns = tokio::sync::Semaphore::new(options.parallel.max(1));
    let turns = &turns;
    let browsers = Browsers::new(options.episode.browser.clone(), !options.episode.browser_per_episode);
    let browsers = &browsers;
    let mut episodes = futures::stream::iter(pending.into_iter().map(|(task, dir)| async move {
        let episode = Episode { task: &task, out: &run.join(&dir), options: &options.episode, opened: None };
        let result = match episode.prepare().await {
            Ok(prepared) => prepared.run(Some(turns), browsers).await,
            Err(error) => Err(error),
        };
        let result = result.unwrap_or_else(|error| unusable(&task, &options.episode, &format!("{error:#}")));
        (result, dir)
    }))
    .buffer_unordered(options.parallel.max(1) + 1);
    while let Some((result, dir)) = episodes.next().await {
        // One line per finished task, written at once: a run stopped half-way keeps every task it finished.
        let mut line = serde_json::to_vec(&result)?;
        line.push(b'\n');
        results_file.write_all(&line).and_then(|()| results_file.sync_data()).context("cannot append a result")?;
        if location.is_store() {
            location.put(&dir.to_string_lossy()).await?;
            let environment = dataset::environment_name(&result.website);
            let infinity =
                dataset::webarena_task_dir(&options.episode.agent_name, &environment, result.task_id.as_str());
            location.put(&format!("{}/{infinity}", files::WEBARENA_INFINITY_DIR)).await?;
            location.put(&results_name).await?;
        }
        bar.set_message(format!("{} {}", result.task_id, if result.success > 0.0 { "succeeded" } else { "failed" }));
        bar.inc(1);
        results.push(result);
    }
    bar.finish_and_clear();
    browsers.close().await;
    // Every episode ended the orphans its agent left, but one that emptied its environment while another
    // agent ran could not be told apart, nor one that took Chromium's mark: no agent or browser runs now.
    tokio::task::spawn_blocking(crate::processes::end_all_orphans).await.context("ending the agents' orphans")?;
    let summary = score::summarize(&results);
    if options.shard.is_none() {
        write_summary(&location, &summary, &results).await?;
    }
    Ok(summary)
}

/// A run's summary in one line, as `eval` and `eval-merge` print it.
pub fn summary_line(summary: &EvalSummary) -> String {
    format!(
        "{} task(s): success {:.1}% [{:.1}%, {:.1}%], partial credit {:.1}%, rubric {:.1}%, SPL {:.3} (navigation {:.3}); {} agent error(s)",
        summary.tasks,
        summary.success_rate * 100.0,
        summary.success_interval[0] * 100.0,
        summary.success_interval[1] * 100.0,
        summary.partial_credit_mean * 100.0,
        summary.rubric_averaged_mean * 100.0,
        summary.spl_averaged,
        summary.spl_navigation,
        summary.errors
    )
}

/// The result of a task whose bundle or browser could not be used: no score, and why.
fn unusable(task: &TaskSource, options: &EvalOptions, error: &str) -> EvalResult {
    EvalResult {
        task_id: task.task_id.clone(),
        website: task.website.clone(),
        task_type: task.task_type,
        description: task.description.clone(),
        agent: options.agent.name().to_owned(),
        started_at: rfc3339_from_millis(now_ms()),
        duration_seconds: 0.0,
        ended: EpisodeEnd::Exited { code: None },
        error: Some(format!("the episode could not run: {error}")),
        steps: 0,
        step_basis: StepBasis::Actions,
        said_done: false,
        answer: None,
        success: 0.0,
        success_basis: "the episode could not run".to_owned(),
        checkpoints: CheckpointScores {
            total: 0,
            reached_in_order: 0,
            reached_any_order: 0,
            partial_credit: 0.0,
            any_order_share: 0.0,
            items: Vec::new(),
        },
        rubric: RubricScores {
            source: String::new(),
            averaged: 0.0,
            perfect: 0.0,
            unjudged: 0,
            judged: 0,
            items: Vec::new(),
        },
        spl: Spl::default(),
        requests: RequestCounts::default(),
        live_attempts: 0,
        bodies_left_out: None,
        judge: None,
        audit: None,
    }
}

/// Puts a results file's whole text at `path`, atomically: a results file is only ever whole lines.
fn write_results_file(path: &Path, jsonl: &str) -> Result<()> {
    atomic::write(path, |out| Ok(out.write_all(jsonl.as_bytes())?)).map(drop)
}

/// The results already in a results file; a last line cut short (a run killed mid-write) is dropped.
fn read_results(path: &Path) -> Result<Vec<EvalResult>> {
    Ok(read_result_lines(path)?.into_iter().map(|(result, _)| result).collect())
}

/// [`read_results`], each result with its line as it is in the file (kept as it was when a run resumes).
fn read_result_lines(path: &Path) -> Result<Vec<(EvalResult, String)>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut results = Vec::new();
    let lines: Vec<&str> = text.lines().filter(|line| !line.trim().is_empty()).collect();
    for (number, line) in lines.iter().enumerate() {
        match serde_json::from_str(line) {
            Ok(result) => results.push((result, (*line).to_owned())),
            Err(_) if number + 1 == lines.len() && !text.ends_with('\n') => {
                tracing::warn!("the last line of {} was cut short; its task runs again", path.display());
            }
            Err(error) => bail!("line {} of {} is not a result: {error}", number + 1, path.display()),
        }
    }
    Ok(results)
}

/// Joins the results of `runs` (run directories or object store URLs, each with its `results.jsonl` and
/// every shard's) into `out` (the first run when `None`): `results.jsonl`, `summary.json` and `summary.md`,
/// as one machine would have written them.
pub async fn merge(runs: &[String], out: Option<&str>) -> Result<EvalSummary> {
    let is_results =
        |relative: &str| !relative.contains('/') && relative.starts_with("results") && relative.ends_with(".jsonl");
    let mut by_task: BTreeMap<TaskId, EvalResult> = BTreeMap::new();
    let mut first = None;
    for run in runs {
        let location = Location::parse(run)?;
        location.fetch(|relative| is_results(relative) || is_webarena_result(relative)).await?;
        let entries = std::fs::read_dir(location.local()).with_context(|| format!("cannot read the run {run}"))?;
        let mut names: Vec<String> = entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
        names.sort();
        names.retain(|name| is_results(name));
        if names.is_empty() {
            bail!("{run} holds no results file");
        }
        for name in names {
            for result in read_results(&location.local().join(name))? {
                if let Some(earlier) = by_task.get(&result.task_id)
                    && earlier != &result
                {
                    bail!("the task {} has two different results ({run} and another run)", result.task_id);
                }
                by_task.insert(result.task_id.clone(), result);
            }
        }
        first.get_or_insert(location);
    }
    let out = match out {
        Some(out) => Location::parse(out)?,
        None => first.context("no run to merge")?,
    };
    let results: Vec<EvalResult> = by_task.into_values().collect();
    std::fs::create_dir_all(out.local()).with_context(|| format!("cannot create {}", out.local().display()))?;
    let mut lines = Vec::new();
    for result in &results {
        serde_json::to_writer(&mut lines, result)?;
        lines.push(b'\n');
    }
    let path = out.local().join(files::RESULTS_FILE);
    atomic::write(&path, |out| Ok(out.write_all(&lines)?))?;
    out.put(files::RESULTS_FILE).await?;
    let summary = score::summarize(&results);
    write_summary(&out, &summary, &results).await?;
    Ok(summary)
}

/// A task's `result.json` in WebArena-Infinity's layout, relative to a run.
fn is_webarena_result(relative: &str) -> bool {
    relative.starts_with(&format!("{}/{}/", files::WEBARENA_INFINITY_DIR, dataset::WEBARENA_DATA_DIR))
        && relative.ends_with(&format!("/{}", dataset::RESULT_FILE))
}

/// `RUN/webarena-infinity/data/manifest.json`, from the task folders the episodes wrote (a resumed or
/// merged run lists every one of them); false when there are none.
fn write_webarena_manifest(run: &Path) -> Result<bool> {
    let data = run.join(files::WEBARENA_INFINITY_DIR).join(dataset::WEBARENA_DATA_DIR);
    let mut entries = Vec::new();
    for model in sorted_dirs(&data)? {
        for environment in sorted_dirs(&model)? {
            for task in sorted_dirs(&environment)? {
                let Ok(bytes) = std::fs::read(task.join(dataset::RESULT_FILE)) else { continue };
                let result: WebArenaResult = serde_json::from_slice(&bytes)
                    .with_context(|| format!("{} does not parse", task.join(dataset::RESULT_FILE).display()))?;
                let name = |dir: &Path| dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                entries.push(WebArenaEntry {
                    model: name(&model),
                    environment: name(&environment),
                    task_id: result.task_id,
                    difficulty: result.difficulty,
                    instruction: result.instruction,
                    elapsed: result.elapsed,
                    steps: result.steps,
                    verifier_message: result.verifier_message,
                });
            }
        }
    }
    if entries.is_empty() {
        return Ok(false);
    }
    let path = run.join(files::WEBARENA_INFINITY_DIR).join(dataset::WEBARENA_MANIFEST_FILE);
    atomic::write(&path, |out| Ok(serde_json::to_writer_pretty(out, &entries)?))?;
    Ok(true)
}

fn sorted_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(Vec::new()) };
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    Ok(dirs)
}

async fn write_summary(location: &Location, summary: &EvalSummary, results: &[EvalResult]) -> Result<()> {
    let run = location.local();
    if write_webarena_manifest(run)? {
        location.put(&format!("{}/{}", files::WEBARENA_INFINITY_DIR, dataset::WEBARENA_MANIFEST_FILE)).await?;
    }
    let path = run.join(files::SUMMARY_FILE);
    atomic::write(&path, |out| Ok(serde_json::to_writer_pretty(out, summary)?))?;
    let path = run.join(files::SUMMARY_TEXT_FILE);
    atomic::write(&path, |out| Ok(out.write_all(score::summary_text(summary, results).as_bytes())?))?;
    location.put(files::SUMMARY_FILE).await?;
    location.put(files::SUMMARY_TEXT_FILE).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_come_from_the_spec_or_the_scheduler() {
        assert_eq!(Shard::parse("1/4").unwrap(), Shard { index: 1, count: 4 });
        assert!(Shard::parse("4/4").is_err());
        assert!(Shard::parse("0/0").is_err());
        assert!(Shard::parse("a/2").is_err());
    }

    #[test]
    fn webarena_directories_are_named_by_the_ids_digits() {
        let run = Path::new("run");
        let id = |text: &str| TaskId::try_from(text.to_owned()).unwrap();
        assert_eq!(task_dir(run, &id("task-0042"), Layout::WebarenaVerified).unwrap(), run.join("42"));
        assert_eq!(task_dir(run, &id("t_000"), Layout::WebarenaVerified).unwrap(), run.join("0"));
        assert_eq!(task_dir(run, &id("task-0042"), Layout::Trace).unwrap(), run.join("task-0042"));
        assert!(task_dir(run, &id("no-digits"), Layout::WebarenaVerified).is_err());
    }

    #[test]
    fn a_results_line_cut_short_is_dropped_and_a_damaged_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        std::fs::write(&path, "{\"task_id\":").unwrap();
        assert!(read_results(&path).unwrap().is_empty());
        std::fs::write(&path, "not json\n{}\n").unwrap();
        assert!(read_results(&path).is_err());
    }
}
