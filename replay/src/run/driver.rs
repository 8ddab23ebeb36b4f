//! The re-run's driver: the tabs it keeps, numbered as the trajectory numbers the recording's, and each
//! call carried out and judged there: the URL it reached, what it sent that the person did not, the text
//! and the screen it left. Finding a call's element is [`super::locator`]'s, pressing keys and clicking
//! [`super::input`]'s.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::input::{Input, modifier_mask, parse_keys};
use super::locator::{ElementAction, Locator};
use super::{
    DOM_QUIET, DOM_WAIT_CAP, POLL, QUIET, RunOptions, expected_text, fill_placeholders, pace, pixel_difference,
};
use crate::page_scripts::SETTLE_PROBE;
use crate::responder::Divergence;
use crate::serve::Replay;
use anyhow::{Context, Result, bail};
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use chromiumoxide::cdp::browser_protocol::input::{DispatchMouseEventParams, DispatchMouseEventType};
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, EventJavascriptDialogOpening, HandleJavaScriptDialogParams,
};
use chromiumoxide::page::ScreenshotParams;
use futures::StreamExt;
use serde_json::json;
use trace_analysis::audit::alter_text;
use trace_analysis::evidence::page_text;
use trace_analysis::fidelity::{TextComparison, compare_text, reaches};
use trace_manifest::event::Viewport;
use trace_manifest::report::{LocatedBy, StepOutcome, WebSocketFrames};
use trace_manifest::trajectory::{Credential, ToolAction, ToolCall};

/// The `index`-th call's outcome before anything is judged: passed until something fails.
pub(super) fn untried(index: usize, call: &ToolCall) -> StepOutcome {
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
pub(super) struct PersonsInput {
    values: HashSet<String>,
    fields: HashSet<String>,
    /// Values never written into a report.
    secrets: Vec<String>,
}

impl PersonsInput {
    pub(super) fn of(calls: &[ToolCall], credentials: &[Credential]) -> PersonsInput {
        let mut input = PersonsInput {
            values: HashSet::new(),
            fields: HashSet::new(),
            // A credential altered (the audit's wrong password) is as much a secret as the credential.
            secrets: credentials
                .iter()
                .filter(|c| !c.value.is_empty())
                .flat_map(|c| [c.value.clone(), alter_text(&c.value)])
                .collect(),
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

pub(super) struct Runner<'a> {
    replay: &'a Replay,
    /// The replay's tabs, numbered as the trajectory numbers the recording's.
    tabs: Vec<Page>,
    current: usize,
    pub(super) options: RunOptions,
    /// The viewport set on each tab since it opened at the launch's.
    fitted: HashMap<usize, Viewport>,
    /// The latest call carried out, and when its act was done: the next waits the person's pause after it.
    previous: Option<(ToolCall, Instant)>,
    /// The step being judged may act otherwise than the person did (a perturbed run's, at or after its
    /// [`OffPathWaits::from_step`](super::OffPathWaits::from_step)): its waits for what the act should
    /// show end once the page is at rest ([`Runner::at_rest_for`]).
    may_leave_path: bool,
}

impl<'a> Runner<'a> {
    /// A re-run in `replay` of the recording it serves, with no tab open yet.
    pub(super) fn new(replay: &'a Replay, options: RunOptions) -> Runner<'a> {
        Runner {
            replay,
            tabs: Vec::new(),
            current: 0,
            options,
            fitted: HashMap::new(),
            previous: None,
            may_leave_path: false,
        }
    }
}

impl Runner<'_> {
    /// Carries out one call's act with its value altered ([`RunOptions::alter_step`]).
    async fn act_altered(&mut self, call: &ToolCall, credentials: &[Credential]) -> Result<Option<LocatedBy>> {
        match &call.action {
            ToolAction::Input { text } => {
                // A credential is altered as typed, not its placeholder: a wrong password of the right shape.
                let text = alter_text(&fill_placeholders(text, credentials)?);
                let altered = ToolCall { action: ToolAction::Input { text }, ..call.clone() };
                self.act(&altered, credentials).await
            }
            ToolAction::SelectDropdown { option } => {
                let chosen =
                    self.locator()?.in_element(call, ElementAction::SelectAnotherOption, json!(option)).await?;
                if chosen != json!(true) {
                    bail!("the select has no option but {option:?}");
                }
                Ok(Some(LocatedBy::Selector))
            }
            // A checkbox or radio button the person clicked is left as it was.
            ToolAction::Click { .. } => Ok(None),
            _ => self.act(call, credentials).await,
        }
    }

    /// Carries out the `index`-th call and judges it: the call itself, the URL it reached, what it sent
    /// that the person did not, the text and the screen it left.
    pub(super) async fn judged_step(
        &mut self,
        index: usize,
        call: &ToolCall,
        settled: Option<&str>,
        credentials: &[Credential],
        persons: &PersonsInput,
    ) -> StepOutcome {
        let divergences_before = self.replay.stats().divergences.len();
        self.may_leave_path = self.options.off_path_waits.is_some_and(|waits| index >= waits.from_step);
        let mut outcome = untried(index, call);
        let stepped = self.step(call, credentials, self.options.alter_step == Some(index)).await;
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
                Err(UrlMissed { reached, at_rest }) => {
                    outcome.passed = false;
                    let rest = match at_rest {
                        Some(rest) => format!(" (the page was at rest for {rest:?})"),
                        None => String::new(),
                    };
                    outcome.reason = Some(format!("reached {reached}, the recording reached {expected}{rest}"));
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
            && self.options.compare_screens
        {
            outcome.screenshot_difference = self.screenshot_difference(recorded).await.ok().flatten();
        }
        outcome
    }

    /// Carries out one call, as the person paced it (see [`pace`]), its value `altered` or not; returns how
    /// its element was found, if it has one.
    async fn step(&mut self, call: &ToolCall, credentials: &[Credential], altered: bool) -> Result<Option<LocatedBy>> {
        if let Some(tab) = call.tab {
            self.switch_to(tab as usize).await?;
        }
        if !self.tabs.is_empty() {
            self.fit_viewport(call).await?;
            self.settle().await;
            self.keep_pace(call).await;
        }
        self.acting(true).await;
        let done = if altered { self.act_altered(call, credentials).await } else { self.act(call, credentials).await };
        self.acting(false).await;
        self.previous = Some((call.clone(), Instant::now()));
        done
    }

    /// Waits what is left of the person's pause before `call` since the previous call's act was done.
    async fn keep_pace(&self, call: &ToolCall) {
        if let Some((previous, done_at)) = &self.previous {
            tokio::time::sleep(pace::pause_between(previous, call).saturating_sub(done_at.elapsed())).await;
        }
    }

    /// Tells the current tab's page that the re-run acts (`acting`) or is done acting: the short timers
    /// armed meanwhile are the act's, which [`Runner::settle`] waits for (`page/settle.js`). A page that
    /// cannot be told (none open yet, one navigating away) has nothing of the act's to wait for.
    async fn acting(&self, acting: bool) {
        let Ok(page) = self.page() else { return };
        let call = if acting { "begin" } else { "end" };
        let _ = page.evaluate(format!("globalThis.{SETTLE_PROBE}?.{call}()")).await;
    }

    /// Carries out one call's act.
    async fn act(&mut self, call: &ToolCall, credentials: &[Credential]) -> Result<Option<LocatedBy>> {
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
            ToolAction::Click { count, modifiers, coord } => {
                let located = self.locator()?.locate(call).await?;
                let (x, y) = located.point_at(click_offset(call.target.as_ref(), *coord, located.size));
                let modifiers = modifier_mask(modifiers.iter().map(String::as_str))?;
                for press in 1..=*count {
                    self.input()?.mouse_click_with(x, y, i64::from(press), modifiers).await?;
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
                    self.locator()?.in_element(call, ElementAction::SetValue, json!(text)).await?;
                    return Ok(Some(LocatedBy::Selector));
                }
                let located = self.locator()?.locate(call).await?;
                self.input()?.mouse_click(located.x, located.y, 1).await?;
                // What the click set off (a search index a focus loads) arrives before the first key, as
                // it had for the person.
                let clicked_at = Instant::now();
                self.acting(false).await;
                self.settle().await;
                tokio::time::sleep(pace::pause_before_typing(call).saturating_sub(clicked_at.elapsed())).await;
                self.acting(true).await;
                // Replace what the field holds, as the recorded value is the field's whole value.
                self.input()?.key("a", 2, &["selectAll"]).await?;
                if text.is_empty() {
                    self.input()?.key("Backspace", 0, &[]).await?;
                }
                self.input()?.type_text(&text, pace::key_interval(call, text.chars().count())).await?;
                let held = self.locator()?.in_element(call, ElementAction::FieldValue, json!(null)).await?;
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
                    Some(_) => Some(self.locator()?.focus(call).await?),
                    None => None,
                };
                let (modifiers, key) = parse_keys(keys)?;
                self.input()?.key(key, modifiers, &[]).await?;
                Ok(located)
            }
            ToolAction::Scroll { delta_x, delta_y, .. } => {
                let (x, y) = match &call.target {
                    Some(_) => {
                        let located = self.locator()?.locate(call).await?;
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
                let chosen = self.locator()?.in_element(call, ElementAction::SelectOptions, json!(option)).await?;
                if chosen != json!(true) {
                    bail!("the select has no option {option:?}");
                }
                Ok(Some(LocatedBy::Selector))
            }
            ToolAction::DragDrop {
                coord_source_x,
                coord_source_y,
                coord_target_x,
                coord_target_y,
                element_target,
                steps,
            } => {
                let (pressed, released) = ((*coord_source_x, *coord_source_y), (*coord_target_x, *coord_target_y));
                let source = self.locator()?.locate(call).await?;
                let from = source.point_at(offset_in(call.target.as_ref(), pressed));
                // Onto the recorded element where it is now, at the same place in it; else as far from the
                // press as the person went (a canvas the page scrolled otherwise).
                let onto = match element_target {
                    Some(target) => self.locator()?.locate_element(target, true).await.ok(),
                    None => None,
                };
                let to = match onto {
                    Some(onto) => onto.point_at(offset_in(element_target.as_deref(), released)),
                    None => (from.0 + released.0 - pressed.0, from.1 + released.1 - pressed.1),
                };
                self.input()?.drag(from, to, *steps).await?;
                Ok(Some(source.by))
            }
            ToolAction::Submit {} => {
                self.locator()?.in_element(call, ElementAction::Submit, json!(null)).await?;
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

    pub(super) fn page(&self) -> Result<&Page> {
        self.tabs.get(self.current).context("no tab is open yet")
    }

    /// The current tab's mouse and keyboard.
    fn input(&self) -> Result<Input<'_>> {
        Ok(Input(self.page()?))
    }

    /// Finds elements in the current tab, each within the step timeout.
    fn locator(&self) -> Result<Locator<'_>> {
        Ok(Locator { page: self.page()?, timeout: self.options.step_timeout })
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

    /// Waits, at most the step timeout, until the current tab has settled: its document loaded, replay
    /// asked for nothing for [`QUIET`], the short timers the last act armed fired (`page/settle.js`); then
    /// for its document to go [`DOM_QUIET`] unchanged, at most [`DOM_WAIT_CAP`] more (an animation never
    /// rests). Then the re-run acts whatever the page is doing, as a person would.
    pub(super) async fn settle(&self) {
        let deadline = Instant::now() + self.options.step_timeout;
        let mut dom_deadline = None;
        loop {
            let page = match self.page() {
                Ok(page) => Some(page_state(page).await),
                Err(_) => None,
            };
            let quiet = self.replay.responder().quiet_for();
            let now = Instant::now();
            let settled = match &page {
                // No tab yet, or one that does not answer (a dialog, a script that never yields): nothing to wait for.
                None | Some(None) => quiet >= QUIET,
                Some(Some(state)) => {
                    state.done_with_the_act(quiet) && {
                        let dom_deadline = *dom_deadline.get_or_insert(now + DOM_WAIT_CAP);
                        state.unchanged_for >= DOM_QUIET || now >= dom_deadline
                    }
                }
            };
            if settled || now >= deadline {
                return;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// For a step that may have left the person's path: `Some` once the current tab has been at rest (its
    /// document loaded, nothing asked of replay for [`QUIET`], no timer of the act pending, its document
    /// unchanged for [`DOM_QUIET`]) for the off-path timeout, `resting_since` carried from one look to the
    /// next. A page at rest that does not show what the person's showed after the act will not: a
    /// perturbed run that left the path then fails the step without waiting out the whole step timeout,
    /// which is kept for a page still busy (loading, animating, a machine too loaded to have drawn it
    /// yet). `None` for every other step, which always waits the whole timeout.
    async fn at_rest_for(&self, resting_since: &mut Option<Instant>) -> Option<Duration> {
        let waits = self.options.off_path_waits.filter(|_| self.may_leave_path)?;
        let state = page_state(self.page().ok()?).await;
        let quiet = self.replay.responder().quiet_for();
        let resting = state.is_some_and(|state| state.done_with_the_act(quiet) && state.unchanged_for >= DOM_QUIET);
        if !resting {
            *resting_since = None;
            return None;
        }
        let since = *resting_since.get_or_insert_with(Instant::now);
        (since.elapsed() >= waits.timeout).then_some(waits.timeout)
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
    /// or the current tab's URL if none did. For a step that may have left the person's path, the wait
    /// also ends once the current tab has been at rest for the off-path timeout ([`Runner::at_rest_for`]).
    async fn wait_for_url(&mut self, expected: &str) -> std::result::Result<String, UrlMissed> {
        let deadline = Instant::now() + self.options.step_timeout;
        let mut resting_since = None;
        loop {
            let pages = self.replay.browser().pages().await.unwrap_or_default();
            for page in pages {
                let Some(url) = page.url().await.ok().flatten() else { continue };
                if !reaches(&url, expected) {
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
            let at_rest = self.at_rest_for(&mut resting_since).await;
            if Instant::now() > deadline || at_rest.is_some() {
                let current = self.page().ok().map(|p| p.url());
                let reached = match current {
                    Some(url) => url.await.ok().flatten().unwrap_or_default(),
                    None => String::new(),
                };
                return Err(UrlMissed { reached, at_rest });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// enough or the step timeout has passed (the recorder, too, waited for the page to react).
    /// Compares the current page's text with `snapshot`'s, less what `settled` (the capture of the
    /// person's next step on the same page) no longer shows: text only on screen while the page loaded.
    async fn compare_text(&mut self, snapshot: &str, settled: Option<&str>) -> Result<TextComparison> {
        let recorded = expected_text(|file| self.recorded_file(file), snapshot, settled)?;
        let deadline = Instant::now() + self.options.step_timeout;
        let mut resting_since = None;
        loop {
            let page = self.page()?;
            let (_, html) = crate::session::document_html(page).await?;
            let clocks = self.replay.responder().archive().recorded_clocks();
            let comparison = compare_text(&recorded, &page_text(0, "", "", &html), &clocks);
            if comparison.passes() || Instant::now() >= deadline || self.at_rest_for(&mut resting_since).await.is_some()
            {
                return Ok(comparison);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The WebSocket frames the page script counted, added up over the tabs (each tab's count is kept in
    /// its session storage; see `page/websocket.js`).
    pub(super) async fn websocket_frames(&self) -> WebSocketFrames {
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
                total.chatter += counted.chatter;
            }
        }
        total
    }

    /// A file of the recording (a capture, a screenshot), read from the bundle the replay serves: the one
    /// open bundle, whose snapshot pack is decoded once when captures are read in order.
    fn recorded_file(&self, file: &str) -> Result<Vec<u8>> {
        Ok(self.replay.responder().archive().with_bundle(|bundle| bundle.read(file))?)
    }

    /// The share of pixels of the current tab that differ from the recorded screenshot, if they are of one size.
    async fn screenshot_difference(&mut self, recorded: &str) -> Result<Option<f64>> {
        let recorded = self.recorded_file(recorded)?;
        let params = ScreenshotParams::builder().format(CaptureScreenshotFormat::Png).build();
        let now = self.page()?.screenshot(params).await?;
        pixel_difference(&recorded, &now)
    }
}

/// A URL the step should have reached and did not.
struct UrlMissed {
    /// The current tab's URL.
    reached: String,
    /// How long the page had been at rest when the wait ended early, if it did.
    at_rest: Option<Duration>,
}

/// What [`Runner::settle`] reads of a page at once.
struct PageState {
    /// Its document has loaded (`readyState` `complete`).
    loaded: bool,
    /// The short timers of the last act (and theirs) not fired yet (`page/settle.js`).
    timers: u64,
    /// How long its documents have gone without a change.
    unchanged_for: Duration,
}

impl PageState {
    /// Its document loaded, no timer of the last act pending, and replay asked for nothing for [`QUIET`]
    /// (`quiet`, the responder's): what settling and being at rest both begin with.
    fn done_with_the_act(&self, quiet: Duration) -> bool {
        self.loaded && self.timers == 0 && quiet >= QUIET
    }
}

/// `page`'s [`PageState`]; `None` when it does not answer within [`POLL`] × 10.
async fn page_state(page: &Page) -> Option<PageState> {
    let expression = format!(
        "(() => {{ const probe = globalThis.{SETTLE_PROBE}; const state = probe ? probe.state() : {{timers: 0, quiet_ms: 1e9}}; \
           return {{loaded: document.readyState === 'complete', timers: state.timers, quiet_ms: state.quiet_ms}}; }})()"
    );
    let read = tokio::time::timeout(POLL * 10, page.evaluate(expression)).await.ok()?.ok()?;
    let value: serde_json::Value = read.into_value().ok()?;
    Some(PageState {
        loaded: value["loaded"].as_bool()?,
        timers: value["timers"].as_u64().unwrap_or(0),
        unchanged_for: Duration::from_secs_f64(value["quiet_ms"].as_f64().unwrap_or(f64::MAX).clamp(0.0, 1e9) / 1000.0),
    })
}

/// Where in its element the person clicked (`coord` less the element's recorded box), when the element
/// found has the size it had for them: on a slider the thumb, not its middle, which would move it; on a
/// canvas the spot. An element of another size (a layout that differs) is clicked in its centre.
fn click_offset(
    element: Option<&trace_manifest::event::ElementDescriptor>,
    coord: Option<[f64; 2]>,
    found: Option<(f64, f64)>,
) -> Option<(f64, f64)> {
    let recorded = element?.bbox.as_ref()?;
    let (width, height) = found?;
    let same_size = (width - recorded.width).abs() <= 2.0 && (height - recorded.height).abs() <= 2.0;
    let [x, y] = coord?;
    same_size.then(|| offset_in(element, (x, y))).flatten()
}

/// Where `point` (in the frame's viewport, as recorded) lies in `element`'s recorded box, from its top left
/// corner; `None` when the recording has no box.
fn offset_in(element: Option<&trace_manifest::event::ElementDescriptor>, point: (f64, f64)) -> Option<(f64, f64)> {
    element.and_then(|element| element.bbox.as_ref()).map(|bbox| (point.0 - bbox.x, point.1 - bbox.y))
}

#[cfg(test)]
mod tests {
    use trace_manifest::event::{ElementDescriptor, Rect};

    use super::super::locator::Located;
    use super::*;

    /// Issue #43: a slider's thumb clicked where it stood (at 3 of 0 to 10) was clicked in the slider's
    /// middle on re-run, which moved it to 5 before the arrow keys.
    #[test]
    fn a_click_lands_where_the_person_clicked_in_an_element_of_the_same_size() {
        let slider = ElementDescriptor {
            bbox: Some(Rect { x: 16.0, y: 112.0, width: 256.0, height: 28.0 }),
            ..ElementDescriptor::default()
        };
        let offset = click_offset(Some(&slider), Some([92.0, 126.0]), Some((256.0, 28.0)));
        assert_eq!(offset, Some((76.0, 14.0)));
        // Found elsewhere on the page, the same size: the same place within it.
        let found = Located { x: 500.0, y: 300.0, size: Some((256.0, 28.0)), by: LocatedBy::Selector };
        assert_eq!(found.point_at(offset), (500.0 - 128.0 + 76.0, 300.0));
        // A layout that differs, a recording that did not say where, an element with no box: the centre.
        assert_eq!(click_offset(Some(&slider), Some([92.0, 126.0]), Some((400.0, 28.0))), None);
        assert_eq!(click_offset(Some(&slider), None, Some((256.0, 28.0))), None);
        assert_eq!(click_offset(Some(&ElementDescriptor::default()), Some([92.0, 126.0]), Some((256.0, 28.0))), None);
    }
}
