//! The journeys page, `journeys.html`: the person's recent browsing grouped into journeys, for a campaign
//! that asks for them. The journeys are Chrome's own when the host finds its Journeys clusters in the
//! profile's history; otherwise this page reads `chrome.history` and groups the visits by TRACE's rule
//! ([`trace_analysis::journeys`]), the excluded domains left out and every URL cleaned of secret-looking
//! parameters either way. The person selects journeys and, for each, picks the key page, says whether
//! they would want it automated, labels it as a request to an assistant and judges its feasibility, and may
//! drop steps. Nothing leaves the machine, and nothing is stored, but the journeys selected and submitted.

use std::cell::RefCell;

use trace_analysis::journeys::{self, Transition, Visit};
use trace_manifest::campaign::{
    Feasibility, JOURNEYS_SUBMISSION, Journey, JourneyAnnotation, JourneySource, MAX_LABEL_CHARS, MIN_LABEL_CHARS,
};
use trace_manifest::wire::{AnnotatedJourney, Answer, Request};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{JsFuture, spawn_local};
use web_sys::{Element, HtmlInputElement, HtmlSelectElement};

use crate::chrome;
use crate::dom::{self, make, set_disabled, set_text, set_value, value};
use crate::host_link::request;

/// Where the person's excluded domains are kept (one per line), so that they are asked once.
const EXCLUDED_KEY: &str = "trace.journeys.excluded";
/// How many history entries are read at most.
const MAX_HISTORY_ITEMS: u32 = 5_000;
const GOOD_LABEL: &str = "Find a vegetarian recipe with chickpeas and save it to my recipe box";
const BAD_LABEL: &str = "recipes";

thread_local! {
    static JOURNEYS: RefCell<Vec<Journey>> = const { RefCell::new(Vec::new()) };
}

/// Renders the journeys page (called by [`crate::page_main`]).
pub fn main() {
    if let Some(kept) = storage().and_then(|storage| storage.get_item(EXCLUDED_KEY).ok().flatten()) {
        set_value("journeys-excluded", &kept);
    }
    if let Some(button) = dom::element("journeys-load") {
        dom::on_click(&button, || spawn_local(load()));
    }
    if let Some(button) = dom::element("journeys-submit") {
        dom::on_click(&button, || spawn_local(submit()));
    }
    set_text(
        "journeys-example",
        &format!(
            "Label each journey as a request to an assistant, at least {MIN_LABEL_CHARS} characters. Good: \u{201c}{GOOD_LABEL}\u{201d}. Not: \u{201c}{BAD_LABEL}\u{201d}."
        ),
    );
    match crate::campaign::stored_campaign_text() {
        Some((_, campaign)) if campaign.journeys => {
            set_text(
                "journeys-campaign",
                &format!("For the campaign {:?}, as {}.", campaign.title, crate::campaign::pseudonym()),
            );
            spawn_local(load());
        }
        Some((_, campaign)) => {
            set_text("journeys-message", &format!("The campaign {:?} does not ask for journeys.", campaign.title))
        }
        None => set_text("journeys-message", "Load a campaign that asks for journeys in the recorder's popup first."),
    }
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok()?
}

fn excluded() -> Vec<String> {
    value("journeys-excluded")
        .lines()
        .map(|line| line.trim().trim_start_matches("*.").to_ascii_lowercase())
        .filter(|line| !line.is_empty())
        .collect()
}

async fn load() {
    let excluded = excluded();
    if let Some(storage) = storage() {
        let _ = storage.set_item(EXCLUDED_KEY, &excluded.join("\n"));
    }
    let days: u32 = value("journeys-days").parse().unwrap_or(7).clamp(1, 90);
    set_text("journeys-message", "Reading your history…");
    let (chromes, older_left_out) = match request(&Request::Journeys { days, excluded: excluded.clone() }).await {
        Ok(Answer::Journeys { journeys, older_left_out }) => (journeys, older_left_out),
        _ => (None, 0), // no host, or no clusters: the history API serves as well
    };
    let chromes = match chromes {
        Some(found) => this_profiles(found, days).await,
        None => Vec::new(),
    };
    let found = if chromes.is_empty() {
        match history_journeys(days, &excluded).await {
            Ok(found) => found,
            Err(error) => return set_text("journeys-message", &format!("Cannot read your history: {error}")),
        }
    } else {
        chromes
    };
    set_text(
        "journeys-message",
        &match found.len() {
            0 => format!("No journey in the last {days} days (a journey has at least two pages)."),
            count if older_left_out > 0 => format!(
                "{count} journeys in the last {days} days. Select the ones to submit. (The {older_left_out} \
                 oldest are not shown: more would not fit in one message from trace-host.)"
            ),
            count => format!("{count} journeys in the last {days} days. Select the ones to submit."),
        },
    );
    render(&found);
    JOURNEYS.with(|kept| *kept.borrow_mut() = found);
}

/// The pages of `chrome.history` visited in the last `days`, and when that period starts (ms since the epoch).
async fn history_items(days: u32) -> Result<(Vec<serde_json::Value>, f64), String> {
    let start = js_sys::Date::now() - f64::from(days) * 86_400_000.0;
    let query = serde_json::json!({"text": "", "startTime": start, "maxResults": MAX_HISTORY_ITEMS});
    let items = JsFuture::from(chrome::history_search(&chrome::to_js(&query))).await.map_err(|e| format!("{e:?}"))?;
    let items = chrome::from_js(&items).as_array().cloned().unwrap_or_default();
    Ok((items, start))
}

/// Those of Chrome's journeys that are this profile's: the host reads the `History` of the profile the
/// browser was started with, which is not this one when the person switched profiles, and another
/// profile's browsing must not be offered. A journey is this profile's when `chrome.history` knows each of
/// its pages.
async fn this_profiles(found: Vec<Journey>, days: u32) -> Vec<Journey> {
    let Ok((items, _)) = history_items(days).await else { return Vec::new() };
    let known: std::collections::HashSet<String> =
        items.iter().filter_map(|item| item["url"].as_str()).map(journeys::clean_url).collect();
    found.into_iter().filter(|journey| journey.steps.iter().all(|step| known.contains(&step.url))).collect()
}

/// The visits of the last `days` from `chrome.history`, grouped by TRACE's rule.
async fn history_journeys(days: u32, excluded: &[String]) -> Result<Vec<Journey>, String> {
    let (items, start) = history_items(days).await?;
    let mut visits = Vec::new();
    for item in &items {
        let (Some(url), title) = (item["url"].as_str(), item["title"].as_str().unwrap_or_default()) else { continue };
        let details = chrome::to_js(&serde_json::json!({"url": url}));
        let Ok(found) = JsFuture::from(chrome::history_get_visits(&details)).await else { continue };
        for visit in chrome::from_js(&found).as_array().into_iter().flatten() {
            let time_ms = visit["visitTime"].as_f64().unwrap_or_default();
            let Some(id) = visit["visitId"].as_str().and_then(|id| id.parse().ok()) else { continue };
            if time_ms < start {
                continue;
            }
            visits.push(Visit {
                id,
                url: url.to_owned(),
                title: title.to_owned(),
                time_ms,
                referrer: visit["referringVisitId"].as_str().and_then(|id| id.parse().ok()).filter(|id| *id != 0),
                transition: Transition::from_chrome(visit["transition"].as_str().unwrap_or_default()),
            });
        }
    }
    Ok(journeys::group(&visits, excluded))
}

/// Shows each journey with its steps and the four questions. Text goes in as text: titles come from web pages.
fn render(found: &[Journey]) {
    let Some(list) = dom::element("journeys-list") else { return };
    list.set_text_content(None);
    for journey in found {
        let section = make("section", &[("class", "journey"), ("data-journey", &journey.id)], None);
        let grouped = match journey.grouped_by {
            JourneySource::Chrome => "grouped by Chrome",
            JourneySource::Trace => "grouped by TRACE's rule",
        };
        let heading = make("label", &[], None);
        let _ = heading.append_child(&make("input", &[("type", "checkbox"), ("class", "journey-select")], None));
        let first = journey.steps.first().map_or("", |step| step.time.as_str());
        let text = format!(" Submit this journey: {} pages from {first}, {grouped}", journey.steps.len());
        let _ = heading.append_child(&make("span", &[], Some(&text)));
        let _ = section.append_child(&heading);

        let steps = make("ol", &[], None);
        for step in &journey.steps {
            let item = make("li", &[("data-visit", &step.visit_id.to_string())], None);
            let key = make("label", &[], Some(" key page "));
            let radio_name = format!("key-{}", journey.id);
            let _ = key.prepend_with_node_1(&make(
                "input",
                &[("type", "radio"), ("class", "key-url"), ("name", &radio_name), ("value", &step.url)],
                None,
            ));
            let drop = make("label", &[], Some(" drop "));
            let _ = drop.prepend_with_node_1(&make("input", &[("type", "checkbox"), ("class", "drop")], None));
            let _ = item.append_child(&key);
            let _ = item.append_child(&drop);
            let title = if step.title.is_empty() { "(no title)" } else { step.title.as_str() };
            let _ = item.append_child(&make("strong", &[], Some(title)));
            let _ = item.append_child(&make("span", &[], Some(&format!(" · {}", step.time))));
            let _ = item.append_child(&make("div", &[("class", "url")], Some(&step.url)));
            let _ = steps.append_child(&item);
        }
        let _ = section.append_child(&steps);

        let automate = make("label", &[], Some("Would you want an assistant to do this for you? "));
        let choice = make("select", &[("class", "automate")], None);
        for (option, text) in [("", "choose"), ("yes", "yes"), ("no", "no")] {
            let _ = choice.append_child(&make("option", &[("value", option)], Some(text)));
        }
        let _ = automate.append_child(&choice);
        let _ = section.append_child(&automate);
        let label = make("label", &[], Some("The task, as a request to an assistant: "));
        // The browser stops typing at the limit the host checks (it counts UTF-16 units, never fewer than
        // characters).
        let longest = MAX_LABEL_CHARS.to_string();
        let attributes = [("class", "label"), ("placeholder", GOOD_LABEL), ("maxlength", longest.as_str())];
        let _ = label.append_child(&make("input", &attributes, None));
        let _ = section.append_child(&label);
        let feasibility = make("label", &[], Some("Could an assistant do it on the web as it is? "));
        let choice = make("select", &[("class", "feasibility")], None);
        for (option, text) in [("", "choose"), ("feasible", "yes"), ("infeasible", "no"), ("unsure", "not sure")] {
            let _ = choice.append_child(&make("option", &[("value", option)], Some(text)));
        }
        let _ = feasibility.append_child(&choice);
        let _ = section.append_child(&feasibility);
        let _ = section.append_child(&make("p", &[("class", "error"), ("role", "status")], None));
        let _ = list.append_child(&section);
    }
}

/// Checks every selected journey's answers and, if all are complete, submits them together.
async fn submit() {
    let Some((campaign_text, campaign)) = crate::campaign::stored_campaign_text() else {
        return set_text("journeys-message", "No campaign is loaded.");
    };
    let journeys = JOURNEYS.with(|kept| kept.borrow().clone());
    let mut chosen = Vec::new();
    let mut incomplete = 0;
    for journey in &journeys {
        let Some(section) = section_of(journey) else { continue };
        let selected = find::<HtmlInputElement>(&section, ".journey-select").is_some_and(|input| input.checked());
        if !selected {
            say_in(&section, None);
            continue;
        }
        match annotation_of(journey, &section) {
            Ok(annotation) => {
                say_in(&section, None);
                chosen.push(AnnotatedJourney { journey: journey.clone(), annotation });
            }
            Err(message) => {
                incomplete += 1;
                say_in(&section, Some(&message));
            }
        }
    }
    if incomplete > 0 {
        return set_text(
            "journeys-message",
            &format!("{incomplete} selected journeys need answers: nothing was submitted."),
        );
    }
    if chosen.is_empty() {
        return set_text("journeys-message", "Select a journey to submit first.");
    }
    set_disabled("journeys-submit", true);
    set_text("journeys-message", "Submitting…");
    let count = chosen.len();
    let pseudonym = crate::campaign::pseudonym();
    // The outbox names each submission by its key: these journeys' entry, not another campaign's.
    let name = campaign.submission_key(&pseudonym, JOURNEYS_SUBMISSION);
    let submitted = request(&Request::SubmitJourneys { campaign: campaign_text, pseudonym, journeys: chosen }).await;
    set_disabled("journeys-submit", false);
    let text = match submitted {
        Ok(Answer::Outbox { submissions }) => {
            let mine = submissions.iter().find(|entry| entry.name == name);
            match mine {
                Some(entry) if entry.is_sent() => {
                    format!("Submitted {count} journeys: they landed in the campaign's store.")
                }
                Some(entry) => {
                    format!("{count} journeys kept for sending: {}", crate::campaign::submission_state(entry))
                }
                None => "The journeys are not in the outbox.".to_owned(),
            }
        }
        Ok(_) => "trace-host answered something else.".to_owned(),
        Err(error) => format!("Not submitted: {error}"),
    };
    set_text("journeys-message", &text);
}

/// Shows (or clears) what is missing in a journey's answers, under it.
fn say_in(section: &Element, message: Option<&str>) {
    if let Some(error) = find::<Element>(section, ".error") {
        error.set_text_content(message);
    }
}

fn section_of(journey: &Journey) -> Option<Element> {
    dom::document()?.query_selector(&format!("section[data-journey=\"{}\"]", journey.id)).ok()?
}

fn find<T: JsCast>(within: &Element, selector: &str) -> Option<T> {
    within.query_selector(selector).ok()??.dyn_into::<T>().ok()
}

/// The person's answers for one journey, checked as the host will check them.
fn annotation_of(journey: &Journey, section: &Element) -> Result<JourneyAnnotation, String> {
    let mut key_url = None;
    let mut dropped = Vec::new();
    for step in &journey.steps {
        let Some(item) = find::<Element>(section, &format!("li[data-visit=\"{}\"]", step.visit_id)) else { continue };
        if find::<HtmlInputElement>(&item, ".key-url").is_some_and(|input| input.checked()) {
            key_url = Some(step.url.clone());
        }
        if find::<HtmlInputElement>(&item, ".drop").is_some_and(|input| input.checked()) {
            dropped.push(step.visit_id);
        }
    }
    let key_url = key_url.ok_or("Pick the key page: the one that shows the task was done.")?;
    let automate = match find::<HtmlSelectElement>(section, ".automate").map(|select| select.value()).as_deref() {
        Some("yes") => true,
        Some("no") => false,
        _ => return Err("Say whether you would want it automated.".to_owned()),
    };
    let feasibility = match find::<HtmlSelectElement>(section, ".feasibility").map(|select| select.value()).as_deref() {
        Some("feasible") => Feasibility::Feasible,
        Some("infeasible") => Feasibility::Infeasible,
        Some("unsure") => Feasibility::Unsure,
        _ => return Err("Say whether an assistant could do it.".to_owned()),
    };
    let label = find::<HtmlInputElement>(section, ".label").map(|input| input.value()).unwrap_or_default();
    let annotation = JourneyAnnotation {
        journey_id: journey.id.clone(),
        key_url,
        automate,
        label: label.trim().to_owned(),
        feasibility,
        dropped,
    };
    annotation.check(journey).map_err(|error| error.to_string())?;
    Ok(annotation)
}
