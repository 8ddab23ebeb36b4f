//! The check that no crate of the workspace has a module cycle (`cargo xtask modules`, and a step of
//! `cargo xtask test`).
//!
//! The rule is levelled: the modules that share a parent must not depend on each other in a circle, where
//! a module depends on its sibling when anything in it (its submodules included) names anything in the
//! sibling (its submodules included) by a `crate::`, `super::` or `self::` path, in a `use` or in code. A
//! module and its own submodules are one unit at their parent's level: a `mod.rs` that re-exports its
//! children, and children that read their parent's constants, are no cycle. Tests (`#[cfg(test)]` modules)
//! are left out: what a test borrows from a neighbour is not part of the design.
//!
//! Files are read with `syn`, so comments, strings and macros' bodies name nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use syn::visit::Visit;

/// A module's path within its crate: `[]` for the crate's root, `["run", "driver"]` for `run::driver`.
type ModulePath = Vec<String>;

/// One crate target's modules, each with the files it was read from and the paths it names.
#[derive(Debug, Default)]
pub struct Crate {
    /// The target's name, for messages.
    name: String,
    modules: BTreeMap<ModulePath, Module>,
}

#[derive(Debug, Default)]
struct Module {
    file: PathBuf,
    /// The modules of the crate that this one names, each with the first path that named it.
    names: BTreeMap<ModulePath, String>,
}

impl Crate {
    /// Reads the target whose root file is `root` (a `lib.rs` or `main.rs`), following its `mod` items
    /// through `read`, which gives a file's text, or `None` where there is no such file.
    pub fn read(name: &str, root: &Path, read: &dyn Fn(&Path) -> Option<String>) -> Result<Crate> {
        let mut krate = Crate { name: name.to_owned(), modules: BTreeMap::new() };
        let mut uses: Vec<(ModulePath, Vec<Vec<String>>)> = Vec::new();
        krate.read_file(Vec::new(), root, true, read, &mut uses)?;
        // Paths resolve against the whole tree, so they are read once every module is known.
        for (module, paths) in uses {
            for path in paths {
                let Some(absolute) = absolute(&module, &path) else { continue };
                let Some(target) = krate.longest_module(&absolute) else { continue };
                let entry = krate.modules.get_mut(&module).expect("every module read is in the tree");
                entry.names.entry(target).or_insert_with(|| path.join("::"));
            }
        }
        Ok(krate)
    }

    fn read_file(
        &mut self,
        module: ModulePath,
        file: &Path,
        owns_directory: bool,
        read: &dyn Fn(&Path) -> Option<String>,
        uses: &mut Vec<(ModulePath, Vec<Vec<String>>)>,
    ) -> Result<()> {
        let text = read(file).with_context(|| format!("cannot read {}", file.display()))?;
        let parsed = syn::parse_file(&text).with_context(|| format!("cannot parse {}", file.display()))?;
        // Where the file's `mod child;` items live: beside a `lib.rs`, `main.rs` or `mod.rs`, else in the
        // folder named after the file.
        let directory = if owns_directory {
            file.parent().map(Path::to_owned).unwrap_or_default()
        } else {
            file.with_extension("")
        };
        self.read_items(module, file, &directory, &parsed.items, read, uses)
    }

    fn read_items(
        &mut self,
        module: ModulePath,
        file: &Path,
        directory: &Path,
        items: &[syn::Item],
        read: &dyn Fn(&Path) -> Option<String>,
        uses: &mut Vec<(ModulePath, Vec<Vec<String>>)>,
    ) -> Result<()> {
        self.modules.insert(module.clone(), Module { file: file.to_owned(), names: BTreeMap::new() });
        let mut named = Named::default();
        for item in items {
            let syn::Item::Mod(child) = item else {
                named.visit_item(item);
                continue;
            };
            if is_test_only(&child.attrs) {
                continue;
            }
            let mut path = module.clone();
            path.push(child.ident.to_string());
            match &child.content {
                Some((_, items)) => {
                    let directory = directory.join(child.ident.to_string());
                    self.read_items(path, file, &directory, items, read, uses)?;
                }
                None => {
                    let (child_file, owns_directory) = module_file(directory, child, read)?;
                    self.read_file(path, &child_file, owns_directory, read, uses)?;
                }
            }
        }
        uses.push((module, named.paths));
        Ok(())
    }

    /// The longest prefix of `path` that is a module of this crate.
    fn longest_module(&self, path: &[String]) -> Option<ModulePath> {
        (0..=path.len()).rev().map(|len| path[..len].to_vec()).find(|prefix| self.modules.contains_key(prefix))
    }

    /// Every circle among sibling modules, as a message naming its modules and what each names of the next.
    pub fn cycles(&self) -> Vec<String> {
        // Edges between siblings: (parent, from child, to child) → the first evidence.
        let mut edges: BTreeMap<(ModulePath, String, String), String> = BTreeMap::new();
        for (from, module) in &self.modules {
            for (to, named) in &module.names {
                let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
                // A module naming its ancestor or its descendant: one unit at their parent's level.
                if common == from.len() || common == to.len() {
                    continue;
                }
                let key = (from[..common].to_vec(), from[common].clone(), to[common].clone());
                edges.entry(key).or_insert_with(|| format!("{} names {named}", module.file.display()));
            }
        }
        let mut by_parent: BTreeMap<&ModulePath, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
        for (parent, from, to) in edges.keys() {
            by_parent.entry(parent).or_default().entry(from).or_default().insert(to);
        }
        let mut found = Vec::new();
        for (parent, graph) in by_parent {
            for component in strongly_connected(&graph) {
                let place =
                    if parent.is_empty() { self.name.clone() } else { format!("{}::{}", self.name, parent.join("::")) };
                let mut message = format!("{place}: {{{}}} depend on each other:", component.join(", "));
                for from in &component {
                    for to in &component {
                        let key = (parent.clone(), from.to_string(), to.to_string());
                        if let Some(evidence) = edges.get(&key) {
                            let _ = write!(message, "\n    {from} → {to}: {evidence}");
                        }
                    }
                }
                found.push(message);
            }
        }
        found
    }
}

/// The file of `mod child;` declared with its folder `directory`: `#[path]`'s, else `child.rs`, else
/// `child/mod.rs`; and whether that file's own children live beside it.
fn module_file(
    directory: &Path,
    child: &syn::ItemMod,
    read: &dyn Fn(&Path) -> Option<String>,
) -> Result<(PathBuf, bool)> {
    for attribute in &child.attrs {
        if let syn::Meta::NameValue(pair) = &attribute.meta
            && pair.path.is_ident("path")
            && let syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(path), .. }) = &pair.value
        {
            return Ok((directory.join(path.value()), true));
        }
    }
    let name = child.ident.to_string();
    let flat = directory.join(format!("{name}.rs"));
    if read(&flat).is_some() {
        return Ok((flat, false));
    }
    let nested = directory.join(&name).join("mod.rs");
    if read(&nested).is_some() {
        return Ok((nested, true));
    }
    bail!("no file for `mod {name};` in {}", directory.display())
}

/// Whether an item only exists in test builds (`#[cfg(test)]`).
fn is_test_only(attributes: &[syn::Attribute]) -> bool {
    attributes.iter().any(|attribute| {
        attribute.path().is_ident("cfg")
            && attribute.parse_args::<syn::Ident>().is_ok_and(|predicate| predicate == "test")
    })
}

/// `path` as named in `module`, made absolute from the crate's root; `None` for a path that does not start
/// at the crate (`std::…`, another crate, a local name).
fn absolute(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut absolute = module.to_vec();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            absolute.clear();
            rest = &path[1..];
        }
        Some("self") => rest = &path[1..],
        Some("super") => {
            while let Some(("super", tail)) = rest.split_first().map(|(head, tail)| (head.as_str(), tail)) {
                absolute.pop()?;
                rest = tail;
            }
        }
        _ => return None,
    }
    absolute.extend(rest.iter().cloned());
    Some(absolute)
}

/// The paths an item names: those of its `use`s (each leaf of a group its own path) and those in its code.
#[derive(Default)]
struct Named {
    paths: Vec<Vec<String>>,
}

impl Named {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => self.push(prefix, Some(&name.ident)),
            syn::UseTree::Rename(rename) => self.push(prefix, Some(&rename.ident)),
            syn::UseTree::Glob(_) => self.push(prefix, None),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    fn push(&mut self, prefix: &[String], last: Option<&syn::Ident>) {
        let mut path = prefix.to_vec();
        // `use super::{self, x}`: `self` names the prefix itself.
        if let Some(last) = last.filter(|last| *last != "self") {
            path.push(last.to_string());
        }
        self.paths.push(path);
    }
}

impl<'ast> Visit<'ast> for Named {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if !is_test_only(&item.attrs) {
            self.use_tree(&mut Vec::new(), &item.tree);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.paths.push(path.segments.iter().map(|segment| segment.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        // A module inside a function or a block: rare, read as part of its parent unless it is a test's.
        if !is_test_only(&item.attrs) {
            syn::visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if !is_test_only(&item.attrs) {
            syn::visit::visit_item_fn(self, item);
        }
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if !is_test_only(&item.attrs) {
            syn::visit::visit_item_impl(self, item);
        }
    }
}

/// The circles of `graph` (Tarjan's strongly connected components of more than one node), each sorted.
fn strongly_connected<'a>(graph: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    struct Search<'a, 'g> {
        graph: &'g BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<&'a str>>,
    }
    impl<'a> Search<'a, '_> {
        fn visit(&mut self, node: &'a str) {
            let order = self.index.len();
            self.index.insert(node, order);
            self.low.insert(node, order);
            self.stack.push(node);
            self.on_stack.insert(node);
            for &next in self.graph.get(node).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(member);
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort_unstable();
                    self.found.push(component);
                }
            }
        }
    }
    let mut search = Search {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for &node in graph.keys() {
        if !search.index.contains_key(node) {
            search.visit(node);
        }
    }
    search.found
}

/// Every lib and bin target of the workspace's packages (`cargo metadata`), as (name, root file).
pub fn workspace_targets(cargo: &mut std::process::Command) -> Result<Vec<(String, PathBuf)>> {
    let output =
        cargo.args(["metadata", "--no-deps", "--format-version", "1"]).output().context("cannot run cargo metadata")?;
    if !output.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).context("cargo metadata's output")?;
    let mut targets = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        for target in package["targets"].as_array().into_iter().flatten() {
            let kinds = target["kind"].as_array().into_iter().flatten().filter_map(|kind| kind.as_str());
            if !kinds.into_iter().any(|kind| matches!(kind, "lib" | "bin" | "cdylib" | "rlib")) {
                continue;
            }
            let (Some(name), Some(root)) = (target["name"].as_str(), target["src_path"].as_str()) else { continue };
            targets.push((name.to_owned(), PathBuf::from(root)));
        }
    }
    Ok(targets)
}

/// Fails, listing every circle (its files named from `workspace`), when any target has one.
pub fn check(workspace: &Path, targets: &[(String, PathBuf)]) -> Result<()> {
    let read = |path: &Path| std::fs::read_to_string(workspace.join(path)).ok();
    let mut cycles = Vec::new();
    for (name, root) in targets {
        let root = root.strip_prefix(workspace).unwrap_or(root);
        cycles.extend(Crate::read(name, root, &read)?.cycles());
    }
    if !cycles.is_empty() {
        bail!("{} module cycle(s):\n{}", cycles.len(), cycles.join("\n"));
    }
    println!("no module cycles in {} targets", targets.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// The crate `src/lib.rs` roots in `files` (path, text).
    fn read_crate(files: &[(&str, &str)]) -> Result<Crate> {
        let files: HashMap<PathBuf, String> =
            files.iter().map(|(path, text)| (PathBuf::from(path), text.to_string())).collect();
        Crate::read("demo", Path::new("src/lib.rs"), &|path: &Path| files.get(path).cloned())
    }

    fn cycles_of(files: &[(&str, &str)]) -> Vec<String> {
        read_crate(files).unwrap().cycles()
    }

    #[test]
    fn siblings_that_name_each_other_are_a_cycle_whatever_the_path_names_them_by() {
        let cycles = cycles_of(&[
            ("src/lib.rs", "mod a; mod b; mod c;"),
            // `a` names `b` in code, `b` names `c` in a group, `c` names `a` through `super`.
            ("src/a.rs", "fn f() { crate::b::g(); }"),
            ("src/b.rs", "use crate::{c::{self, H}, a as _};"),
            ("src/c.rs", "use super::a::*;"),
        ]);
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert!(cycles[0].starts_with("demo: {a, b, c} depend on each other"), "{}", cycles[0]);
        assert!(cycles[0].contains("c → a: src/c.rs names super::a"), "{}", cycles[0]);
    }

    #[test]
    fn a_submodule_counts_as_its_parent_among_the_parents_siblings() {
        let cycles = cycles_of(&[
            ("src/lib.rs", "mod run; mod report;"),
            ("src/run/mod.rs", "mod driver;"),
            ("src/run/driver.rs", "use crate::report::Report;"),
            ("src/report.rs", "pub struct Report; fn f() { let _ = super::run::START; }"),
        ]);
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        assert!(cycles[0].contains("{report, run}"), "{}", cycles[0]);
    }

    #[test]
    fn parents_and_children_tests_comments_and_one_way_paths_are_no_cycle() {
        let cycles = cycles_of(&[
            ("src/lib.rs", "mod run; mod report; pub use run::Runner;"),
            // A parent that uses its child and a child that reads its parent's constant.
            ("src/run/mod.rs", "mod driver; pub use driver::Runner; const QUIET: u32 = 4;"),
            ("src/run/driver.rs", "use super::QUIET; pub struct Runner; fn f() { crate::report::write(); }"),
            // `report` names `run` only in a comment, a string and its tests.
            (
                "src/report.rs",
                "// crate::run::Runner\npub fn write() { let _ = \"crate::run\"; }\n\
                 #[cfg(test)] mod tests { use crate::run::Runner; }",
            ),
        ]);
        assert!(cycles.is_empty(), "{cycles:?}");
    }

    #[test]
    fn a_missing_module_file_is_an_error_not_a_pass() {
        let error = read_crate(&[("src/lib.rs", "mod gone;")]).unwrap_err();
        assert!(format!("{error:#}").contains("no file for `mod gone;`"), "{error:#}");
    }
}
