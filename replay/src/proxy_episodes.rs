//! `trace-replay serve --proxy-port --episodes-on-stdin`: one proxy kept warm for episode after episode,
//! which a harness that resets often (BrowserGym's package) asks for on standard input. The bundle is
//! opened, its reference read, the certificates made and the port bound once; each episode is served
//! with a matcher, a page clock and start cookies of its own ([`Proxy::next_episode`]), recorded into its
//! own folder, and scored here as `trace-replay score` scores one, so that a reset costs no process.
//!
//! The caller writes one JSON object a line and reads one back for each:
//!
//! | asked | answered |
//! | --- | --- |
//! | `{"begin": {"episode": DIR}}` | `{"began": DIR}`: what crosses the proxy from now on is DIR's |
//! | `{"end": {"answer": TEXT, "steps": N}}` | `{"ended": {"episode": DIR, "result": {…}}}`: written and scored |
//! | `{"end": {"score": false}}` | `{"ended": {"episode": DIR}}`: written, not scored (an episode given up) |
//! | anything else | `{"error": TEXT}`: nothing changed |
//!
//! Between an `end` and the next `begin` the proxy serves an episode nobody records. Standard input
//! ending (the caller closed it, or is gone) writes the episode being recorded, unscored, and stops the
//! proxy, as a signal to stop does.

use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};
use trace_bundle::archive::ZipLimits;
use trace_manifest::bundle::TaskInfo;
use trace_manifest::eval::EvalResult;

use crate::archive::ReplayArchive;
use crate::eval::{Reference, score_proxied_with};
use crate::proxy::{Proxy, ProxyEpisode, ProxyOptions, announce};
use crate::session::Budget;
use crate::stop::stdin_lines;

/// What the caller asks, a line of standard input.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Asked {
    Begin {
        episode: PathBuf,
    },
    End {
        answer: Option<String>,
        /// The actions the agent took, as its harness counted them ([`score_proxied_with`]).
        steps: Option<usize>,
        #[serde(default = "scored")]
        score: bool,
    },
}

fn scored() -> bool {
    true
}

/// What the proxy answers, a line of standard output.
#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
enum Answered {
    Began(PathBuf),
    Ended {
        episode: PathBuf,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Box<EvalResult>>,
    },
    Error(String),
}

/// How episodes are recorded and scored.
pub struct EpisodeOptions {
    /// What each episode keeps of the bodies that cross it.
    pub budget: Budget,
    /// The limits its session is read back with to be scored.
    pub limits: ZipLimits,
}

/// Serves `archive` (read from `bundle`, whose `reference` scores the episodes) as a proxy, one episode
/// after another as standard input asks, until it ends or `stop` resolves; the episode being recorded
/// then is written, unscored.
pub async fn serve_episodes(
    bundle: &Path,
    archive: ReplayArchive,
    reference: Reference,
    options: &ProxyOptions,
    episodes: EpisodeOptions,
    stop: impl Future<Output = Result<()>>,
) -> Result<()> {
    let start_url = archive.start_url().to_owned();
    let task = archive.manifest.task.clone();
    let proxy = Proxy::start(archive, options, None).await?;
    announce(bundle, &start_url, &proxy)?;
    let mut lines = stdin_lines();
    let mut server = EpisodeServer { proxy, task, reference, episodes, recording: None };
    tokio::pin!(stop);
    loop {
        let line = tokio::select! {
            asked = &mut stop => {
                asked?;
                break;
            }
            line = lines.recv() => line,
        };
        let Some(line) = line else {
            tracing::info!("standard input ended: the proxy stops");
            break;
        };
        let answered = match line.map_err(anyhow::Error::from).and_then(|line| Ok(serde_json::from_str(&line)?)) {
            Ok(asked) => server.answer(asked).unwrap_or_else(|error| Answered::Error(format!("{error:#}"))),
            Err(error) => Answered::Error(format!("not a request of `--episodes-on-stdin`: {error}")),
        };
        let mut stdout = std::io::stdout().lock();
        serde_json::to_writer(&mut stdout, &answered)?;
        writeln!(stdout)?;
        stdout.flush()?;
    }
    server.end(None, None, false)?;
    print!("{}", server.proxy.close());
    Ok(())
}

/// The proxy and the episode it records.
struct EpisodeServer {
    proxy: Proxy,
    task: TaskInfo,
    reference: Reference,
    episodes: EpisodeOptions,
    recording: Option<ProxyEpisode>,
}

impl EpisodeServer {
    fn answer(&mut self, asked: Asked) -> Result<Answered> {
        match asked {
            Asked::Begin { episode } => {
                anyhow::ensure!(self.recording.is_none(), "an episode is being recorded: end it first");
                let recording = ProxyEpisode::create(&episode, self.episodes.budget)?;
                self.proxy.next_episode(Some(recording.session()));
                self.recording = Some(recording);
                Ok(Answered::Began(episode))
            }
            Asked::End { answer, steps, score } => {
                let (episode, result) = self
                    .end(answer, steps, score)?
                    .ok_or_else(|| anyhow::anyhow!("no episode is being recorded: begin one first"))?;
                Ok(Answered::Ended { episode, result: result.map(Box::new) })
            }
        }
    }

    /// Ends the episode being recorded, if one is: the proxy goes on with one nobody records, and the
    /// episode is written, and with `score` scored. Returns its folder and its result.
    fn end(
        &mut self,
        answer: Option<String>,
        steps: Option<usize>,
        score: bool,
    ) -> Result<Option<(PathBuf, Option<EvalResult>)>> {
        let Some(recording) = self.recording.take() else { return Ok(None) };
        let stats = self.proxy.next_episode(None);
        let episode = recording.finish(self.task.clone(), &stats)?;
        let result = score
            .then(|| score_proxied_with(&self.reference, &episode, answer, steps, self.episodes.limits))
            .transpose()?;
        Ok(Some((episode, result)))
    }
}
