//! The review page, `review.html?task=<id>`, opened when a campaign's task stops: what will be submitted,
//! before anything leaves the machine. The host sends the recording's steps in words, the credentials that
//! will be replaced (their placeholders and lengths, never their values), the checkpoints, and thumbnails
//! of the steps in as many messages as they need. The person may correct the description and the answer
//! (required for an information-retrieval task), say that a credential is no secret (a search typed into
//! a field the page made a password field), then submit it to the campaign, discard it, or discard it
//! and record it again. A submission's state is shown as the host's outbox has it: sent (landed and checked),
//! or waiting, with why.

use std::cell::RefCell;

use serde_json::json;
use trace_manifest::campaign::Campaign;
use trace_manifest::task::{TaskId, TaskType};
use trace_manifest::wire::{Answer, Request, ReviewSheet, TASK_BEING_WRITTEN, TASK_NOT_YET_STOPPED};
use wasm_bindgen_futures::{JsFuture, spawn_local};

use crate::chrome;
use crate::dom::{self, make, set_disabled, set_hidden, set_text, set_value, value};
use crate::host_link::request;

const BUTTONS: [&str; 3] = ["review-submit", "review-discard", "review-rerecord"];
/// How long the page waits for the host to finish writing a recording just stopped, asking every
/// [`STOP_POLL_MS`].
const STOP_WAIT_MS: f64 = 180_000.0;
const STOP_POLL_MS: f64 = 500.0;

thread_local! {
    static SHEET: RefCell<Option<ReviewSheet>> = const { RefCell::new(None) };
}

/// Renders the review page (called by [`crate::page_main`]).
pub fn main() {
    let Some(task_id) = dom::query_parameter("task").and_then(|id| TaskId::try_from(id).ok()) else {
        return set_text("review-message", "This page reviews a recording: open it from the recorder's popup.");
    };
    for (id, action) in
        [("review-submit", Action::Submit), ("review-discard", Action::Discard), ("review-rerecord", Action::Rerecord)]
    {
        if let Some(button) = dom::element(id) {
            dom::on_click(&button, move || spawn_local(act(action)));
        }
    }
    spawn_local(load(task_id));
}

async fn load(task_id: TaskId) {
    set_text("review-message", "Loading the recording…");
    // The page opens as Stop is pressed, while the host may still be writing the recording: a long one takes
    // a while, so ask again until it is ready.
    let mut waited_ms = 0.0;
    let sheet = loop {
        match request(&Request::Review { task_id: task_id.clone() }).await {
            Ok(Answer::Review(sheet)) => break sheet,
            Ok(_) => return set_text("review-message", "trace-host answered something else"),
            Err(error)
                if waited_ms < STOP_WAIT_MS
                    && (error.contains(TASK_NOT_YET_STOPPED) || error.contains(TASK_BEING_WRITTEN)) =>
            {
                set_text("review-message", "trace-host is still writing the recording…");
                chrome::sleep(STOP_POLL_MS).await;
                waited_ms += STOP_POLL_MS;
            }
            Err(error) => return set_text("review-message", &format!("Cannot review {task_id}: {error}")),
        }
    };
    render(&sheet);
    SHEET.with(|kept| *kept.borrow_mut() = Some(sheet));
    set_text("review-message", "");
    load_thumbnails(task_id).await;
}

fn render(sheet: &ReviewSheet) {
    set_hidden("review", false);
    set_text("review-task", &format!("{} · {} · {}", sheet.source, sheet.task_type.as_str(), sheet.website));
    set_value("review-description", &sheet.description);
    set_value("review-answer", sheet.answer.as_deref().unwrap_or_default());
    if sheet.task_type == TaskType::InformationRetrieval {
        let _ = dom::element("review-answer").map(|answer| answer.set_attribute("required", ""));
        set_text("review-answer-label", "Answer (required: what you found)");
    }
    if let Some(list) = dom::element("review-steps") {
        list.set_text_content(None);
        for step in &sheet.steps {
            let item = make("li", &[("data-step", &step.index.to_string())], None);
            let _ = item.append_child(&make("img", &[("alt", ""), ("hidden", "")], None));
            let _ = item.append_child(&make("span", &[], Some(&step.text)));
            let _ = list.append_child(&item);
        }
        if sheet.steps_left_out > 0 {
            let more = format!("… and {} more steps", sheet.steps_left_out);
            let _ = list.append_child(&make("li", &[("class", "muted")], Some(&more)));
        }
    }
    render_secrets_and_checkpoints(sheet);
}

/// The credentials, each with a button for the person to say it is no secret, and the checkpoints: what
/// changes when they do.
fn render_secrets_and_checkpoints(sheet: &ReviewSheet) {
    if let Some(list) = dom::element("review-credentials") {
        list.set_text_content(None);
        if sheet.credentials.is_empty() {
            let _ = list.append_child(&make("li", &[], Some("No password or other secret was typed.")));
        }
        for credential in &sheet.credentials {
            let text = format!(
                "What you typed into {} on {} ({} characters) is replaced by {} ",
                credential.field, credential.site, credential.characters, credential.placeholder
            );
            let item = make("li", &[("data-placeholder", &credential.placeholder)], Some(&text));
            let button = make("button", &[("type", "button"), ("class", "review-not-secret")], Some("Not a secret"));
            let (task_id, placeholder) = (sheet.task_id.clone(), credential.placeholder.clone());
            dom::on_click(&button, move || spawn_local(not_a_secret(task_id.clone(), placeholder.clone())));
            let _ = item.append_child(&button);
            let _ = list.append_child(&item);
        }
    }
    if let Some(list) = dom::element("review-checkpoints") {
        list.set_text_content(None);
        for checkpoint in &sheet.checkpoints {
            let _ = list.append_child(&make("li", &[], Some(checkpoint)));
        }
    }
}

/// The person says what they typed behind `placeholder` is no secret (a search in a field the page made a
/// password field): it stays as typed in the submission.
async fn not_a_secret(task_id: TaskId, placeholder: String) {
    set_text("review-message", "Keeping what you typed as it is…");
    match request(&Request::NotASecret { task_id, placeholder: placeholder.clone() }).await {
        Ok(Answer::Review(sheet)) => {
            render_secrets_and_checkpoints(&sheet);
            SHEET.with(|kept| *kept.borrow_mut() = Some(sheet));
            set_text("review-message", &format!("{placeholder} is no secret now: what you typed stays as it is."));
        }
        Ok(_) => set_text("review-message", "trace-host answered something else"),
        Err(error) => set_text("review-message", &format!("Nothing was changed: {error}")),
    }
}

/// Asks for the thumbnails page after page, each put on its step as it comes.
async fn load_thumbnails(task_id: TaskId) {
    let mut from = 0;
    loop {
        let Ok(Answer::Thumbnails { thumbnails, next, .. }) =
            request(&Request::Thumbnails { task_id: task_id.clone(), from }).await
        else {
            return;
        };
        for thumbnail in thumbnails {
            let selector = format!("li[data-step=\"{}\"] img", thumbnail.step);
            let Some(image) = dom::document().and_then(|document| document.query_selector(&selector).ok().flatten())
            else {
                continue;
            };
            let _ = image.set_attribute("src", &format!("data:image/jpeg;base64,{}", thumbnail.jpeg));
            let _ = image.set_attribute("width", &thumbnail.width.to_string());
            let _ = image.set_attribute("height", &thumbnail.height.to_string());
            let _ = image.remove_attribute("hidden");
        }
        match next {
            Some(next) if next > from => from = next,
            _ => return,
        }
    }
}

#[derive(Clone, Copy)]
enum Action {
    Submit,
    Discard,
    Rerecord,
}

async fn act(action: Action) {
    let Some(sheet) = SHEET.with(|kept| kept.borrow().clone()) else { return };
    BUTTONS.iter().for_each(|id| set_disabled(id, true));
    let outcome = match action {
        Action::Submit => submit(&sheet).await,
        Action::Discard => discard(&sheet).await.map(|()| "Discarded: nothing of it is kept.".to_owned()),
        Action::Rerecord => rerecord(&sheet).await,
    };
    match outcome {
        Ok(done) => {
            set_text("review-message", &done);
            // A discarded recording is gone; a submitted one may be submitted again after a correction.
            if matches!(action, Action::Submit) {
                BUTTONS.iter().for_each(|id| set_disabled(id, false));
            }
        }
        Err(error) => {
            set_text("review-message", &error);
            BUTTONS.iter().for_each(|id| set_disabled(id, false));
        }
    }
}

/// Saves the person's corrections, then submits to the loaded campaign; says where the submission is.
async fn submit(sheet: &ReviewSheet) -> Result<String, String> {
    let Some((campaign_text, campaign)) = crate::campaign::stored_campaign_text() else {
        return Err("No campaign is loaded: load it in the recorder's popup first.".to_owned());
    };
    let campaign_task = campaign_task(&campaign, sheet)?;
    let answer = Some(value("review-answer")).filter(|answer| !answer.trim().is_empty());
    if sheet.task_type == TaskType::InformationRetrieval && answer.is_none() {
        return Err("Write your answer first: this task asks for what you found.".to_owned());
    }
    set_text("review-message", "Saving your corrections…");
    let annotate =
        Request::Annotate { task_id: sheet.task_id.clone(), description: value("review-description"), answer };
    request(&annotate).await?;
    set_text("review-message", "Submitting: redacting, uploading and checking what landed…");
    let submit = Request::Submit {
        task_id: sheet.task_id.clone(),
        campaign: campaign_text,
        campaign_task: campaign_task.clone(),
        pseudonym: crate::campaign::pseudonym(),
    };
    let Answer::Outbox { submissions } = request(&submit).await? else {
        return Err("trace-host answered something else".to_owned());
    };
    let name = format!("{}/{}/{campaign_task}", campaign.id, crate::campaign::pseudonym());
    let entry = submissions.iter().find(|entry| entry.name == name).ok_or("the submission is not in the outbox")?;
    set_text("review-state", &crate::campaign::submission_state(entry));
    Ok(match entry.is_sent() {
        true => format!("Submitted as {name}: it landed in the campaign's store and was checked."),
        false => format!(
            "Kept for sending as {name}: {}. It goes when you press \"Send waiting submissions\" in the popup.",
            entry.last_error.as_deref().unwrap_or("not sent yet")
        ),
    })
}

fn campaign_task(campaign: &Campaign, sheet: &ReviewSheet) -> Result<String, String> {
    match campaign.task(&sheet.source) {
        Some(task) => Ok(task.id.clone()),
        None => Err(format!("This recording ({}) is not a task of the campaign {:?}.", sheet.source, campaign.title)),
    }
}

async fn discard(sheet: &ReviewSheet) -> Result<(), String> {
    request(&Request::Discard { task_id: sheet.task_id.clone() }).await?;
    set_hidden("review", true);
    Ok(())
}

/// Discards the recording and starts the same task again in a new tab, as its Record button would.
async fn rerecord(sheet: &ReviewSheet) -> Result<String, String> {
    discard(sheet).await?;
    let start = json!({
        "command": "start", "source": sheet.source, "task_type": sheet.task_type.as_str(),
        "description": value("review-description"), "website": sheet.website
    });
    let reply =
        JsFuture::from(chrome::send_message(&chrome::to_js(&start))).await.map_err(|error| format!("{error:?}"))?;
    match chrome::from_js(&reply)["error"].as_str() {
        Some(error) => Err(format!("Discarded, but the recording could not start again: {error}")),
        None => Ok("Discarded. Recording again in a new tab: stop it from the popup when you are done.".to_owned()),
    }
}
