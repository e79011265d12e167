//! One line for a YAML parse error of user input, the same in every verb. serde-saphyr (2.2)
//! refuses documents whose aliases multiply (a "billion laughs") with a budget breach whose
//! default text, `budget breached: AliasAnchorRatio { .. }`, tells a user neither what is wrong
//! nor what to do; this says both.

use serde_saphyr::budget::BudgetBreach;

/// The error under serde-saphyr's alias and snippet wrappers.
fn innermost(mut e: &serde_saphyr::Error) -> &serde_saphyr::Error {
    while let serde_saphyr::Error::AliasError { error, .. }
    | serde_saphyr::Error::WithSnippet { error, .. } = e
    {
        e = error;
    }
    e
}

/// What a budget breach means for the user. Under the 8 MiB our inputs may have, only aliases
/// that repeat others (a "billion laughs") reach the alias, node or event limits; depth and
/// the other limits mean a document shaped unlike any manifest.
fn budget_line(breach: &BudgetBreach) -> String {
    match breach {
        BudgetBreach::Aliases { .. }
        | BudgetBreach::AliasAnchorRatio { .. }
        | BudgetBreach::RecordedAnchorEvents { .. }
        | BudgetBreach::RecordedAnchorBytes { .. }
        | BudgetBreach::MergeKeys { .. }
        | BudgetBreach::Nodes { .. }
        | BudgetBreach::Events { .. } => format!(
            "its aliases (*name) expand beyond the YAML parser's limit ({breach:?}), as a \"billion laughs\" document does; write the document out without aliases that repeat others"
        ),
        other => format!(
            "it is larger or deeper than the YAML parser accepts ({other:?}); split it into smaller documents"
        ),
    }
}

/// The first line of a serde-saphyr error, with budget breaches (the parser's defence against
/// alias bombs and oversized documents) said in the user's words.
pub fn error_line(e: &serde_saphyr::Error) -> String {
    match innermost(e) {
        serde_saphyr::Error::Budget { breach, .. } => budget_line(breach),
        _ => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default();
            // serde-saphyr starts its rendering with "error: ", which our own line has already.
            first.strip_prefix("error: ").unwrap_or(first).to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nine levels of nine aliases each: 9^9 strings if expanded.
    fn billion_laughs() -> String {
        let mut s = String::from(
            "a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for i in 1..9 {
            let p = i - 1;
            s.push_str(&format!(
                "a{i}: &a{i} [*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p}]\n"
            ));
        }
        s
    }

    #[test]
    fn a_billion_laughs_says_aliases_and_what_to_do() {
        let e = serde_saphyr::from_str::<serde_json::Value>(&billion_laughs()).unwrap_err();
        let line = error_line(&e);
        assert!(line.contains("aliases (*name) expand beyond"), "{line}");
        assert!(line.contains("write the document out"), "{line}");
        assert!(!line.contains('\n'));
    }

    #[test]
    fn other_errors_keep_their_first_line() {
        let e = serde_saphyr::from_str::<serde_json::Value>("a: [1, 2").unwrap_err();
        let line = error_line(&e);
        assert!(!line.is_empty() && !line.contains('\n'), "{line}");
        assert!(!line.contains("aliases"), "{line}");
    }
}
