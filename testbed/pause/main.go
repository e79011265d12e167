// Command pause is the testbed's pod sandbox image: the process that holds a pod's namespaces
// while its containers come and go, as registry.k8s.io/pause does. That registry cannot be
// reached here, so the testbed builds this one and serves it from its own registry. It blocks
// until SIGTERM or SIGINT and exits 0, and reaps nothing: containerd's shim reaps the pod's
// processes.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
