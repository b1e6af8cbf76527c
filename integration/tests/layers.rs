//! No circles. In every library crate of the workspace, no module imports from a module that
//! imports it back (directly or through others), and no file of a folder imports from a file
//! of that folder that imports it back, the folder's module file (`breaker.rs`,
//! `keyed/mod.rs`) counted as one of its files: a module file declares and re-exports its
//! children, so a child that uses what the module file defines closes a circle. For the same
//! reason no module may import what its crate's `lib.rs` itself defines. And the list of the
//! runtime's modules in docs/ARCHITECTURE.md ("The runtime's modules") names every module
//! `runtime/src/lib.rs` declares, and no other.
//!
//! The crates are read with `syn`, following the module tree from `lib.rs` (modules under
//! `#[cfg(test)]` are left out: tests may import anything). An import is any path that starts
//! with `crate::` (or `super::`, between the files of one folder; or a child's name, in a
//! module file), in code, in `use` trees, in attributes (`#[serde(with = "crate::…")]`) and in
//! macro calls. A name the crate root or a folder's module file re-exports counts as the file
//! that defines it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The workspace's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// Whether `attrs` put the item under `cfg(test)` (and not under `cfg(not(test))`).
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && {
            let text = squeeze(&quote_tokens(a));
            // `test` as a word, not in a string (`feature = "test-util"`).
            let words = text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '"'));
            words.into_iter().any(|w| w == "test") && !text.contains("not(test")
        }
    })
}

fn quote_tokens(a: &syn::Attribute) -> String {
    use quote::ToTokens;
    a.meta.to_token_stream().to_string()
}

/// Token text without spaces: `crate :: a :: b` as `crate::a::b`.
fn squeeze(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// One source file of a crate: where it sits in the module tree.
struct File {
    /// The path of its module from the crate root: `["breaker", "admit"]`; empty for `lib.rs`.
    module: Vec<String>,
    path: PathBuf,
    ast: syn::File,
}

/// Every file of the crate whose root is `lib`, by following `mod x;` declarations.
fn crate_files(lib: &Path) -> Vec<File> {
    let mut out = Vec::new();
    let mut todo = vec![(Vec::new(), lib.to_owned())];
    while let Some((module, path)) = todo.pop() {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        // Where this file's children live: beside it for `lib.rs` and `mod.rs`, else in a
        // folder of its name.
        let name = path.file_stem().unwrap().to_str().unwrap();
        let dir = if module.is_empty() || name == "mod" {
            path.parent().unwrap().to_owned()
        } else {
            path.with_extension("")
        };
        for item in &ast.items {
            let syn::Item::Mod(m) = item else { continue };
            if test_only(&m.attrs) {
                continue;
            }
            if m.content.is_some() {
                // An inline module at the crate's root (the runtime's `__private`) is a module
                // of the map like any other; deeper inline modules belong to their file.
                if module.is_empty() {
                    out.push(File {
                        module: vec![m.ident.to_string()],
                        path: path.clone(),
                        ast: inline_module(&text, &m.ident),
                    });
                }
                continue;
            }
            let explicit = m.attrs.iter().find_map(|a| {
                let text = squeeze(&quote_tokens(a));
                let rest = text.strip_prefix("path=\"")?;
                Some(rest.trim_end_matches('"').to_owned())
            });
            let child = match explicit {
                // `#[path]` is relative to the declaring file's directory.
                Some(p) => path.parent().unwrap().join(p),
                None => {
                    let flat = dir.join(format!("{}.rs", m.ident));
                    if flat.exists() {
                        flat
                    } else {
                        dir.join(m.ident.to_string()).join("mod.rs")
                    }
                }
            };
            let mut sub = module.clone();
            sub.push(m.ident.to_string());
            todo.push((sub, child));
        }
        out.push(File { module, path, ast });
    }
    out.sort_by(|a, b| a.module.cmp(&b.module));
    out
}

/// The items of the inline module `name` of the file `text`, as a file of their own.
fn inline_module(text: &str, name: &syn::Ident) -> syn::File {
    let mut ast = syn::parse_file(text).unwrap();
    let items = ast
        .items
        .drain(..)
        .find_map(|item| match item {
            syn::Item::Mod(m) if m.ident == *name => m.content.map(|(_, items)| items),
            _ => None,
        })
        .unwrap();
    ast.items = items;
    ast.attrs.clear();
    ast
}

/// The paths a file names: each as its segments, `crate` or `super` first. `relative` holds
/// the other paths (`self::a::X`, `a::X`): in a module file, those that start with a child's
/// name are imports of that child.
#[derive(Default)]
struct Paths(BTreeSet<Vec<String>>, BTreeSet<Vec<String>>);

impl Paths {
    fn add_text(&mut self, text: &str) {
        let text = squeeze(text);
        for start in ["crate::", "super::"] {
            let mut at = 0;
            while let Some(i) = text[at..].find(start) {
                let i = at + i;
                at = i + start.len();
                // `$crate::` and `a_crate::` are not this crate.
                if text[..i]
                    .chars()
                    .last()
                    .is_some_and(|c| c == '$' || c == '_' || c.is_alphanumeric())
                {
                    continue;
                }
                let segs: Vec<String> = text[i..]
                    .split("::")
                    .map(|s| {
                        s.chars()
                            .take_while(|c| *c == '_' || c.is_alphanumeric())
                            .collect::<String>()
                    })
                    .take_while(|s| !s.is_empty())
                    .collect();
                self.0.insert(segs);
                // A group after the prefix (`crate::{a, b::c}`) in a macro's tokens.
                let after = &text[i + start.len()..];
                if let Some(group) = after.strip_prefix('{') {
                    let head = start.trim_end_matches("::").to_owned();
                    for name in group
                        .split([',', '}'])
                        .map(|s| s.split("::").next().unwrap())
                    {
                        if !name.is_empty() {
                            self.0.insert(vec![head.clone(), name.to_owned()]);
                        }
                    }
                }
            }
        }
    }

    fn add_use(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.add_use(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.push(prefix, &n.ident.to_string()),
            syn::UseTree::Rename(r) => self.push(prefix, &r.ident.to_string()),
            syn::UseTree::Glob(_) => self.push(prefix, "*"),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.add_use(prefix, t);
                }
            }
        }
    }

    fn push(&mut self, prefix: &[String], last: &str) {
        let mut segs = prefix.to_vec();
        segs.push(last.to_owned());
        self.insert(segs);
    }

    fn insert(&mut self, mut segs: Vec<String>) {
        match segs.first().map(String::as_str) {
            Some("crate" | "super") => {
                self.0.insert(segs);
            }
            Some("self") => {
                segs.remove(0);
                self.1.insert(segs);
            }
            Some(_) => {
                self.1.insert(segs);
            }
            None => {}
        }
    }
}

/// A visitor's `visit_item_mod` and `visit_item_fn` that skip what only tests compile.
macro_rules! skip_test_only {
    () => {
        fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
            if !test_only(&m.attrs) {
                syn::visit::visit_item_mod(self, m);
            }
        }
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            if !test_only(&f.attrs) {
                syn::visit::visit_item_fn(self, f);
            }
        }
    };
}

impl<'ast> Visit<'ast> for Paths {
    skip_test_only!();
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if !test_only(&i.attrs) {
            syn::visit::visit_item_impl(self, i);
        }
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if !test_only(&u.attrs) {
            self.add_use(&mut Vec::new(), &u.tree);
        }
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if p.leading_colon.is_none() {
            self.insert(segs);
        }
        syn::visit::visit_path(self, p);
    }
    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        // Doc comments name items for links only.
        if !a.path().is_ident("doc") {
            self.add_text(&quote_tokens(a));
        }
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.add_text(&without_docs(m.tokens.clone()));
    }
}

/// A macro's tokens as text, without the doc comments in them (`/// [`X`](crate::x::X)` inside a
/// `macro_rules!` call is a `#[doc = "…"]` attribute there).
fn without_docs(tokens: proc_macro2::TokenStream) -> String {
    use proc_macro2::TokenTree;
    let mut out = String::new();
    let mut trees = tokens.into_iter().peekable();
    while let Some(tree) = trees.next() {
        match &tree {
            TokenTree::Punct(p) if p.as_char() == '#' => {
                if trees
                    .peek()
                    .is_some_and(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == '!'))
                {
                    trees.next();
                }
                let is_doc = matches!(trees.peek(), Some(TokenTree::Group(g))
                    if g.stream().into_iter().next().is_some_and(|t| t.to_string() == "doc"));
                if is_doc {
                    trees.next();
                } else {
                    out.push('#');
                }
            }
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    proc_macro2::Delimiter::Brace => ("{", "}"),
                    proc_macro2::Delimiter::Bracket => ("[", "]"),
                    proc_macro2::Delimiter::Parenthesis => ("(", ")"),
                    proc_macro2::Delimiter::None => ("", ""),
                };
                out.push_str(open);
                out.push_str(&without_docs(g.stream()));
                out.push_str(close);
            }
            other => out.push_str(&other.to_string()),
        }
        out.push(' ');
    }
    out
}

/// The items a module file re-exports from its children, by the name they are exported as:
/// `pub use admit::Permit` makes `Permit` the child `admit`'s.
fn reexports(file: &File) -> BTreeMap<String, String> {
    fn walk(tree: &syn::UseTree, path: &mut Vec<String>, out: &mut BTreeMap<String, String>) {
        let mut name = |path: &[String], exported: String| {
            // The path as written in the module file: `self::a::X` or `a::X`.
            let first = path.iter().find(|s| *s != "self" && *s != "crate");
            if let Some(child) = first {
                out.insert(exported, child.clone());
            }
        };
        match tree {
            syn::UseTree::Path(p) => {
                path.push(p.ident.to_string());
                walk(&p.tree, path, out);
                path.pop();
            }
            syn::UseTree::Name(n) => name(path, n.ident.to_string()),
            syn::UseTree::Rename(r) => name(path, r.rename.to_string()),
            syn::UseTree::Glob(_) => {}
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    walk(t, path, out);
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    for item in &file.ast.items {
        if let syn::Item::Use(u) = item
            && !test_only(&u.attrs)
        {
            walk(&u.tree, &mut Vec::new(), &mut out);
        }
    }
    out
}

/// A dependency graph: node → (node it imports → the files that import it).
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// One circle of `graph`, as its nodes in order and the files behind each step, if any.
fn circle(graph: &Graph) -> Option<String> {
    fn visit(
        graph: &Graph,
        at: &str,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|s| s == at) {
            let mut c = stack[i..].to_vec();
            c.push(at.to_owned());
            return Some(c);
        }
        if done.contains(at) {
            return None;
        }
        stack.push(at.to_owned());
        for next in graph.get(at).into_iter().flat_map(|m| m.keys()) {
            if let Some(c) = visit(graph, next, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(at.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    for start in graph.keys() {
        if let Some(c) = visit(graph, start, &mut Vec::new(), &mut done) {
            let steps: Vec<String> = c
                .windows(2)
                .map(|w| {
                    let files = &graph[&w[0]][&w[1]];
                    format!("  {} → {} (in {files:?})", w[0], w[1])
                })
                .collect();
            return Some(steps.join("\n"));
        }
    }
    None
}

/// The crate's graphs: its top-level modules, and the files of each folder, a folder's module
/// file (`breaker.rs`, `keyed/mod.rs`) being a node of that folder like its children.
struct Crate {
    modules: Graph,
    folders: BTreeMap<String, Graph>,
    /// Top-level module names, as declared in `lib.rs`.
    names: BTreeSet<String>,
    /// Items a module imports from the crate root's own code (not re-exported from a module):
    /// `lib.rs` declares every module, so each of these closes a circle. Item → files.
    from_root: BTreeMap<String, BTreeSet<String>>,
}

/// The node that stands for a folder's module file in that folder's graph.
fn module_file_node(file: &File) -> String {
    let name = file.path.file_name().unwrap().to_str().unwrap();
    format!("({name})")
}

fn read_crate(dir: &str) -> Crate {
    read_crate_at(&root().join(dir))
}

/// The graphs of the crate in the directory `dir`.
fn read_crate_at(dir: &Path) -> Crate {
    let lib = dir.join("src/lib.rs");
    let files = crate_files(&lib);
    let roots: BTreeMap<Vec<String>, BTreeMap<String, String>> = files
        .iter()
        .map(|f| (f.module.clone(), reexports(f)))
        .collect();
    // The files that are modules of `folder` (its children), by their name in it.
    let children = |folder: &[String]| -> BTreeSet<String> {
        files
            .iter()
            .filter(|f| f.module.len() == folder.len() + 1 && f.module[..folder.len()] == *folder)
            .map(|f| f.module[folder.len()].clone())
            .collect()
    };
    let module_file = |folder: &[String]| files.iter().find(|f| f.module == folder).unwrap();
    let mut modules = Graph::new();
    let mut folders: BTreeMap<String, Graph> = BTreeMap::new();
    let mut names = BTreeSet::new();
    let mut from_root: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut step = |folder: &[String], from: String, to: String, shown: &str| {
        folders
            .entry(folder.join("/"))
            .or_default()
            .entry(from)
            .or_default()
            .entry(to)
            .or_default()
            .insert(shown.to_owned());
    };
    for file in &files {
        let Some(top) = file.module.first() else {
            continue;
        };
        names.insert(top.clone());
        let shown = file
            .path
            .strip_prefix(root())
            .unwrap_or(&file.path)
            .display()
            .to_string();
        modules.entry(top.clone()).or_default();
        let mut paths = Paths::default();
        paths.visit_file(&file.ast);
        // A module file's imports of its own children, written relative to it (`inner::X`,
        // `self::inner::X`).
        let mine = children(&file.module);
        if !mine.is_empty() {
            for segs in paths.1.iter().filter(|s| s.len() >= 2) {
                if mine.contains(&segs[0]) {
                    step(
                        &file.module,
                        module_file_node(file),
                        segs[0].clone(),
                        &shown,
                    );
                }
            }
        }
        for segs in &paths.0 {
            // The absolute module path this names (segments after `crate`).
            let abs: Vec<String> = match segs[0].as_str() {
                "crate" => segs[1..].to_vec(),
                _ => {
                    // `super` is the parent of the file's module, whatever kind of file it is.
                    let mut base = file.module.clone();
                    let mut rest = &segs[..];
                    while rest.first().is_some_and(|s| s == "super") && !base.is_empty() {
                        base.pop();
                        rest = &rest[1..];
                    }
                    base.extend(rest.iter().cloned());
                    base
                }
            };
            let Some(first) = abs.first() else { continue };
            // A name re-exported at the root counts as its module.
            let target = match roots[&Vec::new()].get(first) {
                Some(m) => m.clone(),
                None => first.clone(),
            };
            if target != *top && names_contains(&files, &target) {
                modules
                    .entry(top.clone())
                    .or_default()
                    .entry(target.clone())
                    .or_default()
                    .insert(shown.clone());
            } else if !names_contains(&files, &target)
                && !roots[&Vec::new()].contains_key(first)
                && first != "*"
                && root_defines(module_file(&[]), first)
            {
                from_root
                    .entry(first.clone())
                    .or_default()
                    .insert(shown.clone());
            }
            // Within a folder that holds this file, at any depth: the path names either one
            // of the folder's children (by file, or by what the folder's module file
            // re-exports from one) or something the module file itself defines.
            for depth in 1..file.module.len() {
                let folder = &file.module[..depth];
                if abs.len() <= depth || abs[..depth] != *folder {
                    continue;
                }
                let me = &file.module[depth];
                let next = &abs[depth];
                let kids = children(folder);
                let sibling = match roots.get(folder).and_then(|r| r.get(next)) {
                    Some(child) => child.clone(),
                    None => next.clone(),
                };
                if kids.contains(&sibling) {
                    if sibling != *me {
                        step(folder, me.clone(), sibling, &shown);
                    }
                } else if next != "*" && root_defines(module_file(folder), next) {
                    step(
                        folder,
                        me.clone(),
                        module_file_node(module_file(folder)),
                        &shown,
                    );
                }
            }
        }
    }
    Crate {
        modules,
        folders,
        names,
        from_root,
    }
}

/// Whether `file` itself defines an item called `name` (not a `use` of it, not a module).
fn root_defines(file: &File, name: &str) -> bool {
    file.ast.items.iter().any(|item| {
        if let syn::Item::Macro(m) = item {
            return m.ident.as_ref().is_some_and(|i| i == name);
        }
        let ident = match item {
            syn::Item::Const(i) => &i.ident,
            syn::Item::Enum(i) => &i.ident,
            syn::Item::Fn(i) => &i.sig.ident,
            syn::Item::Static(i) => &i.ident,
            syn::Item::Struct(i) => &i.ident,
            syn::Item::Trait(i) => &i.ident,
            syn::Item::Type(i) => &i.ident,
            syn::Item::Union(i) => &i.ident,
            _ => return false,
        };
        ident == name && !test_only(item_attrs(item))
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        _ => &[],
    }
}

fn names_contains(files: &[File], name: &str) -> bool {
    files
        .iter()
        .any(|f| f.module.first().is_some_and(|m| m == name))
}

/// Imports that close a circle and are known debt, each `(crate, from, to)`. Each must still
/// exist (so that paying one fails here until it is taken off this list).
const DEBT: &[(&str, &str, &str)] = &[];

/// `c`'s module graph without the debt's imports; panics if a debt import is gone.
fn without_debt(dir: &str, mut modules: Graph) -> Graph {
    for (krate, from, to) in DEBT {
        if *krate == dir {
            let gone = modules.get_mut(*from).and_then(|m| m.remove(*to)).is_none();
            assert!(
                !gone,
                "{krate}: `{from}` no longer imports `{to}`: take it off DEBT in this file"
            );
        }
    }
    modules
}

const CRATES: &[&str] = &[
    "runtime", "macros", "fleet", "admin", "replay", "tower", "http", "metrics", ".",
];

#[test]
fn no_crate_has_a_circle_of_modules_or_of_a_folders_files() {
    let mut found = Vec::new();
    for dir in CRATES {
        let c = read_crate(dir);
        if let Some(steps) = circle(&without_debt(dir, c.modules)) {
            found.push(format!("{dir}: a circle of modules:\n{steps}"));
        }
        for (folder, graph) in &c.folders {
            if let Some(steps) = circle(graph) {
                found.push(format!("{dir}: a circle of files in {folder}/:\n{steps}"));
            }
        }
        for (item, files) in &c.from_root {
            found.push(format!(
                "{dir}: `{item}` is defined in lib.rs, which declares the modules that import it \
                 (in {files:?}): move it to a module of its own"
            ));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The modules a list of modules names: the names in backquotes each bullet of the section
/// `heading` of the Markdown `text` starts with (`- `a`, `b` — …`). Bullets of prose, which
/// start with a word, name none.
fn listed_modules(text: &str, heading: &str) -> BTreeSet<String> {
    text.lines()
        .skip_while(|l| l.trim() != heading)
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("- `"))
        .flat_map(|l| {
            let head = l.split(" — ").next().unwrap();
            format!("`{head}")
                .split(',')
                .filter_map(|n| {
                    let n = n.split_whitespace().next()?;
                    let name = n.strip_prefix('`')?.strip_suffix('`')?;
                    Some(name.to_owned())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn architecture_md_lists_every_module_of_the_runtime_and_no_other() {
    let c = read_crate("runtime");
    let page = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let listed = listed_modules(&page, "## The runtime's modules");
    let missing: Vec<&String> = c.names.difference(&listed).collect();
    let gone: Vec<&String> = listed.difference(&c.names).collect();
    assert!(
        missing.is_empty() && gone.is_empty(),
        "docs/ARCHITECTURE.md's list of the runtime's modules is out of date: \
         not listed {missing:?}; listed but not in runtime/src/lib.rs {gone:?}"
    );
}

#[test]
fn a_module_list_is_read_from_the_bullets_of_its_section() {
    let page = "# Page\n\n## The runtime's modules\n\nIntro naming `not_a_module`.\n\n\
                - No circles: a rule, naming `not_a_module_either`.\n\n\
                - `sync` — std or loom.\n- `duration`, `serde_duration` (feature `serde`) — \
                durations, `also_not`.\n  - `nested` — a sub-bullet is not a module.\n\n\
                ## Next\n\n- `elsewhere` — another section.\n";
    let listed = listed_modules(page, "## The runtime's modules");
    assert_eq!(
        listed.iter().map(String::as_str).collect::<Vec<_>>(),
        ["duration", "serde_duration", "sync"]
    );
}

#[test]
fn a_circle_is_found_and_named_with_its_files() {
    let mut graph = Graph::new();
    let step = |g: &mut Graph, a: &str, b: &str| {
        g.entry(a.into())
            .or_default()
            .entry(b.into())
            .or_default()
            .insert(format!("{a}.rs"));
    };
    step(&mut graph, "config", "probe");
    step(&mut graph, "probe", "breaker");
    step(&mut graph, "breaker", "state");
    assert_eq!(circle(&graph), None);
    step(&mut graph, "breaker", "config");
    let found = circle(&graph).expect("the circle");
    assert!(
        found.contains("config → probe (in {\"config.rs\"})"),
        "{found}"
    );
    assert!(found.contains("breaker → config"), "{found}");
}

#[test]
fn imports_are_read_from_code_use_trees_attributes_and_macros_but_not_tests_or_docs() {
    let ast: syn::File = syn::parse_str(
        r#"
        use crate::{a::X, b};
        use super::sibling::Y;
        /// Links [`Z`](crate::doc_only::Z).
        #[serde(with = "crate::from_attr::f")]
        struct S;
        fn f() { crate::from_code::g(); tracing::debug!("{}", crate::from_macro::h()); }
        setters! {
            /// Links [`W`](crate::doc_in_macro::W).
            a: u32 => |c, v| c.a = v;
        }
        #[cfg(test)]
        mod tests { use crate::from_tests::T; }
        #[cfg(test)]
        fn helper() { crate::from_test_fn::x(); }
        #[cfg(feature = "test-util")]
        fn util() { crate::from_feature::x(); }
        "#,
    )
    .unwrap();
    let mut paths = Paths::default();
    paths.visit_file(&ast);
    let seconds: BTreeSet<&str> = paths.0.iter().map(|s| s[1].as_str()).collect();
    let want: BTreeSet<&str> = [
        "a",
        "b",
        "sibling",
        "from_attr",
        "from_code",
        "from_macro",
        "from_feature",
    ]
    .into_iter()
    .collect();
    assert_eq!(seconds, want);
    // Another crate's `$crate::` and a name ending in `crate` are not this crate.
    let mut paths = Paths::default();
    paths.add_text("$crate :: no :: x ; my_crate :: no :: y");
    assert!(paths.0.is_empty(), "{:?}", paths.0);
}

/// Writes the crate `files` (path, text) into a directory of its own and reads its graphs.
fn scratch_crate(name: &str, files: &[(&str, &str)]) -> Crate {
    let dir = std::env::temp_dir().join(format!("layers-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let path = dir.join("src").join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let c = read_crate_at(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    c
}

#[test]
fn a_child_that_uses_what_its_module_file_defines_closes_a_circle() {
    let c = scratch_crate(
        "module-file",
        &[
            ("lib.rs", "mod m;"),
            (
                "m.rs",
                "mod kid; mod other; pub struct Shared; pub use kid::K; fn f() { other::g(); }",
            ),
            ("m/kid.rs", "use super::Shared; pub struct K;"),
            ("m/other.rs", "pub fn g() { let _ = super::K; }"),
        ],
    );
    let m = &c.folders["m"];
    // The module file's own definition, used by a child: kid → (m.rs) → kid.
    assert!(m["kid"].contains_key("(m.rs)"), "{m:?}");
    assert!(m["(m.rs)"].contains_key("kid"), "{m:?}");
    // A re-export counts as the child that defines it: other uses kid, not the module file.
    assert!(m["other"].contains_key("kid"), "{m:?}");
    assert!(!m["other"].contains_key("(m.rs)"), "{m:?}");
    let found = circle(m).expect("the circle through the module file");
    assert!(found.contains("(m.rs) → kid"), "{found}");
}

#[test]
fn a_module_that_imports_what_lib_rs_defines_is_named() {
    let c = scratch_crate(
        "lib-rs",
        &[
            (
                "lib.rs",
                "mod a; mod b; pub use b::Exported; struct Defined;",
            ),
            ("a.rs", "use crate::{Defined, Exported};"),
            ("b.rs", "pub struct Exported;"),
        ],
    );
    assert_eq!(
        c.from_root.keys().collect::<Vec<_>>(),
        ["Defined"],
        "only what lib.rs defines, not what it re-exports"
    );
    assert!(c.modules["a"].contains_key("b"), "{:?}", c.modules);
}
