//! The analytics endpoint. `static/tracker.js` sends a beacon (a POST) to `/collect?e=pageview&p=PATH` from
//! every page of the shop, and, as a page goes away (`pagehide`), a beacon to `/collect?e=leave&p=PATH` and
//! a keep-alive fetch to `/collect?e=leave-keepalive&p=PATH`: requests sent during unload. It is kept apart
//! from the shop because it is the traffic that recordings must learn to ignore. Nothing is stored.

use axum::http::StatusCode;

/// `/collect`, any method: 204, as analytics endpoints answer.
pub(super) async fn collect() -> StatusCode {
    StatusCode::NO_CONTENT
}
