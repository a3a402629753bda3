//! Where a page's links and actions go, and how an action is vouched for: the page token of
//! the single DC, or across DCs a token of each button's own, bound to (context, target,
//! action) by an HMAC under a key of this server ([`Signer`]). The bottom of the dashboard:
//! it imports nothing of it.

use ring::hmac;

/// The header every POST carries the page's token in.
pub const TOKEN_HEADER: &str = "x-express-token";

/// A random token, 128 bits as hex.
pub fn new_token() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Equal, in a time that does not depend on where they differ.
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// Percent-encodes a query value (names and versions: letters, digits, `-._~` pass).
pub fn encode(value: &str) -> String {
    let mut out = String::new();
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The key of this server's action tokens.
pub struct Signer(hmac::Key);

impl Default for Signer {
    fn default() -> Signer {
        Signer::new()
    }
}

impl Signer {
    /// A new random key: tokens of one server are worthless to another.
    pub fn new() -> Signer {
        let key: [u8; 32] = rand::random();
        Signer(hmac::Key::new(hmac::HMAC_SHA256, &key))
    }

    /// The token of `binding`, as hex.
    pub fn token(&self, binding: &Binding<'_>) -> String {
        hmac::sign(&self.0, binding.text().as_bytes())
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Whether `sent` is the token of `binding`.
    pub fn verifies(&self, binding: &Binding<'_>, sent: &str) -> bool {
        same_secret(self.token(binding).as_bytes(), sent.as_bytes())
    }
}

/// What an action token is good for: one action on one target in one DC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding<'a> {
    pub context: &'a str,
    /// "team-a/shop", "team-a/shop/shop-fe1" (a node), "release/to-canary".
    pub target: String,
    /// "pause", "resume", "abort", "retry", "bounce", "promote"...
    pub action: &'a str,
    /// pause/resume: `cluster` or `namespace` (a namespace-wide pause is its own action).
    pub scope: Option<&'a str>,
}

impl Binding<'_> {
    fn text(&self) -> String {
        // Names hold no NUL: the parts cannot run into each other.
        format!(
            "{}\0{}\0{}\0{}",
            self.context,
            self.target,
            self.action,
            self.scope.unwrap_or("cluster")
        )
    }
}

/// A FleetRelease's page: one for the plan, whichever DCs hold its copies.
pub fn fleet_release_href(name: &str) -> String {
    format!("/fleet-releases/{}", encode(name))
}

/// A FleetRelease's API (its JSON, stream, and `actions/ACTION`).
pub fn fleet_release_api(name: &str) -> String {
    format!("/api/fleet-releases/{}", encode(name))
}

/// What a FleetRelease action's token is bound to: the plan, in no one DC (it acts on every
/// DC of the plan the dashboard serves).
pub fn fleet_release_binding<'a>(name: &str, action: &'a str) -> Binding<'a> {
    Binding {
        context: "",
        target: format!("fleetrelease/{name}"),
        action,
        scope: None,
    }
}

/// Where a page's actions go and how they are vouched for: the single DC (the page's own
/// token, checked by the guard), or one DC of several (the URL names it, and each button has
/// its token).
#[derive(Clone, Copy)]
pub struct Acting<'a> {
    pub context: Option<&'a str>,
    pub signer: Option<&'a Signer>,
}

impl<'a> Acting<'a> {
    /// In the DC named `context`; "" is the single DC of a dashboard of one context.
    pub fn of(context: &'a str, signer: Option<&'a Signer>) -> Acting<'a> {
        Acting {
            context: (!context.is_empty()).then_some(context),
            signer,
        }
    }

    fn prefix(&self) -> String {
        self.context
            .map(|c| format!("/dcs/{}", encode(c)))
            .unwrap_or_default()
    }

    /// The tenant's page.
    pub fn tenant_href(&self, namespace: &str, cluster: &str) -> String {
        format!("{}/tenants/{namespace}/{cluster}", self.prefix())
    }

    /// The tenant's API (its JSON, stream and actions).
    pub fn api_base(&self, namespace: &str, cluster: &str) -> String {
        format!("/api{}/tenants/{namespace}/{cluster}", self.prefix())
    }

    pub fn release_url(&self, name: &str, action: &str) -> String {
        format!("/api{}/releases/{name}/actions/{action}", self.prefix())
    }

    /// An OperatorRelease's page, in this DC.
    pub fn release_href(&self, name: &str) -> String {
        format!("{}/releases/{}", self.prefix(), encode(name))
    }

    /// An OperatorRelease's API (its JSON and stream), in this DC.
    pub fn release_api(&self, name: &str) -> String {
        format!("/api{}/releases/{}", self.prefix(), encode(name))
    }

    /// The token a button for `action` on `target` carries (None: the page's token serves).
    pub fn token(&self, target: &str, action: &str, scope: Option<&str>) -> Option<String> {
        let (context, signer) = (self.context?, self.signer?);
        Some(signer.token(&Binding {
            context,
            target: target.to_owned(),
            action,
            scope,
        }))
    }

    /// What the confirmation names first: "dc-b / team-a / shop" (nothing for a single DC).
    pub fn naming(&self, namespace: &str, cluster: &str) -> Option<String> {
        self.context
            .map(|context| format!("{context} / {namespace} / {cluster}"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn binding<'a>(context: &'a str, target: &str, action: &'a str) -> Binding<'a> {
        Binding {
            context,
            target: target.into(),
            action,
            scope: Some("cluster"),
        }
    }

    #[test]
    fn a_token_acts_in_its_own_dc_on_its_own_tenant_as_its_own_action() {
        let signer = Signer::new();
        let pause_b = binding("dc-b", "team-a/shop", "pause");
        let token = signer.token(&pause_b);
        assert!(signer.verifies(&pause_b, &token));
        for other in [
            binding("dc-a", "team-a/shop", "pause"),
            binding("dc-b", "team-b/shop", "pause"),
            binding("dc-b", "team-a/shop", "abort"),
            Binding {
                scope: Some("namespace"),
                ..pause_b.clone()
            },
        ] {
            assert!(!signer.verifies(&other, &token), "{other:?}");
        }
        // Another server's key: nothing carries over.
        assert!(!Signer::new().verifies(&pause_b, &token));
        assert!(!signer.verifies(&pause_b, ""));
        // Names cannot be shifted from one part to the next.
        assert_ne!(
            signer.token(&binding("dc-b", "a/shop", "pause")),
            signer.token(&binding("dc-b\0a", "shop", "pause"))
        );
    }

    #[test]
    fn buttons_name_their_dc_in_the_url_the_token_and_the_confirmation() {
        let signer = Signer::new();
        let acting = Acting {
            context: Some("dc-b"),
            signer: Some(&signer),
        };
        assert_eq!(
            acting.api_base("team-a", "shop"),
            "/api/dcs/dc-b/tenants/team-a/shop"
        );
        assert_eq!(
            acting.tenant_href("team-a", "shop"),
            "/dcs/dc-b/tenants/team-a/shop"
        );
        assert_eq!(
            acting.release_url("to-canary", "pause"),
            "/api/dcs/dc-b/releases/to-canary/actions/pause"
        );
        assert_eq!(
            acting.naming("team-a", "shop").as_deref(),
            Some("dc-b / team-a / shop")
        );
        let token = acting
            .token("team-a/shop", "pause", Some("cluster"))
            .unwrap();
        assert!(signer.verifies(&binding("dc-b", "team-a/shop", "pause"), &token));
        // A context name with a slash stays one path segment.
        let odd = Acting {
            context: Some("arn:eks/prod"),
            signer: None,
        };
        assert_eq!(
            odd.tenant_href("ns", "c"),
            "/dcs/arn%3Aeks%2Fprod/tenants/ns/c"
        );
        // The single DC: the old URLs, the page's token, no DC named.
        let single = Acting::of("", None);
        assert_eq!(
            single.api_base("team-a", "shop"),
            "/api/tenants/team-a/shop"
        );
        assert_eq!(single.token("team-a/shop", "pause", None), None);
        assert_eq!(single.naming("team-a", "shop"), None);
    }

    #[test]
    fn a_fleet_release_token_is_good_for_its_plan_and_action_only() {
        let signer = Signer::new();
        let approve = signer.token(&fleet_release_binding("to-canary", "approve"));
        assert!(signer.verifies(&fleet_release_binding("to-canary", "approve"), &approve));
        for other in [
            fleet_release_binding("to-canary", "abort-rollback"),
            fleet_release_binding("other-plan", "approve"),
            // The OperatorRelease of the same name in one DC is another target.
            binding("dc-a", "release/to-canary", "approve"),
        ] {
            assert!(!signer.verifies(&other, &approve), "{other:?}");
        }
        assert_eq!(
            fleet_release_api("to canary"),
            "/api/fleet-releases/to%20canary"
        );
    }

    #[test]
    fn tokens_differ_and_compare_in_full() {
        assert_ne!(new_token(), new_token());
        assert_eq!(new_token().len(), 32);
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
    }
}
