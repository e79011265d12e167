//! Property tests of the parsers a user's typing reaches: Kubernetes versions, label
//! selectors and the clusterctl-style template engine. Every parser takes any string without
//! panicking, and what it accepts round-trips.

use kcore::plan::selector::LabelSelector;
use kcore::plan::template::{Variables, substitute};
use kcore::version::{KubeVersion, minor_steps};
use proptest::prelude::*;

fn no_vars() -> Variables {
    Variables::default()
}

fn vars(name: &str, value: &str) -> Variables {
    Variables {
        env: [(name.to_string(), value.to_string())]
            .into_iter()
            .collect(),
        ..Variables::default()
    }
}

/// A backtracking glob, the obvious definition: the reference the automaton must agree with
/// on inputs small enough for it.
fn glob_reference(p: &[char], s: &[char]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some(('*', rest)) => (0..=s.len()).any(|i| glob_reference(rest, &s[i..])),
        Some(('?', rest)) => !s.is_empty() && glob_reference(rest, &s[1..]),
        Some((c, rest)) => s.first() == Some(c) && glob_reference(rest, &s[1..]),
    }
}

/// `${X#p}` / `${X##p}` by the reference.
fn trim_reference(v: &str, p: &str, longest: bool) -> String {
    let chars: Vec<char> = v.chars().collect();
    let pat: Vec<char> = p.chars().collect();
    let lens: Vec<usize> = (1..=chars.len()).collect();
    let pick = |l: &usize| glob_reference(&pat, &chars[..*l]);
    let l = if longest {
        lens.iter().rev().find(|l| pick(l))
    } else {
        lens.iter().find(|l| pick(l))
    };
    chars[l.copied().unwrap_or(0)..].iter().collect()
}

proptest! {
    // 1,000 cases each; failures are reported, not persisted into the tree.
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn versions_parse_anything_without_panicking(s in ".{0,40}") {
        let _ = KubeVersion::parse(&s);
        let _ = KubeVersion::parse_v(&s);
    }

    #[test]
    fn versions_round_trip_and_order_like_numbers(
        a in (0u64..3, 0u64..=99, 0u64..1000),
        b in (0u64..3, 0u64..=99, 0u64..1000),
    ) {
        let va = KubeVersion::parse(&format!("v{}.{}.{}", a.0, a.1, a.2)).unwrap();
        let vb = KubeVersion::parse(&format!("{}.{}.{}", b.0, b.1, b.2)).unwrap();
        prop_assert_eq!(va.to_string(), format!("v{}.{}.{}", a.0, a.1, a.2));
        prop_assert_eq!(va.cmp(&vb), a.cmp(&b));
        // The walk: one step per minor, ending at the target, never longer than the minors.
        let steps = minor_steps(&va, &vb);
        if vb > va {
            prop_assert_eq!(steps.last(), Some(&vb));
            if a.0 == b.0 {
                prop_assert_eq!(steps.len() as u64, (b.1 - a.1).max(1));
            }
        } else {
            prop_assert!(steps.is_empty());
        }
    }

    #[test]
    fn selectors_parse_anything_without_panicking(s in ".{0,60}") {
        let _ = LabelSelector::parse(&s);
    }

    #[test]
    fn selectors_round_trip(
        reqs in prop::collection::vec(
            ("[a-z][a-z0-9]{0,6}", "[a-z0-9]{1,6}", 0u8..4),
            1..5,
        ),
    ) {
        let text: Vec<String> = reqs
            .iter()
            .map(|(k, v, op)| match op {
                0 => format!("{k}={v}"),
                1 => format!("{k}!={v}"),
                2 => format!("{k} in ({v},x{v})"),
                _ => format!("!{k}"),
            })
            .collect();
        let text = text.join(",");
        let parsed = LabelSelector::parse(&text).unwrap();
        let again = LabelSelector::parse(&parsed.to_string()).unwrap();
        prop_assert_eq!(parsed, again);
    }

    #[test]
    fn templates_take_anything_without_panicking(s in ".{0,200}") {
        let _ = substitute(&s, &no_vars());
        let _ = kcore::plan::template::list_variables(&s);
    }

    #[test]
    fn text_without_a_dollar_is_left_alone(s in "[^$]{0,200}") {
        prop_assert_eq!(substitute(&s, &no_vars()).unwrap(), s);
    }

    #[test]
    fn a_variable_renders_its_value(v in "[^$]{0,50}") {
        prop_assert_eq!(substitute("<${X}>", &vars("X", &v)).unwrap(), format!("<{v}>"));
    }

    #[test]
    fn glob_trims_agree_with_the_backtracking_reference(
        v in "[ab]{0,10}",
        p in "[ab*?]{1,6}",
    ) {
        for (op, longest) in [("#", false), ("##", true)] {
            let got = substitute(&format!("${{X{op}{p}}}"), &vars("X", &v)).unwrap();
            prop_assert_eq!(&got, &trim_reference(&v, &p, longest), "${{X{}{}}} of {:?}", op, p, v);
        }
        // Suffixes: the same on the reversed value and pattern.
        let rv: String = v.chars().rev().collect();
        let rp: String = p.chars().rev().collect();
        for (op, longest) in [("%", false), ("%%", true)] {
            let got = substitute(&format!("${{X{op}{p}}}"), &vars("X", &v)).unwrap();
            let want: String = trim_reference(&rv, &rp, longest).chars().rev().collect();
            prop_assert_eq!(&got, &want, "${{X{}{}}} of {:?}", op, p, v);
        }
    }
}
