//! Crowdsourced annotation's files: a coordinator's campaign (`campaign.json`), the journeys a person's
//! browsing history is grouped into, and what the person says of one (`annotation.json`, Odysseys' four
//! items).
//!
//! A campaign is read from a stranger's URL or file by the extension and by `trace-host`, so
//! [`Campaign::parse`] checks everything that later becomes a name (an object key, a task's source) or a
//! place (a website, a store): an invalid campaign is refused whole with a message a person can act on,
//! and nothing of it is used.

use std::collections::HashSet;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::eval::Rubric;
use crate::task::TaskType;

/// The file a campaign is written in.
pub const CAMPAIGN_FILE: &str = "campaign.json";
/// The annotation of a submitted task or journey, uploaded beside it.
pub const ANNOTATION_FILE: &str = "annotation.json";
/// A person's submitted journeys in a campaign's store (`<campaign>/<pseudonym>/journeys.jsonl`), and all
/// of them joined in a collected dataset.
pub const JOURNEYS_FILE: &str = "journeys.jsonl";
/// The name of a person's journeys among their submissions (`<campaign>/<pseudonym>/journeys`), which no
/// task of a campaign may take.
pub const JOURNEYS_SUBMISSION: &str = "journeys";
/// The shortest task label a journey may get: long enough to be a request to an assistant.
pub const MIN_LABEL_CHARS: usize = 15;
/// The longest task label a journey may get: a request to an assistant is a few sentences, and every
/// label is read by the people who use the dataset.
pub const MAX_LABEL_CHARS: usize = 1_000;
/// The longest id (of a campaign, one of its tasks, a pseudonym): ids become object keys.
pub const MAX_ID_CHARS: usize = 64;

/// The largest submitted zip `trace-host collect` takes: submissions come from strangers, and a recording
/// is tens of MB (its sender holds it in memory whole to send it).
pub const MAX_SUBMISSION_BYTES: u64 = 2 << 30;
/// The largest `<task>.annotation.json` `collect` takes: a few ids, a description and an answer.
pub const MAX_ANNOTATION_BYTES: u64 = 1 << 20;
/// The largest `journeys.jsonl` of one person `collect` takes: thousands of journeys of a few KB.
pub const MAX_JOURNEYS_BYTES: u64 = 64 << 20;
/// The longest line of a `journeys.jsonl` `collect` takes: a journey of hundreds of visits.
pub const MAX_JOURNEY_LINE_BYTES: usize = 4 << 20;

/// `campaign.json`: what a coordinator asks people to record, and where their submissions go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Campaign {
    /// Letters, digits, `-` and `_`: it starts every submission's key.
    pub id: String,
    pub title: String,
    /// What the people recording should know, shown before they start.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instructions: String,
    pub tasks: Vec<CampaignTask>,
    /// Whether the campaign asks for journeys from the people's browsing history too.
    #[serde(default)]
    pub journeys: bool,
    /// Where submissions go: an object store (`s3://bucket/prefix/`, `gs://...`, `az://...`) or a local
    /// directory (an absolute path or `file://` URL). None: the host's own data directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
}

/// One task of a campaign.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CampaignTask {
    /// Letters, digits, `-` and `_`; unique in the campaign. A recording of it has it as its source.
    pub id: String,
    /// The task, as the person is asked to do it.
    pub description: String,
    /// Where it starts: an `http` or `https` URL.
    pub website: String,
    pub task_type: TaskType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric: Option<Rubric>,
}

/// Why a campaign was refused, in words for the person who loaded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CampaignError(pub String);

impl fmt::Display for CampaignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "this campaign cannot be used: {}", self.0)
    }
}

impl std::error::Error for CampaignError {}

impl Campaign {
    /// A campaign from its JSON, checked: a well-formed id for it and each task (unique), a title, at least
    /// one task, each with a description and an `http(s)` website, and a destination TRACE can write to.
    pub fn parse(bytes: &[u8]) -> Result<Campaign, CampaignError> {
        let campaign: Campaign = serde_json::from_slice(bytes)
            .map_err(|error| CampaignError(format!("it is not a campaign file ({error})")))?;
        campaign.check()?;
        Ok(campaign)
    }

    fn check(&self) -> Result<(), CampaignError> {
        check_id("its id", &self.id)?;
        if self.title.trim().is_empty() {
            return Err(CampaignError("it has no title".to_owned()));
        }
        if self.tasks.is_empty() && !self.journeys {
            return Err(CampaignError("it asks for nothing: no task to record, and no journeys".to_owned()));
        }
        let mut seen = HashSet::new();
        for task in &self.tasks {
            check_id("a task id", &task.id)?;
            if task.id == JOURNEYS_SUBMISSION {
                return Err(CampaignError(format!(
                    "the task id {JOURNEYS_SUBMISSION:?} is the name of the journeys' submission: choose another"
                )));
            }
            if !seen.insert(task.id.as_str()) {
                return Err(CampaignError(format!("the task id {:?} is used twice", task.id)));
            }
            if task.description.trim().is_empty() {
                return Err(CampaignError(format!("the task {:?} has no description", task.id)));
            }
            let website = url::Url::parse(&task.website).ok().filter(|url| matches!(url.scheme(), "http" | "https"));
            if website.is_none() {
                return Err(CampaignError(format!(
                    "the task {:?} starts at {:?}, which is not an http or https URL",
                    task.id, task.website
                )));
            }
        }
        if let Some(destination) = &self.destination {
            Destination::parse(destination)?;
        }
        Ok(())
    }

    pub fn task(&self, id: &str) -> Option<&CampaignTask> {
        self.tasks.iter().find(|task| task.id == id)
    }

    /// Where a submission goes in the campaign's store: `<campaign>/<pseudonym>/<name>`, the same key
    /// however often it is sent, so that a retry replaces rather than duplicates.
    pub fn submission_key(&self, pseudonym: &str, name: &str) -> String {
        format!("{}/{pseudonym}/{name}", self.id)
    }
}

/// Where a campaign's submissions go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// An object store URL (`s3://`, `gs://`, `az://`), a prefix in it.
    Store(String),
    /// A local directory.
    Directory(String),
}

impl Destination {
    pub fn parse(text: &str) -> Result<Destination, CampaignError> {
        let refused = || {
            CampaignError(format!(
                "its destination {text:?} is neither an object store URL (s3://, gs://, az://) nor an absolute \
                 directory path"
            ))
        };
        if let Some(path) = text.strip_prefix("file://") {
            return if path.starts_with('/') { Ok(Destination::Directory(path.to_owned())) } else { Err(refused()) };
        }
        if text.starts_with('/') {
            return Ok(Destination::Directory(text.to_owned()));
        }
        let url = url::Url::parse(text).map_err(|_| refused())?;
        match url.scheme() {
            "s3" | "gs" | "az" | "abfs" if url.host_str().is_some_and(|bucket| !bucket.is_empty()) => {
                Ok(Destination::Store(text.to_owned()))
            }
            _ => Err(refused()),
        }
    }
}

/// An id that will be part of object keys and file names: 1 to [`MAX_ID_CHARS`] letters, digits, `-`
/// and `_`, starting with a letter or digit.
pub fn check_id(what: &str, id: &str) -> Result<(), CampaignError> {
    let well_formed = !id.is_empty()
        && id.len() <= MAX_ID_CHARS
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && id.starts_with(|c: char| c.is_ascii_alphanumeric());
    if well_formed {
        Ok(())
    } else {
        Err(CampaignError(format!(
            "{what} {id:?} must be 1 to {MAX_ID_CHARS} letters, digits, '-' or '_', starting with a letter or digit"
        )))
    }
}

/// The annotation uploaded beside a submitted recording (`<task>.annotation.json`): which campaign task
/// it is, by whom (a pseudonym), and what was submitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskAnnotation {
    pub campaign: String,
    /// The campaign's task the recording does.
    pub campaign_task: String,
    pub pseudonym: String,
    /// The recording's own task id.
    pub task_id: crate::task::TaskId,
    pub description: String,
    pub task_type: TaskType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The submitted zip's size and SHA-256 (hex), as the store must hold it.
    pub bundle_size: u64,
    pub bundle_sha256: String,
    /// When it was submitted, RFC 3339.
    pub submitted_at: String,
}

/// A submission waiting in (or sent from) the outbox: `outbox.json` in its folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OutboxEntry {
    /// `<campaign>/<pseudonym>/<task>`.
    pub name: String,
    /// The campaign's destination ([`Campaign::destination`]); `None` for the host's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    pub files: Vec<OutboxFile>,
    /// Attempts to send it so far.
    #[serde(default)]
    pub attempts: u32,
    /// Why the last attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When it was queued, RFC 3339.
    pub queued_at: String,
}

impl OutboxEntry {
    pub fn is_sent(&self) -> bool {
        self.files.iter().all(|file| file.landed)
    }
}

/// One file of a submission: where it goes and what must land there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OutboxFile {
    /// Its key under the destination.
    pub key: String,
    /// Its name in the submission's folder.
    pub file: String,
    pub size: u64,
    pub sha256: String,
    /// Whether it was put and read back alike.
    #[serde(default)]
    pub landed: bool,
}

/// `collected.json`: what `trace-host collect` took from a campaign's submissions, and what it did not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CollectReport {
    /// The submissions taken (`<campaign>/<pseudonym>/<task>`), in key order.
    pub submissions: Vec<String>,
    /// Submissions taken per campaign task.
    pub per_task: std::collections::BTreeMap<String, usize>,
    /// Submissions taken per pseudonym.
    pub per_pseudonym: std::collections::BTreeMap<String, usize>,
    /// Journeys joined into `journeys.jsonl`.
    pub journeys: usize,
    /// Journeys per pseudonym.
    #[serde(default)]
    pub journeys_per_pseudonym: std::collections::BTreeMap<String, usize>,
    /// The journeys' task labels, in characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_chars: Option<Spread>,
    /// Journeys by the person's judgement of feasibility (`feasible`, `infeasible`, `unsure`).
    #[serde(default)]
    pub feasibility: std::collections::BTreeMap<String, usize>,
    /// Journeys the person would want automated, and not.
    #[serde(default)]
    pub automate: AutomateCounts,
    pub skipped: Vec<CollectSkipped>,
}

/// The least, median and greatest of some counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Spread {
    pub min: usize,
    pub median: usize,
    pub max: usize,
}

impl Spread {
    /// The spread of `values`; `None` for none.
    pub fn of(mut values: Vec<usize>) -> Option<Spread> {
        values.sort_unstable();
        Some(Spread { min: *values.first()?, median: values[values.len() / 2], max: *values.last()? })
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AutomateCounts {
    pub yes: usize,
    pub no: usize,
}

/// A submission `collect` left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CollectSkipped {
    pub submission: String,
    pub reason: String,
}

/// A journey: visits of the person's browsing history that belong together, in time order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Journey {
    /// Stable for the same visits: derived from the first visit's id and time.
    pub id: String,
    /// How the visits were grouped.
    pub grouped_by: JourneySource,
    pub steps: Vec<JourneyStep>,
}

/// Who grouped a journey's visits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JourneySource {
    /// Chrome's own Journeys clusters, read from the profile's `History` database.
    Chrome,
    /// TRACE's rule over the visits (time gaps, referrer chains, search-result clicks).
    Trace,
}

/// One visit of a journey. Its URL has its secret-looking parameters replaced already.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JourneyStep {
    pub visit_id: u64,
    pub url: String,
    pub title: String,
    /// When it was visited, RFC 3339.
    pub time: String,
}

/// What a person says of a journey before submitting it (Odysseys' four items), and the steps they left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JourneyAnnotation {
    pub journey_id: String,
    /// The URL that shows the journey succeeded: one of its steps'.
    pub key_url: String,
    /// Whether they would want an assistant to do it for them.
    pub automate: bool,
    /// The journey as a request to an assistant, [`MIN_LABEL_CHARS`] to [`MAX_LABEL_CHARS`] characters.
    pub label: String,
    pub feasibility: Feasibility,
    /// Visit ids of steps the person dropped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<u64>,
}

/// One line of a campaign's `journeys.jsonl`: a journey a person submitted, its dropped steps left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JourneySubmission {
    pub campaign: String,
    pub pseudonym: String,
    /// The journey as submitted: the steps the person kept.
    pub journey: Journey,
    pub annotation: JourneyAnnotation,
    /// RFC 3339.
    pub submitted_at: String,
}

/// Could an assistant do it on the web as it is?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Feasibility {
    Feasible,
    Infeasible,
    Unsure,
}

impl Feasibility {
    pub fn as_str(self) -> &'static str {
        match self {
            Feasibility::Feasible => "feasible",
            Feasibility::Infeasible => "infeasible",
            Feasibility::Unsure => "unsure",
        }
    }
}

impl JourneyAnnotation {
    /// Checks the annotation against its journey: a key URL among the kept steps, a label long enough and
    /// not too long, dropped steps that are the journey's, and at least one step kept.
    pub fn check(&self, journey: &Journey) -> Result<(), CampaignError> {
        if self.journey_id != journey.id {
            return Err(CampaignError(format!("the annotation is of {:?}, not of {:?}", self.journey_id, journey.id)));
        }
        let label = self.label.trim().chars().count();
        if label < MIN_LABEL_CHARS {
            return Err(CampaignError(format!(
                "the task label has {label} characters; write it as a request to an assistant, at least \
                 {MIN_LABEL_CHARS} (\"Find a vegetarian recipe with chickpeas and save it\", not \"recipes\")"
            )));
        }
        if label > MAX_LABEL_CHARS {
            return Err(CampaignError(format!(
                "the task label has {label} characters, more than the {MAX_LABEL_CHARS} a request to an assistant \
                 needs: shorten it"
            )));
        }
        if let Some(unknown) = self.dropped.iter().find(|id| !journey.steps.iter().any(|step| step.visit_id == **id)) {
            return Err(CampaignError(format!("the dropped visit {unknown} is not a step of the journey")));
        }
        let kept: Vec<&JourneyStep> =
            journey.steps.iter().filter(|step| !self.dropped.contains(&step.visit_id)).collect();
        if kept.is_empty() {
            return Err(CampaignError("every step was dropped".to_owned()));
        }
        if !kept.iter().any(|step| step.url == self.key_url) {
            return Err(CampaignError("the key URL must be one of the journey's kept steps".to_owned()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn campaign(edit: impl FnOnce(&mut serde_json::Value)) -> Result<Campaign, CampaignError> {
        let mut json = serde_json::json!({
            "id": "shop-2026",
            "title": "Shopping tasks",
            "tasks": [
                {"id": "mug", "description": "Put a blue mug in the cart", "website": "http://127.0.0.1:8080/",
                 "task_type": "action"},
                {"id": "price", "description": "Find the red mug's price", "website": "https://shop.example/",
                 "task_type": "information_retrieval"}
            ],
            "journeys": true,
            "destination": "s3://submissions/trace/"
        });
        edit(&mut json);
        Campaign::parse(&serde_json::to_vec(&json).unwrap())
    }

    #[test]
    fn a_valid_campaign_is_read_and_names_its_submissions() {
        let parsed = campaign(|_| {}).unwrap();
        assert_eq!(parsed.tasks.len(), 2);
        assert_eq!(parsed.submission_key("p-3f2a", "mug.zip"), "shop-2026/p-3f2a/mug.zip");
        assert!(campaign(|json| json["destination"] = "/srv/submissions".into()).is_ok());
        assert!(
            campaign(|json| {
                json.as_object_mut().unwrap().remove("destination");
            })
            .is_ok()
        );
    }

    #[test]
    fn an_invalid_campaign_is_refused_with_what_is_wrong() {
        let refused = |edit: fn(&mut serde_json::Value)| campaign(edit).unwrap_err().to_string();
        assert!(refused(|json| json["id"] = "../etc".into()).contains("its id \"../etc\""));
        let nothing = |json: &mut serde_json::Value| {
            json["tasks"] = serde_json::json!([]);
            json["journeys"] = false.into();
        };
        assert!(refused(nothing).contains("asks for nothing"));
        assert!(campaign(|json| json["tasks"] = serde_json::json!([])).is_ok_and(|c| c.journeys), "journeys only");
        assert!(refused(|json| json["tasks"][1]["id"] = "mug".into()).contains("used twice"));
        assert!(refused(|json| json["tasks"][1]["id"] = "journeys".into()).contains("journeys' submission"));
        assert!(refused(|json| json["tasks"][0]["website"] = "javascript:alert(1)".into()).contains("not an http"));
        assert!(refused(|json| json["destination"] = "ftp://x/".into()).contains("destination"));
        assert!(refused(|json| json["destination"] = "relative/dir".into()).contains("destination"));
        assert!(refused(|json| json["surprise"] = 1.into()).contains("not a campaign file"));
        assert!(
            Campaign::parse(b"<html>not json</html>")
                .unwrap_err()
                .to_string()
                .starts_with("this campaign cannot be used")
        );
    }

    #[test]
    fn an_annotation_must_fit_its_journey() {
        let step =
            |visit_id, url: &str| JourneyStep { visit_id, url: url.into(), title: String::new(), time: String::new() };
        let journey = Journey {
            id: "j1".into(),
            grouped_by: JourneySource::Trace,
            steps: vec![step(1, "https://a.example/search?q=mug"), step(2, "https://a.example/cart")],
        };
        let annotation = JourneyAnnotation {
            journey_id: "j1".into(),
            key_url: "https://a.example/cart".into(),
            automate: true,
            label: "Put a blue mug in my cart".into(),
            feasibility: Feasibility::Feasible,
            dropped: vec![1],
        };
        assert!(annotation.check(&journey).is_ok());
        let short = JourneyAnnotation { label: "mugs".into(), ..annotation.clone() };
        assert!(short.check(&journey).unwrap_err().0.contains("at least 15"));
        let long = JourneyAnnotation { label: "mug ".repeat(MAX_LABEL_CHARS), ..annotation.clone() };
        assert!(long.check(&journey).unwrap_err().0.contains("more than the 1000"));
        let dropped_key = JourneyAnnotation { dropped: vec![2], ..annotation.clone() };
        assert!(dropped_key.check(&journey).unwrap_err().0.contains("key URL"));
        let stranger = JourneyAnnotation { dropped: vec![9], ..annotation };
        assert!(stranger.check(&journey).unwrap_err().0.contains("not a step"));
    }
}
