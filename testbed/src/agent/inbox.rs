//! Hosts onboarded into a running sandbox (`capi-testbed host`, as `make demo` does after
//! `kubectl capi hosts add`): the request is a file in `<dir>/hosts-inbox`, and the sandbox
//! runner, which holds the testbed, runs the printed script on a new host (its preflight, then
//! the real agent, [`super::HostAgent::start_script`]) and answers with `<name>.started` or
//! `<name>.failed`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::HostAgent;
use crate::{Error, Testbed};

const INBOX: &str = "hosts-inbox";
/// How long `capi-testbed host` waits for the runner.
const WAIT: Duration = Duration::from_secs(60);

fn inbox(dir: &Path) -> PathBuf {
    dir.join(INBOX)
}

/// Asks the sandbox in `dir` to run `script` (what `kubectl capi hosts add` printed) on a new
/// host `name` whose image carries a kubelet of `kubelet_version` (none: no kubelet); returns
/// the runner's answer once it started it.
pub fn request(
    dir: &Path,
    name: &str,
    script: &str,
    kubelet_version: Option<&str>,
) -> Result<String, Error> {
    // A host name is a DNS label (the agent names its ByoHost after it): nothing to escape.
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !valid {
        return Err(Error::Start(format!(
            "host name {name:?}: use a DNS label (lower-case letters, digits, '-'; at most 63)"
        )));
    }
    let d = inbox(dir);
    std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
    for end in ["started", "failed"] {
        let _ = std::fs::remove_file(d.join(format!("{name}.{end}")));
    }
    let body = json!({"name": name, "script": script, "kubeletVersion": kubelet_version});
    let tmp = d.join(format!(".{name}.tmp"));
    let file = d.join(format!("{name}.json"));
    std::fs::write(&tmp, body.to_string()).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, &file).map_err(|e| Error::io(&file, e))?;
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(t) = std::fs::read_to_string(d.join(format!("{name}.started"))) {
            return Ok(t);
        }
        if let Ok(t) = std::fs::read_to_string(d.join(format!("{name}.failed"))) {
            return Err(Error::Start(t));
        }
        if Instant::now() > deadline {
            return Err(Error::Start(format!(
                "no sandbox runner took host {name} in {WAIT:?}: is `capi-testbed up --real` running in {}?",
                dir.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The runner's side: starts the agent of every request in the inbox, once.
pub fn serve(tb: &Testbed, dir: &Path, agents: &mut Vec<HostAgent>) {
    let d = inbox(dir);
    let Ok(rd) = std::fs::read_dir(&d) else {
        return;
    };
    for e in rd.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let _ = std::fs::remove_file(&path);
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let name = v["name"].as_str().unwrap_or_default().to_string();
        let script = v["script"].as_str().unwrap_or_default();
        let image = super::HostImage {
            kubelet_version: v["kubeletVersion"].as_str().map(String::from),
            missing_module: None,
        };
        if name.is_empty() {
            continue;
        }
        let answer = if agents.iter().any(|a| a.host == name) {
            Err(format!("host {name} already runs an agent in this sandbox"))
        } else {
            let ip = super::next_ip();
            HostAgent::start_script(tb, &name, ip, script, super::Kubelet::Joins, &image)
                .map(|a| {
                    let msg = format!(
                        "host {name} ({ip}): byoh-hostagent started (its log: {})",
                        a.log.display()
                    );
                    agents.push(a);
                    msg
                })
                .map_err(|e| e.to_string())
        };
        let (end, msg) = match answer {
            Ok(m) => ("started", m),
            Err(m) => ("failed", m),
        };
        tracing::info!("{msg}");
        let _ = std::fs::write(d.join(format!("{name}.{end}")), msg);
    }
}
