//! What a recording shows, in the shape post-processing asks about it: its HTTP exchanges (one per request
//! hop, with the response's status and whether a body came back) and the visible text of its main-frame
//! DOM snapshots. [`holds`] checks a checkpoint's predicate against it.

#[cfg(feature = "native")]
use trace_manifest::archive::Bundle;
use trace_manifest::event::{EventKind, EventRecord};
use trace_manifest::postprocess::Predicate;

use crate::body::form_fields;
use crate::exchange::Exchange;
use crate::urls;

/// Request bodies larger than this are not read for their form fields: forms are small, uploads are not.
#[cfg(feature = "native")]
const MAX_FORM_BODY_BYTES: u64 = 1 << 20;

/// A main-frame DOM snapshot's visible text.
#[derive(Debug, Clone, PartialEq)]
pub struct PageText {
    pub event_id: u64,
    pub url: String,
    /// The bundle file it was read from, `dom/<id>.html`.
    pub file: String,
    /// Headings (`h1` to `h3`) in document order, then the title.
    pub headings: Vec<String>,
    /// Every visible text run, whitespace collapsed.
    pub runs: Vec<String>,
    /// The runs joined by spaces: what a text predicate is searched in.
    pub text: String,
}

/// The evidence of one bundle.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    pub events: Vec<EventRecord>,
    pub exchanges: Vec<Exchange>,
    /// Main-frame DOM snapshots in event order.
    pub pages: Vec<PageText>,
}

impl Evidence {
    /// Reads the events, the DOM snapshots and the text request bodies of a bundle.
    #[cfg(feature = "native")]
    pub fn load(bundle: &mut Bundle) -> anyhow::Result<Evidence> {
        let events = bundle.events()?;
        Evidence::load_with_events(bundle, events)
    }

    /// As [`Evidence::load`], for a caller that has read the bundle's events already.
    #[cfg(feature = "native")]
    pub fn load_with_events(bundle: &mut Bundle, mut events: Vec<EventRecord>) -> anyhow::Result<Evidence> {
        events.sort_by_key(|record| record.id);
        let mut exchanges = crate::exchange::exchanges(&events);
        for exchange in &mut exchanges {
            if exchange.post_data.is_none()
                && let Some((file, size)) = &exchange.request_body_file
                && *size <= MAX_FORM_BODY_BYTES
                && let Ok(bytes) = bundle.read(file)
            {
                exchange.post_data = String::from_utf8(bytes).ok();
            }
        }
        let mut pages = Vec::new();
        for record in &events {
            if let EventKind::DomSnapshot(snapshot) = &record.event.kind
                && record.event.frame_id.is_none()
            {
                // A snapshot the bundle lost is no evidence; validation reports it.
                let Ok(html) = bundle.read(&snapshot.file) else { continue };
                let html = String::from_utf8_lossy(&html);
                pages.push(page_text(record.id, &snapshot.url, &snapshot.file, &html));
            }
        }
        Ok(Evidence { events, exchanges, pages })
    }
}

/// The event ids at which `predicate` holds in the recording: the successful request, the navigation, the
/// snapshot. Empty when it never holds.
pub fn holds(predicate: &Predicate, evidence: &Evidence) -> Vec<u64> {
    match predicate {
        Predicate::Request { method, url_pattern, body_fields } => evidence
            .exchanges
            .iter()
            .filter(|exchange| {
                exchange.method.eq_ignore_ascii_case(method)
                    && exchange.succeeded()
                    && urls::matches(url_pattern, &exchange.url)
                    && body_fields.iter().all(|(name, value)| {
                        exchange.post_data.as_deref().is_some_and(|body| {
                            form_fields(body, exchange.content_type.as_deref())
                                .iter()
                                .any(|(field, found)| field == name && found == value)
                        })
                    })
            })
            .map(|exchange| exchange.request_event)
            .collect(),
        Predicate::Url { pattern } => evidence
            .events
            .iter()
            .filter(|record| {
                matches!(&record.event.kind, EventKind::Navigation(navigation)
                    if navigation.main_frame && record.event.frame_id.is_none()
                        && urls::matches(pattern, &navigation.url))
            })
            .map(|record| record.id)
            .collect(),
        Predicate::Text { text } => {
            let wanted = collapse_whitespace(text);
            evidence.pages.iter().filter(|page| page.text.contains(&wanted)).map(|page| page.event_id).collect()
        }
    }
}

/// The visible text of an HTML document: headings and text runs outside `script`, `style`, `template`,
/// `noscript` and `head` (whose `title` becomes the last heading).
pub fn page_text(event_id: u64, url: &str, file: &str, html: &str) -> PageText {
    let mut runs = Vec::new();
    let mut headings = Vec::new();
    let mut title = None;
    let mut hidden_depth = 0usize;
    let mut in_title = false;
    let mut heading: Option<String> = None;
    let mut rest = html;
    while !rest.is_empty() {
        let Some(start) = rest.find('<') else {
            push_text(rest, hidden_depth, &mut runs, &mut heading);
            break;
        };
        let text = &rest[..start];
        if in_title {
            title = Some(collapse_whitespace(&decode_entities(text)));
        } else {
            push_text(text, hidden_depth, &mut runs, &mut heading);
        }
        rest = &rest[start..];
        if rest.starts_with("<!--") {
            rest = rest.find("-->").map_or("", |end| &rest[end + 3..]);
            continue;
        }
        let (tag, after) = split_tag(rest);
        rest = after;
        let closing = tag.starts_with('/');
        let name = tag_name(tag);
        match name.as_str() {
            "script" | "style" | "template" | "noscript" | "head" => {
                if closing {
                    hidden_depth = hidden_depth.saturating_sub(1);
                } else if !tag.ends_with('/') {
                    hidden_depth += 1;
                }
            }
            "title" => in_title = !closing,
            "h1" | "h2" | "h3" => {
                if closing {
                    if let Some(text) = heading.take().map(|h| collapse_whitespace(&h)).filter(|h| !h.is_empty()) {
                        headings.push(text);
                    }
                } else if hidden_depth == 0 {
                    heading = Some(String::new());
                }
            }
            _ => {}
        }
        // Text inside different elements is different runs.
        if !runs.last().is_some_and(String::is_empty) {
            runs.push(String::new());
        }
    }
    let runs: Vec<String> = runs.into_iter().map(|run| collapse_whitespace(&run)).filter(|r| !r.is_empty()).collect();
    headings.extend(title.filter(|t| !t.is_empty()));
    let text = runs.join(" ");
    PageText { event_id, url: url.to_owned(), file: file.to_owned(), headings, runs, text }
}

fn push_text(text: &str, hidden_depth: usize, runs: &mut Vec<String>, heading: &mut Option<String>) {
    if hidden_depth > 0 || text.is_empty() {
        return;
    }
    let text = decode_entities(text);
    if let Some(heading) = heading.as_mut() {
        heading.push_str(&text);
    }
    match runs.last_mut() {
        Some(run) => run.push_str(&text),
        None => runs.push(text),
    }
}

/// The tag `html` starts with (at its `<`): the text between `<` and `>`, and what follows. A tag a cut-off
/// document leaves open runs to its end.
pub(crate) fn split_tag(html: &str) -> (&str, &str) {
    let inside = html.strip_prefix('<').unwrap_or(html);
    match inside.find('>') {
        Some(end) => (&inside[..end], &inside[end + 1..]),
        None => (inside, ""),
    }
}

/// A tag's element name in lower case: `div` for `div class=x` and `/DIV`.
pub(crate) fn tag_name(tag: &str) -> String {
    tag.trim_start_matches('/')
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase()
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
        let Some(end) = rest[..rest.len().min(12)].find(';') else {
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
    fn visible_text_leaves_out_scripts_and_keeps_headings_in_order() {
        let html = "<html><head><title>Cart &amp; more</title><style>h1{}</style></head><body>\
                    <script>var x = '<h1>no</h1>';</script><h1>Your <b>cart</b></h1><p>1&nbsp;item</p>\
                    <!-- <h2>gone</h2> --><h2>Total</h2></body></html>";
        let page = page_text(7, "http://shop/cart", "dom/000007.html", html);
        assert_eq!(page.headings, ["Your cart", "Total", "Cart & more"]);
        assert_eq!(page.text, "Your cart 1 item Total");
    }
}
