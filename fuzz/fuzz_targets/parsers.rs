//! Everything a user types that a small parser reads: versions, durations, names, selectors,
//! `--show-conditions`. None may panic or hang on any input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let _ = kcore::version::KubeVersion::parse(s);
    let _ = kcore::version::KubeVersion::parse_v(s);
    let _ = kcore::text::parse_duration(s);
    let _ = kcore::names::check_object_name("cluster", s);
    let _ = kcore::plan::selector::LabelSelector::parse(s);
    let _ = kcore::plan::tree::TreeOptions {
        show_conditions: s.to_string(),
        ..Default::default()
    }
    .validate();
    if let Some((a, b)) = s.split_once(' ')
        && let (Ok(a), Ok(b)) = (
            kcore::version::KubeVersion::parse(a),
            kcore::version::KubeVersion::parse(b),
        )
    {
        assert!(kcore::version::minor_steps(&a, &b).len() <= 100);
    }
});
