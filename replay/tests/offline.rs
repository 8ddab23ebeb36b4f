//! Issue #11: replay is offline by construction. A replayed page that opens a WebSocket and a WebRTC
//! connection (STUN) to loopback, while the browser goes about its own business (its start-up requests to
//! Google, preconnects), reaches nothing: a TCP sentinel where the WebSocket points, a UDP sentinel where
//! STUN points, and a listener on the discard port (where replay's proxy used to point) all receive nothing.
//! Both of the page's tries are still counted as live attempts, so that a run reports what it could not
//! answer from the recording.

use std::net::{TcpListener, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use trace_replay::archive::ReplayArchive;
use trace_replay::serve::{Options, Replay};

mod common;
use common::{har, har_entry, stored_body, write_bundle};

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
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (tcp_port, udp_port) = (tcp.local_addr().unwrap().port(), udp.local_addr().unwrap().port());
    let websocket = Sentinel::tcp(tcp);
    let stun = Sentinel::udp(udp);
    // The discard port needs root to listen on; as root (CI), it must stay silent too.
    let discard = TcpListener::bind("127.0.0.1:9").ok().map(Sentinel::tcp);
    if discard.is_none() {
        eprintln!("note: not root, so the discard port 9 is not watched");
    }

    let page = format!(
        r#"<!doctype html><title>Live</title><script>
  const socket = new WebSocket("ws://127.0.0.1:{tcp_port}/live");
  socket.onerror = () => (document.documentElement.dataset.socket = "failed");
  const peer = new RTCPeerConnection({{ iceServers: [{{ urls: "stun:127.0.0.1:{udp_port}" }}] }});
  peer.createDataChannel("live");
  peer.onicegatheringstatechange = () => (document.documentElement.dataset.ice = peer.iceGatheringState);
  peer.createOffer().then((offer) => peer.setLocalDescription(offer));
</script>"#
    );
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("bundle");
    let entries = vec![har_entry(PAGE, stored_body(&dir, page.as_bytes(), "text/html"))];
    write_bundle(&dir, "offline", &har(entries), &json!({ "snapshots": [] }));

    let replay = Replay::launch(ReplayArchive::open(&dir).unwrap(), &Options::default()).await.unwrap();
    let tab = replay.open(PAGE).await.unwrap();
    // Long enough for the socket to fail, for ICE gathering to send its STUN requests, and for the
    // browser's start-up requests.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let reached = || websocket.hits() + stun.hits() + discard.as_ref().map_or(0, Sentinel::hits);
    let (mut socket, mut ice) = (None::<String>, None::<String>);
    while reached() == 0 && std::time::Instant::now() < deadline {
        socket = tab.evaluate("document.documentElement.dataset.socket").await.unwrap().into_value().ok();
        ice = tab.evaluate("document.documentElement.dataset.ice").await.unwrap().into_value().ok();
        if socket.as_deref() == Some("failed") && ice.as_deref() == Some("complete") {
            // And a moment more for the browser's own start-up requests.
            tokio::time::sleep(Duration::from_secs(3)).await;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stats = replay.close().await.unwrap();

    assert_eq!(websocket.hits(), 0, "the page's WebSocket reached its server");
    assert_eq!(stun.hits(), 0, "WebRTC's STUN requests reached their server");
    if let Some(discard) = discard {
        assert_eq!(discard.hits(), 0, "connections reached the discard port");
    }
    assert_eq!(stats.live_attempts, 2, "the WebSocket and the WebRTC connection are live attempts: {stats}");
    assert_eq!(
        (socket.as_deref(), ice.as_deref()),
        (Some("failed"), Some("complete")),
        "the page never finished trying"
    );
}
