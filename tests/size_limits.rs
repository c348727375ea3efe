//! The size limits of CONTRIBUTING.md hold: no source file has more than 1,000 lines before its
//! tests, `src/log/mod.rs` and `src/segment/log_segment.rs` stay under 800, README.md within 25 KB
//! and ARCHITECTURE.md within 60 KB, and no function passes 150 lines. One run lists every
//! offender with its size.
//!
//! The sources are `src/**.rs` and `crates/*/src/**.rs` (the library, the tool and the workspace
//! crates). Functions are free functions, methods and trait methods with a body, test code
//! included (a 200-line test is as hard to read as a 200-line function), and functions written
//! inside macro invocations (`proptest!`, `macro_rules!`) too. A function's length runs from the
//! line of its `fn` to the line of its closing brace; its doc comment and attributes do not count.
//!
//! The files are lexed by proc-macro2 (the lexer procedural macros use: strings, raw strings,
//! char literals against lifetimes, nested comments), and the token trees it returns are walked
//! here: a function is `fn` followed by its name, and its body is the first brace-delimited group
//! after the name outside the generics, so nested functions and closures inside a body need no
//! special case (a nested function counts in its own right and inside its parent).
//!
//! The same walk checks CONTRIBUTING.md's one placement of unit tests: a file's unit tests are one
//! `mod tests`, compiled only in tests, as its last item, and no `#[path]` attribute moves a
//! module's file elsewhere.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

/// No source file has more lines before its test module.
const FILE_LINES: usize = 1_000;
/// The files with a tighter limit: they stay under 800 lines before their tests.
const TIGHT_FILES: [(&str, usize); 2] =
    [("src/log/mod.rs", 800), ("src/segment/log_segment.rs", 800)];
/// No function is longer.
const FUNCTION_LINES: usize = 150;
/// The documents and the bytes they may hold.
const DOCS: [(&str, usize); 2] = [("README.md", 25 * 1024), ("ARCHITECTURE.md", 60 * 1024)];

/// A function found in a file: its name, and the lines of its `fn` and of its closing brace
/// (1-based).
#[derive(Debug, PartialEq, Eq)]
struct Function {
    name: String,
    first_line: usize,
    last_line: usize,
}

impl Function {
    fn lines(&self) -> usize {
        self.last_line - self.first_line + 1
    }
}

/// A top-level module compiled only in tests.
#[derive(Debug, PartialEq, Eq)]
struct TestModule {
    name: String,
    /// The line of its first attribute (doc comments included).
    first_line: usize,
    /// Whether nothing follows it in the file.
    is_last: bool,
}

/// What the size-limit test needs of one source file.
#[derive(Debug)]
struct Source {
    /// The lines before the file's first test module (all of them when it has none).
    lines_before_tests: usize,
    functions: Vec<Function>,
    test_modules: Vec<TestModule>,
    /// The lines of its `#[path = ...]` attributes.
    path_attributes: Vec<usize>,
}

/// Lexes `text` and measures it; an error when proc-macro2 cannot lex it.
fn measure(text: &str) -> Result<Source, String> {
    let tokens = TokenStream::from_str(text).map_err(|error| error.to_string())?;
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let test_modules = test_modules(&tokens);
    let lines_before_tests = match test_modules.first() {
        Some(module) => module.first_line - 1,
        None => text.lines().count(),
    };
    let mut functions = Vec::new();
    collect_functions(&tokens, &mut functions);
    let mut path_attributes = Vec::new();
    collect_path_attributes(&tokens, &mut path_attributes);
    Ok(Source {
        lines_before_tests,
        functions,
        test_modules,
        path_attributes,
    })
}

/// The file's top-level modules compiled only in tests (`#[cfg(test)]` or
/// `#[cfg(all(test, ...))]` among their attributes).
fn test_modules(tokens: &[TokenTree]) -> Vec<TestModule> {
    let mut modules = Vec::new();
    let mut at = 0;
    while at < tokens.len() {
        let Some(first_line) = attribute_line(tokens, at) else {
            at += 1;
            continue;
        };
        let mut test_only = false;
        while attribute_line(tokens, at).is_some() {
            test_only |= is_test_cfg(&tokens[at + 1]);
            at += 2;
        }
        if let Some((name, end)) = module_item(&tokens[at..]).filter(|_| test_only) {
            at += end;
            modules.push(TestModule {
                name,
                first_line,
                is_last: at == tokens.len(),
            });
        }
    }
    modules
}

/// The line of the outer attribute (`#` then `[...]`) at `at`, if there is one.
fn attribute_line(tokens: &[TokenTree], at: usize) -> Option<usize> {
    match (tokens.get(at), tokens.get(at + 1)) {
        (Some(TokenTree::Punct(hash)), Some(TokenTree::Group(group)))
            if hash.as_char() == '#' && group.delimiter() == Delimiter::Bracket =>
        {
            Some(hash.span().start().line)
        }
        _ => None,
    }
}

/// Whether an attribute's bracket group is `cfg(test)` or `cfg(all(test, ...))`.
fn is_test_cfg(bracket: &TokenTree) -> bool {
    let text: String = bracket
        .to_string()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    text == "[cfg(test)]" || text.starts_with("[cfg(all(test,")
}

/// The name of the module item the tokens start (`mod`, `pub mod`, `pub(crate) mod`) and the
/// number of its tokens (through its `;` or its braces).
fn module_item(tokens: &[TokenTree]) -> Option<(String, usize)> {
    for (at, token) in tokens.iter().enumerate() {
        match token {
            TokenTree::Ident(ident) if ident == "mod" => {
                let Some(TokenTree::Ident(name)) = tokens.get(at + 1) else {
                    return None;
                };
                return Some((name.to_string(), at + 3));
            }
            TokenTree::Ident(ident) if ident == "pub" => {}
            TokenTree::Group(group) if group.delimiter() == Delimiter::Parenthesis => {}
            _ => return None,
        }
    }
    None
}

/// Adds the line of every `#[path = ...]` attribute in `tokens` (at any depth) to `out`.
fn collect_path_attributes(tokens: &[TokenTree], out: &mut Vec<usize>) {
    for (at, token) in tokens.iter().enumerate() {
        if let TokenTree::Group(group) = token {
            let inner: Vec<TokenTree> = group.stream().into_iter().collect();
            let is_path = matches!(inner.first(), Some(TokenTree::Ident(first)) if first == "path");
            if let Some(line) = at
                .checked_sub(1)
                .and_then(|hash| attribute_line(tokens, hash))
                && is_path
            {
                out.push(line);
            }
            collect_path_attributes(&inner, out);
        }
    }
}

/// Adds every function with a body in `tokens` (at any depth) to `out`.
fn collect_functions(tokens: &[TokenTree], out: &mut Vec<Function>) {
    for (at, token) in tokens.iter().enumerate() {
        match token {
            TokenTree::Ident(keyword) if keyword == "fn" => {
                if let Some(TokenTree::Ident(name)) = tokens.get(at + 1)
                    && let Some(body) = function_body(&tokens[at + 2..])
                {
                    out.push(Function {
                        name: name.to_string(),
                        first_line: keyword.span().start().line,
                        last_line: body.span_close().start().line,
                    });
                }
            }
            TokenTree::Group(group) => {
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                collect_functions(&inner, out);
            }
            _ => {}
        }
    }
}

/// The body of a function whose signature follows its name in `signature`: the first brace group
/// outside angle brackets (a const generic argument such as `Foo<{ N }>` is inside them). `None`
/// when a `;` ends the signature first (a trait method without a default, an extern function).
fn function_body(signature: &[TokenTree]) -> Option<&proc_macro2::Group> {
    let mut angle_depth = 0usize;
    let mut previous_joint: Option<char> = None;
    for token in signature {
        match token {
            TokenTree::Group(group)
                if group.delimiter() == Delimiter::Brace && angle_depth == 0 =>
            {
                return Some(group);
            }
            TokenTree::Punct(punct) => {
                match punct.as_char() {
                    ';' if angle_depth == 0 => return None,
                    '<' => angle_depth += 1,
                    // `->` and `=>` close nothing.
                    '>' if !matches!(previous_joint, Some('-' | '=')) => {
                        angle_depth = angle_depth.saturating_sub(1);
                    }
                    _ => {}
                }
                previous_joint = (punct.spacing() == Spacing::Joint).then_some(punct.as_char());
                continue;
            }
            _ => {}
        }
        previous_joint = None;
    }
    None
}

/// The Rust sources under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The sources the limits cover: `src/` and every `crates/*/src/`.
fn sources(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let crates = std::fs::read_dir(root.join("crates")).expect("the crates directory");
    for krate in crates {
        rust_files(
            &krate.expect("a directory entry").path().join("src"),
            &mut files,
        );
    }
    files.sort();
    files
}

/// Every source, by its path from the root, measured.
fn measured_sources() -> Vec<(String, Source)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = sources(root);
    assert!(files.len() > 100, "found only {} sources", files.len());
    files
        .iter()
        .map(|path| {
            let relative = path.strip_prefix(root).expect("under the root");
            let name = relative.to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(path).expect("a readable source file");
            let source = measure(&text).unwrap_or_else(|error| panic!("{name}: {error}"));
            (name, source)
        })
        .collect()
}

#[test]
fn the_size_limits_hold() {
    let mut offenders = Vec::new();
    for (name, source) in measured_sources() {
        let tight = TIGHT_FILES.iter().find(|(tight, _)| *tight == name);
        let over = match tight {
            Some(&(_, under)) => {
                (source.lines_before_tests >= under).then(|| format!("under {under}"))
            }
            None => {
                (source.lines_before_tests > FILE_LINES).then(|| format!("at most {FILE_LINES}"))
            }
        };
        if let Some(limit) = over {
            offenders.push(format!(
                "{name}: {} lines before its tests ({limit})",
                source.lines_before_tests
            ));
        }
        for function in source
            .functions
            .iter()
            .filter(|f| f.lines() > FUNCTION_LINES)
        {
            offenders.push(format!(
                "{name}:{}: fn {} has {} lines (at most {FUNCTION_LINES})",
                function.first_line,
                function.name,
                function.lines()
            ));
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (doc, limit) in DOCS {
        let bytes = std::fs::metadata(root.join(doc)).expect(doc).len() as usize;
        if bytes > limit {
            offenders.push(format!("{doc}: {bytes} bytes (at most {limit})"));
        }
    }
    assert!(
        offenders.is_empty(),
        "{} over the size limits (CONTRIBUTING.md): split a file by what its parts own, a \
         function into named steps\n{}",
        offenders.len(),
        offenders.join("\n")
    );
}

#[test]
fn unit_tests_have_one_place() {
    let mut offenders = Vec::new();
    for (name, source) in measured_sources() {
        for module in &source.test_modules {
            if module.name != "tests" {
                offenders.push(format!(
                    "{name}:{}: test module `{}` (name it `tests`; shuttle's go in \
                     `tests::shuttle_tests`)",
                    module.first_line, module.name
                ));
            } else if !module.is_last {
                offenders.push(format!(
                    "{name}:{}: `mod tests` is not the file's last item",
                    module.first_line
                ));
            }
        }
        for line in &source.path_attributes {
            offenders.push(format!(
                "{name}:{line}: #[path] (a long test module becomes `<module>/tests.rs`)"
            ));
        }
    }
    assert!(
        offenders.is_empty(),
        "{} unit-test placements differ from CONTRIBUTING.md's \"Where unit tests live\"\n{}",
        offenders.len(),
        offenders.join("\n")
    );
}

// The scanner's own tests.

fn functions(text: &str) -> Vec<(String, usize)> {
    let source = measure(text).expect("lexes");
    source
        .functions
        .into_iter()
        .map(|f| {
            let lines = f.lines();
            (f.name, lines)
        })
        .collect()
}

#[test]
fn a_function_runs_from_its_fn_to_its_closing_brace() {
    let text = "/// Doc.\n#[inline]\npub fn one(\n    a: u8,\n) -> u8 {\n    a\n}\n";
    assert_eq!(functions(text), [("one".to_owned(), 5)]);
}

#[test]
fn braces_in_strings_chars_and_comments_are_not_code() {
    let text = r####"
fn tricky<'a>(x: &'a str) -> char {
let _ = "}";
let _ = r#"} fn fake() { "#;
let _ = b'}';
// }
/* } /* nested } */ } */
let _: &'static str = "fn also_fake() {}";
'}'
}
fn after() {}
"####;
    assert_eq!(
        functions(text),
        [("tricky".to_owned(), 9), ("after".to_owned(), 1)]
    );
}

#[test]
fn nested_functions_count_in_their_own_right_and_closures_in_their_parent() {
    let text = "fn outer() {\n    fn inner() {\n        let f = |x: u8| {\n            x\n        };\n    }\n    let g = move || {};\n}\n";
    assert_eq!(
        functions(text),
        [("outer".to_owned(), 8), ("inner".to_owned(), 5)]
    );
}

#[test]
fn declarations_pointer_types_and_where_clauses() {
    let text = "trait T {\n    fn declared(&self) -> u8;\n    fn default(&self) -> u8 {\n        0\n    }\n}\n\
                fn takes(f: fn(u8) -> u8, g: impl Fn() -> u8) -> Vec<Vec<u8>>\nwhere\n    u8: Copy,\n{\n    vec![]\n}\n\
                fn generic<const N: usize>() -> [u8; N] where Foo<{ N }>: Sized {\n    [0; N]\n}\n";
    assert_eq!(
        functions(text),
        [
            ("default".to_owned(), 3),
            ("takes".to_owned(), 6),
            ("generic".to_owned(), 3),
        ]
    );
}

#[test]
fn functions_inside_macro_invocations_count() {
    let text =
        "proptest! {\n    #[test]\n    fn prop(x in 0u8..) {\n        let _ = x;\n    }\n}\n";
    assert_eq!(functions(text), [("prop".to_owned(), 3)]);
}

#[test]
fn a_file_counts_the_lines_before_its_test_module() {
    let text = "fn a() {}\n#[cfg(test)]\nfn helper() {}\n\n/// Tests.\n#[cfg(test)]\n#[allow(unused)]\nmod tests {\n}\n";
    let source = measure(text).expect("lexes");
    assert_eq!(source.lines_before_tests, 4);
    assert_eq!(
        source.test_modules,
        [TestModule {
            name: "tests".to_owned(),
            first_line: 5,
            is_last: true
        }]
    );
    let shuttle = "fn a() {}\n#[cfg(all(test, shuttle))]\nmod shuttle_tests;\n";
    assert_eq!(measure(shuttle).expect("lexes").lines_before_tests, 1);
    let sim = "#[cfg(any(test, feature = \"sim\"))]\nmod sim;\nfn a() {}\n";
    assert_eq!(measure(sim).expect("lexes").lines_before_tests, 3);
}

#[test]
fn test_modules_out_of_place_and_path_attributes_are_found() {
    let text = "#[cfg(test)]\n#[path = \"a_tests.rs\"]\nmod tests;\nfn after() {}\n\
                #[cfg(all(test, shuttle))]\nmod shuttle_tests {\n}\n";
    let source = measure(text).expect("lexes");
    assert_eq!(source.path_attributes, [2]);
    let found: Vec<(&str, usize, bool)> = source
        .test_modules
        .iter()
        .map(|m| (m.name.as_str(), m.first_line, m.is_last))
        .collect();
    assert_eq!(found, [("tests", 1, false), ("shuttle_tests", 5, true)]);
}
