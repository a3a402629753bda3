//! Notifications (DESIGN section 21): while this instance leads its ring, a loop beside the
//! reconciles and the releases reads what the caches show of the tenants it leads and the
//! releases it judges, asks the pure [`express_notify`] what each destination is sent now, posts
//! it, and records what was accepted in the ring's ledger. Nothing a rollout or a release does
//! waits on it; a destination that hangs delays only its own messages.
//!
//! This file is the table of contents: the loop and one pass. Its rooms: [`setup`] (the
//! ConfigMap and the Secret), [`ledger_store`] (the ledger's ConfigMap), [`post`] (one message
//! to one destination), [`events`] (what is told on the ConfigMap).

mod events;
mod ledger_store;
mod post;
mod setup;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use express_api::{FleetRelease, OperatorRelease};
use express_notify::outbox::{self, Delivery};
use express_notify::{Ledger, Occurrence, Trigger, observe, render};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use tracing::{info, warn};

use crate::controller::context::{Context, leadership_changed};
use crate::controller::memory::caches::Scoped;
use crate::controller::outbound;

/// How often a leader looks, at most: a new occurrence waits this long before it is noticed.
const PASS_EVERY: Duration = Duration::from_secs(2);
/// How often the configuration is read again.
const SETUP_EVERY: Duration = Duration::from_secs(30);

/// What a leader holds between passes.
struct Notifier {
    setup: Option<setup::Setup>,
    setup_read: Option<Instant>,
    /// Read from the ledger's ConfigMap once this instance leads; None until it could be.
    ledger: Option<Ledger>,
    /// The ledger's text as last written.
    written: String,
    /// Occurrences due at each destination and not yet accepted: one that leaves this set
    /// unsent is dropped.
    pending: BTreeMap<(String, String), Trigger>,
    /// The problems last told in an event, so that the same ones are not told every pass.
    told_problems: Vec<String>,
    client: post::Client,
}

/// Runs until the controller stops.
pub(crate) async fn run(
    ctx: Arc<Context>,
    releases: Arc<Scoped<OperatorRelease>>,
    plans: Scoped<FleetRelease>,
) {
    let tls = outbound::system_roots().unwrap_or_else(|why| {
        // Plain http destinations still work; an https one fails, naming why.
        warn!(%why, "notifications: no CA roots, https destinations cannot be verified");
        rustls::ClientConfig::builder()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth()
    });
    let client = outbound::https_client(tls);
    releases.wait_until_ready().await;
    let mut leader = ctx.leader.clone();
    let mut notifier: Option<Notifier> = None;
    loop {
        if !*leader.borrow() {
            // A follower holds nothing: the next leader starts again from the ledger.
            notifier = None;
            leadership_changed(&mut leader).await;
            continue;
        }
        let state = notifier.get_or_insert_with(|| Notifier {
            setup: None,
            setup_read: None,
            ledger: None,
            written: String::new(),
            pending: BTreeMap::new(),
            told_problems: Vec::new(),
            client: client.clone(),
        });
        let wait = pass(&ctx, &releases, &plans, state).await;
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = leadership_changed(&mut leader) => {}
        }
    }
}

/// One pass; returns how long to wait before the next.
async fn pass(
    ctx: &Context,
    releases: &Scoped<OperatorRelease>,
    plans: &Scoped<FleetRelease>,
    state: &mut Notifier,
) -> Duration {
    refresh_setup(ctx, state).await;
    let Some(setup) = &state.setup else {
        return SETUP_EVERY;
    };
    if setup.config.destinations.is_empty() {
        return SETUP_EVERY;
    }
    let now = Timestamp::now();
    if state.ledger.is_none() {
        match ledger_store::read(ctx).await {
            Ok(text) => {
                let begins = setup
                    .created
                    .unwrap_or(now.as_second())
                    .min(now.as_second());
                let (ledger, problem) = Ledger::read(text.as_deref(), begins, now.as_second());
                if let Some(problem) = problem {
                    warn!(%problem, "notifications ledger");
                }
                state.written = text.unwrap_or_default();
                state.ledger = Some(ledger);
            }
            Err(why) => {
                warn!(%why, "cannot read the notifications ledger: nothing is sent until it can be");
                return PASS_EVERY;
            }
        }
    }
    let occurrences = occurrences(ctx, releases, plans, setup.config.dc.as_deref());
    let Some(ledger) = state.ledger.as_mut() else {
        return PASS_EVERY;
    };
    let out = outbox::outbox(&setup.config, &occurrences, ledger, now.as_second());
    let results = deliver(setup, &state.client, &out.deliveries, now).await;
    let mut still_pending = BTreeMap::new();
    for (delivery, result) in out.deliveries.iter().zip(results) {
        record(
            ctx,
            setup,
            ledger,
            delivery,
            result,
            now,
            &mut still_pending,
        )
        .await;
    }
    for (destination, digest) in &out.waiting {
        if let Some(o) = occurrences.iter().find(|o| &o.digest() == digest) {
            still_pending.insert((destination.clone(), digest.clone()), o.trigger);
        }
    }
    let delivered: BTreeSet<(String, String)> = out
        .deliveries
        .iter()
        .flat_map(|d| {
            d.new
                .iter()
                .map(|o| (d.destination.name.clone(), o.digest()))
        })
        .collect();
    for ((destination, digest), trigger) in &state.pending {
        let key = (destination.clone(), digest.clone());
        if !still_pending.contains_key(&key) && !delivered.contains(&key) {
            ctx.metrics
                .notify
                .count(trigger.as_str(), destination, "dropped", 1);
        }
    }
    state.pending = still_pending;
    let names: Vec<&str> = setup.config.destination_names().collect();
    let max_age = i64::try_from(setup.config.max_age_seconds).unwrap_or(i64::MAX);
    ledger.trim(&names, now.as_second(), max_age);
    let text = ledger.to_text();
    if text != state.written {
        match ledger_store::write(ctx, &text).await {
            Ok(()) => state.written = text,
            Err(why) => warn!(%why, "cannot write the notifications ledger"),
        }
    }
    let until_next = out.next_look.map(|at| {
        Duration::from_secs(u64::try_from(at.as_second() - now.as_second()).unwrap_or(0))
    });
    until_next.map_or(PASS_EVERY, |d| {
        d.clamp(Duration::from_millis(200), PASS_EVERY)
    })
}

/// Reads the configuration again when it is due; tells its problems once.
async fn refresh_setup(ctx: &Context, state: &mut Notifier) {
    if state
        .setup_read
        .is_some_and(|at| at.elapsed() < SETUP_EVERY)
    {
        return;
    }
    state.setup_read = Some(Instant::now());
    match setup::read(ctx).await {
        Ok(setup) => {
            if let Some(setup) = &setup
                && !setup.config.problems.is_empty()
                && setup.config.problems != state.told_problems
            {
                warn!(problems = ?setup.config.problems, "notifications: entries left out");
                events::publish(
                    ctx,
                    Some(setup.reference.clone()),
                    events::unusable(&setup.config.problems),
                )
                .await;
            }
            state.told_problems = setup
                .as_ref()
                .map(|s| s.config.problems.clone())
                .unwrap_or_default();
            state.setup = setup;
        }
        Err(why) => warn!(%why, "cannot read the notifications configuration; the last one stays"),
    }
}

/// What the caches show worth telling: the tenants this ring leads, the releases it judges,
/// the plans across DCs whose `fromRing` it is (told by one DC of each plan: `dc`, when it is
/// the plan's teller).
fn occurrences(
    ctx: &Context,
    releases: &Scoped<OperatorRelease>,
    plans: &Scoped<FleetRelease>,
    dc: Option<&str>,
) -> Vec<Occurrence> {
    let ring = &ctx.settings.ring;
    let mut found: Vec<Occurrence> = ctx
        .caches
        .clusters
        .in_namespace(None)
        .iter()
        .filter(|c| express_api::rings::ring_of(c.labels()) == ring.as_str())
        .flat_map(|c| observe::tenant(c))
        .collect();
    found.extend(
        releases
            .in_namespace(None)
            .iter()
            .filter(|r| &r.spec.from_ring == ring)
            .flat_map(|r| observe::release(r)),
    );
    found.extend(
        plans
            .in_namespace(None)
            .iter()
            .filter(|p| &p.spec.from_ring == ring)
            .flat_map(|p| observe::fleet_release(p, dc)),
    );
    found
}

/// Every delivery posted at once, each within its deadline.
async fn deliver(
    setup: &setup::Setup,
    client: &post::Client,
    deliveries: &[Delivery],
    now: Timestamp,
) -> Vec<Result<(), String>> {
    futures::future::join_all(deliveries.iter().map(|delivery| async move {
        let endpoint = setup
            .endpoints
            .get(&delivery.destination.name)
            .ok_or_else(|| "no endpoint".to_owned())?;
        let message = render::render(
            delivery,
            &setup.config,
            endpoint.signing_key.as_deref(),
            now,
        );
        post::post(client, &endpoint.url, &message).await
    }))
    .await
}

/// One delivery's outcome: the ledger, the metrics, the log, and an event when its destination
/// turns failing or answers again.
async fn record(
    ctx: &Context,
    setup: &setup::Setup,
    ledger: &mut Ledger,
    delivery: &Delivery,
    result: Result<(), String>,
    now: Timestamp,
    still_pending: &mut BTreeMap<(String, String), Trigger>,
) {
    let name = &delivery.destination.name;
    let was_failing = ledger.health(name).is_failing();
    let mut by_trigger: BTreeMap<Trigger, u64> = BTreeMap::new();
    for o in &delivery.new {
        *by_trigger.entry(o.trigger).or_default() += 1;
    }
    match result {
        Ok(()) => {
            delivery.accepted(ledger, setup.config.dc.as_deref(), now.as_second());
            for (trigger, count) in &by_trigger {
                ctx.metrics
                    .notify
                    .count(trigger.as_str(), name, "sent", *count);
            }
            info!(destination = %name, notifications = delivery.new.len(), firing = delivery.firing.len(),
                  resolved = delivery.resolved.len(), delivery = %delivery.id(), "notified");
            if was_failing {
                events::publish(ctx, Some(setup.reference.clone()), events::recovered(name)).await;
            }
        }
        Err(why) => {
            ledger.refused(name, &why, now.as_second());
            for (trigger, count) in &by_trigger {
                ctx.metrics
                    .notify
                    .count(trigger.as_str(), name, "failed", *count);
            }
            for o in &delivery.new {
                still_pending.insert((name.clone(), o.digest()), o.trigger);
            }
            let health = ledger.health(name);
            warn!(destination = %name, failures = health.failures, %why, "notification not delivered");
            if health.is_failing() && !was_failing {
                let notice = events::failing(name, health.failures, &why);
                events::publish(ctx, Some(setup.reference.clone()), notice).await;
            }
        }
    }
    ctx.metrics
        .notify
        .set_failing(name, ledger.health(name).is_failing());
}
