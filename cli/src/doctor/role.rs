//! `--print-role`: the ClusterRoles the doctor runs under.

/// `--print-role`: the least the doctor reads with, as `kubectl apply -f -` takes it. Read-only
/// (`list`, and `get` on namespaces for `-n`'s check); no Secrets and no `patch`, whose
/// checks then say "not checked" (README, "The fleet doctor").
pub(super) const ROLE: &str = "\
# capi-kamaji-doctor: what `kubectl capi doctor` (and `kubectl kamaji doctor`) reads, and no more.
# Read-only: list, and get on namespaces (to tell a namespace that does not exist from an empty one).
# Bind it:  kubectl create clusterrolebinding capi-kamaji-doctor --clusterrole=capi-kamaji-doctor --user=NAME
# Not granted, and reported by the doctor as \"Not checked\" with the permission lacking:
#   - Secrets: Kamaji's certificates (CertificateExpired, CertificateExpiring), Secrets of deleted
#     clusters (OrphanSecrets), the Secrets DataStores name (DataStoreUnusable). To check those,
#     bind capi-kamaji-doctor-secrets (below) in the namespaces of your clusters and of the
#     DataStores' Secrets:  kubectl create rolebinding capi-kamaji-doctor-secrets -n NS
#     --clusterrole=capi-kamaji-doctor-secrets --user=NAME  (the doctor then lists Secrets in those
#     namespaces only; a ClusterRoleBinding grants every Secret of the cluster).
#   - patch tenantcontrolplanes: Kamaji's webhook is asked which versions it refuses by a server dry
#     run of a patch (VersionOutsideKamajiRange); nothing is stored, but RBAC cannot grant a dry run
#     alone, and patch would allow real changes.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: capi-kamaji-doctor
  labels:
    app.kubernetes.io/name: capi-kamaji-doctor
rules:
# Cluster API and its providers: the kinds the checks read (Clusters, Machines, KamajiControlPlanes,
# BYOH's hosts, machines, templates and BootstrapKubeconfigs), and one object of each kind converted
# by a webhook, read at another served version (ConversionFailing): whichever kinds the installed
# providers serve, hence every resource of their groups, list only. BYOH's BootstrapKubeconfigs
# hold a host's bootstrap token (30 minutes) in their status: listing them reads those
# (UnusedBootstrapKubeconfig).
- apiGroups:
  - cluster.x-k8s.io
  - infrastructure.cluster.x-k8s.io
  - controlplane.cluster.x-k8s.io
  - bootstrap.cluster.x-k8s.io
  - addons.cluster.x-k8s.io
  - ipam.cluster.x-k8s.io
  - runtime.cluster.x-k8s.io
  resources: [\"*\"]
  verbs: [list]
# Kamaji's control planes and DataStores.
- apiGroups: [kamaji.clastix.io]
  resources: [tenantcontrolplanes, datastores]
  verbs: [list]
# kamaji-reconciler's upgrades.
- apiGroups: [ops.capi-kamaji.io]
  resources: [clusterupgrades, fleetupgrades]
  verbs: [list]
# The providers' leader Leases (ReconcilerStopped, SecondControlPlaneProvider), selected by name.
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [list]
# The controllers of the management cluster's components, one Deployment each in its own namespace
# (ComponentMissing, ComponentUnavailable).
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get]
# The Warning Events about BYOH hosts, selected by field, which tell a host whose bootstrap its agent
# retries forever (HostBootstrapLoop).
- apiGroups: [\"\"]
  resources: [events]
  verbs: [list]
# The CRDs' stored versions and conversion (CrdStoredVersions, ConversionFailing).
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list]
- apiGroups: [\"\"]
  resources: [namespaces]
  verbs: [get]
---
# capi-kamaji-doctor-secrets: the Secret reads of the doctor, to bind per namespace (a RoleBinding).
# It lists Cluster API's Secrets by the cluster-name label (metadata only), Kamaji's certificate
# Secrets by the kamaji.clastix.io/project label, and gets each Secret a DataStore names.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: capi-kamaji-doctor-secrets
  labels:
    app.kubernetes.io/name: capi-kamaji-doctor
rules:
- apiGroups: [\"\"]
  resources: [secrets]
  verbs: [get, list]
";
