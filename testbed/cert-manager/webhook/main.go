// Command webhook is the testbed's build of cert-manager's webhook, the binary of the image
// quay.io/jetstack/cert-manager-webhook that cert-manager's release manifest runs.
//
// This main is ours: upstream keeps its own in a nested Go module the module proxy does not serve.
// Everything else is cert-manager v1.21.1's: the flags and their defaults (pkg/webhook/options,
// among them --secure-port, --healthz-port 6080 and the --dynamic-serving-* flags, whose
// CA lives in a Secret and signs the serving certificate), their validation
// (internal/apis/config/webhook/validation), and the server with its validation, mutation and
// conversion handlers, /healthz and /livez (internal/webhook.NewCertManagerWebhookServer).
package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/cert-manager/cert-manager/internal/apis/config/webhook/validation"
	cmwebhook "github.com/cert-manager/cert-manager/internal/webhook"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
	"github.com/cert-manager/cert-manager/pkg/webhook/options"
)

func main() {
	logf.InitLogs()
	defer logf.FlushLogs()

	cfg, err := options.NewWebhookConfiguration()
	if err != nil {
		fail(err)
	}
	fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
	options.AddConfigFlags(fs, cfg) // upstream's flag set, with --feature-gates and logging's --v
	if err := fs.Parse(os.Args[1:]); errors.Is(err, pflag.ErrHelp) {
		return
	} else if err != nil {
		os.Exit(2)
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(cfg.FeatureGates); err != nil {
		fail(err)
	}
	if errs := validation.ValidateWebhookConfiguration(cfg, nil); len(errs) > 0 {
		fail(errs.ToAggregate())
	}
	if err := logf.ValidateAndApply(&cfg.Logging); err != nil {
		fail(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "webhook")
	log := logf.FromContext(ctx)
	log.Info("starting cert-manager webhook", "version", util.VersionInfo().GitVersion)
	srv, err := cmwebhook.NewCertManagerWebhookServer(log, *cfg)
	if err != nil {
		fail(err)
	}
	if err := srv.Run(ctx); err != nil {
		fail(err)
	}
}

func fail(err error) {
	logf.Log.Error(err, "cert-manager webhook failed")
	logf.FlushLogs()
	os.Exit(1)
}
