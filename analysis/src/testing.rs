//! A recording made by hand, event by event, for the tests of the derivations that read one (checkpoints,
//! the audit): the one builder of such events, so that the format's shape is written once.

use serde_json::{Value, json};
use trace_manifest::event::EventRecord;
use trace_manifest::postprocess::Checkpoint;
use trace_manifest::trajectory::Trajectory;

use crate::evidence::{Evidence, ResponseText, page_text};
use crate::trajectory;

/// A site's frame: its name in a banner, and navigation.
pub const SHOP: &str = "<header><h1>Mug Shop</h1><nav><a>Cart</a></nav></header>";

/// 2026-11-27 08:00 UTC: the recording's clock.
pub const T0: f64 = 1_795_766_400_000.0;
pub const SITE: &str = "http://app.test";

/// A recording made by hand, event by event, in the order the host stored them; each event at `T0`
/// plus its own time in milliseconds.
#[derive(Default)]
pub struct Recording {
    events: Vec<EventRecord>,
    pages: Vec<(u64, String, String)>,
    responses: Vec<ResponseText>,
}

impl Recording {
    pub fn push(&mut self, at: f64, event: Value) -> u64 {
        let id = self.events.len() as u64;
        let mut event = event;
        event["id"] = json!(id);
        event["ts"] = json!(T0 + at);
        event["tab_id"] = json!(1);
        self.events.push(serde_json::from_value(event).unwrap());
        id
    }

    pub fn navigate(&mut self, at: f64, path: &str, cause: &str) {
        self.push(at, json!({"type": "navigation", "url": format!("{SITE}{path}"), "cause": cause}));
    }

    pub fn page(&mut self, at: f64, path: &str, html: &str) {
        let file = format!("dom/{}.html", self.events.len());
        let id = self.push(at, json!({"type": "dom_snapshot", "url": format!("{SITE}{path}"), "file": file}));
        self.pages.push((id, format!("{SITE}{path}"), html.to_owned()));
    }

    pub fn act(&mut self, at: f64, action: &str, path: &str, name: &str, value: Option<&str>) {
        let target = json!({"selector": format!("[name={name}]"), "xpath": "", "tag": "input", "name": name});
        self.push(
            at,
            json!({"type": "action", "action": action, "target": target, "url": format!("{SITE}{path}"), "value": value}),
        );
    }

    /// A request sent at `at`, answered 50 ms later; stored (request, response) at once, as the
    /// recorder stores an exchange once it is whole.
    pub fn request(
        &mut self,
        at: f64,
        method: &str,
        path: &str,
        body: Option<&str>,
        answer: Option<&str>,
        cookie: bool,
    ) {
        let request_id = format!("r{}", self.events.len());
        let mut headers = vec![
            json!({"name": "Content-Type", "value": if body.is_some_and(|b| b.starts_with('{')) { "application/json" } else { "application/x-www-form-urlencoded" }}),
        ];
        if method == "GET" {
            headers.clear();
        }
        self.push(
            at,
            json!({"type": "request", "request_id": request_id, "url": format!("{SITE}{path}"), "method": method,
                   "headers": headers, "post_data": body, "resource_type": "Fetch"}),
        );
        let answer_headers = if cookie { vec![json!({"name": "Set-Cookie", "value": "s=1"})] } else { vec![] };
        self.push(
            at + 50.0,
            json!({"type": "response", "request_id": request_id, "url": format!("{SITE}{path}"), "status": 200,
                   "headers": answer_headers, "mime_type": "application/json"}),
        );
        if let Some(answer) = answer {
            let sha = format!("{:064}", self.events.len());
            self.push(
                at + 60.0,
                json!({"type": "body", "request_id": request_id, "part": "response", "sha256": sha, "size": answer.len()}),
            );
            self.responses.push(ResponseText { at: T0 + at + 50.0, text: answer.to_owned() });
        }
    }

    /// The recording's evidence and trajectory.
    /// A socket event: `op` `opened` with the socket's `url` (a path of the site's, as `ws://`), or `sent`
    /// and `received` with a text frame's `data`.
    pub fn socket(&mut self, at: f64, op: &str, url_or_data: &str) {
        let mut event = json!({"type": "websocket", "request_id": "s1", "op": op});
        if op == "opened" {
            event["url"] = json!(format!("{}{url_or_data}", SITE.replace("http", "ws")));
        } else {
            event["opcode"] = json!(1);
            event["data"] = json!(url_or_data);
        }
        self.push(at, event);
    }

    pub fn evidence(self) -> (Evidence, Trajectory) {
        let mut events = self.events;
        events.sort_by_key(|record| record.id);
        let pages =
            self.pages.iter().map(|(id, url, html)| page_text(*id, url, &format!("dom/{id}.html"), html)).collect();
        let evidence = Evidence {
            exchanges: crate::exchange::exchanges(&events),
            events,
            pages,
            responses: self.responses,
            documents: Vec::new(),
            credentials: None,
        };
        let trajectory = trajectory::derive("t".parse().unwrap(), &evidence.events, None).trajectory;
        (evidence, trajectory)
    }

    /// The checkpoints the rules choose, and the evidence they were chosen from.
    pub fn select(self) -> (Vec<Checkpoint>, Evidence) {
        let (evidence, trajectory) = self.evidence();
        (crate::checkpoints::select(&evidence, &trajectory, &[], &[]), evidence)
    }
}
