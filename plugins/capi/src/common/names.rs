//! How objects are named: a cluster name checked before the server is asked, and objects shown
//! as kubectl prints them.

use kclient::error::Error;

pub use kcore::json::name as name_of;

/// Validates a cluster name before asking the server (one clear line for typos like `-x`).
pub fn check_name(name: &str) -> Result<(), Error> {
    Ok(kcore::names::check_object_name("cluster", name)?)
}

/// `kind.group/name`, as kubectl prints objects.
pub fn display_name(kind: &str, api_version: &str, name: &str) -> String {
    let (group, _) = kcore::groups::split_api_version(api_version);
    kclient::render::object_name(kind, group, name)
}
