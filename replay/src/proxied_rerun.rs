//! The person's demonstration re-run through the proxy (`serve --proxy-port`), the path BrowserGym's
//! package gives an agent: the audit's proof that a bundle's checkpoints are reached there too, not only
//! on the DevTools path `eval` takes. The browser goes through the proxy for every request and is driven
//! by DevTools only to act ([`Replay::launch_through_proxy`]); the proxy answers, puts its page scripts in
//! and records the episode ([`ProxyEpisode`]), which is scored as `trace-replay score` scores an agent's
//! ([`score_proxied`]), with the person's steps and answer.
//!
//! The episode's folder is laid out as a proxied agent's (`session/`, `served.json`, `result.json`), with
//! the re-run's report beside them (`rerun.json`).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use trace_manifest::eval::{self as files, EvalResult};
use trace_store::atomic::write_json;

use crate::eval::{EvalOptions, OpenedTask, score_proxied_with};
use crate::page_scripts::REPORT_NOW;
use crate::proxy::{Proxy, ProxyEpisode, ProxyOptions};
use crate::run::{RunOptions, run_human};
use crate::serve::Replay;

/// The longest a page may take to report what it shows once the re-run is done.
const REPORT_WAIT: Duration = Duration::from_secs(10);

/// Re-runs the demonstration of the task `opened` through a proxy of its own into `out`, and scores it
/// there; the result's `error` says which steps failed, if any did. An unusable browser is an `Err`.
pub async fn rerun_through_proxy(opened: &OpenedTask, out: &Path, options: &EvalOptions) -> Result<EvalResult> {
    let OpenedTask { reference, archive } = opened;
    let task_info = archive.manifest.task.clone();
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("cannot clear {}", out.display()))?;
    }
    let episode = ProxyEpisode::create(out, options.episode_budget)?;
    let proxy_options = ProxyOptions { determinism: options.browser.determinism, ..ProxyOptions::default() };
    let proxy = Proxy::start(archive.clone(), &proxy_options, Some(episode.session())).await?;
    let replay = Replay::launch_through_proxy(
        &proxy.url(),
        &proxy.authority().spki_fingerprint(),
        proxy.responder(),
        &options.browser,
    )
    .await;
    let replay = match replay {
        Ok(replay) => replay,
        Err(error) => {
            proxy.close();
            return Err(error);
        }
    };
    let report = run_human(&replay, &reference.calls, &reference.credentials, RunOptions::default()).await;
    // What each page shows now, reported to the proxy before the browser goes, as BrowserGym's package
    // has it reported before it scores.
    let report_now = EvaluateParams::builder()
        .expression(format!("globalThis[{REPORT_NOW:?}]?.()"))
        .await_promise(true)
        .build()
        .expect("an expression is all EvaluateParams needs");
    for page in replay.pages().await.unwrap_or_default() {
        let reported = page.evaluate_expression(report_now.clone());
        if !matches!(tokio::time::timeout(REPORT_WAIT, reported).await, Ok(Ok(_))) {
            tracing::debug!("a page of the proxied re-run did not report what it shows");
        }
    }
    let closed = replay.close().await;
    let stats = proxy.close();
    episode.finish(task_info, &stats)?;
    closed?;

    let error = match &report {
        Ok(report) => {
            write_json(&out.join(files::RERUN_FILE), report)?;
            (report.steps_failed > 0)
                .then(|| format!("{} of the person's steps failed through the proxy", report.steps_failed))
        }
        Err(error) => Some(format!("the re-run through the proxy failed: {error:#}")),
    };
    let answer = reference.task.answer.clone();
    let mut result = score_proxied_with(reference, out, answer, Some(reference.person_steps()), options.limits)?;
    result.agent = options.agent.name().to_owned();
    result.error = error;
    write_json(&out.join(files::RESULT_FILE), &result)?;
    Ok(result)
}
