//! A person's browsing history grouped into journeys (the visits that served one purpose), for
//! crowdsourced annotation: TRACE's own rule, used when the profile has no Chrome Journeys clusters and as
//! their fallback, and the URL cleaning every journey gets before anything is stored.
//!
//! # The rule
//! Visits are read in time order (ties by id).
//! 1. **Left out**: URLs that are not `http` or `https`, visits to an excluded domain (the domain itself or
//!    any subdomain), reloads and subframe navigations (not the person's own step).
//! 2. **Referrer chains**: a visit whose referring visit is in a journey joins it, if it comes within
//!    [`MAX_CHAIN_GAP_MS`] of that journey's latest visit (a tab left open overnight starts anew).
//! 3. **Search-result clicks and same site**: a visit with no known referrer, that the person did not
//!    type, bookmark or search for in the address bar, follows the more recent of the latest search results
//!    page (a known engine's results, with its query in `q`, `p`, `query`, `wd` or `text`: a result opened
//!    from a search often carries no referrer) and the latest visit to the same site (its host without
//!    `www.`), if that came at most [`FOLLOW_GAP_MS`] before it, and joins its journey.
//! 4. Anything else (a typed URL, a bookmark, an address-bar search, a link after a pause) starts a journey.
//!
//! A journey keeps a URL once when it is visited again right after itself, and a journey of one page is
//! left out: one page is not a journey. Each URL is cleaned ([`clean_url`]): the values of query and
//! fragment parameters whose name says secret ([`secrets::is_secret_name`]) or whose value looks random
//! ([`suspects::looks_random`], the redaction's own rules) become [`REDACTED`], and a user name and
//! password in the URL are dropped.

use std::collections::HashMap;

use sha2::{Digest, Sha256};
use trace_manifest::campaign::{Journey, JourneySource, JourneyStep};
use trace_manifest::time_fmt::rfc3339_from_millis;
use url::Url;

use crate::{secrets, suspects};

/// How long after a journey's latest visit a referred visit still joins it.
pub const MAX_CHAIN_GAP_MS: f64 = 60.0 * 60_000.0;
/// How long after a search or a visit to the same site an unreferred visit still follows it.
pub const FOLLOW_GAP_MS: f64 = 5.0 * 60_000.0;
/// What a secret-looking parameter's value becomes.
pub const REDACTED: &str = "REDACTED";

/// How the person came to a page, as Chrome's history says (`chrome.history`'s `transition`, or the core
/// type of the `History` database's `visits.transition`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Link,
    Typed,
    Bookmark,
    /// A search typed in the address bar, or a keyword search.
    AddressBarSearch,
    FormSubmit,
    Reload,
    Subframe,
    /// Opened by the browser itself (a start page, a restored tab).
    TopLevel,
}

impl Transition {
    /// `chrome.history.TransitionType`'s names.
    pub fn from_chrome(name: &str) -> Transition {
        match name {
            "typed" => Transition::Typed,
            "auto_bookmark" => Transition::Bookmark,
            "generated" | "keyword" | "keyword_generated" => Transition::AddressBarSearch,
            "form_submit" => Transition::FormSubmit,
            "reload" => Transition::Reload,
            "auto_subframe" | "manual_subframe" => Transition::Subframe,
            "auto_toplevel" | "start_page" => Transition::TopLevel,
            _ => Transition::Link,
        }
    }

    /// The core type of a `History` database transition (its low byte).
    pub fn from_core(transition: i64) -> Transition {
        match transition & 0xFF {
            1 => Transition::Typed,
            2 => Transition::Bookmark,
            3 | 4 => Transition::Subframe,
            5 | 9 | 10 => Transition::AddressBarSearch,
            6 => Transition::TopLevel,
            7 => Transition::FormSubmit,
            8 => Transition::Reload,
            _ => Transition::Link,
        }
    }

    /// Whether the person chose to go there anew rather than following the page they were on.
    fn is_fresh_start(self) -> bool {
        matches!(self, Transition::Typed | Transition::Bookmark | Transition::AddressBarSearch | Transition::TopLevel)
    }
}

/// One visit of the history.
#[derive(Debug, Clone, PartialEq)]
pub struct Visit {
    pub id: u64,
    pub url: String,
    pub title: String,
    /// Milliseconds since the Unix epoch.
    pub time_ms: f64,
    /// The visit it came from, when the history knows.
    pub referrer: Option<u64>,
    pub transition: Transition,
}

/// The history's journeys by [the rule](self), oldest first, skipping `excluded` domains.
pub fn group(visits: &[Visit], excluded: &[String]) -> Vec<Journey> {
    let mut ordered: Vec<&Visit> = visits.iter().filter(|visit| is_kept(visit, excluded)).collect();
    ordered.sort_by(|a, b| a.time_ms.total_cmp(&b.time_ms).then(a.id.cmp(&b.id)));

    let mut journeys: Vec<Vec<&Visit>> = Vec::new();
    let mut journey_of: HashMap<u64, usize> = HashMap::new();
    // The latest search results page and the latest visit of each site, with their journeys.
    let mut last_search: Option<(f64, usize)> = None;
    let mut last_of_site: HashMap<String, (f64, usize)> = HashMap::new();
    for visit in ordered {
        let site = site_of(&visit.url);
        let by_referrer = visit.referrer.and_then(|referrer| journey_of.get(&referrer).copied()).filter(|&journey| {
            let latest = journeys[journey].last().map_or(f64::NEG_INFINITY, |last| last.time_ms);
            visit.time_ms - latest <= MAX_CHAIN_GAP_MS
        });
        let unreferred = visit.referrer.is_none_or(|referrer| !journey_of.contains_key(&referrer));
        // The more recent of the search and the same site's latest visit, if close enough.
        let by_following = [last_search, last_of_site.get(&site).copied()]
            .into_iter()
            .flatten()
            .filter(|(time, _)| visit.time_ms - time <= FOLLOW_GAP_MS)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, journey)| journey)
            .filter(|_| unreferred && !visit.transition.is_fresh_start());
        let journey = match by_referrer.or(by_following) {
            Some(journey) => journey,
            None => {
                journeys.push(Vec::new());
                journeys.len() - 1
            }
        };
        journeys[journey].push(visit);
        journey_of.insert(visit.id, journey);
        if is_search_results(&visit.url) {
            last_search = Some((visit.time_ms, journey));
        }
        last_of_site.insert(site, (visit.time_ms, journey));
    }
    journeys.into_iter().filter_map(|visits| journey(&visits, JourneySource::Trace)).collect()
}

/// Journeys grouped elsewhere (Chrome's clusters), each group in time order, treated as TRACE's own: visits
/// [left out by the rule](self) dropped, URLs cleaned, pages visited again right after themselves kept
/// once, single pages left out.
pub fn from_groups(groups: &[Vec<Visit>], excluded: &[String], source: JourneySource) -> Vec<Journey> {
    groups
        .iter()
        .filter_map(|group| {
            let mut kept: Vec<&Visit> = group.iter().filter(|visit| is_kept(visit, excluded)).collect();
            kept.sort_by(|a, b| a.time_ms.total_cmp(&b.time_ms).then(a.id.cmp(&b.id)));
            journey(&kept, source)
        })
        .collect()
}

/// Whether a visit is one of the person's steps on the web, outside the excluded domains.
fn is_kept(visit: &Visit, excluded: &[String]) -> bool {
    !matches!(visit.transition, Transition::Reload | Transition::Subframe)
        && host_of(&visit.url).is_some_and(|host| !is_excluded(&host, excluded))
}

/// A group of visits as a journey: URLs cleaned, a page visited again right after itself kept once; none
/// for a single page.
fn journey(visits: &[&Visit], source: JourneySource) -> Option<Journey> {
    let mut steps: Vec<JourneyStep> = Vec::new();
    for visit in visits {
        let url = clean_url(&visit.url);
        if steps.last().is_some_and(|last| last.url == url) {
            continue;
        }
        steps.push(JourneyStep {
            visit_id: visit.id,
            url,
            title: visit.title.clone(),
            time: rfc3339_from_millis(visit.time_ms),
        });
    }
    if steps.len() < 2 {
        return None;
    }
    Some(Journey { id: journey_id(visits[0]), grouped_by: source, steps })
}

/// A journey's id, the same whenever the same first visit starts it.
pub fn journey_id(first: &Visit) -> String {
    let digest = Sha256::digest(format!("{} {}", first.id, first.time_ms).as_bytes());
    format!("j-{}", hex::encode(&digest[..6]))
}

/// `url` safe to keep: secret-looking parameter values (query and fragment) replaced by [`REDACTED`],
/// credentials in the authority dropped. A URL that does not parse is kept without its query and fragment.
pub fn clean_url(url: &str) -> String {
    let Ok(mut parsed) = Url::parse(url) else {
        return url.split(['?', '#']).next().unwrap_or_default().to_owned();
    };
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    if let Some(query) = parsed.query().map(str::to_owned) {
        parsed.set_query(Some(&clean_pairs(&query)));
    }
    if let Some(fragment) = parsed.fragment().map(str::to_owned)
        && fragment.contains('=')
    {
        parsed.set_fragment(Some(&clean_pairs(&fragment)));
    }
    parsed.into()
}

/// `a=1&token=x` with each secret-looking value replaced, the rest as written.
fn clean_pairs(pairs: &str) -> String {
    pairs
        .split('&')
        .map(|pair| {
            let Some((name, value)) = pair.split_once('=') else { return pair.to_owned() };
            let decode = |text: &str| {
                url::form_urlencoded::parse(format!("x={text}").as_bytes())
                    .next()
                    .map(|(_, value)| value.into_owned())
                    .unwrap_or_default()
            };
            let secret = secrets::is_secret_name(&decode(name)) || suspects::looks_random(&decode(value));
            if secret { format!("{name}={REDACTED}") } else { pair.to_owned() }
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn host_of(url: &str) -> Option<String> {
    let url = Url::parse(url).ok().filter(|url| matches!(url.scheme(), "http" | "https"))?;
    Some(url.host_str()?.to_ascii_lowercase())
}

/// The site a URL belongs to: its host without `www.`.
fn site_of(url: &str) -> String {
    let host = host_of(url).unwrap_or_default();
    host.strip_prefix("www.").map(str::to_owned).unwrap_or(host)
}

fn is_excluded(host: &str, excluded: &[String]) -> bool {
    excluded
        .iter()
        .map(|domain| domain.trim().trim_start_matches('.').to_ascii_lowercase())
        .any(|domain| !domain.is_empty() && (host == domain || host.ends_with(&format!(".{domain}"))))
}

/// Engines whose results pages are recognized, by a part of their host.
const SEARCH_ENGINES: &[&str] = &[
    "google.",
    "bing.com",
    "duckduckgo.com",
    "search.yahoo.",
    "ecosia.org",
    "baidu.com",
    "yandex.",
    "search.brave.com",
    "startpage.com",
    "kagi.com",
];
/// The parameters search engines put the query in.
const QUERY_PARAMETERS: &[&str] = &["q", "p", "query", "wd", "text"];

/// Whether `url` is a search engine's results page.
pub fn is_search_results(url: &str) -> bool {
    let Ok(parsed) = Url::parse(url) else { return false };
    let host = parsed.host_str().unwrap_or_default().to_ascii_lowercase();
    SEARCH_ENGINES.iter().any(|engine| host.contains(engine))
        && parsed.query_pairs().any(|(name, value)| QUERY_PARAMETERS.contains(&name.as_ref()) && !value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: f64 = 60_000.0;

    fn visit(id: u64, minute: f64, url: &str, referrer: Option<u64>, transition: Transition) -> Visit {
        Visit {
            id,
            url: url.into(),
            title: format!("page {id}"),
            time_ms: 1.8e12 + minute * MINUTE,
            referrer,
            transition,
        }
    }

    fn urls(journeys: &[Journey]) -> Vec<Vec<&str>> {
        journeys.iter().map(|journey| journey.steps.iter().map(|step| step.url.as_str()).collect()).collect()
    }

    #[test]
    fn visits_group_by_referrer_search_click_and_site_and_split_on_fresh_starts() {
        use Transition::*;
        let visits = [
            // A search in the address bar, a result opened without a referrer, a link on from it.
            visit(1, 0.0, "https://www.google.com/search?q=blue+mug", None, AddressBarSearch),
            visit(2, 1.0, "https://shop.example/mugs/blue", None, Link),
            visit(3, 2.0, "https://shop.example/cart", Some(2), Link),
            visit(4, 2.5, "https://shop.example/cart", Some(3), Reload),
            // Typed: a new journey; a link on the same site without a referrer, close in time, follows it.
            visit(5, 3.0, "https://news.example/", None, Typed),
            visit(6, 4.0, "https://news.example/story/1", None, Link),
            // Back to the shop through a referrer, within the hour: the first journey.
            visit(7, 30.0, "https://shop.example/checkout", Some(3), FormSubmit),
            // A link after a long pause, with no referrer: a journey of one page, left out.
            visit(8, 200.0, "https://other.example/", None, Link),
            // The excluded bank and a subframe: never seen.
            visit(9, 201.0, "https://login.bank.example/?session=abc", Some(8), Link),
            visit(10, 202.0, "https://ads.example/frame", Some(8), Subframe),
        ];
        let journeys = group(&visits, &["bank.example".to_owned()]);
        assert_eq!(
            urls(&journeys),
            [
                vec![
                    "https://www.google.com/search?q=blue+mug",
                    "https://shop.example/mugs/blue",
                    "https://shop.example/cart",
                    "https://shop.example/checkout"
                ],
                vec!["https://news.example/", "https://news.example/story/1"],
            ]
        );
        assert!(journeys.iter().all(|journey| journey.grouped_by == JourneySource::Trace));
        assert_eq!(group(&visits, &["bank.example".to_owned()]), journeys, "the same history, the same journeys");
        assert_ne!(journeys[0].id, journeys[1].id);
    }

    #[test]
    fn a_long_pause_breaks_a_referrer_chain() {
        let visits = [
            visit(1, 0.0, "https://a.example/", None, Transition::Typed),
            visit(2, 1.0, "https://a.example/x", Some(1), Transition::Link),
            visit(3, 90.0, "https://a.example/y", Some(2), Transition::Link),
            visit(4, 91.0, "https://a.example/z", Some(3), Transition::Link),
        ];
        assert_eq!(
            urls(&group(&visits, &[])),
            [["https://a.example/", "https://a.example/x"], ["https://a.example/y", "https://a.example/z"]]
        );
    }

    #[test]
    fn secret_looking_parameters_are_replaced_before_anything_is_kept() {
        assert_eq!(
            clean_url(
                "https://user:pw@app.example/reset?token=abc&page=2&sid=q8Zr2LmX7vKp4TnW9yB3#access_token=z&tab=1"
            ),
            "https://app.example/reset?token=REDACTED&page=2&sid=REDACTED#access_token=REDACTED&tab=1"
        );
        assert_eq!(clean_url("https://shop.example/search?q=blue+mug"), "https://shop.example/search?q=blue+mug");
        assert!(
            is_search_results("https://duckduckgo.com/?q=mugs") && !is_search_results("https://shop.example/?q=mugs")
        );
    }
}
