module github.com/capi-kamaji/kubectl-plugins/testbed/pause

go 1.26.0
