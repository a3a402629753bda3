//! A Slack-compatible incoming webhook's message: Block Kit (a header, a section per
//! occurrence with its facts as fields, the command as context), with `text` as the
//! notification's fallback. A group lists each trigger's subjects, the first ten of each, so
//! that a flood stays within Slack's limits (50 blocks, 3,000 characters a text, 10 fields).

use serde_json::{Value, json};

use crate::config::Config;
use crate::occurrence::{Occurrence, Severity};
use crate::outbox::Delivery;

/// Slack's limits this message keeps to.
pub const MAX_BLOCKS: usize = 50;
pub const MAX_TEXT: usize = 3000;
pub const MAX_HEADER: usize = 150;
pub const MAX_FIELDS: usize = 10;
/// Subjects listed per trigger in a group.
const LISTED: usize = 10;

pub fn body(delivery: &Delivery, config: &Config) -> Value {
    let dc = config.dc.as_deref();
    match delivery.new.as_slice() {
        [one] => single(one, config, dc),
        many => group(many, dc),
    }
}

fn single(o: &Occurrence, config: &Config, dc: Option<&str>) -> Value {
    let title = format!(
        "{} {}{}",
        icon(o.severity()),
        o.title,
        dc.map(|dc| format!(" ({dc})")).unwrap_or_default()
    );
    let mut blocks = vec![
        json!({"type": "header", "text": plain(&title, MAX_HEADER)}),
        json!({"type": "section", "fields": o.facts.iter().take(MAX_FIELDS).map(|f| {
            mrkdwn(&format!("*{}*\n{}", f.name, f.value), 2000)
        }).collect::<Vec<_>>()}),
    ];
    let mut context = Vec::new();
    if let Some(act) = &o.act {
        context.push(mrkdwn(&format!("`{act}`"), MAX_TEXT));
    }
    if let Some(link) = super::link(config, o) {
        context.push(mrkdwn(&format!("<{link}|dashboard>"), MAX_TEXT));
    }
    context.push(mrkdwn(
        &format!("{} · {} · {}", o.trigger, o.severity().as_str(), o.at),
        MAX_TEXT,
    ));
    blocks.push(json!({"type": "context", "elements": context}));
    if o.facts.is_empty() {
        blocks.remove(1);
    }
    json!({"text": clip(&title, MAX_TEXT), "blocks": blocks})
}

fn group(many: &[Occurrence], dc: Option<&str>) -> Value {
    let summary = super::group_summary(many, dc);
    let worst = many
        .iter()
        .map(Occurrence::severity)
        .max()
        .unwrap_or(Severity::Info);
    let mut blocks = vec![json!({
        "type": "header",
        "text": plain(&format!("{} {summary}", icon(worst)), MAX_HEADER),
    })];
    let mut by_trigger: std::collections::BTreeMap<_, Vec<&Occurrence>> = Default::default();
    for o in many {
        by_trigger.entry(o.trigger).or_default().push(o);
    }
    for (trigger, list) in by_trigger.into_iter().take(MAX_BLOCKS - 1) {
        let mut lines: Vec<String> = list
            .iter()
            .take(LISTED)
            .map(|o| format!("• {}", o.title))
            .collect();
        if list.len() > LISTED {
            lines.push(format!("… and {} more", list.len() - LISTED));
        }
        blocks.push(json!({
            "type": "section",
            "text": mrkdwn(&format!("*{trigger}* ({})\n{}", list.len(), lines.join("\n")), MAX_TEXT),
        }));
    }
    json!({"text": clip(&summary, MAX_TEXT), "blocks": blocks})
}

fn icon(severity: Severity) -> &'static str {
    match severity {
        Severity::Info => "✅",
        Severity::Warning => "⏸️",
        Severity::Error => "🔴",
    }
}

fn plain(text: &str, max: usize) -> Value {
    json!({"type": "plain_text", "text": clip(text, max), "emoji": true})
}

fn mrkdwn(text: &str, max: usize) -> Value {
    json!({"type": "mrkdwn", "text": clip(text, max)})
}

/// At most `max` characters, an ellipsis marking a cut.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}
