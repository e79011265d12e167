//! Checks of a command's refusal shared by the plugins' bad-input tables: the exit code, one
//! `error: …` line saying what is wrong, one `hint: …` line, nothing on stdout, no panic.

use std::process::Output;

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
