//! Labels of Cluster API's contract that the suite reads and writes, defined once.

/// Every object of a CAPI cluster carries its cluster's name here (`clusterv1.ClusterNameLabel`).
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
