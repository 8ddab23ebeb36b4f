//! The browsers a run of episodes keeps warm. An episode takes a browser launched for its recording's
//! viewport, if one is idle, or launches one; begins in a browser context of its own (its replayed clock
//! starting then); and gives the browser back when its agent is done, its context discarded with all it
//! held ([`Replay::end_episode`]). So an episode's reset is a context, not a browser's launch, and nothing
//! of one episode reaches the next: not cookies, storage, databases, caches, service workers, history nor
//! the clock. A run that wants a browser of its own for every episode (`eval --browser-per-episode`) gets
//! one, its pages in the browser's default context, as before browsers were kept.

use std::sync::Arc;

use anyhow::Result;

use crate::archive::ReplayArchive;
use crate::responder::Stats;
use crate::serve::{Options, Replay, WarmBrowser};
use crate::session::SessionRecorder;

/// The idle browsers of a run. At most as many are kept as episodes ran at once: an episode gives its
/// browser back before the next takes one.
pub struct Browsers {
    options: Options,
    /// Keep browsers between episodes (else each episode launches and closes its own).
    keep: bool,
    idle: std::sync::Mutex<Vec<WarmBrowser>>,
}

impl Browsers {
    /// Browsers launched with `options`, kept between episodes when `keep`.
    pub fn new(options: Options, keep: bool) -> Browsers {
        Browsers { options, keep, idle: std::sync::Mutex::default() }
    }

    /// A browser serving `archive` from now, its session recorded into `session`.
    pub async fn episode(&self, archive: Arc<ReplayArchive>, session: Arc<SessionRecorder>) -> Result<Replay> {
        if !self.keep {
            let browser = WarmBrowser::launch(&self.options, archive.viewport).await?;
            return browser.begin(archive, &self.options, Some(session), false).await;
        }
        if let Some(browser) = self.take_idle(&archive) {
            match browser.begin(archive.clone(), &self.options, Some(session.clone()), true).await {
                Ok(replay) => return Ok(replay),
                // A browser that died while idle is replaced.
                Err(error) => tracing::warn!("an idle browser could not begin the episode; launching one: {error:#}"),
            }
        }
        let browser = WarmBrowser::launch(&self.options, archive.viewport).await?;
        browser.begin(archive, &self.options, Some(session), true).await
    }

    /// Ends the episode `replay` serves and returns what was served; its browser is kept for the next.
    pub async fn give_back(&self, replay: Replay) -> Result<Stats> {
        if !self.keep {
            return replay.close().await;
        }
        let (stats, browser) = replay.end_episode().await;
        if let Some(browser) = browser {
            self.idle.lock().expect("no panics while locked").push(browser);
        }
        Ok(stats)
    }

    /// Closes every idle browser.
    pub async fn close(&self) {
        let idle = std::mem::take(&mut *self.idle.lock().expect("no panics while locked"));
        futures::future::join_all(idle.into_iter().map(WarmBrowser::close)).await;
    }

    fn take_idle(&self, archive: &ReplayArchive) -> Option<WarmBrowser> {
        let mut idle = self.idle.lock().expect("no panics while locked");
        let found = idle.iter().position(|browser| browser.shows(archive.viewport))?;
        Some(idle.swap_remove(found))
    }
}
