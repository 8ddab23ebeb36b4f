//! The responder over a real bundle on disk: ids the page made itself are followed (requests read with the
//! recorded value, responses given with the page's), ids the server handed out are not, a recorded
//! event stream plays once, and a miss leaves the recording only for an origin it never reached.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::common::{har, har_entry, stored_body, write_bundle};

use trace_replay::archive::ReplayArchive;
use trace_replay::matcher::{MatchKind, Request};
use trace_replay::responder::{Decision, Responder};

const RECORDED_ID: &str = "b8iwa6gauhwq9jbzr3o3vk";
const PAGE_ID: &str = "6sr4zi91gexjhn612pfh7s";

fn post(url: &str, body: &str, content: Value) -> Value {
    let mut entry = har_entry(url, content);
    entry["request"]["method"] = json!("POST");
    entry["request"]["postData"] = json!({ "mimeType": "application/json", "text": body });
    entry
}

/// A page, a join posting the session id, and the session's event stream echoing it. `page_html` is what
/// the page's document says (a server that hands the id out puts it there).
fn bundle(page_html: &str) -> (tempfile::TempDir, Responder) {
    let dir = tempfile::tempdir().unwrap();
    let page = stored_body(dir.path(), page_html.as_bytes(), "text/html");
    let joined = stored_body(dir.path(), br#"{"queued":true}"#, "application/json");
    let events = format!("data: {{\"session\":\"{RECORDED_ID}\",\"text\":\"Yes\"}}\n\n");
    let stream = stored_body(dir.path(), events.as_bytes(), "text/event-stream");
    let entries = vec![
        har_entry("http://shop.test/ask", page),
        post("http://shop.test/ask/join", &format!(r#"{{"session":"{RECORDED_ID}","question":"mug?"}}"#), joined),
        har_entry(&format!("http://shop.test/ask/stream?session={RECORDED_ID}"), stream),
    ];
    write_bundle(dir.path(), "ask", &har(entries), &json!({ "snapshots": [] }));
    let archive = Arc::new(ReplayArchive::open(dir.path()).unwrap());
    let responder = Responder::new(archive, 1_763_805_600_000.0);
    (dir, responder)
}

fn get(url: &str) -> Request<'_> {
    Request { method: "GET", url, ..Request::default() }
}

fn post_json<'a>(url: &'a str, body: &'a str) -> Request<'a> {
    Request {
        method: "POST",
        url,
        body: Some(body.as_bytes()),
        content_type: Some("application/json"),
        ..Request::default()
    }
}

#[test]
fn an_id_the_page_made_is_followed_into_later_requests_and_responses() {
    let (_dir, responder) = bundle("<button>Ask</button>");
    let join = format!(r#"{{"session":"{PAGE_ID}","question":"mug?"}}"#);
    let asked = post_json("http://shop.test/ask/join", &join);
    assert_eq!(responder.decide(&asked), Decision::Answer { index: 1, kind: MatchKind::Exact });
    let stream_url = format!("http://shop.test/ask/stream?session={PAGE_ID}");
    assert_eq!(responder.decide(&get(&stream_url)), Decision::Answer { index: 2, kind: MatchKind::Exact });
    let body = responder.response(2).unwrap().body;
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains(PAGE_ID) && !body.contains(RECORDED_ID), "{body}");
    // An EventSource reconnecting once the stream ended is told to stop, not played the events again.
    assert_eq!(responder.decide(&get(&stream_url)), Decision::StreamOver { index: 2 });
}

#[test]
fn an_id_the_server_handed_out_is_not_the_pages_to_replace() {
    let (_dir, responder) = bundle(&format!("<input type=hidden name=session value={RECORDED_ID}>"));
    let join = format!(r#"{{"session":"{PAGE_ID}","question":"mug?"}}"#);
    let asked = post_json("http://shop.test/ask/join", &join);
    assert_eq!(responder.decide(&asked), Decision::Miss);
}

#[test]
fn a_miss_leaves_the_recording_only_for_an_origin_it_never_reached() {
    let (_dir, responder) = bundle("<button>Ask</button>");
    for (url, reached) in [
        ("http://shop.test/never/recorded", true),
        ("http://shop.test:80/ask", true),
        ("https://shop.test/ask", false),
        ("http://shop.test:8080/ask", false),
        ("http://cdn.shop.test/ask", false),
        ("http://127.0.0.1:9/", false),
        ("data:text/plain,hi", false),
        ("not a url", false),
    ] {
        assert_eq!(responder.recording_reached_origin_of(url), reached, "{url}");
    }
}
