//! The files post-processing (`trace-host process`) adds to a bundle, beside the recording they are derived
//! from: `trajectory.json` (a [`crate::trajectory::Trajectory`]), `credentials.json` (the secrets the
//! trajectory names by placeholder), `checkpoints.json` (states that mark real progress towards the task's
//! goal, each with a predicate that can be checked) and `ignored.json` (URL substrings replay may fail at
//! once). They are indexed in `manifest.json` like every other file.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::event::ElementDescriptor;
use crate::trajectory::Credential;

pub const TRAJECTORY_FILE: &str = "trajectory.json";
pub const CREDENTIALS_FILE: &str = "credentials.json";
pub const CHECKPOINTS_FILE: &str = "checkpoints.json";
pub const IGNORED_FILE: &str = "ignored.json";

/// Every file post-processing writes, so that it can replace a previous run's.
pub const FILES: [&str; 4] = [TRAJECTORY_FILE, CREDENTIALS_FILE, CHECKPOINTS_FILE, IGNORED_FILE];

/// One entry of `credentials.json`: a secret the person typed, where they typed it, and the placeholder the
/// trajectory says instead. The only file of the derived ones that holds a secret's value.
#[derive(Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CredentialEntry {
    /// The host of the page the field is in.
    pub site: String,
    /// The field's name or id, sanitized (see [`Credential::field`]).
    pub field: String,
    /// The field, as the recorder described it.
    pub descriptor: ElementDescriptor,
    pub value: String,
    /// `{{credentials.<site>.<field>}}`, as it appears in `trajectory.json`.
    pub placeholder: String,
}

impl From<&Credential> for CredentialEntry {
    fn from(credential: &Credential) -> CredentialEntry {
        CredentialEntry {
            site: credential.site.clone(),
            field: credential.field.clone(),
            descriptor: credential.target.clone(),
            value: credential.value.clone(),
            placeholder: credential.placeholder(),
        }
    }
}

impl From<&CredentialEntry> for Credential {
    fn from(entry: &CredentialEntry) -> Credential {
        Credential {
            site: entry.site.clone(),
            field: entry.field.clone(),
            target: entry.descriptor.clone(),
            value: entry.value.clone(),
        }
    }
}

// By hand, so that logging an entry never prints the secret.
impl std::fmt::Debug for CredentialEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialEntry")
            .field("placeholder", &self.placeholder)
            .field("descriptor", &self.descriptor.selector)
            .field("value", &"<redacted>")
            .finish()
    }
}

/// One entry of `checkpoints.json`: a state the demonstration reached on its way to the goal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Checkpoint {
    /// `cp1`, `cp2`, … in the order the demonstration reached them.
    pub id: String,
    /// Why this state marks progress, for people reading the file.
    pub reason: String,
    pub predicate: Predicate,
    /// The `events.jsonl` ids that show the state reached.
    pub event_ids: Vec<u64>,
    /// The index in `trajectory.json`'s `tool_calls` of the call that reached it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    /// What the state is to the task. Absent in checkpoints chosen before roles were written: then every
    /// `request` is a state change and the last checkpoint is the final state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<CheckpointRole>,
    /// The model that proposed it (`trace-host process --llm`), when a model did; kept because the audit
    /// found that it discriminates. Absent for the rules' own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed_by: Option<String>,
}

/// What a checkpoint's state is to the task. An action task succeeds when every state change and every
/// final state is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointRole {
    /// The site's state changed (a request that is no lookup).
    StateChange,
    /// A page on the way was reached.
    Page,
    /// What the final page shows that the start did not.
    FinalState,
}

/// What must be true for a checkpoint to count as reached. URL patterns are substrings of the URL without
/// its scheme, as in `ignored.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Predicate {
    /// A request that changes the site's state succeeded (2xx or 3xx).
    Request {
        method: String,
        url_pattern: String,
        /// Fields the request's form or JSON body must carry with these values; never a secret.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        body_fields: BTreeMap<String, String>,
        /// Fields that must carry one of the task's credentials, each named by its placeholder
        /// (`{{credentials.<site>.<field>}}`, see `credentials.json`): a sign-in counts only with the
        /// credential the agent was given. The value itself is never written here.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        credential_fields: BTreeMap<String, String>,
    },
    /// A frame the page sent on a WebSocket whose URL contains `url_pattern`, carrying these fields: a
    /// state change a server-driven page makes over its socket, as a request does over HTTP.
    Frame {
        url_pattern: String,
        /// Fields the frame's JSON must carry with these values (named by path as body fields are); never a
        /// secret, never empty.
        fields: BTreeMap<String, String>,
    },
    /// A main-frame page whose URL contains `pattern` was reached.
    Url { pattern: String },
    /// A main-frame page shows `text`.
    Text { text: String },
}
