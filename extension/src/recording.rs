//! The recording in progress, as the service worker holds it: the task's outbox of unacknowledged
//! messages, fed by the capture and drained by the host's acknowledgements.

use std::cell::RefCell;

use trace_manifest::wire::HostMessage;

use crate::outbox::Outbox;

thread_local! {
    static ACTIVE: RefCell<Option<Outbox>> = const { RefCell::new(None) };
}

/// A reply of the host that concerns a task: acknowledgements release what the outbox kept.
pub fn on_host_reply(reply: HostMessage) {
    match reply {
        HostMessage::Ack { task_id, seq } => ACTIVE.with(|active| {
            if let Some(outbox) = active.borrow_mut().as_mut().filter(|o| o.task_id() == &task_id) {
                outbox.ack(seq);
            }
        }),
        HostMessage::Error { task_id: Some(task_id), code, message, .. } => {
            crate::log(&format!("trace-host refused a message of task {task_id}: {code:?}: {message}"));
        }
        _ => {}
    }
}
