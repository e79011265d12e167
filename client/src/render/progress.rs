//! Progress on stderr (a spinner or bar on a terminal, plain lines otherwise) and the one
//! polling wait every `--wait` uses ([`Wait`], [`wait_until`]).
//!
//! The wait rides out an API server that goes away and comes back: connection errors, TLS
//! handshakes cut short, request timeouts, 429 and 5xx answers (a starting kube-apiserver
//! answers 503 until all its paths are installed: `pkg/util/notfoundhandler` in
//! `k8s.io/apiserver` v0.36.3), and the 401/403 a restarted server gives while its
//! authenticators and RBAC warm up. It polls again with exponential back-off ([`Backoff`]),
//! says once that the server is unreachable and once that it is back, and fails only at its
//! own deadline, naming what it waited for and the last status it saw.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use super::info;
use crate::error::Error;
use kcore::text::human_duration;

/// A spinner or bar on stderr when it is a terminal; plain lines (printed when the message
/// changes) otherwise.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    last: String,
    started: Instant,
    /// A terminal spinner not shown yet: [`Progress::line`] starts it with its first message.
    lazy: bool,
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
            if !msg.is_empty() {
                info(msg);
            }
            None
        };
        Progress::shown(bar, msg)
    }
    /// A progress already showing `msg` (on `bar`, or as a plain line).
    fn shown(bar: Option<indicatif::ProgressBar>, msg: &str) -> Progress {
        Progress {
            bar,
            last: msg.to_string(),
            started: Instant::now(),
            lazy: false,
        }
    }
    /// One updating line on a terminal that says nothing until its first message; without a
    /// terminal, a line per message change.
    pub fn line() -> Progress {
        Progress {
            bar: None,
            last: String::new(),
            started: Instant::now(),
            lazy: Progress::tty(),
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
        Progress::shown(bar, msg)
    }
    /// Changes the message; without a terminal, prints it once per change.
    pub fn set_message(&mut self, msg: &str) {
        if msg == self.last {
            return;
        }
        self.last = msg.to_string();
        if std::mem::take(&mut self.lazy) {
            let b = Progress::spinner_on(msg, true);
            self.bar = b.bar;
            return;
        }
        match &self.bar {
            Some(b) => b.set_message(msg.to_string()),
            None => info(msg),
        }
    }
    /// A line of its own on stderr, above the spinner on a terminal (which keeps its message).
    pub fn note(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.suspend(|| info(msg)),
            None => info(msg),
        }
    }
    /// A line on stdout (a result), with the spinner out of its way on a terminal.
    pub fn out(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.suspend(|| super::line(msg)),
            None => super::line(msg),
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
        self.clear_ref();
    }
    fn clear_ref(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// One poll of [`wait_until`].
pub enum Poll<T> {
    /// Done, with a result.
    Ready(T),
    /// Not yet; the message says where things stand (empty: nothing new to say).
    Pending(String),
}

/// Exponential back-off between polls while the API server does not answer: from
/// [`Backoff::MIN`], doubling, at most [`Backoff::MAX`].
#[derive(Clone, Debug)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: Backoff::MIN }
    }
}

impl Backoff {
    /// The first pause after a failed poll.
    pub const MIN: Duration = Duration::from_millis(200);
    /// The longest pause: a server that comes back is seen within this.
    pub const MAX: Duration = Duration::from_secs(5);
    /// The pause before the next attempt; each call doubles the one after it, up to the cap.
    pub fn next_pause(&mut self) -> Duration {
        let now = self.next;
        self.next = now.saturating_mul(2).min(Backoff::MAX);
        now
    }
    /// Back to the shortest pause (the server answered).
    pub fn reset(&mut self) {
        self.next = Backoff::MIN;
    }
}

/// What a failed poll means to a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The server is not there: refused, reset, cut TLS handshakes, requests timing out.
    Unreachable,
    /// The server is there but cannot answer yet: 429, 5xx, and 401/403 while it warms up.
    NotReady,
    /// An answer: the wait ends with this error.
    Fatal,
}

/// Classifies a failed poll. `answered` says whether this wait's server answered a poll (or
/// was seen going away) before: only then are 401 and 403 taken for a server warming up after
/// a restart; on the first poll they are the caller's real permissions and end the wait.
pub fn classify(e: &Error, answered: bool) -> Fault {
    match e {
        Error::Unreachable { .. } | Error::Timeout { .. } => Fault::Unreachable,
        // A handshake cut short is a server going down or coming up; a certificate the client
        // does not trust is an answer.
        Error::Tls { reason, .. } if !reason.to_lowercase().contains("certificate") => {
            Fault::Unreachable
        }
        Error::Api { code, .. } if *code == 429 || *code >= 500 => Fault::NotReady,
        Error::Unauthorized { .. } | Error::Forbidden { .. } if answered => Fault::NotReady,
        _ => Fault::Fatal,
    }
}

/// A wait: polls until ready, showing progress, riding out API server outages until its
/// deadline.
///
/// ```no_run
/// # use std::time::Duration;
/// # use kclient::render::{Poll, Wait};
/// # async fn demo(timeout: Duration) -> Result<(), kclient::error::Error> {
/// Wait::new("waiting for cluster x", timeout)
///     .interval(Duration::from_millis(500))
///     .until(|| async { Ok(Poll::Ready(())) })
///     .await
/// # }
/// ```
pub struct Wait<'p> {
    what: String,
    timeout: Duration,
    interval: Duration,
    progress: Option<&'p mut Progress>,
}

/// The wait's view of the API server.
#[derive(Default)]
struct Server {
    /// A poll got an answer, or the server was seen going away, during this wait.
    answered: bool,
    /// Since when the server has not answered, if it has not.
    down_since: Option<Instant>,
    backoff: Backoff,
}

impl Server {
    /// A poll got an answer; says so once when the server was away.
    fn answered(&mut self, progress: &Progress) {
        if let Some(since) = self.down_since.take() {
            progress.note(&format!(
                "the API server answers again (after {}); still waiting",
                human_duration(since.elapsed())
            ));
        }
        self.answered = true;
        self.backoff.reset();
    }
    /// A poll failed with `fault`; says so once per outage. The pause before the next poll.
    fn failed(&mut self, e: &Error, fault: Fault, progress: &Progress, left: String) -> Duration {
        if self.down_since.is_none() {
            let how = match fault {
                Fault::NotReady => "the API server is not ready",
                _ => "the API server is unreachable",
            };
            progress.note(&format!("{how} ({e}); still waiting, up to {left} more"));
            self.down_since = Some(Instant::now());
        }
        self.answered = true;
        self.backoff.next_pause()
    }
}

impl<'p> Wait<'p> {
    /// A wait of at most `timeout`, polling every second, with a spinner saying `what`.
    pub fn new(what: impl Into<String>, timeout: Duration) -> Wait<'p> {
        Wait {
            what: what.into(),
            timeout,
            interval: Duration::from_secs(1),
            progress: None,
        }
    }
    /// The pause between polls that answered.
    pub fn interval(mut self, interval: Duration) -> Wait<'p> {
        self.interval = interval;
        self
    }
    /// Shows the polls' messages, as they are, on the caller's progress (which the caller
    /// finishes), instead of a spinner of its own that prefixes them with `what`.
    pub fn on(mut self, progress: &'p mut Progress) -> Wait<'p> {
        self.progress = Some(progress);
        self
    }

    /// Polls until `poll` is ready. A poll error ends the wait at once unless [`classify`]
    /// finds it transient; then the wait goes on until the deadline, which fails with
    /// [`Error::Timeout`] naming `what` and the last status.
    pub async fn until<T, F, Fut>(self, mut poll: F) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Poll<T>, Error>>,
    {
        let Wait {
            what,
            timeout,
            interval,
            progress,
        } = self;
        let prefixed = progress.is_none();
        let mut own = None;
        let progress: &mut Progress = match progress {
            Some(p) => p,
            None => own.insert(Progress::spinner(&what)),
        };
        let deadline = Instant::now().checked_add(timeout);
        let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let mut server = Server::default();
        let mut last = String::new();
        loop {
            // A request that hangs (a server gone without a reset) cannot outlast the deadline.
            let bound = left().map(|l| l.max(Duration::from_secs(1)));
            let res = match bound {
                Some(b) => tokio::time::timeout(b, poll())
                    .await
                    .unwrap_or_else(|_| Err(stalled(&what))),
                None => poll().await,
            };
            let pause = match res {
                Ok(Poll::Ready(v)) => {
                    server.answered(progress);
                    if prefixed {
                        progress.clear_ref();
                    }
                    return Ok(v);
                }
                Ok(Poll::Pending(msg)) => {
                    server.answered(progress);
                    if !msg.is_empty() {
                        if prefixed {
                            progress.set_message(&format!("{what}: {msg}"));
                        } else {
                            progress.set_message(&msg);
                        }
                        last = msg;
                    }
                    interval
                }
                Err(e) => match classify(&e, server.answered) {
                    Fault::Fatal => {
                        if prefixed {
                            progress.clear_ref();
                        }
                        return Err(e);
                    }
                    fault => {
                        let more = left()
                            .map(|l| human_duration(whole_seconds(l)))
                            .unwrap_or_else(|| "ever".into());
                        last = format!("the API server did not answer ({e})");
                        server.failed(&e, fault, progress, more)
                    }
                },
            };
            let remaining = left();
            if remaining.is_some_and(|l| l.is_zero()) {
                if prefixed {
                    progress.clear_ref();
                }
                return Err(timed_out(&what, &last, timeout));
            }
            let pause = remaining.map_or(pause, |l| pause.min(l));
            tokio::time::sleep(pause).await;
        }
    }
}

/// `l` to the nearest second (a countdown in milliseconds reads as noise), below one second as
/// it is.
fn whole_seconds(l: Duration) -> Duration {
    if l < Duration::from_secs(1) {
        l
    } else {
        Duration::from_secs(l.as_secs_f64().round() as u64)
    }
}

/// The wait's end at its deadline: what it waited for and the last status it saw.
fn timed_out(what: &str, last: &str, timeout: Duration) -> Error {
    let what = if last.is_empty() {
        what.to_string()
    } else {
        format!("{what} (last seen: {last})")
    };
    Error::Timeout {
        what: format!("while {what}"),
        after: timeout,
    }
}

/// A poll that did not come back before the deadline.
fn stalled(what: &str) -> Error {
    Error::Timeout {
        what: format!("for the API server to answer while {what}"),
        after: Duration::ZERO,
    }
}

/// Polls every `interval` until `poll` is ready, showing progress, and fails with
/// [`Error::Timeout`] after `timeout`; API server outages are ridden out as [`Wait`] does.
pub async fn wait_until<T, F, Fut>(
    what: &str,
    timeout: Duration,
    interval: Duration,
    poll: F,
) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Poll<T>, Error>>,
{
    Wait::new(what, timeout)
        .interval(interval)
        .until(poll)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unreachable() -> Error {
        Error::Unreachable {
            context: "c".into(),
            server: "https://127.0.0.1:1".into(),
            reason: "connection refused".into(),
        }
    }

    fn forbidden() -> Error {
        Error::Forbidden {
            user: "you".into(),
            verb: "get".into(),
            resource: "clusters.cluster.x-k8s.io".into(),
            namespace: None,
        }
    }

    #[test]
    fn back_off_doubles_from_200ms_to_a_5s_cap_and_resets() {
        let mut b = Backoff::default();
        let pauses: Vec<u128> = (0..8).map(|_| b.next_pause().as_millis()).collect();
        assert_eq!(pauses, [200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
        b.reset();
        assert_eq!(b.next_pause(), Duration::from_millis(200));
    }

    #[test]
    fn outages_and_warm_up_answers_are_transient_real_answers_are_not() {
        let api = |code: u16| Error::Api {
            code,
            reason: "x".into(),
            message: "m".into(),
        };
        let tls = |reason: &str| Error::Tls {
            context: "c".into(),
            server: "s".into(),
            reason: reason.into(),
        };
        assert_eq!(classify(&unreachable(), false), Fault::Unreachable);
        assert_eq!(
            classify(
                &Error::Timeout {
                    what: "x".into(),
                    after: Duration::ZERO
                },
                false
            ),
            Fault::Unreachable
        );
        assert_eq!(
            classify(&tls("tls handshake eof"), false),
            Fault::Unreachable
        );
        assert_eq!(
            classify(&tls("invalid peer certificate: UnknownIssuer"), true),
            Fault::Fatal
        );
        for code in [429, 500, 503, 504] {
            assert_eq!(classify(&api(code), false), Fault::NotReady, "{code}");
        }
        assert_eq!(classify(&api(422), true), Fault::Fatal);
        // 401/403 only once the server answered in this wait: a restart's warm-up.
        let unauthorized = Error::Unauthorized {
            context: "c".into(),
            server: "s".into(),
        };
        assert_eq!(classify(&forbidden(), false), Fault::Fatal);
        assert_eq!(classify(&unauthorized, false), Fault::Fatal);
        assert_eq!(classify(&forbidden(), true), Fault::NotReady);
        assert_eq!(classify(&unauthorized, true), Fault::NotReady);
        assert_eq!(classify(&Error::other("x"), true), Fault::Fatal);
        assert_eq!(classify(&Error::usage("x"), true), Fault::Fatal);
    }

    #[tokio::test]
    async fn a_wait_rides_out_an_outage_and_warm_up_then_finishes() {
        // Pending, then the server goes away, comes back forbidden while RBAC warms up, then
        // answers: the wait finishes.
        let script = std::cell::RefCell::new(vec![
            Ok(Poll::Pending("one".to_string())),
            Err(unreachable()),
            Err(unreachable()),
            Err(forbidden()),
            Ok(Poll::Pending("two".to_string())),
            Ok(Poll::Ready(7)),
        ]);
        script.borrow_mut().reverse();
        let r = wait_until(
            "waiting for x",
            Duration::from_secs(30),
            Duration::from_millis(1),
            || async { script.borrow_mut().pop().unwrap_or(Ok(Poll::Ready(0))) },
        )
        .await;
        assert_eq!(r.unwrap(), 7);
        assert!(script.borrow().is_empty());
    }

    #[tokio::test]
    async fn a_first_forbidden_ends_the_wait_at_once() {
        let started = Instant::now();
        let r: Result<(), Error> = wait_until(
            "waiting for x",
            Duration::from_secs(30),
            Duration::from_millis(1),
            || async { Err(forbidden()) },
        )
        .await;
        assert!(matches!(r, Err(Error::Forbidden { .. })), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn an_outage_fails_only_at_the_deadline_with_the_last_status() {
        let started = Instant::now();
        let mut n = 0;
        let r: Result<(), Error> = wait_until(
            "waiting for x",
            Duration::from_millis(900),
            Duration::from_millis(1),
            || {
                n += 1;
                let k = n;
                async move {
                    if k == 1 {
                        Ok(Poll::Pending("step one".into()))
                    } else {
                        Err(unreachable())
                    }
                }
            },
        )
        .await;
        let e = r.unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(900));
        // 200 + 400 ms of back-off, then the deadline cuts the 800 ms pause short.
        assert!(n <= 5, "polled {n} times: the back-off did not grow");
        assert!(
            e.to_string().starts_with(
                "timed out after 900ms while waiting for x (last seen: the API server did not answer (cannot reach"
            ),
            "{e}"
        );
    }
}
