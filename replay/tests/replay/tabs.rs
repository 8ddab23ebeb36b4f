//! Every tab of a replay has the page scripts before its first document, whichever way it came to be:
//! the browser's own first tab, which a recording's first call (in tab 0) adopts, and a tab the replay
//! opens. (A tab a page opens has them from its second document: see `serve::prepare_new_pages`.) A tab
//! without them reaches past the recording (its WebSockets are the
//! browser's own, its clock is today's), and in CI one in a few re-runs of a WebSocket application failed
//! that way, when the first tab was adopted while the watch on new tabs was still preparing it.
//!
//! The determinism script is the witness: a page that shows the year its clock reads shows the recording's
//! year only when the scripts ran before it.

use serde_json::json;
use trace_manifest::trajectory::ToolCall;
use trace_replay::archive::ReplayArchive;
use trace_replay::run::{RunOptions, run_human};
use trace_replay::serve::{Options, Replay};

use crate::common::{STARTED_AT, har, har_entry, stored_body, write_bundle};

const PAGE: &str = "http://shop.test/clock";

/// The year the recording started, which a page shows when replay's clock is in place.
fn recorded_year() -> String {
    STARTED_AT[..4].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tab_has_the_page_scripts_before_its_first_document() {
    let shows_year = r#"<!doctype html><title>?</title>
<script>document.title = String(new Date().getUTCFullYear());</script>"#;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("bundle");
    let entries = vec![har_entry(PAGE, stored_body(&dir, shows_year.as_bytes(), "text/html"))];
    write_bundle(&dir, "tabs", &har(entries), &json!({ "snapshots": [] }));
    let calls: Vec<ToolCall> =
        serde_json::from_value(json!([{ "name": "navigate", "params": { "url": PAGE }, "tab": 0, "ts": 0.0 }]))
            .unwrap();

    // Many times over: the first tab's race with the watch on new tabs was lost only now and then.
    for attempt in 0..4 {
        let replay = Replay::launch(ReplayArchive::open(&dir).unwrap(), &Options::default()).await.unwrap();
        let report = run_human(&replay, &calls, &[], RunOptions::default()).await.unwrap();
        assert_eq!(report.steps_failed, 0, "attempt {attempt}: {}", trace_replay::run::text(&report));
        replay.open(PAGE).await.unwrap();
        let mut titles = Vec::new();
        for page in replay.pages().await.unwrap() {
            let url = page.url().await.unwrap().unwrap_or_default();
            let title = page.evaluate("document.title").await.unwrap().into_value::<String>().unwrap();
            titles.push((url, title));
        }
        replay.close().await.unwrap();
        let of =
            |url: &str| titles.iter().filter(|(at, _)| at == url).map(|(_, title)| title.clone()).collect::<Vec<_>>();
        // The adopted first tab and the tab the replay opened.
        assert_eq!(of(PAGE), vec![recorded_year(), recorded_year()], "attempt {attempt}: {titles:?}");
    }
}
