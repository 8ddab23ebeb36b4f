//! The scripts replay runs in every page before the page's own: determinism (clock and random numbers,
//! `page/determinism.js`), the restoring of local and session storage (`page/storage.js`), and the
//! recorded WebSockets played back (`page/websocket.js`), the report of WebRTC connections
//! (`page/live.js`), what tells the human re-run that a page has done what its last act set off
//! (`page/settle.js`), and, on the proxy path, the report of what the page shows and sends
//! (`page/report.js`). This module fills in their constants; the scripts say why they are JavaScript.

use std::collections::BTreeMap;

use trace_analysis::websocket::{self, Transcript};
use trace_manifest::event::StorageSnapshot;

use crate::archive::ReplayArchive;

const DETERMINISM: &str = include_str!("../page/determinism.js");
const STORAGE: &str = include_str!("../page/storage.js");
const WEBSOCKET: &str = include_str!("../page/websocket.js");
const LIVE: &str = include_str!("../page/live.js");
const REPORT: &str = include_str!("../page/report.js");
/// See [`SETTLE_PROBE`].
pub const SETTLE: &str = include_str!("../page/settle.js");
/// The global through which the re-run asks a page whether it has settled (`page/settle.js`).
pub const SETTLE_PROBE: &str = "__trace_replay_settle__";

/// The scripts a replay runs before a page's own and before a worker's, whichever way it reaches the
/// browser (DevTools in `serve`, the documents' heads in `proxy`).
pub struct ReplayScripts {
    /// Determinism, the recorded storage, the recorded WebSockets.
    pub page: Vec<String>,
    /// Determinism and the recorded WebSockets (a worker may open one as a page does); storage is a page's
    /// only.
    pub worker: Vec<String>,
}

/// The scripts of a replay of `archive`; `deterministic` starts the clock at the recording's time at
/// `replay_started_ms` (the machine's clock) and seeds random numbers.
pub fn for_archive(archive: &ReplayArchive, deterministic: bool, replay_started_ms: f64) -> ReplayScripts {
    let mut scripts = ReplayScripts { page: Vec::new(), worker: Vec::new() };
    if deterministic {
        let script = determinism(archive.started_at_ms, archive.seed, replay_started_ms);
        scripts.worker.push(script.clone());
        scripts.page.push(script);
    }
    if let Some(script) = archive.start_storage.as_ref().and_then(storage) {
        scripts.page.push(script);
    }
    if let Some(script) = websockets(&archive.websockets) {
        scripts.worker.push(script.clone());
        scripts.page.push(script);
    }
    scripts
}

/// The DevTools binding through which pages report the recorded sockets they open and the text frames they
/// send on them, for a session's recording (`page/websocket.js`).
pub const SOCKET_BINDING: &str = "__trace_replay_socket__";

/// Where the proxy path's pages post what they show and send (`page/report.js`): a path of the page's own
/// origin, which the proxy answers itself and never looks up in the recording.
pub const REPORT_PATH: &str = "/__trace_replay__/report";

/// The global a harness calls on the proxy path before it scores (`page/report.js`): it reports the page as
/// it is now and returns a promise that resolves once the proxy has the report.
pub const REPORT_NOW: &str = "__trace_replay_report_now__";

/// The proxy path's reporter (`page/report.js`): the page's document when it has loaded and whenever it
/// settles after a change, and the recorded sockets' reports (through [`SOCKET_BINDING`]), posted to
/// [`REPORT_PATH`].
pub fn proxy_report() -> String {
    REPORT
        .replace("__TRACE_REPORT_PATH__", &serde_json::to_string(REPORT_PATH).expect("a string"))
        .replace("__TRACE_REPORT_NOW__", &serde_json::to_string(REPORT_NOW).expect("a string"))
        .replace("__TRACE_SOCKET_BINDING__", &serde_json::to_string(SOCKET_BINDING).expect("a string"))
}

/// The DevTools binding (`Runtime.addBinding`) through which pages report their WebRTC connections.
pub const LIVE_BINDING: &str = "__trace_replay_live__";

/// Reports through [`LIVE_BINDING`] each WebRTC connection the page gives somewhere to reach, once: its
/// ICE servers' URLs, or the remote candidates it was given, as the payload.
pub fn live_connections() -> String {
    LIVE.replace("__TRACE_LIVE_BINDING__", LIVE_BINDING)
}

/// The clock reads `start_ms` (milliseconds since the Unix epoch) at `replay_started_ms` (the machine's
/// clock when the replay began) and runs at real speed from there; random numbers follow `seed`.
pub fn determinism(start_ms: f64, seed: u64, replay_started_ms: f64) -> String {
    DETERMINISM
        .replace("__TRACE_START_MS__", &format!("{}", start_ms.round()))
        .replace("__TRACE_REPLAY_STARTED_MS__", &format!("{}", replay_started_ms.round()))
        // The generator keeps 32 bits of state: fold the seed's two halves together.
        .replace("__TRACE_SEED__", &((seed ^ (seed >> 32)) as u32).to_string())
}

/// Restores the snapshot's local and session storage; `None` when it holds none.
pub fn storage(snapshot: &StorageSnapshot) -> Option<String> {
    if snapshot.local_storage.is_empty() && snapshot.session_storage.is_empty() {
        return None;
    }
    let json = |map: &BTreeMap<String, BTreeMap<String, String>>| {
        serde_json::to_string(map).expect("string maps always serialize")
    };
    Some(
        STORAGE
            .replace("__TRACE_LOCAL_STORAGE__", &json(&snapshot.local_storage))
            .replace("__TRACE_SESSION_STORAGE__", &json(&snapshot.session_storage)),
    )
}

/// Plays `transcripts` back to the pages that open their sockets; `None` when the recording has none.
pub fn websockets(transcripts: &[Transcript]) -> Option<String> {
    if transcripts.is_empty() {
        return None;
    }
    let sockets: Vec<serde_json::Value> = transcripts
        .iter()
        .map(|transcript| {
            // A write's body goes with the first frame that followed it, not again with each of the others.
            let mut last_body = None;
            let frames: Vec<serde_json::Value> = transcript
                .frames
                .iter()
                .map(|frame| {
                    let mut played =
                        serde_json::json!({"sent": frame.sent, "binary": frame.is_binary(), "data": frame.data});
                    if let Some(write) = &frame.after_write {
                        played["after"] = serde_json::json!(write.key);
                        if let Some(body) = &write.body
                            && last_body != Some(body)
                        {
                            played["after_body"] = serde_json::json!(body);
                            last_body = Some(body);
                        }
                    }
                    played
                })
                .collect();
            serde_json::json!({"url": transcript.url, "frames": frames})
        })
        .collect();
    let json = serde_json::to_string(&sockets).expect("JSON values always serialize");
    let prefix = serde_json::to_string(trace_analysis::secrets::PLACEHOLDER_PREFIX).expect("a string serializes");
    let binding = serde_json::to_string(SOCKET_BINDING).expect("a string serializes");
    let kind_names = serde_json::to_string(&websocket::FRAME_KIND_NAMES).expect("strings serialize");
    let chatter = serde_json::to_string(&websocket::chatter_kinds().collect::<Vec<_>>()).expect("strings serialize");
    Some(
        WEBSOCKET
            .replace("__TRACE_PLACEHOLDER_PREFIX__", &prefix)
            .replace("__TRACE_FRAME_KIND_NAMES__", &kind_names)
            .replace("__TRACE_CHATTER_KINDS__", &chatter)
            .replace("__TRACE_SOCKET_BINDING__", &binding)
            .replace("__TRACE_WEBSOCKETS__", &json),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Runs `script` then `probe` in Node (which has `Date`, `Math` and `crypto` as browsers do) and returns
    /// what `probe` printed.
    fn run_in_node(script: &str, probe: &str) -> String {
        let output = Command::new("node")
            .arg("-e")
            .arg(format!("{script}\n{probe}"))
            .output()
            .expect("Node runs the page scripts' tests");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    }

    const PROBE: &str = "console.log(JSON.stringify([Date.now(), new Date().getTime(), Math.random(), \
        Math.random(), Array.from(globalThis.crypto.getRandomValues(new Uint8Array(4))), globalThis.crypto.randomUUID(), \
        new Date(0).getTime(), typeof Date(), new Date() instanceof Date]))";

    #[test]
    fn a_recorded_socket_plays_the_servers_frames_in_answer_to_the_pages() {
        use trace_analysis::websocket::Frame;
        let frame = |sent: bool, data: &str| Frame { sent, opcode: 1, data: data.to_owned(), after_write: None };
        let transcript = Transcript {
            url: "ws://s.test/chat".to_owned(),
            frames: vec![
                frame(false, "hello"),
                frame(true, r#"{"q":"price","n":1}"#),
                frame(false, "twelve"),
                frame(true, "bye"),
                frame(false, "see you"),
            ],
        };
        // Node has no WebSocket or CloseEvent of its own (as browsers have): stand-ins, and a location.
        let prelude = r#"
            globalThis.location = { href: "http://s.test/chat" };
            const items = new Map();
            globalThis.sessionStorage = { getItem: (k) => items.get(k) ?? null, setItem: (k, v) => items.set(k, String(v)) };
            globalThis.WebSocket = class { constructor(url) { this.native = url; } };
            globalThis.CloseEvent = class extends Event { constructor(type, init) { super(type); Object.assign(this, init); } };
        "#;
        let probe = r#"
            const seen = [];
            const socket = new WebSocket("ws://s.test/chat");
            socket.onmessage = (event) => {
              seen.push(event.data);
              if (event.data === "hello") socket.send('{"n":1,"q":"price"}');
              if (event.data === "twelve") socket.send("something else");
            };
            const other = new WebSocket("ws://s.test/never");
            setTimeout(() => console.log(JSON.stringify([seen, socket.readyState, other.native,
              JSON.parse(sessionStorage.getItem("__trace_replay_websocket_frames__"))])), 50);
        "#;
        let script = websockets(std::slice::from_ref(&transcript)).unwrap();
        let printed = run_in_node(&format!("{prelude}\n{script}"), probe);
        let printed: serde_json::Value = serde_json::from_str(printed.trim()).unwrap();
        // The JSON question matched whatever its key order; the unrecorded text took the next frame sent.
        assert_eq!(printed[0], serde_json::json!(["hello", "twelve", "see you"]));
        assert_eq!(printed[1], 1, "open");
        assert_eq!(printed[2], "ws://s.test/never", "a socket never recorded is the browser's own");
        assert_eq!(printed[3], serde_json::json!({"matched": 1, "unmatched": 1, "chatter": 0, "played": 3}));
        assert!(websockets(&[]).is_none());
    }

    /// Issue #44: the server pushed notifications after the page's deploy over HTTP; played at once, they
    /// came before anything had been deployed.
    #[test]
    fn a_frame_pushed_after_a_write_waits_for_the_pages_write() {
        use trace_analysis::websocket::{Frame, Write};
        let frame = |sent: bool, data: &str, after_write: Option<&str>| Frame {
            sent,
            opcode: 1,
            data: data.to_owned(),
            after_write: after_write.map(|key| Write { key: key.to_owned(), body: None }),
        };
        let transcript = Transcript {
            url: "ws://s.test/comms".to_owned(),
            frames: vec![
                frame(true, "subscribe", None),
                frame(false, "subscribed", None),
                frame(false, "deployed", Some("POST /flows")),
                frame(false, "heartbeat", Some("POST /flows")),
                // A node's button: its id, in the path, is one the replayed page draws anew; the message
                // names the node and its flow by the ids the recorded page drew, which it deployed.
                frame(
                    false,
                    r#"{"id":"dad0c6e3e5309984","z":"f1a2b3c4d5e6f708","msg":42}"#,
                    Some("POST /inject/dad0c6e3e5309984"),
                ),
            ],
        };
        let mut transcript = transcript;
        transcript.frames[2].after_write.as_mut().unwrap().body = Some(
            r#"{"flows":[{"id":"f1a2b3c4d5e6f708","type":"tab"},{"id":"dad0c6e3e5309984","z":"f1a2b3c4d5e6f708"}]}"#
                .to_owned(),
        );
        let prelude = r#"
            globalThis.location = { href: "http://s.test/" };
            const items = new Map();
            globalThis.sessionStorage = { getItem: (k) => items.get(k) ?? null, setItem: (k, v) => items.set(k, String(v)) };
            globalThis.WebSocket = class { constructor(url) { this.native = url; } };
            globalThis.fetch = async () => ({ ok: true });
        "#;
        let probe = r#"
            const seen = [];
            const socket = new WebSocket("ws://s.test/comms");
            socket.onopen = () => socket.send("subscribe");
            socket.onmessage = (event) => seen.push(event.data);
            setTimeout(async () => {
              const before = [...seen];
              await fetch("/flows?_=1", { method: "GET" });
              const afterReading = [...seen];
              const flows = '{"flows":[{"id":"0a0b0c0d0e0f1011","type":"tab"},{"id":"8f2a77c1b0e94d13","z":"0a0b0c0d0e0f1011"}]}';
              await fetch("http://s.test/flows", { method: "post", body: flows });
              await new Promise((rest) => setTimeout(rest, 20));
              const deployed = [...seen];
              await fetch("/inject/about", { method: "POST" });
              await new Promise((rest) => setTimeout(rest, 20));
              const otherWrite = [...seen];
              await fetch("/inject/8f2a77c1b0e94d13", { method: "POST" });
              setTimeout(() => console.log(JSON.stringify([before, afterReading, deployed, otherWrite, seen])), 20);
            }, 30);
        "#;
        let script = websockets(std::slice::from_ref(&transcript)).unwrap();
        let printed = run_in_node(
            &format!(
                "{prelude}
{script}"
            ),
            probe,
        );
        let printed: serde_json::Value = serde_json::from_str(printed.trim()).unwrap();
        assert_eq!(printed[0], serde_json::json!(["subscribed"]), "the answer comes at once, the push waits");
        assert_eq!(printed[1], serde_json::json!(["subscribed"]), "a read is not the write");
        assert_eq!(printed[2], serde_json::json!(["subscribed", "deployed", "heartbeat"]));
        assert_eq!(printed[3], printed[2], "a write to another path is not the one the push followed");
        let debug = r#"{"id":"8f2a77c1b0e94d13","z":"0a0b0c0d0e0f1011","msg":42}"#;
        assert_eq!(printed[4], serde_json::json!(["subscribed", "deployed", "heartbeat", debug]), "ids drawn anew");
    }

    /// Issue #43: a server-driven interface (NiceGUI's) acknowledges the server's updates on its own clock.
    /// The replayed page acknowledged before the person's first act, with another count than the recording's
    /// one acknowledgement; taken for the earliest recorded frame, it was answered with the slider's update
    /// to 4, and every value the page sent after was one too high. A frame that matches none is answered
    /// as a recorded frame of its kind was, and a kind the recording lacks with nothing.
    #[test]
    fn a_frame_that_matches_none_is_answered_as_one_of_its_kind() {
        use trace_analysis::websocket::Frame;
        let frame = |sent: bool, data: &str| Frame { sent, opcode: 1, data: data.to_owned(), after_write: None };
        let transcript = Transcript {
            url: "ws://s.test/_nicegui_ws/socket.io/".to_owned(),
            frames: vec![
                frame(true, r#"42["event",{"id":5,"args":["4"]}]"#),
                frame(false, r#"42["update",{"5":{"model-value":4}}]"#),
                frame(true, r#"42["event",{"id":5,"args":["5"]}]"#),
                frame(false, r#"42["update",{"5":{"model-value":5}}]"#),
                frame(true, r#"42["ack",{"next_message_id":2}]"#),
                frame(true, r#"{"type":"compute"}"#),
                frame(false, r#"42["update",{"6":{"text":"5 x 7 = 35"}}]"#),
            ],
        };
        let prelude = r#"
            globalThis.location = { href: "http://s.test/" };
            const items = new Map();
            globalThis.sessionStorage = { getItem: (k) => items.get(k) ?? null, setItem: (k, v) => items.set(k, String(v)) };
            globalThis.WebSocket = class { constructor(url) { this.native = url; } };
        "#;
        // Each of the page's frames is sent once the answers to the one before have had their turn.
        let probe = r#"
            const seen = [];
            const socket = new WebSocket("ws://s.test/_nicegui_ws/socket.io/");
            socket.onmessage = (event) => seen.push(event.data);
            const sends = [
              '42["ack",{"next_message_id":0}]',
              '42["event",{"id":5,"args":["4"]}]',
              '42["event",{"id":5,"args":["9"]}]',
              '{"type":"subscribe"}',
              '{"type":"compute"}',
              '42["ack",{"next_message_id":2}]',
            ];
            const after = [];
            const next = () => {
              after.push(seen.length);
              if (!sends.length) return console.log(JSON.stringify([seen, after,
                JSON.parse(sessionStorage.getItem("__trace_replay_websocket_frames__"))]));
              socket.send(sends.shift());
              setTimeout(next, 10);
            };
            socket.onopen = () => setTimeout(next, 10);
        "#;
        let script = websockets(std::slice::from_ref(&transcript)).unwrap();
        let printed = run_in_node(&format!("{prelude}\n{script}"), probe);
        let printed: serde_json::Value = serde_json::from_str(printed.trim()).unwrap();
        let expected = serde_json::json!([
            r#"42["update",{"5":{"model-value":4}}]"#,
            r#"42["update",{"5":{"model-value":5}}]"#,
            r#"42["update",{"6":{"text":"5 x 7 = 35"}}]"#,
        ]);
        assert_eq!(printed[0], expected);
        // Nothing answered the page's own acknowledgement, nor the kind never recorded; the event of another
        // value took the next recorded event's answer; the acknowledgement the recording has was still there
        // for the page's own when it came.
        assert_eq!(printed[1], serde_json::json!([0, 0, 1, 2, 2, 3, 3]));
        assert_eq!(printed[2], serde_json::json!({"matched": 3, "unmatched": 2, "chatter": 1, "played": 3}));
    }

    /// A kernel's socket: the page puts a session id of its own making in the URL, and a message id of its
    /// own and its clock's time in each message; the server's replies echo the ids. The page of a replay
    /// makes other ids, at another time; the recording's session id was redacted.
    #[test]
    fn a_socket_whose_url_and_frames_carry_ids_the_page_made_plays_them_back_with_the_pages_ids() {
        use base64::Engine;
        use trace_analysis::websocket::Frame;
        let text = |sent: bool, data: &str| Frame { sent, opcode: 1, data: data.to_owned(), after_write: None };
        let binary = |sent: bool, data: &str| Frame {
            sent,
            opcode: 2,
            data: base64::engine::general_purpose::STANDARD.encode([&[3u8, 0, 0, 0][..], data.as_bytes()].concat()),
            after_write: None,
        };
        // As a redacted bundle holds the session id: its placeholder in the URL, and in the frames cut to the
        // id's length (a stand-in with no digit left in it).
        let recorded_session = "trace-redacted-url-parameter-session";
        let transcript = Transcript {
            url: "ws://s.test/api/kernels/k1/channels?session_id=trace-redacted-url-parameter-session-id-5".to_owned(),
            frames: vec![
                text(
                    true,
                    &format!(
                        r#"{{"date":"2026-11-27T09:28:59.013Z","msg_id":"aaaa1111-recorded","session":"{recorded_session}"}}"#
                    ),
                ),
                text(false, &format!(r#"{{"parent":"aaaa1111-recorded","session":"{recorded_session}"}}"#)),
                binary(true, "execute bbbb2222-recorded"),
                binary(false, "reply to bbbb2222-recorded: 42"),
            ],
        };
        let prelude = r#"
            globalThis.location = { href: "http://s.test/lab" };
            globalThis.sessionStorage = { getItem: () => null, setItem: () => {} };
            globalThis.WebSocket = class { constructor(url) { this.native = url; } };
            globalThis.CloseEvent = class extends Event { constructor(type, init) { super(type); Object.assign(this, init); } };
        "#;
        // The page's ids have the lengths of the recorded ones, as UUIDs do.
        let probe = r#"
            const session = "77777777-1111-4222-8333-444444444444";
            const seen = [];
            const socket = new WebSocket(`ws://s.test/api/kernels/k1/channels?session_id=${session}`);
            socket.binaryType = "arraybuffer";
            const date = "2026-11-28T10:01:02.345Z";
            socket.onopen = () => socket.send(JSON.stringify({ session, msg_id: "cccc3333-pagemade", date }));
            socket.onmessage = (event) => {
              if (typeof event.data === "string") {
                seen.push(event.data);
                socket.send(new Uint8Array([3, 0, 0, 0, ...new TextEncoder().encode("execute dddd4444-pagemade")]));
              } else {
                const bytes = new Uint8Array(event.data);
                seen.push([...bytes.slice(0, 4)], new TextDecoder().decode(bytes.slice(4)));
              }
            };
            setTimeout(() => console.log(JSON.stringify([seen, socket.native ?? null])), 50);
        "#;
        let script = websockets(std::slice::from_ref(&transcript)).unwrap();
        let printed = run_in_node(
            &format!(
                "{prelude}
{script}"
            ),
            probe,
        );
        let printed: serde_json::Value = serde_json::from_str(printed.trim()).unwrap();
        assert_eq!(printed[1], serde_json::Value::Null, "the recorded socket was not played: {printed}");
        let expected = serde_json::json!([
            r#"{"parent":"cccc3333-pagemade","session":"77777777-1111-4222-8333-444444444444"}"#,
            [3, 0, 0, 0],
            "reply to dddd4444-pagemade: 42",
        ]);
        assert_eq!(printed[0], expected);
    }

    /// SockJS's socket URL holds a server number and a session id the page made with `Math.random()`,
    /// which may have no digit: a URL of the recorded one's shape is that socket; one of another shape is not.
    #[test]
    fn a_socket_url_of_a_recorded_ones_shape_plays_it() {
        use trace_analysis::websocket::Frame;
        let transcript = Transcript {
            url: "ws://s.test/stores/782/qwertyui/websocket".to_owned(),
            frames: vec![Frame { sent: false, opcode: 1, data: "o".to_owned(), after_write: None }],
        };
        let prelude = r#"
            globalThis.location = { href: "http://s.test/" };
            globalThis.sessionStorage = { getItem: () => null, setItem: () => {} };
            globalThis.WebSocket = class { constructor(url) { this.native = url; } };
        "#;
        let probe = r#"
            const seen = [];
            const played = new WebSocket("ws://s.test/stores/105/zxcvbnma/websocket");
            played.onmessage = (event) => seen.push(event.data);
            const others = ["ws://s.test/stores/105/zxcvbnma/xhr", "ws://s.test/stores/105/zxcv/websocket",
              "ws://s.test/other/105/zxcvbnma/websocket", "ws://t.test/stores/105/zxcvbnma/websocket"]
              .map((url) => new WebSocket(url).native ?? null);
            setTimeout(() => console.log(JSON.stringify([seen, played.native ?? null, others])), 50);
        "#;
        let script = websockets(std::slice::from_ref(&transcript)).unwrap();
        let printed: serde_json::Value =
            serde_json::from_str(run_in_node(&format!("{prelude}\n{script}"), probe).trim()).unwrap();
        assert_eq!(printed[0], serde_json::json!(["o"]), "{printed}");
        assert_eq!(printed[1], serde_json::Value::Null);
        let natives = printed[2].as_array().unwrap();
        assert!(natives.iter().all(|native| native.is_string()), "another shape is the browser's own: {printed}");
    }

    #[test]
    fn every_webrtc_connection_with_somewhere_to_reach_is_reported_once() {
        // Node has no WebRTC: a stand-in with the browser's methods, under both of Chromium's names.
        let prelude = r#"
            class RTCPeerConnection {
              constructor(configuration) { this.configuration = configuration ?? {}; }
              getConfiguration() { return { iceServers: this.configuration.iceServers ?? [] }; }
              setConfiguration(configuration) { this.configuration = configuration; }
              setLocalDescription() { return Promise.resolve(); }
              setRemoteDescription() { return Promise.resolve(); }
              addIceCandidate() { return Promise.resolve("added"); }
            }
            globalThis.RTCPeerConnection = RTCPeerConnection;
            globalThis.webkitRTCPeerConnection = RTCPeerConnection;
            const reports = [];
            globalThis.__trace_replay_live__ = (payload) => reports.push(payload);
        "#;
        let probe = r#"
            const stun = { iceServers: [{ urls: ["stun:a.test:3478", "stun:b.test"] }] };
            const peer = new RTCPeerConnection(stun);
            peer.setConfiguration(stun);
            peer.setLocalDescription();
            new webkitRTCPeerConnection({ iceServers: [{ url: "stun:old.test" }] });
            const configured = new RTCPeerConnection();
            configured.setLocalDescription();
            configured.setConfiguration({ iceServers: [{ urls: "turn:t.test" }] });
            // Built by the constructor no global names any more.
            const unwrapped = new RTCPeerConnection.prototype.constructor(stun);
            unwrapped.setLocalDescription();
            const quiet = new RTCPeerConnection({ iceServers: [] });
            quiet.addIceCandidate({ candidate: "" });
            quiet.setRemoteDescription({ type: "answer", sdp: "v=0\r\na=mid:0\r\n" });
            const given = new RTCPeerConnection();
            const added = given.addIceCandidate({ candidate: "candidate:1 1 udp 1 127.0.0.1 9 typ host", sdpMid: "0" });
            const described = new RTCPeerConnection();
            described.setRemoteDescription({ type: "offer", sdp: "v=0\r\na=candidate:2 1 udp 1 10.0.0.1 7 typ host\r\n" });
            added.then((result) => console.log(JSON.stringify([reports, result, peer instanceof RTCPeerConnection])));
        "#;
        let printed = run_in_node(&format!("{prelude}\n{}", live_connections()), probe);
        let printed: serde_json::Value = serde_json::from_str(printed.trim()).unwrap();
        assert_eq!(
            printed[0],
            serde_json::json!([
                "stun:a.test:3478 stun:b.test",
                "stun:old.test",
                "turn:t.test",
                "stun:a.test:3478 stun:b.test",
                "candidate:1 1 udp 1 127.0.0.1 9 typ host",
                "a=candidate:2 1 udp 1 10.0.0.1 7 typ host",
            ]),
            "each once, and none for a connection with nowhere to reach"
        );
        assert_eq!(printed[1], "added", "the browser's own method still runs");
        assert_eq!(printed[2], true);
    }

    #[test]
    fn two_runs_with_one_seed_read_the_same_numbers_and_a_clock_that_starts_at_the_recording() {
        let start = 1_795_327_471_784.0;
        let began = trace_manifest::time_fmt::now_ms();
        let first = run_in_node(&determinism(start, 42, began), PROBE);
        let second = run_in_node(&determinism(start, 42, began), PROBE);
        let values: serde_json::Value = serde_json::from_str(&first).unwrap();
        let again: serde_json::Value = serde_json::from_str(&second).unwrap();
        // Node started after `began`, so the clock has moved on from the recording's start, by as long.
        let read = values[0].as_f64().unwrap();
        let elapsed = trace_manifest::time_fmt::now_ms() - began;
        assert!(start <= read && read <= start + elapsed, "the clock {read} starts at the recording's {start}");
        assert!(values[1].as_f64().unwrap() >= read, "and never goes back");
        assert_eq!(values.as_array().unwrap()[2..], again.as_array().unwrap()[2..], "the same numbers, same dates");
        assert_ne!(values[2], values[3]);
        assert_eq!(values[6], 0, "an explicit date is left alone");
        assert_eq!(values[7], "string");
        assert_eq!(values[8], true, "instanceof still works");
        let other_seed = run_in_node(&determinism(start, 7, began), PROBE);
        assert_ne!(values[2], serde_json::from_str::<serde_json::Value>(&other_seed).unwrap()[2], "the seed decides");
    }

    /// A debounce as lodash writes it: its timer fires, then compares `Date.now()` with the last call and
    /// waits again until the wait has passed by the page's clock. Under a clock that moved a millisecond per
    /// reading it never fired.
    #[test]
    fn a_debounce_that_reads_the_clock_fires_after_its_wait() {
        let debounce = r#"
            function debounce(func, wait) {
              let lastCallTime, timerId;
              const expired = () => {
                const time = Date.now();
                if (time - lastCallTime >= wait) { timerId = undefined; return func(); }
                timerId = setTimeout(expired, wait - (time - lastCallTime));
              };
              return () => { lastCallTime = Date.now(); if (timerId === undefined) timerId = setTimeout(expired, wait); };
            }
            const began = performance.now();
            debounce(() => { console.log(Math.round(performance.now() - began)); process.exit(0); }, 250)();
            setTimeout(() => { console.log("never"); process.exit(0); }, 3000);
        "#;
        let fired = run_in_node(&determinism(1_795_327_471_784.0, 42, trace_manifest::time_fmt::now_ms()), debounce);
        let after: f64 = fired.trim().parse().unwrap_or_else(|_| panic!("the debounce fired {fired}"));
        assert!((250.0..1500.0).contains(&after), "fired after {after} ms");
    }

    #[test]
    fn storage_is_restored_for_its_origin_only() {
        let mut snapshot = StorageSnapshot {
            phase: trace_manifest::event::StoragePhase::Start,
            cookies: Vec::new(),
            local_storage: BTreeMap::new(),
            session_storage: BTreeMap::new(),
            indexed_db: BTreeMap::new(),
        };
        assert!(storage(&snapshot).is_none());
        snapshot.local_storage.insert("https://shop.test".into(), [("theme".into(), "dark\"'".into())].into());
        snapshot.local_storage.insert("https://other.test".into(), [("x".into(), "1".into())].into());
        let script = storage(&snapshot).unwrap();
        // A minimal stand-in for the browser's storage, enough to run the script.
        let fake = "class S { constructor() { this.m = new Map(); } getItem(k) { return this.m.has(k) ? this.m.get(k) : null; } \
            setItem(k, v) { this.m.set(k, String(v)); } }\n\
            globalThis.localStorage = new S(); globalThis.sessionStorage = new S(); \
            globalThis.location = { origin: 'https://shop.test' };";
        let probe = "localStorage.setItem('theme', 'changed by the page');\n(() => {\n".to_owned()
            + &script
            + "\n})();\nconsole.log(JSON.stringify([...localStorage.m]))";
        let restored =
            run_in_node(fake, &format!("{script}\nconsole.log(JSON.stringify([...localStorage.m]));\n{probe}"));
        let lines: Vec<&str> = restored.lines().collect();
        assert_eq!(
            lines[0], r#"[["theme","dark\"'"],["__trace_replay_restored__","1"]]"#,
            "restored, quotes and all, and only this origin's"
        );
        assert_eq!(
            lines[1], r#"[["theme","changed by the page"],["__trace_replay_restored__","1"]]"#,
            "restored once, then left to the page"
        );
    }
}
