//! A page's accessibility tree as a person reads it: the recorder stores Chromium's full tree for each DOM
//! snapshot (`dom/<id>.a11y.json`, the `nodes` of DevTools' `Accessibility.getFullAXTree`), which lists
//! every layout box; this module turns it into the outline a screen reader would present, [`outline`].
//!
//! What is left out, and why: nodes Chromium marks `ignored` and unnamed wrappers (`generic`, `none`,
//! `presentation`) add nothing a reader announces, so their children take their place; `InlineTextBox`
//! nodes repeat their text's line boxes and `ListMarker`s a list item's bullet; a lone `StaticText` child that repeats its parent's name (a link's
//! or a button's text) says it twice. Nothing of the tree is trusted: a node may name a child that does
//! not exist, itself, or an ancestor, and a tree may be arbitrarily deep; the outline visits each node
//! once and stops at [`MAX_DEPTH`] levels and [`MAX_NODES`] nodes, counting what it left out.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

/// The deepest level of the outline; deeper nodes are counted in [`Outline::left_out`].
pub const MAX_DEPTH: usize = 128;
/// The deepest level of the tree as recorded, left-out wrappers included, that is read: it bounds the
/// recursion, whatever a hostile tree holds.
const MAX_RECORDED_DEPTH: usize = 4 * MAX_DEPTH;
/// The most nodes an outline holds; the rest are counted in [`Outline::left_out`].
pub const MAX_NODES: usize = 20_000;

/// One node as read: its role, accessible name, value and the states that matter to a reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AxNode {
    pub role: String,
    pub name: String,
    /// A control's value (a text field's text, a slider's position).
    pub value: Option<String>,
    /// States and properties worth reading aloud, as `name` or `name=value`: `focused`, `checked=true`,
    /// `disabled`, `expanded=false`, `required`, `level=2`, ...
    pub states: Vec<String>,
    pub children: Vec<AxNode>,
}

impl AxNode {
    /// Whether a person can act on the node: a control, a link, or anything focusable.
    pub fn is_interactive(&self) -> bool {
        const ROLES: &[&str] = &[
            "button",
            "link",
            "textbox",
            "searchbox",
            "checkbox",
            "radio",
            "combobox",
            "listbox",
            "option",
            "menuitem",
            "menuitemcheckbox",
            "menuitemradio",
            "slider",
            "spinbutton",
            "switch",
            "tab",
            "treeitem",
        ];
        ROLES.contains(&self.role.as_str()) || self.states.iter().any(|state| state == "focusable")
    }
}

/// The outline of one page, and how many nodes the limits left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outline {
    pub roots: Vec<AxNode>,
    pub left_out: usize,
}

impl Outline {
    /// Every node, depth first, with its depth (roots at 0).
    pub fn walk(&self) -> Vec<(usize, &AxNode)> {
        let mut found = Vec::new();
        let mut stack: Vec<(usize, &AxNode)> = self.roots.iter().rev().map(|node| (0, node)).collect();
        while let Some((depth, node)) = stack.pop() {
            found.push((depth, node));
            stack.extend(node.children.iter().rev().map(|child| (depth + 1, child)));
        }
        found
    }
}

/// Roles whose unnamed nodes only wrap others.
const WRAPPERS: &[&str] = &["generic", "none", "presentation", "GenericContainer", "Unknown", "LineBreak"];

/// Properties read aloud. `focusable` is kept for [`AxNode::is_interactive`].
const STATES: &[&str] = &[
    "focusable",
    "focused",
    "disabled",
    "checked",
    "pressed",
    "selected",
    "expanded",
    "required",
    "invalid",
    "readonly",
    "level",
    "multiselectable",
];

/// The outline of the nodes of `Accessibility.getFullAXTree` (a JSON array; anything else gives an empty
/// outline). Roots are the nodes with no parent among them, in their order.
pub fn outline(nodes: &Value) -> Outline {
    let nodes: Vec<&Value> = nodes.as_array().map(|nodes| nodes.iter().collect()).unwrap_or_default();
    let by_id: HashMap<&str, &Value> =
        nodes.iter().filter_map(|node| Some((node["nodeId"].as_str()?, *node))).collect();
    let roots: Vec<&str> = nodes
        .iter()
        .filter(|node| node["parentId"].as_str().is_none_or(|parent| !by_id.contains_key(parent)))
        .filter_map(|node| node["nodeId"].as_str())
        .collect();
    let mut builder = Builder { by_id, visited: HashSet::new(), kept: 0, left_out: 0 };
    let roots = roots.into_iter().flat_map(|id| builder.build(id, 0, 0)).collect();
    Outline { roots, left_out: builder.left_out }
}

struct Builder<'a> {
    by_id: HashMap<&'a str, &'a Value>,
    visited: HashSet<&'a str>,
    kept: usize,
    left_out: usize,
}

impl<'a> Builder<'a> {
    /// The outline nodes standing for node `id`: itself with its children, or its children in its place
    /// when it is left out. `depth` is the outline's, `recorded_depth` the recorded tree's.
    fn build(&mut self, id: &'a str, depth: usize, recorded_depth: usize) -> Vec<AxNode> {
        let Some(node) = self.by_id.get(id).copied() else { return Vec::new() };
        if !self.visited.insert(id) {
            return Vec::new();
        }
        if depth >= MAX_DEPTH || recorded_depth >= MAX_RECORDED_DEPTH || self.kept >= MAX_NODES {
            self.left_out += 1 + self.count_below(node);
            return Vec::new();
        }
        let role = text_of(&node["role"]).unwrap_or_default();
        let name = text_of(&node["name"]).unwrap_or_default();
        let repeats = role == "InlineTextBox" || role == "ListMarker";
        let hoisted = node["ignored"].as_bool() == Some(true)
            || (WRAPPERS.contains(&role.as_str()) && name.trim().is_empty())
            || repeats;
        let child_ids: Vec<&'a str> =
            node["childIds"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let child_depth = if hoisted { depth } else { depth + 1 };
        if repeats {
            // What it says is said already; nothing below it is read either.
            return Vec::new();
        }
        let mut children: Vec<AxNode> = Vec::new();
        for child in child_ids {
            children.extend(self.build(child, child_depth, recorded_depth + 1));
        }
        if hoisted {
            return children;
        }
        self.kept += 1;
        if let [only] = children.as_slice()
            && only.role == "StaticText"
            && only.name == name
            && only.children.is_empty()
        {
            children.clear();
        }
        vec![AxNode {
            role,
            name,
            value: text_of(&node["value"]).filter(|value| !value.is_empty()),
            states: states(node),
            children,
        }]
    }

    /// How many nodes lie below `node` that have not been visited, each counted once.
    fn count_below(&mut self, node: &'a Value) -> usize {
        let mut count = 0;
        let mut stack: Vec<&'a str> =
            node["childIds"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        while let Some(id) = stack.pop() {
            let Some(child) = self.by_id.get(id).copied() else { continue };
            if !self.visited.insert(id) {
                continue;
            }
            count += 1;
            stack.extend(child["childIds"].as_array().into_iter().flatten().filter_map(Value::as_str));
        }
        count
    }
}

/// An `AXValue`'s value as text (`{"type": "computedString", "value": "Search"}` → `Search`).
fn text_of(value: &Value) -> Option<String> {
    match &value["value"] {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// The node's states worth reading: boolean ones by name when true, the others as `name=value`.
fn states(node: &Value) -> Vec<String> {
    node["properties"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|property| {
            let name = property["name"].as_str()?;
            if !STATES.contains(&name) {
                return None;
            }
            match &property["value"]["value"] {
                Value::Bool(true) => Some(name.to_owned()),
                Value::Bool(false) if name == "expanded" || name == "checked" || name == "pressed" => {
                    Some(format!("{name}=false"))
                }
                Value::Bool(false) | Value::Null => None,
                Value::String(text) if text == "false" => None,
                Value::String(text) if text == "true" => Some(name.to_owned()),
                other => {
                    Some(format!("{name}={}", text_of(&serde_json::json!({ "value": other })).unwrap_or_default()))
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(id: &str, parent: Option<&str>, role: &str, name: &str, children: &[&str]) -> Value {
        let mut node = json!({
            "nodeId": id,
            "ignored": false,
            "role": {"type": "role", "value": role},
            "name": {"type": "computedString", "value": name},
            "childIds": children,
        });
        if let Some(parent) = parent {
            node["parentId"] = json!(parent);
        }
        node
    }

    /// A search page as Chromium reports it: ignored wrappers, a labelled search box with its value and
    /// focus, a button whose text repeats its name, and inline text boxes.
    fn search_page() -> Value {
        let mut searchbox = node("5", Some("4"), "searchbox", "Search products", &["6"]);
        searchbox["value"] = json!({"type": "string", "value": "mug"});
        searchbox["properties"] = json!([
            {"name": "focusable", "value": {"type": "booleanOrUndefined", "value": true}},
            {"name": "focused", "value": {"type": "booleanOrUndefined", "value": true}},
            {"name": "invalid", "value": {"type": "token", "value": "false"}},
        ]);
        let mut heading = node("9", Some("3"), "heading", "Results", &["10"]);
        heading["properties"] = json!([{"name": "level", "value": {"type": "integer", "value": 2}}]);
        let mut ignored = node("2", Some("1"), "none", "", &["3"]);
        ignored["ignored"] = json!(true);
        json!([
            node("1", None, "RootWebArea", "Search · Shop", &["2"]),
            ignored,
            node("3", Some("2"), "main", "", &["4", "9"]),
            node("4", Some("3"), "search", "", &["5", "7"]),
            searchbox,
            node("6", Some("5"), "generic", "", &[]),
            node("7", Some("4"), "button", "Search", &["8"]),
            node("8", Some("7"), "StaticText", "Search", &["8b"]),
            node("8b", Some("8"), "InlineTextBox", "Search", &[]),
            heading,
            node("10", Some("9"), "StaticText", "Results", &[]),
        ])
    }

    #[test]
    fn the_outline_reads_as_a_screen_reader_would() {
        let outline = outline(&search_page());
        let read: Vec<String> = outline
            .walk()
            .into_iter()
            .map(|(depth, node)| {
                let value = node.value.as_deref().map(|value| format!(" = {value}")).unwrap_or_default();
                format!("{}{} {:?}{value} {:?}", "  ".repeat(depth), node.role, node.name, node.states)
            })
            .collect();
        assert_eq!(
            read,
            [
                "RootWebArea \"Search · Shop\" []",
                "  main \"\" []",
                "    search \"\" []",
                "      searchbox \"Search products\" = mug [\"focusable\", \"focused\"]",
                "      button \"Search\" []",
                "    heading \"Results\" [\"level=2\"]",
            ]
        );
        assert_eq!(outline.left_out, 0);
        let interactive: Vec<&str> = outline
            .walk()
            .into_iter()
            .filter(|(_, node)| node.is_interactive())
            .map(|(_, n)| n.role.as_str())
            .collect();
        assert_eq!(interactive, ["searchbox", "button"]);
    }

    #[test]
    fn a_hostile_tree_is_read_once_and_within_bounds() {
        // A cycle (1 → 2 → 1), a child that does not exist, and a node naming itself.
        let cyclic = json!([
            node("1", None, "RootWebArea", "loop", &["2", "missing"]),
            node("2", Some("1"), "link", "back", &["1", "2"]),
        ]);
        let read = outline(&cyclic);
        assert_eq!(read.walk().len(), 2);

        // A chain deeper than the limit: the outline stops and counts the rest.
        let depth = MAX_DEPTH + 50;
        let chain: Vec<Value> = (0..depth)
            .map(|level| {
                let parent = level.checked_sub(1).map(|parent| parent.to_string());
                node(&level.to_string(), parent.as_deref(), "group", "g", &[&(level + 1).to_string()])
            })
            .collect();
        let read = outline(&Value::Array(chain));
        assert_eq!(read.walk().len(), MAX_DEPTH);
        assert_eq!(read.left_out, depth - MAX_DEPTH);

        // A chain of wrappers the outline leaves out still ends, at the recorded tree's limit.
        let wrappers: Vec<Value> = (0..100_000)
            .map(|level: usize| {
                let parent = level.checked_sub(1).map(|parent| parent.to_string());
                node(&level.to_string(), parent.as_deref(), "generic", "", &[&(level + 1).to_string()])
            })
            .collect();
        let read = outline(&Value::Array(wrappers));
        assert!(read.roots.is_empty());
        assert_eq!(read.left_out, 100_000 - MAX_RECORDED_DEPTH);

        assert_eq!(outline(&json!({"not": "a list"})), Outline::default());
    }
}
