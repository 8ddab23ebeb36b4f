//! `/download?mb=N`: a large file, N MiB (1 by default, 1024 at most) of bytes that do not compress, sent
//! as a file server sends one, with its length and in pieces, for the benchmark of recording a download.

use std::convert::Infallible;
use std::sync::OnceLock;

use axum::body::{Body, Bytes};
use axum::extract::Query;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

const MIB: u64 = 1 << 20;

#[derive(Deserialize)]
pub(super) struct Size {
    mb: Option<u64>,
}

pub(super) async fn download(Query(size): Query<Size>) -> Response {
    let mebibytes = size.mb.unwrap_or(1).clamp(1, 1024);
    // One mebibyte of noise, sent over and over: making it anew for each piece would cost the site more CPU
    // than the browser spends receiving it.
    static NOISE: OnceLock<Bytes> = OnceLock::new();
    let noise = NOISE.get_or_init(|| {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let bytes: Vec<u8> = (0..MIB)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 32) as u8
            })
            .collect();
        Bytes::from(bytes)
    });
    let pieces = futures::stream::iter((0..mebibytes).map(|_| Ok::<_, Infallible>(noise.clone())));
    let headers = [
        (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
        (header::CONTENT_LENGTH, (mebibytes * MIB).to_string()),
    ];
    (headers, Body::from_stream(pieces)).into_response()
}
