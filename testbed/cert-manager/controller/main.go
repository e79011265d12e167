// Command controller is the testbed's build of cert-manager's controller, the binary of the image
// quay.io/jetstack/cert-manager-controller that cert-manager's release manifest runs.
//
// This main is ours: upstream keeps its own in a nested Go module the module proxy does not serve.
// All the work is done by cert-manager v1.21.1's packages: the configuration type and its defaults
// (internal/apis/config/controller), the controllers, which register themselves with
// pkg/controller when imported, the shared clients and informers (pkg/controller.NewContextFactory),
// the metrics (pkg/metrics) and the liveness server (pkg/healthz). This file only parses the flags
// the release manifest passes, wins the leader Lease, and starts the enabled controllers.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	config "github.com/cert-manager/cert-manager/internal/apis/config/controller"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/controller/scheme"
	controllerdefaults "github.com/cert-manager/cert-manager/internal/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/internal/apis/config/controller/validation"
	"github.com/cert-manager/cert-manager/internal/pem"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/healthz"
	dnsutil "github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/util"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"

	// The Issuer kinds (each registers with pkg/issuer when imported), for the issuers and
	// clusterissuers controllers. The controllers themselves are linked in (and so registered
	// with pkg/controller) by controllerdefaults, which names them.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/acme"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/vault"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/venafi"
)

func main() {
	logf.InitLogs()
	defer logf.FlushLogs()

	cfg, err := defaultConfig()
	if err != nil {
		fail(err)
	}
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	addFlags(fs, cfg)
	if err := fs.Parse(os.Args[1:]); errors.Is(err, pflag.ErrHelp) {
		return
	} else if err != nil {
		os.Exit(2)
	}
	if errs := validation.ValidateControllerConfiguration(cfg, nil); len(errs) > 0 {
		fail(errs.ToAggregate())
	}
	if err := logf.ValidateAndApply(&cfg.Logging); err != nil {
		fail(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, cfg); err != nil {
		fail(err)
	}
}

func fail(err error) {
	logf.Log.Error(err, "cert-manager controller failed")
	logf.FlushLogs()
	os.Exit(1)
}

// defaultConfig is upstream's ControllerConfiguration with upstream's defaults: the versioned
// (v1alpha1) type defaulted by the config scheme, then converted to the internal type the
// validation and the options below read.
func defaultConfig() (*config.ControllerConfiguration, error) {
	scheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	versioned := &configv1alpha1.ControllerConfiguration{}
	scheme.Default(versioned)
	cfg := &config.ControllerConfiguration{}
	return cfg, scheme.Convert(versioned, cfg, nil)
}

// addFlags registers the flags the release manifest passes (--v comes with cert-manager's
// logging flags), and a few more for running it by hand. Upstream's flag names.
func addFlags(fs *pflag.FlagSet, c *config.ControllerConfiguration) {
	fs.StringVar(&c.KubeConfig, "kubeconfig", c.KubeConfig, "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "watch only this namespace (disables cluster-scoped controllers); all when empty")
	fs.StringVar(&c.ClusterResourceNamespace, "cluster-resource-namespace", c.ClusterResourceNamespace, "namespace of the Secrets ClusterIssuers refer to")
	fs.BoolVar(&c.LeaderElectionConfig.Enabled, "leader-elect", c.LeaderElectionConfig.Enabled, "run only while holding the leader Lease")
	fs.StringVar(&c.LeaderElectionConfig.Namespace, "leader-election-namespace", c.LeaderElectionConfig.Namespace, "namespace of the leader Lease")
	fs.StringSliceVar(&c.Controllers, "controllers", c.Controllers, "controllers to run: '*' for the default set, 'name' to add one, '-name' to drop one; all: "+strings.Join(controllerdefaults.AllControllers, ", "))
	fs.StringVar(&c.ACMEHTTP01Config.SolverImage, "acme-http01-solver-image", c.ACMEHTTP01Config.SolverImage, "image of the ACME HTTP-01 solver pods")
	fs.IntVar(&c.MaxConcurrentChallenges, "max-concurrent-challenges", c.MaxConcurrentChallenges, "ACME challenges processed at once")
	fs.IntVar(&c.NumberOfConcurrentWorkers, "concurrent-workers", c.NumberOfConcurrentWorkers, "workers per controller")
	fs.StringVar(&c.MetricsListenAddress, "metrics-listen-address", c.MetricsListenAddress, "address of the Prometheus metrics endpoint (plain HTTP)")
	fs.StringVar(&c.HealthzListenAddress, "internal-healthz-listen-address", c.HealthzListenAddress, "address of the /livez endpoint")
	logf.AddFlags(&c.Logging, fs)
}

// enabledControllers reads --controllers as upstream does for its default set: "*" is
// controllerdefaults.DefaultEnabledControllers, "-name" removes one, and a single namespace drops
// the cluster-scoped ones. The feature-gated extras (Gateway API shims, experimental
// CertificateSigningRequest controllers) are off by default upstream and not offered here.
func enabledControllers(c *config.ControllerConfiguration) sets.Set[string] {
	on, off := sets.New[string](), sets.New[string]()
	for _, name := range c.Controllers {
		switch {
		case name == "*":
			on.Insert(controllerdefaults.DefaultEnabledControllers...)
		case strings.HasPrefix(name, "-"):
			off.Insert(strings.TrimPrefix(name, "-"))
		default:
			on.Insert(name)
		}
	}
	if on.Len() == 0 {
		on.Insert(controllerdefaults.DefaultEnabledControllers...)
	}
	if c.Namespace != "" {
		on.Delete(controllerdefaults.ClusterScopedControllers...)
	}
	return on.Difference(off)
}

func run(ctx context.Context, c *config.ControllerConfiguration) error {
	log := logf.FromContext(ctx)
	v := util.VersionInfo()
	log.Info("starting cert-manager controller", "version", v.GitVersion, "go_version", v.GoVersion)

	pem.SetGlobalSizeLimits(pem.NewSizeLimitsFromConfig(c.PEMSizeLimitsConfig.MaxCertificateSize,
		c.PEMSizeLimitsConfig.MaxPrivateKeySize, c.PEMSizeLimitsConfig.MaxChainLength, c.PEMSizeLimitsConfig.MaxBundleSize))

	factory, err := contextFactory(ctx, c)
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	enabled := enabledControllers(c)
	log.Info("enabled controllers", "controllers", sets.List(enabled))

	g, ctx := errgroup.WithContext(ctx)

	// Metrics on plain HTTP, with the collectors upstream registers.
	metricsLn, err := net.Listen("tcp", c.MetricsListenAddress)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	cm := base.SharedInformerFactory.Certmanager().V1()
	base.Metrics.SetupACMECollector(base.SharedInformerFactory.Acme().V1().Challenges().Lister())
	base.Metrics.SetupCertificateCollector(cm.Certificates().Lister())
	base.Metrics.SetupIssuerCollector(cm.Issuers().Lister())
	if enabled.Has(clusterissuers.ControllerName) {
		base.Metrics.SetupClusterIssuerCollector(cm.ClusterIssuers().Lister())
	}
	metrics := base.Metrics.NewServer(metricsLn)
	g.Go(func() error {
		if err := metrics.Serve(metricsLn); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return metrics.Shutdown(shutdown) //nolint:contextcheck // ctx is done by now
	})

	// /livez, which fails when leader election stalls (the LeaderHealthzAdaptor is its watchdog).
	healthLn, err := net.Listen("tcp", c.HealthzListenAddress)
	if err != nil {
		return fmt.Errorf("healthz listener: %w", err)
	}
	health := healthz.NewServer(c.LeaderElectionConfig.HealthzTimeout)
	g.Go(func() error { return health.Start(ctx, healthLn) })

	leading := make(chan struct{})
	if c.LeaderElectionConfig.Enabled {
		g.Go(func() error { return leaderElection(ctx, c, factory, health, leading) })
	} else {
		close(leading)
	}
	select {
	case <-ctx.Done():
		return g.Wait()
	case <-leading:
	}

	// Each constructor builds its own Context (own user agent and field manager) from the factory
	// and registers the informers it needs, so the factories start after all of them.
	for name, construct := range controller.Known() {
		if !enabled.Has(name) {
			continue
		}
		ctrl, err := construct(factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		g.Go(func() error {
			log.V(logf.InfoLevel).Info("starting controller", "controller", name)
			return ctrl.Run(c.NumberOfConcurrentWorkers, ctx)
		})
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())

	err = g.Wait()
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	return err
}

// contextFactory hands the configuration to pkg/controller.NewContextFactory, which loads the
// kubeconfig (in-cluster when none is given) and builds the shared clients and informers.
func contextFactory(ctx context.Context, c *config.ControllerConfiguration) (*controller.ContextFactory, error) {
	quantity := func(field, s string) (q resource.Quantity, err error) {
		if q, err = resource.ParseQuantity(s); err != nil {
			err = fmt.Errorf("%s: %w", field, err)
		}
		return q, err
	}
	h := c.ACMEHTTP01Config
	reqCPU, err1 := quantity("HTTP-01 solver CPU request", h.SolverResourceRequestCPU)
	reqMem, err2 := quantity("HTTP-01 solver memory request", h.SolverResourceRequestMemory)
	limCPU, err3 := quantity("HTTP-01 solver CPU limit", h.SolverResourceLimitsCPU)
	limMem, err4 := quantity("HTTP-01 solver memory limit", h.SolverResourceLimitsMemory)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, err
	}
	nameservers := c.ACMEDNS01Config.RecursiveNameservers
	if len(nameservers) == 0 {
		nameservers = dnsutil.RecursiveNameservers
	}
	return controller.NewContextFactory(ctx, controller.ContextOptions{
		APIServerHost:      c.APIServerHost, //nolint:staticcheck // upstream's field, empty unless set
		Kubeconfig:         c.KubeConfig,
		KubernetesAPIQPS:   c.KubernetesAPIQPS,
		KubernetesAPIBurst: c.KubernetesAPIBurst,
		Namespace:          c.Namespace,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace:        c.ClusterResourceNamespace,
			ClusterIssuerAmbientCredentials: c.ClusterIssuerAmbientCredentials,
			IssuerAmbientCredentials:        c.IssuerAmbientCredentials,
		},
		ACMEOptions: controller.ACMEOptions{
			HTTP01SolverImage:                 h.SolverImage,
			HTTP01SolverResourceRequestCPU:    reqCPU,
			HTTP01SolverResourceRequestMemory: reqMem,
			HTTP01SolverResourceLimitsCPU:     limCPU,
			HTTP01SolverResourceLimitsMemory:  limMem,
			ACMEHTTP01SolverRunAsNonRoot:      h.SolverRunAsNonRoot,
			HTTP01SolverRuntimeClassName:      h.SolverRuntimeClassName,
			HTTP01SolverNameservers:           h.SolverNameservers,
			HTTP01SolverExtraLabels:           h.SolverExtraLabels,
			DNS01Nameservers:                  nameservers,
			DNS01CheckRetryPeriod:             c.ACMEDNS01Config.CheckRetryPeriod,
			DNS01CheckAuthoritative:           !c.ACMEDNS01Config.RecursiveNameserversOnly,
		},
		IngressShimOptions: controller.IngressShimOptions{
			DefaultIssuerName:                 c.IngressShimConfig.DefaultIssuerName,
			DefaultIssuerKind:                 c.IngressShimConfig.DefaultIssuerKind,
			DefaultIssuerGroup:                c.IngressShimConfig.DefaultIssuerGroup,
			DefaultAutoCertificateAnnotations: c.IngressShimConfig.DefaultAutoCertificateAnnotations,
			ExtraCertificateAnnotations:       c.IngressShimConfig.ExtraCertificateAnnotations,
			GatewayAPIExtraProtocols:          sets.New(c.GatewayAPIConfig.ExtraProtocols...),
		},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:                           c.EnableCertificateOwnerRef,
			CopiedAnnotationPrefixes:                 c.CopiedAnnotationPrefixes,
			CertificateRequestMinimumBackoffDuration: c.CertificateRequestMinimumBackoffDuration,
			CertificateRequestMaximumBackoffDuration: c.CertificateRequestMaximumBackoffDuration,
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: c.MaxConcurrentChallenges},
		ConfigOptions: controller.ConfigOptions{
			EnableGatewayAPI:            c.GatewayAPIConfig.Enabled,
			EnableGatewayAPIListenerSet: c.GatewayAPIConfig.EnableListenerSet,
		},
	})
}

// leaderElection holds the Lease upstream's controller holds (kube-system/cert-manager-controller
// by default), so that ours and upstream's would never lead at once, closing leading when it
// wins. Losing the Lease is an error: the process exits and its Deployment restarts it.
func leaderElection(ctx context.Context, c *config.ControllerConfiguration, factory *controller.ContextFactory,
	health *healthz.Server, leading chan struct{}) error {
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	le, err := factory.Build("leader-election")
	if err != nil {
		return err
	}
	lock, err := resourcelock.NewWithLabels(resourcelock.LeasesResourceLock,
		c.LeaderElectionConfig.Namespace, "cert-manager-controller",
		le.Client.CoreV1(), le.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "-external-cert-manager-controller", EventRecorder: le.Recorder},
		map[string]string{"app.kubernetes.io/managed-by": "cert-manager"})
	if err != nil {
		return err
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   c.LeaderElectionConfig.LeaseDuration,
		RenewDeadline:   c.LeaderElectionConfig.RenewDeadline,
		RetryPeriod:     c.LeaderElectionConfig.RetryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        health.LeaderHealthzAdaptor,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(leading) },
			OnStoppedLeading: func() {}, // Run returns then
		},
	})
	if err != nil {
		return err
	}
	elector.Run(ctx)
	if ctx.Err() == nil {
		return errors.New("leader election lost")
	}
	return nil
}
