//! The check's report as people read it (breaking changes first, each with the stored objects
//! it would refuse) or as JSON (`{"compatible", "problems": [{"crd", "version", "path",
//! "change", "severity", "objects"}]}`).

use std::fmt::Write as _;

use crd_compat::{Report, Severity};

use super::inputs::{Output, Source};

/// The report in the chosen output.
pub fn render(report: &Report, source: &Source, output: Output) -> String {
    match output {
        Output::Json => {
            let mut text = serde_json::to_string_pretty(report).unwrap_or_default();
            text.push('\n');
            text
        }
        Output::Text => text(report, source),
    }
}

fn text(report: &Report, source: &Source) -> String {
    let against = match source {
        Source::Directory(dir) => format!("the CRD files of {dir} (no stored objects read)"),
        Source::Context(context) => {
            format!("context {context} (its CRDs and every object it stores)")
        }
    };
    let mut out = format!("this build's CRDs against {against}\n");
    let mut problems: Vec<_> = report.problems.iter().collect();
    problems.sort_by_key(|p| std::cmp::Reverse(p.severity));
    for problem in &problems {
        let severity = match problem.severity {
            Severity::Breaking => "BREAKING",
            Severity::Warning => "warning ",
        };
        let _ = writeln!(out, "{severity}  {}", problem.headline());
        for object in &problem.objects {
            let _ = writeln!(out, "            {object}");
        }
    }
    let count = |severity| problems.iter().filter(|p| p.severity == severity).count();
    let (breaking, warnings) = (count(Severity::Breaking), count(Severity::Warning));
    let _ = if report.compatible {
        writeln!(
            out,
            "compatible: no breaking change ({warnings} warning(s))"
        )
    } else {
        writeln!(
            out,
            "NOT compatible: {breaking} breaking change(s), {warnings} warning(s); a breaking change needs a new API version"
        )
    };
    out
}
