//! The clusterctl-style template engine on any template, with a variable set.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let vars = kcore::plan::template::Variables {
        env: [("X".to_string(), "a*b?c".to_string()), ("N".to_string(), "banana".to_string())]
            .into_iter()
            .collect(),
        ..Default::default()
    };
    let _ = kcore::plan::template::list_variables(s);
    if let Ok(out) = kcore::plan::template::substitute(s, &vars) {
        assert!(out.len() <= kcore::plan::template::MAX_OUTPUT_BYTES + s.len());
    }
});
