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
//! An agent must not outlive trace-replay itself either (trace-replay killed by `SIGKILL`, which nothing
//! of it sees): Chromium dies with it ([`crate::chromium`] asks for that), and an agent runs under a
//! keeper ([`kept_agent`], [`keep_agent`]): trace-replay itself, started again as the agent's parent and
//! the subreaper of everything the agent starts, holding the reading end of a pipe only trace-replay
//! writes to. However trace-replay ends, the kernel closes the pipe's other end; the keeper reads its end,
//! kills the agent and whatever it detached, and exits. (A PID namespace would do the same where it can be
//! made, but its first process is an init, which ignores the polite `SIGTERM` an agent is stopped with;
//! the keeper works wherever a pipe and a subreaper do.) When the agent exits, the keeper ends what it
//! left too, and exits as the agent did.
//!
//! Elsewhere than Linux there is no subreaper: the process group is all there is.

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

/// The word that starts trace-replay as an agent's keeper ([`keep_agent`]); a hidden command.
pub const KEEPER_COMMAND: &str = "agent-keeper";

/// The file descriptor on which an agent's keeper reads to learn that trace-replay is gone: the reading
/// end of a pipe whose writing end only trace-replay holds.
const LIFELINE_FD: i32 = 3;

/// An agent's command run under its keeper, and the writing end of its lifeline: trace-replay holds it for
/// as long as the agent may run; once it is closed (dropped, or trace-replay gone), the keeper ends the
/// agent.
pub struct KeptAgent {
    pub command: tokio::process::Command,
    pub lifeline: std::io::PipeWriter,
    /// The reading end, held here until the keeper has its own copy: drop it once the command is spawned.
    pub reading_end: std::io::PipeReader,
}

/// `sh -c shell_command` under a keeper ([`keep_agent`]), tied to this process by a lifeline.
#[cfg(target_os = "linux")]
pub fn kept_agent(shell_command: &str) -> std::io::Result<KeptAgent> {
    use std::os::fd::{AsRawFd as _, FromRawFd as _};
    let (reading_end, lifeline) = std::io::pipe()?;
    let mut command = tokio::process::Command::new(std::env::current_exe()?);
    command.args([KEEPER_COMMAND, "--", "sh", "-c", shell_command]);
    let reading = reading_end.as_raw_fd();
    // SAFETY: between fork and exec only `dup2` and `fcntl`, which are async-signal-safe, are called;
    // nothing is allocated. The copy at LIFELINE_FD has no close-on-exec flag; the writing end, which std
    // made close-on-exec, stays behind.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            let from = rustix::fd::BorrowedFd::borrow_raw(reading);
            let mut to = std::mem::ManuallyDrop::new(rustix::fd::OwnedFd::from_raw_fd(LIFELINE_FD));
            if reading != LIFELINE_FD {
                rustix::io::dup2(from, &mut to)?;
            } else {
                rustix::io::fcntl_setfd(&*to, rustix::io::FdFlags::empty())?;
            }
            Ok(())
        });
    }
    Ok(KeptAgent { command, lifeline, reading_end })
}

/// `sh -c shell_command` as it is, elsewhere than Linux: no keeper.
#[cfg(not(target_os = "linux"))]
pub fn kept_agent(shell_command: &str) -> std::io::Result<KeptAgent> {
    let (reading_end, lifeline) = std::io::pipe()?;
    let mut command = tokio::process::Command::new("sh");
    command.arg("-c").arg(shell_command);
    Ok(KeptAgent { command, lifeline, reading_end })
}

/// The keeper of an agent (`trace-replay agent-keeper -- PROGRAM ARGS…`, started by [`kept_agent`]): runs
/// the agent as its child and the subreaper of everything the agent starts; ends the agent and all it
/// left when the lifeline closes (trace-replay is gone), and what the agent left when it exits, then
/// exits as the agent did. Never returns.
#[cfg(target_os = "linux")]
pub fn keep_agent(program_and_arguments: &[std::ffi::OsString]) -> ! {
    linux::keep_agent(program_and_arguments)
}

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

    /// See [`super::keep_agent`].
    pub(super) fn keep_agent(program_and_arguments: &[std::ffi::OsString]) -> ! {
        use std::os::fd::FromRawFd as _;
        let fail = |what: &str, error: &dyn std::fmt::Display| -> ! {
            eprintln!("trace-replay agent-keeper: {what}: {error}");
            std::process::exit(126)
        };
        if let Err(error) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
            fail("cannot become the agent's subreaper", &error);
        }
        // SAFETY: the descriptor was put there for this process by `kept_agent`, and nothing else owns it.
        #[allow(unsafe_code)]
        let lifeline = unsafe { std::fs::File::from_raw_fd(LIFELINE_FD) };
        // The agent must not hold it: its copy would keep the pipe open after trace-replay is gone.
        if let Err(error) = rustix::io::fcntl_setfd(&lifeline, rustix::io::FdFlags::CLOEXEC) {
            fail("no lifeline to trace-replay", &error);
        }
        // The agent is in this process's group: a signal trace-replay sends the group reaches it directly,
        // and the keeper, which handles these three without doing anything, waits for it to act on it.
        // (A handler, unlike an ignored signal, is not inherited through `exec`.)
        extern "C" fn noted(_: libc::c_int) {}
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            // SAFETY: the handler does nothing, which is async-signal-safe.
            #[allow(unsafe_code)]
            unsafe {
                libc::signal(signal, noted as *const () as libc::sighandler_t)
            };
        }
        let Some((program, arguments)) = program_and_arguments.split_first() else { fail("no agent to run", &"") };
        let agent = match std::process::Command::new(program).args(arguments).spawn() {
            Ok(agent) => agent.id() as i32,
            Err(error) => fail(&format!("cannot start {}", program.to_string_lossy()), &error),
        };
        std::thread::spawn(move || {
            let mut lifeline = lifeline;
            // Ends when trace-replay closes its end or is gone: nothing is ever written.
            let _ = std::io::copy(&mut lifeline, &mut std::io::sink());
            end_descendants();
            std::process::exit(137);
        });
        // Every child is waited for, orphans of the agent included, so that none is left a zombie.
        let status = loop {
            match rustix::process::wait(rustix::process::WaitOptions::empty()) {
                Ok(Some((pid, status))) if pid.as_raw_nonzero().get() == agent => break status,
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => {}
                Err(error) => fail("cannot wait for the agent", &error),
            }
        };
        end_descendants();
        if let Some(signal) = status.terminating_signal() {
            // SAFETY: back to the default action, then the signal the agent died of, on this process.
            #[allow(unsafe_code)]
            unsafe {
                libc::signal(signal, libc::SIG_DFL);
                libc::raise(signal);
            }
            std::process::exit(128 + signal);
        }
        std::process::exit(status.exit_status().unwrap_or(1))
    }

    /// Kills every process this one is the parent of, and what that orphans next (it is this process's,
    /// its subreaper's), until none is left, [`ENDING_ORPHANS`] at most.
    fn end_descendants() {
        let deadline = Instant::now() + ENDING_ORPHANS;
        loop {
            let children = children();
            if children.is_empty() || Instant::now() >= deadline {
                return;
            }
            for (id, zombie) in children {
                let Some(pid) = Pid::from_raw(id) else { continue };
                if !zombie {
                    let _ = rustix::process::kill_process(pid, Signal::KILL);
                }
                let _ = rustix::process::waitpid(Some(pid), WaitOptions::NOHANG);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
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
