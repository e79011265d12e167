//! What keeps `kubectl kamaji` a drop-in for clastix's `kamaji` plugin
//! (github.com/clastix/kamaji-kubectl-plugin, v1.0.0): its flags are cobra flags, so a boolean
//! takes `--all`, `--all=true` or `--all=false`, and a list takes `--components=A,B` or the
//! flag repeated.

/// A cobra boolean flag's value, parsed as Go's `strconv.ParseBool` parses it (what cobra's
/// `BoolVar` accepts after `=`). [`CobraBool`] makes a flag of it.
pub fn go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("{s:?} is not a boolean; use true or false")),
    }
}

/// A cobra boolean flag: `--all` or `--all=true|false` (never `--all false`, which cobra reads
/// as an argument), [`go_bool`]'s values, `default` when absent. On a `bool` field:
/// `#[arg(long, cobra_bool = false)]` (clap's derive calls the method of that name).
pub trait CobraBool {
    fn cobra_bool(self, default: bool) -> Self;
}

impl CobraBool for clap::Arg {
    fn cobra_bool(self, default: bool) -> clap::Arg {
        self.num_args(0..=1)
            .require_equals(true)
            .default_missing_value("true")
            .default_value(if default { "true" } else { "false" })
            .action(clap::ArgAction::Set)
            .value_parser(go_bool)
            .value_name("BOOL")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_booleans() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(go_bool(t), Ok(true), "{t}");
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(go_bool(f), Ok(false), "{f}");
        }
        for bad in ["", "yes", "tRUE", "2"] {
            assert!(go_bool(bad).is_err(), "{bad}");
        }
    }
}
