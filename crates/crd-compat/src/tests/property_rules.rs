//! Per-property rules, each beside its compatible twin: bounds, nested places, fields, types
//! and enums, text constraints, CEL rules.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::*;

#[test]
fn bounds() {
    use Severity::{Breaking, Warning};
    let max = |m: f64| one("percent", json!({"type": "integer", "maximum": m}));
    run(vec![
        row("maximum lowered, none read", max(100.0), max(50.0)).wants(
            ".spec.percent",
            Warning,
            "maximum lowered from 100 to 50 (no stored objects read: check against a cluster)",
            vec![],
        ),
        row("maximum lowered, one violates", max(100.0), max(50.0))
            .stored(vec![json!({"percent": 70}), json!({"percent": 20})])
            .wants(
                ".spec.percent",
                Breaking,
                "maximum lowered from 100 to 50",
                vec!["ns/o0: .spec.percent (value 70)"],
            ),
        row("maximum lowered, all within", max(100.0), max(50.0))
            .stored(vec![json!({"percent": 20}), json!({})])
            .wants(
                ".spec.percent",
                Warning,
                "maximum lowered from 100 to 50",
                vec![],
            ),
        row("maximum raised", max(50.0), max(100.0)),
        row(
            "exclusiveMaximum turned on",
            max(100.0),
            one(
                "percent",
                json!({"type": "integer", "maximum": 100.0, "exclusiveMaximum": true}),
            ),
        )
        .stored(vec![json!({"percent": 100})])
        .wants(
            ".spec.percent",
            Breaking,
            "maximum 100 made exclusive",
            vec!["ns/o0: .spec.percent (value 100)"],
        ),
        row(
            "minimum raised",
            one("n", json!({"type": "integer", "minimum": 0.0})),
            one("n", json!({"type": "integer", "minimum": 1.0})),
        )
        .stored(vec![json!({"n": 0})])
        .wants(
            ".spec.n",
            Breaking,
            "minimum raised from 0 to 1",
            vec!["ns/o0: .spec.n (value 0)"],
        ),
        row(
            "minimum lowered",
            one("n", json!({"type": "integer", "minimum": 1.0})),
            one("n", json!({"type": "integer", "minimum": 0.0})),
        ),
        row(
            "maxLength set",
            one("s", json!({"type": "string"})),
            one("s", json!({"type": "string", "maxLength": 3})),
        )
        .stored(vec![json!({"s": "abcd"}), json!({"s": "abc"})])
        .wants(
            ".spec.s",
            Breaking,
            "maxLength set to 3",
            vec!["ns/o0: .spec.s (value \"abcd\")"],
        ),
        row(
            "maxLength removed",
            one("s", json!({"type": "string", "maxLength": 3})),
            one("s", json!({"type": "string"})),
        ),
        row(
            "minItems raised",
            one(
                "l",
                json!({"type": "array", "items": {"type": "string"}, "minItems": 0}),
            ),
            one(
                "l",
                json!({"type": "array", "items": {"type": "string"}, "minItems": 1}),
            ),
        )
        .stored(vec![json!({"l": ["a"]})])
        .wants(".spec.l", Warning, "minItems raised from 0 to 1", vec![]),
        row(
            "maxItems lowered",
            one(
                "l",
                json!({"type": "array", "items": {"type": "string"}, "maxItems": 3}),
            ),
            one(
                "l",
                json!({"type": "array", "items": {"type": "string"}, "maxItems": 1}),
            ),
        )
        .wants(".spec.l", Warning, "maxItems lowered from 3 to 1", vec![]),
    ]);
}

#[test]
fn nested_places() {
    use Severity::{Breaking, Warning};
    let waves = |max: f64| {
        one(
            "waves",
            json!({"type": "array", "items": one("percent", json!({"type": "integer", "maximum": max}))}),
        )
    };
    let labels = |len: i64| {
        one(
            "labels",
            json!({"type": "object", "additionalProperties": {"type": "string", "maxLength": len}}),
        )
    };
    run(vec![
        row("maximum in items", waves(100.0), waves(50.0))
            .stored(vec![json!({"waves": [{"percent": 10}, {"percent": 60}]})])
            .wants(
                ".spec.waves[*].percent",
                Breaking,
                "maximum lowered",
                vec!["ns/o0: .spec.waves[1].percent (value 60)"],
            ),
        row("maxLength in map values", labels(10), labels(2)).wants(
            ".spec.labels.*",
            Warning,
            "maxLength lowered from 10 to 2",
            vec![],
        ),
        row("maxLength in map values, stored", labels(10), labels(2))
            .stored(vec![json!({"labels": {"a": "xyz", "b": "x"}})])
            .wants(
                ".spec.labels.*",
                Breaking,
                "maxLength lowered from 10 to 2",
                vec!["ns/o0: .spec.labels.a (value \"xyz\")"],
            ),
    ]);
}

#[test]
fn fields_types_enums() {
    use Severity::{Breaking, Warning};
    let ab =
        json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}});
    let a = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let required = |r: Value| json!({"type": "object", "required": r, "properties": {"a": {"type": "string"}, "b": {"type": "string"}}});
    let color = |e: Value| one("color", json!({"type": "string", "enum": e}));
    run(vec![
        row("field removed", ab.clone(), a.clone())
            .stored(vec![json!({"b": "x"}), json!({"a": "y"})])
            .wants(".spec.b", Breaking, "field removed", vec!["ns/o0: .spec.b (value \"x\")"]),
        row("field added, optional", a.clone(), ab.clone()),
        row("required added", required(json!(["a"])), required(json!(["a", "b"])))
            .stored(vec![json!({"a": "x"}), json!({"a": "x", "b": "y"})])
            .wants(".spec.b", Breaking, "required field added", vec!["ns/o0: .spec (no b)"]),
        row("required kept", required(json!(["a"])), required(json!(["a"]))),
        row(
            "required added with a default",
            one("b", json!({"type": "string"})),
            json!({"type": "object", "required": ["b"], "properties": {"b": {"type": "string", "default": "x"}}}),
        )
        .wants(".spec.b", Warning, "default added: \"x\"", vec![])
        .wants(".spec.b", Warning, "required field added, with a default", vec![]),
        row("type changed", one("n", json!({"type": "string"})), one("n", json!({"type": "integer"})))
            .stored(vec![json!({"n": "7"}), json!({"n": 7})])
            .wants(".spec.n", Breaking, "type changed from string to integer", vec!["ns/o0: .spec.n (value \"7\")"]),
        row("type kept", one("n", json!({"type": "string"})), one("n", json!({"type": "string"}))),
        row("enum value removed", color(json!(["red", "blue"])), color(json!(["red"])))
            .stored(vec![json!({"color": "blue"}), json!({"color": "red"})])
            .wants(".spec.color", Breaking, "enum values removed: \"blue\"", vec!["ns/o0: .spec.color (value \"blue\")"]),
        row("enum value added", color(json!(["red"])), color(json!(["red", "blue"]))),
        row("enum introduced", one("color", json!({"type": "string"})), color(json!(["red"])))
            .wants(".spec.color", Breaking, "enum introduced: \"red\"", vec![]),
        row(
            "default changed",
            one("n", json!({"type": "integer", "default": 1})),
            one("n", json!({"type": "integer", "default": 2})),
        )
        .stored(vec![json!({})])
        .wants(".spec.n", Warning, "default changed from 1 to 2", vec![]),
    ]);
}

#[test]
fn text_constraints() {
    use Severity::{Breaking, Warning};
    let s = |extra: Value| {
        let mut schema = json!({"type": "string"});
        if let (Some(into), Some(from)) = (schema.as_object_mut(), extra.as_object()) {
            into.extend(from.clone());
        }
        one("s", schema)
    };
    run(vec![
        row(
            "pattern added, none read",
            s(json!({})),
            s(json!({"pattern": "^[a-z]+$"})),
        )
        .wants(
            ".spec.s",
            Warning,
            "pattern added: ^[a-z]+$ (no stored objects read",
            vec![],
        ),
        row(
            "pattern added, one fails",
            s(json!({})),
            s(json!({"pattern": "^[a-z]+$"})),
        )
        .stored(vec![json!({"s": "Abc"}), json!({"s": "abc"})])
        .wants(
            ".spec.s",
            Breaking,
            "pattern added: ^[a-z]+$",
            vec!["ns/o0: .spec.s (value \"Abc\")"],
        ),
        row(
            "pattern removed",
            s(json!({"pattern": "^[a-z]+$"})),
            s(json!({})),
        ),
        row(
            "pattern changed",
            s(json!({"pattern": "^[a-z]+$"})),
            s(json!({"pattern": "^[a-c]+$"})),
        )
        .stored(vec![json!({"s": "abc"})])
        .wants(
            ".spec.s",
            Warning,
            "pattern changed from ^[a-z]+$ to ^[a-c]+$",
            vec![],
        ),
        row(
            "pattern this engine lacks",
            s(json!({})),
            s(json!({"pattern": "^(?=a)a$"})),
        )
        .stored(vec![json!({"s": "a"})])
        .wants(
            ".spec.s",
            Warning,
            "pattern added: ^(?=a)a$ (1 stored value(s) not judged",
            vec![],
        ),
        row(
            "format added",
            s(json!({})),
            s(json!({"format": "date-time"})),
        )
        .stored(vec![json!({"s": "yesterday"})])
        .wants(
            ".spec.s",
            Breaking,
            "format added: date-time",
            vec!["ns/o0: .spec.s (value \"yesterday\")"],
        ),
        row(
            "format added, not checked here",
            s(json!({})),
            s(json!({"format": "hostname"})),
        )
        .stored(vec![json!({"s": "a.b"})])
        .wants(
            ".spec.s",
            Warning,
            "format added: hostname (1 stored value(s) not judged",
            vec![],
        ),
    ]);
}

#[test]
fn cel_rules() {
    use Severity::{Breaking, Warning};
    let rules = |rules: Value| {
        json!({"type": "object", "x-kubernetes-validations": rules,
               "properties": {"from": {"type": "string"}, "to": {"type": "string"}}})
    };
    let none = rules(json!([]));
    let differ =
        rules(json!([{"rule": "self.from != self.to", "message": "from and to must differ"}]));
    run(vec![
        row("rule added, one fails", none.clone(), differ.clone())
            .stored(vec![
                json!({"from": "a", "to": "a"}),
                json!({"from": "a", "to": "b"}),
            ])
            .wants(
                ".spec",
                Breaking,
                "CEL rule added: self.from != self.to",
                vec!["ns/o0: .spec (fails: from and to must differ)"],
            ),
        row("rule added, all pass", none.clone(), differ.clone())
            .stored(vec![json!({"from": "a", "to": "b"})])
            .wants(
                ".spec",
                Warning,
                "CEL rule added: self.from != self.to",
                vec![],
            ),
        row("rule added, none read", none.clone(), differ.clone()).wants(
            ".spec",
            Warning,
            "CEL rule added: self.from != self.to (no stored objects read",
            vec![],
        ),
        row("rule kept", differ.clone(), differ.clone())
            .stored(vec![json!({"from": "a", "to": "a"})]),
        row("rule removed", differ.clone(), none.clone()),
        row(
            "rule changed",
            differ.clone(),
            rules(json!([{"rule": "self.from < self.to", "message": "from and to must differ"}])),
        )
        .stored(vec![json!({"from": "b", "to": "a"})])
        .wants(
            ".spec",
            Breaking,
            "CEL rule changed from self.from != self.to to self.from < self.to",
            vec!["ns/o0: .spec (fails: from and to must differ)"],
        ),
        row(
            "transition rule added",
            none.clone(),
            rules(json!([{"rule": "self.from == oldSelf.from"}])),
        )
        .stored(vec![json!({"from": "a"})])
        .wants(
            ".spec",
            Warning,
            "CEL rule added: self.from == oldSelf.from (a transition rule",
            vec![],
        ),
    ]);
}

#[test]
fn metadata_is_not_walked() {
    let with_metadata = |m: Value| {
        crd_of(
            "Namespaced",
            json!([{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"metadata": m}}}}]),
        )
    };
    let before =
        with_metadata(json!({"type": "object", "properties": {"name": {"type": "string"}}}));
    let after = with_metadata(
        json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}}),
    );
    assert_eq!(compare(&before, &after), vec![]);
}
