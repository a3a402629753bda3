//! The pages, rendered on the server with `maud` from the view models: a full page for the
//! first load, and the same parts one by one for the live updates, so a part looks the same
//! however it arrived. Every action button carries the request it makes and the sentence its
//! confirmation shows; the script only asks and posts.
//!
//! This module is the shell every page shares (its head, header, confirmation dialog, action
//! buttons, the update format and the assets); [`fleet`] is the one fleet page, [`tenant`]
//! the tenant page and [`release`] the release pages.

pub mod fleet;
pub mod release;
pub mod tenant;

use maud::{DOCTYPE, Markup, html};

use super::links::Acting;
use super::model::rows::TenantRow;

/// What every page needs to know of the server.
pub struct Chrome<'a> {
    /// Bound to this server and its pages: every POST must carry it.
    pub token: &'a str,
    pub read_only: bool,
    /// What the dashboard watches: "namespace tenant-a" or "every namespace".
    pub scope: &'a str,
    /// The serving process (see the live stream's `hello`).
    pub instance: &'a str,
    /// The DC its actions go to, and their tokens.
    pub acting: Acting<'a>,
}

pub fn page(chrome: &Chrome<'_>, title: &str, stream: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if !chrome.read_only && !chrome.token.is_empty() { meta name="express-token" content=(chrome.token); }
                title { (title) " · Express dashboard" }
                link rel="stylesheet" href="/assets/dashboard.css";
                script src="/assets/dashboard.js" defer {}
            }
            body data-stream=(stream) data-instance=(chrome.instance) {
                header {
                    a href="/" class="brand" { "Express" }
                    span class="scope" { (chrome.scope) }
                    @if chrome.read_only { span class="badge read-only" { "read-only" } }
                    span id="live" class="live" title="updates arrive as the cluster changes" { "live" }
                }
                div id="connection" class="connection" role="alert" hidden {
                    "Connection to the dashboard lost; reconnecting…"
                }
                main { (body) }
                @if !chrome.read_only {
                    dialog id="confirm" {
                        form method="dialog" {
                            h2 id="confirm-title" { "Confirm" }
                            p id="confirm-text" {}
                            label id="confirm-option" hidden {
                                input type="checkbox" id="confirm-check";
                                " " span id="confirm-option-text" {}
                            }
                            div class="buttons" {
                                button value="cancel" id="confirm-cancel" { "Cancel" }
                                button value="ok" id="confirm-ok" class="danger" { "Confirm" }
                            }
                        }
                    }
                    div id="result" class="result" role="status" hidden {}
                }
            }
        }
    }
}

/// One update: the page's parts by element id, as JSON.
pub fn update(parts: Vec<(&'static str, String)>) -> String {
    let map: serde_json::Map<String, serde_json::Value> = parts
        .into_iter()
        .map(|(id, html)| (id.to_owned(), html.into()))
        .collect();
    serde_json::Value::Object(map).to_string()
}

/// A button that asks before it posts; across DCs it carries its own token (`token`).
pub fn action(
    url: &str,
    body: &str,
    label: &str,
    confirm: &str,
    option: Option<(&str, &str)>,
    token: Option<String>,
) -> Markup {
    html! {
        button type="button" class="action" data-url=(url) data-body=(body) data-title=(label) data-confirm=(confirm)
            data-option=[option.map(|o| o.0)] data-option-text=[option.map(|o| o.1)] data-token=[token] { (label) }
    }
}

pub fn progress(row: &TenantRow) -> Markup {
    // A meter rather than a styled bar: the pages carry no inline style, so the CSP forbids it.
    html! {
        meter class="bar" min="0" max=(row.up.max(1)) value=(row.up_to_date) {}
        " " (row.progress())
    }
}

pub fn cluster_class(phase: &str) -> &'static str {
    match phase {
        "Healthy" => "ready",
        "Progressing" => "changing",
        "Degraded" => "notready",
        "Failed" | "InvalidSpec" => "failed",
        "Paused" => "paused",
        _ => "unknown",
    }
}

/// A page that says what is not there.
pub fn not_found(chrome: &Chrome<'_>, what: &str) -> Markup {
    page(
        chrome,
        "Not found",
        "",
        html! { h1 { "Not found" } p { (what) } p { a href="/" { "Back to the fleet" } } },
    )
}

/// The script and stylesheet, served from the binary.
pub const SCRIPT: &str = include_str!("../assets/dashboard.js");
pub const STYLESHEET: &str = include_str!("../assets/dashboard.css");
