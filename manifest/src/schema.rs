//! JSON Schemas of the format, generated from the types themselves so that they cannot drift from what the
//! code writes. They are committed under `docs/schema/v<FORMAT_VERSION>/`; a test fails when the committed
//! files differ from what the code generates (`UPDATE_SCHEMAS=1 cargo test -p trace-manifest` rewrites
//! them, which is a format change: review it as one).

use schemars::{Schema, schema_for};

use crate::audit::Audit;
use crate::bundle::{BundleManifest, StorageFile};
use crate::campaign::{
    Campaign, CollectReport, Journey, JourneyAnnotation, JourneySubmission, OutboxEntry, TaskAnnotation,
};
use crate::dataset::{BrowserUseHistory, TaskLine, WebArenaEntry, WebArenaResult};
use crate::eval::{AgentDone, AgentResponse, EvalResult, EvalSummary, Rubric};
use crate::event::EventRecord;
use crate::map::{EnvironmentMap, MapCoverage, MapSource, PageContext, Workflow};
use crate::postprocess::{Checkpoint, CredentialEntry};
use crate::report::{
    BundleSummary, DatasetReport, ExportReport, FidelityReport, ImportReport, Installed, ProcessReport, TaskSummary,
    TaskToRun, ValidateReport,
};
use crate::trajectory::Trajectory;
use crate::wire::{ClientMessage, HostMessage, Request};

/// Every schema, by file name.
pub fn schemas() -> Vec<(&'static str, Schema)> {
    vec![
        ("manifest.schema.json", schema_for!(BundleManifest)),
        ("event.schema.json", schema_for!(EventRecord)),
        ("storage.schema.json", schema_for!(StorageFile)),
        ("client-message.schema.json", schema_for!(ClientMessage)),
        ("host-message.schema.json", schema_for!(HostMessage)),
        ("host-request.schema.json", schema_for!(Request)),
        ("trajectory.schema.json", schema_for!(Trajectory)),
        ("credentials.schema.json", schema_for!(Vec<CredentialEntry>)),
        ("checkpoints.schema.json", schema_for!(Vec<Checkpoint>)),
        ("audit.schema.json", schema_for!(Audit)),
        ("dataset-task.schema.json", schema_for!(TaskLine)),
        ("webarena-manifest.schema.json", schema_for!(Vec<WebArenaEntry>)),
        ("webarena-result.schema.json", schema_for!(WebArenaResult)),
        ("browser-use-history.schema.json", schema_for!(BrowserUseHistory)),
        ("rubric.schema.json", schema_for!(Rubric)),
        ("campaign.schema.json", schema_for!(Campaign)),
        ("journey.schema.json", schema_for!(Journey)),
        ("journey-annotation.schema.json", schema_for!(JourneyAnnotation)),
        ("journey-submission.schema.json", schema_for!(JourneySubmission)),
        ("task-annotation.schema.json", schema_for!(TaskAnnotation)),
        ("outbox.schema.json", schema_for!(OutboxEntry)),
        ("collected.schema.json", schema_for!(CollectReport)),
        ("agent-done.schema.json", schema_for!(AgentDone)),
        ("agent-response.schema.json", schema_for!(AgentResponse)),
        ("eval-result.schema.json", schema_for!(EvalResult)),
        ("eval-summary.schema.json", schema_for!(EvalSummary)),
        ("map.schema.json", schema_for!(EnvironmentMap)),
        ("map-context.schema.json", schema_for!(PageContext)),
        ("map-workflow.schema.json", schema_for!(Workflow)),
        ("map-recording.schema.json", schema_for!(MapSource)),
        ("report-map-coverage.schema.json", schema_for!(MapCoverage)),
        ("report-tasks.schema.json", schema_for!(Vec<TaskSummary>)),
        ("report-install.schema.json", schema_for!(Vec<Installed>)),
        ("report-process.schema.json", schema_for!(ProcessReport)),
        ("report-export.schema.json", schema_for!(ExportReport)),
        ("report-validate.schema.json", schema_for!(ValidateReport)),
        ("report-import.schema.json", schema_for!(ImportReport)),
        ("report-dataset.schema.json", schema_for!(DatasetReport)),
        ("report-inspect.schema.json", schema_for!(BundleSummary)),
        ("report-fidelity.schema.json", schema_for!(FidelityReport)),
        ("report-audit.schema.json", schema_for!(Vec<Audit>)),
        ("report-list.schema.json", schema_for!(Vec<TaskToRun>)),
    ]
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn committed_json_schemas_match_the_code() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../docs/schema/v{}", crate::FORMAT_VERSION));
        let update = std::env::var_os("UPDATE_SCHEMAS").is_some();
        let mut stale = Vec::new();
        for (name, schema) in super::schemas() {
            let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
            let path = dir.join(name);
            if update {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &text).unwrap();
            } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                stale.push(name);
            }
        }
        assert!(
            stale.is_empty(),
            "{stale:?} in {} no longer match the code; if the format change is meant, run \
             UPDATE_SCHEMAS=1 cargo test -p trace-manifest and document it in docs/bundle-format.md",
            dir.display()
        );
    }
}
