//! How text output looks, whatever it shows: the terminal style (colour and symbols, or
//! none), short revisions, the placeholder of an empty cell, how long ago, and aligned tables.
//! Below every room that prints: `show`, `contexts`, the dashboard and the verbs.

use std::fmt::Write as _;

use express_api::{ClusterPhase, NodePhase};

/// How to draw: with colour and symbols, or plain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    pub color: bool,
}

impl Style {
    /// Colour on a terminal unless turned off.
    pub fn detect(no_color: bool) -> Style {
        use std::io::IsTerminal as _;
        Style {
            color: !no_color
                && std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    pub fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// A symbol and colour for a node phase; plain: nothing.
    pub fn phase(self, phase: Option<NodePhase>) -> String {
        if !self.color {
            return String::new();
        }
        let (symbol, code) = match phase {
            Some(NodePhase::Ready) => ("✔", "32"),
            Some(NodePhase::Waiting) => ("◷", "33"),
            Some(NodePhase::Provisioning | NodePhase::Upgrading) => ("⟳", "36"),
            Some(NodePhase::Bouncing) => ("↻", "36"),
            Some(NodePhase::NotReady) => ("⚠", "33"),
            Some(NodePhase::Failed) => ("✖", "31"),
            Some(NodePhase::Paused) => ("॥", "90"),
            Some(NodePhase::Down) => ("○", "90"),
            None => ("?", "90"),
        };
        format!("{} ", self.paint(code, symbol))
    }

    pub fn cluster(self, phase: Option<ClusterPhase>) -> String {
        if !self.color {
            return String::new();
        }
        let (symbol, code) = match phase {
            Some(ClusterPhase::Healthy) => ("✔", "32"),
            Some(ClusterPhase::Progressing) => ("⟳", "36"),
            Some(ClusterPhase::Paused) => ("॥", "90"),
            Some(ClusterPhase::Degraded) => ("⚠", "33"),
            Some(ClusterPhase::Failed) => ("✖", "31"),
            _ => ("?", "90"),
        };
        format!("{} ", self.paint(code, symbol))
    }
}

pub fn dash(text: &str) -> String {
    if text.is_empty() {
        "-".into()
    } else {
        text.into()
    }
}

/// The first 10 characters of a revision hash: enough to tell revisions apart in a table.
pub fn short(revision: Option<&str>) -> String {
    revision.map_or_else(|| "-".into(), |r| r.chars().take(10).collect())
}

/// Shown when no operator has written its name on the tenant yet.
pub const NONE: &str = "<none>";

/// How long before `now` an instant was (`90s ago`, `1h2m ago`), or [`NONE`].
pub fn ago(at: Option<k8s_openapi::jiff::Timestamp>, now: k8s_openapi::jiff::Timestamp) -> String {
    at.map_or_else(
        || NONE.to_owned(),
        |at| {
            let seconds = u64::try_from(now.as_second() - at.as_second()).unwrap_or(0);
            format!("{} ago", express_api::bounce::format_duration(seconds))
        },
    )
}

/// Columns padded to their widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<String>| {
        let last = cells.len() - 1;
        let text: Vec<String> = cells
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                if i == last {
                    c
                } else {
                    format!("{c:<width$}", width = widths[i])
                }
            })
            .collect();
        let _ = writeln!(out, "{}", text.join("  ").trim_end());
    };
    line(header.iter().map(|h| (*h).to_owned()).collect());
    for row in rows {
        line(row.clone());
    }
    out
}
