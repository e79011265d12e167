use super::*;
use serde_json::json;

fn list() -> Value {
    json!({"items": [
        {"metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "x", "tier-1": "db"}}, "state": "Available", "n": 1},
        {"metadata": {"name": "b", "labels": {}}, "state": "Running", "n": 2}
    ]})
}

fn render(t: &str) -> String {
    Template::parse(t).unwrap().render(&list()).unwrap()
}

#[test]
fn kubectl_examples() {
    let cases = [
        ("{.items[*].metadata.name}", "a b"),
        (
            "{range .items[*]}{.metadata.name}{\"\\t\"}{.state}{\"\\n\"}{end}",
            "a\tAvailable\nb\tRunning\n",
        ),
        ("names: {.items[0].metadata.name}!", "names: a!"),
        (
            "{.items[*].metadata.labels.app\\.kubernetes\\.io/name}",
            "x",
        ),
        ("{.items[0].metadata.labels.tier-1}", "db"),
        ("{.items[?(@.state==\"Running\")].metadata.name}", "b"),
        ("{.items[*].n}", "1 2"),
        ("{.items[1].metadata}", "{\"labels\":{},\"name\":\"b\"}"),
        ("{..name}", "a b"),
        ("{$.items[-1:].metadata.name}", "b"),
        ("{.nothing.here}", ""),
        ("{range .items}{.n}{end}", "12"),
        ("{range .items[*]}{$.items[0].n}{end}", "11"),
    ];
    for (template, want) in cases {
        assert_eq!(render(template), want, "{template}");
    }
}

#[test]
fn bad_templates_are_one_line_errors() {
    for t in [
        "{.items",
        "{range .items[*]}x",
        "{end}",
        "{}",
        "{.items[}",
        "{.a b}",
    ] {
        let e = Template::parse(t).unwrap_err().to_string();
        assert!(!e.is_empty() && !e.contains('\n'), "{t}: {e}");
    }
    let deep = "{range .a}".repeat(MAX_RANGE_DEPTH + 1);
    assert!(
        Template::parse(&deep)
            .unwrap_err()
            .0
            .contains("nests deeper")
    );
    assert!(Template::parse(&"x".repeat(MAX_TEMPLATE_BYTES + 1)).is_err());
}

#[test]
fn output_is_bounded() {
    let big = json!({"items": vec![json!({"s": "x".repeat(1024 * 1024)}); 70]});
    let t = Template::parse("{range .items[*]}{.s}{end}").unwrap();
    assert!(t.render(&big).unwrap_err().0.contains("MiB"));
}

#[test]
fn custom_columns() {
    let c = Columns::parse("NAME:.metadata.name,STATE:state,L:{.metadata.labels.tier-1}").unwrap();
    assert_eq!(c.headers, ["NAME", "STATE", "L"]);
    assert_eq!(
        c.rows(&list()).unwrap(),
        vec![vec!["a", "Available", "db"], vec!["b", "Running", "<none>"]]
    );
    let f = Columns::parse_file("NAME   N\n.metadata.name   .n\n").unwrap();
    assert_eq!(f.rows(&list()).unwrap()[1], vec!["b", "2"]);
    assert!(Columns::parse("NAME").is_err());
    assert!(Columns::parse(":.a").is_err());
    assert!(Columns::parse_file("A B\n.a\n").is_err());
    let one = Columns::parse("K:.kind").unwrap();
    assert_eq!(one.rows(&json!({"kind": "X"})).unwrap(), vec![vec!["X"]]);
}

/// kubectl errors on an index outside its array and on a step of 0; RFC 9535 selects nothing
/// there, which once printed nothing with exit 0.
#[test]
fn indexes_outside_the_array_error_as_kubectl_does() {
    let e = |t: &str| Template::parse(t).unwrap().render(&list()).unwrap_err().0;
    assert_eq!(
        e("{.items[-99999999]}"),
        "array index out of bounds: index -99999997, length 2"
    );
    assert_eq!(
        e("{.items[5].metadata.name}"),
        "array index out of bounds: index 5, length 2"
    );
    assert_eq!(
        e("{.items[0:5]}"),
        "array index out of bounds: index 4, length 2"
    );
    assert_eq!(
        e("{.items[1:0]}"),
        "starting index 1 is greater than ending index 0"
    );
    assert_eq!(
        e("{range .items[0,7]}{.n}{end}"),
        "array index out of bounds: index 7, length 2"
    );
    let empty = Template::parse("{.items[0].metadata.name}").unwrap();
    assert_eq!(
        empty.render(&json!({"items": []})).unwrap_err().0,
        "array index out of bounds: index 0, length 0"
    );
    // What kubectl prints quietly stays quiet: empty slices, missing keys, negatives
    // inside the array.
    assert_eq!(render("{.items[1:1]}"), "");
    assert_eq!(render("{.nothing[3]}"), "");
    assert_eq!(render("{.items[-2].metadata.name}"), "a");
    assert_eq!(render("{.items[0:2:1].n}"), "1 2");
    for t in ["{.items[0:2:0]}", "{.items[::-1]}"] {
        let e = Template::parse(t).unwrap_err().0;
        assert!(e.starts_with("step must be > 0"), "{t}: {e}");
    }
    assert!(
        Template::parse("{.items[99999999999999999999]}")
            .unwrap_err()
            .0
            .contains("is not a number")
    );
}

#[test]
fn custom_columns_check_indexes_as_kubectl_does() {
    let c = Columns::parse("FIRST:$.items[7].n").unwrap();
    assert_eq!(
        c.rows(&list()).unwrap_err().0,
        "array index out of bounds: index 7, length 2"
    );
    let c = Columns::parse("FIRST:$.items[-1].n").unwrap();
    assert_eq!(c.rows(&list()).unwrap(), vec![vec!["2"], vec!["2"]]);
}
