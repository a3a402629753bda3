//! A crate's source as the house rules read it: which module each file is, and which modules
//! its code names (`use` trees and `crate::`/`super::`/`self::` paths, and paths through a
//! child module), with comments, string literals and `#[cfg(test)]` items left out so that
//! only the code that ships counts.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// A module's path inside its crate: `["controller", "act"]` for `controller/act.rs`.
pub type ModulePath = Vec<String>;

/// One source file of a crate.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// Relative to the crate's `src`.
    pub path: PathBuf,
    pub module: ModulePath,
    /// The code that ships: comments, strings and test items blanked, lines kept.
    pub code: String,
}

/// A module this file names, and the line that names it (1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    pub target: ModulePath,
    pub line: usize,
}

/// Every `.rs` file under `src`, except the files that only tests compile (`tests.rs`, and
/// files under a `tests/` folder).
pub fn read_crate(src: &Path) -> io::Result<Vec<SourceFile>> {
    let mut files = Vec::new();
    walk(src, src, &mut files)?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn walk(src: &Path, dir: &Path, files: &mut Vec<SourceFile>) -> io::Result<()> {
    let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "tests" && name != "snapshots" {
                walk(src, &path, files)?;
            }
            continue;
        }
        if !name.ends_with(".rs") || name == "tests.rs" {
            continue;
        }
        let relative = path.strip_prefix(src).unwrap_or(&path).to_path_buf();
        let text = fs::read_to_string(&path)?;
        files.push(SourceFile {
            module: module_of(&relative),
            code: shipped_code(&text),
            path: relative,
        });
    }
    Ok(())
}

/// `a/b.rs` is `a::b`, `a/mod.rs` is `a`, and the crate roots are the crate. A binary's
/// `main.rs` beside a `lib.rs` is a crate of its own, read as a module named `main`.
pub fn module_of(relative: &Path) -> ModulePath {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs").to_string();
        let root = parts.is_empty() && (stem == "lib" || stem == "main");
        if stem != "mod" && !root {
            parts.push(stem);
        }
    }
    parts
}

/// The text with comments, string and char literals blanked (newlines kept, so line numbers
/// hold) and every item behind `#[cfg(test)]` removed.
pub fn shipped_code(text: &str) -> String {
    drop_test_items(&blank_comments_and_strings(text))
}

fn blank_comments_and_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && matches!(next, Some('"') | Some('#')) && !ident_char_before(&chars, i)
        {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let closing: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let rest: String = chars[j + 1..].iter().collect();
            let end = rest.find(&closing).map_or(chars.len(), |at| {
                j + 1 + rest[..at].chars().count() + closing.len()
            });
            for &skipped in &chars[i..end.min(chars.len())] {
                out.push(blank(skipped));
            }
            i = end;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if let Some(&inner) = chars.get(i) {
                    out.push(blank(inner));
                }
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && is_char_literal(&chars, i) {
            let end = char_literal_end(&chars, i);
            for _ in i..end {
                out.push(' ');
            }
            i = end;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_char_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// `'a'`, `'\n'`, `'\u{1F600}'`, but not a lifetime `'a`.
fn is_char_literal(chars: &[char], i: usize) -> bool {
    matches!(
        (chars.get(i + 1), chars.get(i + 2)),
        (Some('\\'), _) | (Some(_), Some('\''))
    )
}

fn char_literal_end(chars: &[char], i: usize) -> usize {
    let mut j = i + 1;
    if chars.get(j) == Some(&'\\') {
        j += 2;
    } else {
        j += 1;
    }
    while j < chars.len() && chars[j] != '\'' {
        j += 1;
    }
    (j + 1).min(chars.len())
}

/// Removes each item that `#[cfg(test)]` guards (its attribute through the end of the item:
/// the matching `}` or the `;`), keeping its newlines.
fn drop_test_items(code: &str) -> String {
    let marker = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(marker) {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let end = match item_end(item) {
            ItemEnd::Declaration(at) | ItemEnd::Body(at) => at + 1,
            ItemEnd::Unclosed => item.len(),
        };
        out.extend(item[..end].chars().filter(|&c| c == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// How an item written at the start of a text ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemEnd {
    /// A declaration: its `;` (outside brackets, as in `[u8; 2]`), offset of the `;`.
    Declaration(usize),
    /// A body: the `}` that closes its first `{`, offset of the `}`.
    Body(usize),
    /// The text ends first.
    Unclosed,
}

/// Where the item that starts `item` ends (its signature's brackets and parentheses skipped).
pub fn item_end(item: &str) -> ItemEnd {
    let (mut braces, mut brackets) = (0usize, 0usize);
    for (offset, c) in item.char_indices() {
        match c {
            '(' | '[' => brackets += 1,
            ')' | ']' => brackets = brackets.saturating_sub(1),
            ';' if braces == 0 && brackets == 0 => return ItemEnd::Declaration(offset),
            '{' => braces += 1,
            '}' => {
                braces = braces.saturating_sub(1);
                if braces == 0 {
                    return ItemEnd::Body(offset);
                }
            }
            _ => {}
        }
    }
    ItemEnd::Unclosed
}

/// The modules `file` names, resolved against the crate's modules: a path names the longest
/// module that starts it (`crate::show::text::table` names `show::text`).
pub fn references(file: &SourceFile, modules: &BTreeSet<ModulePath>) -> Vec<Reference> {
    let children: BTreeSet<String> = modules
        .iter()
        .filter(|m| m.len() == file.module.len() + 1 && m.starts_with(&file.module))
        .filter_map(|m| m.last().cloned())
        .collect();
    let mut found = Vec::new();
    for (path, line) in use_paths(&file.code)
        .into_iter()
        .chain(inline_paths(&file.code))
    {
        if let Some(absolute) = absolute(&path, &file.module, &children)
            && let Some(target) = longest_module(&absolute, modules)
        {
            found.push(Reference { target, line });
        }
    }
    found
}

/// A path made absolute from where it is written; `None` for a path into another crate.
fn absolute(path: &[String], from: &[String], children: &BTreeSet<String>) -> Option<ModulePath> {
    let (first, rest) = path.split_first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "self" => from.to_vec(),
        "super" => {
            let mut base = from.to_vec();
            base.pop();
            let mut rest = rest;
            while let Some((next, tail)) = rest.split_first() {
                if next != "super" {
                    break;
                }
                base.pop();
                rest = tail;
            }
            base.extend(rest.iter().cloned());
            return Some(base);
        }
        child if children.contains(child) => {
            let mut base = from.to_vec();
            base.push(child.to_string());
            base
        }
        _ => return None,
    };
    base.extend(rest.iter().cloned());
    Some(base)
}

fn longest_module(path: &[String], modules: &BTreeSet<ModulePath>) -> Option<ModulePath> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| modules.contains(prefix))
}

/// Every path of every `use` tree, with the line of its `use`.
fn use_paths(code: &str) -> Vec<(Vec<String>, usize)> {
    let mut found = Vec::new();
    for (start, end) in use_spans(code) {
        let line = code[..start].matches('\n').count() + 1;
        for path in expand_tree(&code[start + 4..end]) {
            found.push((path, line));
        }
    }
    found
}

/// Each `use` statement: from its `use` keyword to its `;`.
fn use_spans(code: &str) -> Vec<(usize, usize)> {
    let bytes = code.as_bytes();
    let mut spans = Vec::new();
    let mut search = 0;
    while let Some(offset) = code[search..].find("use ") {
        let at = search + offset;
        search = at + 4;
        let starts_word =
            at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        if !starts_word {
            continue;
        }
        let Some(end) = code[at..].find(';') else {
            break;
        };
        spans.push((at, at + end));
        search = at + end;
    }
    spans
}

/// The code with its `use` statements blanked (newlines kept).
fn without_uses(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut last = 0;
    for (start, end) in use_spans(code) {
        out.push_str(&code[last..start]);
        out.extend(
            code[start..end]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' }),
        );
        last = end;
    }
    out.push_str(&code[last..]);
    out
}

/// `a::{b, c::{d, self}}` into `a::b`, `a::c::d`, `a::c`.
fn expand_tree(tree: &str) -> Vec<Vec<String>> {
    let tokens = tokenize(tree);
    let mut paths = Vec::new();
    let mut position = 0;
    expand(&tokens, &mut position, Vec::new(), &mut paths);
    paths
}

fn tokenize(tree: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    for c in tree.chars() {
        if c.is_alphanumeric() || c == '_' || c == '*' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            tokens.push(std::mem::take(&mut word));
        }
        if matches!(c, '{' | '}' | ',') {
            tokens.push(c.to_string());
        }
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    tokens
}

fn expand(
    tokens: &[String],
    position: &mut usize,
    prefix: Vec<String>,
    paths: &mut Vec<Vec<String>>,
) {
    let mut current = prefix.clone();
    while let Some(token) = tokens.get(*position) {
        *position += 1;
        match token.as_str() {
            "{" => {
                expand(tokens, position, current.clone(), paths);
                // The group named every path under `current`; it names none itself.
                current = prefix.clone();
            }
            "}" => {
                if current.len() > prefix.len() {
                    paths.push(current);
                }
                return;
            }
            "," => {
                if current.len() > prefix.len() {
                    paths.push(std::mem::replace(&mut current, prefix.clone()));
                }
                current = prefix.clone();
            }
            "as" => {
                // The alias names nothing new.
                *position += 1;
            }
            "self" if current.len() == prefix.len() && !prefix.is_empty() => {
                current = prefix.clone();
                paths.push(current.clone());
            }
            "*" => {}
            word => current.push(word.to_string()),
        }
    }
    if current.len() > prefix.len() {
        paths.push(current);
    }
}

/// Paths written in the code outside `use`: `crate::a::b`, `super::x`, `self::y`, and
/// `child::item` (kept whole here; [`absolute`] keeps only those through a child module).
fn inline_paths(code: &str) -> Vec<(Vec<String>, usize)> {
    let mut found = Vec::new();
    for (index, line) in without_uses(code).lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let word_start = (chars[i].is_alphabetic() || chars[i] == '_')
                && (i == 0
                    || !(chars[i - 1].is_alphanumeric()
                        || chars[i - 1] == '_'
                        || chars[i - 1] == ':'));
            if !word_start {
                i += 1;
                continue;
            }
            let mut segments = Vec::new();
            let mut j = i;
            loop {
                let start = j;
                while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
                    j += 1;
                }
                if start == j {
                    break;
                }
                segments.push(chars[start..j].iter().collect::<String>());
                if chars.get(j) == Some(&':') && chars.get(j + 1) == Some(&':') {
                    j += 2;
                } else {
                    break;
                }
            }
            if segments.len() > 1 {
                found.push((segments, index + 1));
            }
            i = j.max(i + 1);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(tree: &str) -> Vec<String> {
        expand_tree(tree).iter().map(|p| p.join("::")).collect()
    }

    #[test]
    fn use_trees_expand_into_every_path_they_name() {
        assert_eq!(paths("super::{a, b}"), ["super::a", "super::b"]);
        assert_eq!(
            paths("crate::x::{self, y::{z, w as v}, Q}"),
            [
                "crate::x",
                "crate::x::y::z",
                "crate::x::y::w",
                "crate::x::Q"
            ]
        );
        assert_eq!(paths("std::fmt::Write as _"), ["std::fmt::Write"]);
    }

    #[test]
    fn files_are_the_modules_rust_makes_of_them() {
        assert_eq!(module_of(Path::new("lib.rs")), Vec::<String>::new());
        assert_eq!(module_of(Path::new("a/mod.rs")), ["a"]);
        assert_eq!(module_of(Path::new("a/b.rs")), ["a", "b"]);
    }

    #[test]
    fn test_items_and_literals_are_not_shipped_code() {
        let code = shipped_code(
            "use a::b;\n#[cfg(test)]\nmod tests {\n use c::d;\n}\nlet s = \"crate::x\"; let c = '{';\n",
        );
        assert!(code.contains("use a::b;"));
        assert!(!code.contains("c::d"));
        assert!(!code.contains("crate::x"));
        assert!(!code.contains('{'));
        assert_eq!(code.lines().count(), 6, "lines are kept: {code:?}");
    }
}
