//! The folders of `src/log/` use one another in one direction: the order that `src/log/mod.rs`'s
//! docs give ("Layers, bottom first: ..."), where a folder uses only the folders before it. One
//! run lists every use of a later folder, with where it is.
//!
//! A folder uses another when its code (its unit tests left out) names it in a path
//! (`crate::log::x::...`, `super::x::...` up to the log), names an item the log's root
//! re-exports from it (`crate::log::LogConfig` is `config`'s), reaches one of the owners the
//! shared state holds for it (`shared.view` is `segments`', `writer.points` is `durability`'s),
//! or calls a method of `Shared` that only it defines. `src/log/mod.rs` and `open.rs`, the root,
//! may use every folder.
//!
//! The files are lexed by proc-macro2, as `tests/size_limits.rs` does, so comments and strings
//! never count.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// The fields of `Shared` and `Writer` that hold an owner, and the folder that owns it.
const OWNER_FIELDS: [(&str, &str); 12] = [
    ("view", "segments"),
    ("tail", "segments"),
    ("durability", "durability"),
    ("points", "durability"),
    ("txn", "txn"),
    ("producers", "txn"),
    ("replication", "replication"),
    ("maintenance", "maintenance"),
    ("files", "files"),
    ("deletes", "files"),
    ("counters", "observe"),
    ("live", "read"),
];

/// The names the code gives the shared state and the writer mutex's state.
const RECEIVERS: [&str; 4] = ["self", "shared", "writer", "log"];

/// One source file of `src/log/`, its unit tests removed.
struct Source {
    /// Relative to `src/log/`, for messages.
    name: String,
    /// The module path under `crate::log` (`["write", "append"]`; empty for the root).
    module: Vec<String>,
    tokens: Vec<TokenTree>,
}

impl Source {
    /// The folder the file belongs to, `None` for the root.
    fn folder(&self) -> Option<&str> {
        self.module
            .first()
            .map(String::as_str)
            .filter(|&first| first != "open")
    }
}

/// A use of one folder by another.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Use {
    from: String,
    to: String,
    what: String,
    at: String,
}

fn log_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/log")
}

fn sources() -> Vec<Source> {
    let mut files = Vec::new();
    walk(&log_dir(), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(log_dir()).expect("under src/log");
            let name = relative.to_string_lossy().into_owned();
            let mut module: Vec<String> = relative
                .with_extension("")
                .iter()
                .map(|part| part.to_string_lossy().into_owned())
                .collect();
            if module.last().is_some_and(|last| last == "mod") {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).expect("a readable source file");
            let tokens = TokenStream::from_str(&text)
                .unwrap_or_else(|error| panic!("{name} does not lex: {error}"))
                .into_iter()
                .collect();
            Source {
                name,
                module,
                tokens: without_test_modules(tokens),
            }
        })
        .collect()
}

/// Every `.rs` file under `dir` but unit-test files (`tests.rs`, `tests/`).
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable directory") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if path.is_dir() {
            if name.as_deref() != Some("tests") {
                walk(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") && name.as_deref() != Some("tests.rs")
        {
            out.push(path);
        }
    }
}

/// The tokens without the items marked `#[cfg(test)]` (a file's unit tests).
fn without_test_modules(tokens: Vec<TokenTree>) -> Vec<TokenTree> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < tokens.len() {
        let is_test_attribute = matches!(
            (&tokens[at], tokens.get(at + 1)),
            (TokenTree::Punct(hash), Some(TokenTree::Group(group)))
                if hash.as_char() == '#' && group.to_string().replace(' ', "") == "[cfg(test)]"
        );
        if !is_test_attribute {
            out.push(tokens[at].clone());
            at += 1;
            continue;
        }
        // Skip the item: through its `;` or its brace group.
        at += 2;
        while let Some(token) = tokens.get(at) {
            at += 1;
            match token {
                TokenTree::Punct(p) if p.as_char() == ';' => break,
                TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => break,
                _ => {}
            }
        }
    }
    out
}

/// The layer order of `src/log/mod.rs`'s docs.
fn layer_order() -> Vec<String> {
    let text = std::fs::read_to_string(log_dir().join("mod.rs")).expect("src/log/mod.rs");
    let docs: String = text
        .lines()
        .filter_map(|line| line.strip_prefix("//!"))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    let (_, rest) = docs
        .split_once("Layers, bottom first:")
        .expect("src/log/mod.rs names the layer order: \"Layers, bottom first: a, b, ...\"");
    let (list, _) = rest.split_once('.').expect("the order ends with a period");
    list.split(',').map(|name| name.trim().to_owned()).collect()
}

fn is_ident(token: Option<&TokenTree>, name: &str) -> bool {
    matches!(token, Some(TokenTree::Ident(ident)) if ident == name)
}

fn ident_of(token: Option<&TokenTree>) -> Option<String> {
    match token {
        Some(TokenTree::Ident(ident)) => Some(ident.to_string()),
        _ => None,
    }
}

fn is_punct(token: Option<&TokenTree>, c: char) -> bool {
    matches!(token, Some(TokenTree::Punct(p)) if p.as_char() == c)
}

/// Whether `::` starts at `at`.
fn is_path_sep(tokens: &[TokenTree], at: usize) -> bool {
    is_punct(tokens.get(at), ':') && is_punct(tokens.get(at + 1), ':')
}

fn line_of(token: &TokenTree) -> usize {
    token.span().start().line
}

/// The names a path segment reaches at `at`: one identifier, or the first identifier of each
/// element of a `{...}` group.
fn reached_names(tokens: &[TokenTree], at: usize) -> Vec<String> {
    match tokens.get(at) {
        Some(TokenTree::Ident(ident)) => vec![ident.to_string()],
        Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Brace => {
            let inner: Vec<TokenTree> = group.stream().into_iter().collect();
            let mut names = Vec::new();
            let mut start = true;
            for token in &inner {
                if start && let TokenTree::Ident(ident) = token {
                    names.push(ident.to_string());
                }
                start = is_punct(Some(token), ',');
            }
            names
        }
        _ => Vec::new(),
    }
}

/// The items the root brings in from each folder (`pub use config::{LogConfig, ...}`).
fn root_items(root: &Source, folders: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut items = BTreeMap::new();
    let tokens = &root.tokens;
    for at in 0..tokens.len() {
        let Some(folder) = ident_of(tokens.get(at + 1)).filter(|f| folders.contains(f)) else {
            continue;
        };
        if !is_ident(tokens.get(at), "use") {
            continue;
        }
        let mut end = at + 2;
        while end < tokens.len() && !is_punct(tokens.get(end), ';') {
            end += 1;
        }
        let mut names = Vec::new();
        collect_idents(&tokens[at + 2..end], &mut names);
        for name in names.into_iter().filter(|n| n.chars().next().is_some()) {
            items.entry(name).or_insert_with(|| folder.clone());
        }
    }
    items
}

fn collect_idents(tokens: &[TokenTree], out: &mut Vec<String>) {
    for token in tokens {
        match token {
            TokenTree::Ident(ident) => out.push(ident.to_string()),
            TokenTree::Group(group) => {
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                collect_idents(&inner, out);
            }
            _ => {}
        }
    }
}

/// The methods of `Shared` each folder defines (`impl Shared { fn ... }`).
fn shared_methods(sources: &[Source]) -> BTreeMap<String, BTreeSet<String>> {
    let mut methods: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for source in sources {
        let Some(folder) = source.folder() else {
            continue;
        };
        let tokens = &source.tokens;
        for at in 0..tokens.len() {
            if !(is_ident(tokens.get(at), "impl") && is_ident(tokens.get(at + 1), "Shared")) {
                continue;
            }
            let Some(TokenTree::Group(body)) = tokens.get(at + 2) else {
                continue;
            };
            let inner: Vec<TokenTree> = body.stream().into_iter().collect();
            for (n, token) in inner.iter().enumerate() {
                if is_ident(Some(token), "fn")
                    && let Some(name) = ident_of(inner.get(n + 1))
                {
                    methods.entry(name).or_default().insert(folder.to_owned());
                }
            }
        }
    }
    methods
}

/// Every use `source` makes of another folder.
fn uses_of(
    source: &Source,
    folders: &BTreeSet<String>,
    items: &BTreeMap<String, String>,
    methods: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<Use> {
    let mut uses = Vec::new();
    let from = source.folder().unwrap_or("root").to_owned();
    let owners: BTreeMap<&str, &str> = OWNER_FIELDS.into_iter().collect();
    let visit = |tokens: &[TokenTree], self_is_shared: bool, uses: &mut Vec<Use>| {
        for at in 0..tokens.len() {
            let mut record = |to: &str, what: String, token: &TokenTree| {
                if to != from && folders.contains(to) {
                    uses.push(Use {
                        from: from.clone(),
                        to: to.to_owned(),
                        what,
                        at: format!("{}:{}", source.name, line_of(token)),
                    });
                }
            };
            // crate::log::X and super::...::X reaching the log's root.
            let mut reached = None;
            if is_ident(tokens.get(at), "crate")
                && is_path_sep(tokens, at + 1)
                && is_ident(tokens.get(at + 3), "log")
                && is_path_sep(tokens, at + 4)
                && !(at >= 2 && is_path_sep(tokens, at - 2))
            {
                reached = Some(at + 6);
            } else if is_ident(tokens.get(at), "super") && !(at >= 2 && is_path_sep(tokens, at - 2))
            {
                let mut ups = 0;
                let mut next = at;
                while is_ident(tokens.get(next), "super") && is_path_sep(tokens, next + 1) {
                    ups += 1;
                    next += 3;
                }
                // From module `a::b`, `super::super::` is the log's root.
                if ups > 0 && ups == source.module.len() {
                    reached = Some(next);
                }
            }
            if let Some(next) = reached {
                for name in reached_names(tokens, next) {
                    if folders.contains(&name) {
                        record(&name, format!("the path to {name}"), &tokens[at]);
                    } else if let Some(folder) = items.get(&name) {
                        record(folder, format!("{name}, from {folder}"), &tokens[at]);
                    }
                }
            }
            // An owner the shared state holds, or a method of Shared.
            let receiver = ident_of(tokens.get(at))
                .filter(|r| RECEIVERS.contains(&r.as_str()) && (r != "self" || self_is_shared));
            if receiver.is_some()
                && is_punct(tokens.get(at + 1), '.')
                && let Some(name) = ident_of(tokens.get(at + 2))
            {
                if let Some(&owner) = owners.get(name.as_str()) {
                    record(owner, format!("the owner .{name}"), &tokens[at]);
                }
                let is_call = matches!(
                    tokens.get(at + 3),
                    Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis
                );
                if is_call
                    && let Some(defined) = methods.get(&name)
                    && defined.len() == 1
                    && let Some(folder) = defined.iter().next()
                {
                    record(folder, format!("Shared::{name}"), &tokens[at]);
                }
            }
        }
    };
    // `self` is the shared state only inside `impl Shared`.
    let tokens = &source.tokens;
    let mut at = 0;
    while at < tokens.len() {
        if is_ident(tokens.get(at), "impl")
            && let Some((self_type, body)) = impl_block(tokens, at)
        {
            visit(&tokens[at..body], false, &mut uses);
            if let TokenTree::Group(group) = &tokens[body] {
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                walk_groups(&inner, &mut |t| visit(t, self_type == "Shared", &mut uses));
            }
            at = body + 1;
            continue;
        }
        let end = tokens[at..]
            .iter()
            .position(|t| is_ident(Some(t), "impl"))
            .map_or(tokens.len(), |n| at + n.max(1));
        walk_groups(&tokens[at..end], &mut |t| visit(t, false, &mut uses));
        at = end;
    }
    uses
}

/// The self type of the `impl` item at `at` (the type after `for` in a trait impl) and the
/// index of its body.
fn impl_block(tokens: &[TokenTree], at: usize) -> Option<(String, usize)> {
    let body = at
        + tokens[at..]
            .iter()
            .position(|t| matches!(t, TokenTree::Group(g) if g.delimiter() == Delimiter::Brace))?;
    let header = &tokens[at + 1..body];
    let after_for = header
        .iter()
        .position(|t| is_ident(Some(t), "for"))
        .map_or(0, |n| n + 1);
    let self_type = header[after_for..].iter().find_map(|t| match t {
        TokenTree::Ident(ident) => Some(ident.to_string()),
        _ => None,
    })?;
    Some((self_type, body))
}

/// Calls `f` on `tokens` and on the tokens of every group inside, at any depth.
fn walk_groups(tokens: &[TokenTree], f: &mut dyn FnMut(&[TokenTree])) {
    f(tokens);
    for token in tokens {
        if let TokenTree::Group(group) = token {
            let inner: Vec<TokenTree> = group.stream().into_iter().collect();
            walk_groups(&inner, f);
        }
    }
}

#[test]
fn the_layer_order_names_every_folder_once() {
    let order = layer_order();
    let unique: BTreeSet<&String> = order.iter().collect();
    assert_eq!(unique.len(), order.len(), "a folder twice in {order:?}");
    let folders: BTreeSet<String> = sources()
        .iter()
        .filter_map(|s| s.folder().map(str::to_owned))
        .collect();
    let named: BTreeSet<String> = order.into_iter().collect();
    assert_eq!(
        folders, named,
        "src/log/mod.rs's layer order must name exactly the folders of src/log"
    );
}

#[test]
fn folders_use_only_the_folders_before_them() {
    let order = layer_order();
    let rank: BTreeMap<&str, usize> = order.iter().map(String::as_str).zip(0..).collect();
    let folders: BTreeSet<String> = order.iter().cloned().collect();
    let sources = sources();
    let root = sources
        .iter()
        .find(|s| s.module.is_empty())
        .expect("src/log/mod.rs");
    let items = root_items(root, &folders);
    let methods = shared_methods(&sources);
    let mut upward: BTreeSet<Use> = BTreeSet::new();
    let mut edges = 0;
    for source in sources.iter().filter(|s| s.folder().is_some()) {
        for used in uses_of(source, &folders, &items, &methods) {
            edges += 1;
            if rank[used.to.as_str()] > rank[used.from.as_str()] {
                upward.insert(used);
            }
        }
    }
    // The walk finds uses at all: a lexer or layout change must not make this pass vacuously.
    assert!(edges > 100, "only {edges} uses found between folders");
    let listing: Vec<String> = upward
        .iter()
        .map(|u| format!("{} uses {} ({}) at {}", u.from, u.to, u.what, u.at))
        .collect();
    assert!(
        listing.is_empty(),
        "{} uses of a folder later in the order ({order:?}):\n{}",
        listing.len(),
        listing.join("\n")
    );
}
