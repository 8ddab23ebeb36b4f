//! The popup's campaign: loaded from a URL (a cross-origin fetch, so the coordinator's server must allow
//! it with `Access-Control-Allow-Origin`, as object stores and raw file hosts can) or from a file, checked
//! whole by [`Campaign::parse`] before anything of it is kept, and kept in the extension's own
//! `localStorage` with the person's pseudonym and the campaign's tasks they recorded. Each task has a
//! Record button, which the popup answers by starting the task with its id as the source
//! ([`task_to_record`]), and the state of its submission as the host's outbox says (sent, or waiting and
//! why). An invalid campaign changes nothing; the message says why.

use trace_manifest::campaign::{Campaign, CampaignTask, OutboxEntry};
use trace_manifest::wire::{Answer, Request};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Document, HtmlButtonElement, HtmlInputElement, Storage};

const CAMPAIGN_KEY: &str = "trace.campaign";
const DONE_KEY: &str = "trace.campaign.done";
const PSEUDONYM_KEY: &str = "trace.pseudonym";

/// Wires the campaign section and shows the campaign kept from before, if any.
pub fn init(document: &Document) {
    if let Some(button) = document.get_element_by_id("campaign-fetch") {
        let handler = Closure::<dyn FnMut()>::new(|| wasm_bindgen_futures::spawn_local(load_from_url()));
        let _ = button.add_event_listener_with_callback("click", handler.as_ref().unchecked_ref());
        handler.forget(); // lives as long as the page
    }
    if let Some(input) = document.get_element_by_id("campaign-file") {
        let handler = Closure::<dyn FnMut()>::new(|| wasm_bindgen_futures::spawn_local(load_from_file()));
        let _ = input.add_event_listener_with_callback("change", handler.as_ref().unchecked_ref());
        handler.forget();
    }
    if let Some(button) = document.get_element_by_id("campaign-send") {
        crate::dom::on_click(&button, || wasm_bindgen_futures::spawn_local(show_submissions(true)));
    }
    if let Some(button) = document.get_element_by_id("campaign-journeys") {
        crate::dom::on_click(&button, || {
            let url = serde_json::json!({"url": "journeys.html", "active": true});
            let _ = crate::chrome::tabs_create(&crate::chrome::to_js(&url));
        });
    }
    render();
}

/// Shows each task's submission as the host's outbox has it; with `send`, the waiting ones are tried again.
async fn show_submissions(send: bool) {
    let Some(campaign) = stored_campaign() else { return };
    if send {
        crate::dom::set_text("campaign-submissions", "Sending…");
    }
    let submissions = match crate::host_link::request(&Request::Outbox { send }).await {
        Ok(Answer::Outbox { submissions }) => submissions,
        other => {
            let why = other.err().unwrap_or_else(|| "trace-host answered something else".to_owned());
            return crate::dom::set_text("campaign-submissions", &format!("Submissions unknown: {why}"));
        }
    };
    let prefix = format!("{}/{}/", campaign.id, pseudonym());
    let mine: Vec<&OutboxEntry> = submissions.iter().filter(|entry| entry.name.starts_with(&prefix)).collect();
    let waiting = mine.iter().filter(|entry| !entry.is_sent()).count();
    crate::dom::set_text(
        "campaign-submissions",
        &format!("{} submitted, {waiting} waiting to be sent.", mine.len() - waiting),
    );
    crate::dom::set_hidden("campaign-send", waiting == 0);
    for entry in mine {
        let what = entry.name.trim_start_matches(&prefix);
        let Some(state) = crate::dom::document()
            .and_then(|document| document.query_selector(&format!("li[data-task=\"{what}\"] .submission")).ok())
            .flatten()
        else {
            continue;
        };
        state.set_text_content(Some(&submission_state(entry)));
    }
}

/// A submission's state in words.
pub fn submission_state(entry: &OutboxEntry) -> String {
    match (&entry.last_error, entry.is_sent()) {
        (_, true) => "submitted".to_owned(),
        (Some(error), false) => format!("waiting to be sent (attempt {}: {error})", entry.attempts),
        (None, false) => "waiting to be sent".to_owned(),
    }
}

async fn load_from_url() {
    let url = crate::dom::value("campaign-url");
    let Some(window) = web_sys::window() else { return };
    let text = async {
        let response: web_sys::Response = JsFuture::from(window.fetch_with_str(&url)).await?.dyn_into()?;
        if !response.ok() {
            return Err(JsValue::from_str(&format!("the server answered {}", response.status())));
        }
        JsFuture::from(response.text()?).await?.as_string().ok_or_else(|| JsValue::from_str("not text"))
    };
    match text.await {
        Ok(text) => accept(&text),
        Err(error) => message(&format!("Cannot load {url}: {}", describe(&error))),
    }
}

async fn load_from_file() {
    let file = crate::dom::element("campaign-file")
        .and_then(|element| element.dyn_into::<HtmlInputElement>().ok())
        .and_then(|input| input.files())
        .and_then(|files| files.get(0));
    let Some(file) = file else { return };
    match JsFuture::from(file.text()).await.map(|text| text.as_string().unwrap_or_default()) {
        Ok(text) => accept(&text),
        Err(error) => message(&format!("Cannot read {}: {}", file.name(), describe(&error))),
    }
}

fn describe(error: &JsValue) -> String {
    error
        .as_string()
        .or_else(|| js_sys::Error::from(error.clone()).message().as_string())
        .unwrap_or_else(|| format!("{error:?}"))
}

/// Keeps `text` as the campaign if it is one; else says why and keeps what was there.
fn accept(text: &str) {
    let campaign = match Campaign::parse(text.as_bytes()) {
        Ok(campaign) => campaign,
        Err(error) => return message(&format!("{error}. Nothing was changed.")),
    };
    let Some(storage) = storage() else { return message("This browser keeps no local storage for the extension.") };
    let previous = stored_campaign().map(|kept| kept.id);
    if previous.as_deref() != Some(campaign.id.as_str()) {
        let _ = storage.remove_item(DONE_KEY);
    }
    let _ = storage.set_item(CAMPAIGN_KEY, text);
    message(&format!("Loaded the campaign {:?}: {} tasks.", campaign.title, campaign.tasks.len()));
    render();
}

/// Marks the campaign task `source` as recorded, if it is one of the campaign's (and says whether it is).
pub fn mark_done(source: &str) -> bool {
    let (Some(storage), Some(campaign)) = (storage(), stored_campaign()) else { return false };
    if campaign.task(source).is_none() {
        return false;
    }
    let mut done = done();
    if !done.iter().any(|id| id == source) {
        done.push(source.to_owned());
        let _ = storage.set_item(DONE_KEY, &serde_json::to_string(&done).unwrap_or_default());
    }
    render();
    true
}

/// The person's pseudonym, made at random the first time: the only name a campaign knows them by.
pub fn pseudonym() -> String {
    let Some(storage) = storage() else { return String::new() };
    if let Ok(Some(kept)) = storage.get_item(PSEUDONYM_KEY) {
        return kept;
    }
    let mut bytes = [0u8; 8];
    let random = web_sys::window().and_then(|window| window.crypto().ok());
    if let Some(crypto) = random {
        let _ = crypto.get_random_values_with_u8_array(&mut bytes);
    }
    let made = format!("p-{}", bytes.iter().map(|byte| format!("{byte:02x}")).collect::<String>());
    let _ = storage.set_item(PSEUDONYM_KEY, &made);
    made
}

fn storage() -> Option<Storage> {
    web_sys::window()?.local_storage().ok()?
}

/// The campaign loaded, as its text (what the host is sent) and parsed.
pub fn stored_campaign_text() -> Option<(String, Campaign)> {
    let text = storage()?.get_item(CAMPAIGN_KEY).ok()??;
    let campaign = Campaign::parse(text.as_bytes()).ok()?;
    Some((text, campaign))
}

fn stored_campaign() -> Option<Campaign> {
    stored_campaign_text().map(|(_, campaign)| campaign)
}

fn done() -> Vec<String> {
    storage()
        .and_then(|storage| storage.get_item(DONE_KEY).ok().flatten())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

fn message(text: &str) {
    crate::dom::set_text("campaign-message", text);
}

/// The kept campaign's task whose Record button a click in the task list pressed, if it pressed one.
pub fn task_to_record(click: &web_sys::Event) -> Option<CampaignTask> {
    let button = click.target()?.dyn_into::<web_sys::Element>().ok()?;
    let id = button.get_attribute("data-record")?;
    stored_campaign()?.tasks.into_iter().find(|task| task.id == id)
}

/// Shows the kept campaign: its title, the person's pseudonym, instructions, and each task with whether it
/// was recorded and its Record button. Text is set as text, never as markup: a campaign comes from a stranger.
fn render() {
    let Some(campaign) = stored_campaign() else { return };
    let Some(document) = web_sys::window().and_then(|window| window.document()) else { return };
    crate::dom::set_hidden("campaign-view", false);
    crate::dom::set_text("campaign-title", &campaign.title);
    crate::dom::set_text("campaign-pseudonym", &format!("you are {}", pseudonym()));
    crate::dom::set_text("campaign-instructions", &campaign.instructions);
    let Some(list) = document.get_element_by_id("campaign-tasks") else { return };
    list.set_text_content(None);
    let done = done();
    for task in &campaign.tasks {
        let Ok(item) = document.create_element("li") else { continue };
        let recorded = done.contains(&task.id);
        item.set_attribute("data-task", &task.id).ok();
        item.set_text_content(Some(&format!(
            "{}{} ({}) ",
            if recorded { "✓ " } else { "" },
            task.description,
            task.website
        )));
        if let Ok(button) = document.create_element("button") {
            button.set_text_content(Some(if recorded { "Record again" } else { "Record" }));
            if let Ok(button) = button.dyn_into::<HtmlButtonElement>() {
                button.set_type("button");
                // The popup starts the task whose button this is (see [`task_to_record`]).
                button.set_attribute("data-record", &task.id).ok();
                let _ = item.append_child(&button);
            }
        }
        let _ = item.append_child(&crate::dom::make("span", &[("class", "submission")], None));
        let _ = list.append_child(&item);
    }
    crate::dom::set_hidden("campaign-journeys", !campaign.journeys);
    wasm_bindgen_futures::spawn_local(show_submissions(false));
}
