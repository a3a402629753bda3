//! The links between the docs: every relative link of a page (`[the map](../architecture.md)`,
//! `[exit codes](cli.md#exit-codes)`) names a file that exists, and a `#anchor` names a heading
//! of that file, as GitHub spells a heading's anchor.

use std::path::{Component, Path, PathBuf};

/// A link as written: where, and to what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// 1-based, where the `](` is.
    pub line: usize,
    pub target: String,
}

/// A link that leads nowhere, in the page's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broken {
    pub line: usize,
    pub target: String,
    pub why: &'static str,
}

/// Every link of `markdown`: inline (`[text](target)`, images too) and reference definitions
/// (`[name]: target`), outside fenced blocks and code spans.
pub fn links(markdown: &str) -> Vec<Link> {
    let mut found = Vec::new();
    for (first_line, paragraph) in paragraphs(markdown) {
        let prose = without_code_spans(&paragraph);
        let line_at = |at: usize| first_line + prose[..at].matches('\n').count();
        let mut from = 0;
        while let Some(offset) = prose[from..].find("](") {
            let at = from + offset;
            from = at + 2;
            if let Some(target) = inline_target(&prose[from..]) {
                found.push(Link {
                    line: line_at(at),
                    target,
                });
            }
        }
        let mut at = 0;
        for line in prose.split('\n') {
            if let Some(target) = reference_definition(line) {
                found.push(Link {
                    line: line_at(at),
                    target,
                });
            }
            at += line.len() + 1;
        }
    }
    found.sort_by_key(|link| link.line);
    found
}

/// The anchors GitHub gives the headings of `markdown`, in order: a repeated one gets `-1`,
/// `-2`... as GitHub numbers them.
pub fn anchors(markdown: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if is_fence(line) {
            fenced = !fenced;
            continue;
        }
        let Some(text) = heading(line).filter(|_| !fenced) else {
            continue;
        };
        let anchor = anchor(text);
        let repeats = found
            .iter()
            .filter(|a| {
                **a == anchor || a.strip_prefix(&format!("{anchor}-")).is_some_and(is_count)
            })
            .count();
        found.push(if repeats == 0 {
            anchor
        } else {
            format!("{anchor}-{repeats}")
        });
    }
    found
}

/// GitHub's anchor for a heading: lowercased, each space a `-`, every other character that is
/// not a letter, a digit, `-` or `_` dropped.
pub fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Where a relative link of `page` (a path under `root`) leads, as a path under `root`
/// (`..` kept where it leaves it); `None` for a link with a scheme (`https:`, `mailto:`).
pub fn resolve(page: &Path, target: &str) -> Option<PathBuf> {
    let file = target.split('#').next().unwrap_or_default();
    if has_scheme(file) {
        return None;
    }
    if file.is_empty() {
        return Some(page.to_path_buf());
    }
    let joined = match file.strip_prefix('/') {
        Some(from_root) => PathBuf::from(from_root),
        None => page.parent().unwrap_or(Path::new("")).join(file),
    };
    Some(normalize(&joined))
}

/// Every relative link of `page` (a path under `root`) that names no file or folder, or a
/// heading its Markdown file lacks.
pub fn broken(root: &Path, page: &Path) -> std::io::Result<Vec<Broken>> {
    let markdown = std::fs::read_to_string(root.join(page))?;
    let mut found = Vec::new();
    for link in links(&markdown) {
        let Some(target) = resolve(page, &link.target) else {
            continue;
        };
        let anchor = link.target.split_once('#').map(|(_, a)| a);
        let why = if !root.join(&target).exists() {
            Some("no such file or folder")
        } else {
            match anchor {
                Some(anchor) if target.extension().is_some_and(|e| e == "md") => {
                    let linked = std::fs::read_to_string(root.join(&target))?;
                    (!anchors(&linked).iter().any(|a| a == anchor)).then_some("no such heading")
                }
                _ => None,
            }
        };
        if let Some(why) = why {
            found.push(Broken {
                line: link.line,
                target: link.target,
                why,
            });
        }
    }
    Ok(found)
}

/// The paragraphs outside fenced blocks, each with its first line (1-based): a code span never
/// crosses a blank line.
fn paragraphs(markdown: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut current: Option<(usize, String)> = None;
    let mut fenced = false;
    for (index, line) in markdown.lines().enumerate() {
        let fence = is_fence(line);
        if fence {
            fenced = !fenced;
        }
        if fence || fenced || line.trim().is_empty() {
            found.extend(current.take());
            continue;
        }
        match &mut current {
            Some((_, text)) => {
                text.push('\n');
                text.push_str(line);
            }
            None => current = Some((index + 1, line.to_string())),
        }
    }
    found.extend(current);
    found
}

/// `text` with every code span's content blanked (lines kept), so that a `](` inside one is no
/// link. A run of backticks closes at the next run of the same length, as in CommonMark.
fn without_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let run_at = |at: usize| chars[at..].iter().take_while(|c| **c == '`').count();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < chars.len() {
        if chars[at] != '`' {
            out.push(chars[at]);
            at += 1;
            continue;
        }
        let run = run_at(at);
        let close = (at + run..chars.len())
            .find(|&i| chars[i] == '`' && (i == 0 || chars[i - 1] != '`') && run_at(i) == run);
        let end = close.map_or(at + run, |close| close + run);
        out.extend(chars[at..end].iter().map(|c| {
            if *c == '\n' || close.is_none() {
                *c
            } else {
                ' '
            }
        }));
        at = end;
    }
    out
}

/// The target after `](`: `<...>` or up to the first space or the `)` that closes it.
fn inline_target(rest: &str) -> Option<String> {
    let rest = rest.trim_start();
    if let Some(bracketed) = rest.strip_prefix('<') {
        return bracketed.find('>').map(|end| bracketed[..end].to_string());
    }
    let mut depth = 0usize;
    for (at, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(rest[..at].to_string()),
            ')' => depth -= 1,
            c if c.is_whitespace() => return Some(rest[..at].to_string()),
            _ => {}
        }
    }
    None
}

/// `[name]: target` at the start of a line (up to three spaces in).
fn reference_definition(line: &str) -> Option<String> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = line
        .trim_start_matches(' ')
        .strip_prefix('[')
        .filter(|_| indent <= 3)?;
    let (name, after) = rest.split_once("]:")?;
    let target = after.split_whitespace().next()?;
    (!name.is_empty() && !name.contains('[')).then(|| target.trim_matches(['<', '>']).to_string())
}

/// The text of an ATX heading (`## Crates` is `Crates`), without closing `#`s.
fn heading(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = line.trim_start_matches(' ');
    let level = rest.chars().take_while(|c| *c == '#').count();
    if indent > 3 || !(1..=6).contains(&level) {
        return None;
    }
    let text = &rest[level..];
    if !(text.is_empty() || text.starts_with([' ', '\t'])) {
        return None;
    }
    let text = text.trim();
    let closed = text.trim_end_matches('#');
    Some(if closed.is_empty() || closed.ends_with(' ') {
        closed.trim_end()
    } else {
        text
    })
}

fn is_fence(line: &str) -> bool {
    let trimmed = line.trim_start_matches(' ');
    line.len() - trimmed.len() <= 3 && (trimmed.starts_with("```") || trimmed.starts_with("~~~"))
}

fn is_count(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_digit())
}

/// `https:`, `mailto:`: a scheme is letters (and `+.-`) before the first `:`, and no `/` first.
fn has_scheme(target: &str) -> bool {
    target.split_once(':').is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
    })
}

/// `docs/decisions/../cli.md` as `docs/cli.md`; a `..` that leaves the root is kept.
fn normalize(path: &Path) -> PathBuf {
    let mut parts: Vec<Component> = Vec::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir if matches!(parts.last(), Some(Component::Normal(_))) => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_anchor_is_the_heading_lowercased_with_its_punctuation_dropped() {
        assert_eq!(anchor("Where things live"), "where-things-live");
        assert_eq!(
            anchor("Releasing the operator (DESIGN section 12)"),
            "releasing-the-operator-design-section-12"
        );
        assert_eq!(
            anchor("`kubectl express plan --offline`"),
            "kubectl-express-plan---offline"
        );
        assert_eq!(
            anchor("The L2's reads at 10,000 tenants"),
            "the-l2s-reads-at-10000-tenants"
        );
        assert_eq!(anchor("snake_case and a-dash"), "snake_case-and-a-dash");
    }

    #[test]
    fn repeated_headings_are_numbered_and_fenced_lines_are_no_headings() {
        let page =
            "# Title\n\n## Runs\n\n```sh\n# a comment\n```\n\n## Runs\n\n### Runs ##\n#nospace\n";
        assert_eq!(anchors(page), ["title", "runs", "runs-1", "runs-2"]);
    }

    #[test]
    fn links_are_read_outside_code_and_across_lines() {
        let page = "See [the map](../architecture.md), [how it\nsettles](settle.md#the-window) and \
                    `[not](a-link.md)`.\n\n```\n[nor](this.md)\n```\n\n![a picture](shots/a.png \
                    \"title\")\n[ref]: <refs/b.md>\n[web](https://example.org/x)\n";
        let found = links(page);
        let targets: Vec<(usize, &str)> =
            found.iter().map(|l| (l.line, l.target.as_str())).collect();
        assert_eq!(
            targets,
            [
                (1, "../architecture.md"),
                (2, "settle.md#the-window"),
                (8, "shots/a.png"),
                (9, "refs/b.md"),
                (10, "https://example.org/x"),
            ]
        );
    }

    #[test]
    fn a_code_span_across_lines_hides_its_brackets() {
        let page = "run `kubectl annotate\n--all x](y.md)` then [go](z.md)\n";
        let targets: Vec<String> = links(page).into_iter().map(|l| l.target).collect();
        assert_eq!(targets, ["z.md"]);
    }

    #[test]
    fn links_resolve_from_their_page_and_external_ones_do_not() {
        let page = Path::new("docs/decisions/a.md");
        assert_eq!(
            resolve(page, "../architecture.md#crates"),
            Some(PathBuf::from("docs/architecture.md"))
        );
        assert_eq!(
            resolve(page, "b.md"),
            Some(PathBuf::from("docs/decisions/b.md"))
        );
        assert_eq!(
            resolve(page, "#own"),
            Some(PathBuf::from("docs/decisions/a.md"))
        );
        assert_eq!(
            resolve(page, "../../../shared/DESIGN.md"),
            Some(PathBuf::from("../shared/DESIGN.md"))
        );
        assert_eq!(
            resolve(page, "/README.md"),
            Some(PathBuf::from("README.md"))
        );
        assert_eq!(resolve(page, "https://example.org/a.md"), None);
        assert_eq!(resolve(page, "mailto:someone@example.org"), None);
    }
}
