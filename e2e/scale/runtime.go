package scale

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/ipamd/api"
)

// runtime is a node's container runtime as far as IPAM goes: CNI ADD for a new pod
// sandbox, and CNI DEL when setting the sandbox up failed. ctx's deadline is the
// call's timeout (the plugin's request_timeout).
type runtime interface {
	add(ctx context.Context, p Pod, container string) (address string, err error)
	del(ctx context.Context, p Pod, container string) error
}

// network is the CNI network name every ADD names.
const network = "scale"

// netns is a sandbox's network namespace path, shaped like containerd's.
func netns(p Pod) string { return "/var/run/netns/cni-" + p.UID }

// socketRuntime calls each node's ipamd socket, as the plugin does.
type socketRuntime struct{ clients []*api.Client }

func newSocketRuntime(w *world) *socketRuntime {
	r := &socketRuntime{clients: make([]*api.Client, len(w.nodes))}
	for n, d := range w.nodes {
		r.clients[n] = api.NewClient(d.Socket, 0)
	}
	return r
}

func (r *socketRuntime) add(ctx context.Context, p Pod, container string) (string, error) {
	resp, err := r.clients[p.Node].Allocate(ctx, &api.AllocateRequest{
		Attachment: api.Attachment{ContainerID: container, Interface: "eth0"},
		NetNS:      netns(p),
		Pod:        api.Pod{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Network:    api.NetworkConfig{Name: network},
	})
	if err != nil {
		return "", err
	}
	if len(resp.IPs) != 1 {
		return "", fmt.Errorf("ipamd answered %d addresses for eth0, want 1", len(resp.IPs))
	}
	return resp.IPs[0].Address, nil
}

func (r *socketRuntime) del(ctx context.Context, p Pod, container string) error {
	_, err := r.clients[p.Node].Release(ctx, &api.ReleaseRequest{
		Attachment: api.Attachment{ContainerID: container, Interface: "eth0"},
		Pod:        api.Pod{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Network:    api.NetworkConfig{Name: network},
	})
	var e *api.Error
	if errors.As(err, &e) && e.Code == api.CodeUnknownContainer {
		return nil
	}
	return err
}

// execRuntime runs the real CNI plugin binary once per call, as a container runtime
// does, with the node's network configuration on stdin.
type execRuntime struct {
	plugin string
	nodes  []*binaries.Ipamd

	mu    sync.Mutex
	cpu   float64 // user+system seconds of every plugin run
	execs int     // plugin runs
}

func newExecRuntime(w *world, plugin string) *execRuntime {
	return &execRuntime{plugin: plugin, nodes: w.nodes}
}

// conf is node n's network configuration: nicpool as the IPAM of a macvlan network,
// its socket where a node has it, its request_timeout the attempt's bound. Every node
// names the same path; the plugin finds where that node's run directory is on this
// host from its environment, as the runtime sets it.
func (r *execRuntime) conf(timeout time.Duration) []byte {
	return fmt.Appendf(nil, `{"cniVersion":"1.1.0","name":%q,"type":"macvlan","master":"eth0","ipam":{"type":"nicpool","ipam_unix_socket_path":%q,"request_timeout":%q}}`,
		network, api.DefaultSocketPath, timeout.String())
}

func (r *execRuntime) run(ctx context.Context, verb string, p Pod, container string) ([]byte, error) {
	// The plugin bounds its own call to ipamd by request_timeout (ctx's deadline,
	// at least the plugin's minimum of 1 s); the runtime bounds the whole call as the
	// kubelet bounds RunPodSandbox (ADD) and StopPodSandbox (DEL).
	timeout := PluginRequestTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(deadline).Round(time.Millisecond), time.Second)
	}
	bound := KubeletSandboxTimeout
	if verb == "DEL" {
		bound = KubeletRuntimeRequestTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.plugin)
	cmd.Env = []string{
		"CNI_COMMAND=" + verb, "CNI_CONTAINERID=" + container, "CNI_NETNS=" + netns(p), "CNI_IFNAME=eth0",
		"CNI_PATH=/opt/cni/bin",
		"CNI_ARGS=K8S_POD_NAMESPACE=" + p.Namespace + ";K8S_POD_NAME=" + p.Name + ";K8S_POD_INFRA_CONTAINER_ID=" + container + ";K8S_POD_UID=" + p.UID,
		// Where this node's /run/nicpool is on this host.
		cniplugin.EnvRunDir + "=" + r.nodes[p.Node].RunDir,
	}
	cmd.Stdin = bytes.NewReader(r.conf(timeout))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.ProcessState != nil {
		r.mu.Lock()
		r.cpu += cmd.ProcessState.UserTime().Seconds() + cmd.ProcessState.SystemTime().Seconds()
		r.execs++
		r.mu.Unlock()
	}
	if err != nil {
		var e struct {
			Code uint   `json:"code"`
			Msg  string `json:"msg"`
		}
		if json.Unmarshal(stdout.Bytes(), &e) == nil && e.Msg != "" {
			return nil, fmt.Errorf("CNI %s error %d: %s", verb, e.Code, e.Msg)
		}
		return nil, fmt.Errorf("CNI %s: %w: %s", verb, err, strings.TrimSpace(lastLine(stderr.String())))
	}
	return stdout.Bytes(), nil
}

func (r *execRuntime) add(ctx context.Context, p Pod, container string) (string, error) {
	out, err := r.run(ctx, "ADD", p, container)
	if err != nil {
		return "", err
	}
	var result struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if err := json.Unmarshal(out, &result); err != nil {
		return "", fmt.Errorf("CNI ADD printed %q: %w", out, err)
	}
	if len(result.IPs) != 1 {
		return "", fmt.Errorf("CNI ADD result has %d addresses, want 1: %s", len(result.IPs), out)
	}
	return result.IPs[0].Address, nil
}

func (r *execRuntime) del(ctx context.Context, p Pod, container string) error {
	_, err := r.run(ctx, "DEL", p, container)
	return err
}

// cpuSeconds is the CPU time of every plugin run so far, and how many ran.
func (r *execRuntime) cpuSeconds() (float64, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cpu, r.execs
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
