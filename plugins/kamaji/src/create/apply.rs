//! `create`'s apply: a server dry run of every object first, then the objects in order (the
//! Cluster owning the ones after it), the deferred OpenStackCluster once Kamaji announces the
//! endpoint, and the printing of what was applied.

use cli::{DryRun, OutputFormat};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render;
use kcore::fields::object_json;
use kcore::kamaji::create::{Built, CreateSpec, fill_openstack_endpoint};

use super::wait::wait_endpoint;
use super::{Args, print_objects};
use crate::common::writes;

/// `--dry-run=client`: prints every object, the deferred OpenStackCluster included.
pub(super) fn print_client_dry_run(
    args: &Args,
    spec: &CreateSpec,
    built: &Built,
) -> Result<(), Error> {
    if built.deferred.is_some() {
        render::info(&format!(
            "note: OpenStackCluster {} is created once Kamaji announces the endpoint; its apiServerFixedIP is empty here",
            spec.name
        ));
    }
    print_objects(&args.output, &built.all(), "created (dry run)")
}

/// Applies the objects (server dry run: all of them, the deferred OpenStackCluster included;
/// otherwise that one once Kamaji announces the endpoint) and prints them.
pub(super) async fn apply(
    args: &Args,
    conn: &cli::Conn,
    apis: &ServerApis,
    spec: &CreateSpec,
    built: &Built,
) -> Result<(), Error> {
    let server_dry = args.dry_run == DryRun::Server;
    let to_apply = if server_dry {
        built.all()
    } else {
        built.objects.clone()
    };
    if !server_dry {
        // The server validates every object first (a dry run of the same applies, webhooks and
        // admission policies included), so a refusal of the last one leaves nothing behind.
        writes::apply_objects(
            conn,
            apis,
            &spec.name,
            &to_apply,
            true,
            args.force_conflicts,
        )
        .await?;
    }
    let mut applied = writes::apply_objects(
        conn,
        apis,
        &spec.name,
        &to_apply,
        server_dry,
        args.force_conflicts,
    )
    .await?;
    let suffix = if server_dry {
        "serverside-applied (server dry run)"
    } else {
        "serverside-applied"
    };
    let human = matches!(args.output.output, OutputFormat::Table | OutputFormat::Wide);
    if human {
        print_objects(&args.output, &to_apply, suffix)?;
    }
    if server_dry {
        if !human {
            print_objects(&args.output, &applied, suffix)?;
        }
        return Ok(());
    }

    if let Some(mut osc) = built.deferred.clone() {
        let (host, port) = wait_endpoint(conn, apis, &spec.name, args.timeout).await?;
        fill_openstack_endpoint(&mut osc, &host, port);
        let r = writes::apply(conn, apis, &osc, false, args.force_conflicts).await?;
        applied.push(object_json(&r));
        if human {
            print_objects(
                &args.output,
                std::slice::from_ref(&osc),
                &format!("serverside-applied (apiServerFixedIP {host}, port {port})"),
            )?;
        }
    }
    if !human {
        print_objects(&args.output, &applied, suffix)?;
    }
    Ok(())
}
