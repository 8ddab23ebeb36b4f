//! The optional judge of `trace-replay eval --judge MODEL`: asks a chat model ([`trace_chat`], cached by
//! the request) the questions that `trace_analysis::judge` derives from an episode. The same episode asks
//! the same questions, so a re-scored run is answered from the cache, costs nothing and gives the same
//! verdicts.
//!
//! A judge that fails (unreachable, refusing, answering without a verdict) costs the episode its judge
//! verdicts, noted in `judge.error`, never its deterministic scores. Replies without a verdict are not
//! cached.

use std::path::PathBuf;

use anyhow::Result;
use trace_analysis::judge::{Episode, Question, read_verdict};
use trace_analysis::score;
use trace_manifest::eval::{EvalResult, JudgeScores, JudgeVerdict, JudgedCheckpoint, Rubric};
use trace_manifest::postprocess::Checkpoint;

use trace_chat::ChatModel;

/// A judge: the chat model that verdicts are asked of.
#[derive(Debug)]
pub struct Judge {
    chat: ChatModel,
}

impl Judge {
    /// A judge of `model` at `OPENAI_BASE_URL` (default OpenAI's), caching in `cache` (default
    /// [`trace_chat::default_cache_dir`] of `judge`).
    pub fn from_env(model: &str, cache: Option<PathBuf>) -> Result<Judge> {
        Ok(Judge { chat: ChatModel::from_env("judge", model, cache, "--judge-cache")? })
    }

    pub fn new(model: &str, base_url: &str, api_key: Option<String>, cache: PathBuf) -> Result<Judge> {
        Ok(Judge { chat: ChatModel::new("judge", model, base_url, api_key, cache)? })
    }

    /// The verdict on one question, from the cache or the model, and whether it came from the cache.
    pub async fn ask(&self, question: &Question) -> Result<(JudgeVerdict, bool)> {
        let completion = self.chat.complete(&question.messages, read_verdict).await?;
        let (satisfied, reason) = completion.value;
        Ok((JudgeVerdict { satisfied, reason, input_hash: completion.input_hash }, completion.cached))
    }
}

/// Asks the judge about an episode and records its verdicts in `result`: the binary judge, the checkpoint
/// judge (in order, stopping at the first missed) and the rubric's text items, whose verdicts enter the
/// rubric's scores and the SPL. A failure stops the asking and is kept in `judge.error`, with the verdicts
/// given before it.
pub async fn judge_episode(
    judge: &Judge,
    episode: &Episode<'_>,
    checkpoints: &[Checkpoint],
    rubric: Option<&Rubric>,
    result: &mut EvalResult,
) {
    let mut scores = JudgeScores {
        model: judge.chat.model().to_owned(),
        success: None,
        checkpoints: Vec::new(),
        partial_credit: 0.0,
        cached: 0,
        asked: 0,
        error: None,
    };
    let mut rubric_verdicts = Vec::new();
    if let Err(error) = ask_all(judge, episode, checkpoints, rubric, &mut scores, &mut rubric_verdicts).await {
        tracing::warn!("the judge failed on {}: {error:#}", result.task_id);
        scores.error = Some(format!("{error:#}"));
    }
    let reached = scores.checkpoints.iter().take_while(|c| c.verdict.satisfied).count();
    scores.partial_credit = if checkpoints.is_empty() { 1.0 } else { reached as f64 / checkpoints.len() as f64 };
    for (id, verdict) in rubric_verdicts {
        if let Some(outcome) = result.rubric.items.iter_mut().find(|outcome| outcome.id == id) {
            outcome.satisfied = Some(verdict.satisfied);
            outcome.evidence = Some(verdict.reason);
            outcome.judged_by = Some(judge.chat.model().to_owned());
        }
    }
    score::total_rubric(&mut result.rubric);
    // The judge changes the rubric's scores, not the rules' success the navigation SPL weighs.
    result.spl = score::spl(&result.rubric, result.steps, result.spl.navigation);
    result.judge = Some(scores);
}

async fn ask_all(
    judge: &Judge,
    episode: &Episode<'_>,
    checkpoints: &[Checkpoint],
    rubric: Option<&Rubric>,
    scores: &mut JudgeScores,
    rubric_verdicts: &mut Vec<(String, JudgeVerdict)>,
) -> Result<()> {
    scores.success = Some(ask_counted(judge, &episode.success_question(), scores).await?);
    for checkpoint in checkpoints {
        let verdict = ask_counted(judge, &episode.checkpoint_question(checkpoint), scores).await?;
        let reached = verdict.satisfied;
        scores.checkpoints.push(JudgedCheckpoint { id: checkpoint.id.clone(), verdict });
        if !reached {
            break;
        }
    }
    for item in rubric.map(|rubric| rubric.items.as_slice()).unwrap_or_default() {
        if let Some(question) = episode.rubric_question(item) {
            rubric_verdicts.push((item.id.clone(), ask_counted(judge, &question, scores).await?));
        }
    }
    Ok(())
}

async fn ask_counted(judge: &Judge, question: &Question, scores: &mut JudgeScores) -> Result<JudgeVerdict> {
    let (verdict, cached) = judge.ask(question).await?;
    if cached {
        scores.cached += 1;
    } else {
        scores.asked += 1;
    }
    Ok(verdict)
}
