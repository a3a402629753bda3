//! Tables of contents: no function that ships is longer than a page. A function past
//! [`LONGEST`] lines holds more than one step: it should read as a list of named steps.

use crate::source::{ItemEnd, SourceFile, item_end};

/// The most lines a function may span, its signature and closing brace included.
pub const LONGEST: usize = 120;

/// A function and how many lines it spans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    /// 1-based, where `fn` is written.
    pub line: usize,
    pub lines: usize,
}

/// Every function with a body in `file`'s shipped code (test code is already left out), nested
/// ones included.
pub fn functions(file: &SourceFile) -> Vec<Function> {
    let code = file.code.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(offset) = file.code[at..].find("fn ") {
        let start = at + offset;
        at = start + 3;
        let word_start =
            start == 0 || !(code[start - 1].is_ascii_alphanumeric() || code[start - 1] == b'_');
        if !word_start {
            continue;
        }
        let name: String = file.code[start + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        let ItemEnd::Body(body) = item_end(&file.code[start..]) else {
            continue;
        };
        let first = line_of(&file.code, start);
        let last = line_of(&file.code, start + body);
        found.push(Function {
            name,
            line: first,
            lines: last - first + 1,
        });
    }
    found
}

fn line_of(code: &str, offset: usize) -> usize {
    code[..offset].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{module_of, shipped_code};
    use std::path::{Path, PathBuf};

    fn file(text: &str) -> SourceFile {
        SourceFile {
            path: PathBuf::from("lib.rs"),
            module: module_of(Path::new("lib.rs")),
            code: shipped_code(text),
        }
    }

    #[test]
    fn a_function_spans_its_signature_to_its_closing_brace() {
        let found = functions(&file(
            "trait T {\n    fn declared(&self);\n}\nfn short() {}\nfn long(\n    a: [u8; 2],\n) -> u8 {\n    let s = \"}\";\n    // }\n    a[0]\n}\n",
        ));
        let spans: Vec<(&str, usize)> = found.iter().map(|f| (f.name.as_str(), f.lines)).collect();
        assert_eq!(spans, [("short", 1), ("long", 7)]);
    }
}
