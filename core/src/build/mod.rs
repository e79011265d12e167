//! Pure builders: the API objects a verb creates, from its flags. No I/O; unit tested.

pub mod byoh;
pub mod cni;
pub mod kamaji;
pub mod kube_proxy;
pub mod pki;
