//! The one part of a map a language model writes, when asked (`trace-host map --llm MODEL`): definitions of
//! the site's own terms. The question is derived from the built map alone (its contexts, their headings and
//! actions with the values seen), so the same map asks the same question and a cached reply answers it; the
//! reply is read strictly, and every definition it gives says which model wrote it.

use std::fmt::Write as _;

use trace_manifest::map::{Definition, PageContext};

use crate::judge::Message;

/// A context's actions listed in the question, and each one's values.
const MAX_ACTIONS: usize = 15;
const MAX_VALUES: usize = 8;
/// Definitions kept from one reply.
const MAX_DEFINITIONS: usize = 60;

const SYSTEM: &str = "You write the glossary of a website for an AI agent that will use the site. You are \
given the site's pages (as URL patterns with their titles and headings) and what people did or could do on \
each. List the site's own terms that an agent needs explained to act there: names of sections, objects, \
fields, options and statuses that appear in what you are given. Define each in one sentence, from what the \
pages show; never invent a term that is not in the text. Reply with one JSON array and nothing else: \
[{\"term\": \"...\", \"definition\": \"...\"}].";

/// The glossary question about a map's contexts.
pub fn question(site: &str, contexts: &[PageContext]) -> Vec<Message> {
    let mut text = format!("Website: {site}\n");
    for context in contexts {
        let _ = writeln!(text, "\nPage: {} ({})", context.name, context.pattern);
        let _ = writeln!(text, "About it: {}", context.description);
        for action in context.available_actions.iter().take(MAX_ACTIONS) {
            let taken = if action.is_taken { "done" } else { "offered" };
            let _ = write!(text, "- {} [{taken}]", action.action);
            if !action.possible_values.is_empty() {
                let values: Vec<&str> = action.possible_values.iter().take(MAX_VALUES).map(String::as_str).collect();
                let _ = write!(text, ", values: {}", values.join(" | "));
            }
            text.push('\n');
        }
    }
    vec![Message { role: "system", content: SYSTEM.to_owned() }, Message { role: "user", content: text }]
}

/// The definitions in a reply: its first JSON array of `{term, definition}` objects (code fences and prose
/// around it allowed), trimmed, without empty or repeated terms, sorted by term. `model` goes into each
/// one's `source`.
pub fn read(reply: &str, model: &str) -> Result<Vec<Definition>, String> {
    for (start, _) in reply.match_indices('[') {
        let mut values = serde_json::Deserializer::from_str(&reply[start..]).into_iter::<Vec<serde_json::Value>>();
        let Some(Ok(items)) = values.next() else { continue };
        let mut definitions: Vec<Definition> = items
            .iter()
            .filter_map(|item| {
                let term = item.get("term")?.as_str()?.trim();
                let definition = item.get("definition")?.as_str()?.trim();
                (!term.is_empty() && !definition.is_empty()).then(|| Definition {
                    term: term.to_owned(),
                    definition: definition.to_owned(),
                    source: format!("model:{model}"),
                })
            })
            .collect();
        definitions.sort_by(|a, b| a.term.to_lowercase().cmp(&b.term.to_lowercase()).then(a.term.cmp(&b.term)));
        definitions.dedup_by(|a, b| a.term.eq_ignore_ascii_case(&b.term));
        definitions.truncate(MAX_DEFINITIONS);
        // An array of something else (`[1]` in prose, `[]`) is no answer: one without definitions must not
        // be cached as if it were.
        if !definitions.is_empty() {
            return Ok(definitions);
        }
    }
    Err("the model's reply holds no JSON array of definitions".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_read_for_its_array_of_definitions_whatever_surrounds_it() {
        let reply = "Here it is:\n```json\n[{\"term\": \"Cart\", \"definition\": \"What you will buy.\"}, \
                     {\"term\": \" cart \", \"definition\": \"twice\"}, {\"term\": \"\", \"definition\": \"x\"}, \
                     {\"term\": \"Add to cart\", \"definition\": \"Puts a product in the cart.\"}]\n```";
        let definitions = read(reply, "m1").unwrap();
        let terms: Vec<&str> = definitions.iter().map(|d| d.term.as_str()).collect();
        assert_eq!(terms, ["Add to cart", "Cart"]);
        assert!(definitions.iter().all(|d| d.source == "model:m1"));
        assert!(read("I cannot help with that.", "m1").is_err());
        assert!(read("[]", "m1").is_err() && read("[1] and [{\"name\": \"x\"}]", "m1").is_err());
        // Brackets in prose before the array are passed over.
        assert_eq!(read("[see below] [{\"term\": \"Deal\", \"definition\": \"A price.\"}]", "m").unwrap().len(), 1);
    }
}
