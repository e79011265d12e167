//! The flags of a verb that lists objects by label (`list`, `machines`, `hosts`): `-l` and
//! kubectl's connection and output flags. Each verb says which labels `-l` selects over, in its
//! own help: `#[command(mut_arg("selector", |a| a.help("Label selector over ...")))]`.

use clap::Args;
use cli::{KubeFlags, OutputFlags};

/// `-l SELECTOR`, then kubectl's connection and output flags.
#[derive(Args, Clone, Debug)]
pub struct ListFlags {
    #[arg(short = 'l', long, value_name = "SELECTOR", value_parser = cli::label_selector)]
    pub selector: Option<String>,
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

impl ListFlags {
    /// The `-l` selector, unless it is empty.
    pub fn selector(&self) -> Option<&str> {
        self.selector.as_deref().filter(|s| !s.trim().is_empty())
    }
}
