//! The processes trace-replay starts (Chromium, agents) and the ones those start in turn. An agent under
//! evaluation is an untrusted program: whatever it leaves running when its episode ends is ended here.
//!
//! An agent runs in a process group of its own, which a `setsid` escapes. So, on Linux, trace-replay
//! makes itself a child subreaper ([`adopt_orphans`]): a process whose parent exits is re-parented to
//! trace-replay rather than to init, however it detached, and [`end_orphans`] finds it among
//! trace-replay's children and kills it. To tell an orphan from a child trace-replay started on purpose
//! (a Chromium, an agent's shell), every such child is started through [`spawn_known`], which lists it
//! while it lives. To tell one episode's orphans from another's when episodes run in parallel, each agent
//! runs with [`EPISODE_ENV`] set to a mark of its own ([`AgentMark`]), which its descendants inherit: an
//! orphan carrying the mark of an episode still running is left to that episode, and one that shed the
//! mark (an emptied environment) is ended once no agent runs, at the latest when the run ends.
//! Chromium carries a mark too, [`BROWSER_MARK`]: the helpers it detaches (its crash handler) are left to
//! it while an episode ends, and ended with the rest when the run does ([`end_all_orphans`]).
//!
//! Elsewhere than Linux there is no subreaper: the process group is all there is. What a subreaper
//! cannot catch is an agent that outlives trace-replay itself (trace-replay killed by `SIGKILL`):
//! Chromium dies with it ([`crate::chromium`] asks for that), an agent's detached children do not.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The environment variable that marks an agent's processes with its episode.
pub const EPISODE_ENV: &str = "TRACE_EPISODE";

/// [`EPISODE_ENV`]'s value in Chromium's environment.
pub const BROWSER_MARK: &str = "browser";

/// How long ending orphans may take, when new ones keep coming (an agent that forks as fast as it is
/// killed): past it, what is left is said at warn.
const ENDING_ORPHANS: Duration = Duration::from_secs(3);

/// The children trace-replay started on purpose and has not yet waited for, by process id.
static KNOWN: Mutex<Option<HashSet<i32>>> = Mutex::new(None);
/// The marks of the agents running now.
static RUNNING: Mutex<Option<HashSet<String>>> = Mutex::new(None);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Makes trace-replay the reaper of its descendants' orphans (Linux; elsewhere nothing). Called before an
/// agent starts; once is enough, more is harmless.
pub fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    {
        static ADOPTING: std::sync::Once = std::sync::Once::new();
        ADOPTING.call_once(|| {
            if let Err(error) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
                tracing::warn!(
                    "cannot make trace-replay a child subreaper ({error}): an agent's detached processes \
                     may outlive its episode"
                );
            }
        });
    }
}

/// Starts a child with `spawn`, listed as trace-replay's own (not an orphan) until [`forget`] is called
/// with the id `id_of` gives it. The list is held while spawning, so that [`end_orphans`] never sees the
/// new child before it is listed.
pub fn spawn_known<C>(
    spawn: impl FnOnce() -> std::io::Result<C>,
    id_of: impl Fn(&C) -> Option<u32>,
) -> std::io::Result<C> {
    let mut known = lock(&KNOWN);
    let child = spawn()?;
    if let Some(id) = id_of(&child) {
        known.get_or_insert_with(HashSet::new).insert(id as i32);
    }
    Ok(child)
}

/// The child `id` was waited for: it is no longer trace-replay's.
pub fn forget(id: u32) {
    if let Some(known) = lock(&KNOWN).as_mut() {
        known.remove(&(id as i32));
    }
}

/// The mark of one running agent: [`EPISODE_ENV`]'s value in its environment. Dropping it says the agent
/// is done, and ends the orphans it left ([`end_orphans`]).
pub struct AgentMark(String);

impl AgentMark {
    pub fn new() -> AgentMark {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mark = format!("{}-{n}", std::process::id());
        lock(&RUNNING).get_or_insert_with(HashSet::new).insert(mark.clone());
        AgentMark(mark)
    }

    /// The variable to put in the agent's environment.
    pub fn variable(&self) -> (&'static str, &str) {
        (EPISODE_ENV, &self.0)
    }
}

impl Default for AgentMark {
    fn default() -> Self {
        AgentMark::new()
    }
}

impl Drop for AgentMark {
    fn drop(&mut self) {
        if let Some(running) = lock(&RUNNING).as_mut() {
            running.remove(&self.0);
        }
        end_orphans();
    }
}

/// Kills and reaps trace-replay's orphaned descendants (see the module's documentation): every child it
/// did not start on purpose, but one marked by an agent still running or by Chromium, and, while an agent
/// runs, one without a mark. Repeats until none is left (a killed orphan's own children are orphans
/// next), for `ENDING_ORPHANS` at most. Returns how many it killed.
pub fn end_orphans() -> usize {
    end(Spare::RunningAndBrowsers)
}

/// Kills and reaps every orphaned descendant, whatever its mark: for when no agent runs and every browser
/// is closed (a run's end).
pub fn end_all_orphans() -> usize {
    end(Spare::Nothing)
}

/// Which orphans are left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spare {
    RunningAndBrowsers,
    Nothing,
}

fn end(spare: Spare) -> usize {
    #[cfg(target_os = "linux")]
    {
        linux::end_orphans(spare)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = spare;
        0
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::*;
    use rustix::process::{Pid, Signal, WaitOptions};

    pub(super) fn end_orphans(spare: Spare) -> usize {
        let deadline = Instant::now() + ENDING_ORPHANS;
        let mut killed = 0;
        loop {
            let killed_now = {
                // Held through the pass: no child is started meanwhile, to be taken for an orphan.
                let known = lock(&KNOWN);
                let running = lock(&RUNNING).clone().unwrap_or_default();
                let mut killed_now = 0;
                for (id, zombie) in children() {
                    if known.as_ref().is_some_and(|known| known.contains(&id)) {
                        continue;
                    }
                    let Some(pid) = Pid::from_raw(id) else { continue };
                    if zombie {
                        // An orphan that is gone: reaped here, as nobody else waits for it.
                        let _ = rustix::process::waitpid(Some(pid), WaitOptions::NOHANG);
                        continue;
                    }
                    let spared = spare == Spare::RunningAndBrowsers
                        && match episode_mark(id) {
                            Some(mark) => mark == BROWSER_MARK || running.contains(&mark),
                            None => !running.is_empty(),
                        };
                    if !spared && rustix::process::kill_process(pid, Signal::KILL).is_ok() {
                        killed_now += 1;
                    }
                }
                killed_now
            };
            killed += killed_now;
            if killed_now == 0 {
                return killed;
            }
            if Instant::now() >= deadline {
                tracing::warn!(
                    "an agent's processes were still starting new ones after {ENDING_ORPHANS:?} of killing them; \
                     some may be left"
                );
                return killed;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// trace-replay's children, by process id, each with whether it is a zombie (`/proc/*/stat`: the
    /// state and the parent follow the command name, which is in parentheses and may hold any byte).
    fn children() -> Vec<(i32, bool)> {
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        entries
            .filter_map(|entry| {
                let id: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
                let stat = std::fs::read(format!("/proc/{id}/stat")).ok()?;
                let after_name = &stat[stat.iter().rposition(|byte| *byte == b')')? + 1..];
                let mut fields = after_name.split(|byte| *byte == b' ').filter(|field| !field.is_empty());
                let state = fields.next()?;
                let parent: i32 = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
                (parent == me).then_some((id, state == b"Z"))
            })
            .collect()
    }

    /// The [`EPISODE_ENV`] mark in a process's environment, if it has one that can be read.
    fn episode_mark(id: i32) -> Option<String> {
        let environ = std::fs::read(format!("/proc/{id}/environ")).ok()?;
        let prefix = format!("{EPISODE_ENV}=");
        environ
            .split(|byte| *byte == 0)
            .find_map(|entry| entry.strip_prefix(prefix.as_bytes()))
            .map(|mark| String::from_utf8_lossy(mark).into_owned())
    }
}
