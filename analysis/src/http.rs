//! Reading HTTP header values the one way every derivation reads them: what the request state, the HAR
//! and the search for secrets take from a `Cookie` header.

/// The (name, value) pairs of a `Cookie` header (`a=1; b=2`), each trimmed: the one reading of it, which
/// the request state, the HAR's cookie lists and the search for secrets share. A piece without `=` (`flag`) has no value:
/// state counts it as a cookie, the HAR and the search for secrets, which want a cookie-pair (RFC 6265),
/// do not. An empty name is given as it is, for the caller to judge.
pub fn cookie_pairs(header: &str) -> impl Iterator<Item = (&str, Option<&str>)> {
    header.split(';').map(|piece| match piece.split_once('=') {
        Some((name, value)) => (name.trim(), Some(value.trim())),
        None => (piece.trim(), None),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_header_is_split_into_trimmed_pairs_and_bare_names() {
        let pairs: Vec<_> = cookie_pairs("sid=abc; flag ; theme = dark;").collect();
        assert_eq!(pairs, [("sid", Some("abc")), ("flag", None), ("theme", Some("dark")), ("", None)]);
    }
}
