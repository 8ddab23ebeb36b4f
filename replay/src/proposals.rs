//! `--llm MODEL` of the audit (and so of `trace-host process`): a chat model ([`trace_chat`], cached by
//! the request) asked for checkpoints with `trace_analysis::proposals`' question. Its proposals are placed
//! among the bundle's checkpoints by the rules' own placing, marked with the model's name, and judged by
//! the audit like every other: with `--prune`, kept only if they discriminate.

use std::path::PathBuf;

use anyhow::{Context, Result};
use trace_analysis::checkpoints::place_proposals;
use trace_analysis::evidence::Evidence;
use trace_analysis::proposals::{question, read_proposals};
use trace_manifest::postprocess::Checkpoint;
use trace_manifest::trajectory::Trajectory;

use crate::eval::Reference;
use trace_chat::ChatModel;

/// The model asked for checkpoints.
#[derive(Debug)]
pub struct Proposer {
    chat: ChatModel,
}

impl Proposer {
    /// `model` at `OPENAI_BASE_URL` (default OpenAI's), caching in `cache` (default
    /// [`trace_chat::default_cache_dir`] of `checkpoints`).
    pub fn from_env(model: &str, cache: Option<PathBuf>) -> Result<Proposer> {
        Ok(Proposer { chat: ChatModel::from_env("checkpoints", model, cache, "--llm-cache")? })
    }

    /// The bundle's checkpoints with the model's proposals placed among them.
    pub async fn propose(&self, reference: &Reference, recording: &Evidence) -> Result<Vec<Checkpoint>> {
        let messages = question(&reference.task, &reference.calls, recording);
        let completion = self
            .chat
            .complete(&messages, read_proposals)
            .await
            .with_context(|| format!("the model {} proposed no checkpoints", self.chat.model()))?;
        tracing::info!(
            model = self.chat.model(),
            proposals = completion.value.len(),
            cached = completion.cached,
            "checkpoints proposed"
        );
        let trajectory = Trajectory { task_id: reference.task.id.clone(), tool_calls: reference.calls.clone() };
        Ok(place_proposals(
            recording,
            &trajectory,
            &reference.credentials,
            &reference.checkpoints,
            completion.value,
            self.chat.model(),
        ))
    }
}
