//! The API server's rules for what the operator copies into names and labels: a node's name
//! becomes its pod's name and the `express.dev/node` label, a `clusterName` becomes the
//! `express.dev/cluster` label, a pod template's labels are the pod's. A value that breaks them
//! makes the API server refuse the pod (422) after the rollout has started; checking them first
//! turns that into an invalid spec, named, before any pod is attempted.

/// The longest label value, and the longest name part of a label key.
pub const LABEL_MAX: usize = 63;
/// A non-empty label value, as a CRD schema pattern (with the length limit beside it).
pub const LABEL_VALUE_PATTERN: &str = "^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$";

/// The longest DNS-1123 subdomain: object names such as a pod's or a ControllerRevision's.
pub const SUBDOMAIN_MAX: usize = 253;

fn alphanumeric(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// Why `value` cannot be a label value (empty is allowed), in the API server's words.
pub fn label_value_problem(value: &str) -> Option<String> {
    if value.len() > LABEL_MAX {
        return Some(format!(
            "must be no more than {LABEL_MAX} characters (it has {})",
            value.len()
        ));
    }
    let inner_ok = value
        .chars()
        .all(|c| alphanumeric(c) || matches!(c, '-' | '_' | '.'));
    let ends_ok =
        value.is_empty() || (value.starts_with(alphanumeric) && value.ends_with(alphanumeric));
    (!(inner_ok && ends_ok)).then(|| {
        "must be empty or consist of alphanumeric characters, '-', '_' or '.', and must start \
         and end with an alphanumeric character (a valid label value)"
            .to_owned()
    })
}

/// Why `name` cannot be a DNS-1123 subdomain (an object's name), in the API server's words.
pub fn subdomain_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".into());
    }
    if name.len() > SUBDOMAIN_MAX {
        return Some(format!(
            "must be no more than {SUBDOMAIN_MAX} characters (it has {})",
            name.len()
        ));
    }
    let label_ok = |part: &str| {
        !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !part.starts_with('-')
            && !part.ends_with('-')
    };
    (!name.split('.').all(label_ok)).then(|| {
        "must consist of lower case alphanumeric characters, '-' or '.', and must start and end \
         with an alphanumeric character (a lowercase RFC 1123 subdomain)"
            .to_owned()
    })
}

/// Why `key` cannot be a label key (`[prefix/]name`), in the API server's words.
pub fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(problem) = prefix.and_then(subdomain_problem) {
        return Some(format!("must have a valid prefix: it {problem}"));
    }
    if name.is_empty() {
        return Some("must have a non-empty name part".into());
    }
    if name.len() > LABEL_MAX {
        return Some(format!(
            "must have a name part of no more than {LABEL_MAX} characters"
        ));
    }
    let ok = name
        .chars()
        .all(|c| alphanumeric(c) || matches!(c, '-' | '_' | '.'))
        && name.starts_with(alphanumeric)
        && name.ends_with(alphanumeric);
    (!ok).then(|| {
        "must have a name part of alphanumeric characters, '-', '_' or '.', starting and ending \
         with an alphanumeric character"
            .to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn label_values_follow_the_api_server() {
        for ok in ["", "acme", "acme-fe1", "a.b_c-d", &"a".repeat(63)] {
            assert_eq!(label_value_problem(ok), None, "{ok}");
        }
        for bad in ["-acme", "acme-", "ac me", "acme/fe", "ü", &"a".repeat(64)] {
            assert!(label_value_problem(bad).is_some(), "{bad}");
        }
        assert!(
            label_value_problem(&"a".repeat(64))
                .unwrap_or_default()
                .contains("63")
        );
    }

    #[test]
    fn subdomains_and_label_keys_follow_the_api_server() {
        for ok in ["acme", "acme-fe1", "a.b", &"a".repeat(253)] {
            assert_eq!(subdomain_problem(ok), None, "{ok}");
        }
        for bad in ["", "Acme", "a_b", "-a", "a.", "a..b", &"a".repeat(254)] {
            assert!(subdomain_problem(bad).is_some(), "{bad}");
        }
        for ok in ["team", "express.dev/node", "a/B_c.d"] {
            assert_eq!(label_key_problem(ok), None, "{ok}");
        }
        for bad in ["", "/x", "Express.dev/x", "x/", "a b", &"a".repeat(64)] {
            assert!(label_key_problem(bad).is_some(), "{bad}");
        }
    }

    proptest! {
        /// Whatever is valid stays within the limits and never contains what the rules forbid.
        #[test]
        fn what_passes_is_within_the_limits(value in "\\PC{0,70}") {
            if label_value_problem(&value).is_none() {
                prop_assert!(value.len() <= LABEL_MAX);
                prop_assert!(value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)));
            }
            if subdomain_problem(&value).is_none() {
                prop_assert!(!value.is_empty() && value.len() <= SUBDOMAIN_MAX);
                prop_assert!(value.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.".contains(c)));
            }
        }
    }
}
