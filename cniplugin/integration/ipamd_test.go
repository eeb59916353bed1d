package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/daemon"
)

// ipamd is the real nicpool ipamd for the test node, started in this process from the
// ipamd packages and serving its socket in the work directory. It can be stopped and
// started again, as a DaemonSet pod restarts.
type ipamd struct {
	socket  string
	logFile string
	env     *testenv.Env
	log     logr.Logger
	cancel  context.CancelFunc
	done    <-chan error
}

func startIPAMD(work string, env *testenv.Env) (*ipamd, error) {
	logPath := filepath.Join(work, "ipamd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	d := &ipamd{
		socket:  filepath.Join(work, "run", "ipamd.sock"),
		logFile: logPath,
		env:     env,
		log:     funcr.NewJSON(func(obj string) { fmt.Fprintln(logFile, obj) }, funcr.Options{Verbosity: 1}),
	}
	return d, d.start()
}

// start runs a new daemon and returns once its caches have synced.
func (d *ipamd) start() error {
	dm, err := daemon.New(d.env.Config, daemon.Options{
		NodeName:   nodeName,
		SocketPath: d.socket,
		Scheme:     testenv.NewScheme(),
		Log:        d.log,
	})
	if err != nil {
		return fmt.Errorf("ipamd: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, err := dm.Start(ctx)
	if err != nil {
		cancel()
		return fmt.Errorf("start ipamd: %w", err)
	}
	d.cancel, d.done = cancel, done
	return nil
}

// stop ends the daemon and waits until its socket no longer serves.
func (d *ipamd) stop() {
	if d.cancel == nil {
		return
	}
	d.cancel()
	d.cancel = nil
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
	}
}
