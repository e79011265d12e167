//! Words for people: the closest names to a typo, durations and ages as kubectl prints them,
//! and kubectl's duration syntax.

use std::time::Duration;

/// `1.5s`, `30s`, `2m`, `1h5m`: how kubectl prints durations in messages.
pub fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    if secs < 60 {
        if ms.is_multiple_of(1000) {
            return format!("{secs}s");
        }
        return format!("{:.1}s", d.as_secs_f64());
    }
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// Up to three names from `candidates` closest to `wanted`, best first (prefix and substring
/// matches, then small edit distances).
pub fn closest_names<'a>(
    wanted: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let mut scored: Vec<(f64, &str)> = candidates
        .into_iter()
        .filter(|c| *c != wanted)
        .filter_map(|c| {
            let jw = strsim::jaro_winkler(wanted, c);
            let lev = strsim::levenshtein(wanted, c);
            let close_edit = lev <= (wanted.len() / 3).max(1);
            let contains = !wanted.is_empty() && (c.contains(wanted) || wanted.contains(c));
            if close_edit || contains || jw >= 0.85 {
                let bonus = if contains { 0.2 } else { 0.0 };
                Some((jw + bonus - lev as f64 * 0.01, c))
            } else {
                None
            }
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored.dedup_by(|a, b| a.1 == b.1);
    scored
        .into_iter()
        .take(3)
        .map(|(_, c)| c.to_string())
        .collect()
}

/// The longest duration a flag takes (`--timeout`, `--request-timeout`, `--ttl`): 30 days. Longer
/// is a typo, and bounding it keeps every `Instant + duration` far from overflow.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// Parses kubectl/Go durations: `30` (seconds), `500ms`, `10s`, `2m`, `1h30m`, `0`; at most
/// [`MAX_DURATION`].
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let too_long = || format!("duration {s:?} is too long (at most 720h)");
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if s.len() > 64 {
        return Err(too_long());
    }
    if let Ok(n) = s.parse::<u64>() {
        return Some(Duration::from_secs(n))
            .filter(|d| *d <= MAX_DURATION)
            .ok_or_else(too_long);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("invalid duration {s:?}: missing unit (use s, m or h)"))?;
        if num_len == 0 {
            return Err(format!("invalid duration {s:?} (examples: 30s, 2m, 1h30m)"));
        }
        let n: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("invalid duration {s:?}"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let secs = match &rest[..unit_len] {
            "ns" => n / 1e9,
            "us" | "µs" => n / 1e6,
            "ms" => n / 1e3,
            "s" => n,
            "m" => n * 60.0,
            "h" => n * 3600.0,
            u => {
                return Err(format!(
                    "invalid duration {s:?}: unknown unit {u:?} (use ms, s, m or h)"
                ));
            }
        };
        total += secs;
        rest = &rest[unit_len..];
    }
    // Checked before converting: Duration::from_secs_f64 panics on overflow.
    if !total.is_finite() || total > MAX_DURATION.as_secs_f64() {
        return Err(too_long());
    }
    Ok(Duration::from_secs_f64(total))
}

/// The longest certificate-warning window (`--cert-warn` of `kubectl capi doctor` and of
/// kamaji-reconciler): ten years (certificates are issued for one).
pub const MAX_CERT_WARN_DAYS: u64 = 3650;

/// `--cert-warn`: days (`30d`), else a Go duration (`720h`, at most [`MAX_DURATION`]); at most
/// [`MAX_CERT_WARN_DAYS`] days. A bare number is refused: the help speaks in days, while
/// kubectl's durations read a bare number as seconds (`--request-timeout 30`) or refuse it (Go's
/// `time.ParseDuration`, behind `kubectl wait --timeout`), so `30` has no reading a careful
/// kubectl user and the help agree on. `0` (no warning) needs no unit, as in Go.
pub fn parse_cert_warn(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t != "0" && !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{t} has no unit: write {t}d for days or {t}h for hours"
        ));
    }
    let Some(d) = t.strip_suffix('d') else {
        return parse_duration(t);
    };
    let days: u64 = d
        .parse()
        .map_err(|_| format!("invalid duration {s:?} (examples: 30d, 720h)"))?;
    if days > MAX_CERT_WARN_DAYS {
        return Err(format!(
            "duration {s:?} is too long (at most {MAX_CERT_WARN_DAYS}d)"
        ));
    }
    // At most 3650 * 86,400 seconds: no overflow.
    Ok(Duration::from_secs(days.saturating_mul(86_400)))
}

/// Seconds elapsed from an RFC 3339 timestamp to `now`; `None` when it does not parse.
pub fn seconds_since(timestamp: &str, now: jiff::Timestamp) -> Option<i64> {
    let t: jiff::Timestamp = timestamp.parse().ok()?;
    Some(now.as_second() - t.as_second())
}

/// kubectl's AGE cell: [`age`] of the seconds, or `<unknown>` when there are none (no or an
/// unreadable timestamp).
pub fn age_cell(seconds: Option<i64>) -> String {
    seconds.map(age).unwrap_or_else(|| "<unknown>".to_string())
}

/// kubectl's short human duration (`HumanDuration`): `45s`, `5m12s`, `3h`, `3h5m`, `2d3h`, `14d`, `2y10d`.
pub fn age(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    let s = seconds;
    if s < 60 * 2 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        let rem = s % 60;
        return if rem == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{rem}s")
        };
    }
    if m < 60 * 3 {
        return format!("{m}m");
    }
    let h = m / 60;
    if h < 8 {
        let rem = m % 60;
        return if rem == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{rem}m")
        };
    }
    if h < 48 {
        return format!("{h}h");
    }
    if h < 24 * 8 {
        let d = h / 24;
        let rem = h % 24;
        return if rem == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{rem}h")
        };
    }
    if h < 24 * 365 * 2 {
        return format!("{}d", h / 24);
    }
    if h < 24 * 365 * 8 {
        let y = h / (24 * 365);
        let dy = (h / 24) % 365;
        return if dy == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{dy}d")
        };
    }
    format!("{}y", h / (24 * 365))
}

/// A command-line parser's multi-line usage error (clap's layout: `error: …`, indented items,
/// `tip: …`, `[possible values: …]`, `Usage: …`) as one line and a hint: the first line (with the items of a
/// list such as missing arguments folded into it) and clap's tip or possible values, else where
/// to find help.
pub fn usage_line(clap_text: &str, help_on: &str) -> (String, String) {
    let mut message = String::new();
    let mut hints: Vec<String> = Vec::new();
    let mut usage_of = None;
    for line in clap_text.lines() {
        let t = line.trim();
        if let Some(first) = t.strip_prefix("error: ") {
            message = first.trim_end_matches(':').to_string();
            if first.ends_with(':') {
                message.push(':');
            }
        } else if let Some(tip) = t.strip_prefix("tip: ") {
            hints.push(tip.to_string());
        } else if let Some(values) = t.strip_prefix("[possible values: ") {
            hints.push(format!("possible values: {}", values.trim_end_matches(']')));
        } else if let Some(u) = t.strip_prefix("Usage: ") {
            // `kubectl capi scale [OPTIONS] ...` names the verb to ask for help on.
            let words: Vec<&str> = u
                .split_whitespace()
                .take_while(|w| !w.starts_with(['[', '<', '-']))
                .collect();
            usage_of = Some(words.join(" "));
        } else if !t.is_empty() && !t.starts_with("For more information") && message.ends_with(':')
        {
            message.push(' ');
            message.push_str(t);
        }
    }
    let message = message.trim_end_matches(':').to_string();
    // Negative numbers read as flags: say what the value must be rather than clap's `-- -1`.
    if message
        .strip_prefix("unexpected argument '-")
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    {
        hints = vec!["counts and durations cannot be negative".into()];
    }
    if hints.is_empty() {
        let on = usage_of.unwrap_or_else(|| help_on.to_string());
        hints.push(format!("see {on} --help"));
    }
    let message = if message.is_empty() {
        "invalid arguments".to_string()
    } else {
        message
    };
    (message, hints.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cert_warn_needs_a_unit_except_zero() {
        assert_eq!(parse_cert_warn("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_cert_warn("720h"), Ok(Duration::from_secs(720 * 3600)));
        assert_eq!(parse_cert_warn("0"), Ok(Duration::ZERO));
        let e = parse_cert_warn("30").unwrap_err();
        assert_eq!(e, "30 has no unit: write 30d for days or 30h for hours");
        assert!(parse_cert_warn("3651d").is_err());
    }

    #[test]
    fn human_duration_matches_kubectl() {
        assert_eq!(age(5), "5s");
        assert_eq!(age(119), "119s");
        assert_eq!(age(125), "2m5s");
        assert_eq!(age(600), "10m");
        assert_eq!(age(3 * 3600 + 300), "3h5m");
        assert_eq!(age(10 * 3600), "10h");
        assert_eq!(age(3 * 86400 + 3600), "3d1h");
        assert_eq!(age(30 * 86400), "30d");
        assert_eq!(age(3 * 365 * 86400 + 86400), "3y1d");
        assert_eq!(age(-1), "0s");
        assert_eq!(age(-5), "<invalid>");
    }

    #[test]
    fn seconds_since_parses_rfc3339() {
        let now: jiff::Timestamp = "2026-11-30T08:00:00Z".parse().unwrap();
        assert_eq!(seconds_since("2026-11-30T07:00:00Z", now), Some(3600));
        assert_eq!(seconds_since("garbage", now), None);
    }

    #[test]
    fn durations_parse_like_kubectl() {
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("").is_err());
        // These panicked in Duration::from_secs_f64 or overflowed an Instant.
        for huge in [
            "99999999999999999999s",
            "99999999999999999999",
            "721h",
            "1e400s",
            &"9".repeat(400),
        ] {
            assert!(
                parse_duration(huge).unwrap_err().contains("too long")
                    || parse_duration(huge).is_err(),
                "{huge}"
            );
        }
        assert_eq!(parse_duration("720h").unwrap(), MAX_DURATION);
    }
}
