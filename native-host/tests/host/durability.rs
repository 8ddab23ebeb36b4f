//! Nothing acknowledged is ever lost: not when the host is killed, not when the port closes mid-recording,
//! not when a second host process takes over the task.

use std::time::Duration;

use trace_bundle::archive::sha256_hex;
use trace_host::client::TaskMessages;
use trace_manifest::event::BodyPart;
use trace_manifest::task::TaskType;
use trace_manifest::wire::{ClientBody, ClientMessage, HostMessage};

use crate::common::*;

#[test]
fn killing_the_host_mid_stream_keeps_every_acknowledged_event_and_the_task_exports_as_interrupted() {
    let scratch = Scratch::new();
    let mut host = scratch.host();
    let mut task = TaskMessages::new(task_id("crash"));
    let start = task.start(task_start("crash", TaskType::Action));
    send_all(&mut host, &task, &[start]);
    // 200 batches of 10 events, acknowledged...
    let batches: Vec<ClientMessage> = (0..200)
        .map(|b| {
            task.events(
                (0..10).map(|i| navigation((b * 10 + i) as f64, &format!("http://127.0.0.1:8000/p{b}/{i}"))).collect(),
            )
        })
        .collect();
    send_all(&mut host, &task, &batches);
    let acked_seq = task.last_seq();
    // ...then a body half sent when the process dies, and events behind it. The extension keeps every
    // message until it is acknowledged.
    let mut unacknowledged = task.body("r1", BodyPart::Response, &vec![7u8; 3 << 20], 1 << 20);
    unacknowledged
        .extend((0..50).map(|b| task.events(vec![navigation(10_000.0 + b as f64, "http://127.0.0.1:8000/late")])));
    for message in unacknowledged.iter().take(2) {
        host.send(message).unwrap();
    }
    host.kill().unwrap();

    let tasks = scratch.cli_json(&["tasks", "--json"]);
    assert_eq!(tasks[0]["status"], "interrupted");
    let stored = tasks[0]["events"].as_u64().unwrap();
    assert!(stored >= 2000, "{stored} events stored, 2000 were acknowledged (up to seq {acked_seq})");

    let zip = scratch.path("crash.zip");
    let report = scratch.cli_json(&["export", "crash", "--out", zip.to_str().unwrap(), "--json"]);
    assert_eq!(report["status"], "interrupted");
    let validated = scratch.cli_json(&["validate", zip.to_str().unwrap(), "--json"]);
    assert_eq!(validated["valid"], true, "{validated}");
    let manifest = read_json(&scratch.capture("crash").join("manifest.json"));
    assert_eq!(manifest["task"]["status"], "interrupted");
    assert_eq!(manifest["counts"]["events"], stored);

    // The extension reconnects to a new host, learns what was committed, and carries on from there.
    let mut host = scratch.host();
    host.send(&ClientMessage { seq: 0, body: ClientBody::Hello { task_id: Some(task.task_id.clone()) } }).unwrap();
    let Some(HostMessage::Hello { task: Some(progress), .. }) = host.recv_non_ack(TIMEOUT) else { panic!("no hello") };
    assert!(progress.acked_seq >= acked_seq);
    let mut messages: Vec<ClientMessage> =
        unacknowledged.into_iter().filter(|message| message.seq > progress.acked_seq).collect();
    messages.push(task.stop(T0 + 99_000.0, None));
    send_all(&mut host, &task, &messages);
    host.close().unwrap();
    let validated = scratch.cli_json(&["validate", scratch.capture("crash").to_str().unwrap(), "--json"]);
    assert_eq!(validated["valid"], true, "{validated}");
    let manifest = read_json(&scratch.capture("crash").join("manifest.json"));
    assert_eq!(manifest["task"]["status"], "stopped");
    assert_eq!(manifest["counts"]["body_bytes"], 3 << 20);
    assert_eq!(manifest["counts"]["events"], 2000 + 50 + 1, "every event once, and the body's");
}

#[test]
fn a_body_interrupted_between_chunks_resumes_where_the_acknowledgements_end() {
    let scratch = Scratch::new();
    let body: Vec<u8> = (0..(5 << 20)).map(|i: u32| (i % 251) as u8).collect();
    let mut task = TaskMessages::new(task_id("chunks"));
    let mut messages = vec![task.start(task_start("chunks", TaskType::Action))];
    messages.extend(task.body("r1", BodyPart::Response, &body, 1 << 20));
    let (first, rest) = messages.split_at(3); // start + two chunks

    let mut host = scratch.host();
    for message in first {
        host.send(message).unwrap();
    }
    host.wait_for_ack(&task.task_id, 3, TIMEOUT).unwrap();
    host.close().unwrap(); // the port closes: the service worker was restarted

    let mut host = scratch.host();
    for message in rest {
        host.send(message).unwrap();
    }
    host.wait_for_ack(&task.task_id, task.last_seq(), TIMEOUT).unwrap();
    let stop = task.stop(T0 + 5_000.0, None);
    send_all(&mut host, &task, &[stop]);
    host.close().unwrap();
    let stored = std::fs::read(scratch.capture("chunks").join("resources").join(sha256_hex(&body))).unwrap();
    assert!(stored == body, "the body stitched across two host processes differs");
}

#[test]
fn two_host_processes_record_two_tasks_at_once_into_one_database() {
    let scratch = Scratch::new();
    let mut hosts: Vec<_> = (0..2).map(|_| scratch.host()).collect();
    let mut tasks: Vec<_> = ["left", "right"].iter().map(|id| TaskMessages::new(task_id(id))).collect();
    for (task, id) in tasks.iter_mut().zip(["left", "right"]) {
        let start = task.start(task_start(id, TaskType::Action));
        let host = if id == "left" { &mut hosts[0] } else { &mut hosts[1] };
        host.send(&start).unwrap();
    }
    for round in 0..100 {
        for (host, task) in hosts.iter_mut().zip(tasks.iter_mut()) {
            let mut messages = vec![task.events(vec![navigation(round as f64, "http://127.0.0.1:8000/")])];
            messages.extend(task.body(
                &format!("r{round}"),
                BodyPart::Response,
                format!("body {round}").as_bytes(),
                64,
            ));
            for message in &messages {
                host.send(message).unwrap();
            }
        }
    }
    for (host, task) in hosts.iter_mut().zip(tasks.iter_mut()) {
        let stop = task.stop(T0 + 1000.0, None);
        host.send(&stop).unwrap();
        host.wait_for_ack(&task.task_id, stop.seq, Duration::from_secs(60)).unwrap();
    }
    for host in hosts {
        host.close().unwrap();
    }
    let listed = scratch.cli_json(&["tasks", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 2);
    for task in listed.as_array().unwrap() {
        assert_eq!(task["status"], "stopped");
        assert_eq!(task["events"], 200, "100 navigations and 100 bodies");
        let dir = scratch.capture(task["id"].as_str().unwrap());
        assert_eq!(scratch.cli_json(&["validate", dir.to_str().unwrap(), "--json"])["valid"], true);
    }
}

#[test]
fn a_second_host_takes_over_a_task_when_the_first_lets_go() {
    // A service worker restart: Chrome opens a new port (a new host) while the old one is still closing.
    let scratch = Scratch::new();
    let mut first = scratch.host();
    let mut task = TaskMessages::new(task_id("handover"));
    let start = task.start(task_start("handover", TaskType::Action));
    let before = task.events(vec![navigation(1.0, "http://127.0.0.1:8000/")]);
    send_all(&mut first, &task, &[start, before]);

    let mut second = scratch.host();
    let after = task.events(vec![navigation(2.0, "http://127.0.0.1:8000/next")]);
    second.send(&after).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(scratch.cli_json(&["tasks", "--json"])[0]["status"], "recording", "the first host still holds it");
    first.close().unwrap();
    second.wait_for_ack(&task.task_id, after.seq, TIMEOUT).unwrap();
    let stop = task.stop(T0 + 3_000.0, None);
    send_all(&mut second, &task, &[stop]);
    second.close().unwrap();
    let tasks = scratch.cli_json(&["tasks", "--json"]);
    assert_eq!((tasks[0]["status"].as_str(), tasks[0]["events"].as_u64()), (Some("stopped"), Some(2)));
}

/// Issue #11: on a full disk, `trace-host tasks` still lists what was recorded (saying that it cannot set
/// anything right), rather than failing to set up the database. Needs root, to mount a small tmpfs as the
/// data directory; says so and skips otherwise.
#[test]
fn tasks_are_listed_when_the_disk_is_full() {
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.data()).unwrap();
    let Some(_unmount) = crate::common::mount_tmpfs(&scratch.data(), "8m", "tasks_are_listed_when_the_disk_is_full")
    else {
        return;
    };

    crate::common::record_login_and_cart(&scratch, "before-full");
    // A recording the disk filled under (issue #31): its host gone, it is still marked as recording, and
    // marking it interrupted is a write the full disk refuses.
    let mut host = scratch.host();
    let mut task = TaskMessages::new(crate::common::task_id("cut-off"));
    let start = task.start(crate::common::task_start("cut-off", TaskType::Action));
    send_all(&mut host, &task, &[start]);
    host.kill().unwrap();
    // Fill the disk to the last byte.
    let mut filler = std::fs::File::create(scratch.data().join("filler")).unwrap();
    let block = vec![0u8; 64 << 10];
    while std::io::Write::write_all(&mut filler, &block).is_ok() {}
    drop(filler);

    let output = scratch.cli(&["tasks", "--json"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("cannot be written to"), "{stderr}");
    let tasks: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let ids: Vec<&str> = tasks.as_array().unwrap().iter().filter_map(|task| task["id"].as_str()).collect();
    assert!(ids.contains(&"before-full") && ids.contains(&"cut-off"), "{tasks}");
}
