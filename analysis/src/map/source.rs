//! What one bundle gives a map ([`MapSource`]): its trajectory, the state-changing request each step
//! caused, and each main-frame page it saw (title, heading, DOM skeleton, the controls of its accessibility
//! tree). Read once per bundle; everything else a map holds is derived from these. Every URL kept is
//! cleaned of secret-looking parameters, as journeys' are.

use std::collections::{BTreeSet, HashMap};

use anyhow::Context as _;
use sha2::{Digest, Sha256};
use trace_bundle::archive::Bundle;
use trace_manifest::event::EventKind;
use trace_manifest::map::{Control, MapSource, SourcePage, SourceRequest, SourceStep};
use trace_manifest::trajectory::{ToolAction, ToolCall};

use crate::accessibility::{self, AxNode};
use crate::body::form_fields;
use crate::evidence::Evidence;
use crate::html::{Token, Tokens, VOID_ELEMENTS, attribute, collapse_whitespace, decode_entities, tag_name};
use crate::journeys::clean_url;

/// Methods that do not change what a site holds.
const SAFE_METHODS: &[&str] = &["GET", "HEAD", "OPTIONS"];
/// Longer field values are not parameter values (an upload, a document), and are left out.
const MAX_FIELD_VALUE: usize = 200;
/// Longer control names are clipped.
const MAX_NAME: usize = 120;

/// Reads what a map needs from `bundle`.
pub fn of_bundle(bundle: &mut Bundle) -> anyhow::Result<MapSource> {
    let manifest = bundle.manifest()?;
    let (calls, credentials) = crate::trajectory::of_bundle(bundle)?;
    let events = bundle.events().context("the bundle's events")?;
    let ignored = crate::ignore::of_bundle(bundle, &events)?;
    let ts_of: HashMap<u64, f64> = events.iter().map(|record| (record.id, record.event.ts)).collect();
    let evidence = Evidence::load_with_events(bundle, events)?;
    let secret_values: BTreeSet<&str> = credentials.iter().map(|credential| credential.value.as_str()).collect();

    let state_changes: Vec<(f64, SourceRequest)> = evidence
        .exchanges
        .iter()
        .filter(|exchange| !SAFE_METHODS.iter().any(|safe| exchange.method.eq_ignore_ascii_case(safe)))
        // Beacons report on the page; they do not change what the site holds for the person.
        .filter(|exchange| exchange.resource_type.as_deref() != Some("Ping"))
        .filter(|exchange| crate::ignore::ignore_pattern(&ignored, &exchange.url).is_none())
        .map(|exchange| {
            let fields = exchange
                .post_data
                .as_deref()
                .map(|body| form_fields(body, exchange.content_type.as_deref()))
                .unwrap_or_default()
                .into_iter()
                .filter(|(name, value)| {
                    !crate::secrets::is_secret_name(name)
                        && !secret_values.contains(value.as_str())
                        && value.len() <= MAX_FIELD_VALUE
                })
                .collect();
            let ts = ts_of.get(&exchange.request_event).copied().unwrap_or_default();
            let url = clean_url(&exchange.url);
            (ts, SourceRequest { method: exchange.method.to_ascii_uppercase(), url, fields })
        })
        .collect();
    let steps = calls
        .iter()
        .enumerate()
        .map(|(index, call)| {
            let until = calls.get(index + 1).map_or(f64::INFINITY, |next| next.ts);
            let request = state_changes.iter().find(|(ts, _)| *ts >= call.ts && *ts < until).map(|(_, r)| r.clone());
            SourceStep { call: with_clean_urls(call), request }
        })
        .collect();

    let mut pages = Vec::new();
    for record in &evidence.events {
        let EventKind::DomSnapshot(snapshot) = &record.event.kind else { continue };
        if record.event.frame_id.is_some() {
            continue;
        }
        // A snapshot the bundle lost is left out; validation reports it.
        let Ok(html) = bundle.read(&snapshot.file) else { continue };
        let html = String::from_utf8_lossy(&html);
        let shape = skeleton(&html);
        let controls = match &snapshot.accessibility_file {
            Some(file) => match bundle.read(file).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()) {
                Some(nodes) => controls(&accessibility::outline(&nodes)),
                None => Vec::new(),
            },
            None => Vec::new(),
        };
        pages.push(SourcePage {
            url: clean_url(&snapshot.url),
            snapshot: snapshot.file.clone(),
            ts: record.event.ts,
            title: shape.title,
            heading: shape.heading,
            skeleton: shape.hash,
            controls,
        });
    }
    Ok(MapSource { task: manifest.task.id.to_string(), description: manifest.task.description.clone(), steps, pages })
}

/// A call with its URLs cleaned as journeys' are: a map is shared with agents and people, and a URL may
/// carry a token (a sign-in link, an OAuth code) that no credential field ever held.
fn with_clean_urls(call: &ToolCall) -> ToolCall {
    let mut call = call.clone();
    for url in [&mut call.url_before, &mut call.url_after].into_iter().flatten() {
        *url = clean_url(url);
    }
    if let ToolAction::Navigate { url } = &mut call.action {
        *url = clean_url(url);
    }
    call
}

struct Skeleton {
    hash: String,
    title: Option<String>,
    heading: Option<String>,
}

/// A page's element structure: the set of its elements' tag paths (tag names and ids, no text and no other
/// attribute), hashed. Repeating an element (one more search result) does not change it; a different
/// layout does. Also the title and the first `h1`.
fn skeleton(html: &str) -> Skeleton {
    const HIDDEN: &[&str] = &["script", "style", "template", "noscript"];
    let mut paths = BTreeSet::new();
    let mut stack: Vec<String> = Vec::new();
    let (mut title, mut heading) = (None, None);
    let mut capture: Option<(&str, String)> = None;
    let mut tokens = Tokens::new(html);
    while let Some(token) = tokens.next() {
        let tag = match token {
            Token::Text(text) => {
                if let Some((_, captured)) = capture.as_mut() {
                    captured.push_str(text);
                }
                continue;
            }
            Token::Tag(tag) => tag,
        };
        let closing = tag.starts_with('/');
        let name = tag_name(tag);
        if name.is_empty() || tag.starts_with('!') {
            continue;
        }
        if closing {
            if let Some((captured, text)) = capture.take_if(|(captured, _)| *captured == name) {
                let text = Some(collapse_whitespace(&decode_entities(&text))).filter(|t| !t.is_empty());
                match captured {
                    "title" => title = title.or(text),
                    _ => heading = heading.or(text),
                }
            }
            if let Some(open) = stack.iter().rposition(|open| open.split('#').next() == Some(name.as_str())) {
                stack.truncate(open);
            }
            continue;
        }
        if HIDDEN.contains(&name.as_str()) {
            // Their content is not structure: skip to the end tag.
            tokens.skip_to_end_tag(&name);
            continue;
        }
        let id = attribute(tag, "id").filter(|id| !id.is_empty());
        let step = match id {
            Some(id) => format!("{name}#{id}"),
            None => name.clone(),
        };
        stack.push(step);
        paths.insert(stack.join(">"));
        match name.as_str() {
            "title" if title.is_none() => capture = Some(("title", String::new())),
            "h1" if heading.is_none() && capture.is_none() => capture = Some(("h1", String::new())),
            _ => {}
        }
        if VOID_ELEMENTS.contains(&name.as_str()) || tag.ends_with('/') {
            stack.pop();
        }
    }
    let mut hasher = Sha256::new();
    for path in &paths {
        hasher.update(path.as_bytes());
        hasher.update(b"\n");
    }
    let hash = hex::encode(&hasher.finalize()[..8]);
    Skeleton { hash, title, heading }
}

/// The controls of an outline: its interactive nodes with a name, each with the roles of its ancestors.
/// A select's options are its values, not controls of their own.
fn controls(outline: &accessibility::Outline) -> Vec<Control> {
    let mut found = Vec::new();
    let mut ancestors: Vec<&AxNode> = Vec::new();
    for (depth, node) in outline.walk() {
        ancestors.truncate(depth);
        let in_select = ancestors.iter().any(|a| matches!(a.role.as_str(), "combobox" | "listbox"));
        let name: String = collapse_whitespace(&node.name).chars().take(MAX_NAME).collect();
        // The document itself is focusable, but is no control.
        let document = matches!(node.role.as_str(), "RootWebArea" | "WebArea");
        let an_option_of_a_select = in_select && node.role.contains("option");
        if node.is_interactive() && !document && !name.is_empty() && !an_option_of_a_select {
            let path: Vec<&str> = ancestors.iter().map(|a| a.role.as_str()).collect();
            found.push(Control { role: node.role.clone(), name, path: path.join(" > ") });
        }
        ancestors.push(node);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_of_one_template_share_a_skeleton_whatever_their_text_and_list_lengths() {
        let page = |name: &str, items: usize| {
            let items: String = (0..items).map(|i| format!("<li><a href=\"/x/{i}\">{name} {i}</a></li>")).collect();
            format!(
                "<html><head><title>{name}</title><script>var x = '<div id=fake>';</script></head>\
                 <body><h1 class=\"big\">{name}</h1><ul id=\"results\">{items}</ul><img src=a.png><p>end</p></body></html>"
            )
        };
        let a = skeleton(&page("Blue Mug", 3));
        let b = skeleton(&page("Teapot", 1));
        assert_eq!(a.hash, b.hash);
        assert_eq!(a.title.as_deref(), Some("Blue Mug"));
        assert_eq!(a.heading.as_deref(), Some("Blue Mug"));
        let other = skeleton("<html><body><h1>Help</h1><p id=\"help-text\">Ask</p></body></html>");
        assert_ne!(a.hash, other.hash);
        // An id is structure; a class is not.
        let with_id = skeleton(&page("Blue Mug", 3).replace("<ul id=\"results\">", "<ul id=\"other\">"));
        assert_ne!(a.hash, with_id.hash);
    }

    #[test]
    fn a_snapshot_cut_off_inside_a_tag_is_read_to_its_end() {
        for cut in ["<html><body><h1>Tea</h1><div é", "<p>x</p><é", "<"] {
            let _ = skeleton(cut);
            let _ = crate::evidence::page_text(1, "http://x/", "dom/1.html", cut);
        }
        assert_eq!(skeleton("<html><title>Tea</title><body><h1>Té").title.as_deref(), Some("Tea"));
    }
}
