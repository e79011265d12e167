// Command cainjector is the testbed's build of cert-manager's CA injector, the binary of the image
// quay.io/jetstack/cert-manager-cainjector that cert-manager's release manifest runs.
//
// This main is ours: upstream keeps its own in a nested Go module the module proxy does not serve.
// The injection is cert-manager v1.21.1's pkg/controller/cainjector (RegisterAllInjectors: one
// controller-runtime reconciler per injectable kind, CRD conversion webhooks, Mutating- and
// ValidatingWebhookConfigurations and APIServices, filling caBundle from the Secret or Certificate
// their cert-manager.io/inject-ca-from* annotation names); its configuration type and defaults are
// internal/apis/config/cainjector's. This file parses the flags the release manifest passes and runs
// a controller-runtime manager with leader election.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	config "github.com/cert-manager/cert-manager/internal/apis/config/cainjector"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/cainjector/scheme"
	"github.com/cert-manager/cert-manager/internal/apis/config/cainjector/validation"
	"github.com/cert-manager/cert-manager/internal/kube"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/cainjector/v1alpha1"
	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
)

func main() {
	logf.InitLogs()
	defer logf.FlushLogs()

	cfg, err := defaultConfig()
	if err != nil {
		fail(err)
	}
	fs := pflag.NewFlagSet("cainjector", pflag.ContinueOnError)
	fs.StringVar(&cfg.KubeConfig, "kubeconfig", cfg.KubeConfig, "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "inject only into and from this namespace; all when empty")
	fs.BoolVar(&cfg.LeaderElectionConfig.Enabled, "leader-elect", cfg.LeaderElectionConfig.Enabled, "run only while holding the leader Lease")
	fs.StringVar(&cfg.LeaderElectionConfig.Namespace, "leader-election-namespace", cfg.LeaderElectionConfig.Namespace, "namespace of the leader Lease")
	fs.StringVar(&cfg.MetricsListenAddress, "metrics-listen-address", cfg.MetricsListenAddress, "address of the Prometheus metrics endpoint (plain HTTP); '0' disables it")
	logf.AddFlags(&cfg.Logging, fs)
	if err := fs.Parse(os.Args[1:]); errors.Is(err, pflag.ErrHelp) {
		return
	} else if err != nil {
		os.Exit(2)
	}
	if errs := validation.ValidateCAInjectorConfiguration(cfg, nil); len(errs) > 0 {
		fail(errs.ToAggregate())
	}
	if err := logf.ValidateAndApply(&cfg.Logging); err != nil {
		fail(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "cainjector")
	ctrl.SetLogger(logf.Log)
	if err := run(ctx, cfg); err != nil {
		fail(err)
	}
}

func fail(err error) {
	logf.Log.Error(err, "cert-manager cainjector failed")
	logf.FlushLogs()
	os.Exit(1)
}

// defaultConfig is upstream's CAInjectorConfiguration with upstream's defaults (leader election
// on, in kube-system; every injectable kind and the Certificate data source enabled).
func defaultConfig() (*config.CAInjectorConfiguration, error) {
	scheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	versioned := &configv1alpha1.CAInjectorConfiguration{}
	scheme.Default(versioned)
	cfg := &config.CAInjectorConfiguration{}
	return cfg, scheme.Convert(versioned, cfg, nil)
}

func run(ctx context.Context, c *config.CAInjectorConfiguration) error {
	log := logf.FromContext(ctx)
	log.Info("starting cert-manager ca-injector", "version", util.VersionInfo().GitVersion)

	rest, err := kube.BuildClientConfig("", c.KubeConfig)
	if err != nil {
		return err
	}
	// The user agent names the field manager of the caBundles it applies ("cert-manager-cainjector").
	rest = util.RestConfigWithUserAgent(rest, "cainjector")

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{kscheme.AddToScheme, cmscheme.AddToScheme, apiext.AddToScheme, apireg.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	var namespaces map[string]cache.Config
	if c.Namespace != "" {
		namespaces = map[string]cache.Config{c.Namespace: {}}
	}
	le := c.LeaderElectionConfig
	mgr, err := ctrl.NewManager(rest, ctrl.Options{
		Scheme:  scheme,
		Cache:   cache.Options{DefaultNamespaces: namespaces},
		Metrics: metricsserver.Options{BindAddress: c.MetricsListenAddress},
		// The injectors watch only Secrets' metadata and GET the Secret they need: reading Secrets
		// through the client must not start an informer caching every Secret's data.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		// The Lease upstream's cainjector holds, so that ours and upstream's never lead at once.
		LeaderElection:                le.Enabled,
		LeaderElectionNamespace:       le.Namespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &le.LeaseDuration,
		RenewDeadline:                 &le.RenewDeadline,
		RetryPeriod:                   &le.RetryPeriod,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}

	// The Certificate data source watches Certificates: wait (up to 5 minutes, as upstream) for
	// their CRD, which the same release manifest installs, rather than fail at start.
	if c.EnableDataSourceConfig.Certificates {
		direct, err := client.New(rest, client.Options{Scheme: scheme})
		if err != nil {
			return err
		}
		err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			err := direct.Get(ctx, client.ObjectKey{Name: "certificates.cert-manager.io"}, &apiext.CustomResourceDefinition{})
			if err != nil {
				log.Info("waiting for the certificates.cert-manager.io CRD", "err", err.Error())
			}
			return err == nil, nil
		})
		if err != nil {
			return fmt.Errorf("no certificates.cert-manager.io CRD: %w", err)
		}
	}

	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    c.Namespace,
		IgnoreNamespaces:             c.IgnoreNamespaces,
		EnableCertificatesDataSource: c.EnableDataSourceConfig.Certificates,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   c.EnableInjectableConfig.MutatingWebhookConfigurations,
			cainjector.ValidatingWebhookConfigurationName: c.EnableInjectableConfig.ValidatingWebhookConfigurations,
			cainjector.APIServiceName:                     c.EnableInjectableConfig.APIServices,
			cainjector.CustomResourceDefinitionName:       c.EnableInjectableConfig.CustomResourceDefinitions,
		},
	})
	if err != nil {
		return fmt.Errorf("registering the injectors: %w", err)
	}
	return mgr.Start(ctx)
}
