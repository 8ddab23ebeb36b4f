//! How faithfully a replayed page shows what the recording showed after the same step: the text of the
//! two documents, each read by [`evidence::page_text`] from HTML serialized the same way (DevTools'
//! `DOM.getOuterHTML` with shadow roots), compared run by run. A step whose page shows too little of the
//! recorded text did not reproduce the recording, whatever URL it reached: a result that never appeared,
//! an application that failed to boot, an error page served in place of the real one.
//!
//! The tolerance ([`TEXT_TOLERANCE`]) is on the share of the recorded text's characters found in the
//! replayed page, so that a clock or a counter that moved by a second (one short run) does not fail a
//! step, while a missing result list (many runs, most of the characters) does. Runs are compared as
//! multisets, whitespace collapsed: order and layout do not count, a run shown twice in the recording
//! must be shown twice again. Text the replayed page adds is not counted against it (a page may show
//! more, such as a banner dismissed in the recording).
//!
//! Text the recorded page showed only while it loaded (a "Connecting..." the page replaced as soon as its
//! socket opened) is no part of what a step must show: a faster replay never shows it. The recording
//! tells it apart when the person's next step happened on the same page: what that step's capture no
//! longer shows was transient ([`settled_text`]).
//!
//! Runs that are a reading of a clock or of a random number generator are left out on both sides: a
//! replayed page reads the replay's clock and seeded random numbers, which the person's browser did not
//! have. Such a run is a number that reads as a clock of the recording's time ([`Clocks`]) or a fraction
//! with nine or more decimals (`Math.random()` as a page prints it).
//!
//! A step reached the recorded page when the URLs are the same in canonical form ([`reaches`]): the
//! fragment, an anchor within the page, does not count, unless it is a single-page application's route
//! (`#/projects/1`, `#!/inbox`), which names the page as a path does.
//!
//! [`evidence::page_text`]: crate::evidence::page_text

use std::collections::HashMap;

use crate::canonical::{Clocks, canonical_url};
use crate::evidence::PageText;

/// Whether a replayed step that reached `reached` reached the recording's `expected` (see the module's
/// rules).
pub fn reaches(reached: &str, expected: &str) -> bool {
    reached == expected
        || (canonical_url(reached) == canonical_url(expected)
            && route_of(reached).map(canonical_route) == route_of(expected).map(canonical_route))
}

/// The route in a URL's fragment (`/projects/1` of `…/#/projects/1`, `/inbox` of `…/#!/inbox`): a
/// fragment that starts with `/`, or `!/` as hashbang routes do. An anchor (`#reviews`) is none.
fn route_of(url: &str) -> Option<&str> {
    let (_, fragment) = url.split_once('#')?;
    fragment.strip_prefix('!').unwrap_or(fragment).starts_with('/').then(|| fragment.trim_start_matches('!'))
}

/// A route as a path with a canonical query (parameters sorted, cache busters dropped), so that routes
/// compare as URLs do.
fn canonical_route(route: &str) -> String {
    canonical_url(&format!("http://route.invalid{route}")).trim_start_matches("http://route.invalid").to_owned()
}

/// The least share of the recorded text's characters a replayed page must show for its step to pass.
pub const TEXT_TOLERANCE: f64 = 0.9;

/// How many missing runs a comparison names, for the report.
pub const MISSING_NAMED: usize = 3;

/// What a replayed page shows of a recorded one.
#[derive(Debug, Clone, PartialEq)]
pub struct TextComparison {
    /// The share of the recorded text's characters that the replayed page shows, from 0 to 1 (1 when the
    /// recording showed no text).
    pub shown: f64,
    /// The first recorded runs (at most [`MISSING_NAMED`]) the replayed page does not show, longest first.
    pub missing: Vec<String>,
}

impl TextComparison {
    /// Whether the replayed page shows enough of the recorded text ([`TEXT_TOLERANCE`]).
    pub fn passes(&self) -> bool {
        self.shown >= TEXT_TOLERANCE
    }
}

/// Whether a text run is a reading of a clock (of `clocks`' times) or of a random number generator.
pub fn is_volatile_run(run: &str, clocks: &Clocks) -> bool {
    let random = run
        .strip_prefix("0.")
        .is_some_and(|decimals| decimals.len() >= 9 && decimals.bytes().all(|b| b.is_ascii_digit()));
    random || clocks.is_clock(run)
}

/// The runs of `recorded` (a step's capture) that `later` (the capture of the person's next step, on the
/// same page) still shows, each as often as both show it: what the step's page settled to.
pub fn settled_text(recorded: &PageText, later: &PageText) -> PageText {
    let mut available = RunCounts::of(&later.runs);
    let runs = recorded.runs.iter().filter(|run| available.take(run)).cloned().collect();
    PageText { runs, ..recorded.clone() }
}

/// A page's runs as a multiset, taken one at a time.
struct RunCounts<'t>(HashMap<&'t str, usize>);

impl<'t> RunCounts<'t> {
    fn of(runs: &'t [String]) -> RunCounts<'t> {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for run in runs {
            *counts.entry(run.as_str()).or_default() += 1;
        }
        RunCounts(counts)
    }

    /// Takes one `run`, if one is left.
    fn take(&mut self, run: &str) -> bool {
        self.0.get_mut(run).filter(|count| **count > 0).map(|count| *count -= 1).is_some()
    }
}

/// Compares the text of a replayed page with the recorded one; `clocks` are the recording's times.
pub fn compare_text(recorded: &PageText, replayed: &PageText, clocks: &Clocks) -> TextComparison {
    let mut available = RunCounts::of(&replayed.runs);
    let (mut total, mut shown) = (0usize, 0usize);
    let mut missing: Vec<&str> = Vec::new();
    for run in recorded.runs.iter().filter(|run| !is_volatile_run(run, clocks)) {
        let chars = run.chars().count();
        total += chars;
        if available.take(run) {
            shown += chars;
        } else {
            missing.push(run);
        }
    }
    missing.sort_by_key(|run| std::cmp::Reverse(run.chars().count()));
    missing.dedup();
    missing.truncate(MISSING_NAMED);
    TextComparison {
        shown: if total == 0 { 1.0 } else { shown as f64 / total as f64 },
        missing: missing.into_iter().map(str::to_owned).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_in_the_fragment_counts_and_an_anchor_does_not() {
        // A hash-routed application's pages.
        assert!(reaches("http://a.test/#/projects/1", "http://a.test/#/projects/1"));
        assert!(!reaches("http://a.test/#/projects/2", "http://a.test/#/projects/1"));
        assert!(!reaches("http://a.test/#!/inbox", "http://a.test/#!/outbox"));
        assert!(!reaches("http://a.test/", "http://a.test/#/projects/1"), "the start page is no project");
        assert!(reaches("http://a.test/#/items?b=2&a=1&_=1795327471784", "http://a.test/#/items?a=1&b=2"));
        // Anchors within a page, as before.
        assert!(reaches("http://a.test/docs#install", "http://a.test/docs#usage"));
        assert!(reaches("http://a.test/docs", "http://a.test/docs#usage"));
        assert!(reaches("http://a.test/flows#flow/1a2b3c", "http://a.test/flows#flow/9f8e7d"));
        // And the rest of the URL in canonical form.
        assert!(reaches("http://a.test/s?q=mug&utm_source=x", "http://a.test/s?q=mug"));
        assert!(!reaches("http://a.test/s?q=cup", "http://a.test/s?q=mug"));
    }
    use crate::evidence::page_text;

    fn page(html: &str) -> PageText {
        page_text(0, "https://app.test/", "dom/0.html", html)
    }

    /// 2026-11-24 12:00 UTC, and ten minutes on.
    fn recording() -> Clocks {
        Clocks::around(1_795_521_600_000.0, 1_795_522_200_000.0)
    }

    fn check(recorded: &str, replayed: &str, shown: f64, passes: bool) {
        let comparison = compare_text(&page(recorded), &page(replayed), &recording());
        assert!((comparison.shown - shown).abs() < 1e-9, "{recorded} / {replayed}: {comparison:?}");
        assert_eq!(comparison.passes(), passes, "{recorded} / {replayed}: {comparison:?}");
    }

    #[test]
    fn text_shown_only_while_the_page_loaded_is_left_out() {
        let loading = page_text(1, "", "", "<h1>Stores</h1><p>Connecting...</p><p>Order</p>");
        let loaded = page_text(2, "", "", "<h1>Stores</h1><p>Connected</p><p>Order</p><p>three wicks</p>");
        let settled = settled_text(&loading, &loaded);
        assert!(settled.runs.iter().all(|run| run != "Connecting..."), "{:?}", settled.runs);
        assert!(settled.runs.iter().any(|run| run == "Stores") && settled.runs.iter().any(|run| run == "Order"));
        // The replayed page, faster, shows the loaded page: all of what the step settled to, not of its capture.
        assert!(compare_text(&settled, &loaded, &Clocks::NONE).shown == 1.0);
        assert!(compare_text(&loading, &loaded, &Clocks::NONE).shown < 1.0);
    }

    #[test]
    fn the_share_of_recorded_characters_shown_decides() {
        check("<p>Results</p><ul><li>Blue mug</li></ul>", "<p>Results</p><ul><li>Blue mug</li></ul>", 1.0, true);
        // Order and added text do not count.
        check("<p>a</p><p>bb</p>", "<div>bb</div><b>new</b><p>a</p>", 1.0, true);
        // The result list never appeared: 7 of 15 characters.
        check("<p>Results</p><ul><li>Blue mug</li></ul>", "<p>Results</p><ul></ul>", 7.0 / 15.0, false);
        // A clock that moved: one short run of many.
        let long = "<p>Order history for Ann, every order of the last year, newest first</p>";
        check(&format!("{long}<span>12:03</span>"), &format!("{long}<span>12:04</span>"), 65.0 / 70.0, true);
        // A run shown twice must be there twice.
        check("<p>Mug</p><p>Mug</p>", "<p>Mug</p>", 0.5, false);
        // Nothing recorded: nothing to miss.
        check("<script>x()</script>", "<p>anything</p>", 1.0, true);
        // The person's clock and random numbers are not the replay's.
        check(
            "<p>Now:</p><p>1795521700123</p><p>Random:</p><p>0.698716355060778</p>",
            "<p>Now:</p><p>1795521600000</p><p>Random:</p><p>0.1234567891</p>",
            1.0,
            true,
        );
        // An id is no clock, a price no random number.
        check("<p>1234567890123</p><p>0.50</p>", "<p>1234567890124</p><p>0.51</p>", 0.0, false);
    }

    #[test]
    fn volatile_runs_are_clock_and_random_readings_only() {
        let clocks = recording();
        for (run, volatile) in [
            ("0.698716355060778", true),
            ("0.123456789", true),
            ("0.12345678", false),
            ("1795521700123", true),
            ("1795521700", true),
            ("12.50", false),
            ("Blue mug", false),
            ("1.698716355060778", false),
        ] {
            assert_eq!(is_volatile_run(run, &clocks), volatile, "{run}");
        }
    }

    #[test]
    fn the_longest_missing_runs_are_named() {
        let comparison = compare_text(
            &page("<p>Connection to the server was lost</p><p>ok</p><p>a</p><p>b</p><p>c</p><p>dd</p>"),
            &page("<p>ok</p>"),
            &recording(),
        );
        assert_eq!(comparison.missing, ["Connection to the server was lost", "dd", "a"]);
    }
}
