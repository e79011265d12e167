//! Acceptance on a v1beta1-only (CAPI 1.10-shaped) management cluster: the same checks
//! as `fleet.rs`, with every object written at v1beta1 (old conditions with severity, the
//! `status.v1beta2` blocks, versioned references).

use crate::fleet_common::*;

fleet_tests! { testbed::shared_v1beta1(), "v1beta1";
    v1beta1_hosts_every_format_filters_and_describe("v1b1-hosts"):
        hosts_in_every_format, hosts_filters, hosts_describe;
    v1beta1_machines_every_format("v1b1-machines"): machines_in_every_format;
    v1beta1_list_every_format("v1b1-list"): list_in_every_format;
    v1beta1_kubeconfig("v1b1-kubeconfig"): kubeconfig_print_and_output;
    v1beta1_describe_every_format("v1b1-describe"): describe_in_every_format;
}
