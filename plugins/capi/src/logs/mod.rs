//! `kubectl capi logs TARGET`: the Events about a Cluster, Machine or ByoHost and what relates to
//! it, and the controllers' log lines that name any of those objects, in time order; `-f` keeps
//! reading. What relates to what, the matching, the merge and the bounds are
//! `kcore::plan::logs`'s; `read` reads.

mod read;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use cli::{KubeFlags, OutputFlags, OutputFormat};
use jiff::Timestamp;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kcore::plan::logs::{self as plan, Entry, EntryKind, Matcher, Related, SeenEvents};

use read::{Controller, Kinds, Window};

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "Examples:\n  kubectl capi logs demo\n  kubectl capi logs machine/demo-md-0-x7k2p-rk8ww --since 10m\n  kubectl capi logs host/host-07 -f\n  kubectl capi logs demo -o json"
)]
pub struct Args {
    /// What to explain: cluster/NAME, machine/NAME, host/NAME, or a bare NAME (tried as a Cluster, a Machine, then a ByoHost)
    #[arg(value_name = "TARGET")]
    pub target: String,
    /// Only Events and log lines newer than this (at most 168h)
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = parse_since)]
    pub since: Duration,
    /// Keep printing new Events and log lines as they come (every 2 s; Ctrl-C stops)
    #[arg(short = 'f', long)]
    pub follow: bool,
    #[command(flatten)]
    pub output: OutputFlags,
    #[command(flatten)]
    pub kube: KubeFlags,
}

fn parse_since(s: &str) -> Result<Duration, String> {
    let d = kcore::text::parse_duration(s)?;
    plan::check_since(d).map_err(|e| match e.hint() {
        Some(h) => format!("{e} ({h})"),
        None => e.to_string(),
    })
}

/// How often `--follow` reads again.
const POLL: Duration = Duration::from_secs(2);
/// How often `--follow` reads again what relates to the target (new machines, hosts claimed).
const REFRESH: Duration = Duration::from_secs(20);

/// How entries are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `TIME SOURCE MESSAGE` lines, with a header unless `--no-headers`.
    Lines { headers: bool },
    /// One JSON object per line.
    Json,
    /// One YAML document per entry.
    Yaml,
}

fn mode(o: &OutputFlags) -> Result<Mode, Error> {
    if o.show_labels {
        return Err(Error::usage(
            "--show-labels is not supported here; it applies to lists of objects",
        ));
    }
    match &o.output {
        OutputFormat::Table | OutputFormat::Wide => Ok(Mode::Lines {
            headers: !o.no_headers,
        }),
        OutputFormat::Json => Ok(Mode::Json),
        OutputFormat::Yaml => Ok(Mode::Yaml),
        _ => Err(Error::Usage {
            message: "logs prints -o table, json or yaml".into(),
            hint: Some("-o json prints one object per line, for jq".into()),
        }),
    }
}

/// The width of the SOURCE column: the longest controller's name.
const SOURCE_WIDTH: usize = 21;

fn human(e: &Entry) -> String {
    let message = match e.kind {
        EntryKind::Event => {
            let count = e.count.filter(|n| *n > 1).map(|n| format!(" (x{n})"));
            format!(
                "{} {} {}: {}{}",
                e.event_type.as_deref().unwrap_or("Normal"),
                e.reason.as_deref().unwrap_or_default(),
                e.object.as_deref().unwrap_or_default(),
                e.message,
                count.unwrap_or_default()
            )
        }
        EntryKind::Log => e.message.clone(),
    };
    let cut = if e.truncated { " [cut]" } else { "" };
    format!(
        "{:<24} {:<SOURCE_WIDTH$} {message}{cut}",
        format!("{:.3}", e.at),
        e.source
    )
}

/// Prints entries as they come: the header before the first line.
struct Out {
    mode: Mode,
    printed: u64,
}

impl Out {
    fn print(&mut self, entries: &[Entry]) -> Result<(), Error> {
        for e in entries {
            match self.mode {
                Mode::Lines { headers } => {
                    if self.printed == 0 && headers {
                        kclient::render::line(&format!(
                            "{:<24} {:<SOURCE_WIDTH$} MESSAGE",
                            "TIME", "SOURCE"
                        ));
                    }
                    kclient::render::line(&human(e));
                }
                Mode::Json => kclient::render::line(&serde_json::to_string(e).map_err(|e| {
                    Error::other(format!("cannot serialise the result as JSON: {e}"))
                })?),
                Mode::Yaml => {
                    let y = kclient::render::to_yaml(e)?;
                    kclient::render::raw(format!("---\n{y}").as_bytes());
                }
            }
            self.printed = self.printed.saturating_add(1);
        }
        Ok(())
    }
}

/// Warnings printed once each: a controller that cannot be read says so once, however long
/// `--follow` runs.
#[derive(Default)]
struct Warned(HashSet<String>);

impl Warned {
    fn warn(&mut self, text: String) {
        if self.0.insert(text.clone()) {
            kclient::render::warn(&text);
        }
    }
}

/// What `logs` keeps between reads.
struct Reader {
    conn: cli::Conn,
    kinds: Kinds,
    controllers: Vec<Controller>,
    cursors: HashMap<(String, String, String), plan::Cursor>,
    seen: SeenEvents,
    warned: Warned,
    window: Window,
}

impl Reader {
    /// The Events and controller lines about `related` not read before, in time order.
    async fn read(&mut self, related: &Related) -> Vec<Entry> {
        let matcher = Matcher::new(related.names());
        let (conn, window, controllers) = (&self.conn, self.window, &self.controllers);
        let events = read::events(conn, related, window.start, &mut self.seen);
        let mut cursors = std::mem::take(&mut self.cursors);
        let logs = async {
            let mut out = Vec::new();
            // One controller after the other, each reading its containers at once: the
            // cursors are one map.
            for c in controllers {
                let (lines, why) =
                    read::controller_lines(conn, c, &matcher, window, &mut cursors).await;
                out.push((c, lines, why));
            }
            out
        };
        let ((events, event_warnings), logs) = tokio::join!(events, logs);
        self.cursors = cursors;
        for w in event_warnings {
            self.warned.warn(w);
        }
        let mut groups = vec![events];
        for (c, lines, why) in logs {
            if let Some(why) = why {
                self.warned.warn(format!(
                    "{} ({}): {why}; its lines are left out",
                    c.component.id,
                    c.place()
                ));
            }
            groups.push(lines);
        }
        plan::in_time_order(groups)
    }
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let mode = mode(&args.output)?;
    let target = plan::parse_target(&args.target)?;
    let conn = args.kube.connect().await?;
    if conn.all_namespaces {
        return Err(Error::Usage {
            message: "logs reads one Cluster, Machine or ByoHost, not all namespaces".into(),
            hint: Some("name its namespace with -n".into()),
        });
    }
    let apis = ServerApis::discover(&conn).await?;
    let kinds = Kinds::of(&apis)?;
    let namespace = conn.namespace.clone();
    let (kind, obj) = read::find_target(&conn, &kinds, &target, &namespace).await?;
    let since_seconds = i64::try_from(args.since.as_secs()).unwrap_or(i64::MAX);
    let start = Timestamp::now()
        .checked_sub(jiff::SignedDuration::from_secs(since_seconds))
        .map_err(|e| Error::other(format!("--since: {e}")))?;
    let (related, controllers) = tokio::join!(
        read::related(&conn, &kinds, kind, &obj),
        read::controllers(&conn)
    );
    let mut related = related?;
    let mut reader = Reader {
        conn,
        kinds,
        controllers,
        cursors: HashMap::new(),
        seen: SeenEvents::default(),
        warned: Warned::default(),
        window: Window {
            start,
            since_seconds,
        },
    };
    let mut out = Out { mode, printed: 0 };
    let what = format!("{} {namespace}/{}", kind.kind(), kcore::json::name(&obj));
    let first = reader.read(&related).await;
    out.print(&first)?;
    if !args.follow {
        if out.printed == 0 && matches!(mode, Mode::Lines { .. }) {
            kclient::render::info(&format!(
                "No Events or log lines about {what} or what relates to it in the last {}.",
                kcore::text::human_duration(args.since)
            ));
        }
        return Ok(());
    }
    let typed = plan::Target {
        kind: Some(kind),
        name: kcore::json::name(&obj).to_string(),
    };
    let mut refreshed = Instant::now();
    loop {
        tokio::time::sleep(POLL).await;
        if refreshed.elapsed() >= REFRESH {
            refreshed = Instant::now();
            // The target again (a Machine gets its host and Node), then what relates to it; a
            // target deleted meanwhile keeps what related to it last.
            let again =
                match read::find_target(&reader.conn, &reader.kinds, &typed, &namespace).await {
                    Ok((_, obj)) => read::related(&reader.conn, &reader.kinds, kind, &obj).await,
                    Err(e) => Err(e),
                };
            match again {
                Ok(r) => related = r,
                Err(e) => reader
                    .warned
                    .warn(format!("reading {what} and what relates to it again: {e}")),
            }
        }
        let entries = reader.read(&related).await;
        out.print(&entries)?;
    }
}
