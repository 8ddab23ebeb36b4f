//! A DOM snapshot made to look as the page looked: its stylesheets, the fonts and images they load, and its
//! images are inlined from the recording's own responses (stylesheets as `<style>`, the rest as `data:`
//! URLs), so that the snapshot renders in a sandbox that fetches nothing. What the recording did not
//! answer is left as it was, and the sandbox's policy keeps it from being fetched.
//!
//! Everything here comes from a bundle a stranger may have made, and the result is served under a policy
//! with no script and no network ([`super::SNAPSHOT_POLICY`]): the worst a hostile snapshot or stylesheet
//! can do is look wrong. `<meta http-equiv>` (a refresh) and `<base>` are dropped; a stylesheet cannot
//! close its `<style>` element. Inlining stops at [`MAX_INLINED_BYTES`] and at [`MAX_IMPORT_DEPTH`]
//! nested `@import`s.

use std::cell::RefCell;
use std::sync::LazyLock;

use base64::Engine;
use lol_html::html_content::ContentType;
use lol_html::{RewriteStrSettings, element, rewrite_str, text};
use regex::{Captures, Regex};
use url::Url;

/// The most bytes of resources one snapshot inlines (each grows by a third as base64).
pub const MAX_INLINED_BYTES: usize = 48 << 20;
/// How deep `@import`s are followed.
const MAX_IMPORT_DEPTH: usize = 4;

/// `url(...)` in CSS, quoted or not.
static CSS_URL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?i)url\(\s*(?:"([^"]*)"|'([^']*)'|([^)"'\s]*))\s*\)"#).expect("a valid regex"));
/// `@import "..."` in CSS (the `url(...)` form is found by [`CSS_URL`]).
static CSS_IMPORT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?i)@import\s+(?:"([^"]*)"|'([^']*)')"#).expect("a valid regex"));

/// Where recorded responses come from: the MIME type and body of the response to a GET of a URL, when its
/// body is at most `most` bytes (a larger one is not read).
pub trait Responses {
    fn response(&self, url: &str, most: usize) -> Option<(String, Vec<u8>)>;
}

/// `html` (a snapshot of the document at `page_url`) with its resources inlined from `responses`. When the
/// HTML cannot be rewritten it is returned as it was.
pub fn render(html: &str, page_url: &str, responses: &dyn Responses) -> String {
    let inliner = RefCell::new(Inliner { responses, budget: MAX_INLINED_BYTES });
    let base = RefCell::new(Url::parse(page_url).ok());
    let resolve = |reference: &str| -> Option<Url> { base.borrow().as_ref()?.join(reference.trim()).ok() };
    let style_text = RefCell::new(String::new());
    let rewritten = rewrite_str(
        html,
        RewriteStrSettings {
            element_content_handlers: vec![
                element!("base[href]", |el| {
                    if let Some(href) = el.get_attribute("href")
                        && let Some(url) = resolve(&href)
                    {
                        *base.borrow_mut() = Some(url);
                    }
                    el.remove();
                    Ok(())
                }),
                element!("meta[http-equiv]", |el| {
                    el.remove();
                    Ok(())
                }),
                element!("link[rel~=stylesheet][href]", |el| {
                    let href = el.get_attribute("href").unwrap_or_default();
                    if let Some(url) = resolve(&href)
                        && let Some(css) = inliner.borrow_mut().stylesheet(&url, 0)
                    {
                        let media = el.get_attribute("media").map(|m| format!(" media=\"{}\"", m.replace('"', "")));
                        el.replace(
                            &format!("<style{}>{}</style>", media.unwrap_or_default(), unclosable(&css)),
                            ContentType::Html,
                        );
                    }
                    Ok(())
                }),
                element!("img[src], input[src], video[poster], image[href]", |el| {
                    for name in ["src", "poster", "href"] {
                        if let Some(reference) = el.get_attribute(name)
                            && let Some(url) = resolve(&reference)
                            && let Some(data) = inliner.borrow_mut().data_url(&url)
                        {
                            el.set_attribute(name, &data)?;
                        }
                    }
                    Ok(())
                }),
                // A responsive image's candidates would each need inlining; its `src` stands for them all.
                element!("[srcset]", |el| {
                    el.remove_attribute("srcset");
                    Ok(())
                }),
                element!("[style]", |el| {
                    let style = el.get_attribute("style").unwrap_or_default();
                    if let Some(base) = base.borrow().clone() {
                        let css = inliner.borrow_mut().css(&style, &base, 0);
                        el.set_attribute("style", &css)?;
                    }
                    Ok(())
                }),
                // A `<style>` element's text comes in chunks: gathered, rewritten as a whole at its end.
                text!("style", |chunk| {
                    style_text.borrow_mut().push_str(chunk.as_str());
                    if chunk.last_in_text_node() {
                        let css = std::mem::take(&mut *style_text.borrow_mut());
                        let rewritten = match base.borrow().clone() {
                            Some(base) => inliner.borrow_mut().css(&css, &base, 0),
                            None => css,
                        };
                        chunk.replace(&unclosable(&rewritten), ContentType::Html);
                    } else {
                        chunk.remove();
                    }
                    Ok(())
                }),
            ],
            ..RewriteStrSettings::new()
        },
    );
    rewritten.unwrap_or_else(|_| html.to_owned())
}

/// CSS that cannot end the `<style>` element it is put in.
fn unclosable(css: &str) -> String {
    css.replace("</", "<\\/")
}

struct Inliner<'r> {
    responses: &'r dyn Responses,
    /// Bytes still allowed.
    budget: usize,
}

impl Inliner<'_> {
    /// The recorded body of `url`, counted against the budget.
    fn body(&mut self, url: &Url) -> Option<(String, Vec<u8>)> {
        if url.scheme() == "data" {
            return None;
        }
        let (mime, body) = self.responses.response(url.as_str(), self.budget)?;
        self.budget -= body.len();
        Some((mime, body))
    }

    /// The recorded stylesheet at `url`, its own references inlined.
    fn stylesheet(&mut self, url: &Url, depth: usize) -> Option<String> {
        let (_, body) = self.body(url)?;
        Some(self.css(&String::from_utf8_lossy(&body), url, depth))
    }

    /// `css` (found at `base`) with its `url(...)`s and `@import`s inlined where the recording answers them.
    fn css(&mut self, css: &str, base: &Url, depth: usize) -> String {
        let imported = CSS_IMPORT.replace_all(css, |caps: &Captures| {
            let reference = caps.get(1).or(caps.get(2)).map_or("", |m| m.as_str());
            match base.join(reference).ok().and_then(|url| self.import(&url, depth)) {
                Some(data) => format!("@import url(\"{data}\")"),
                None => caps[0].to_owned(),
            }
        });
        CSS_URL
            .replace_all(&imported, |caps: &Captures| {
                let reference = caps.get(1).or(caps.get(2)).or(caps.get(3)).map_or("", |m| m.as_str());
                let Ok(url) = base.join(reference) else { return caps[0].to_owned() };
                let inlined =
                    if is_stylesheet_url(caps, &imported) { self.import(&url, depth) } else { self.data_url(&url) };
                inlined.map_or_else(|| caps[0].to_owned(), |data| format!("url(\"{data}\")"))
            })
            .into_owned()
    }

    /// An imported stylesheet as a `data:` URL, its own references inlined.
    fn import(&mut self, url: &Url, depth: usize) -> Option<String> {
        if depth >= MAX_IMPORT_DEPTH {
            return None;
        }
        let css = self.stylesheet(url, depth + 1)?;
        Some(format!("data:text/css;base64,{}", base64::engine::general_purpose::STANDARD.encode(css)))
    }

    /// The recorded response at `url` as a `data:` URL.
    fn data_url(&mut self, url: &Url) -> Option<String> {
        let (mime, body) = self.body(url)?;
        Some(format!("data:{};base64,{}", plain_mime(&mime), base64::engine::general_purpose::STANDARD.encode(body)))
    }
}

/// Whether the `url(...)` at `caps` is an `@import`'s.
fn is_stylesheet_url(caps: &Captures, css: &str) -> bool {
    let start = caps.get(0).map_or(0, |m| m.start());
    css[..start].trim_end().to_ascii_lowercase().ends_with("@import")
}

/// A MIME type fit for a `data:` URL: its essence, of the characters a type may have; else bytes.
fn plain_mime(mime: &str) -> String {
    let essence = trace_analysis::body::mime_essence(mime);
    let valid = essence.contains('/')
        && essence.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'+' | b'.' | b'-'));
    if valid { essence } else { "application/octet-stream".to_owned() }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    struct Recorded(HashMap<&'static str, (&'static str, &'static [u8])>);

    impl Responses for Recorded {
        fn response(&self, url: &str, most: usize) -> Option<(String, Vec<u8>)> {
            self.0
                .get(url)
                .filter(|(_, body)| body.len() <= most)
                .map(|(mime, body)| ((*mime).to_owned(), body.to_vec()))
        }
    }

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn stylesheets_fonts_and_images_come_from_the_recording() {
        let recorded = Recorded(HashMap::from([
            (
                "https://shop.example/static/shop.css",
                (
                    "text/css",
                    &b"@import 'more.css'; body { background: url(bg.png) } @font-face { src: url(\"/f.woff2\") }"[..],
                ),
            ),
            ("https://shop.example/static/more.css", ("text/css; charset=utf-8", &b"h1 { color: red }"[..])),
            ("https://shop.example/static/bg.png", ("image/png", &b"PNG"[..])),
            ("https://shop.example/f.woff2", ("font/woff2", &b"WOFF"[..])),
            ("https://shop.example/logo.png", ("image/png\"><script>", &b"LOGO"[..])),
            ("https://cdn.example/x.png", ("image/png", &b"X"[..])),
        ]));
        let html = r#"<html><head><meta http-equiv="refresh" content="0; url=https://elsewhere.example/"><link rel="stylesheet" href="static/shop.css"><style>p { background: url('https://cdn.example/x.png') }</style></head><body><img src="/logo.png" srcset="/logo@2x.png 2x"><img src="/missing.png"><div style="background: url(static/bg.png)"></div></body></html>"#;
        let page = render(html, "https://shop.example/", &recorded);

        assert!(!page.contains("refresh") && !page.contains("<link"), "{page}");
        let more = format!("data:text/css;base64,{}", b64(b"h1 { color: red }"));
        let shop = format!(
            "@import url(\"{more}\"); body {{ background: url(\"data:image/png;base64,{}\") }} @font-face {{ src: url(\"data:font/woff2;base64,{}\") }}",
            b64(b"PNG"),
            b64(b"WOFF")
        );
        assert!(page.contains(&format!("<style>{shop}</style>")), "{page}");
        assert!(page.contains(&format!("url(\"data:image/png;base64,{}\")", b64(b"X"))), "{page}");
        assert!(page.contains(&format!("src=\"data:application/octet-stream;base64,{}\"", b64(b"LOGO"))), "{page}");
        assert!(!page.contains("srcset"));
        assert!(page.contains(r#"<img src="/missing.png">"#), "what the recording lacks stays as it was");
        assert!(
            page.contains(&format!("style=\"background: url(&quot;data:image/png;base64,{}&quot;)\"", b64(b"PNG"))),
            "{page}"
        );
    }

    #[test]
    fn a_stylesheet_cannot_close_its_element_nor_import_forever() {
        let recorded = Recorded(HashMap::from([(
            "https://x.example/a.css",
            ("text/css", &b"@import 'a.css'; p::after { content: '</style><script>alert(1)</script>' }"[..]),
        )]));
        let page = render(
            r#"<link rel="stylesheet" href="https://x.example/a.css"><p>x</p>"#,
            "https://x.example/",
            &recorded,
        );
        assert!(!page.contains("</style><script>"), "{page}");
        assert_eq!(page.matches("</style>").count(), 1, "{page}");
    }
}
