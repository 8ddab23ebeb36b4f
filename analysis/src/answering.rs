//! How replay will answer each recorded request, told so that a person can check it before trusting a
//! replay: what of the request replay compares (the URL, or its canonical form and what that form leaves
//! out), which recorded requests are its twins (answered in recorded order), whether the browser's state
//! chooses among them and by which cookies or headers, and how many requests to the same endpoint the fuzzy
//! level would look among. [`explain`] derives it with the same functions replay's matcher keys on
//! ([`canonical::request`], [`request_state::distinguishing_keys`]), so the account and the behaviour agree.

use std::collections::HashMap;

use url::Url;

use crate::canonical::{self, Clocks};
use crate::request_state::{self, RequestState};

/// One recorded request, as replay indexes it.
#[derive(Debug, Clone)]
pub struct Recorded<'a> {
    pub method: &'a str,
    pub url: &'a str,
    pub body: &'a [u8],
    pub content_type: Option<&'a str>,
    pub state: RequestState,
}

/// How replay answers one recorded request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HowAnswered {
    /// The URL as the canonical level compares it.
    pub canonical_url: String,
    /// What the canonical form leaves out of the URL: query parameters (`name=value`) whose name is volatile
    /// or whose value is a clock reading, and path segments that read as clocks.
    pub left_out: Vec<String>,
    /// The recorded requests with the same method, URL and body, this one included, in recorded order.
    pub exact_twins: Vec<usize>,
    /// The recorded requests with the same canonical form, this one included, in recorded order.
    pub canonical_twins: Vec<usize>,
    /// The state keys (`cookie:<name>`, `header:<name>`) whose values differ among the canonical twins:
    /// replay answers with the twin whose state is closest to the browser's. Empty when state does not choose.
    pub chosen_by: Vec<String>,
    /// How many recorded requests share this one's method, host and path: the fuzzy level's candidates for
    /// a request that matches neither exactly nor canonically.
    pub endpoint_requests: usize,
}

/// How replay answers each of `recorded` (in the order replay indexes them), reading clocks with `clocks`
/// (the recording's times, [`Clocks::around`] its start and end).
pub fn explain(recorded: &[Recorded<'_>], clocks: &Clocks) -> Vec<HowAnswered> {
    let analyses: Vec<canonical::CanonicalRequest> = recorded
        .iter()
        .map(|request| {
            let method = request.method.to_ascii_uppercase();
            canonical::request(&method, request.url, request.body, request.content_type, clocks)
        })
        .collect();
    let mut exact: HashMap<(String, &str, &[u8]), Vec<usize>> = HashMap::new();
    let mut by_key: HashMap<&[u8], Vec<usize>> = HashMap::new();
    let mut endpoints: HashMap<&str, usize> = HashMap::new();
    for (index, (request, analysis)) in recorded.iter().zip(&analyses).enumerate() {
        exact.entry((request.method.to_ascii_uppercase(), request.url, request.body)).or_default().push(index);
        by_key.entry(&analysis.key).or_default().push(index);
        if let Some(endpoint) = &analysis.endpoint {
            *endpoints.entry(endpoint).or_default() += 1;
        }
    }
    let chosen_by: HashMap<&[u8], Vec<String>> = by_key
        .iter()
        .map(|(key, twins)| (*key, request_state::distinguishing_keys(twins.iter().map(|&i| &recorded[i].state))))
        .collect();
    recorded
        .iter()
        .zip(&analyses)
        .map(|(request, analysis)| {
            let canonical_url = canonical::canonical_url_with(request.url, clocks);
            HowAnswered {
                left_out: left_out(request.url, &canonical_url, clocks),
                canonical_url,
                exact_twins: exact[&(request.method.to_ascii_uppercase(), request.url, request.body)].clone(),
                canonical_twins: by_key[analysis.key.as_slice()].clone(),
                chosen_by: chosen_by[analysis.key.as_slice()].clone(),
                endpoint_requests: analysis.endpoint.as_deref().map_or(0, |endpoint| endpoints[endpoint]),
            }
        })
        .collect()
}

/// What `canonical` lacks of `url`: its query pairs that are gone, and its path segments that became clocks.
fn left_out(url: &str, canonical: &str, clocks: &Clocks) -> Vec<String> {
    let (Ok(url), Ok(canonical)) = (Url::parse(url), Url::parse(canonical)) else { return Vec::new() };
    let kept: Vec<(String, String)> = canonical.query_pairs().map(|(n, v)| (n.into_owned(), v.into_owned())).collect();
    let mut gone: Vec<String> = url
        .path_segments()
        .into_iter()
        .flatten()
        .filter(|segment| clocks.is_clock(segment))
        .map(|segment| format!("/{segment}"))
        .collect();
    gone.extend(
        url.query_pairs()
            .filter(|(name, value)| !kept.iter().any(|(n, v)| n == name && v == value))
            .map(|(name, value)| if value.is_empty() { name.into_owned() } else { format!("{name}={value}") }),
    );
    gone
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(url: &'a str, cookie: &str) -> Recorded<'a> {
        Recorded {
            method: "GET",
            url,
            body: b"",
            content_type: None,
            state: RequestState::from_headers([("Cookie", cookie)]),
        }
    }

    #[test]
    fn twins_volatile_parts_and_state_are_told() {
        let start = 1_795_521_600_000.0;
        let clocks = Clocks::around(start, start + 60_000.0);
        let recorded = [
            get("https://admin.example/admin/", "csrftoken=a1"),
            get("https://admin.example/admin/login/", "csrftoken=a1"),
            get("https://admin.example/admin/", "csrftoken=a1; sessionid=s3"),
            get("https://app.example/api/items?1795521600043&page=2&_=17", ""),
            get("https://app.example/api/items?1795521630000&page=2&_=18", ""),
            get("https://app.example/api/items?page=3", ""),
        ];
        let told = explain(&recorded, &clocks);

        assert_eq!(told[0].exact_twins, [0, 2]);
        assert_eq!(told[0].chosen_by, ["cookie:sessionid"], "the login's session cookie tells the twins apart");
        assert!(told[1].chosen_by.is_empty() && told[1].exact_twins == [1]);

        assert_eq!(told[3].left_out, ["1795521600043", "_=17"], "a nameless clock and a volatile name");
        assert_eq!(told[3].exact_twins, [3]);
        assert_eq!(told[3].canonical_twins, [3, 4], "the same request but for what changes on every load");
        assert!(told[3].chosen_by.is_empty());
        assert_eq!(told[3].endpoint_requests, 3);
        assert!(told[5].left_out.is_empty() && told[5].canonical_twins == [5]);
    }
}
