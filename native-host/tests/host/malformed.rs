//! Bad input gets a precise error, never a panic, and never costs what was already committed.

use trace_host::client::{HostClient, TaskMessages};
use trace_manifest::event::BodyPart;
use trace_manifest::task::TaskType;
use trace_manifest::wire::{ErrorCode, HostMessage};

use crate::common::*;

/// A host with one started task holding one committed event.
fn host_with_task(scratch: &Scratch) -> (HostClient, TaskMessages) {
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id("victim"));
    let start = task.start(task_start("victim", TaskType::Action));
    let events = task.events(vec![navigation(1.0, "http://127.0.0.1:8000/")]);
    send_all(&mut host, &task, &[start, events]);
    (host, task)
}

/// A builder whose last seq is `seq`, for waiting on a message sent before later ones were built.
fn task_up_to(task: &TaskMessages, seq: u64) -> TaskMessages {
    let mut earlier = TaskMessages::new(task.task_id.clone());
    while earlier.last_seq() < seq {
        earlier.events(vec![]);
    }
    earlier
}

fn expect_error(host: &mut HostClient, code: ErrorCode) -> HostMessage {
    let reply = host.recv_non_ack(TIMEOUT).unwrap_or_else(|| panic!("no reply; expected {code:?}"));
    match &reply {
        HostMessage::Error { code: got, .. } if *got == code => reply,
        _ => panic!("expected a {code:?} error, got {reply:?}"),
    }
}

/// After each bad message, the port still works and the committed event is still there.
fn assert_still_serving(host: &mut HostClient, task: &mut TaskMessages) {
    let message = task.events(vec![navigation(2.0, "http://127.0.0.1:8000/after")]);
    host.send(&message).unwrap();
    host.wait_for_ack(&task.task_id, message.seq, TIMEOUT).unwrap();
}

#[test]
fn malformed_messages_get_errors_and_the_session_goes_on() {
    let scratch = Scratch::new();
    let (mut host, mut task) = host_with_task(&scratch);

    host.send_frame(b"{not json").unwrap();
    expect_error(&mut host, ErrorCode::InvalidJson);
    host.send_frame(b"").unwrap();
    expect_error(&mut host, ErrorCode::InvalidJson);
    host.send_frame(br#"{"seq":9,"type":"teleport","task_id":"victim"}"#).unwrap();
    let HostMessage::Error { message, .. } = expect_error(&mut host, ErrorCode::UnknownMessageType) else {
        unreachable!()
    };
    assert!(message.contains("teleport") && message.contains("body_chunk"), "{message}");
    host.send_frame(br#"{"seq":9,"type":"events","task_id":"victim"}"#).unwrap();
    let HostMessage::Error { message, seq, .. } = expect_error(&mut host, ErrorCode::InvalidMessage) else {
        unreachable!()
    };
    assert!(message.contains("events"), "{message}");
    assert_eq!(seq, Some(9));
    host.send_frame(br#"{"seq":1,"type":"events","task_id":"../../etc","events":[]}"#).unwrap();
    expect_error(&mut host, ErrorCode::InvalidMessage);
    assert_still_serving(&mut host, &mut task);

    let mut stranger = TaskMessages::new(task_id("nobody"));
    stranger.start(task_start("nobody", TaskType::Action));
    host.send(&stranger.events(vec![navigation(1.0, "http://x/")])).unwrap();
    expect_error(&mut host, ErrorCode::UnknownTask);

    // A chunk out of order is rejected and its seq consumed, so the stream carries on.
    let mut chunks = task.body("r9", BodyPart::Response, &[1u8; 300], 100);
    send_all(&mut host, &task_up_to(&task, chunks[0].seq), &chunks[..1]);
    let (second, third) = (chunks[1].seq, chunks[2].seq);
    chunks[2].seq = second;
    chunks[1].seq = third;
    host.send(&chunks[2]).unwrap();
    let HostMessage::Error { message, .. } = expect_error(&mut host, ErrorCode::ChunkOutOfOrder) else {
        unreachable!()
    };
    assert!(message.contains("expects chunk 1, got chunk 2"), "{message}");
    host.send(&chunks[1]).unwrap();
    host.wait_for_ack(&task.task_id, third, TIMEOUT).unwrap();
    assert_still_serving(&mut host, &mut task);

    // Events the host writes itself cannot be forged.
    let forged: trace_manifest::event::Event = serde_json::from_value(serde_json::json!({
        "ts": 1.0, "type": "body", "request_id": "x", "part": "response", "sha256": "00", "size": 1
    }))
    .unwrap();
    host.send(&task.events(vec![forged])).unwrap();
    expect_error(&mut host, ErrorCode::InvalidMessage);
    assert_still_serving(&mut host, &mut task);

    let (status, _) = host.close().unwrap();
    assert!(status.success());
    let tasks = scratch.cli_json(&["tasks", "--json"]);
    assert_eq!(tasks[0]["events"], 4, "the first event and the three sent after each bad message");
}

#[test]
fn a_length_prefix_over_64_mib_is_refused_and_committed_data_survives() {
    let scratch = Scratch::new();
    let (mut host, _task) = host_with_task(&scratch);
    host.send_raw(&(64u32 * 1024 * 1024 + 1).to_ne_bytes()).unwrap();
    host.send_raw(b"{\"seq\":3}").unwrap();
    let HostMessage::Error { message, .. } = expect_error(&mut host, ErrorCode::FrameTooLarge) else { unreachable!() };
    assert!(message.contains("67108865"), "{message}");
    let status = host.wait().unwrap();
    assert_eq!(status.code(), Some(1), "the host stops reading a stream it can no longer trust");
    let tasks = scratch.cli_json(&["tasks", "--json"]);
    assert_eq!((tasks[0]["status"].as_str(), tasks[0]["events"].as_u64()), (Some("interrupted"), Some(1)));
}

#[test]
fn a_frame_cut_short_by_the_end_of_input_is_reported() {
    let scratch = Scratch::new();
    let (mut host, _task) = host_with_task(&scratch);
    host.send_raw(&100u32.to_ne_bytes()).unwrap();
    host.send_raw(b"{\"seq\":3,").unwrap();
    let (status, replies) = host.close().unwrap();
    assert!(
        replies.iter().any(|r| matches!(r, HostMessage::Error { code: ErrorCode::TruncatedFrame, message, .. } if message.contains("104"))),
        "{replies:?}"
    );
    assert_eq!(status.code(), Some(1));
    assert_eq!(scratch.cli_json(&["tasks", "--json"])[0]["events"], 1);
}

#[test]
fn a_host_that_cannot_open_its_data_directory_says_why() {
    let scratch = Scratch::new();
    std::fs::write(scratch.data(), b"a file where the data directory should be").unwrap();
    let mut host = scratch.host();
    let reply = host.recv_non_ack(TIMEOUT).expect("an error frame");
    let HostMessage::Error { code: ErrorCode::Storage, message, .. } = reply else { panic!("{reply:?}") };
    assert!(message.contains("cannot create the data directory"), "{message}");
    assert_eq!(host.wait().unwrap().code(), Some(1));
}
