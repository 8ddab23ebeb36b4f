//! Stopping when asked: a command's work runs until it ends or until the process is asked to stop
//! (Ctrl+C, `SIGTERM`, `SIGHUP`), and then ends as [`Error::Stopped`] with every browser it started
//! closed; `serve` waits for the same request to stop serving, and a proxy a harness started may also
//! stop when its standard input ends ([`stdin_closed`]), so that it goes with the harness however the
//! harness ends.

use std::future::Future;

use anyhow::Context as _;

use crate::error::Error;

/// Runs `work` to its end, or until the process is asked to stop ([`asked_to_stop`]). Then the work is
/// dropped, and the runtime with every task it spawned: each browser the work started goes with them
/// (chromiumoxide kills its Chromium when the last handle to it is dropped), rather than being left
/// running after its replay is gone, as a default `SIGTERM` would leave it.
pub fn until_stopped<T>(work: impl Future<Output = anyhow::Result<T>>) -> Result<T, Error> {
    let runtime = tokio::runtime::Runtime::new().map_err(anyhow::Error::from)?;
    runtime.block_on(async {
        tokio::select! {
            result = work => Ok(result?),
            asked = asked_to_stop() => {
                asked?;
                Err(Error::Stopped)
            }
        }
    })
}

/// Waits until the process is asked to stop: Ctrl+C (`SIGINT`), `SIGTERM` (a job runner, `kill`) or
/// `SIGHUP` (the terminal closed).
pub async fn asked_to_stop() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch for SIGTERM")?;
    let mut hangup = signal(SignalKind::hangup()).context("cannot watch for SIGHUP")?;
    tokio::select! {
        interrupted = tokio::signal::ctrl_c() => interrupted.context("cannot watch for Ctrl+C"),
        _ = terminate.recv() => Ok(()),
        _ = hangup.recv() => Ok(()),
    }
}

/// Waits until standard input ends (or fails): the process that holds a pipe to it has closed it or is
/// gone, killed included. Whatever is written to it is read and dropped.
pub async fn stdin_closed() {
    let mut lines = stdin_lines();
    while lines.recv().await.is_some() {}
}

/// Standard input's lines as they come, read on a thread of its own (a read of a pipe blocks); the
/// channel ends with standard input. A line that is not UTF-8 comes as its error; a failing read ends
/// it. The caller is the harness that started the process, so a line is taken whole, however long. With
/// no thread to read on, the channel never ends, as if standard input were never closed.
pub fn stdin_lines() -> tokio::sync::mpsc::UnboundedReceiver<std::io::Result<String>> {
    use std::io::BufRead as _;
    let (sender, lines) = tokio::sync::mpsc::unbounded_channel();
    let held_open = sender.clone();
    let reading = std::thread::Builder::new().name("stdin".to_owned()).spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let failed = line.as_ref().is_err_and(|error| error.kind() != std::io::ErrorKind::InvalidData);
            if failed || sender.send(line).is_err() {
                break;
            }
        }
    });
    match reading {
        // The reader holds the only sender left: the channel ends when it does.
        Ok(_) => drop(held_open),
        Err(error) => {
            tracing::warn!("cannot read standard input ({error}): it is taken as never closed");
            std::mem::forget(held_open);
        }
    }
    lines
}
