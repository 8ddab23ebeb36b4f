//! Issue #11: replay is offline by construction. A replayed page that reaches for loopback every way it
//! can (`fetch`, an image, an iframe, a preconnect, a WebSocket, and WebRTC connections: with a STUN
//! server, under Chromium's old name `webkitRTCPeerConnection`, given one later by `setConfiguration`, and
//! with none but a remote candidate), while the browser goes about its own business (its start-up requests
//! to Google), reaches nothing: a TCP sentinel where the HTTP requests point, one where the WebSocket
//! points, a UDP sentinel where STUN and the candidate point, and a listener on the discard port (where
//! replay's proxy used to point) all receive nothing. Every one of the page's tries is still counted as a
//! live attempt, so that a run reports what it could not answer from the recording; a request the
//! recording cannot answer on the site it recorded is a miss, not an attempt to leave. (A preconnect sends
//! no request, so there is nothing to count, but its connection must fail too.)

use std::net::{TcpListener, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use trace_replay::archive::ReplayArchive;
use trace_replay::serve::{Options, Replay};

use crate::common::{har, har_entry, stored_body, write_bundle};

const PAGE: &str = "http://shop.test/live";

/// Counts the connections (TCP) or datagrams (UDP) that reach it, until the test ends.
struct Sentinel {
    hits: Arc<AtomicUsize>,
}

impl Sentinel {
    fn tcp(listener: TcpListener) -> Sentinel {
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stream.is_ok() {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        Sentinel { hits }
    }

    fn udp(socket: UdpSocket) -> Sentinel {
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 2048];
            while socket.recv(&mut buffer).is_ok() {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        });
        Sentinel { hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_page_and_its_browser_reach_no_socket() {
    let http = TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let http_port = http.local_addr().unwrap().port();
    let (tcp_port, udp_port) = (tcp.local_addr().unwrap().port(), udp.local_addr().unwrap().port());
    let requests = Sentinel::tcp(http);
    let websocket = Sentinel::tcp(tcp);
    let stun = Sentinel::udp(udp);
    // The discard port needs root to listen on; as root (CI), it must stay silent too.
    let discard = TcpListener::bind("127.0.0.1:9").ok().map(Sentinel::tcp);
    if discard.is_none() {
        eprintln!("note: not root, so the discard port 9 is not watched");
    }

    let elsewhere = format!("http://127.0.0.1:{http_port}");
    let page = format!(
        r#"<!doctype html><title>Live</title>
<link rel="preconnect" href="{elsewhere}">
<img src="{elsewhere}/pixel.png" onerror="document.documentElement.dataset.image = 'failed'">
<iframe src="{elsewhere}/frame" onload="document.documentElement.dataset.frame = 'loaded'"></iframe>
<script>
  const mark = (name, value) => (document.documentElement.dataset[name] = value);
  fetch("{elsewhere}/api").catch(() => mark("fetched", "failed"));
  fetch("/unrecorded").catch(() => mark("unrecorded", "failed"));
  const socket = new WebSocket("ws://127.0.0.1:{tcp_port}/live");
  socket.onerror = () => mark("socket", "failed");
  const stun = {{ iceServers: [{{ urls: "stun:127.0.0.1:{udp_port}" }}] }};
  const gather = (peer, name) => {{
    peer.createDataChannel("live");
    peer.onicegatheringstatechange = () => mark(name, peer.iceGatheringState);
    return peer.createOffer().then((offer) => peer.setLocalDescription(offer).then(() => offer));
  }};
  gather(new RTCPeerConnection(stun), "ice");
  gather(new webkitRTCPeerConnection(stun), "webkit");
  const configured = new RTCPeerConnection();
  configured.setConfiguration(stun);
  gather(configured, "configured");
  // No ICE server, but told of a remote candidate, which it then checks by sending it STUN requests.
  const lone = new RTCPeerConnection();
  const answerer = new RTCPeerConnection();
  gather(lone, "lone")
    .then((offer) => answerer.setRemoteDescription(offer))
    .then(() => answerer.createAnswer())
    .then((answer) => lone.setRemoteDescription(answer))
    .then(() => lone.addIceCandidate({{ candidate: "candidate:1 1 udp 2122260223 127.0.0.1 {udp_port} typ host", sdpMid: "0" }}))
    .then(() => mark("candidate", "added"), (error) => mark("candidate", String(error)));
</script>"#
    );
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("bundle");
    let entries = vec![har_entry(PAGE, stored_body(&dir, page.as_bytes(), "text/html"))];
    write_bundle(&dir, "offline", &har(entries), &json!({ "snapshots": [] }));

    let replay = Replay::launch(ReplayArchive::open(&dir).unwrap(), &Options::default()).await.unwrap();
    let tab = replay.open(PAGE).await.unwrap();
    // Long enough for every try to fail, for ICE gathering to send its STUN requests and the candidate's
    // checks, and for the browser's start-up requests.
    let expected = [
        ("socket", "failed"),
        ("fetched", "failed"),
        ("unrecorded", "failed"),
        ("image", "failed"),
        ("frame", "loaded"),
        ("ice", "complete"),
        ("webkit", "complete"),
        ("configured", "complete"),
        ("candidate", "added"),
    ];
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let reached = || requests.hits() + websocket.hits() + stun.hits() + discard.as_ref().map_or(0, Sentinel::hits);
    let mut marks = Vec::new();
    while reached() == 0 && std::time::Instant::now() < deadline {
        let dataset = tab.evaluate("JSON.stringify(document.documentElement.dataset)").await.unwrap();
        let dataset: serde_json::Value = serde_json::from_str(&dataset.into_value::<String>().unwrap()).unwrap();
        marks = expected.iter().map(|(name, _)| dataset[name].as_str().map(str::to_owned)).collect();
        if expected.iter().zip(&marks).all(|((_, want), got)| got.as_deref() == Some(*want)) {
            // And a moment more for the candidate's checks and the browser's own start-up requests.
            tokio::time::sleep(Duration::from_secs(3)).await;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stats = replay.close().await.unwrap();

    assert_eq!(requests.hits(), 0, "the page's requests or its preconnect reached their server");
    assert_eq!(websocket.hits(), 0, "the page's WebSocket reached its server");
    assert_eq!(stun.hits(), 0, "WebRTC's STUN requests reached their server");
    if let Some(discard) = discard {
        assert_eq!(discard.hits(), 0, "connections reached the discard port");
    }
    let wanted: Vec<Option<String>> = expected.iter().map(|(_, want)| Some((*want).to_owned())).collect();
    assert_eq!(marks, wanted, "the page never finished trying: {expected:?}");
    // The fetch, the image and the iframe; the WebSocket; the four WebRTC connections.
    assert_eq!(stats.live_attempts, 3 + 1 + 4, "every try to leave is a live attempt: {stats}");
    // Each is a miss too. The request to the recorded site (and its favicon, which Chromium asks for) is a
    // miss only: a gap in what the recording holds, not an attempt to leave it.
    let foreign: Vec<&String> = stats.misses.keys().filter(|miss| miss.contains(&elsewhere)).collect();
    let tries = ["api", "frame", "pixel.png"].map(|path| format!("GET {elsewhere}/{path}"));
    assert_eq!(foreign, tries.iter().collect::<Vec<_>>(), "{stats}");
    let unrecorded = format!("GET {}", PAGE.replace("/live", "/unrecorded"));
    assert!(stats.misses.contains_key(&unrecorded), "{stats}");
}
