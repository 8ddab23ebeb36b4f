//! What a recording shows, in the shape post-processing asks about it: its HTTP exchanges (one per request
//! hop, with the response's status and whether a body came back), the visible text of its main-frame
//! DOM snapshots and of the HTML documents the main frame received, each block of it with the region of the page it is in ([`Region`]: a message, the main
//! content, the site's frame), and, for choosing checkpoints, the text of the responses it received.
//! [`holds`] checks a checkpoint's predicate against it; [`Evidence::position`] says when an event
//! happened, which orders checkpoints.

use std::collections::BTreeMap;

#[cfg(feature = "native")]
use trace_bundle::archive::Bundle;
use trace_manifest::event::{EventKind, EventRecord, WebSocketOp};
use trace_manifest::postprocess::Predicate;
use trace_manifest::trajectory::{Credential, ToolAction, Trajectory};

use crate::body::{form_fields, frame_fields};
use crate::exchange::Exchange;
use crate::html::{RAW_TEXT_ELEMENTS, Token, Tokens, VOID_ELEMENTS, attribute, tag_name};
pub use crate::html::{collapse_whitespace, decode_entities};
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
    /// The blocks' text joined by spaces: the page's visible text as it reads.
    pub text: String,
    /// The text without white space ([`compact`]): what a text predicate is searched in.
    pub compact: String,
    /// The visible text as blocks (a paragraph, a heading, a list item, a table cell), in document order.
    pub blocks: Vec<Block>,
}

/// A block of a page's text: the text of a block-level element, its inline elements' text joined as it
/// reads (`The group “Editors” was added.`), and where on the page it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub text: String,
    pub region: Region,
    /// Inside a heading (`h1` to `h6`).
    pub heading: bool,
}

/// Where on a page a block is, from what its elements say of themselves (tag, `role`, `aria-live`,
/// `hidden`, class and id names); ordered from what says most about a state to what says nothing. A block
/// with text of several regions is in the last of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Region {
    /// An alert or status message (`role=alert|status`, `aria-live`, a message list such as Django's
    /// `messagelist` or a Bootstrap `alert`): what an action says it did.
    Message,
    /// The main content: `main`, `article`, `role=main`.
    Main,
    /// Neither: a page without landmarks.
    Body,
    /// The site's frame, the same on every page: navigation, banner, footer, sidebars, search forms.
    Frame,
    /// Not shown as content: hidden elements, and form controls (what the person typed, options offered).
    Hidden,
}

/// The evidence of one bundle.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    pub events: Vec<EventRecord>,
    pub exchanges: Vec<Exchange>,
    /// Main-frame DOM snapshots in event order.
    pub pages: Vec<PageText>,
    /// Main-frame HTML documents as the server sent them, each at its response's event: what a page
    /// showed when it was left before a snapshot could be taken (an agent moving on at once).
    pub documents: Vec<PageText>,
    /// The text of the responses received, in the order they came: what tells a value the server gave from
    /// one the page made. Read for choosing checkpoints only ([`Evidence::read_responses`]).
    pub responses: Vec<ResponseText>,
    /// The task's credentials by placeholder, when this evidence is judged against them (an agent's
    /// session, scored with the credentials it was given: [`Evidence::judged_with_credentials`]). A
    /// request checkpoint's credential field then holds only with the value given, and not at all for a
    /// placeholder missing here. `None` (a recording read for itself) asks only that the field was sent.
    pub credentials: Option<BTreeMap<String, String>>,
}

/// A response body that is text, and when it came.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseText {
    pub at: f64,
    pub text: String,
}

/// The main-frame HTML documents the browser received, each read as a page at its response's event.
#[cfg(feature = "native")]
fn main_frame_documents(bundle: &mut Bundle, events: &[EventRecord], exchanges: &[Exchange]) -> Vec<PageText> {
    let main_frame_requests: std::collections::HashSet<u64> = events
        .iter()
        .filter(|record| {
            record.event.frame_id.is_none()
                && matches!(&record.event.kind, EventKind::Request(request)
                    if request.resource_type.as_deref() == Some("Document"))
        })
        .map(|record| record.id)
        .collect();
    let mut documents = Vec::new();
    for exchange in exchanges.iter().filter(|exchange| main_frame_requests.contains(&exchange.request_event)) {
        let html = exchange.response_mime.as_deref().is_some_and(|mime| mime.eq_ignore_ascii_case("text/html"));
        let (Some(file), Some(size), Some(response)) =
            (&exchange.response_body_file, exchange.response_body_size, exchange.response_event)
        else {
            continue;
        };
        if !html || size > MAX_RESPONSE_TEXT_BYTES || exchange.status != Some(200) {
            continue;
        }
        if let Ok(bytes) = bundle.read(file) {
            documents.push(page_text(response, &exchange.url, file, &String::from_utf8_lossy(&bytes)));
        }
    }
    documents
}

/// Response bodies larger than this are not read for the values they hand out.
#[cfg(feature = "native")]
const MAX_RESPONSE_TEXT_BYTES: u64 = 2 << 20;
/// The most response text read for one recording.
#[cfg(feature = "native")]
const MAX_RESPONSE_TEXT_TOTAL: u64 = 64 << 20;

impl Evidence {
    /// Reads the events, the DOM snapshots and the text request bodies of a bundle.
    #[cfg(feature = "native")]
    pub fn load(bundle: &mut Bundle) -> anyhow::Result<Evidence> {
        let events = bundle.events()?;
        Evidence::load_with_events(bundle, events)
    }

    /// [`Evidence::load`] with the responses' text ([`Evidence::read_responses`]): the evidence of a
    /// person's recording as checkpoints are chosen from it.
    #[cfg(feature = "native")]
    pub fn load_recording(bundle: &mut Bundle) -> anyhow::Result<Evidence> {
        let mut evidence = Evidence::load(bundle)?;
        evidence.read_responses(bundle);
        Ok(evidence)
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
        let documents = main_frame_documents(bundle, &events, &exchanges);
        Ok(Evidence { events, exchanges, pages, documents, responses: Vec::new(), credentials: None })
    }

    /// This evidence, judged against the task's `credentials` (see [`Evidence::credentials`]).
    pub fn judged_with_credentials(mut self, credentials: &[Credential]) -> Evidence {
        self.credentials = Some(credentials.iter().map(|c| (c.placeholder(), c.value.clone())).collect());
        self
    }

    /// Reads the text of the responses received (bodies of text types, each up to 2 MiB, 64 MiB in all),
    /// for [`Evidence::carried_before`].
    #[cfg(feature = "native")]
    pub fn read_responses(&mut self, bundle: &mut Bundle) {
        let mut total = 0;
        for exchange in &self.exchanges {
            let (Some(file), Some(size), Some(at)) =
                (&exchange.response_body_file, exchange.response_body_size, exchange.response_ts)
            else {
                continue;
            };
            let textual = exchange.response_mime.as_deref().is_none_or(is_text_mime);
            if !textual || size > MAX_RESPONSE_TEXT_BYTES || total + size > MAX_RESPONSE_TEXT_TOTAL {
                continue;
            }
            if let Ok(bytes) = bundle.read(file)
                && let Ok(text) = String::from_utf8(bytes)
            {
                total += size;
                self.responses.push(ResponseText { at, text });
            }
        }
        self.responses.sort_by(|a, b| a.at.total_cmp(&b.at));
    }

    /// Whether something the browser received before `before` (a response read by
    /// [`Evidence::read_responses`], or the URL of a page it showed) carries `value`: the server gave it.
    pub fn carried_before(&self, value: &str, before: f64) -> bool {
        let finder = memchr::memmem::Finder::new(value.as_bytes());
        let in_responses = self
            .responses
            .iter()
            .take_while(|response| response.at < before)
            .any(|response| finder.find(response.text.as_bytes()).is_some());
        in_responses
            || self.events.iter().any(|record| {
                record.event.ts < before
                    && matches!(&record.event.kind, EventKind::Navigation(navigation) if navigation.url.contains(value))
            })
    }

    /// When an event happened: its time, then its id. A request's event has the time it was sent, a
    /// navigation's the time it committed, a snapshot's the time it was taken, whatever order they were
    /// stored in: by these a request comes before the page it led to.
    pub fn position(&self, event_id: u64) -> Option<Position> {
        self.record(event_id).map(Position::of)
    }

    /// The earliest position of `ids` in the recording.
    pub fn earliest(&self, ids: &[u64]) -> Option<Position> {
        ids.iter().filter_map(|id| self.position(*id)).reduce(|a, b| if b < a { b } else { a })
    }

    /// Where the start of a recording ends: at the person's first step after the navigation that opened
    /// the start page. What comes before, an agent that does nothing sees too.
    pub fn start_end(&self, trajectory: &Trajectory) -> Position {
        trajectory
            .tool_calls
            .iter()
            .enumerate()
            .filter(|(index, call)| !(*index == 0 && matches!(call.action, ToolAction::Navigate { .. })))
            .find_map(|(_, call)| self.earliest(&call.event_ids))
            .unwrap_or(Position::END)
    }

    /// The start page, as an agent that does nothing sees it: the last capture before the person's first
    /// step ([`Evidence::start_end`]), else the first capture.
    pub fn start_page(&self, trajectory: &Trajectory) -> Option<&PageText> {
        let first_step = self.start_end(trajectory);
        let before = |page: &&PageText| self.position(page.event_id).is_some_and(|at| at < first_step);
        self.pages.iter().rev().find(before).or(self.pages.first())
    }

    /// The page the person ended on: the capture of their last call's tab, else the last capture of all.
    pub fn final_page(&self, trajectory: &Trajectory) -> Option<&PageText> {
        let ended_on = trajectory.tool_calls.iter().rev().find_map(|call| call.dom_snapshot.as_deref());
        ended_on.and_then(|file| self.pages.iter().find(|page| page.file == file)).or(self.pages.last())
    }

    /// The text frames the pages sent over their WebSockets, in order, each with its socket's URL (from the
    /// socket's opening, by its tab and DevTools id) and its data.
    pub fn sent_text_frames(&self) -> Vec<(&EventRecord, &str, &str)> {
        let mut sockets: std::collections::HashMap<(Option<i64>, &str), &str> = std::collections::HashMap::new();
        let mut sent = Vec::new();
        for record in &self.events {
            let EventKind::WebSocket(socket) = &record.event.kind else { continue };
            let key = (record.event.tab_id, socket.request_id.as_str());
            match (socket.op, &socket.url, &socket.data) {
                (WebSocketOp::Opened, Some(url), _) => {
                    sockets.insert(key, url);
                }
                (WebSocketOp::Sent, _, Some(data)) if socket.opcode.unwrap_or(1) == 1 => {
                    if let Some(url) = sockets.get(&key) {
                        sent.push((record, *url, data.as_str()));
                    }
                }
                _ => {}
            }
        }
        sent
    }

    /// The event of id `event_id`.
    pub fn record(&self, event_id: u64) -> Option<&EventRecord> {
        match self.events.binary_search_by_key(&event_id, |record| record.id) {
            Ok(index) => Some(&self.events[index]),
            // Evidence put together by hand may not be in id order.
            Err(_) => self.events.iter().find(|record| record.id == event_id),
        }
    }
}

/// When an event happened ([`Evidence::position`]), comparable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Position {
    pub ts: f64,
    pub id: u64,
}

impl Position {
    /// Before every event.
    pub const START: Position = Position { ts: f64::NEG_INFINITY, id: 0 };
    /// After every event.
    pub const END: Position = Position { ts: f64::INFINITY, id: u64::MAX };

    /// When `record` happened.
    pub fn of(record: &EventRecord) -> Position {
        Position { ts: record.event.ts, id: record.id }
    }
}

impl PartialOrd for Position {
    fn partial_cmp(&self, other: &Position) -> Option<std::cmp::Ordering> {
        Some(self.ts.total_cmp(&other.ts).then(self.id.cmp(&other.id)))
    }
}

/// Whether a MIME type is text a value can be read from.
#[cfg(feature = "native")]
fn is_text_mime(mime: &str) -> bool {
    let mime = mime.to_ascii_lowercase();
    mime.starts_with("text/") || mime.contains("json") || mime.contains("javascript") || mime.contains("xml")
}

/// The event ids at which `predicate` holds in the recording: the successful request, the navigation, the
/// snapshot. Empty when it never holds.
pub fn holds(predicate: &Predicate, evidence: &Evidence) -> Vec<u64> {
    match predicate {
        Predicate::Request { method, url_pattern, body_fields, credential_fields } => evidence
            .exchanges
            .iter()
            .filter(|exchange| {
                exchange.method.eq_ignore_ascii_case(method)
                    && exchange.succeeded()
                    && urls::matches(url_pattern, &exchange.url)
                    && (body_fields.is_empty() && credential_fields.is_empty() || {
                        let sent = exchange
                            .post_data
                            .as_deref()
                            .map(|body| form_fields(body, exchange.content_type.as_deref()))
                            .unwrap_or_default();
                        // The field `name` was sent, with `wanted` when one is asked for.
                        let carries = |name: &str, wanted: Option<&str>| {
                            sent.iter().any(|(field, found)| field == name && wanted.is_none_or(|value| found == value))
                        };
                        body_fields.iter().all(|(name, value)| carries(name, Some(value)))
                            && credential_fields.iter().all(|(name, placeholder)| match &evidence.credentials {
                                None => carries(name, None),
                                Some(given) => given.get(placeholder).is_some_and(|value| carries(name, Some(value))),
                            })
                    })
            })
            .map(|exchange| exchange.request_event)
            .collect(),
        Predicate::Frame { url_pattern, fields } if !fields.is_empty() => evidence
            .sent_text_frames()
            .into_iter()
            .filter(|(_, url, data)| {
                urls::matches(url_pattern, url) && {
                    let sent = frame_fields(data);
                    fields.iter().all(|(name, value)| sent.iter().any(|(n, v)| n == name && v == value))
                }
            })
            .map(|(record, _, _)| record.id)
            .collect(),
        Predicate::Frame { .. } => Vec::new(),
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
            let wanted = compact(text);
            evidence
                .pages
                .iter()
                .chain(&evidence.documents)
                .filter(|page| page.compact.contains(&wanted))
                .map(|page| page.event_id)
                .collect()
        }
    }
}

/// The visible text of an HTML document: headings and text runs outside `script`, `style`, `template`,
/// `noscript` and `head` (whose `title` becomes the last heading), and the same text as blocks with the
/// region of the page each is in ([`Region`]).
pub fn page_text(event_id: u64, url: &str, file: &str, html: &str) -> PageText {
    let mut reader = PageReader::default();
    let mut tokens = Tokens::new(html);
    while let Some(token) = tokens.next() {
        let tag = match token {
            Token::Text(text) => {
                reader.text(text);
                continue;
            }
            Token::Tag(tag) => tag,
        };
        let name = tag_name(tag);
        if tag.starts_with('/') {
            reader.close(&name);
        } else {
            reader.open(&name, tag);
            if RAW_TEXT_ELEMENTS.contains(&name.as_str()) && !tag.ends_with('/') {
                // Their content is not markup the page shows: on to their end tag.
                tokens.skip_to_end_tag(&name);
            }
        }
    }
    reader.finish(event_id, url, file)
}

/// Elements that flow within a line: their text continues the block around them.
const INLINE_ELEMENTS: &[&str] = &[
    "a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "dfn", "em", "font", "i", "img", "kbd", "label", "mark",
    "q", "s", "samp", "small", "span", "strong", "sub", "sup", "time", "u", "var", "wbr",
];

/// Form controls: what they hold is the person's input or a choice offered, not what the page says.
const CONTROL_ELEMENTS: &[&str] = &["button", "datalist", "optgroup", "option", "select", "textarea"];

/// Elements under which a `header` or `footer` belongs to a section, not to the site's frame.
const SECTIONING_ELEMENTS: &[&str] = &["article", "aside", "main", "nav", "section"];

/// `role` values of the site's frame, of messages, and of the main content.
const FRAME_ROLES: &[&str] =
    &["banner", "complementary", "contentinfo", "menu", "menubar", "navigation", "search", "tablist", "toolbar"];
const MESSAGE_ROLES: &[&str] = &["alert", "alertdialog", "log", "status"];

/// Class names of what is not shown, or shown only to screen readers (a "Skip to content" link).
const HIDDEN_NAMES: &[&str] =
    &["d-none", "hidden", "is-hidden", "screen-reader-text", "skip-link", "sr-only", "visually-hidden"];
/// Class or id names of the site's frame (whole names only: `card-header` is a card's), and any ending in
/// `nav` (`mainnav`, `site-nav`).
const FRAME_NAMES: &[&str] = &[
    "breadcrumb",
    "breadcrumbs",
    "footer",
    "header",
    "masthead",
    "menu",
    "nav",
    "navbar",
    "sidebar",
    "site-footer",
    "site-header",
    "site-nav",
    "topbar",
];
/// Leading words of the class or id names of messages (`alert-success`, `flash-notice`, `messagelist`).
const MESSAGE_WORDS: &[&str] =
    &["alert", "errornote", "flash", "messagelist", "messages", "notice", "notification", "notifications", "toast"];

/// What [`page_text`] keeps while it reads: the runs and headings as they always were, and the blocks with
/// their regions through a stack of the open elements.
#[derive(Default)]
struct PageReader {
    runs: Vec<String>,
    headings: Vec<String>,
    title: Option<String>,
    in_title: bool,
    /// Inside `head` or `template`: nothing shown.
    hidden_depth: usize,
    heading: Option<String>,
    stack: Vec<OpenElement>,
    blocks: Vec<Block>,
    block: String,
    block_region: Option<Region>,
    block_heading: bool,
}

struct OpenElement {
    name: String,
    region: Region,
    sectioning: bool,
}

impl PageReader {
    fn region(&self) -> Region {
        self.stack.last().map_or(Region::Body, |open| open.region)
    }

    fn text(&mut self, raw: &str) {
        if raw.is_empty() {
            return;
        }
        if self.in_title {
            self.title = Some(collapse_whitespace(&decode_entities(raw)));
            return;
        }
        if self.hidden_depth > 0 {
            return;
        }
        let text = decode_entities(raw);
        if let Some(heading) = self.heading.as_mut() {
            heading.push_str(&text);
        }
        match self.runs.last_mut() {
            Some(run) => run.push_str(&text),
            None => self.runs.push(text.clone()),
        }
        if !text.trim().is_empty() {
            let region = self.region();
            self.block_region = Some(self.block_region.map_or(region, |block| block.max(region)));
            self.block_heading |= self.stack.iter().any(|open| is_heading(&open.name));
        }
        self.block.push_str(&text);
    }

    fn open(&mut self, name: &str, tag: &str) {
        self.boundary(name);
        match name {
            "head" | "template" => self.hidden_depth += 1,
            "title" => self.in_title = true,
            "h1" | "h2" | "h3" if self.hidden_depth == 0 => self.heading = Some(String::new()),
            _ => {}
        }
        if VOID_ELEMENTS.contains(&name) || tag.ends_with('/') || name.is_empty() {
            return;
        }
        let sectioned = self.stack.iter().any(|open| open.sectioning);
        let region = match own_region(name, tag, sectioned) {
            None => self.region(),
            Some(own) => match (self.region(), own) {
                (Region::Hidden, _) | (_, Region::Hidden) => Region::Hidden,
                (_, Region::Message) | (Region::Message, _) => Region::Message,
                (_, Region::Frame) | (Region::Frame, _) => Region::Frame,
                (_, own) => own,
            },
        };
        let role = attribute(tag, "role").unwrap_or_default();
        let sectioning = SECTIONING_ELEMENTS.contains(&name) || role.eq_ignore_ascii_case("main");
        self.stack.push(OpenElement { name: name.to_owned(), region, sectioning });
    }

    fn close(&mut self, name: &str) {
        self.boundary(name);
        match name {
            "head" | "template" => self.hidden_depth = self.hidden_depth.saturating_sub(1),
            "title" => self.in_title = false,
            "h1" | "h2" | "h3" => {
                if let Some(text) = self.heading.take().map(|h| collapse_whitespace(&h)).filter(|h| !h.is_empty()) {
                    self.headings.push(text);
                }
            }
            _ => {}
        }
        if let Some(open) = self.stack.iter().rposition(|open| open.name == name) {
            self.stack.truncate(open);
        }
    }

    /// Every tag ends a run (text inside different elements is different runs); a tag of a block-level
    /// element, or a line break, ends a block too.
    fn boundary(&mut self, name: &str) {
        if !self.runs.last().is_some_and(String::is_empty) {
            self.runs.push(String::new());
        }
        if INLINE_ELEMENTS.contains(&name) {
            return;
        }
        let text = collapse_whitespace(&std::mem::take(&mut self.block));
        if let Some(region) = self.block_region.take().filter(|_| !text.is_empty()) {
            self.blocks.push(Block { text, region, heading: self.block_heading });
        }
        self.block_heading = false;
    }

    fn finish(mut self, event_id: u64, url: &str, file: &str) -> PageText {
        self.boundary("");
        let runs: Vec<String> =
            self.runs.into_iter().map(|run| collapse_whitespace(&run)).filter(|run| !run.is_empty()).collect();
        let mut headings = self.headings;
        headings.extend(self.title.filter(|title| !title.is_empty()));
        // Blocks read as the page lays them out: no space where inline elements meet (`“<a>Blue</a>”`).
        let text = self.blocks.iter().map(|block| block.text.as_str()).collect::<Vec<_>>().join(" ");
        let compact = compact(&text);
        PageText {
            event_id,
            url: url.to_owned(),
            file: file.to_owned(),
            headings,
            runs,
            text,
            compact,
            blocks: self.blocks,
        }
    }
}

fn is_heading(name: &str) -> bool {
    matches!(name, "h1" | "h2" | "h3" | "h4" | "h5" | "h6")
}

/// The region an element sets for what it holds, if it sets one (see [`Region`]).
fn own_region(name: &str, tag: &str, sectioned: bool) -> Option<Region> {
    let style = attribute(tag, "style").unwrap_or_default().to_ascii_lowercase().replace(' ', "");
    let classes: Vec<String> =
        attribute(tag, "class").unwrap_or_default().split_whitespace().map(str::to_ascii_lowercase).collect();
    if CONTROL_ELEMENTS.contains(&name)
        || classes.iter().any(|class| HIDDEN_NAMES.contains(&class.as_str()))
        || attribute(tag, "hidden").is_some()
        || attribute(tag, "aria-hidden").is_some_and(|value| value.eq_ignore_ascii_case("true"))
        || style.contains("display:none")
        || style.contains("visibility:hidden")
    {
        return Some(Region::Hidden);
    }
    let role = attribute(tag, "role").unwrap_or_default().to_ascii_lowercase();
    let live = attribute(tag, "aria-live").unwrap_or_default().to_ascii_lowercase();
    let names: Vec<String> = ["class", "id"]
        .iter()
        .filter_map(|attr| attribute(tag, attr))
        .flat_map(str::split_whitespace)
        .map(str::to_ascii_lowercase)
        .collect();
    let leading_word = |name: &String| name.split(['-', '_']).next().unwrap_or_default().to_owned();
    if MESSAGE_ROLES.contains(&role.as_str())
        || matches!(live.as_str(), "polite" | "assertive")
        || names.iter().any(|name| MESSAGE_WORDS.contains(&leading_word(name).as_str()))
    {
        return Some(Region::Message);
    }
    if FRAME_ROLES.contains(&role.as_str())
        || matches!(name, "nav" | "aside")
        || (matches!(name, "header" | "footer") && !sectioned)
        || names.iter().any(|name| FRAME_NAMES.contains(&name.as_str()) || name.ends_with("nav"))
    {
        return Some(Region::Frame);
    }
    if matches!(name, "main" | "article") || role == "main" {
        return Some(Region::Main);
    }
    None
}

/// `text` without any white space: what a text predicate is compared in, so that where a page breaks
/// its lines or its elements does not decide whether it shows a text.
pub fn compact(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
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

    #[test]
    fn blocks_read_as_the_page_lays_them_out_each_in_its_region() {
        let html = "<body><a class=\"skip-link\">Skip to main content</a><div id=header><h1>Shop</h1></div>\
                    <div id=mainnav class=nav><a>Cart</a></div><main><h1>Your <b>cart</b></h1>\
                    <ul class=messagelist><li class=success>The mug “<a>Blue</a>” was added.</li></ul>\
                    <article><header><h2>Blue mug</h2></header><p>One, $12</p></article><select><option>Red</option></select>\
                    <div hidden><p>Later</p></div></main><footer>© Shop</footer></body>";
        let page = page_text(1, "http://shop/cart", "dom/1.html", html);
        let blocks: Vec<(&str, Region, bool)> =
            page.blocks.iter().map(|block| (block.text.as_str(), block.region, block.heading)).collect();
        assert_eq!(
            blocks,
            [
                ("Skip to main content", Region::Hidden, false),
                ("Shop", Region::Frame, true),
                ("Cart", Region::Frame, false),
                ("Your cart", Region::Main, true),
                ("The mug “Blue” was added.", Region::Message, false),
                // A header inside an article is the article's own.
                ("Blue mug", Region::Main, true),
                ("One, $12", Region::Main, false),
                ("Red", Region::Hidden, false),
                ("Later", Region::Hidden, false),
                ("© Shop", Region::Frame, false),
            ]
        );
        // A text predicate is compared without white space: a block's text is found however the runs split it.
        assert!(page.compact.contains(&compact("The mug “Blue” was added.")));
    }
}
