package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/daemon"
)

// ipamd is the real nicpool ipamd for the test node, started in this process from the
// ipamd packages and serving its socket in the work directory. It can be stopped and
// started again, as a DaemonSet pod restarts.
type ipamd struct {
	// socket is where it listens on this host; plugins name it as api.DefaultSocketPath.
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
		socket:  filepath.Join(suite.runDir, filepath.Base(api.DefaultSocketPath)),
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

// startUnsynced starts an ipamd that stays in its "starting" state: serving its socket,
// its caches never synced. It reaches the API server through a proxy that answers
// discovery (ipamd needs it to build its caches) but holds every list and watch, as an
// API server too loaded to answer would. It returns the socket once the daemon answers
// on it (as network configurations name it), and a function that stops it.
func startUnsynced(t *testing.T) (string, func()) {
	t.Helper()
	upstream, err := rest.TransportFor(suite.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(suite.env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(target)
	forward.Transport = upstream
	hold := make(chan struct{})
	proxy := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Discovery is /api, /api/v1, /apis and /apis/<group>/<version>; anything
		// deeper names resources.
		segments := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		if (segments[0] == "api" && len(segments) <= 2) || (segments[0] == "apis" && len(segments) <= 3) {
			forward.ServeHTTP(w, r)
			return
		}
		select {
		case <-hold:
		case <-r.Context().Done():
		}
		http.Error(w, "held by the test", http.StatusServiceUnavailable)
	}))
	cfg := &rest.Config{Host: proxy.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}

	socket := filepath.Join(suite.runDir, "starting", "ipamd.sock")
	dm, err := daemon.New(cfg, daemon.Options{NodeName: nodeName, SocketPath: socket, Scheme: testenv.NewScheme(), Log: suite.ipamd.log})
	if err != nil {
		proxy.Close()
		t.Fatalf("ipamd: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() {
		defer close(started)
		_, _ = dm.Start(ctx)
	}()
	stop := func() {
		cancel()
		close(hold)
		<-started
		proxy.Close()
	}
	client := api.NewClient(socket, 5*time.Second)
	timeout := time.After(30 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := client.Status(ctx, &api.StatusRequest{})
		if !errors.Is(err, api.ErrUnreachable) {
			return cniplugin.RunDir + "/starting/ipamd.sock", stop
		}
		select {
		case <-timeout:
			stop()
			t.Fatalf("the starting ipamd does not serve %s: %v", socket, err)
		case <-tick.C:
		}
	}
}
