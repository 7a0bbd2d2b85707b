//! Tool `outline`: the definitions (fn, struct, enum, trait, impl, mod, class, def...) in
//! a workspace file with their line numbers, so the model can navigate a file (then read
//! a line range) without reading all of it.
//!
//! The language comes from the extension (`.rs`, `.py`, `.go`, `.js`, `.ts`); definitions
//! are found line by line with regexes (a signature spread over several lines shows its
//! first line). The file is read through the host's `read-file`: the manifest requests
//! those extensions, the project grants the paths.

use agentforge_plugin_sdk::serde_json::{json, Value};
use agentforge_plugin_sdk::{export_tool, read_file, ActionResult, Tool, ToolInfo, ToolOutput};
use regex::Regex;

/// At most this many definitions are listed.
const MAX_DEFINITIONS: usize = 200;
/// A longer signature line is cut (on a char boundary) and ends with `…`.
const MAX_LINE_CHARS: usize = 200;

/// The tool.
pub struct Outline;

impl Tool for Outline {
    fn describe() -> ToolInfo {
        ToolInfo {
            name: "outline".into(),
            description: "list the definitions (fn, struct, enum, trait, impl, mod, class, def) \
                          in a workspace file with their line numbers, to navigate without \
                          reading the whole file (.rs, .py, .go, .js, .ts)"
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "the file, relative to the workspace root (e.g. src/lib.rs)"
                    }
                },
                "required": ["path"]
            }),
            phases: vec!["analyze".into(), "plan".into(), "implement".into()],
        }
    }

    fn invoke(args: Value) -> Result<ToolOutput, String> {
        let path = path_argument(&args)?;
        let lang = Lang::of(path)?;
        let text = read_file(path).map_err(|e| format!("outline: cannot read `{path}`: {e}"))?;
        Ok(ToolOutput {
            result: ActionResult::Success,
            output: outline(path, lang, &text),
        })
    }
}

/// The `path` argument: a non-empty string.
fn path_argument(args: &Value) -> Result<&str, String> {
    match args.get("path") {
        Some(Value::String(p)) if !p.trim().is_empty() => Ok(p.trim()),
        Some(Value::String(_)) => Err("outline: `path` is empty".into()),
        Some(_) => Err("outline: `path` must be a string".into()),
        None => Err("outline: missing `path` (the file to outline)".into()),
    }
}

/// A language the outline knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    Rust,
    Python,
    Go,
    JavaScript,
    TypeScript,
}

impl Lang {
    /// The language of `path`, by its extension.
    fn of(path: &str) -> Result<Lang, String> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let ext = name
            .rsplit_once('.')
            .map(|(_, e)| e.to_ascii_lowercase())
            .unwrap_or_default();
        match ext.as_str() {
            "rs" => Ok(Lang::Rust),
            "py" => Ok(Lang::Python),
            "go" => Ok(Lang::Go),
            "js" => Ok(Lang::JavaScript),
            "ts" => Ok(Lang::TypeScript),
            _ => Err(format!(
                "outline: unsupported file type `{path}` (supported: .rs, .py, .go, .js, .ts); \
                 use read_file or search instead"
            )),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Go => "go",
            Lang::JavaScript => "javascript",
            Lang::TypeScript => "typescript",
        }
    }

    /// The line patterns of a definition.
    fn patterns(self) -> &'static [&'static str] {
        match self {
            Lang::Rust => &[concat!(
                r#"^\s*(?:pub(?:\s*\([^)]*\))?\s+)?"#,
                r#"(?:(?:default|const|async|unsafe|extern(?:\s+"[^"]*")?)\s+)*"#,
                r#"(?:(?:fn|struct|enum|union|trait|mod|type)\s+\w|impl\b|macro_rules!\s*\w)"#,
            )],
            Lang::Python => &[r"^\s*(?:async\s+)?def\s+\w", r"^\s*class\s+\w"],
            Lang::Go => &[r"^func\b", r"^type\s+\w"],
            Lang::JavaScript | Lang::TypeScript => &[
                r"^\s*(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:async\s+)?function\b",
                r"^\s*(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?class\s+\w",
                r"^\s*(?:export\s+)?(?:declare\s+)?(?:interface|namespace|type|(?:const\s+)?enum)\s+\w",
                concat!(
                    r"^\s*(?:export\s+)?(?:const|let|var)\s+\w+\s*(?::[^=]+)?=\s*(?:async\s+)?",
                    r"(?:function\b|\([^)]*\)\s*(?::[^=]+)?=>|\w+\s*=>)",
                ),
            ],
        }
    }

    /// A class method: an indented `name(params) {` line (not a control statement).
    fn method(self) -> Option<&'static str> {
        match self {
            Lang::JavaScript | Lang::TypeScript => Some(concat!(
                r"^\s+(?:(?:public|private|protected|static|async|readonly|abstract|override|get|set)\s+)*",
                r"\*?(\w+)\s*(?:<[^>]*>)?\s*\([^()'`",
                "\"",
                r"]*\)\s*(?::\s*[^{;]+)?\{\s*$",
            )),
            _ => None,
        }
    }
}

/// Words a `name(...) {` line starts with that are not methods.
const NOT_METHODS: &[&str] = &[
    "if", "for", "while", "switch", "catch", "with", "function", "return", "else", "do",
];

/// The outline of `text` (the file `path`): a header, then `<line>: <signature>` lines.
fn outline(path: &str, lang: Lang, text: &str) -> String {
    let patterns: Vec<Regex> = lang
        .patterns()
        .iter()
        .map(|p| Regex::new(p).expect("valid pattern"))
        .collect();
    let method = lang.method().map(|p| Regex::new(p).expect("valid pattern"));
    let is_definition = |line: &str| {
        patterns.iter().any(|r| r.is_match(line))
            || method.as_ref().is_some_and(|m| {
                m.captures(line)
                    .is_some_and(|c| !NOT_METHODS.contains(&&c[1]))
            })
    };
    let total = text.lines().count();
    let found: Vec<String> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| is_definition(l))
        .map(|(i, l)| format!("{}: {}", i + 1, cut(l.trim())))
        .collect();
    if found.is_empty() {
        return format!(
            "{path} ({}, {total} lines): no definitions found",
            lang.label()
        );
    }
    let plural = if found.len() == 1 { "" } else { "s" };
    let mut out = format!(
        "{path} ({}, {total} lines): {} definition{plural}",
        lang.label(),
        found.len()
    );
    for line in found.iter().take(MAX_DEFINITIONS) {
        out.push('\n');
        out.push_str(line);
    }
    if found.len() > MAX_DEFINITIONS {
        out.push_str(&format!(
            "\n… {} more definitions not shown (the first {MAX_DEFINITIONS} are listed); \
             read_file a line range or search for the rest",
            found.len() - MAX_DEFINITIONS
        ));
    }
    out
}

/// `line` cut to [`MAX_LINE_CHARS`] characters.
fn cut(line: &str) -> String {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

export_tool!(Outline);

#[cfg(test)]
mod tests {
    use super::*;

    /// The listed lines (without the header).
    fn listed(path: &str, text: &str) -> Vec<String> {
        let lang = Lang::of(path).unwrap();
        outline(path, lang, text)
            .lines()
            .skip(1)
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn rust_definitions() {
        let text = "\
//! docs
use std::fmt;

pub struct Point<T> {
    x: T,
}

impl<T> Point<T> {
    pub(crate) const fn new(x: T) -> Self {
        let fn_name = 3;
        Point { x }
    }
}

unsafe impl Send for Point<u8> {}
pub enum E { A }
pub trait Shape: fmt::Debug {
    type Output;
    fn area(&self) -> f64;
}
mod tests;
pub(super) async unsafe fn go() {}
extern \"C\" fn cb() {}
macro_rules! m { () => {} }
const FOO: u32 = 1;
// fn commented() {}
";
        assert_eq!(
            listed("src/lib.rs", text),
            [
                "4: pub struct Point<T> {",
                "8: impl<T> Point<T> {",
                "9: pub(crate) const fn new(x: T) -> Self {",
                "15: unsafe impl Send for Point<u8> {}",
                "16: pub enum E { A }",
                "17: pub trait Shape: fmt::Debug {",
                "18: type Output;",
                "19: fn area(&self) -> f64;",
                "21: mod tests;",
                "22: pub(super) async unsafe fn go() {}",
                "23: extern \"C\" fn cb() {}",
                "24: macro_rules! m { () => {} }",
            ]
        );
    }

    #[test]
    fn python_definitions() {
        let text = "import os\n\nclass A(B):\n    def f(self):\n        x = 'def g():'\n\nasync def main():\n    pass\n";
        assert_eq!(
            listed("app/main.py", text),
            ["3: class A(B):", "4: def f(self):", "7: async def main():"]
        );
    }

    #[test]
    fn go_definitions() {
        let text = "package x\n\ntype T struct {\n\tA int\n}\n\nfunc (t *T) M() error {\n\treturn nil\n}\nfunc F() {}\n";
        assert_eq!(
            listed("x/t.go", text),
            [
                "3: type T struct {",
                "7: func (t *T) M() error {",
                "10: func F() {}"
            ]
        );
    }

    #[test]
    fn js_and_ts_definitions() {
        let text = "\
export default async function main() {
  if (x) {
  }
  describe('a', () => {
  it('b', function () {
}
export class Foo extends Bar {
  constructor(a, b) {
  static async load(path: string): Promise<Foo> {
  for (const a of b) {
}
export interface Shape { area(): number }
type Id = string;
const add = (a, b) => a + b;
export const handler = async (req) => {
const x = compute(1);
";
        assert_eq!(
            listed("web/a.ts", text),
            [
                "1: export default async function main() {",
                "7: export class Foo extends Bar {",
                "8: constructor(a, b) {",
                "9: static async load(path: string): Promise<Foo> {",
                "12: export interface Shape { area(): number }",
                "13: type Id = string;",
                "14: const add = (a, b) => a + b;",
                "15: export const handler = async (req) => {",
            ]
        );
    }

    #[test]
    fn header_and_empty_outline() {
        let out = outline("a.py", Lang::Python, "x = 1\ny = 2\n");
        assert_eq!(out, "a.py (python, 2 lines): no definitions found");
        let out = outline("a.py", Lang::Python, "def f():\n  pass\n");
        assert_eq!(out, "a.py (python, 2 lines): 1 definition\n1: def f():");
    }

    #[test]
    fn at_most_200_definitions() {
        let text: String = (0..250).map(|i| format!("fn f{i}() {{}}\n")).collect();
        let out = outline("big.rs", Lang::Rust, &text);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1 + 200 + 1);
        assert_eq!(lines[200], "200: fn f199() {}");
        assert!(
            lines[201].starts_with("… 50 more definitions not shown"),
            "{}",
            lines[201]
        );
    }

    #[test]
    fn long_lines_are_cut() {
        let long = format!("def f({}):", "a, ".repeat(100));
        let out = listed("x.py", &long);
        assert_eq!(out[0].chars().count(), "1: ".len() + MAX_LINE_CHARS + 1);
        assert!(out[0].ends_with('…'));
    }

    #[test]
    fn languages_by_extension() {
        assert_eq!(Lang::of("src/Main.RS"), Ok(Lang::Rust));
        assert_eq!(Lang::of("a/b.ts"), Ok(Lang::TypeScript));
        for bad in ["README.md", "Makefile", "a.rs/b", "dir.py/file"] {
            let err = Lang::of(bad).unwrap_err();
            assert!(err.contains("unsupported file type"), "{err}");
        }
    }

    #[test]
    fn path_argument_is_checked() {
        assert_eq!(
            path_argument(&json!({"path": " src/a.rs "})),
            Ok("src/a.rs")
        );
        assert!(path_argument(&json!({})).unwrap_err().contains("missing"));
        assert!(path_argument(&json!({"path": ""}))
            .unwrap_err()
            .contains("empty"));
        assert!(path_argument(&json!({"path": 3}))
            .unwrap_err()
            .contains("string"));
    }
}
