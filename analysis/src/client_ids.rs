//! Values a page makes itself: a session id from `Math.random()` or `crypto.randomUUID()` that the page
//! sends in later request paths, queries and bodies, and that the server echoes back. Replayed, the page
//! makes another value, and no recorded request matches; replay follows the value instead of guessing it:
//! it pairs the replayed request with a recorded one of the same shape, binds the recorded value to the
//! page's own, and from then on reads one as the other.
//!
//! This module owns what such a value looks like and how requests are compared around it:
//! - **Id tokens** ([`id_tokens`]): maximal runs of ASCII letters, digits, `_` and `-` of
//!   [`MIN_ID_CHARS`] to [`MAX_ID_CHARS`] characters, with a digit or at least [`MIN_LETTERS_ONLY_CHARS`]
//!   characters, that are not clock readings ([`Clocks`]). A percent escape (`%22`) separates tokens.
//! - **Templates** ([`Templated`]): a request with its id tokens replaced by [`PLACEHOLDER`]: two requests
//!   with the same canonical template differ at most in their ids, position by position.
//! - **Made by the page** ([`Origin`]): a recorded value is the page's own when it first appears in
//!   a request, no response before that request carried it (the server did not hand it out) and the person
//!   did not type it.
//! - **Substitution** ([`substitute`]): whole tokens replaced, never parts of longer ones.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

use crate::canonical::Clocks;

/// The fewest characters of an id: shorter runs are words, counters and flags.
pub const MIN_ID_CHARS: usize = 8;

/// The most characters of an id: longer runs are blobs.
pub const MAX_ID_CHARS: usize = 256;

/// A run without digits is an id only from this length on (`Math.random().toString(36)` now and then
/// has no digit; a word this long is rare in a request).
pub const MIN_LETTERS_ONLY_CHARS: usize = 10;

/// What an id token becomes in a template. It is itself one token, so templates survive canonical forms.
pub const PLACEHOLDER: &str = "__trace_client_id__";

fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-'
}

/// The byte ranges of `text`'s tokens (maximal runs of letters, digits, `_`, `-`; a `%XX` escape ends one).
fn tokens(text: &[u8]) -> impl Iterator<Item = Range<usize>> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < text.len() && !is_token_byte(text[at]) {
            // A percent escape's two hex digits are part of the separator, not of the next token.
            let escape =
                text[at] == b'%' && text.get(at + 1..at + 3).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit));
            at += if escape { 3 } else { 1 };
        }
        if at >= text.len() {
            return None;
        }
        let start = at;
        while at < text.len() && is_token_byte(text[at]) {
            at += 1;
        }
        Some(start..at)
    })
}

/// Whether a token has the shape of an id (see the module documentation).
pub fn is_id_shaped(token: &str, clocks: &Clocks) -> bool {
    let chars = token.len();
    (MIN_ID_CHARS..=MAX_ID_CHARS).contains(&chars)
        && token.bytes().all(is_token_byte)
        && (token.bytes().any(|b| b.is_ascii_digit()) || chars >= MIN_LETTERS_ONLY_CHARS)
        && token != PLACEHOLDER
        && !clocks.is_clock(token)
}

/// The id tokens of `text`, as byte ranges, in order.
pub fn id_tokens<'t>(text: &'t [u8], clocks: &'t Clocks) -> impl Iterator<Item = Range<usize>> + 't {
    tokens(text).filter(|range| std::str::from_utf8(&text[range.clone()]).is_ok_and(|t| is_id_shaped(t, clocks)))
}

/// A request with its id tokens replaced by [`PLACEHOLDER`], and the tokens, URL's first then body's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Templated {
    pub url: String,
    pub body: Vec<u8>,
    pub ids: Vec<String>,
}

impl Templated {
    pub fn new(url: &str, body: &[u8], clocks: &Clocks) -> Templated {
        let mut ids = Vec::new();
        let url = template(url.as_bytes(), clocks, &mut ids);
        let body = template(body, clocks, &mut ids).into_owned();
        Templated { url: String::from_utf8(url.into_owned()).expect("ASCII replaced in UTF-8 stays UTF-8"), body, ids }
    }
}

fn template<'t>(text: &'t [u8], clocks: &Clocks, ids: &mut Vec<String>) -> Cow<'t, [u8]> {
    let found: Vec<Range<usize>> = id_tokens(text, clocks).collect();
    if found.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = Vec::with_capacity(text.len());
    let mut copied = 0;
    for range in found {
        out.extend_from_slice(&text[copied..range.start]);
        out.extend_from_slice(PLACEHOLDER.as_bytes());
        ids.push(String::from_utf8_lossy(&text[range.clone()]).into_owned());
        copied = range.end;
    }
    out.extend_from_slice(&text[copied..]);
    Cow::Owned(out)
}

/// `text` with every whole token that is a key of `replacements` replaced by its value; borrowed when
/// nothing was replaced.
pub fn substitute<'t>(text: &'t [u8], replacements: &HashMap<String, String>) -> Cow<'t, [u8]> {
    if replacements.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    for range in tokens(text) {
        let Some(replacement) = std::str::from_utf8(&text[range.clone()]).ok().and_then(|t| replacements.get(t)) else {
            continue;
        };
        let out = out.get_or_insert_with(|| Vec::with_capacity(text.len()));
        out.extend_from_slice(&text[copied..range.start]);
        out.extend_from_slice(replacement.as_bytes());
        copied = range.end;
    }
    match out {
        Some(mut out) => {
            out.extend_from_slice(&text[copied..]);
            Cow::Owned(out)
        }
        None => Cow::Borrowed(text),
    }
}

/// The check of whether a recorded value, first sent in a request, was made by the page: the person did
/// not type it ([`Origin::of`]), and none of the responses received before that request (headers or
/// body) carries it ([`Origin::carried_by`]), or the server handed it out.
pub struct Origin<'v> {
    finder: memchr::memmem::Finder<'v>,
}

impl<'v> Origin<'v> {
    /// `None` when `value` is in what the person typed (`typed`): then it is theirs, not the page's.
    pub fn of(value: &'v str, typed: &[String]) -> Option<Origin<'v>> {
        (!typed.iter().any(|text| text.contains(value)))
            .then(|| Origin { finder: memchr::memmem::Finder::new(value.as_bytes()) })
    }

    /// Whether `earlier`, a response text received before the value was first sent, carries it.
    pub fn carried_by(&self, earlier: &[u8]) -> bool {
        self.finder.find(earlier).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(text: &str) -> Vec<&str> {
        id_tokens(text.as_bytes(), &Clocks::NONE).map(|range| &text[range]).collect()
    }

    #[test]
    fn ids_are_told_from_words_counters_and_clocks() {
        let recording = Clocks::around(1_795_452_770_000.0, 1_795_452_790_000.0);
        let url = "https://h/queue/join/k3j9x2m1qa?session_hash=abcdefghijkl&page=2&t=1795452770043&q=mug";
        let found: Vec<&str> = id_tokens(url.as_bytes(), &recording).map(|r| &url[r]).collect();
        // `queue`, `join`, `2`, `mug`: too short; the 13 digits read as the recording's clock.
        assert_eq!(found, ["k3j9x2m1qa", "session_hash", "abcdefghijkl"]);
        assert_eq!(ids("uuid=0f8fad5b-d9cb-469f-a165-70867728950e"), ["0f8fad5b-d9cb-469f-a165-70867728950e"]);
        // A percent escape separates: `%22` is not glued to the id after it.
        assert_eq!(ids("%7B%22id%22%3A%22x7f3k2p9q%22%7D"), ["x7f3k2p9q"]);
    }

    #[test]
    fn templates_of_requests_that_differ_only_in_ids_are_equal() {
        let recorded =
            Templated::new("https://h/stream?session=r3c0rd3d1", br#"{"session":"r3c0rd3d1","n":1}"#, &Clocks::NONE);
        let replayed =
            Templated::new("https://h/stream?session=l1v3v4lue", br#"{"session":"l1v3v4lue","n":1}"#, &Clocks::NONE);
        assert_eq!((&recorded.url, &recorded.body), (&replayed.url, &replayed.body));
        assert_eq!(recorded.ids, ["r3c0rd3d1", "r3c0rd3d1"]);
        assert_eq!(replayed.ids, ["l1v3v4lue", "l1v3v4lue"]);
        let other =
            Templated::new("https://h/stream?session=l1v3v4lue", br#"{"session":"l1v3v4lue","n":2}"#, &Clocks::NONE);
        assert_ne!(recorded.body, other.body);
    }

    #[test]
    fn substitution_replaces_whole_tokens_only() {
        let map = HashMap::from([("l1v3v4lue".to_owned(), "r3c0rd3d1".to_owned())]);
        let text = b"/s/l1v3v4lue?x=l1v3v4lue2&y=l1v3v4lue";
        assert_eq!(substitute(text, &map).as_ref(), b"/s/r3c0rd3d1?x=l1v3v4lue2&y=r3c0rd3d1");
        assert!(matches!(substitute(b"nothing here", &map), Cow::Borrowed(_)));
    }

    #[test]
    fn a_value_the_server_handed_out_or_the_person_typed_is_not_the_pages() {
        let earlier = [b"<input name=csrf value=s3rv3rm4d3>".as_slice(), b"{}".as_slice()];
        let made_by_page = |value: &str, typed: &[String]| {
            Origin::of(value, typed).is_some_and(|origin| !earlier.iter().any(|text| origin.carried_by(text)))
        };
        assert!(!made_by_page("s3rv3rm4d3", &[]));
        assert!(made_by_page("p4g3m4d3x", &[]));
        assert!(!made_by_page("p4g3m4d3x", &["order p4g3m4d3x".to_owned()]));
    }
}
