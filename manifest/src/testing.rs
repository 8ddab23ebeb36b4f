//! Recorded events built by hand, for the tests of every crate that reads a recording (the host's, the
//! derivations'): the one builder of a request, a response, an element and an action, so that a test names
//! what matters to it and the format's other fields are written once. Behind the `testing` feature, which
//! only tests enable.

use crate::event::{Action, ActionKind, ElementDescriptor, EventKind, Header, Request, Response};

/// The element `selector` (`#id`) names: a `tag` with that id.
pub fn element(selector: &str, tag: &str) -> ElementDescriptor {
    let id = selector.trim_start_matches('#');
    ElementDescriptor {
        selector: selector.into(),
        xpath: format!("//{tag}[@id='{id}']"),
        tag: tag.into(),
        id: Some(id.into()),
        ..ElementDescriptor::default()
    }
}

/// An action of `kind` on `target` at `url`, with no value, key or position.
pub fn action(kind: ActionKind, url: &str, target: Option<ElementDescriptor>) -> Action {
    Action {
        action: kind,
        target,
        url: url.into(),
        value: None,
        key: None,
        modifiers: Vec::new(),
        x: None,
        y: None,
        delta_x: None,
        delta_y: None,
        to_x: None,
        to_y: None,
        drop_target: None,
        moves: None,
        pressed_ts: None,
        until_ts: None,
        credential: false,
        page_made: false,
    }
}

/// A request of a document, `headers` as name and value.
pub fn request(id: &str, method: &str, url: &str, headers: &[(&str, &str)], post_data: Option<&str>) -> EventKind {
    EventKind::Request(Request {
        request_id: id.into(),
        url: url.into(),
        method: method.into(),
        headers: headers.iter().map(|(name, value)| Header::new(*name, *value)).collect(),
        post_data: post_data.map(str::to_owned),
        resource_type: Some("Document".into()),
    })
}

/// A response over HTTP/1.1 from loopback, not from the cache, `headers` as name and value.
pub fn response(id: &str, url: &str, status: u16, mime_type: &str, headers: &[(&str, &str)]) -> EventKind {
    EventKind::Response(Response {
        request_id: id.into(),
        url: url.into(),
        status,
        status_text: "OK".into(),
        protocol: Some("http/1.1".into()),
        headers: headers.iter().map(|(name, value)| Header::new(*name, *value)).collect(),
        mime_type: mime_type.into(),
        remote_ip_address: Some("127.0.0.1".into()),
        from_cache: false,
        timing: None,
    })
}
