//! The one reader of serialized HTML, at the level the derivations need it: a DOM snapshot is the browser's
//! own serialization (every element closed but the void ones, attributes quoted), so a tag scanner is
//! enough and no parser is carried into wasm. It owns how a tag is split off the text, an element's name,
//! an attribute's value, where a raw-text element ends, and the entities and white space of text.
//! [`crate::evidence`] reads visible text and its regions with it ([`Tokens`]), [`crate::map::source`] a
//! page's skeleton.

/// Elements that never have content or an end tag.
pub const VOID_ELEMENTS: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link", "meta", "param", "source", "track",
    "wbr",
];

/// Elements whose content is not markup a page shows: skipped to their end tag.
pub const RAW_TEXT_ELEMENTS: &[&str] = &["script", "style", "noscript"];

/// A piece of serialized HTML as [`Tokens`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Token<'h> {
    /// Text between tags, entities and all (never empty).
    Text(&'h str),
    /// A tag's text between `<` and `>` (see [`split_tag`]): `div class=x`, `/div`, `!doctype html`.
    Tag(&'h str),
}

/// The one tag scanner: a document's text and tags in order, comments left out. A reader that meets a
/// raw-text element (`script`, `style`) skips its content with [`Tokens::skip_to_end_tag`], since what is
/// inside is no markup.
#[derive(Debug, Clone)]
pub struct Tokens<'h> {
    rest: &'h str,
}

impl<'h> Tokens<'h> {
    pub fn new(html: &'h str) -> Tokens<'h> {
        Tokens { rest: html }
    }

    /// Skips to where `</name` starts (or to the end): the content of the element just opened.
    pub fn skip_to_end_tag(&mut self, name: &str) {
        self.rest = end_tag(self.rest, name).map_or("", |at| &self.rest[at..]);
    }
}

impl<'h> Iterator for Tokens<'h> {
    type Item = Token<'h>;

    fn next(&mut self) -> Option<Token<'h>> {
        loop {
            let rest = self.rest;
            if rest.is_empty() {
                return None;
            }
            let start = rest.find('<').unwrap_or(rest.len());
            if start > 0 {
                self.rest = &rest[start..];
                return Some(Token::Text(&rest[..start]));
            }
            if rest.starts_with("<!--") {
                self.rest = rest.find("-->").map_or("", |end| &rest[end + 3..]);
                continue;
            }
            let (tag, after) = split_tag(rest);
            self.rest = after;
            return Some(Token::Tag(tag));
        }
    }
}

/// The text a fragment of HTML shows, its tags left out, entities decoded and white space collapsed: what a
/// rich-text editor's markup (`<p>It burns <b>six</b> hours</p>`) says as the person typed it.
pub fn text_of(html: &str) -> String {
    let text: String = Tokens::new(html)
        .map(|token| match token {
            Token::Text(text) => text,
            Token::Tag(_) => " ",
        })
        .collect();
    collapse_whitespace(&decode_entities(&text)).trim().to_owned()
}

/// The tag `html` starts with (at its `<`): the text between `<` and `>`, and what follows. A tag a cut-off
/// document leaves open runs to its end.
pub fn split_tag(html: &str) -> (&str, &str) {
    let inside = html.strip_prefix('<').unwrap_or(html);
    match inside.find('>') {
        Some(end) => (&inside[..end], &inside[end + 1..]),
        None => (inside, ""),
    }
}

/// A tag's element name in lower case: `div` for `div class=x` and `/DIV`.
pub fn tag_name(tag: &str) -> String {
    tag.trim_start_matches('/')
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase()
}

/// Where `</name` (in any case) starts in `html`. Found in place: copying the rest of a page in lower case
/// for every script would make a page of many scripts quadratic.
pub fn end_tag(html: &str, name: &str) -> Option<usize> {
    html.match_indices("</").map(|(at, _)| at).find(|&at| {
        html.as_bytes()
            .get(at + 2..at + 2 + name.len())
            .is_some_and(|found| found.eq_ignore_ascii_case(name.as_bytes()))
    })
}

/// The value of `name="…"` (or `'…'`, or bare) in a tag's text; `Some("")` for an attribute without a value
/// (`hidden`). `name` is lower case.
pub fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find(name) {
        let at = from + found;
        from = at + name.len();
        let before_ok = at > 0 && lower.as_bytes()[at - 1].is_ascii_whitespace();
        let after = lower.as_bytes().get(from).copied();
        let ends_name = after.is_none_or(|byte| byte.is_ascii_whitespace() || byte == b'=' || byte == b'/');
        if !before_ok || !ends_name {
            continue;
        }
        let rest = tag[from..].trim_start();
        let Some(value) = rest.strip_prefix('=') else { return Some("") };
        let value = value.trim_start();
        return Some(match value.chars().next() {
            Some(quote @ ('"' | '\'')) => value[1..].split(quote).next().unwrap_or(""),
            _ => value.split(|c: char| c.is_ascii_whitespace() || c == '/').next().unwrap_or(""),
        });
    }
    None
}

pub fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The entities a serialized DOM uses (the browser writes the rest as characters).
pub fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        // Searched in bytes: the twelfth byte may fall inside a character (`&(e=0),"രാത്രി"` in a script).
        let Some(end) = rest.as_bytes()[..rest.len().min(12)].iter().position(|byte| *byte == b';') else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..end];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" | "#39" => Some('\''),
            "nbsp" => Some(' '),
            _ => entity
                .strip_prefix("#x")
                .or_else(|| entity.strip_prefix("#X"))
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|dec| dec.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_read_with_any_quoting_and_without_a_value() {
        assert_eq!(attribute("div id=\"a\" class=x", "id"), Some("a"));
        assert_eq!(attribute("div data-id=\"a\" id='b'", "id"), Some("b"));
        assert_eq!(attribute("input id=c/", "id"), Some("c"));
        assert_eq!(attribute("div hidden", "id"), None);
        assert_eq!(attribute("div hidden class=x", "hidden"), Some(""));
        assert_eq!(attribute("div hiddenness=1", "hidden"), None);
        assert_eq!(attribute("div role=\"alert\"", "role"), Some("alert"));
    }

    #[test]
    fn tokens_are_text_and_tags_without_comments_and_raw_text_is_skipped_on_request() {
        let html = "a<!-- <b> --><p id=x>b<script>if (1<2) x()</script>c";
        let mut tokens = Tokens::new(html);
        let mut seen = Vec::new();
        while let Some(token) = tokens.next() {
            if token == Token::Tag("script") {
                tokens.skip_to_end_tag("script");
            }
            seen.push(token);
        }
        use Token::{Tag, Text};
        assert_eq!(seen, [Text("a"), Tag("p id=x"), Text("b"), Tag("script"), Tag("/script"), Text("c")]);
    }

    #[test]
    fn entities_are_decoded_and_a_stray_ampersand_kept() {
        assert_eq!(decode_entities("a &amp; b &#x41;&#66; &nbsp;&bogus; & c"), "a & b AB  &bogus; & c");
        // A script's text, where a character of several bytes ends the window an entity is looked for in
        // (Dash's bundled moment.js).
        let script = r#"&(e=0),"രാത്രി"===t&&e>=4||"ഉച്ച"===t"#;
        assert_eq!(decode_entities(script), script);
        assert_eq!(decode_entities("&amp;ക&lt;"), "&ക<");
    }
}
