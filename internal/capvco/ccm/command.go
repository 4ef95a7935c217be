package ccm

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	cliflag "k8s.io/component-base/cli/flag"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/capx-io/capx/internal/capvco/ccm/config"
	"github.com/capx-io/capx/internal/capvco/ccm/servicelb"
	"github.com/capx-io/capx/internal/vco"
)

const example = `  # In the workload cluster, on a control-plane node (see the Deployment in
  # internal/capvco/ccm/manifests):
  capvco-cloud-controller-manager --cloud-config=/etc/capvco/cloud-config.yaml \
    --leader-elect=true --use-service-account-credentials=false`

// NewCommand is the capvco-cloud-controller-manager command: the cloud-provider library's
// command (its flags, leader election, serving and controllers) with the vco cloud and the
// members controller. It runs until stop closes.
func NewCommand(stop <-chan struct{}) (*cobra.Command, error) {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		return nil, fmt.Errorf("cloud controller manager options: %w", err)
	}
	opts.KubeCloudShared.CloudProvider.Name = ProviderName

	var cfg config.Config
	cmd := app.NewCloudControllerManagerCommand(opts, func(*cloudcontrollerconfig.CompletedConfig) cloudprovider.Interface {
		return New(cfg, FromCredentials(cfg, vco.NewFactory(cfg.Platform.ClientOptions())),
			servicelb.HTTPProber{Timeout: cfg.LoadBalancer.ProbeTimeout()})
	}, Controllers(), names.CCMControllerAliases(), cliflag.NamedFlagSets{}, stop)
	cmd.Use = "capvco-cloud-controller-manager"
	cmd.Short = "The cloud controller manager of CAPVCO clusters on whitesky.cloud"
	cmd.Long = `capvco-cloud-controller-manager initialises the Nodes of a CAPVCO cluster (provider ID,
addresses, instance type, region and zone), removes Nodes whose VM is gone, taints those whose VM
is halted, and keeps the platform load balancers of Services of type LoadBalancer, admitting only
Ready nodes that answer the Service's health check. Its credential and cluster come from the
--cloud-config file; docs/capvco/cloud-controller-manager.md describes it.`
	cmd.Example = example
	// The cloud-config is checked before anything starts, so a wrong file is one clear error
	// instead of a crash loop inside the library.
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if cmd.Flags().Lookup("cloud-provider").Value.String() != ProviderName {
			return fmt.Errorf("--cloud-provider must be %q (or left out)", ProviderName)
		}
		c, err := config.Load(cmd.Flags().Lookup("cloud-config").Value.String())
		if err != nil {
			return err
		}
		creds, err := c.Credentials()
		if err != nil {
			return err
		}
		// The endpoint policy too: a credential the platform block refuses stops the CCM here.
		if _, err := vco.New(creds, c.Platform.ClientOptions()); err != nil {
			return err
		}
		cfg = c
		return nil
	}
	return cmd, nil
}

// Controllers are the cloud-provider's controllers (cloud-node, cloud-node-lifecycle,
// service; route is left out: there are no cloud routes) and the members controller.
func Controllers() map[string]app.ControllerInitFuncConstructor {
	out := map[string]app.ControllerInitFuncConstructor{}
	for name, c := range app.DefaultInitFuncConstructors {
		if name != names.NodeRouteController {
			out[name] = c
		}
	}
	out[MembersControllerName] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: "service-controller"},
		Constructor: startMembers,
	}
	return out
}

func startMembers(_ app.ControllerInitContext, completed *cloudcontrollerconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		c, ok := cloud.(*Cloud)
		if !ok {
			return nil, false, fmt.Errorf("%s needs the %s cloud, not %T", MembersControllerName, ProviderName, cloud)
		}
		core := completed.SharedInformers.Core().V1()
		go NewMembersController(c, core.Services(), core.Nodes()).Run(klog.NewContext(ctx, klog.FromContext(ctx)))
		return nil, true, nil
	}
}
