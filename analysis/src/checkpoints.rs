//! `checkpoints.json`: states that mark real progress in the demonstration, chosen by fixed rules (no model)
//! so that the same bundle always gets the same checkpoints, and chosen to discriminate: the person's
//! demonstration reaches every one of them, in order, and an agent that does nothing reaches none.
//! `trace-replay audit` proves both on the replayed bundle ([`crate::audit`]); these rules are written to
//! pass it.
//!
//! **The start.** What the recording shows before the person's first step (the start page, its loads and
//! the requests it makes by itself) an agent that does nothing shows too: no checkpoint holds there.
//!
//! 1. **State changes** (`request`). A successful (2xx, 3xx) request other than GET, HEAD or OPTIONS, not
//!    on the ignore list, not a ping or CSP report, not the page's own doing (sent after a page loaded and
//!    before the person's next act in its tab, as the start's requests are: an editor saving its settings
//!    as it opens), that is no read-only lookup:
//!    - a GraphQL query that is not a `mutation` (or, sent by name only, whose name reads as one);
//!    - a search, suggest or autocomplete endpoint: a word of its path, or the value of a field naming the
//!      call (`call=qsearch`, `action=search`), is such a word ([`is_lookup_word`]);
//!    - a type-ahead burst: two or more POSTs to one endpoint whose fields differ only by values that are
//!      prefixes of one another (the person typing), each answered with a body and none setting a cookie.
//!
//!    Of any other burst (an autosave while the person types) only the last request counts, with the
//!    value the person ended on. The predicate is the method, the host and path (cut before a segment
//!    that is a clock or an id the page made), and the body fields that a demonstration and an agent send
//!    alike for the same intent: those the person typed or chose (by value, or by the name of a field
//!    they acted on) and those the server gave (an earlier response or page address carries the value: an
//!    id handed out, a form's hidden field). Where things sit on the screen is no part of the task (a
//!    node's `x` and `y` on a canvas it was dropped onto: [`is_layout_field`]) unless typed, and is left out
//!    too. Clocks, nonces and ids the page made itself are left out by
//!    the rules replay matches with ([`canonical::is_volatile_field`], [`client_ids::is_id_shaped`]), and
//!    so is anything secret, but for a field that sent one of the task's credentials as it was typed: that
//!    one is named by its placeholder (`credential_fields`), so that a sign-in counts only with the
//!    credential the agent was given (see [`crate::evidence::Evidence::credentials`]).
//!
//!    Over a WebSocket (`frame`), likewise: a text frame the page sent on a socket within
//!    [`FRAME_EFFECT_MS`] of the person's act in its tab (not the page's own, after a load and before any
//!    act: a subscription, a ping), read as JSON ([`frame_fields`]), with the fields kept as a
//!    request's body fields are; a frame with none kept is no change (a ping, an acknowledgement). Of a
//!    burst of frames on one socket with the same fields (a slider nudged key by key), the last.
//! 2. **Pages reached** (`url`). A main-frame page a form submission led to, and a page a call reached
//!    right after the person typed (a search), by its scheme-less URL, cut before a volatile query
//!    parameter or an id the page made.
//! 3. **The final state** (`text`). What the page showing the last state change's result shows (the
//!    capture of the call that made it, or the page as the person left it when that call was their last;
//!    with no state change, the page the person ended on) that neither
//!    the start nor any page before the last state change showed, best first: a message (`role=alert|status`, a message
//!    list), a heading of the main content, the main content, a heading or block of a page without
//!    landmarks; never the site's frame (navigation, banner, footer, sidebars), form controls or a clock.
//!    When the best is weak (one word, or under [`STRONG_TEXT_CHARS`] characters), the next ones too, up
//!    to [`MAX_FINAL_TEXTS`]. Without any, the final page's URL if no page before had it.
//!
//! Each checkpoint is placed at the event where the recording first satisfies it ([`holds`], ordered by
//! [`Evidence::position`]: a request by when it was sent, so before the page it led to), and the list is in
//! that order, so that the demonstration itself reaches them all in order. A predicate that does not hold
//! on the recording, holds at its start, or names a secret, is dropped.

use std::collections::{BTreeMap, HashSet};

use trace_manifest::event::{EventKind, EventRecord, NavigationCause};
use trace_manifest::postprocess::{Checkpoint, CheckpointRole, Predicate};
use trace_manifest::trajectory::{Credential, ToolAction, ToolCall, Trajectory};

use crate::body::{form_fields, frame_fields};
use crate::canonical::{self, Clocks};
use crate::client_ids;
use crate::evidence::{Evidence, PageText, Position, Region, compact, holds};
use crate::exchange::Exchange;
use crate::fidelity::is_volatile_run;
use crate::secrets::is_secret_name;
use crate::urls::{self, scheme_less, without_query};
use crate::websocket;

/// Methods that read without changing anything (WebDAV's and HTTP's reading methods among them).
const SAFE_METHODS: &[&str] = &["GET", "HEAD", "OPTIONS", "PROPFIND", "REPORT", "SEARCH", "QUERY"];
/// Texts shorter or longer than this make poor final-state texts.
const TEXT_CHARS: std::ops::RangeInclusive<usize> = 3..=120;
/// A final-state text of one word, or shorter than this, is weak: others are added to it.
pub const STRONG_TEXT_CHARS: usize = 10;
/// The most final-state texts chosen.
pub const MAX_FINAL_TEXTS: usize = 3;
/// Fields whose value names the call a request makes (`call=qsearch`): a lookup word there is a lookup.
const CALL_FIELDS: &[&str] = &["action", "call", "cmd", "command", "do", "fn", "method", "op", "operation"];
/// How a GraphQL operation sent by name only reads when it only reads.
const QUERY_NAME_PREFIXES: &[&str] =
    &["count", "fetch", "find", "get", "list", "load", "lookup", "query", "read", "search"];

/// Chooses the checkpoints of a recording, in the order the demonstration reached them.
pub fn select(
    evidence: &Evidence,
    trajectory: &Trajectory,
    credentials: &[Credential],
    ignored: &[String],
) -> Vec<Checkpoint> {
    let context = Context::of(evidence, trajectory, credentials);
    let mut changes = state_changes(&context, ignored);
    changes.extend(socket_changes(&context));
    changes.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
    let last_change = changes.iter().map(|(at, _)| *at).fold(None, |last: Option<Position>, at| match last {
        Some(last) if last >= at => Some(last),
        _ => Some(at),
    });
    let mut candidates: Vec<Candidate> = changes.into_iter().map(|(_, candidate)| candidate).collect();
    candidates.extend(pages_reached(&context));
    candidates.extend(final_state(&context, last_change));
    place(&context, candidates)
}

/// Places a model's proposals among a recording's checkpoints (see [`crate::proposals`]) by the rules'
/// own placing: each at the event where the recording first satisfies it, in that order. A proposal that
/// names a secret or repeats a checkpoint is dropped; one that holds at the start, or nowhere (placed
/// last), is kept for the audit to judge, and drop. The checkpoints are numbered again from `cp1`.
pub fn place_proposals(
    evidence: &Evidence,
    trajectory: &Trajectory,
    credentials: &[Credential],
    checkpoints: &[Checkpoint],
    proposals: Vec<crate::proposals::Proposal>,
    model: &str,
) -> Vec<Checkpoint> {
    let context = Context::of(evidence, trajectory, credentials);
    let existing = checkpoints.iter().map(|checkpoint| Candidate {
        role: checkpoint.role.unwrap_or(CheckpointRole::Page),
        reason: checkpoint.reason.clone(),
        predicate: checkpoint.predicate.clone(),
        proposed_by: checkpoint.proposed_by.clone(),
    });
    let proposed = proposals.into_iter().map(|proposal| Candidate {
        role: proposal.role,
        reason: proposal.reason,
        predicate: proposal.predicate,
        proposed_by: Some(model.to_owned()),
    });
    place(&context, existing.chain(proposed).collect())
}

/// A checkpoint before it is placed.
struct Candidate {
    role: CheckpointRole,
    reason: String,
    predicate: Predicate,
    proposed_by: Option<String>,
}

/// What the rules ask of the recording besides its evidence: what the person typed, chose and acted on,
/// the secrets, the recording's clock, and where its start ends.
struct Context<'a> {
    evidence: &'a Evidence,
    trajectory: &'a Trajectory,
    credentials: &'a [Credential],
    secrets: Vec<&'a str>,
    /// Text the person typed and options they chose.
    typed: Vec<String>,
    /// Names of the fields the person typed into, chose in or clicked.
    acted_on: HashSet<String>,
    clocks: Clocks,
    /// The person's first step after the start: what comes before is the start.
    first_step: Position,
}

impl<'a> Context<'a> {
    fn of(evidence: &'a Evidence, trajectory: &'a Trajectory, credentials: &'a [Credential]) -> Context<'a> {
        let mut typed = Vec::new();
        let mut acted_on = HashSet::new();
        for call in &trajectory.tool_calls {
            match &call.action {
                ToolAction::Input { text } if !text.contains("{{credentials.") => typed.push(text.clone()),
                ToolAction::SelectDropdown { option } => typed.extend(option.split(", ").map(str::to_owned)),
                _ => {}
            }
            if matches!(
                call.action,
                ToolAction::Input { .. } | ToolAction::SelectDropdown { .. } | ToolAction::Click { .. }
            ) && let Some(name) = call.target.as_ref().and_then(|target| target.name.clone())
            {
                acted_on.insert(name);
            }
        }
        typed.retain(|text| !text.is_empty());
        let times = evidence.events.iter().map(|record| record.event.ts);
        let (from, to) = times.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), ts| (lo.min(ts), hi.max(ts)));
        let clocks = if from.is_finite() { Clocks::around(from, to) } else { Clocks::NONE };
        Context {
            evidence,
            trajectory,
            credentials,
            secrets: credentials.iter().map(|c| c.value.as_str()).filter(|v| !v.is_empty()).collect(),
            typed,
            acted_on,
            clocks,
            first_step: evidence.start_end(trajectory),
        }
    }

    fn mentions_secret(&self, text: &str) -> bool {
        text.contains("{{credentials.") || self.secrets.iter().any(|secret| text.contains(secret))
    }

    /// The placeholder of the credential a body field sent as it is, when it sent one.
    fn credential_sent(&self, value: &str) -> Option<String> {
        let credential = self.credentials.iter().find(|credential| !value.is_empty() && credential.value == value)?;
        Some(credential.placeholder())
    }

    /// Whether a predicate names a secret outside its credential fields, or names there a placeholder that
    /// is no credential of the recording's.
    fn predicate_names_secret(&self, predicate: &Predicate) -> bool {
        let mut shown = predicate.clone();
        if let Predicate::Request { credential_fields, .. } = &mut shown {
            let placeholders: Vec<String> = self.credentials.iter().map(Credential::placeholder).collect();
            if credential_fields.values().any(|placeholder| !placeholders.contains(placeholder)) {
                return true;
            }
            credential_fields.clear();
        }
        self.mentions_secret(&serde_json::to_string(&shown).unwrap_or_default())
    }

    /// Whether the person typed `value` into some field, as it is or as a rich-text editor's markup of it.
    fn is_typed(&self, value: &str) -> bool {
        // A rich-text editor sends what was typed into it as markup.
        let shown = value.contains('<').then(|| crate::html::text_of(value));
        self.typed.iter().any(|typed| typed == value || shown.as_deref() == Some(typed.trim()))
    }

    /// Whether the person acted on the field a body field is named by (a JSON path by its last member).
    fn acted_on_field(&self, path: &str) -> bool {
        let last = path.rsplit(['.', '[']).next().unwrap_or(path).trim_end_matches(']');
        self.acted_on.contains(path) || self.acted_on.contains(last)
    }

    /// Whether the person acted in `event`'s tab within `window_ms` before it, and no page loaded there
    /// since: what the page did then is the act's doing.
    fn act_just_before(&self, event: &EventRecord, window_ms: f64) -> bool {
        self.latest_before(event).is_some_and(|(acted, record)| {
            matches!(record.event.kind, EventKind::Action(_)) && event.event.ts - acted.ts <= window_ms
        })
    }

    /// The latest act of the person's or page load in `event`'s tab before it, with its position.
    fn latest_before(&self, event: &EventRecord) -> Option<(Position, &'a EventRecord)> {
        let (at, tab) = (Position::of(event), event.event.tab_id);
        self.evidence
            .events
            .iter()
            .filter(|record| record.event.tab_id == tab)
            .filter(|record| match &record.event.kind {
                EventKind::Action(action) => !action.page_made,
                EventKind::Navigation(navigation) => {
                    navigation.main_frame
                        && record.event.frame_id.is_none()
                        && navigation.cause != NavigationCause::Script
                }
                _ => false,
            })
            .map(|record| (Position::of(record), record))
            .filter(|(position, _)| *position < at)
            .max_by(|(a, _), (b, _)| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal))
    }

    /// Whether the request of event `request_event` was the page's own doing: sent after a page loaded in its
    /// tab (a new document, not a route of the same one) and before the person's next act there, by the
    /// events' times (the recorder stores an exchange once it is whole, after what it led to).
    fn page_sent_by_itself(&self, request_event: u64) -> bool {
        self.evidence
            .record(request_event)
            .and_then(|event| self.latest_before(event))
            .is_some_and(|(_, record)| matches!(record.event.kind, EventKind::Navigation(_)))
    }

    /// Whether an id-shaped value was made by the page: the person did not type it, and the server did
    /// not give it ([`Context::server_gave`]).
    fn page_made(&self, value: &str) -> bool {
        !self.is_typed(value) && !self.server_gave(value)
    }

    /// Whether the server gave a value: something the browser received before the value was first sent
    /// carries it (replay's rule, [`client_ids::Origin`]). Without the responses' text nothing shows it.
    fn server_gave(&self, value: &str) -> bool {
        if self.evidence.responses.is_empty() {
            return false;
        }
        let first_sent = self
            .evidence
            .exchanges
            .iter()
            .filter(|exchange| sends_value(exchange, value))
            .map(|exchange| exchange.request_ts)
            .fold(f64::INFINITY, f64::min);
        self.evidence.carried_before(value, first_sent)
    }

    /// Whether a body field goes into a state change's predicate (see the module's rule 1).
    fn keeps_field(&self, name: &str, value: &str) -> bool {
        if value.is_empty()
            || is_secret_name(name)
            || self.mentions_secret(name)
            || self.mentions_secret(value)
            || canonical::is_volatile_field(name, value, &self.clocks)
        {
            return false;
        }
        if self.is_typed(value) || self.acted_on_field(name) {
            return true;
        }
        if looks_like_token(value) || is_layout_field(name, value) {
            return false;
        }
        if self.evidence.responses.is_empty() {
            // Nothing to tell the server's values by: an id is taken for the page's, other values kept.
            return !client_ids::is_id_shaped(value, &self.clocks);
        }
        self.server_gave(value)
    }

    /// A URL's path as a pattern, cut before the first segment that holds a clock or an id the page made:
    /// replayed, the page sends another.
    fn path_pattern(&self, url: &str) -> String {
        let path = without_query(scheme_less(url));
        let mut pattern = String::with_capacity(path.len());
        for (index, segment) in path.split('/').enumerate() {
            let volatile = index > 0
                && (self.clocks.is_clock(segment)
                    || client_ids::id_tokens(segment.as_bytes(), &self.clocks)
                        .any(|token| self.page_made(&segment[token])));
            if volatile {
                pattern.push('/');
                break;
            }
            if index > 0 {
                pattern.push('/');
            }
            pattern.push_str(segment);
        }
        pattern
    }

    /// A socket's URL as a pattern: its path cut as [`Context::path_pattern`] cuts it, and also before its
    /// first segment that is a number. A number in a socket's path names a server or a session that the
    /// page drew at random or was given (SockJS's `/echo/892/{session}/websocket`), never the endpoint, and
    /// a short one is no id the volatile-token rules can tell.
    fn socket_pattern(&self, url: &str) -> String {
        let mut pattern = self.path_pattern(url);
        let host_len = pattern.find('/').unwrap_or(pattern.len());
        let number = pattern[host_len..].match_indices('/').map(|(at, _)| host_len + at + 1).find(|&start| {
            let segment = pattern[start..].split('/').next().unwrap_or_default();
            !segment.is_empty() && segment.bytes().all(|byte| byte.is_ascii_digit())
        });
        if let Some(start) = number {
            pattern.truncate(start);
        }
        pattern
    }

    /// A page's URL as a pattern: its path cut as [`Context::path_pattern`] cuts it, and its query up to
    /// the first volatile parameter.
    fn page_pattern(&self, url: &str) -> String {
        let path = self.path_pattern(url);
        let full = scheme_less(url);
        if path.len() < without_query(full).len() {
            return path;
        }
        let Some((_, query)) = full.split_once('?') else { return path };
        let kept: Vec<&str> = query
            .split('&')
            .take_while(|pair| {
                let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
                !canonical::is_volatile_field(name, value, &self.clocks)
                    && !client_ids::id_tokens(value.as_bytes(), &self.clocks).any(|token| self.page_made(&value[token]))
            })
            .collect();
        if kept.is_empty() { format!("{path}?") } else { format!("{path}?{}", kept.join("&")) }
    }
}

/// The page that shows a state change's result: the capture the trajectory gives the call that made it
/// (taken once the call's effects were over), else the first page captured after it. What the person did
/// after the task's last state change (a page read, a tab left open) is no part of its final state; but
/// when the call that made it was the person's last, the page as they left it is (the capture at stop, the
/// `done` call's): a result that arrives late (a reply over a socket, a kernel's output) may not have been
/// shown yet when the capture after the call was taken, and the person stopped once it was.
fn result_page<'e>(context: &Context<'e>, change: Position) -> Option<&'e PageText> {
    let evidence = context.evidence;
    let after = |page: &&PageText| evidence.position(page.event_id).is_some_and(|at| at >= change);
    let calls = &context.trajectory.tool_calls;
    let is_done = |call: &ToolCall| matches!(call.action, ToolAction::Done { .. });
    let made_it =
        calls.iter().rposition(|call| evidence.earliest(&call.event_ids).is_some_and(|first| first <= change));
    let person_stopped_after_it = made_it.is_some_and(|index| calls[index + 1..].iter().all(is_done));
    let as_left = calls.iter().rposition(is_done).filter(|_| person_stopped_after_it);
    let shown_by = |index: usize| {
        calls[index].dom_snapshot.as_deref().and_then(|file| evidence.pages.iter().find(|page| page.file == file))
    };
    as_left
        .and_then(shown_by)
        .filter(after)
        .or_else(|| made_it.and_then(shown_by).filter(after))
        .or_else(|| evidence.pages.iter().find(after))
}

/// Names of where a thing sits or how large it is on the screen (a JSON path by its last member).
const LAYOUT_NAMES: &[&str] = &[
    "x",
    "y",
    "x1",
    "y1",
    "x2",
    "y2",
    "cx",
    "cy",
    "dx",
    "dy",
    "left",
    "top",
    "right",
    "bottom",
    "width",
    "height",
    "w",
    "h",
    "zoom",
    "scale",
    "scrollx",
    "scrolly",
    "scrolltop",
    "scrollleft",
    "offsetx",
    "offsety",
];

/// Whether a body field says where something sits on the screen: a number under a [`LAYOUT_NAMES`] name. A
/// canvas editor sends each node's position as the person dropped it; another drop does the same task.
fn is_layout_field(name: &str, value: &str) -> bool {
    let last = name.rsplit(['.', '[']).next().unwrap_or(name).trim_end_matches(']');
    LAYOUT_NAMES.iter().any(|layout| last.eq_ignore_ascii_case(layout)) && value.trim().parse::<f64>().is_ok()
}

/// Whether a request sends `value` whole: as a path segment, a query parameter's value or a body field's.
fn sends_value(exchange: &Exchange, value: &str) -> bool {
    let Ok(url) = url::Url::parse(&exchange.url) else { return exchange.url.contains(value) };
    url.path_segments().is_some_and(|mut segments| segments.any(|segment| segment == value))
        || url.query_pairs().any(|(_, sent)| sent == value)
        || exchange.post_data.as_deref().is_some_and(|body| {
            form_fields(body, exchange.content_type.as_deref()).iter().any(|(_, sent)| sent == value)
        })
}

/// A state-changing exchange, where its request was, and the fields of its body.
type Change<'e> = (Position, &'e Exchange, Vec<(String, String)>);

/// How long after a person's act a frame the page sent is still the act's doing (a throttled or debounced
/// control sends a moment later).
pub const FRAME_EFFECT_MS: f64 = 2_000.0;

/// Rule 1 over WebSockets: the frames the person's acts sent, each with its position.
fn socket_changes(context: &Context<'_>) -> Vec<(Position, Candidate)> {
    let evidence = context.evidence;
    // The frames kept so far; one with the same socket and field names as the last kept replaces it.
    let mut kept: Vec<(Position, String, BTreeMap<String, String>)> = Vec::new();
    for (record, url, data) in evidence.sent_text_frames() {
        let at = Position::of(record);
        if at < context.first_step || !context.act_just_before(record, FRAME_EFFECT_MS) {
            continue;
        }
        let all_fields = frame_fields(data);
        if is_transport_chatter(&all_fields) {
            continue;
        }
        let mut fields = BTreeMap::new();
        for (name, value) in all_fields {
            if !fields.contains_key(&name) && context.keeps_field(&name, &value) {
                fields.insert(name, value);
            }
        }
        let url_pattern = context.socket_pattern(url);
        if fields.is_empty() || context.mentions_secret(&url_pattern) {
            continue;
        }
        let same_burst = kept
            .last()
            .is_some_and(|(_, last_url, last_fields)| *last_url == url_pattern && last_fields.keys().eq(fields.keys()));
        if same_burst {
            kept.pop();
        }
        kept.push((at, url_pattern, fields));
    }
    kept.into_iter()
        .map(|(at, url_pattern, fields)| {
            let reason = format!("the page sent a frame on {url_pattern}: the site's state changed over its socket");
            let predicate = Predicate::Frame { url_pattern, fields };
            (at, Candidate { role: CheckpointRole::StateChange, reason, predicate, proposed_by: None })
        })
        .collect()
}

/// Whether a frame the page sent only keeps the conversation going: a top-level member that names its kind
/// ([`websocket::FRAME_KIND_NAMES`], or a top-level array element) is chatter ([`websocket::is_chatter_kind`]:
/// `{"type": "ping"}`, Phoenix's `heartbeat`, NiceGUI's `ack`). A re-run sends them at other moments with
/// other counts, and they say nothing of the task.
fn is_transport_chatter(fields: &[(String, String)]) -> bool {
    fields.iter().any(|(name, value)| {
        let names_the_kind = websocket::FRAME_KIND_NAMES.contains(&name.as_str())
            || (name.starts_with('[')
                && name.ends_with(']')
                && name[1..name.len() - 1].bytes().all(|b| b.is_ascii_digit()));
        names_the_kind && websocket::is_chatter_kind(value)
    })
}

/// Whether a write only tells the server the page is still there (a segment of its path names it so:
/// `/editing-sessions/ping/…`, `/heartbeat`): an editor sends one as it opens and then on a timer, whatever
/// the person does, and a re-run sends it when its own timer says.
fn is_liveness_signal(url: &str) -> bool {
    without_query(scheme_less(url)).split('/').skip(1).any(is_liveness_word)
}

/// Whether a segment of a write's path names a liveness signal ([`websocket::LIVENESS_WORDS`]).
fn is_liveness_word(word: &str) -> bool {
    websocket::LIVENESS_WORDS.iter().any(|name| word.eq_ignore_ascii_case(name))
}

/// Rule 1: the state changes, each with the position of its request.
fn state_changes(context: &Context<'_>, ignored: &[String]) -> Vec<(Position, Candidate)> {
    let evidence = context.evidence;
    let mut changes: Vec<Change<'_>> = Vec::new();
    for exchange in &evidence.exchanges {
        if SAFE_METHODS.iter().any(|m| exchange.method.eq_ignore_ascii_case(m))
            || !exchange.succeeded()
            || ignored.iter().any(|pattern| urls::matches(pattern, &exchange.url))
            || matches!(exchange.resource_type.as_deref(), Some("Ping" | "CSPViolationReport"))
            || is_liveness_signal(&exchange.url)
        {
            continue;
        }
        // What the start page sends by itself is no step of the person's, nor part of their bursts; nor is
        // what any page sends by itself as it loads.
        let Some(at) = evidence.position(exchange.request_event).filter(|at| *at >= context.first_step) else {
            continue;
        };
        if context.page_sent_by_itself(exchange.request_event) {
            continue;
        }
        let fields = exchange
            .post_data
            .as_deref()
            .map(|body| form_fields(body, exchange.content_type.as_deref()))
            .unwrap_or_default();
        if is_lookup(context, exchange, &fields) {
            continue;
        }
        changes.push((at, exchange, fields));
    }
    changes.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));

    // Bursts: the requests of one endpoint with the same fields whose values only grow or shrink.
    let key = |exchange: &Exchange, fields: &[(String, String)]| {
        let mut names: Vec<&str> = fields.iter().map(|(name, _)| name.as_str()).collect();
        names.sort_unstable();
        (exchange.method.to_ascii_uppercase(), without_query(scheme_less(&exchange.url)).to_owned(), names.join("&"))
    };
    let mut bursts: Vec<Vec<usize>> = Vec::new();
    let mut open: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for (index, (_, exchange, fields)) in changes.iter().enumerate() {
        let key = key(exchange, fields);
        match open.get(&key) {
            Some(&burst) if typing_apart(&changes[*bursts[burst].last().unwrap()].2, fields) => {
                bursts[burst].push(index)
            }
            _ => {
                open.insert(key, bursts.len());
                bursts.push(vec![index]);
            }
        }
    }
    let mut kept = Vec::new();
    for burst in bursts {
        let members: Vec<&Change<'_>> = burst.iter().map(|&i| &changes[i]).collect();
        let varies = members.windows(2).any(|pair| pair[0].2 != pair[1].2);
        let type_ahead = members.len() >= 2
            && varies
            && members.iter().all(|(_, exchange, _)| {
                exchange.method.eq_ignore_ascii_case("POST")
                    && exchange.response_body_size.is_some_and(|size| size > 0)
                    && !exchange.sets_cookie
            });
        if type_ahead {
            continue;
        }
        let (at, exchange, fields) = members[members.len() - 1];
        let url_pattern = context.path_pattern(&exchange.url);
        if context.mentions_secret(&url_pattern) {
            continue;
        }
        let mut body_fields = BTreeMap::new();
        let mut credential_fields = BTreeMap::new();
        for (name, value) in fields {
            if body_fields.contains_key(name) || credential_fields.contains_key(name) {
                continue;
            }
            if let Some(placeholder) = context.credential_sent(value) {
                // A sign-in counts with the credential given, never another: compared, never written.
                credential_fields.insert(name.clone(), placeholder);
            } else if context.keeps_field(name, value) {
                body_fields.insert(name.clone(), value.clone());
            }
        }
        let reason = format!(
            "{} {url_pattern} succeeded ({}): the site's state changed",
            exchange.method,
            exchange.status.unwrap_or_default()
        );
        let method = exchange.method.to_ascii_uppercase();
        let predicate = Predicate::Request { method, url_pattern, body_fields, credential_fields };
        kept.push((*at, Candidate { role: CheckpointRole::StateChange, reason, predicate, proposed_by: None }));
    }
    kept
}

/// Whether two requests' fields (of the same names) differ only as a field does while a person types:
/// each value equal to the other's, or a prefix of it.
fn typing_apart(a: &[(String, String)], b: &[(String, String)]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|((name_a, value_a), (name_b, value_b))| {
            name_a == name_b && (value_a.starts_with(value_b.as_str()) || value_b.starts_with(value_a.as_str()))
        })
}

/// Whether a request only reads: a GraphQL query, or a lookup endpoint (see the module's rule 1).
fn is_lookup(context: &Context<'_>, exchange: &Exchange, fields: &[(String, String)]) -> bool {
    let field = |name: &str| fields.iter().find(|(field, _)| field == name).map(|(_, value)| value.as_str());
    if let Some(query) = field("query").map(str::trim_start)
        && (query.starts_with('{') || ["query", "mutation", "subscription"].iter().any(|kind| query.starts_with(kind)))
    {
        return !query.starts_with("mutation");
    }
    if field("query").is_none()
        && let Some(operation) =
            field("operationName").filter(|_| field("extensions.persistedQuery.sha256Hash").is_some())
    {
        let operation = operation.to_ascii_lowercase();
        return QUERY_NAME_PREFIXES.iter().any(|prefix| operation.starts_with(prefix));
    }
    let path = without_query(scheme_less(&exchange.url));
    let path = path.split_once('/').map_or("", |(_, path)| path);
    if words(path).any(is_lookup_word) {
        return true;
    }
    fields.iter().any(|(name, value)| {
        CALL_FIELDS.contains(&name.to_ascii_lowercase().as_str())
            && !context.is_typed(value)
            && value.len() <= 40
            && words(value).any(is_lookup_word)
    })
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_ascii_alphanumeric()).filter(|word| !word.is_empty())
}

/// Whether a word of a path or of a call's name says the request looks something up.
pub fn is_lookup_word(word: &str) -> bool {
    let word = word.to_ascii_lowercase();
    matches!(
        word.as_str(),
        "search"
            | "qsearch"
            | "quicksearch"
            | "livesearch"
            | "opensearch"
            | "suggest"
            | "suggestions"
            | "autosuggest"
            | "autocomplete"
            | "typeahead"
            | "lookup"
    )
}

/// Rule 2: pages reached by a form, or right after typing.
fn pages_reached(context: &Context<'_>) -> Vec<Candidate> {
    let mut candidates = Vec::new();
    for record in &context.evidence.events {
        if let EventKind::Navigation(navigation) = &record.event.kind
            && navigation.main_frame
            && record.event.frame_id.is_none()
            && navigation.cause == NavigationCause::FormSubmit
        {
            let pattern = context.page_pattern(&navigation.url);
            let reason = format!("a form submission led to {pattern}");
            candidates.push(Candidate {
                role: CheckpointRole::Page,
                reason,
                predicate: Predicate::Url { pattern },
                proposed_by: None,
            });
        }
    }
    let calls = &context.trajectory.tool_calls;
    for (index, call) in calls.iter().enumerate() {
        let typed_before = index > 0 && matches!(calls[index - 1].action, ToolAction::Input { .. });
        let Some(after) = call.url_after.as_deref() else { continue };
        if !typed_before || call.url_before.as_deref() == Some(after) {
            continue;
        }
        let pattern = context.page_pattern(after);
        let reason = format!("after typing, the person reached {pattern}");
        candidates.push(Candidate {
            role: CheckpointRole::Page,
            reason,
            predicate: Predicate::Url { pattern },
            proposed_by: None,
        });
    }
    candidates
}

/// Rule 3: what the final page shows that the start and the pages before the last state change did not.
fn final_state(context: &Context<'_>, last_change: Option<Position>) -> Vec<Candidate> {
    let evidence = context.evidence;
    let shown = match last_change {
        Some(change) => result_page(context, change),
        None => evidence.final_page(context.trajectory),
    };
    let Some(last) = shown else { return Vec::new() };
    let Some(last_at) = evidence.position(last.event_id) else { return Vec::new() };
    // With no state change, only the start.
    let before = match last_change {
        Some(change) if change < last_at => change,
        Some(_) => last_at,
        None => Position::START,
    };
    let baseline: Vec<&PageText> = evidence
        .pages
        .iter()
        .chain(&evidence.documents)
        .filter(|page| {
            page.event_id != last.event_id
                && evidence.position(page.event_id).is_some_and(|at| at < before || at < context.first_step)
        })
        .collect();
    // The start page itself, when the recorder caught it only after the person's first step.
    let baseline: Vec<&PageText> = if baseline.is_empty() {
        evidence.pages.first().filter(|page| page.event_id != last.event_id).into_iter().collect()
    } else {
        baseline
    };
    let seen = |text: &str| {
        let text = compact(text);
        baseline.iter().any(|page| page.compact.contains(&text))
    };
    let mut found: Vec<(u8, usize, &str)> = last
        .blocks
        .iter()
        .enumerate()
        .filter_map(|(index, block)| {
            let rank = match (block.region, block.heading) {
                (Region::Message, _) => 0,
                (Region::Main, true) => 1,
                (Region::Main, false) => 2,
                (Region::Body, true) => 3,
                (Region::Body, false) => 4,
                (Region::Frame | Region::Hidden, _) => return None,
            };
            Some((rank, index, block.text.as_str()))
        })
        .filter(|(_, _, text)| {
            TEXT_CHARS.contains(&text.chars().count())
                && !context.mentions_secret(text)
                && !is_volatile_run(text, &context.clocks)
                && !shows_a_time(text)
                && !seen(text)
        })
        .collect();
    found.sort_by_key(|(rank, index, _)| (*rank, *index));
    let mut chosen: Vec<&str> = Vec::new();
    for (_, _, text) in found {
        if chosen.iter().any(|other| other.contains(text) || text.contains(other)) {
            continue;
        }
        chosen.push(text);
        if chosen.len() >= MAX_FINAL_TEXTS || chosen.iter().any(|text| !is_weak(text)) {
            break;
        }
    }
    let url = scheme_less(&last.url);
    let before_it =
        if last_change.is_some() { "the start and the pages before the last state change" } else { "the start" };
    if chosen.is_empty() {
        let pattern = context.page_pattern(&last.url);
        if baseline.iter().any(|page| urls::matches(&pattern, &page.url)) {
            return Vec::new();
        }
        let reason = format!("the person ended on {url}, which {before_it} did not show");
        let predicate = Predicate::Url { pattern };
        return vec![Candidate { role: CheckpointRole::FinalState, reason, predicate, proposed_by: None }];
    }
    chosen
        .into_iter()
        .map(|text| Candidate {
            role: CheckpointRole::FinalState,
            reason: format!("the final page ({url}) shows {text:?}, which {before_it} did not"),
            predicate: Predicate::Text { text: text.to_owned() },
            proposed_by: None,
        })
        .collect()
}

/// One word, or fewer than [`STRONG_TEXT_CHARS`] characters.
fn is_weak(text: &str) -> bool {
    text.split_whitespace().count() < 2 || text.chars().count() < STRONG_TEXT_CHARS
}

/// Whether a text shows a time of day (`10:42`): the replay's clock shows another.
fn shows_a_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.windows(4).any(|w| w[0].is_ascii_digit() && w[1] == b':' && w[2].is_ascii_digit() && w[3].is_ascii_digit())
}

/// Places each candidate at the event where the recording first satisfies it and orders them so;
/// drops what does not hold, holds at the start, names a secret, or repeats another.
fn place(context: &Context<'_>, candidates: Vec<Candidate>) -> Vec<Checkpoint> {
    let evidence = context.evidence;
    let mut placed: Vec<(Position, u8, Vec<u64>, Candidate)> = Vec::new();
    for candidate in candidates {
        let predicate = &candidate.predicate;
        if context.predicate_names_secret(predicate) || placed.iter().any(|(.., other)| other.predicate == *predicate) {
            continue;
        }
        let ids = holds(predicate, evidence);
        let proposed = candidate.proposed_by.is_some();
        let first = match evidence.earliest(&ids) {
            Some(first) if proposed || first >= context.first_step => first,
            None if proposed => Position::END,
            _ => continue,
        };
        let mut event_ids: Vec<u64> = ids.contains(&first.id).then_some(first.id).into_iter().collect();
        if let Predicate::Request { .. } = predicate
            && let Some(response) = evidence
                .exchanges
                .iter()
                .find(|exchange| exchange.request_event == first.id)
                .and_then(|exchange| exchange.response_event)
        {
            event_ids.push(response);
        }
        let rank = match candidate.role {
            CheckpointRole::StateChange => 0,
            CheckpointRole::Page => 1,
            CheckpointRole::FinalState => 2,
        };
        placed.push((first, rank, event_ids, candidate));
    }
    placed.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal).then(a.1.cmp(&b.1)));
    placed
        .into_iter()
        .enumerate()
        .map(|(index, (_, _, event_ids, candidate))| Checkpoint {
            id: format!("cp{}", index + 1),
            reason: candidate.reason,
            predicate: candidate.predicate,
            step: event_ids.first().and_then(|&first| step_of(context, first)),
            event_ids,
            role: Some(candidate.role),
            proposed_by: candidate.proposed_by,
        })
        .collect()
}

/// Long runs of letters and digits with both in them are ids, hashes and tokens, which change per session.
fn looks_like_token(value: &str) -> bool {
    value.len() >= 16
        && value.chars().all(|c| c.is_ascii_alphanumeric() || "-_=+/.".contains(c))
        && value.chars().any(|c| c.is_ascii_digit())
        && value.chars().any(|c| c.is_ascii_alphabetic())
}

/// The trajectory call an event belongs to: the last call that started at or before it happened.
fn step_of(context: &Context<'_>, event_id: u64) -> Option<usize> {
    let at = context.evidence.position(event_id)?;
    context
        .trajectory
        .tool_calls
        .iter()
        .enumerate()
        .filter(|(_, call)| context.evidence.earliest(&call.event_ids).is_some_and(|first| first <= at))
        .map(|(index, _)| index)
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score;
    use crate::testing::{Recording, SHOP, SITE, T0};
    use serde_json::json;
    use trace_manifest::audit::AuditRunKind;
    use trace_manifest::task::TaskType;

    fn predicates(checkpoints: &[Checkpoint]) -> Vec<&Predicate> {
        checkpoints.iter().map(|checkpoint| &checkpoint.predicate).collect()
    }

    fn request(method: &str, path: &str, fields: &[(&str, &str)]) -> Predicate {
        Predicate::Request {
            method: method.into(),
            url_pattern: format!("app.test{path}"),
            body_fields: fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            credential_fields: BTreeMap::new(),
        }
    }

    fn text(text: &str) -> Predicate {
        Predicate::Text { text: text.into() }
    }

    /// The demonstration reaches its own checkpoints, all in order.
    fn assert_reached_in_order(checkpoints: &[Checkpoint], evidence: &Evidence) {
        let scores = score::checkpoints(checkpoints, evidence);
        assert_eq!(scores.reached_in_order, scores.total, "{scores:#?}");
    }

    /// Issue #29: a JSON cart POST carried the page's clock (`ts`), which a replay sends otherwise.
    #[test]
    fn a_clock_in_a_json_body_is_left_out_and_the_person_and_server_fields_kept() {
        let mut recording = Recording::default();
        recording.navigate(0.0, "/item/1", "typed");
        recording.request(10.0, "GET", "/api/item/1", None, Some(r#"{"id":"1","name":"Mug"}"#), false);
        recording.page(200.0, "/item/1", &format!("{SHOP}<main><h1>Mug</h1></main>"));
        recording.act(1000.0, "input", "/item/1", "qty", Some("2"));
        recording.act(1500.0, "click", "/item/1", "add", None);
        let body = format!(r#"{{"id":"1","qty":"2","ts":"{}","nonce":"k3j9x2m1qa7"}}"#, (T0 + 1500.0) as u64);
        recording.request(1510.0, "POST", "/api/cart", Some(&body), Some(r#"{"ok":true}"#), false);
        recording.page(
            2000.0,
            "/item/1",
            &format!("{SHOP}<main><h1>Mug</h1><p role=status>Added 2 mugs to your cart</p></main>"),
        );
        let (checkpoints, evidence) = recording.select();
        assert_eq!(
            predicates(&checkpoints),
            [&request("POST", "/api/cart", &[("id", "1"), ("qty", "2")]), &text("Added 2 mugs to your cart")]
        );
        assert_reached_in_order(&checkpoints, &evidence);
    }

    /// Issue #44: a server-driven page changes the server's state over its socket only.
    #[test]
    fn a_frame_the_persons_act_sent_over_a_socket_is_a_state_change() {
        let mut recording = Recording::default();
        recording.navigate(0.0, "/calc", "typed");
        recording.socket(50.0, "opened", "/ws?client=8f3a9b2c77");
        // The page's own, as it loads: a subscription.
        recording.socket(60.0, "sent", r#"{"subscribe":"totals"}"#);
        recording.page(100.0, "/calc", &format!("{SHOP}<main><h1>Calculator</h1><p>Total 0</p></main>"));
        // A slider nudged twice: a burst of one field, its last value kept.
        recording.act(1000.0, "input", "/calc", "amount", Some("4"));
        recording.socket(1010.0, "sent", r#"42["event",{"amount":"4"}]"#);
        recording.act(1200.0, "input", "/calc", "amount", Some("6"));
        recording.socket(1210.0, "sent", r#"42["event",{"amount":"6"}]"#);
        recording.socket(1250.0, "received", r#"42["update",{"amount":"6"}]"#);
        recording.act(2000.0, "click", "/calc", "add", None);
        recording.socket(2010.0, "sent", r#"{"add":"6"}"#);
        // A ping a moment later, the page's acknowledgement of the server's updates (NiceGUI's, counting
        // them), and a frame long after any act: none the person's change.
        recording.socket(2020.0, "sent", "2");
        recording.socket(2030.0, "sent", r#"42["ack",{"client_id":"c1d2e3f4a5","next_message_id":3}]"#);
        recording.socket(2040.0, "sent", r#"{"type":"ping","seq":"7"}"#);
        recording.socket(9000.0, "sent", r#"{"amount":"6","heartbeat":"1"}"#);
        recording.page(2500.0, "/calc", &format!("{SHOP}<main><h1>Calculator</h1><p>Total 6</p></main>"));
        let (checkpoints, evidence) = recording.select();
        let frame = |fields: &[(&str, &str)]| Predicate::Frame {
            url_pattern: "app.test/ws".into(),
            fields: fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        assert_eq!(
            predicates(&checkpoints),
            [&frame(&[("[0]", "event"), ("[1].amount", "6")]), &frame(&[("add", "6")]), &text("Total 6")]
        );
        assert_reached_in_order(&checkpoints, &evidence);
        assert!(checkpoints.iter().take(2).all(|checkpoint| checkpoint.role == Some(CheckpointRole::StateChange)));

        // What a person sends that only mentions such a word is theirs: a chat message saying "ping".
        let mut recording = Recording::default();
        recording.navigate(0.0, "/chat", "typed");
        recording.socket(50.0, "opened", "/ws");
        recording.page(100.0, "/chat", &format!("{SHOP}<main><h1>Chat</h1></main>"));
        recording.act(1000.0, "click", "/chat", "send", None);
        recording.socket(1010.0, "sent", r#"42["message",{"text":"ping"}]"#);
        let (checkpoints, _) = recording.select();
        assert_eq!(predicates(&checkpoints), [&frame(&[("[0]", "message"), ("[1].text", "ping")])]);

        // A socket whose path names a server the page drew at random and a session (SockJS's): the frame
        // names the endpoint only, which a re-run's socket, with other numbers, also reaches; a version
        // in the path stays.
        for (path, pattern) in
            [("/stores/892/k3j9x2m1/websocket", "app.test/stores/"), ("/api/v2/ws", "app.test/api/v2/ws")]
        {
            let mut recording = Recording::default();
            recording.navigate(0.0, "/shop", "typed");
            recording.socket(50.0, "opened", path);
            recording.page(100.0, "/shop", &format!("{SHOP}<main><h1>Shop</h1></main>"));
            recording.act(1000.0, "click", "/shop", "order", None);
            recording.socket(1010.0, "sent", r#"["{\"item\":\"three wicks\"}"]"#);
            let (checkpoints, _) = recording.select();
            let frame = Predicate::Frame {
                url_pattern: pattern.into(),
                fields: [("[0].item".into(), "three wicks".into())].into(),
            };
            assert_eq!(predicates(&checkpoints), [&frame], "{path}");
        }
    }

    /// Issue #43: an editor tells the server it is still being edited as it opens, right after the person's
    /// act that opened it, and then on a timer; the save is the task, the ping is not.
    #[test]
    fn a_ping_that_an_editor_sends_is_no_state_change() {
        let mut recording = Recording::default();
        recording.navigate(0.0, "/pages/add", "typed");
        recording.page(100.0, "/pages/add", &format!("{SHOP}<main><h1>New page</h1></main>"));
        recording.act(1000.0, "input", "/pages/add", "title", Some("Lamp care"));
        recording.act(1500.0, "click", "/pages/add", "save", None);
        recording.request(1510.0, "POST", "/pages/add", Some("title=Lamp+care"), Some(""), false);
        recording.request(1700.0, "POST", "/editing-sessions/ping/page/4/", Some("is_editing=1"), Some("{}"), false);
        recording.page(
            2000.0,
            "/pages/4/edit",
            &format!("{SHOP}<main><h1>Lamp care</h1><p role=status>Saved</p></main>"),
        );
        let (checkpoints, _) = recording.select();
        let predicates = predicates(&checkpoints);
        assert_eq!(predicates[0], &request("POST", "/pages/add", &[("title", "Lamp care")]));
        let pinged = predicates.iter().any(
            |predicate| matches!(predicate, Predicate::Request { url_pattern, .. } if url_pattern.contains("ping")),
        );
        assert!(!pinged, "{predicates:?}");
    }

    /// Issue #44: what the person typed into a rich-text editor (TinyMCE's body, in a frame of its own) is
    /// sent as markup in a field named otherwise; it is theirs all the same.
    #[test]
    fn text_typed_into_a_rich_text_editor_is_kept_as_the_markup_it_was_sent_as() {
        let mut recording = Recording::default();
        recording.navigate(0.0, "/notes/add", "typed");
        recording.page(100.0, "/notes/add", &format!("{SHOP}<main><h1>Add note</h1></main>"));
        recording.act(1000.0, "input", "/notes/add", "title", Some("Lamp log"));
        recording.act(2000.0, "input", "/notes/add", "tinymce", Some("The lamp was lit at dusk."));
        recording.act(3000.0, "click", "/notes/add", "save", None);
        let form = "title=Lamp+log&body=%3Cp%3EThe+lamp+was+lit+at+dusk.%3C%2Fp%3E&_save=Save";
        recording.request(3010.0, "POST", "/notes/add", Some(form), Some(""), false);
        recording.page(3500.0, "/notes", &format!("{SHOP}<main><h1>Notes</h1><p role=status>Note added</p></main>"));
        let (checkpoints, evidence) = recording.select();
        let body = [("body", "<p>The lamp was lit at dusk.</p>"), ("title", "Lamp log")];
        assert_eq!(predicates(&checkpoints)[0], &request("POST", "/notes/add", &body));
        assert_reached_in_order(&checkpoints, &evidence);
    }

    /// Issue #44: a canvas editor sends each node's position as the person dropped it, and saves its own
    /// settings as it opens; neither is the task.
    #[test]
    fn positions_on_a_canvas_and_what_a_page_saves_as_it_loads_are_no_part_of_the_task() {
        let mut recording = Recording::default();
        recording.navigate(0.0, "/", "typed");
        recording.page(100.0, "/", &format!("{SHOP}<main><h1>Flows</h1></main>"));
        recording.act(1000.0, "click", "/", "palette", None);
        // The person opens the editor again: it saves its settings by itself as it loads.
        recording.navigate(2000.0, "/editor", "typed");
        recording.request(2100.0, "POST", "/settings/user", Some(r#"{"view":{"grid":"true"}}"#), Some(""), false);
        recording.page(2200.0, "/editor", &format!("{SHOP}<main><h1>Editor</h1></main>"));
        // A response that happens to hold the numbers (a style sheet, a script) gives no position.
        recording.request(
            2150.0,
            "GET",
            "/editor.css",
            None,
            Some(".node { width: 120px; left: 250px; top: 150px }"),
            false,
        );
        recording.act(3000.0, "input", "/editor", "name", Some("Ping every minute"));
        recording.act(3500.0, "click", "/editor", "deploy", None);
        let flows = r#"{"flows":[{"type":"inject","name":"Ping every minute","x":"250","y":"150","w":"120"}]}"#;
        recording.request(3510.0, "POST", "/flows", Some(flows), Some(r#"{"rev":"1"}"#), false);
        recording.page(4000.0, "/editor", &format!("{SHOP}<main><h1>Editor</h1><p role=status>Deployed</p></main>"));
        let (checkpoints, evidence) = recording.select();
        assert_eq!(
            predicates(&checkpoints),
            [&request("POST", "/flows", &[("flows[0].name", "Ping every minute")]), &text("Deployed")]
        );
        assert_reached_in_order(&checkpoints, &evidence);

        // A write the person's act sent right after a page loaded is theirs, and a position they typed stays.
        let mut recording = Recording::default();
        recording.navigate(0.0, "/editor", "typed");
        recording.page(100.0, "/editor", &format!("{SHOP}<main><h1>Editor</h1></main>"));
        recording.act(1000.0, "input", "/editor", "x", Some("250"));
        recording.act(1500.0, "click", "/editor", "save", None);
        recording.request(1510.0, "POST", "/settings/user", Some(r#"{"x":"250"}"#), Some(""), false);
        recording.page(2000.0, "/editor", &format!("{SHOP}<main><h1>Editor</h1><p role=status>Saved</p></main>"));
        let (checkpoints, _) = recording.select();
        assert_eq!(predicates(&checkpoints)[0], &request("POST", "/settings/user", &[("x", "250")]));
    }

    /// A state change whose result arrives late (an answer over a socket, a kernel's output): the capture
    /// after the click was taken before it showed, the capture at stop after. The person's last act made
    /// the change, so the page as they left it is its result.
    #[test]
    fn a_result_shown_after_the_capture_of_the_last_act_is_read_from_the_page_as_the_person_left_it() {
        let mut recording = Recording::default();
        recording.navigate(0.0, "/shop", "typed");
        recording.page(200.0, "/shop", &format!("{SHOP}<main><h1>Order a lantern</h1></main>"));
        recording.act(1000.0, "click", "/shop", "order", None);
        recording.request(1010.0, "POST", "/api/order", Some("item=lantern"), Some(r#"{"queued":true}"#), false);
        recording.page(1600.0, "/shop", &format!("{SHOP}<main><h1>Order a lantern</h1></main>"));
        let confirmed = "Your lantern is on its way";
        recording.page(4000.0, "/shop", &format!("{SHOP}<main><h1>Order a lantern</h1><p>{confirmed}</p></main>"));
        let (checkpoints, evidence) = recording.select();
        assert_eq!(predicates(&checkpoints), [&request("POST", "/api/order", &[]), &text(confirmed)]);
        assert_reached_in_order(&checkpoints, &evidence);
    }

    /// Issue #47, part 3: the sign-in's checkpoint compared only the user name, so a wrong password
    /// signed in. Its password field is now named by its placeholder and compared with the credential given.
    #[test]
    fn a_sign_in_counts_only_with_the_credential_given_which_no_checkpoint_writes() {
        const PASSWORD: &str = "Blue-Mug-42";
        let mut recording = Recording::default();
        recording.navigate(0.0, "/login", "typed");
        recording.page(200.0, "/login", &format!("{SHOP}<main><h1>Sign in</h1></main>"));
        recording.act(1000.0, "input", "/login", "username", Some("alice"));
        let target = json!({"selector": "[name=password]", "xpath": "", "tag": "input", "name": "password",
                            "input_type": "password"});
        recording.push(
            1500.0,
            json!({"type": "action", "action": "input", "target": target, "url": format!("{SITE}/login"),
                   "value": PASSWORD, "credential": true}),
        );
        recording.act(2000.0, "click", "/login", "submit", None);
        let body = format!("username=alice&password={PASSWORD}");
        recording.request(2010.0, "POST", "/login", Some(&body), None, true);
        recording.navigate(2100.0, "/account", "form_submit");
        recording.page(2300.0, "/account", &format!("{SHOP}<main><h1>Welcome back, alice</h1></main>"));
        let (evidence, _) = recording.evidence();
        let derived = crate::trajectory::derive("t".parse().unwrap(), &evidence.events, None);
        let credentials = derived.credentials;
        assert_eq!(credentials.len(), 1, "{credentials:?}");
        let checkpoints = select(&evidence, &derived.trajectory, &credentials, &[]);

        let sign_in = checkpoints
            .iter()
            .find(|checkpoint| matches!(&checkpoint.predicate, Predicate::Request { url_pattern, .. } if url_pattern == "app.test/login"))
            .unwrap_or_else(|| panic!("no sign-in checkpoint in {checkpoints:#?}"));
        let Predicate::Request { body_fields, credential_fields, .. } = &sign_in.predicate else { unreachable!() };
        assert_eq!(body_fields, &BTreeMap::from([("username".to_owned(), "alice".to_owned())]));
        assert_eq!(credential_fields, &BTreeMap::from([("password".to_owned(), credentials[0].placeholder())]));
        assert!(!serde_json::to_string(&checkpoints).unwrap().contains(PASSWORD));

        // The recording, read for itself, reaches it; judged with the credential given, so does the
        // demonstration; with another password, or with no credential given at all, nothing does.
        assert!(!holds(&sign_in.predicate, &evidence).is_empty());
        let judged = |value: &str| {
            let given = Credential { value: value.to_owned(), ..credentials[0].clone() };
            holds(&sign_in.predicate, &evidence.clone().judged_with_credentials(&[given]))
        };
        assert!(!judged(PASSWORD).is_empty());
        assert!(judged("Blue-Mug-43").is_empty());
        assert!(holds(&sign_in.predicate, &evidence.clone().judged_with_credentials(&[])).is_empty());
        assert_reached_in_order(&checkpoints, &evidence.judged_with_credentials(&credentials));

        // The audit types that step's credential wrong (and the user name otherwise, as any typed value).
        let calls = &derived.trajectory.tool_calls;
        let typed = |name: &str| {
            calls.iter().position(|call| call.target.as_ref().and_then(|t| t.name.as_deref()) == Some(name)).unwrap()
        };
        let perturbed = crate::audit::perturbations(TaskType::Action, calls, &checkpoints);
        assert!(perturbed.contains(&AuditRunKind::CredentialAltered { step: typed("password") }), "{perturbed:?}");
        assert!(perturbed.contains(&AuditRunKind::ValueAltered { step: typed("username") }), "{perturbed:?}");
        assert!(!perturbed.contains(&AuditRunKind::ValueAltered { step: typed("password") }), "{perturbed:?}");
    }

    /// Issue #29: a type-ahead search POST, one per keystroke, was taken for a state change.
    #[test]
    fn a_type_ahead_burst_is_a_lookup_and_an_autosave_burst_counts_once_with_its_last_value() {
        let mut recording = Recording::default();
        recording.navigate(0.0, "/wiki", "typed");
        recording.page(100.0, "/wiki", "<main><h1>Wiki</h1></main>");
        recording.act(1000.0, "input", "/wiki", "q", Some("syn"));
        for (at, prefix) in [(1010.0, "s"), (1110.0, "sy"), (1210.0, "syn")] {
            let answer = format!("<ul><li>{prefix}tax</li></ul>");
            recording.request(
                at,
                "POST",
                "/lib/exe/ajax.php",
                Some(&format!("call=complete&q={prefix}")),
                Some(&answer),
                false,
            );
        }
        // The same endpoint named for what it does: a lookup however many requests it takes.
        recording.request(1300.0, "POST", "/lib/exe/ajax.php", Some("call=qsearch&q=syntax"), Some("<ul></ul>"), false);
        recording.act(2000.0, "input", "/wiki", "text", Some("Hello"));
        for (at, prefix) in [(2010.0, "H"), (2110.0, "Hel"), (2210.0, "Hello")] {
            recording.request(at, "PUT", "/drafts/7", Some(&format!("text={prefix}")), None, false);
        }
        recording.page(3000.0, "/wiki", "<main><h1>Wiki</h1><p class=\"alert alert-info\">Draft saved</p></main>");
        let (checkpoints, evidence) = recording.select();
        assert_eq!(
            predicates(&checkpoints),
            [&request("PUT", "/drafts/7", &[("text", "Hello")]), &text("Draft saved")]
        );
        assert_reached_in_order(&checkpoints, &evidence);
    }

    /// Issue #29: the shop's name in every header, and "Skip to main content", were final states an agent
    /// doing nothing reaches.
    #[test]
    fn the_final_state_is_main_content_the_start_never_showed_not_the_sites_frame() {
        let mut recording = Recording::default();
        recording.navigate(0.0, "/", "typed");
        recording.page(
            100.0,
            "/",
            &format!(
                "<a class=skip>Skip to main content</a>{SHOP}<main><h1>Mugs</h1></main><footer>© Mug Shop</footer>"
            ),
        );
        recording.act(1000.0, "click", "/", "docs", None);
        recording.navigate(1100.0, "/docs/install", "link");
        recording.page(
            1300.0,
            "/docs/install",
            &format!(
                "<a class=skip>Skip to main content</a>{SHOP}<aside>Files</aside>\
             <main><h1>Install</h1><p>Run the installer twice.</p></main><footer>© Mug Shop</footer>"
            ),
        );
        let (checkpoints, evidence) = recording.select();
        // A heading of one word is weak: the paragraph comes with it.
        assert_eq!(predicates(&checkpoints), [&text("Install"), &text("Run the installer twice.")]);
        assert!(checkpoints.iter().all(|c| c.role == Some(CheckpointRole::FinalState)));
        assert_reached_in_order(&checkpoints, &evidence);
    }

    /// Issue #29: a demonstration that ended logged out had "Log out", first shown on the logged-in pages,
    /// as its final state.
    #[test]
    fn a_logout_back_to_a_page_seen_before_has_no_final_text_but_its_message() {
        let login = "<main><h1>Log in</h1><form><label>User</label></form></main>";
        let dashboard = "<header><a>Log out</a></header><main><h1>Dashboard</h1><p>3 open tickets</p></main>";
        let mut recording = Recording::default();
        recording.navigate(0.0, "/login", "typed");
        recording.page(100.0, "/login", login);
        recording.act(1000.0, "input", "/login", "user", Some("ada"));
        recording.act(1500.0, "click", "/login", "login", None);
        recording.request(1510.0, "POST", "/login", Some("user=ada"), Some(""), true);
        recording.navigate(1600.0, "/dashboard", "form_submit");
        recording.page(1700.0, "/dashboard", dashboard);
        recording.act(3000.0, "click", "/dashboard", "logout", None);
        recording.request(3010.0, "POST", "/logout", Some(""), None, true);
        recording.navigate(3100.0, "/login", "form_submit");
        recording.page(3200.0, "/login", login);
        let (checkpoints, evidence) = recording.select();
        assert_eq!(
            predicates(&checkpoints),
            [
                &request("POST", "/login", &[("user", "ada")]),
                &Predicate::Url { pattern: "app.test/dashboard".into() },
                &request("POST", "/logout", &[]),
            ],
            "the login page is where the person started: nothing of it, nor its URL, is a final state"
        );
        assert_reached_in_order(&checkpoints, &evidence);

        // Told so by the site, the logout has a final state.
        let mut told = Recording::default();
        told.navigate(0.0, "/login", "typed");
        told.page(100.0, "/login", login);
        told.act(1000.0, "input", "/login", "user", Some("ada"));
        told.request(1510.0, "POST", "/login", Some("user=ada"), Some(""), true);
        told.navigate(1600.0, "/dashboard", "form_submit");
        told.page(1700.0, "/dashboard", dashboard);
        told.act(3000.0, "click", "/dashboard", "logout", None);
        told.request(3010.0, "POST", "/logout", Some(""), None, true);
        told.navigate(3100.0, "/login", "form_submit");
        told.page(3200.0, "/login", &format!("<ul class=messagelist><li>You have been logged out.</li></ul>{login}"));
        let (checkpoints, _) = told.select();
        assert_eq!(checkpoints.last().map(|c| &c.predicate), Some(&text("You have been logged out.")));
    }

    /// Issue #29: the URL a POST led to was listed before the POST, so that "in order" stopped early on
    /// the very recording the checkpoints came from.
    #[test]
    fn a_request_comes_before_the_page_it_led_to_whatever_order_they_were_stored_in() {
        let mut recording = Recording::default();
        recording.navigate(0.0, "/admin/", "typed");
        recording.page(100.0, "/admin/", "<main><h1>Site administration</h1></main>");
        recording.act(1000.0, "input", "/admin/", "name", Some("Editors"));
        recording.act(1500.0, "click", "/admin/", "_save", None);
        // The navigation the POST led to is stored first: the recorder stores an exchange once it is whole.
        recording.navigate(1700.0, "/admin/auth/group/", "form_submit");
        recording.request(1510.0, "POST", "/admin/auth/group/add/", Some("name=Editors&_save=Save"), Some(""), false);
        recording.page(
            1800.0,
            "/admin/auth/group/",
            "<ul class=messagelist><li>The group “<a>Editors</a>” was added.</li></ul>",
        );
        let (checkpoints, evidence) = recording.select();
        assert_eq!(
            predicates(&checkpoints),
            [
                &request("POST", "/admin/auth/group/add/", &[("_save", "Save"), ("name", "Editors")]),
                &Predicate::Url { pattern: "app.test/admin/auth/group/".into() },
                &text("The group “Editors” was added."),
            ]
        );
        assert_reached_in_order(&checkpoints, &evidence);
    }

    #[test]
    fn a_graphql_query_only_reads_and_a_mutation_changes_state() {
        let mut recording = Recording::default();
        recording.navigate(0.0, "/", "typed");
        recording.page(100.0, "/", "<main><h1>Boards</h1></main>");
        recording.act(1000.0, "input", "/", "title", Some("Plan"));
        recording.request(
            1100.0,
            "POST",
            "/graphql",
            Some(r#"{"query":"query Boards { boards { id } }"}"#),
            Some("{}"),
            false,
        );
        let mutation =
            r#"{"query":"mutation Add($title: String) { add(title: $title) { id } }","variables":{"title":"Plan"}}"#;
        recording.request(1200.0, "POST", "/graphql", Some(mutation), Some(r#"{"data":{"add":{"id":"b1"}}}"#), false);
        recording.page(1300.0, "/", "<main><h1>Boards</h1><h2>Plan board</h2></main>");
        let (checkpoints, _) = recording.select();
        let Predicate::Request { body_fields, .. } = &checkpoints[0].predicate else { panic!("{checkpoints:#?}") };
        // The query's text came from no response the recording holds (the page's script): left out.
        assert_eq!(body_fields, &BTreeMap::from([("variables.title".to_owned(), "Plan".to_owned())]));
        assert_eq!(checkpoints.len(), 2, "{checkpoints:#?}");
    }

    #[test]
    fn an_id_the_page_made_is_cut_from_a_path_and_one_the_server_gave_is_kept() {
        let mut recording = Recording::default();
        recording.navigate(0.0, "/notes", "typed");
        recording.request(10.0, "GET", "/api/folders", None, Some(r#"[{"id":"f81d4fae7dec"}]"#), false);
        recording.page(100.0, "/notes", "<main><h1>Notes</h1></main>");
        recording.act(1000.0, "input", "/notes", "title", Some("Groceries"));
        let body = r#"{"title":"Groceries","folder":"f81d4fae7dec","client_ref":"a1b2c3d4e5f6a7b8"}"#;
        recording.request(1100.0, "PUT", "/api/notes/5b8e2c1d9f3a4e6b", Some(body), Some("{}"), false);
        recording.page(1300.0, "/notes", "<main><h1>Notes</h1><ul><li>Groceries</li></ul></main>");
        let (checkpoints, _) = recording.select();
        assert_eq!(
            checkpoints[0].predicate,
            request("PUT", "/api/notes/", &[("folder", "f81d4fae7dec"), ("title", "Groceries")])
        );
    }
}
