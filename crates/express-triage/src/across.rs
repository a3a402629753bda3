//! The fleet's verdict across data centres (DESIGN section 13), pure: each context's verdict,
//! reason and operator versions (or why it could not be read) in, one verdict out that names
//! where the trouble is, or the operator build it follows. `doctor --context` prints it and the
//! dashboard across DCs leads with it.

use std::collections::BTreeSet;
use std::fmt::Display;

use crate::Verdict;

/// The fleet's verdict: the worst among the contexts read (None: `unknown`), a headline naming
/// where, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetVerdict {
    pub verdict: Option<Verdict>,
    /// "infrastructure in dc-b", "infrastructure on operator 0.5.0 (dc-a, dc-b)", "healthy"...
    pub headline: String,
    pub reason: String,
    /// The operator build the trouble follows, when it is in every context running it.
    pub build: Option<String>,
}

impl FleetVerdict {
    pub fn as_str(&self) -> &'static str {
        self.verdict.map_or("unknown", Verdict::as_str)
    }
}

/// One context, as the fleet verdict sees it: its verdict, reason and operator versions, or
/// why it could not be read.
pub struct ContextRead<'a> {
    pub context: &'a str,
    pub read: Result<(Verdict, &'a str, &'a [String]), &'a dyn Display>,
}

fn names(list: &[&str]) -> String {
    match list {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The fleet verdict from each context's verdict, reason and operator versions:
/// - none read: `unknown`;
/// - the worst verdict read, named with the contexts at it ("infrastructure in dc-b");
/// - `infrastructure` in two or more contexts all on one operator build, and in every context
///   read that runs it: the build ("infrastructure on operator 0.5.0 ..."), not a DC;
/// - `infrastructure` in some contexts while others on the same build are healthy: that DC's
///   own operator layer, said so;
/// - `healthy` with a context not read: `unknown` (nobody can say the fleet is healthy).
pub fn fleet_verdict(dcs: &[ContextRead<'_>]) -> FleetVerdict {
    let read: Vec<(&str, Verdict, &str, &[String])> = dcs
        .iter()
        .filter_map(|dc| {
            let (verdict, reason, versions) = dc.read.ok()?;
            Some((dc.context, verdict, reason, versions))
        })
        .collect();
    let unread: Vec<String> = dcs
        .iter()
        .filter_map(|dc| Some(format!("{} ({})", dc.context, dc.read.err()?)))
        .collect();
    let not_read = if unread.is_empty() {
        String::new()
    } else {
        format!("; not read: {}", unread.join(", "))
    };
    let Some(worst) = read.iter().map(|r| r.1).max() else {
        return FleetVerdict {
            verdict: None,
            headline: "unknown".into(),
            reason: format!("no context could be read: {}", unread.join(", ")),
            build: None,
        };
    };
    let at_worst: Vec<&str> = read.iter().filter(|r| r.1 == worst).map(|r| r.0).collect();
    if worst == Verdict::Healthy {
        let all: Vec<&str> = read.iter().map(|r| r.0).collect();
        return if unread.is_empty() {
            FleetVerdict {
                verdict: Some(Verdict::Healthy),
                headline: "healthy".into(),
                reason: format!("healthy in every context: {}", names(&all)),
                build: None,
            }
        } else {
            FleetVerdict {
                verdict: None,
                headline: "unknown".into(),
                reason: format!(
                    "healthy in {}, but not every context could be read, so the fleet is not \
                     known to be healthy{not_read}",
                    names(&all)
                ),
                build: None,
            }
        };
    }
    let first_reason = read
        .iter()
        .find(|r| r.1 == worst)
        .map(|r| format!("{}: {}", r.0, r.2.trim_end_matches('.')))
        .unwrap_or_default();
    if worst != Verdict::Infrastructure {
        return FleetVerdict {
            verdict: Some(worst),
            headline: format!("{} in {}", worst.as_str(), names(&at_worst)),
            reason: format!("{first_reason}{not_read}"),
            build: None,
        };
    }
    // One build under every context at infrastructure, and no context on it spared.
    let builds: BTreeSet<&String> = read
        .iter()
        .filter(|r| r.1 == worst)
        .flat_map(|r| r.3.iter())
        .collect();
    let single_build = read
        .iter()
        .filter(|r| r.1 == worst)
        .all(|r| r.3.len() == 1)
        .then(|| builds.iter().next().copied())
        .flatten()
        .filter(|_| builds.len() == 1);
    if let Some(build) = single_build
        && at_worst.len() >= 2
        && read
            .iter()
            .filter(|r| r.3.contains(build))
            .all(|r| r.1 == worst)
    {
        return FleetVerdict {
            verdict: Some(worst),
            headline: format!("infrastructure on operator {build} ({})", names(&at_worst)),
            reason: format!(
                "the same verdict in every context running operator {build}: it follows the \
                 build, not one DC; see `kubectl express rings --all-contexts` (VERSION) for \
                 where {build} runs, and hold or roll back its release ({first_reason}){not_read}"
            ),
            build: Some(build.clone()),
        };
    }
    let spared: Vec<&str> = read
        .iter()
        .filter(|r| r.1 == Verdict::Healthy && r.3.iter().any(|v| builds.contains(v)))
        .map(|r| r.0)
        .collect();
    let spared = if spared.is_empty() {
        String::new()
    } else {
        let (run, are) = if spared.len() == 1 {
            ("runs", "is")
        } else {
            ("run", "are")
        };
        format!(
            "; {} {run} the same operator build and {are} healthy: look at the operator layer of \
             {} (its operator pods, Lease, API server), not at the build",
            names(&spared),
            names(&at_worst)
        )
    };
    FleetVerdict {
        verdict: Some(worst),
        headline: format!("infrastructure in {}", names(&at_worst)),
        reason: format!("{first_reason}{spared}{not_read}"),
        build: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_fleet_verdict_by_table() {
        let timeout = "timeout after 10s";
        let build = v(&["0.5.0"]);
        let other = v(&["0.4.0"]);
        let ok = |context, verdict, versions| ContextRead {
            context,
            read: Ok((verdict, "its reason", versions)),
        };
        use Verdict::*;
        // (what, contexts, verdict, headline, build, a piece of the reason)
        type Case<'a> = (
            &'a str,
            Vec<ContextRead<'a>>,
            &'a str,
            &'a str,
            Option<&'a str>,
            &'a str,
        );
        let cases: Vec<Case> = vec![
            (
                "all healthy",
                vec![ok("dc-a", Healthy, &build), ok("dc-b", Healthy, &build)],
                "healthy",
                "healthy",
                None,
                "healthy in every context: dc-a and dc-b",
            ),
            (
                "healthy but one unread is unknown",
                vec![
                    ok("dc-a", Healthy, &build),
                    ContextRead {
                        context: "dc-c",
                        read: Err(&timeout),
                    },
                ],
                "unknown",
                "unknown",
                None,
                "not read: dc-c (timeout after 10s)",
            ),
            (
                "nothing read",
                vec![ContextRead {
                    context: "dc-c",
                    read: Err(&timeout),
                }],
                "unknown",
                "unknown",
                None,
                "no context could be read: dc-c (timeout after 10s)",
            ),
            (
                "a tenant in one DC",
                vec![ok("dc-a", Healthy, &build), ok("dc-b", Tenant, &build)],
                "tenant",
                "tenant in dc-b",
                None,
                "dc-b: its reason",
            ),
            (
                "infrastructure in one DC, the others healthy on the same build",
                vec![
                    ok("dc-a", Healthy, &build),
                    ok("dc-b", Infrastructure, &build),
                    ok("dc-c", Healthy, &build),
                ],
                "infrastructure",
                "infrastructure in dc-b",
                None,
                "dc-a and dc-c run the same operator build and are healthy: look at the operator layer of dc-b",
            ),
            (
                "infrastructure in every DC on the build",
                vec![
                    ok("dc-a", Infrastructure, &build),
                    ok("dc-b", Infrastructure, &build),
                    ok("dc-c", Healthy, &other),
                ],
                "infrastructure",
                "infrastructure on operator 0.5.0 (dc-a and dc-b)",
                Some("0.5.0"),
                "it follows the build, not one DC",
            ),
            (
                "two DCs at infrastructure, but a third on the build is healthy: not the build",
                vec![
                    ok("dc-a", Infrastructure, &build),
                    ok("dc-b", Infrastructure, &build),
                    ok("dc-c", Healthy, &build),
                ],
                "infrastructure",
                "infrastructure in dc-a and dc-b",
                None,
                "dc-c runs the same operator build and is healthy",
            ),
            (
                "two DCs at infrastructure on different builds",
                vec![
                    ok("dc-a", Infrastructure, &build),
                    ok("dc-b", Infrastructure, &other),
                ],
                "infrastructure",
                "infrastructure in dc-a and dc-b",
                None,
                "dc-a: its reason",
            ),
            (
                "infrastructure with a DC unread names it",
                vec![
                    ok("dc-a", Infrastructure, &build),
                    ContextRead {
                        context: "dc-c",
                        read: Err(&timeout),
                    },
                ],
                "infrastructure",
                "infrastructure in dc-a",
                None,
                "; not read: dc-c (timeout after 10s)",
            ),
        ];
        for (what, dcs, verdict, headline, build, reason) in cases {
            let got = fleet_verdict(&dcs);
            assert_eq!(got.as_str(), verdict, "{what}");
            assert_eq!(got.headline, headline, "{what}");
            assert_eq!(got.build.as_deref(), build, "{what}");
            assert!(got.reason.contains(reason), "{what}: {}", got.reason);
        }
    }
}
