//! Progress on stderr (a spinner or bar on a terminal, plain lines otherwise) and the one
//! polling wait every `--wait` uses.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use super::info;
use crate::error::Error;

/// A spinner or bar on stderr when it is a terminal; plain lines (printed when the message
/// changes) otherwise.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    last: String,
    started: Instant,
}

impl Progress {
    fn tty() -> bool {
        std::io::stderr().is_terminal()
    }
    /// A spinner with a message.
    pub fn spinner(msg: &str) -> Progress {
        Progress::spinner_on(msg, Progress::tty())
    }
    /// A spinner forced on or off (for tests and `--quiet`-like flags).
    pub fn spinner_on(msg: &str, tty: bool) -> Progress {
        let bar = if tty {
            let b = indicatif::ProgressBar::new_spinner();
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            {
                b.set_style(style);
            }
            b.enable_steady_tick(Duration::from_millis(100));
            b.set_message(msg.to_string());
            Some(b)
        } else {
            info(msg);
            None
        };
        Progress {
            bar,
            last: msg.to_string(),
            started: Instant::now(),
        }
    }
    /// A bar of `total` steps with a message.
    pub fn bar(total: u64, msg: &str) -> Progress {
        let bar = if Progress::tty() {
            let b = indicatif::ProgressBar::new(total);
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} ({elapsed})")
            {
                b.set_style(style);
            }
            b.set_message(msg.to_string());
            Some(b)
        } else {
            info(&format!("{msg} (0/{total})"));
            None
        };
        Progress {
            bar,
            last: msg.to_string(),
            started: Instant::now(),
        }
    }
    /// Changes the message; without a terminal, prints it once per change.
    pub fn set_message(&mut self, msg: &str) {
        if msg == self.last {
            return;
        }
        self.last = msg.to_string();
        match &self.bar {
            Some(b) => b.set_message(msg.to_string()),
            None => info(msg),
        }
    }
    /// Sets the bar's position.
    pub fn set_position(&mut self, pos: u64) {
        if let Some(b) = &self.bar {
            b.set_position(pos);
        }
    }
    /// Time since the progress started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
    /// Ends with a final message (kept on screen).
    pub fn finish(self, msg: &str) {
        match &self.bar {
            Some(b) => b.finish_with_message(msg.to_string()),
            None => info(msg),
        }
    }
    /// Removes the spinner without a message (the caller reports the outcome).
    pub fn clear(self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// One poll of [`wait_until`].
pub enum Poll<T> {
    /// Done, with a result.
    Ready(T),
    /// Not yet; the message says where things stand.
    Pending(String),
}

/// Polls every `interval` until `poll` is ready, showing progress, and fails with
/// [`Error::Timeout`] after `timeout`.
pub async fn wait_until<T, F, Fut>(
    what: &str,
    timeout: Duration,
    interval: Duration,
    mut poll: F,
) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Poll<T>, Error>>,
{
    let mut progress = Progress::spinner(what);
    let deadline = Instant::now() + timeout;
    let mut last: String;
    loop {
        match poll().await {
            Ok(Poll::Ready(v)) => {
                progress.clear();
                return Ok(v);
            }
            Ok(Poll::Pending(msg)) => {
                if !msg.is_empty() {
                    progress.set_message(&format!("{what}: {msg}"));
                }
                last = msg;
            }
            // The API server restarting (or a request timing out) is weather, not an answer:
            // keep polling until the deadline, saying so.
            Err(e) if transient(&e) && Instant::now() < deadline => {
                last = format!("the API server did not answer ({e})");
                progress.set_message(&format!("{what}: {last}"));
            }
            Err(e) => {
                progress.clear();
                return Err(e);
            }
        }
        if Instant::now() >= deadline {
            progress.clear();
            let what = if last.is_empty() {
                what.to_string()
            } else {
                format!("{what} (last seen: {last})")
            };
            return Err(Error::Timeout {
                what: format!("while {what}"),
                after: timeout,
            });
        }
        tokio::time::sleep(interval).await;
    }
}

/// An error a wait rides out: the server unreachable (restarting), a request timing out, or the
/// server saying it cannot answer now (429, 5xx while it starts).
fn transient(e: &Error) -> bool {
    match e {
        Error::Unreachable { .. } | Error::Timeout { .. } => true,
        Error::Api { code, .. } => *code == 429 || *code >= 500,
        _ => false,
    }
}
