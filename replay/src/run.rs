//! `trace-replay run --human`: re-runs the recorded demonstration, as the tool calls of its trajectory, in
//! the replayed site, and reports how faithfully the replay reproduces it. Each call finds its element by
//! the recorded CSS selector, then by XPath, then by position (an iframe of another origin cannot be
//! searched from the page, so its elements are reached by the recorded position within it); after each
//! call the URL reached is compared with the recorded one and the screen with the recorded screenshot.
//!
//! The re-run waits as a person does, each wait bounded by [`RunOptions::step_timeout`]: before a call,
//! for the page to settle (its document loaded, and no request asked of replay for [`QUIET`]); for the
//! call's element to be there, visible and still (the same box twice in a row), since pages fill
//! results on timers and animate them in. A page that never settles is acted on at the timeout anyway;
//! an element that never appears fails the call.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::responder::{Divergence, Stats};
use crate::serve::Replay;
use anyhow::{Context, Result, bail};
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, DispatchMouseEventParams, DispatchMouseEventType, InsertTextParams,
    MouseButton,
};
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, EventJavascriptDialogOpening, HandleJavaScriptDialogParams,
};
use chromiumoxide::page::ScreenshotParams;
use futures::StreamExt;
use serde_json::json;
use trace_analysis::audit::alter_text;
use trace_analysis::canonical::canonical_url;
use trace_analysis::evidence::{PageText, page_text};
use trace_analysis::fidelity::{TextComparison, compare_text, settled_text};
use trace_analysis::trajectory;
use trace_manifest::archive::{Bundle, ZipLimits};
use trace_manifest::event::{ElementDescriptor, Viewport};
use trace_manifest::report::{FidelityReport, LocatedBy, StepFailure, StepOutcome, WebSocketFrames};
use trace_manifest::trajectory::{Credential, ToolAction, ToolCall};

/// How long the network must have been idle, as replay sees it, for a page to count as settled.
pub const QUIET: Duration = Duration::from_millis(400);
/// How often the re-run looks again while it waits.
const POLL: Duration = Duration::from_millis(100);

/// How the re-run behaves.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// The longest the re-run waits for anything: a page to settle, an element to appear, a call's effect
    /// (a navigation, a new tab) to show.
    pub step_timeout: Duration,
    /// The call (an index into the calls) whose value the re-run alters, as the audit's perturbations do
    /// (`trace_analysis::audit`): typed text altered ([`alter_text`]), another option chosen, a checkbox
    /// or radio button left alone.
    pub alter_step: Option<usize>,
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions { step_timeout: Duration::from_secs(10), alter_step: None }
    }
}

impl RunOptions {
    /// The longest one step may take, all its waits together (the page settling before and after, its
    /// element, its URL, its text), with room to spare: a step still going then is stuck (a DevTools call
    /// the page never answers, a script that never yields), fails, and the run goes on, so that a run
    /// always ends.
    pub fn step_deadline(&self) -> Duration {
        self.step_timeout * 6 + Duration::from_secs(10)
    }
}

/// The fidelity report as people read it: a line per step, then the totals.
pub fn text(report: &FidelityReport) -> String {
    let mut f = String::new();
    for step in &report.steps {
        let verdict = if step.passed { "ok  " } else { "FAIL" };
        let _ = write!(f, "{verdict} {:>3} {:<16}", step.step, step.name);
        if let Some(by) = step.located_by {
            let _ = write!(f, " found by {}", by.as_str());
        }
        if let Some(url) = &step.url_reached {
            let _ = write!(f, " at {url}");
        }
        if let Some(difference) = step.screenshot_difference {
            let _ = write!(f, " (screen differs by {:.1}%)", difference * 100.0);
        }
        if let Some(reason) = &step.reason {
            let _ = write!(f, ": {reason}");
        }
        f.push('\n');
    }
    let r = &report.requests;
    let _ =
        writeln!(f, "steps: {} passed, {} failed, of {}", report.steps_passed, report.steps_failed, report.steps_total);
    let _ = writeln!(
        f,
        "requests: {} exact, {} canonical, {} fuzzy, {} ignored, {} missed; live attempts: {}",
        r.exact, r.canonical, r.fuzzy, r.ignored, r.missed, report.live_attempts
    );
    let frames = &report.websocket_frames;
    if frames.played + frames.matched + frames.unmatched > 0 {
        let _ = writeln!(
            f,
            "websocket frames: {} played back; of the page's own, {} matched, {} unmatched",
            frames.played, frames.matched, frames.unmatched
        );
    }
    for miss in &report.misses {
        let _ = writeln!(f, "  missed {miss}");
    }
    for miss in &report.misses_after_last_step {
        let _ = writeln!(f, "  missed after the last step (not counted against the run) {miss}");
    }
    f
}

/// The demonstration of the bundle at `path` (`trace_analysis::trajectory::of_bundle`).
pub fn human_trajectory(path: &Path, limits: ZipLimits) -> Result<(Vec<ToolCall>, Vec<Credential>)> {
    let mut bundle =
        Bundle::open_with_limits(path, limits).with_context(|| format!("cannot open the bundle {}", path.display()))?;
    trajectory::of_bundle(&mut bundle)
}

/// The first capture of the person's next steps that stayed on the page call `index` left them on: what
/// that page settled to (see [`trace_analysis::fidelity::settled_text`]).
pub fn settled_snapshot(calls: &[ToolCall], index: usize) -> Option<&str> {
    let call = &calls[index];
    calls[index + 1..]
        .iter()
        .take_while(|next| next.tab == call.tab && next.url_before.is_some() && next.url_before == call.url_after)
        .find_map(|next| next.dom_snapshot.as_deref())
}

/// The text a step's page must show: its capture's (`snapshot`), less what the capture of the person's
/// next step on the same page (`settled`, see [`settled_snapshot`]) no longer shows.
pub fn expected_text(bundle: &mut Bundle, snapshot: &str, settled: Option<&str>) -> Result<PageText> {
    let mut read =
        |file: &str| -> Result<PageText> { Ok(page_text(0, "", file, &String::from_utf8_lossy(&bundle.read(file)?))) };
    let recorded = read(snapshot)?;
    Ok(match settled {
        Some(settled) => settled_text(&recorded, &read(settled)?),
        None => recorded,
    })
}

/// Runs `calls` in `replay`, then reports. Requests missed once the last call's page has settled (a
/// beacon sent as the browser closes) are not in the report: [`note_late_misses`] lists them apart once
/// the replay is closed.
pub async fn run_human(
    replay: &Replay,
    bundle: &Path,
    calls: &[ToolCall],
    credentials: &[Credential],
    options: RunOptions,
) -> Result<FidelityReport> {
    let bundle = Bundle::open_with_limits(bundle, replay.responder().archive().limits())?;
    let mut runner = Runner { replay, bundle, tabs: Vec::new(), current: 0, options, fitted: HashMap::new() };
    let persons = PersonsInput::of(calls, credentials);
    let mut steps = Vec::new();
    let deadline = options.step_deadline();
    for (index, call) in calls.iter().enumerate() {
        let settled = settled_snapshot(calls, index);
        let judged = runner.judged_step(index, call, settled, credentials, &persons);
        let outcome = match tokio::time::timeout(deadline, judged).await {
            Ok(outcome) => outcome,
            Err(_) => StepOutcome {
                passed: false,
                reason: Some(format!("the step did not end within its deadline ({}s)", deadline.as_secs())),
                ..untried(index, call)
            },
        };
        tracing::info!(step = outcome.step, name = %outcome.name, passed = outcome.passed, reason = ?outcome.reason);
        steps.push(outcome);
    }
    let _ = tokio::time::timeout(deadline, runner.settle()).await;
    let stats = replay.stats();
    let failures: Vec<StepFailure> = steps
        .iter()
        .filter(|s| !s.passed)
        .map(|s| StepFailure { step: s.step, name: s.name.clone(), reason: s.reason.clone().unwrap_or_default() })
        .collect();
    Ok(FidelityReport {
        steps_total: steps.len(),
        steps_passed: steps.len() - failures.len(),
        steps_failed: failures.len(),
        failures,
        requests: stats.request_counts(),
        misses: stats.misses.keys().cloned().collect(),
        misses_after_last_step: Vec::new(),
        live_attempts: stats.live_attempts,
        websocket_frames: runner.websocket_frames().await,
        steps,
    })
}

/// Lists the requests missed after `report` was made (`final_stats` are the replay's when it closed) as
/// missed after the last step.
pub fn note_late_misses(report: &mut FidelityReport, final_stats: &Stats) {
    report.misses_after_last_step =
        final_stats.misses.keys().filter(|miss| !report.misses.contains(miss)).cloned().collect();
}

/// The `index`-th call's outcome before anything is judged: passed until something fails.
fn untried(index: usize, call: &ToolCall) -> StepOutcome {
    StepOutcome {
        step: index + 1,
        name: call.action.name().to_owned(),
        passed: true,
        reason: None,
        located_by: None,
        url_expected: call.url_after.clone(),
        url_reached: None,
        screenshot_difference: None,
        text_shown: None,
    }
}

/// What the person typed and chose in the demonstration, and in which fields: a request answered by the
/// fuzzy level that differs from the recording in any of it sent something the person did not. So does a
/// form submitted (a document's request) that differs at all.
struct PersonsInput {
    values: HashSet<String>,
    fields: HashSet<String>,
    /// Values never written into a report.
    secrets: Vec<String>,
}

impl PersonsInput {
    fn of(calls: &[ToolCall], credentials: &[Credential]) -> PersonsInput {
        let mut input = PersonsInput {
            values: HashSet::new(),
            fields: HashSet::new(),
            secrets: credentials.iter().map(|c| c.value.clone()).filter(|v| !v.is_empty()).collect(),
        };
        for call in calls {
            match &call.action {
                ToolAction::Input { text } => {
                    input.values.insert(fill_placeholders(text, credentials).unwrap_or_else(|_| text.clone()));
                }
                ToolAction::SelectDropdown { option } => input.values.extend(option.split(", ").map(str::to_owned)),
                _ => {}
            }
            if let Some(name) = call.target.as_ref().and_then(|target| target.name.clone()) {
                input.fields.insert(name);
            }
        }
        input.values.remove("");
        input
    }

    fn concerns(&self, divergence: &Divergence) -> bool {
        divergence.document
            || divergence.differences.iter().any(|difference| {
                self.fields.contains(&difference.name)
                    || [&difference.sent, &difference.recorded]
                        .into_iter()
                        .flatten()
                        .any(|value| self.values.contains(value))
            })
    }

    /// `POST /path: field (recorded "a", sent "b")`, secrets masked.
    fn describe(&self, divergence: &Divergence) -> String {
        let shown = |value: &Option<String>| match value {
            None => "nothing".to_owned(),
            Some(value) if self.secrets.contains(value) => "a credential".to_owned(),
            Some(value) => format!("{value:?}"),
        };
        let fields: Vec<String> = divergence
            .differences
            .iter()
            .map(|d| format!("{} (recorded {}, sent {})", d.name, shown(&d.recorded), shown(&d.sent)))
            .collect();
        format!(
            "{} {} answered as {}: {}",
            divergence.method,
            divergence.url,
            divergence.recorded_url,
            fields.join(", ")
        )
    }
}

struct Runner<'a> {
    replay: &'a Replay,
    bundle: Bundle,
    /// The replay's tabs, numbered as the trajectory numbers the recording's.
    tabs: Vec<Page>,
    current: usize,
    options: RunOptions,
    /// The viewport set on each tab since it opened at the launch's.
    fitted: HashMap<usize, Viewport>,
}

/// Where an element is, in the tab's viewport.
struct Located {
    x: f64,
    y: f64,
    by: LocatedBy,
}

/// What one look for an element found.
#[derive(Debug, PartialEq)]
enum Sighting {
    /// There, with its centre and size in the tab's viewport, and whether it can be seen.
    Element {
        x: f64,
        y: f64,
        width: f64,
        height: f64,
        visible: bool,
        by: LocatedBy,
    },
    /// Inside an iframe of another origin, whose content the page cannot search: that iframe's offset.
    CrossOrigin {
        left: f64,
        top: f64,
    },
    Missing {
        reason: String,
    },
}

impl Runner<'_> {
    /// Carries out one call with its value altered ([`RunOptions::alter_step`]).
    async fn step_altered(&mut self, call: &ToolCall, credentials: &[Credential]) -> Result<Option<LocatedBy>> {
        match &call.action {
            ToolAction::Input { text } => {
                let altered = ToolCall { action: ToolAction::Input { text: alter_text(text) }, ..call.clone() };
                self.step(&altered, credentials).await
            }
            ToolAction::SelectDropdown { option } => {
                if let Some(tab) = call.tab {
                    self.switch_to(tab as usize).await?;
                }
                self.settle().await;
                let chosen = self.in_element(call, SELECT_ANOTHER_OPTION, json!(option)).await?;
                if chosen != json!(true) {
                    bail!("the select has no option but {option:?}");
                }
                Ok(Some(LocatedBy::Selector))
            }
            // A checkbox or radio button the person clicked is left as it was.
            ToolAction::Click { .. } => Ok(None),
            _ => self.step(call, credentials).await,
        }
    }

    /// Carries out the `index`-th call and judges it: the call itself, the URL it reached, what it sent
    /// that the person did not, the text and the screen it left.
    async fn judged_step(
        &mut self,
        index: usize,
        call: &ToolCall,
        settled: Option<&str>,
        credentials: &[Credential],
        persons: &PersonsInput,
    ) -> StepOutcome {
        let divergences_before = self.replay.stats().divergences.len();
        let mut outcome = untried(index, call);
        let stepped = if self.options.alter_step == Some(index) {
            self.step_altered(call, credentials).await
        } else {
            self.step(call, credentials).await
        };
        match stepped {
            Ok(located_by) => outcome.located_by = located_by,
            Err(error) => {
                outcome.passed = false;
                outcome.reason = Some(format!("{error:#}"));
            }
        }
        if outcome.passed
            && let Some(expected) = &call.url_after
        {
            match self.wait_for_url(expected).await {
                Ok(reached) => outcome.url_reached = Some(reached),
                Err(reached) => {
                    outcome.passed = false;
                    outcome.reason = Some(format!("reached {reached}, the recording reached {expected}"));
                    outcome.url_reached = Some(reached);
                }
            }
        }
        if outcome.passed {
            self.settle().await;
            let stats = self.replay.stats();
            let diverged: Vec<String> = stats.divergences[divergences_before..]
                .iter()
                .filter(|divergence| persons.concerns(divergence))
                .map(|divergence| persons.describe(divergence))
                .collect();
            if !diverged.is_empty() {
                outcome.passed = false;
                outcome.reason = Some(format!("sent what the person did not: {}", diverged.join("; ")));
            }
        }
        if outcome.passed
            && let Some(snapshot) = &call.dom_snapshot
        {
            match self.compare_text(snapshot, settled).await {
                Ok(comparison) => {
                    outcome.text_shown = Some(comparison.shown);
                    if !comparison.passes() {
                        outcome.passed = false;
                        outcome.reason = Some(format!(
                            "the page shows {:.0}% of the recorded text; missing {}",
                            comparison.shown * 100.0,
                            comparison.missing.iter().map(|run| format!("{run:?}")).collect::<Vec<_>>().join(", ")
                        ));
                    }
                }
                Err(error) => tracing::debug!("no text comparison for step {}: {error:#}", outcome.step),
            }
        }
        if let Some(recorded) = &call.screenshot
            && outcome.passed
        {
            outcome.screenshot_difference = self.screenshot_difference(recorded).await.ok();
        }
        outcome
    }

    /// Carries out one call; returns how its element was found, if it has one.
    async fn step(&mut self, call: &ToolCall, credentials: &[Credential]) -> Result<Option<LocatedBy>> {
        if let Some(tab) = call.tab {
            self.switch_to(tab as usize).await?;
        }
        if !self.tabs.is_empty() {
            self.fit_viewport(call).await?;
            self.settle().await;
        }
        match &call.action {
            ToolAction::Navigate { url } => {
                if self.tabs.is_empty() {
                    let page = self.replay.open(url).await?;
                    self.take_tab(page).await;
                } else {
                    self.page()?.goto(url).await.with_context(|| format!("cannot open {url}"))?;
                }
                Ok(None)
            }
            ToolAction::Click { count, modifiers } => {
                let located = self.locate(call).await?;
                let modifiers = modifier_mask(modifiers.iter().map(String::as_str))?;
                for press in 1..=*count {
                    self.mouse_click_with(located.x, located.y, i64::from(press), modifiers).await?;
                }
                Ok(Some(located.by))
            }
            ToolAction::Input { text: typed } => {
                let text = fill_placeholders(typed, credentials)?;
                let chosen_not_typed = call.target.as_ref().and_then(|t| t.input_type.as_deref()).is_some_and(|kind| {
                    ["range", "color", "date", "time", "datetime-local", "month", "week"].contains(&kind)
                });
                if chosen_not_typed {
                    // A slider or a picker takes no typing: its value is set, as its own widget sets it.
                    self.in_element(call, SET_VALUE, json!(text)).await?;
                    return Ok(Some(LocatedBy::Selector));
                }
                let located = self.locate(call).await?;
                self.mouse_click(located.x, located.y, 1).await?;
                // Replace what the field holds, as the recorded value is the field's whole value.
                self.key("a", 2, &["selectAll"]).await?;
                if text.is_empty() {
                    self.key("Backspace", 0, &[]).await?;
                }
                self.type_text(&text).await?;
                let held = self.in_element(call, FIELD_VALUE, json!(null)).await?;
                if held.as_str().is_some_and(|held| held != text) {
                    // A secret's value is never written into the report.
                    let is_secret = text != *typed;
                    bail!(
                        "the field holds {}, the person typed {}",
                        if is_secret { "another value".to_owned() } else { format!("{held:?}") },
                        if is_secret { "a credential".to_owned() } else { format!("{text:?}") }
                    );
                }
                Ok(Some(located.by))
            }
            ToolAction::SendKeys { keys } => {
                let located = match &call.target {
                    Some(_) => Some(self.focus(call).await?),
                    None => None,
                };
                let (modifiers, key) = parse_keys(keys)?;
                self.key(key, modifiers, &[]).await?;
                Ok(located)
            }
            ToolAction::Scroll { delta_x, delta_y, .. } => {
                let (x, y) = match &call.target {
                    Some(_) => {
                        let located = self.locate(call).await?;
                        (located.x, located.y)
                    }
                    None => (200.0, 200.0),
                };
                let wheel = DispatchMouseEventParams::builder()
                    .r#type(DispatchMouseEventType::MouseWheel)
                    .x(x)
                    .y(y)
                    .delta_x(*delta_x)
                    .delta_y(*delta_y)
                    .build()
                    .map_err(anyhow::Error::msg)?;
                self.page()?.execute(wheel).await?;
                Ok(None)
            }
            ToolAction::SelectDropdown { option } => {
                let chosen = self.in_element(call, SELECT_OPTIONS, json!(option)).await?;
                if chosen != json!(true) {
                    bail!("the select has no option {option:?}");
                }
                Ok(Some(LocatedBy::Selector))
            }
            ToolAction::Submit {} => {
                self.in_element(call, "(form) => form.requestSubmit()", json!(null)).await?;
                Ok(Some(LocatedBy::Selector))
            }
            ToolAction::UploadFile { .. } => bail!("the recording holds no file contents to upload"),
            ToolAction::GoBack {} => {
                self.page()?.evaluate("history.back()").await?;
                Ok(None)
            }
            ToolAction::GoForward {} => {
                self.page()?.evaluate("history.forward()").await?;
                Ok(None)
            }
            ToolAction::Switch { tab } => {
                self.switch_to(*tab as usize).await?;
                Ok(None)
            }
            ToolAction::Close { tab } => {
                let page = self.tabs.get(*tab as usize).context("closing a tab the re-run never saw")?.clone();
                page.close().await?;
                Ok(None)
            }
            ToolAction::Done { .. } => Ok(None),
        }
    }

    fn page(&self) -> Result<&Page> {
        self.tabs.get(self.current).context("no tab is open yet")
    }

    /// Gives the current tab the viewport the step's screenshot was taken at, when the person had resized
    /// their window since the recording started (tabs open at the first screenshot's viewport): the page
    /// then lays out as it did for them, and the screenshots compare.
    async fn fit_viewport(&mut self, call: &ToolCall) -> Result<()> {
        let archive = self.replay.responder().archive();
        let Some(wanted) = call.screenshot.as_ref().and_then(|file| archive.viewports.get(file)).copied() else {
            return Ok(());
        };
        let current = self.fitted.get(&self.current).copied().or(archive.viewport);
        if current == Some(wanted) {
            return Ok(());
        }
        let metrics = SetDeviceMetricsOverrideParams::new(
            i64::from(wanted.width),
            i64::from(wanted.height),
            wanted.device_scale_factor,
            false,
        );
        self.page()?.execute(metrics).await.context("cannot set the recorded viewport")?;
        self.fitted.insert(self.current, wanted);
        Ok(())
    }

    /// Makes `tab` current; a tab the trajectory has not seen yet is the newest page the browser opened.
    async fn switch_to(&mut self, tab: usize) -> Result<()> {
        if tab >= self.tabs.len() {
            self.adopt_new_tabs().await?;
        }
        if tab >= self.tabs.len() {
            bail!("tab {tab} never opened");
        }
        self.current = tab;
        self.tabs[tab].bring_to_front().await?;
        Ok(())
    }

    /// Waits, at most the step timeout, until the current tab's document has loaded and replay has been
    /// asked for nothing for [`QUIET`]; then acts whatever the page is doing, as a person would.
    async fn settle(&self) {
        let deadline = Instant::now() + self.options.step_timeout;
        loop {
            let loaded = match self.page() {
                Ok(page) => page
                    .evaluate("document.readyState")
                    .await
                    .ok()
                    .and_then(|result| result.into_value::<String>().ok())
                    .is_some_and(|state| state == "complete"),
                Err(_) => true,
            };
            let quiet = self.replay.responder().quiet_for();
            if (loaded && quiet >= QUIET) || Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep(if loaded { QUIET.saturating_sub(quiet).max(POLL / 2) } else { POLL }).await;
        }
    }

    /// Makes `page` the re-run's next tab, its dialogs answered as the person answered them: they went on,
    /// so an `alert` is closed, a `confirm` or a leave-the-page question is accepted and a `prompt` is
    /// given its default. (A dialog left open holds the page: nothing in it runs, and every DevTools call
    /// that needs it waits.)
    async fn take_tab(&mut self, page: Page) {
        match page.event_listener::<EventJavascriptDialogOpening>().await {
            Ok(mut dialogs) => {
                let answering = page.clone();
                tokio::spawn(async move {
                    while let Some(dialog) = dialogs.next().await {
                        tracing::info!(
                            "a {:?} dialog ({:?}) is accepted, as the person went on",
                            dialog.r#type,
                            dialog.message
                        );
                        let mut answer = HandleJavaScriptDialogParams::new(true);
                        answer.prompt_text = dialog.default_prompt.clone();
                        if let Err(error) = answering.execute(answer).await {
                            tracing::debug!("the dialog was gone before it was answered: {error:#}");
                        }
                    }
                });
            }
            Err(error) => tracing::debug!("the tab's dialogs cannot be watched: {error:#}"),
        }
        self.tabs.push(page);
    }

    async fn adopt_new_tabs(&mut self) -> Result<()> {
        let deadline = Instant::now() + self.options.step_timeout;
        loop {
            let mut found = false;
            // Through the replay, which prepares each page it has not yet: the browser's first tab, which
            // a recording's first call adopts, can exist before the watch on new pages began.
            for page in self.replay.pages().await? {
                if !self.tabs.iter().any(|known| known.target_id() == page.target_id()) {
                    self.take_tab(page).await;
                    found = true;
                }
            }
            if found || Instant::now() > deadline {
                return Ok(());
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until the current tab, or a tab the call opened, shows `expected`; returns the URL reached,
    /// or the current tab's URL if none did.
    async fn wait_for_url(&mut self, expected: &str) -> std::result::Result<String, String> {
        let expected_canonical = canonical_url(expected);
        let deadline = Instant::now() + self.options.step_timeout;
        loop {
            let pages = self.replay.browser().pages().await.unwrap_or_default();
            for page in pages {
                let Some(url) = page.url().await.ok().flatten() else { continue };
                if url != expected && canonical_url(&url) != expected_canonical {
                    continue;
                }
                let position = self.tabs.iter().position(|known| known.target_id() == page.target_id());
                let is_current = position == Some(self.current);
                if is_current || position.is_none() {
                    if position.is_none() {
                        self.take_tab(page).await;
                        self.current = self.tabs.len() - 1;
                    }
                    return Ok(url);
                }
            }
            if Instant::now() > deadline {
                let current = self.page().ok().map(|p| p.url());
                let reached = match current {
                    Some(url) => url.await.ok().flatten().unwrap_or_default(),
                    None => String::new(),
                };
                return Err(reached);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Finds the call's element and scrolls it into view: by selector, by XPath, or, inside an iframe of
    /// another origin, by its recorded position in that frame. Waits, at most the step timeout, for it to
    /// be there, visible and still; one there but never visible is acted on at the timeout all the same.
    async fn locate(&self, call: &ToolCall) -> Result<Located> {
        let target = call.target.as_ref().context("the call names no element")?;
        let expression = locate_expression(target);
        let deadline = Instant::now() + self.options.step_timeout;
        let mut previous: Option<Sighting> = None;
        loop {
            let found = self.page()?.evaluate(expression.as_str()).await?.into_value::<serde_json::Value>()?;
            let sighting = Sighting::of(&found);
            let timed_out = Instant::now() >= deadline;
            match &sighting {
                Sighting::Element { x, y, visible, by, .. }
                    if (*visible && previous.as_ref() == Some(&sighting)) || timed_out =>
                {
                    return Ok(Located { x: *x, y: *y, by: *by });
                }
                Sighting::CrossOrigin { left, top } => {
                    let bbox = target
                        .bbox
                        .as_ref()
                        .context("an element in an iframe of another origin has no recorded box")?;
                    return Ok(Located {
                        x: left + bbox.x + bbox.width / 2.0,
                        y: top + bbox.y + bbox.height / 2.0,
                        by: LocatedBy::Position,
                    });
                }
                Sighting::Missing { reason } if timed_out => {
                    bail!("{} is not on the page after {:?} ({reason})", target.selector, self.options.step_timeout)
                }
                _ => {}
            }
            previous = Some(sighting);
            tokio::time::sleep(POLL).await;
        }
    }

    /// Focuses the call's element (for keys).
    async fn focus(&self, call: &ToolCall) -> Result<LocatedBy> {
        match self.in_element(call, "(element) => element.focus()", json!(null)).await {
            Ok(_) => Ok(LocatedBy::Selector),
            Err(_) => {
                let located = self.locate(call).await?;
                self.mouse_click(located.x, located.y, 1).await?;
                Ok(located.by)
            }
        }
    }

    /// Runs `function(element, argument)` on the call's element, found by selector or XPath, waiting at
    /// most the step timeout for it to be there.
    async fn in_element(
        &self,
        call: &ToolCall,
        function: &str,
        argument: serde_json::Value,
    ) -> Result<serde_json::Value> {
        let target = call.target.as_ref().context("the call names no element")?;
        let expression = format!(
            "(() => {{ const element = ({FIND_ELEMENT})({}, {}, {}); if (!element) return {{missing: true}}; \
             return {{value: ({function})(element, {argument}) ?? null}}; }})()",
            json!(target.frame_path),
            json!(target.selector),
            json!(target.xpath),
        );
        let deadline = Instant::now() + self.options.step_timeout;
        loop {
            let result = self.page()?.evaluate(expression.as_str()).await?.into_value::<serde_json::Value>()?;
            if result["missing"] != true {
                return Ok(result["value"].clone());
            }
            if Instant::now() >= deadline {
                bail!("{} is not on the page after {:?}", target.selector, self.options.step_timeout);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn mouse_click(&self, x: f64, y: f64, click_count: i64) -> Result<()> {
        self.mouse_click_with(x, y, click_count, 0).await
    }

    /// A click with `modifiers` held (DevTools' bit mask, see [`modifier_mask`]).
    async fn mouse_click_with(&self, x: f64, y: f64, click_count: i64, modifiers: i64) -> Result<()> {
        let page = self.page()?;
        let event = |kind| {
            DispatchMouseEventParams::builder()
                .r#type(kind)
                .x(x)
                .y(y)
                .button(MouseButton::Left)
                .click_count(click_count)
                .modifiers(modifiers)
                .build()
                .map_err(anyhow::Error::msg)
        };
        page.execute(event(DispatchMouseEventType::MouseMoved)?).await?;
        page.execute(event(DispatchMouseEventType::MousePressed)?).await?;
        page.execute(event(DispatchMouseEventType::MouseReleased)?).await?;
        Ok(())
    }

    /// Types `text` as a person does, a key at a time, so that pages listening for keys (a filter that
    /// runs on `keyup`, an editor) see the typing; a character no key makes is inserted as text.
    async fn type_text(&self, text: &str) -> Result<()> {
        let page = self.page()?;
        let mut buffer = [0u8; 4];
        for character in text.chars() {
            let key = if character == '\n' { "Enter" } else { character.encode_utf8(&mut buffer) };
            match chromiumoxide::keys::get_key_definition(key) {
                Some(definition) => {
                    let text = if character == '\n' { "\r" } else { key };
                    let down = DispatchKeyEventParams::builder()
                        .r#type(DispatchKeyEventType::KeyDown)
                        .key(definition.key)
                        .code(definition.code)
                        .windows_virtual_key_code(definition.key_code)
                        .native_virtual_key_code(definition.key_code)
                        .text(text);
                    let up = down.clone().r#type(DispatchKeyEventType::KeyUp).build().map_err(anyhow::Error::msg)?;
                    page.execute(down.build().map_err(anyhow::Error::msg)?).await?;
                    page.execute(up).await?;
                }
                None => {
                    page.execute(InsertTextParams::new(key)).await?;
                }
            }
        }
        Ok(())
    }

    /// Presses `key` with `modifiers` (DevTools' bit mask: Alt 1, Control 2, Meta 4, Shift 8).
    async fn key(&self, key: &str, modifiers: i64, commands: &[&str]) -> Result<()> {
        let definition =
            chromiumoxide::keys::get_key_definition(key).with_context(|| format!("unknown key {key:?}"))?;
        let mut down = DispatchKeyEventParams::builder()
            .key(definition.key)
            .code(definition.code)
            .windows_virtual_key_code(definition.key_code)
            .native_virtual_key_code(definition.key_code)
            .modifiers(modifiers);
        for command in commands {
            down = down.command(*command);
        }
        let text = definition.text.or((definition.key.len() == 1).then_some(definition.key));
        let kind = match text {
            Some(text) if modifiers & 0b111 == 0 => {
                down = down.text(text);
                DispatchKeyEventType::KeyDown
            }
            _ => DispatchKeyEventType::RawKeyDown,
        };
        let up = down.clone().r#type(DispatchKeyEventType::KeyUp).build().map_err(anyhow::Error::msg)?;
        let page = self.page()?;
        page.execute(down.r#type(kind).build().map_err(anyhow::Error::msg)?).await?;
        page.execute(up).await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(())
    }

    /// How much of the text of the recorded DOM snapshot `snapshot` the current tab shows, once it shows
    /// enough or the step timeout has passed (the recorder, too, waited for the page to react).
    /// Compares the current page's text with `snapshot`'s, less what `settled` (the capture of the
    /// person's next step on the same page) no longer shows: text only on screen while the page loaded.
    async fn compare_text(&mut self, snapshot: &str, settled: Option<&str>) -> Result<TextComparison> {
        let recorded = expected_text(&mut self.bundle, snapshot, settled)?;
        let deadline = Instant::now() + self.options.step_timeout;
        loop {
            let page = self.page()?;
            let (_, html) = crate::session::document_html(page).await?;
            let clocks = self.replay.responder().archive().recorded_clocks();
            let comparison = compare_text(&recorded, &page_text(0, "", "", &html), &clocks);
            if comparison.passes() || Instant::now() >= deadline {
                return Ok(comparison);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The WebSocket frames the page script counted, added up over the tabs (each tab's count is kept in
    /// its session storage; see `page/websocket.js`).
    async fn websocket_frames(&self) -> WebSocketFrames {
        let mut total = WebSocketFrames::default();
        for page in &self.tabs {
            // A tab whose page no longer answers (a script that never yields) counts nothing.
            let read = page.evaluate(
                "(() => { try { return sessionStorage.getItem('__trace_replay_websocket_frames__'); } catch { return null; } })()",
            );
            let counted = tokio::time::timeout(self.options.step_timeout, read)
                .await
                .ok()
                .and_then(Result::ok)
                .and_then(|result| result.into_value::<Option<String>>().ok().flatten())
                .and_then(|json| serde_json::from_str::<WebSocketFrames>(&json).ok());
            if let Some(counted) = counted {
                total.played += counted.played;
                total.matched += counted.matched;
                total.unmatched += counted.unmatched;
            }
        }
        total
    }

    /// The share of pixels of the current tab that differ from the recorded screenshot.
    async fn screenshot_difference(&mut self, recorded: &str) -> Result<f64> {
        let recorded = self.bundle.read(recorded)?;
        let params = ScreenshotParams::builder().format(CaptureScreenshotFormat::Png).build();
        let now = self.page()?.screenshot(params).await?;
        pixel_difference(&recorded, &now)
    }
}

impl Sighting {
    /// What [`locate_expression`] returned.
    fn of(found: &serde_json::Value) -> Sighting {
        if let (Some(x), Some(y)) = (found["x"].as_f64(), found["y"].as_f64()) {
            return Sighting::Element {
                x,
                y,
                width: found["width"].as_f64().unwrap_or_default(),
                height: found["height"].as_f64().unwrap_or_default(),
                visible: found["visible"] == true,
                by: if found["by"] == "xpath" { LocatedBy::Xpath } else { LocatedBy::Selector },
            };
        }
        if found["cross_origin"] == true
            && let (Some(left), Some(top)) = (found["left"].as_f64(), found["top"].as_f64())
        {
            return Sighting::CrossOrigin { left, top };
        }
        Sighting::Missing { reason: found["error"].as_str().unwrap_or("not found").to_owned() }
    }
}

/// `Control+a` → (Control's bit, "a").
fn parse_keys(keys: &str) -> Result<(i64, &str)> {
    let mut parts: Vec<&str> = keys.split('+').collect();
    // "Control++" presses "+".
    if keys.ends_with("++") {
        parts.truncate(parts.len() - 2);
        parts.push("+");
    }
    let key = parts.pop().filter(|k| !k.is_empty()).with_context(|| format!("no key in {keys:?}"))?;
    let modifiers = modifier_mask(parts).with_context(|| format!("in {keys:?}"))?;
    Ok((modifiers, key))
}

/// Modifier names as DevTools' bit mask: Alt 1, Control 2, Meta 4, Shift 8.
fn modifier_mask<'m>(names: impl IntoIterator<Item = &'m str>) -> Result<i64> {
    let mut mask = 0;
    for name in names {
        mask |= match name {
            "Alt" => 1,
            "Control" => 2,
            "Meta" => 4,
            "Shift" => 8,
            other => bail!("unknown modifier {other:?}"),
        };
    }
    Ok(mask)
}

/// Replaces each `{{credentials.<site>.<field>}}` with its secret.
pub fn fill_placeholders(text: &str, credentials: &[Credential]) -> Result<String> {
    let mut filled = text.to_owned();
    for credential in credentials {
        filled = filled.replace(&credential.placeholder(), &credential.value);
    }
    if filled.contains("{{credentials.") {
        bail!("no credential for {text}: the bundle's credentials were removed (a redacted export)");
    }
    Ok(filled)
}

/// Compares two screenshots (WebP, PNG or JPEG) pixel by pixel; sizes that differ count as entirely different.
/// A pixel differs when a channel is more than 16 levels apart: anti-aliasing and lossy artefacts stay below.
pub fn pixel_difference(a: &[u8], b: &[u8]) -> Result<f64> {
    let decode = |bytes: &[u8]| -> Result<(u32, u32, Vec<u8>)> {
        let image = image::load_from_memory(bytes).context("a screenshot is not an image")?.to_rgb8();
        Ok((image.width(), image.height(), image.into_raw()))
    };
    let (a, b) = (decode(a)?, decode(b)?);
    if (a.0, a.1) != (b.0, b.1) || a.2.len() != b.2.len() {
        return Ok(1.0);
    }
    let channels = a.2.len() / (a.0 as usize * a.1 as usize).max(1);
    let differing =
        a.2.chunks(channels)
            .zip(b.2.chunks(channels))
            .filter(|(p, q)| p.iter().zip(q.iter()).any(|(x, y)| x.abs_diff(*y) > 16))
            .count();
    Ok(differing as f64 / (a.0 as f64 * a.1 as f64).max(1.0))
}

/// Finds an element from the top document: through the frame path's iframes, then by selector (a
/// ` >>> ` enters a shadow root), then by XPath. Returns the element, or null.
const FIND_ELEMENT: &str = r#"(framePath, selector, xpath) => {
  let doc = document;
  for (const frame of framePath) {
    const element = doc.querySelector(frame);
    try { doc = element && element.contentDocument; } catch { doc = null; }
    if (!doc) return null;
  }
  let root = doc, element = null;
  try {
    for (const part of selector.split(" >>> ")) {
      element = root.querySelector(part);
      root = element && element.shadowRoot;
      if (!element) break;
    }
  } catch { element = null; }
  if (!element && xpath) element = doc.evaluate(xpath, doc, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue;
  return element;
}"#;

/// A field's value as the recorder reads it: a rich editor's text, or a form field's value; `null` for
/// anything else.
const FIELD_VALUE: &str =
    r#"(field) => field.isContentEditable ? field.innerText : (typeof field.value === "string" ? field.value : null)"#;

/// Sets a field's value as its own widget does, with the events that follow.
const SET_VALUE: &str = r#"(field, value) => {
  field.value = value;
  field.dispatchEvent(new Event("input", { bubbles: true }));
  field.dispatchEvent(new Event("change", { bubbles: true }));
  return null;
}"#;

const SELECT_OPTIONS: &str = r#"(select, option) => {
  const wanted = option.split(", ");
  let found = false;
  for (const o of select.options) {
    o.selected = wanted.includes((o.label || o.text).trim()) || wanted.includes(o.value);
    found = found || o.selected;
  }
  select.dispatchEvent(new Event("input", { bubbles: true }));
  select.dispatchEvent(new Event("change", { bubbles: true }));
  return found;
}"#;

/// Chooses the first option that is not among the recorded ones (one, or as many as were chosen).
const SELECT_ANOTHER_OPTION: &str = r#"(select, option) => {
  const recorded = option.split(", ");
  const other = [...select.options].find((o) => !recorded.includes((o.label || o.text).trim()) && !recorded.includes(o.value));
  if (!other) return false;
  for (const o of select.options) o.selected = o === other;
  select.dispatchEvent(new Event("input", { bubbles: true }));
  select.dispatchEvent(new Event("change", { bubbles: true }));
  return true;
}"#;

/// An expression that scrolls the element into view and gives its centre in the tab's viewport, adding
/// up the offsets of the iframes on the way; inside a cross-origin iframe, that iframe's offset.
fn locate_expression(target: &ElementDescriptor) -> String {
    format!(
        r#"(() => {{
  const framePath = {frame_path}, selector = {selector}, xpath = {xpath};
  let doc = document, frames = [];
  for (const frame of framePath) {{
    const element = doc.querySelector(frame);
    if (!element) return {{ error: "no iframe " + frame }};
    frames.push(element);
    let inner = null;
    try {{ inner = element.contentDocument; }} catch {{}}
    if (!inner) {{
      element.scrollIntoView({{ block: "center" }});
      let left = 0, top = 0;
      for (const f of frames) {{ const r = f.getBoundingClientRect(); left += r.x + f.clientLeft; top += r.y + f.clientTop; }}
      return {{ cross_origin: true, left, top }};
    }}
    doc = inner;
  }}
  const bySelector = ({find})(framePath, selector, null);
  const element = bySelector || ({find})(framePath, selector, xpath);
  if (!element) return {{ error: "no element" }};
  const byXpath = !bySelector;
  element.scrollIntoView({{ block: "center", inline: "center" }});
  const box = element.getBoundingClientRect();
  const visible = box.width > 0 && box.height > 0 && element.checkVisibility({{ visibilityProperty: true }});
  let left = 0, top = 0;
  for (const f of frames) {{ const r = f.getBoundingClientRect(); left += r.x + f.clientLeft; top += r.y + f.clientTop; }}
  return {{ x: left + box.x + box.width / 2, y: top + box.y + box.height / 2, width: box.width, height: box.height,
           visible, by: byXpath ? "xpath" : "selector" }};
}})()"#,
        frame_path = json!(target.frame_path),
        selector = json!(target.selector),
        xpath = json!(target.xpath),
        find = FIND_ELEMENT,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chromium's own captures of the demo shop's search page at 640×400: as the recorder takes it (WebP at
    /// its quality), as a re-run takes it (PNG), and as a re-run takes it with the heading changed.
    #[test]
    fn a_recorded_webp_matches_the_same_page_in_png_and_tells_a_change() {
        let recorded = include_bytes!("testdata/search.webp");
        let same = pixel_difference(recorded, include_bytes!("testdata/search.png")).unwrap();
        // WebP's artefacts around text pass the tolerance at about 1% of the pixels; a changed heading, many times
        // that.
        assert!(same < 0.015, "the same page differs by {same}");
        let changed = pixel_difference(recorded, include_bytes!("testdata/search-changed.png")).unwrap();
        assert!(changed > 5.0 * same, "a new heading over two lines changes {changed} of the page, the same {same}");
        let smaller = image::DynamicImage::new_rgb8(320, 200);
        let mut png = std::io::Cursor::new(Vec::new());
        smaller.write_to(&mut png, image::ImageFormat::Png).unwrap();
        assert_eq!(pixel_difference(recorded, png.get_ref()).unwrap(), 1.0, "sizes differ");
        assert!(pixel_difference(b"not an image", recorded).is_err());
    }

    #[test]
    fn keys_parse_into_modifiers_and_a_key() {
        assert_eq!(parse_keys("Enter").unwrap(), (0, "Enter"));
        assert_eq!(parse_keys("Control+a").unwrap(), (2, "a"));
        assert_eq!(parse_keys("Control+Shift+Tab").unwrap(), (10, "Tab"));
        assert_eq!(parse_keys("Control++").unwrap(), (2, "+"));
        assert!(parse_keys("Hyper+x").is_err());
    }

    #[test]
    fn placeholders_are_filled_and_a_missing_secret_is_an_error() {
        let credential = Credential {
            site: "shop.test".into(),
            field: "password".into(),
            target: ElementDescriptor {
                selector: "#password".into(),
                xpath: "/html[1]/body[1]/input[2]".into(),
                tag: "input".into(),
                id: None,
                name: None,
                input_type: None,
                role: None,
                accessible_name: None,
                text: None,
                bbox: None,
                frame_path: Vec::new(),
            },
            value: "blue-mug-42".into(),
        };
        let text = credential.placeholder();
        assert_eq!(fill_placeholders(&text, std::slice::from_ref(&credential)).unwrap(), "blue-mug-42");
        assert_eq!(fill_placeholders("plain", &[]).unwrap(), "plain");
        assert!(fill_placeholders(&text, &[]).unwrap_err().to_string().contains("redacted"));
    }
}
