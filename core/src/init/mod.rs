//! Day 0: the management cluster's components `kubectl capi init` installs (cert-manager,
//! Cluster API's core and kubeadm providers, BYOH, Kamaji and our KamajiControlPlane provider),
//! pinned as one set ([`set`]); their manifests as applied ([`manifests`]); the etcd
//! `--datastore etcd` sets up for Kamaji's tenants ([`etcd`]); the air-gapped bundle and its
//! checks ([`bundle`]) and its image archives ([`images`]); what to do with each component given
//! what the cluster runs ([`plan`]); and what `uninstall` removes ([`uninstall`]). Pure:
//! fetching, reading files, the registries and the API calls are the plugin's and the client's.

pub mod bundle;
pub mod etcd;
pub mod images;
pub mod manifests;
pub mod plan;
pub mod set;
pub mod uninstall;
