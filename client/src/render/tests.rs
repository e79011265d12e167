use super::*;
use std::time::Duration;

#[test]
fn color_rules() {
    assert!(color_enabled(ColorWhen::Auto, None, true));
    assert!(!color_enabled(ColorWhen::Auto, Some("1"), true));
    assert!(color_enabled(ColorWhen::Auto, Some(""), true));
    assert!(!color_enabled(ColorWhen::Auto, None, false));
    assert!(color_enabled(ColorWhen::Always, Some("1"), false));
    assert!(!color_enabled(ColorWhen::Never, None, true));
}

#[test]
fn value_names_round_trip() {
    for (v, name, _) in OutputFormat::ALL {
        assert_eq!(v.to_string(), name);
    }
    for (v, name, _) in ColorWhen::ALL {
        assert_eq!(name.parse::<ColorWhen>(), Ok(v));
    }
    assert!(
        "sometimes"
            .parse::<ColorWhen>()
            .unwrap_err()
            .contains("auto, always")
    );
}

#[test]
fn yaml_stream_round_trips() {
    let objects = [
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}),
        serde_json::json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "prod"}}),
    ];
    let y = yaml_stream(&objects).unwrap();
    assert_eq!(y.matches("---\n").count(), 2);
    assert!(y.contains("name: prod"), "{y}");
    assert_eq!(display_name(&objects[0]), "namespace/a");
    assert_eq!(display_name(&objects[1]), "cluster.cluster.x-k8s.io/prod");
}

fn sample() -> Table {
    let mut t = Table::new(["name", "ready", "age"]).wide(["node"]);
    t.row(["web-1", "True", "5m", "node-a"]);
    t.row([
        Cell::from("database-primary"),
        Cell::status("False"),
        Cell::from("12d"),
        Cell::from("node-b"),
    ]);
    t
}

#[test]
fn table_looks_like_kubectl_get() {
    let t = sample();
    assert_eq!(
        t.render(false, true, false),
        "NAME               READY   AGE\nweb-1              True    5m\ndatabase-primary   False   12d\n"
    );
    assert_eq!(
        t.render(true, false, false),
        "web-1              True    5m    node-a\ndatabase-primary   False   12d   node-b\n"
    );
}

#[test]
fn coloured_cells_keep_columns_aligned() {
    let t = sample();
    let plain = t.render(false, true, false);
    let coloured = t.render(false, true, true);
    assert!(
        coloured.contains("\u{1b}[31mFalse\u{1b}[39m"),
        "{coloured:?}"
    );
    let strip = |s: &str| {
        let mut out = String::new();
        let mut in_esc = false;
        for c in s.chars() {
            match (in_esc, c) {
                (false, '\u{1b}') => in_esc = true,
                (true, 'm') => in_esc = false,
                (true, _) => {}
                (false, c) => out.push(c),
            }
        }
        out
    };
    assert_eq!(strip(&coloured), plain);
}

#[test]
fn fields_align_keys() {
    let mut f = Fields::new();
    f.add("Client Version", "v0.1.0")
        .add("Cluster API", "v1beta2");
    assert_eq!(
        f.render(false),
        "Client Version:   v0.1.0\nCluster API:      v1beta2\n"
    );
}

#[derive(Serialize)]
struct Items {
    items: Vec<String>,
    #[serde(rename = "apiVersion")]
    api_version: String,
}
impl Render for Items {
    fn human(&self) -> Human {
        let mut t = Table::new(["name"]);
        for i in &self.items {
            t.row([i.as_str()]);
        }
        Human::Table(t)
    }
    fn names(&self) -> Option<Vec<String>> {
        Some(
            self.items
                .iter()
                .map(|i| object_name("Cluster", "cluster.x-k8s.io", i))
                .collect(),
        )
    }
}

fn printer(format: OutputFormat) -> Printer {
    Printer {
        format,
        headers: true,
        show_labels: false,
        color: false,
    }
}

#[test]
fn jsonpath_custom_columns_and_labels() {
    let v = Items {
        items: vec!["a".into(), "b".into()],
        api_version: "v9".into(),
    };
    let t = jsonpath::Template::parse("{.items[*]} {.apiVersion}").unwrap();
    assert_eq!(
        printer(OutputFormat::JsonPath(t)).format(&v).unwrap(),
        "a b v9"
    );
    let c = jsonpath::Columns::parse("N:@,V:$.apiVersion").unwrap();
    assert_eq!(
        printer(OutputFormat::CustomColumns(c)).format(&v).unwrap(),
        "N   V\na   v9\nb   v9\n"
    );
    let labelled = Printer {
        show_labels: true,
        ..printer(OutputFormat::Table)
    };
    let e = labelled.format(&v).unwrap_err();
    assert!(e.to_string().contains("--show-labels is not supported"));
}

#[test]
fn json_yaml_and_name_outputs_are_stable() {
    let v = Items {
        items: vec!["a".into(), "b".into()],
        api_version: "v1".into(),
    };
    assert_eq!(
        printer(OutputFormat::Json).format(&v).unwrap(),
        "{\n  \"items\": [\n    \"a\",\n    \"b\"\n  ],\n  \"apiVersion\": \"v1\"\n}\n"
    );
    let y = printer(OutputFormat::Yaml).format(&v).unwrap();
    let back: serde_json::Value = serde_saphyr::from_str(&y).unwrap();
    assert_eq!(
        back,
        serde_json::json!({"items": ["a", "b"], "apiVersion": "v1"})
    );
    assert_eq!(
        printer(OutputFormat::Name).format(&v).unwrap(),
        "cluster.cluster.x-k8s.io/a\ncluster.cluster.x-k8s.io/b\n"
    );
    assert_eq!(
        printer(OutputFormat::Table).format(&v).unwrap(),
        "NAME\na\nb\n"
    );
}

#[test]
fn errors_print_one_line_and_a_hint() {
    let e = Error::NotInstalled {
        product: "Cluster API".into(),
        group: "cluster.x-k8s.io".into(),
        install: "install it with clusterctl init".into(),
        context: "kind-mgmt".into(),
    };
    let text = error_text(&e, false);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0],
        "error: Cluster API is not installed on this cluster (no cluster.x-k8s.io API); install it with clusterctl init"
    );
    assert!(lines[1].starts_with("hint: context \"kind-mgmt\""));
}

#[test]
fn completion_answer_ends_with_directive() {
    assert_eq!(completions_text(&["a".into(), "b".into()], 4), "a\nb\n:4\n");
    assert_eq!(completions_text(&[], 0), ":0\n");
}

#[tokio::test]
async fn wait_until_times_out_with_last_status() {
    let mut n = 0;
    let r: Result<(), Error> = wait_until(
        "waiting for x",
        Duration::from_millis(50),
        Duration::from_millis(10),
        || {
            n += 1;
            let k = n;
            async move { Ok(Poll::Pending(format!("step {k}"))) }
        },
    )
    .await;
    let e = r.unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }));
    assert!(
        e.to_string()
            .starts_with("timed out after 50ms while waiting for x (last seen: step"),
        "{e}"
    );
    let r = wait_until(
        "y",
        Duration::from_secs(5),
        Duration::from_millis(1),
        || async { Ok(Poll::Ready(7)) },
    )
    .await;
    assert_eq!(r.unwrap(), 7);
}
