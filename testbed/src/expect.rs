//! Checks of a command's refusal shared by the plugins' bad-input tables: the exit code, one
//! `error: …` line saying what is wrong, one `hint: …` line, nothing on stdout, no panic.

use std::process::Output;

/// `--dry-run` with no mode, after each of `apiserver` of the plugin `bin`, is refused as kubectl
/// refuses it (exit 2, the possible values in the hint), before any kubeconfig is read.
pub fn bare_dry_run_refused(bin: &str, verbs: &[&[&str]]) {
    for verb in verbs {
        let o = std::process::Command::new(bin)
            .args(*verb)
            .arg("--dry-run")
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .env("NO_COLOR", "1")
            .output()
            .expect("run the plugin");
        let what = format!("{bin} {} --dry-run", verb.join(" "));
        let says = "a value is required for '--dry-run <MODE>' but none was supplied";
        one_line_refusal(&o, 2, says, &what).unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        let hint = "hint: possible values: none, client, server";
        assert!(stderr.contains(hint), "{what}: {stderr}");
    }
}

/// `Ok` when `o` is a refusal with exit code `code` whose error line contains `says`; else
/// why not, with the command (`what`) and its stderr.
pub fn one_line_refusal(o: &Output, code: i32, says: &str, what: &str) -> Result<(), String> {
    let stderr = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    let fail = |why: &str| Err(format!("{why}: {what}\n{stderr}"));
    if stderr.contains("panicked") {
        return fail("panic");
    }
    if o.status.code() != Some(code) {
        return fail(&format!("exit code {:?}, not {code}", o.status.code()));
    }
    if lines.len() != 2 || !lines[0].starts_with("error: ") || !lines[1].starts_with("hint: ") {
        return fail("not one error line and one hint");
    }
    if !lines[0].contains(says) {
        return fail(&format!("the error does not say {says:?}"));
    }
    if !o.stdout.is_empty() {
        return fail("stdout is not empty");
    }
    Ok(())
}

/// What a bounded run feeds the command on stdin.
#[derive(Clone, Copy, Debug)]
pub enum Stdin {
    /// `/dev/null`.
    Null,
    /// Zero bytes, written until the command stops reading (`yes`-like).
    Endless,
    /// A pipe held open that never sends a byte (a producer that hangs).
    Silent,
    /// This text, then the end.
    Text(&'static str),
}

/// Runs `cmd` with `stdin`, and gives up (killing it) after `limit`: a command that hangs
/// fails the test instead of hanging it. Returns its output, or why not.
pub fn run_bounded(
    cmd: &mut std::process::Command,
    stdin: Stdin,
    limit: std::time::Duration,
) -> Result<Output, String> {
    use std::io::{Read, Write};
    use std::process::Stdio;
    let mut child = cmd
        .stdin(match stdin {
            Stdin::Null => Stdio::null(),
            _ => Stdio::piped(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let mut input = child.stdin.take();
    // The feeder hands the pipe back only for Silent, so it stays open (and silent) until the
    // command is done; otherwise it is closed after writing, which ends the command's stdin.
    let feeder = std::thread::spawn(move || {
        match (stdin, input.as_mut()) {
            (Stdin::Endless, Some(w)) => {
                let zeros = vec![0u8; 64 * 1024];
                while w.write_all(&zeros).is_ok() {}
            }
            (Stdin::Text(t), Some(w)) => {
                let _ = w.write_all(t.as_bytes());
            }
            (Stdin::Silent, _) => return input,
            _ => {}
        }
        None
    });
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut out);
            }
            out
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                let err = stderr.join().unwrap_or_default();
                return Err(format!(
                    "still running after {limit:?}, killed: {cmd:?}\n{}",
                    String::from_utf8_lossy(&err)
                ));
            }
            Err(e) => return Err(format!("cannot wait for {cmd:?}: {e}")),
        }
    };
    drop(feeder.join());
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// `Ok` when `program args` (with `env`) logs on stderr without a colour code (`ESC [`), both
/// when stderr is redirected (a pipe, as `make demo > file`) and on a terminal with `NO_COLOR`
/// set (run under `script`, util-linux, for a pseudo-terminal). `logs` is a piece of text its
/// log must show, so a run that logged nothing cannot pass.
pub fn logs_without_colour(
    program: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
    logs: &str,
) -> Result<(), String> {
    let limit = std::time::Duration::from_secs(60);
    let what = format!("{} {}", program.display(), args.join(" "));
    let check = |how: &str, text: &[u8]| {
        let text = String::from_utf8_lossy(text);
        if !text.contains(logs) {
            return Err(format!("{how}: {what} did not log {logs:?}:\n{text}"));
        }
        if text.contains("\x1b[") {
            return Err(format!("{how}: colour codes from {what}:\n{text:?}"));
        }
        Ok(())
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .env_remove("NO_COLOR")
        .envs(env.iter().copied());
    let piped = run_bounded(&mut cmd, Stdin::Null, limit)?;
    check("stderr to a pipe", &piped.stderr)?;

    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let line: Vec<String> = std::iter::once(program.display().to_string())
        .chain(args.iter().map(|a| a.to_string()))
        .map(|a| quote(&a))
        .collect();
    let mut cmd = std::process::Command::new("script");
    cmd.args(["-qec", &line.join(" "), "/dev/null"])
        .env("NO_COLOR", "1")
        .envs(env.iter().copied());
    let tty = run_bounded(&mut cmd, Stdin::Null, limit)?;
    check("a terminal with NO_COLOR=1", &tty.stdout)
}

/// Writes `dir/unreachable-kubeconfig`: a context whose API server (`https://127.0.0.1:1`)
/// refuses connections, so a command fails fast after logging its attempt.
pub fn unreachable_kubeconfig(dir: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
    let path = dir.join("unreachable-kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n",
    )?;
    Ok(path)
}
