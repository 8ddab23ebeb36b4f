//! What a request carries of the browser's state (its cookies and credential headers), which replay reads
//! to choose among recorded twins: a dashboard asked for before the login (answered with a redirect to it)
//! and after (answered with the dashboard) are told apart by the session cookie the second one carried.
//! Replay's matcher and the viewer's account of how each request is answered both read state here.

use crate::http::cookie_pairs;
use crate::secrets::names::is_state_header;

/// What a request carries of the browser's state: its cookies, and the headers that carry credentials
/// (`Authorization`, and any whose name speaks of a token, session, CSRF or auth), as sorted
/// (key, value) pairs. Keys are `cookie:<name>` and `header:<lower-case name>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestState {
    pairs: Vec<(String, String)>,
}

impl RequestState {
    /// The state in a request's headers (a `Cookie` header is split into its cookies).
    pub fn from_headers<'h>(headers: impl IntoIterator<Item = (&'h str, &'h str)>) -> RequestState {
        let mut pairs = Vec::new();
        for (name, value) in headers {
            let name = name.to_ascii_lowercase();
            if name == "cookie" {
                let cookies = cookie_pairs(value).filter(|(cookie, _)| !cookie.is_empty());
                pairs.extend(
                    cookies.map(|(cookie, value)| (format!("cookie:{cookie}"), value.unwrap_or("").to_owned())),
                );
            } else if is_state_header(&name) {
                pairs.push((header_key(&name), value.to_owned()));
            }
        }
        RequestState::from_pairs(pairs)
    }

    /// The state of a request whose cookies the browser keeps apart from its headers (as DevTools' `Fetch`
    /// domain does): `cookies` are (name, value) pairs.
    pub fn with_cookies<'c>(mut self, cookies: impl IntoIterator<Item = (&'c str, &'c str)>) -> RequestState {
        self.pairs.retain(|(key, _)| !key.starts_with("cookie:"));
        self.pairs.extend(cookies.into_iter().map(|(name, value)| (format!("cookie:{name}"), value.to_owned())));
        RequestState::from_pairs(self.pairs)
    }

    /// The state with header `name` (lower case) at `value` where it carries none.
    pub fn with_header(mut self, name: &str, value: &str) -> RequestState {
        let key = header_key(name);
        if self.get(&key).is_none() {
            self.pairs.push((key, value.to_owned()));
        }
        RequestState::from_pairs(self.pairs)
    }

    fn from_pairs(mut pairs: Vec<(String, String)>) -> RequestState {
        pairs.sort();
        pairs.dedup_by(|a, b| a.0 == b.0);
        RequestState { pairs }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        let found = self.pairs.binary_search_by(|(k, _)| k.as_str().cmp(key)).ok()?;
        Some(&self.pairs[found].1)
    }

    /// The value of header `name` (lower case) in the state.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.get(&header_key(name))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.pairs.iter().map(|(key, _)| key.as_str())
    }
}

/// The state key of header `name` (lower case).
fn header_key(name: &str) -> String {
    format!("header:{name}")
}

/// The state keys whose values differ among `states` (twins of one key, in recorded order): empty when
/// they were all sent in the same state, and state does not choose among them.
pub fn distinguishing_keys<'s>(states: impl IntoIterator<Item = &'s RequestState>) -> Vec<String> {
    let states: Vec<&RequestState> = states.into_iter().collect();
    let Some(first) = states.first().filter(|_| states.len() >= 2) else { return Vec::new() };
    let mut keys: Vec<&str> = states.iter().flat_map(|state| state.keys()).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .filter(|key| states.iter().any(|state| state.get(key) != first.get(key)))
        .map(str::to_owned)
        .collect()
}

/// How alike two states are on `keys`, from 0 to 1: the mean over the keys of 1 for the same value (or
/// absent from both), ½ for present in both with different values, 0 for present in one only.
pub fn similarity(keys: &[String], a: &RequestState, b: &RequestState) -> f64 {
    let total: f64 = keys
        .iter()
        .map(|key| match (a.get(key), b.get(key)) {
            (x, y) if x == y => 1.0,
            (Some(_), Some(_)) => 0.5,
            _ => 0.0,
        })
        .sum();
    total / keys.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_comes_from_cookies_and_credential_headers() {
        let state = RequestState::from_headers([
            ("Cookie", "a=1; b = 2 ;flag"),
            ("Authorization", "Bearer x"),
            ("X-CSRFToken", "t"),
            ("Accept", "text/html"),
            ("User-Agent", "u"),
        ]);
        let keys: Vec<&str> = state.keys().collect();
        assert_eq!(keys, ["cookie:a", "cookie:b", "cookie:flag", "header:authorization", "header:x-csrftoken"]);
        assert_eq!(state.get("cookie:b"), Some("2"));
        let browser = state.with_cookies([("c", "3")]);
        assert_eq!(browser.keys().collect::<Vec<_>>(), ["cookie:c", "header:authorization", "header:x-csrftoken"]);
    }

    #[test]
    fn twins_are_told_apart_only_by_the_keys_whose_values_differ() {
        let before = RequestState::from_headers([("Cookie", "csrftoken=a1; theme=dark")]);
        let after = RequestState::from_headers([("Cookie", "csrftoken=a1; theme=dark; sessionid=s3")]);
        assert_eq!(distinguishing_keys([&before, &after]), ["cookie:sessionid"]);
        assert!(distinguishing_keys([&before, &before.clone()]).is_empty());
        assert!(distinguishing_keys([&before]).is_empty());
        let keys = distinguishing_keys([&before, &after]);
        assert_eq!(similarity(&keys, &after, &after), 1.0);
        assert_eq!(similarity(&keys, &before, &after), 0.0);
    }
}
