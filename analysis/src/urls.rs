//! The URL rules that patterns are written in. `ignored.json` entries and checkpoint URL patterns are
//! substrings of [`scheme_less`] URLs: one entry covers `http` and `https` alike, and a fragment (which never
//! reaches a server) never decides a match. Post-processing writes patterns by these rules and replay
//! applies them by the same functions.

/// The URL without its scheme and fragment: what URL patterns are substrings of.
pub fn scheme_less(url: &str) -> &str {
    without_fragment(url.split_once("://").map_or(url, |(_, rest)| rest))
}

/// The URL without its query (and fragment).
pub fn without_query(url: &str) -> &str {
    let url = without_fragment(url);
    url.split_once('?').map_or(url, |(before, _)| before)
}

/// `url` without its fragment (`#…`), which never reaches a server.
pub fn without_fragment(url: &str) -> &str {
    url.split_once('#').map_or(url, |(before, _)| before)
}

/// Whether `pattern` names `url`: it is a substring of the URL's [`scheme_less`] form.
pub fn matches(pattern: &str, url: &str) -> bool {
    scheme_less(url).contains(pattern)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_ignore_the_scheme_and_the_fragment() {
        assert_eq!(scheme_less("https://shop.example/a?b=1#top"), "shop.example/a?b=1");
        assert_eq!(without_query("shop.example/a?b=1#top"), "shop.example/a");
        assert!(matches("shop.example/collect?", "http://shop.example/collect?e=1"));
        assert!(matches("shop.example/a", "https://shop.example/a#x"));
        // A fragment never reaches a server, so no pattern is decided by it.
        assert!(!matches("shop.example/a#x", "https://shop.example/a#x"));
    }
}
