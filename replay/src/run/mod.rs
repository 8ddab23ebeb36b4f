//! `trace-replay run --human`: re-runs the recorded demonstration, as the tool calls of its trajectory, in
//! the replayed site, and reports how faithfully the replay reproduces it. Each call finds its element by
//! the recorded CSS selector, then by XPath, then by position (an iframe of another origin cannot be
//! searched from the page, so its elements are reached by the recorded position within it); after each
//! call the URL reached is compared with the recorded one and the screen with the recorded screenshot.
//!
//! The re-run waits as the person did, each wait bounded by [`RunOptions::step_timeout`]: before a call,
//! for the page to settle (its document loaded, no request asked of replay for [`QUIET`], the short timers
//! the previous act armed fired, a debounce's or an autosave's, then its document unchanged for
//! [`DOM_QUIET`]), and for the person's own pause before it, capped ([`pace`]); for the call's element to
//! be there, visible and still (the same box twice in a row), since pages fill results on timers and
//! animate them in. Typing starts once what the click into its field set off has settled, and keys come at
//! the person's pace. A page that never settles is acted on at the timeout anyway; an element that never
//! appears fails the call. A perturbed run of the audit waits less once it has left the person's path
//! ([`OffPathWaits`]).
//!
//! # Layout
//! - [`driver`]: the re-run's tabs and the judging of each step (URL, what was sent, text, screen).
//! - [`locator`]: a call's element found in the page, and acted on there (`page/elements.js`).
//! - [`input`]: the mouse and the keyboard, as DevTools' input events.
//! - [`pace`]: the person's pauses and typing speed, read from the recording.

mod driver;
mod input;
mod locator;
pub mod pace;

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::archive::{ReplayArchive, open_bundle};
use crate::responder::Stats;
use crate::serve::{Options, Replay};
use anyhow::{Context, Result, bail};
use driver::{PersonsInput, Runner, untried};
use trace_analysis::evidence::{PageText, page_text};
use trace_analysis::fidelity::settled_text;
use trace_analysis::trajectory;
use trace_bundle::archive::ZipLimits;
use trace_manifest::report::{FidelityReport, StepFailure, StepOutcome};
use trace_manifest::trajectory::{Credential, ToolCall};

/// How long the network must have been idle, as replay sees it, for a page to count as settled.
pub const QUIET: Duration = Duration::from_millis(400);
/// How long a settled page's document must go unchanged before the next act: as long as the recorder
/// waits before its capture after an act.
pub const DOM_QUIET: Duration = Duration::from_millis(300);
/// The longest the re-run waits for a page's document to rest once the rest has settled, as the recorder
/// waits at most as long.
pub const DOM_WAIT_CAP: Duration = Duration::from_secs(2);
/// How often the re-run looks again while it waits.
const POLL: Duration = Duration::from_millis(100);

/// How the re-run behaves.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// The longest the re-run waits for anything: a page to settle, an element to appear, a call's effect
    /// (a navigation, a new tab) to show.
    pub step_timeout: Duration,
    /// The call (an index into the calls) whose value the re-run alters, as the audit's perturbations do
    /// (`trace_analysis::audit`): typed text altered ([`alter_text`](trace_analysis::audit::alter_text)),
    /// another option chosen, a checkbox or radio button left alone.
    pub alter_step: Option<usize>,
    /// Stop at the first step after the altered one that fails, leaving the rest untried: a person who
    /// typed a wrong password and was not let in goes no further, and the steps of the signed-in site
    /// would each wait out their deadline for nothing.
    pub stop_after_failure: bool,
    /// Shorter waits once a perturbed run has left the person's path ([`OffPathWaits`]).
    pub off_path_waits: Option<OffPathWaits>,
    /// Compare each step's screen with the recorded screenshot (the report's `screenshot_difference`). A
    /// run judged by its checkpoints alone (the audit's perturbed runs) leaves it out: a screenshot and
    /// its comparison are about a third of a re-run's processor time.
    pub compare_screens: bool,
}

/// A perturbed run's waits once it may have left the person's path:
/// - from `from_step` on, a wait for what an act should show (the URL it reached, the page's text) ends
///   once the page has been at rest for `timeout` (loaded, nothing asked of replay, no timer of the act
///   pending, its document unchanged): a page at rest that does not show it will not, and the failure
///   that leaves the path no longer waits the whole step timeout. A page still busy keeps it, so that a
///   loaded machine does not fail a step a faithful run would pass;
/// - after a step at or after `from_step` has failed, every later wait the step timeout bounds (the page
///   settling, an element, a URL, a text, a new tab) takes at most `timeout`. Such a run acts on pages the
///   person never saw, and waiting the whole step timeout for each element, URL and text they met is what
///   made it cost three times a faithful run (the audit's "without a step" runs).
///
/// A failure before `from_step` (a loaded machine) changes nothing, and the person's pauses are kept.
#[derive(Debug, Clone, Copy)]
pub struct OffPathWaits {
    /// The first call (an index into the calls run) that may act otherwise than the person did: the
    /// altered one, or the one after a step left out.
    pub from_step: usize,
    pub timeout: Duration,
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            step_timeout: Duration::from_secs(10),
            alter_step: None,
            stop_after_failure: false,
            off_path_waits: None,
            compare_screens: true,
        }
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
    if frames.played + frames.matched + frames.unmatched + frames.chatter > 0 {
        let _ = writeln!(
            f,
            "websocket frames: {} played back; of the page's own, {} matched, {} unmatched, {} on its own clock",
            frames.played, frames.matched, frames.unmatched, frames.chatter
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
    trajectory::of_bundle(&mut open_bundle(path, limits)?)
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
/// next step on the same page (`settled`, see [`settled_snapshot`]) no longer shows. The captures are read
/// by `read_file` (a file of the bundle by its name), so that a caller sharing its bundle holds it only
/// while a file is read, not while the text is taken out of it.
pub fn expected_text(
    mut read_file: impl FnMut(&str) -> Result<Vec<u8>>,
    snapshot: &str,
    settled: Option<&str>,
) -> Result<PageText> {
    let mut read =
        |file: &str| -> Result<PageText> { Ok(page_text(0, "", file, &String::from_utf8_lossy(&read_file(file)?))) };
    let recorded = read(snapshot)?;
    Ok(match settled {
        Some(settled) => settled_text(&recorded, &read(settled)?),
        None => recorded,
    })
}

/// `trace-replay run --human`: re-runs the demonstration of the bundle at `bundle` in a replay of it
/// launched with `browser`, and reports, with the misses after the last step noted once the replay is
/// closed ([`note_late_misses`]).
pub async fn rerun_demonstration(
    bundle: &Path,
    limits: ZipLimits,
    browser: &Options,
    options: RunOptions,
) -> Result<FidelityReport> {
    let archive = ReplayArchive::open_with_limits(bundle, limits)?;
    let (calls, credentials) = archive.with_bundle(trajectory::of_bundle)?;
    let replay = Replay::launch(archive, browser).await?;
    let report = run_human(&replay, &calls, &credentials, options).await;
    let final_stats = replay.close().await?;
    let mut report = report?;
    note_late_misses(&mut report, &final_stats);
    Ok(report)
}

/// Runs `calls` in `replay`, then reports. The recorded captures the steps are judged against are read
/// from the bundle `replay` serves, through its one open bundle ([`ReplayArchive::with_bundle`]).
/// Requests missed once the last call's page has settled (a beacon sent as the browser closes) are not in
/// the report: [`note_late_misses`] lists them apart once the replay is closed.
///
/// [`ReplayArchive::with_bundle`]: crate::archive::ReplayArchive::with_bundle
pub async fn run_human(
    replay: &Replay,
    calls: &[ToolCall],
    credentials: &[Credential],
    options: RunOptions,
) -> Result<FidelityReport> {
    let mut runner = Runner::new(replay, options);
    let persons = PersonsInput::of(calls, credentials);
    let mut steps = Vec::new();
    let deadline = options.step_deadline();
    for (index, call) in calls.iter().enumerate() {
        let stopped = options.stop_after_failure
            && steps.iter().any(|step: &StepOutcome| !step.passed && Some(step.step - 1) > options.alter_step);
        if stopped {
            let reason = "not tried: a step after the altered one failed".to_owned();
            steps.push(StepOutcome { passed: false, reason: Some(reason), ..untried(index, call) });
            continue;
        }
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
        if !outcome.passed
            && let Some(waits) = options.off_path_waits
            && index >= waits.from_step
        {
            runner.options.step_timeout = runner.options.step_timeout.min(waits.timeout);
        }
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

/// Compares two screenshots (WebP, PNG or JPEG) pixel by pixel: the share of pixels that differ, or `None`
/// when their sizes differ (a screen of another size is not the same screen moved: nothing is compared).
/// A pixel differs when a channel is more than 16 levels apart: anti-aliasing and lossy artefacts stay below.
pub fn pixel_difference(a: &[u8], b: &[u8]) -> Result<Option<f64>> {
    let decode = |bytes: &[u8]| -> Result<(u32, u32, Vec<u8>)> {
        let image = image::load_from_memory(bytes).context("a screenshot is not an image")?.to_rgb8();
        Ok((image.width(), image.height(), image.into_raw()))
    };
    let (a, b) = (decode(a)?, decode(b)?);
    if (a.0, a.1) != (b.0, b.1) || a.2.len() != b.2.len() {
        return Ok(None);
    }
    let channels = a.2.len() / (a.0 as usize * a.1 as usize).max(1);
    let differing =
        a.2.chunks(channels)
            .zip(b.2.chunks(channels))
            .filter(|(p, q)| p.iter().zip(q.iter()).any(|(x, y)| x.abs_diff(*y) > 16))
            .count();
    Ok(Some(differing as f64 / (a.0 as f64 * a.1 as f64).max(1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_manifest::event::ElementDescriptor;

    /// Chromium's own captures of the demo shop's search page at 640×400: as the recorder takes it (WebP at
    /// its quality), as a re-run takes it (PNG), and as a re-run takes it with the heading changed.
    #[test]
    fn a_recorded_webp_matches_the_same_page_in_png_and_tells_a_change() {
        let recorded = include_bytes!("testdata/search.webp");
        let same = pixel_difference(recorded, include_bytes!("testdata/search.png")).unwrap().unwrap();
        // WebP's artefacts around text pass the tolerance at about 1% of the pixels; a changed heading, many times
        // that.
        assert!(same < 0.015, "the same page differs by {same}");
        let changed = pixel_difference(recorded, include_bytes!("testdata/search-changed.png")).unwrap().unwrap();
        assert!(changed > 5.0 * same, "a new heading over two lines changes {changed} of the page, the same {same}");
        let smaller = image::DynamicImage::new_rgb8(320, 200);
        let mut png = std::io::Cursor::new(Vec::new());
        smaller.write_to(&mut png, image::ImageFormat::Png).unwrap();
        assert_eq!(pixel_difference(recorded, png.get_ref()).unwrap(), None, "sizes differ: nothing compared");
        assert!(pixel_difference(b"not an image", recorded).is_err());
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
