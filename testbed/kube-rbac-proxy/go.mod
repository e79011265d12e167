// Tools module: builds kube-rbac-proxy (github.com/brancz/kube-rbac-proxy) v0.8.0, which BYOH v0.5.0's
// release runs as the sidecar of its manager (gcr.io/kubebuilder/kube-rbac-proxy:v0.8.0). Requires
// copied from upstream's go.mod at that tag (it has no replaces). A plain `go install …@v0.8.0` is
// refused: the Go module proxy does not serve the module's version list.
module github.com/capi-kamaji/kubectl-plugins/testbed/kube-rbac-proxy

go 1.26.0

require github.com/brancz/kube-rbac-proxy v0.8.0 // indirect

require (
	github.com/ghodss/yaml v1.0.0 // indirect
	github.com/oklog/run v1.0.0 // indirect
	github.com/spf13/pflag v1.0.5 // indirect
	golang.org/x/net v0.0.0-20200707034311-ab3426394381 // indirect
	gopkg.in/yaml.v2 v2.2.8 // indirect
	k8s.io/api v0.19.2 // indirect
	k8s.io/apimachinery v0.19.2 // indirect
	k8s.io/apiserver v0.19.2 // indirect
	k8s.io/client-go v0.19.2 // indirect
	k8s.io/component-base v0.19.2 // indirect
	k8s.io/klog/v2 v2.3.0 // indirect
)
