//! What the verbs share. Nothing here is a verb, and a verb module uses only these modules and
//! its own (never another verb's). Each knows one thing:
//!
//! - `clusterctl_config`: clusterctl's config file: variables and release-asset URLs;
//! - `cluster`: one Cluster on the management cluster (`ClusterHandle`), its parts, and writes
//!   to them;
//! - `cluster_parts`: what the scale and upgrade plans read of a cluster, fetched once;
//! - `cluster_upgrade`: a cluster's ClusterUpgrade: where the API is served, its spec and status;
//! - `host_pool`: the BYOH host pool: hosts, what claims them, the free ones, one host;
//! - `host_removal`: what goes when a host leaves for good (its ByoHost and what BYOH issued);
//! - `lists`: LISTs that cost little (absent kinds, pruned and narrowly parsed objects);
//! - `list_flags`: the flags of a verb that lists objects by label (`-l`, connection, output);
//! - `findings`: a plan's findings on the terminal;
//! - `names`: a cluster name checked, objects named as kubectl prints them;
//! - `cells`: table cells as kubectl prints them (`<none>`, ages);
//! - `time`: now, an object's age, a restart's rollout time;
//! - `writes`: the field manager every write carries.

pub mod cells;
pub mod cluster;
pub mod cluster_parts;
pub mod cluster_upgrade;
pub mod clusterctl_config;
pub mod findings;
pub mod host_pool;
pub mod host_removal;
pub mod list_flags;
pub mod lists;
pub mod names;
pub mod time;
pub mod workload_kubeconfig;
pub mod writes;
