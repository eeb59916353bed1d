package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/nicpool/nicpool/cniplugin"
)

// nodeExec runs CNI plugins as if on this node: inside the node's network namespace
// (where its uplinks are) and with the node's own directories mounted where nicpool's
// plugin reaches the host (its ipamd socket, its logs), and where spiderpool's
// coordinator plugin does (spiderpool's agent socket, which ipamd serves, and its
// log), because all nodes share one host.
type nodeExec struct {
	namespace    string
	runDir       string
	logDir       string
	spidernetDir string
	raw          invoke.RawExec
}

// Where a node's CNI plugins see the node's run and log directories: the only host
// directories nicpool's plugin uses; and those spiderpool's coordinator plugin uses.
const (
	RunDirMount          = cniplugin.RunDir
	LogDirMount          = cniplugin.LogDir
	SpidernetRunDirMount = "/var/run/spidernet"
	SpidernetLogDirMount = "/var/log/spidernet"
)

// mountAndExec is run by sh: $0 is the node's run directory, $1 its log directory, $2
// the plugin, $3 the node's spidernet directory (its run and log subdirectories).
const mountAndExec = `mount --bind "$0" ` + RunDirMount + ` && mount --bind "$1" ` + LogDirMount +
	` && mount --bind "$3/run" ` + SpidernetRunDirMount + ` && mount --bind "$3/log" ` + SpidernetLogDirMount + ` && exec "$2"`

func (e *nodeExec) ExecPlugin(ctx context.Context, pluginPath string, stdin []byte, environ []string) ([]byte, error) {
	// `ip netns exec` enters the namespace in a private mount namespace, so the bind
	// mount is seen by this plugin and the plugins it delegates to, and by nobody else.
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", e.namespace, "/bin/sh", "-c", mountAndExec, e.runDir, e.logDir, pluginPath, e.spidernetDir)
	cmd.Env = environ
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, pluginError(err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

func (e *nodeExec) FindInPath(plugin string, paths []string) (string, error) {
	return e.raw.FindInPath(plugin, paths)
}

func (e *nodeExec) Decode(data []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(data)
}

// pluginError turns a failed plugin run into the CNI error it printed, as libcni's
// own executor does.
func pluginError(err error, stdout, stderr []byte) error {
	e := &types.Error{}
	if len(stdout) > 0 && json.Unmarshal(stdout, e) == nil && e.Msg != "" {
		return e
	}
	return &types.Error{Code: types.ErrInternal, Msg: fmt.Sprintf("plugin failed: %v", err), Details: string(bytes.TrimSpace(stderr))}
}
