package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/cluster"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// What Options.Install leaves, by the manifests' names.
const (
	webhookDeployment = "nicpool-webhook"
	ipamdDaemonSet    = "nicpool-ipamd"
)

// startInstalledWebhook runs Options.Install, points the webhook configurations it
// installed at the local webhook's port (startWebhook chose it) and starts it as the
// installed Deployment says.
func (s *Stack) startInstalledWebhook(ctx context.Context) error {
	s.progress("nicpool: installing in namespace %s (Options.Install)", s.namespace)
	if err := s.install(ctx, s); err != nil {
		return fmt.Errorf("install nicpool: %w", err)
	}
	if err := s.pointWebhooksHere(ctx); err != nil {
		return err
	}
	return s.runInstalledWebhook(ctx)
}

// runInstalledWebhook starts nicpool-webhook with the arguments and environment of
// the installed Deployment's container, under its service account, but for where it
// listens, keeps its certificates and finds the API server.
func (s *Stack) runInstalledWebhook(ctx context.Context) error {
	c, account, err := s.installedContainer(ctx, "Deployment", webhookDeployment, "webhook")
	if err != nil {
		return err
	}
	kc, err := s.ServiceAccountKubeconfig(s.namespace, account)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.Dir, "webhook")
	if err := os.MkdirAll(filepath.Join(dir, "certs"), 0o700); err != nil {
		return err
	}
	args, env, err := localCommand(c, map[string]string{"metadata.namespace": s.namespace, "metadata.name": webhookDeployment + "-local"}, []string{
		"--kubeconfig=" + kc,
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--cert-extra-dns-names=localhost",
		"--webhook-host=127.0.0.1",
		"--webhook-port=" + strconv.Itoa(s.webhookPort),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(s.webhookProbe),
		"--metrics-bind-address=0",
	})
	if err != nil {
		return fmt.Errorf("Deployment %s/%s: %w", s.namespace, webhookDeployment, err)
	}
	p, err := cluster.StartProcess("nicpool-webhook", filepath.Join(s.binDir, "nicpool-webhook"), args, filepath.Join(dir, "webhook.log"), env...)
	if err != nil {
		return err
	}
	s.Webhook = p
	return s.waitWebhook(ctx, p, s.webhookProbe)
}

// startInstalledIpamd starts one node's nicpool-ipamd with the arguments and
// environment of the installed DaemonSet's container for a pod on that node, under
// a token of its service account bound to the node, serving the node's socket.
func (s *Stack) startInstalledIpamd(ctx context.Context, node, dir, runDir string) (*cluster.Process, error) {
	c, account, err := s.installedContainer(ctx, "DaemonSet", ipamdDaemonSet, "ipamd")
	if err != nil {
		return nil, err
	}
	kc, err := s.NodeTokenKubeconfig(ctx, s.namespace, account, node)
	if err != nil {
		return nil, err
	}
	socket := filepath.Join(runDir, filepath.Base(api.DefaultSocketPath))
	args, env, err := localCommand(c, map[string]string{"metadata.namespace": s.namespace, "metadata.name": ipamdDaemonSet + "-" + node, "spec.nodeName": node}, []string{
		"--socket=" + socket,
		"--kubeconfig=" + kc,
		// Where the stand-ins' Multus attaches eth0 (networks.go).
		"--multus-cluster-network=" + ClusterNetworkNAD,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
	})
	if err != nil {
		return nil, fmt.Errorf("DaemonSet %s/%s: %w", s.namespace, ipamdDaemonSet, err)
	}
	p, err := cluster.StartProcess("nicpool-ipamd "+node, filepath.Join(s.binDir, "nicpool-ipamd"), args, filepath.Join(dir, "ipamd.log"), env...)
	if err != nil {
		return nil, err
	}
	return p, waitSocket(ctx, p, socket)
}

// installedContainer is the named container of an installed Deployment's or
// DaemonSet's pod template, and the template's service account.
func (s *Stack) installedContainer(ctx context.Context, kind, name, container string) (map[string]any, string, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apps/v1")
	u.SetKind(kind)
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: name}, u); err != nil {
		return nil, "", fmt.Errorf("the installation's %s %s/%s: %w", kind, s.namespace, name, err)
	}
	account, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "serviceAccountName")
	if account == "" {
		return nil, "", fmt.Errorf("%s %s/%s names no service account", kind, s.namespace, name)
	}
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		if c, _ := c.(map[string]any); c["name"] == container {
			return c, account, nil
		}
	}
	return nil, "", fmt.Errorf("%s %s/%s has no container %s", kind, s.namespace, name, container)
}

// localCommand is a container's arguments and environment as the kubelet gives them
// to a pod with fields (binaries.ContainerEnv), with each flag of override
// (--name=value or --name) in place of the container's own flag of that name.
func localCommand(c map[string]any, fields map[string]string, override []string) (args, env []string, err error) {
	if cmd, ok := c["command"]; ok {
		return nil, nil, fmt.Errorf("container %v sets command %v: only the image's entrypoint is run here", c["name"], cmd)
	}
	env, err = binaries.ContainerEnv(c, fields)
	if err != nil {
		return nil, nil, err
	}
	values := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		values[k] = v
	}
	replaced := map[string]bool{}
	for _, o := range override {
		replaced[flagName(o)] = true
	}
	list, _, _ := unstructured.NestedStringSlice(c, "args")
	for _, a := range list {
		if !replaced[flagName(a)] {
			args = append(args, binaries.Expand(a, values))
		}
	}
	return append(args, override...), env, nil
}

func flagName(arg string) string {
	name, _, _ := strings.Cut(arg, "=")
	return name
}

// pointWebhooksHere points every webhook of the installed configurations at the local
// webhook, keeping their CA bundle, and remembers their own client configurations.
func (s *Stack) pointWebhooksHere(ctx context.Context) error {
	s.serviceClients = map[string]admissionregistrationv1.WebhookClientConfig{}
	return s.editWebhookClients(ctx, func(config, webhook string, c admissionregistrationv1.WebhookClientConfig) (admissionregistrationv1.WebhookClientConfig, error) {
		if c.Service == nil {
			return c, fmt.Errorf("webhook %s of %s has no Service to stand in for", webhook, config)
		}
		s.serviceClients[config+"/"+webhook] = c
		return urlClientConfig(s.webhookPort, c), nil
	})
}

// restoreWebhookClients puts the installed client configurations back, with the CA
// bundle the webhook injected since, as an upgrade expects to find them.
func (s *Stack) restoreWebhookClients(ctx context.Context) error {
	return s.editWebhookClients(ctx, func(config, webhook string, c admissionregistrationv1.WebhookClientConfig) (admissionregistrationv1.WebhookClientConfig, error) {
		own, ok := s.serviceClients[config+"/"+webhook]
		if !ok {
			return c, fmt.Errorf("webhook %s of %s was not installed", webhook, config)
		}
		own.CABundle = c.CABundle
		return own, nil
	})
}

func (s *Stack) editWebhookClients(ctx context.Context, edit func(config, webhook string, c admissionregistrationv1.WebhookClientConfig) (admissionregistrationv1.WebhookClientConfig, error)) error {
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := s.Client.Get(ctx, nameOf(configs.MutatingName), m); err != nil {
		return fmt.Errorf("the installation's %s: %w", configs.MutatingName, err)
	}
	for i := range m.Webhooks {
		c, err := edit(m.Name, m.Webhooks[i].Name, m.Webhooks[i].ClientConfig)
		if err != nil {
			return err
		}
		m.Webhooks[i].ClientConfig = c
	}
	if err := s.Client.Update(ctx, m); err != nil {
		return err
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := s.Client.Get(ctx, nameOf(configs.ValidatingName), v); err != nil {
		return fmt.Errorf("the installation's %s: %w", configs.ValidatingName, err)
	}
	for i := range v.Webhooks {
		c, err := edit(v.Name, v.Webhooks[i].Name, v.Webhooks[i].ClientConfig)
		if err != nil {
			return err
		}
		v.Webhooks[i].ClientConfig = c
	}
	return s.Client.Update(ctx, v)
}

// Upgrade upgrades an installation of Options.Install the way a rollout replaces
// nicpool's pods, all at once: it stops the webhook and every node's ipamd, puts the
// installed webhook configurations back as they were installed, runs upgrade (helm
// upgrade, say), builds nicpool's binaries from source, then starts the webhook and
// every ipamd again as the upgraded Deployment and DaemonSet say. The nodes' pods
// stay, as they do while a DaemonSet rolls.
func (s *Stack) Upgrade(ctx context.Context, source binaries.Checkout, upgrade func(ctx context.Context) error) error {
	if s.install == nil || s.NodeKind != NodeStandIn {
		return errors.New("local: Upgrade needs an installation of Options.Install on stand-in nodes")
	}
	if err := s.stopNicpool(); err != nil {
		return fmt.Errorf("stop nicpool: %w", err)
	}
	if err := s.restoreWebhookClients(ctx); err != nil {
		return err
	}
	if err := upgrade(ctx); err != nil {
		return fmt.Errorf("upgrade: %w", err)
	}
	s.source = source
	s.progress("nicpool: building the upgrade's binaries")
	if err := s.buildNicpool(ctx); err != nil {
		return err
	}
	if err := s.pointWebhooksHere(ctx); err != nil {
		return err
	}
	if err := s.runInstalledWebhook(ctx); err != nil {
		return err
	}
	for _, n := range s.Nodes {
		if err := s.StartIpamd(ctx, n.Name()); err != nil {
			return err
		}
	}
	return nil
}
