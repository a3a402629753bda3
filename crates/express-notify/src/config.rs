//! Who is told what: the destinations and the subscriptions, as the operator chart writes them
//! into the ConfigMap `express-notifications` (key `notifications.yaml`) of the operator's
//! namespace. A destination names the keys of the Secret of the same name that hold its URL and
//! signing key: no secret ever sits in the ConfigMap or in a custom resource's spec.
//!
//! Parsing never fails on the whole: each destination or subscription that cannot be used is
//! named in [`Config::problems`] and left out, the rest work.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::occurrence::Trigger;

/// The ConfigMap's key.
pub const CONFIG_KEY: &str = "notifications.yaml";
/// The ConfigMap and the Secret, in the operator's namespace.
pub const DEFAULT_CONFIG_NAME: &str = "express-notifications";
/// The annotation by which an ExpressCluster or an OperatorRelease subscribes itself: a comma
/// list of destination names, every trigger on that object.
pub const ANNOTATION_NOTIFY: &str = "express.dev/notify";

/// At most one message a destination per this many seconds; more are grouped into one.
pub const DEFAULT_GROUP_SECONDS: u64 = 60;
/// How long the first message of a quiet destination waits for others to group with.
pub const DEFAULT_WAIT_SECONDS: u64 = 5;
/// Occurrences older than this are never sent (a fresh install does not announce last week);
/// one not sent by then is dropped.
pub const DEFAULT_MAX_AGE_SECONDS: u64 = 6 * 3600;

/// Where messages go, in which format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DestinationKind {
    /// The documented JSON (`docs/notifications.md`), optionally HMAC-signed.
    Webhook,
    /// A Slack-compatible incoming webhook: Block Kit.
    Slack,
    /// Alertmanager's v2 API: alerts that resolve when their condition clears.
    Alertmanager,
}

impl DestinationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DestinationKind::Webhook => "webhook",
            DestinationKind::Slack => "slack",
            DestinationKind::Alertmanager => "alertmanager",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    pub name: String,
    pub kind: DestinationKind,
    /// The URL, given in the open (`url`) ...
    pub url: Option<String>,
    /// ... or the Secret's key that holds it (`urlSecretKey`): a Slack webhook's URL is a secret.
    pub url_secret_key: Option<String>,
    /// The Secret's key that holds the HMAC-SHA256 key a webhook's body is signed with.
    pub signing_secret_key: Option<String>,
    pub group_seconds: u64,
    pub wait_seconds: u64,
}

/// Which triggers reach a destination, for which objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    pub destination: String,
    /// Empty: every trigger.
    pub triggers: BTreeSet<Trigger>,
    /// Tenants' namespaces; empty: every namespace.
    pub namespaces: BTreeSet<String>,
    /// OperatorReleases' triggers too.
    pub releases: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// The DC's name as messages say it (the operator does not know which DC it runs in).
    pub dc: Option<String>,
    /// The dashboard's address, for links in messages.
    pub dashboard_url: Option<String>,
    pub max_age_seconds: u64,
    pub destinations: Vec<Destination>,
    pub subscriptions: Vec<Subscription>,
    /// What could not be used, one line each, naming the entry.
    pub problems: Vec<String>,
}

impl Config {
    pub fn destination(&self, name: &str) -> Option<&Destination> {
        self.destinations.iter().find(|d| d.name == name)
    }

    /// Every destination's name, in the configuration's order.
    pub fn destination_names(&self) -> impl Iterator<Item = &str> {
        self.destinations.iter().map(|d| d.name.as_str())
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    dc: Option<String>,
    #[serde(default)]
    dashboard_url: Option<String>,
    #[serde(default)]
    max_age_seconds: Option<u64>,
    #[serde(default)]
    destinations: Vec<serde_yaml::Value>,
    #[serde(default)]
    subscriptions: Vec<serde_yaml::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawDestination {
    name: String,
    #[serde(rename = "type")]
    kind: DestinationKind,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    url_secret_key: Option<String>,
    #[serde(default)]
    signing_secret_key: Option<String>,
    #[serde(default)]
    group_seconds: Option<u64>,
    #[serde(default)]
    wait_seconds: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSubscription {
    destination: String,
    #[serde(default)]
    triggers: Vec<String>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default = "yes")]
    releases: bool,
}

fn yes() -> bool {
    true
}

/// Reads the ConfigMap's `notifications.yaml`. `Err` only when the text is not a mapping at
/// all; an entry that cannot be used is a problem, not an error.
pub fn parse(text: &str) -> Result<Config, String> {
    if text.trim().is_empty() {
        return Ok(Config {
            max_age_seconds: DEFAULT_MAX_AGE_SECONDS,
            ..Config::default()
        });
    }
    let raw: RawConfig = serde_yaml::from_str(text).map_err(|e| format!("{CONFIG_KEY}: {e}"))?;
    let mut config = Config {
        dc: raw.dc.filter(|dc| !dc.trim().is_empty()),
        dashboard_url: raw.dashboard_url.filter(|url| !url.trim().is_empty()),
        max_age_seconds: raw.max_age_seconds.unwrap_or(DEFAULT_MAX_AGE_SECONDS),
        ..Config::default()
    };
    for (i, value) in raw.destinations.into_iter().enumerate() {
        match destination(value) {
            Ok(d) if config.destination(&d.name).is_some() => config
                .problems
                .push(format!("destinations[{i}] {}: named twice", d.name)),
            Ok(d) => config.destinations.push(d),
            Err(why) => config.problems.push(format!("destinations[{i}]: {why}")),
        }
    }
    for (i, value) in raw.subscriptions.into_iter().enumerate() {
        match subscription(value, &config) {
            Ok(s) => config.subscriptions.push(s),
            Err(why) => config.problems.push(format!("subscriptions[{i}]: {why}")),
        }
    }
    Ok(config)
}

fn destination(value: serde_yaml::Value) -> Result<Destination, String> {
    let raw: RawDestination = serde_yaml::from_value(value).map_err(|e| e.to_string())?;
    let name = raw.name.trim().to_owned();
    if name.is_empty() || name.contains(',') {
        return Err(format!(
            "name {:?}: a destination needs a name without commas",
            raw.name
        ));
    }
    match (&raw.url, &raw.url_secret_key) {
        (Some(_), Some(_)) => {
            return Err(format!("{name}: give url or urlSecretKey, not both"));
        }
        (None, None) => return Err(format!("{name}: give url or urlSecretKey")),
        (Some(url), None) if !(url.starts_with("http://") || url.starts_with("https://")) => {
            return Err(format!("{name}: url {url:?} is not http(s)"));
        }
        _ => {}
    }
    if raw.signing_secret_key.is_some() && raw.kind != DestinationKind::Webhook {
        return Err(format!(
            "{name}: signingSecretKey is for type webhook, not {}",
            raw.kind.as_str()
        ));
    }
    if raw.group_seconds == Some(0) {
        return Err(format!(
            "{name}: groupSeconds must be at least 1 (it bounds a flood)"
        ));
    }
    Ok(Destination {
        name,
        kind: raw.kind,
        url: raw.url,
        url_secret_key: raw.url_secret_key,
        signing_secret_key: raw.signing_secret_key,
        group_seconds: raw.group_seconds.unwrap_or(DEFAULT_GROUP_SECONDS),
        wait_seconds: raw.wait_seconds.unwrap_or(DEFAULT_WAIT_SECONDS),
    })
}

fn subscription(value: serde_yaml::Value, config: &Config) -> Result<Subscription, String> {
    let raw: RawSubscription = serde_yaml::from_value(value).map_err(|e| e.to_string())?;
    if config.destination(&raw.destination).is_none() {
        return Err(format!("destination {:?} is not defined", raw.destination));
    }
    let mut triggers = BTreeSet::new();
    for name in &raw.triggers {
        let trigger = Trigger::parse(name).ok_or_else(|| {
            let known: Vec<&str> = Trigger::ALL.iter().map(|t| t.as_str()).collect();
            format!("trigger {name:?} is not one of {}", known.join(", "))
        })?;
        triggers.insert(trigger);
    }
    Ok(Subscription {
        destination: raw.destination,
        triggers,
        namespaces: raw.namespaces.into_iter().collect(),
        releases: raw.releases,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
dc: dev-a
dashboardUrl: http://dashboard.example/
destinations:
  - name: sre
    type: webhook
    url: http://receiver.example/hook
    signingSecretKey: sre-hmac
  - name: chat
    type: slack
    urlSecretKey: chat-url
    groupSeconds: 120
  - name: am
    type: alertmanager
    url: http://alertmanager.example:9093
subscriptions:
  - destination: sre
  - destination: chat
    triggers: [rollout-failed, release-rolled-back]
    namespaces: [team-a]
    releases: false
"#;

    #[test]
    fn a_full_configuration_reads_with_its_defaults() {
        let config = parse(SAMPLE).unwrap_or_default();
        assert_eq!(config.problems, Vec::<String>::new());
        assert_eq!(config.dc.as_deref(), Some("dev-a"));
        assert_eq!(config.destinations.len(), 3);
        let sre = config.destination("sre").cloned();
        assert_eq!(
            sre.map(|d| (d.kind, d.group_seconds, d.wait_seconds)),
            Some((DestinationKind::Webhook, 60, 5))
        );
        let chat = &config.subscriptions[1];
        assert_eq!(
            chat.triggers.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
            ["rollout-failed", "release-rolled-back"]
        );
        assert!(!chat.releases && config.subscriptions[0].releases);
        assert_eq!(config.max_age_seconds, DEFAULT_MAX_AGE_SECONDS);
    }

    #[test]
    fn an_empty_configuration_tells_nobody() {
        let config = parse("").unwrap_or_default();
        assert!(config.destinations.is_empty() && config.problems.is_empty());
    }

    #[test]
    fn each_unusable_entry_is_named_and_the_rest_work() {
        let text = r#"
destinations:
  - {name: ok, type: webhook, url: "http://a.example"}
  - {name: ok, type: webhook, url: "http://b.example"}
  - {name: both, type: webhook, url: "http://a.example", urlSecretKey: k}
  - {name: neither, type: slack}
  - {name: ftp, type: webhook, url: "ftp://a.example"}
  - {name: signed, type: slack, url: "https://s.example", signingSecretKey: k}
  - {name: pager, type: pagerduty, url: "https://p.example"}
  - {name: flat, type: webhook, url: "http://a.example", groupSeconds: 0}
subscriptions:
  - {destination: ok, triggers: [rollout-exploded]}
  - {destination: missing}
  - {destination: ok, colour: red}
  - {destination: ok}
"#;
        let config = parse(text).unwrap_or_default();
        assert_eq!(config.destination_names().collect::<Vec<_>>(), ["ok"]);
        assert_eq!(config.subscriptions.len(), 1);
        let problems = config.problems.join("\n");
        for expected in [
            "destinations[1] ok: named twice",
            "both: give url or urlSecretKey, not both",
            "neither: give url or urlSecretKey",
            "ftp: url \"ftp://a.example\" is not http(s)",
            "signed: signingSecretKey is for type webhook, not slack",
            "unknown variant `pagerduty`",
            "flat: groupSeconds must be at least 1",
            "subscriptions[0]: trigger \"rollout-exploded\" is not one of rollout-failed",
            "subscriptions[1]: destination \"missing\" is not defined",
            "subscriptions[2]: unknown field `colour`",
        ] {
            assert!(problems.contains(expected), "{expected} in\n{problems}");
        }
    }

    #[test]
    fn text_that_is_not_a_mapping_is_an_error() {
        assert!(parse("- just\n- a list\n").is_err());
        assert!(parse("destinations: 3").is_err());
    }
}
