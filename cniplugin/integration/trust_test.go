package integration

import (
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nicpool/nicpool/cniplugin"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/testenv"
)

// TestNetworkPathsCannotReachTheHost: a network configuration (a tenant's
// NetworkAttachmentDefinition) aiming the root-run plugin's log or socket outside its
// directories, or through a symlink planted inside them, fails ADD with an error
// naming the key; the runtime's DEL then lets the pod go; and nothing outside was
// created, written or connected to.
func TestNetworkPathsCannotReachTheHost(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("path-pool", "10.77.20.0/24", []string{"10.77.20.10-10.77.20.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.20.1")))
	outside := filepath.Join(suite.work, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	precious := filepath.Join(outside, "precious")
	if err := os.WriteFile(precious, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listener, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(outside, "x.sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	plant := func(target, link string) {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(link) })
	}
	plant(precious, filepath.Join(suite.logDir, "planted.log"))
	plant(listener.Addr().String(), filepath.Join(suite.runDir, "planted.sock"))
	before, err := testenv.Snapshot(outside)
	if err != nil {
		t.Fatal(err)
	}

	for i, tt := range []struct {
		name, key, path string
	}{
		{"log file outside", "log_file_path", filepath.Join(outside, "new.log")},
		{"log file through a symlink", "log_file_path", cniplugin.LogDir + "/planted.log"},
		{"socket outside", "ipam_unix_socket_path", listener.Addr().String()},
		{"socket through a symlink", "ipam_unix_socket_path", cniplugin.RunDir + "/planted.sock"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			nw := newNetwork(t, fmt.Sprintf("path-net-%d", i), "1.1.0", map[string]any{"default_ipv4_ippool": []string{"path-pool"}, tt.key: tt.path})
			p := newPod(t, fmt.Sprintf("path-%d", i), nil)
			_, err := nw.add(p)
			if cniCode(err) != types.ErrInvalidNetworkConfig || !strings.Contains(err.Error(), "ipam."+tt.key) {
				t.Errorf("ADD: %v: want code %d naming ipam.%s", err, types.ErrInvalidNetworkConfig, tt.key)
			}
			if err := nw.del(p); err != nil {
				t.Errorf("DEL: %v: a refused path must not keep the pod from going", err)
			}
			if p.hasInterface(t) {
				t.Errorf("%s is still in the pod after DEL", podInterface)
			}
		})
	}
	if len(allocations(t, "path-pool")) != 0 {
		t.Errorf("a refused ADD allocated: %v", allocations(t, "path-pool"))
	}
	if after, err := testenv.Snapshot(outside); err != nil || !maps.Equal(before, after) {
		t.Errorf("outside the plugin's directories (%v):\nbefore %v\nafter  %v", err, before, after)
	}
	if connected, err := testenv.ConnectedTo(listener); err != nil || connected {
		t.Errorf("the plugin connected to a socket outside %s (%v)", cniplugin.RunDir, err)
	}
}

// TestSpiderpoolName: the binary installed as spiderpool serves networks written for
// spiderpool, keys and defaults included, so that the DELs a runtime cached for pods
// created under spiderpool release through nicpool: an address taken through the
// nicpool name is released through the spiderpool name, and the other way round.
func TestSpiderpoolName(t *testing.T) {
	defer dumpLog(t)
	fixtures.CreatePool(t, suite.env.Client, fixtures.Pool("spider-pool", "10.77.21.0/24", []string{"10.77.21.10-10.77.21.20"}, fixtures.VersionOfSubnet, fixtures.Gateway("10.77.21.1")))
	nicpoolNet := newNetwork(t, "spider-net", "0.3.1", map[string]any{"default_ipv4_ippool": []string{"spider-pool"}})
	// What spiderpool's SpiderMultusConfig or its documentation writes, with spiderpool's
	// own socket and log paths spelled out (they read as nicpool's defaults).
	spiderpoolNet := newNetwork(t, "spider-net", "0.3.0", map[string]any{
		"type":                  cniplugin.NameSpiderpool,
		"default_ipv4_ippool":   []string{"spider-pool"},
		"ipam_unix_socket_path": "/var/run/spidernet/spiderpool.sock",
		"log_file_path":         "/var/log/spidernet/spiderpool.log",
		"log_file_max_size":     100,
		"log_file_max_age":      30,
		"log_file_max_count":    7,
		"log_level":             "DEBUG",
		"match_master_subnet":   false,
	})

	// The host may hold spiderpool's log from spiderpool itself: what counts is that
	// these calls neither create nor write it.
	const spiderpoolLog = "/var/log/spidernet/spiderpool.log"
	logBefore := fileState(spiderpoolLog)

	for _, tt := range []struct {
		name, pod string
		add, del  *network
	}{
		{"ADD as nicpool, DEL as spiderpool", "spider-a", nicpoolNet, spiderpoolNet},
		{"ADD as spiderpool, DEL as spiderpool", "spider-b", spiderpoolNet, spiderpoolNet},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod(t, tt.pod, nil)
			addr := addressOf(t, tt.add.mustAdd(t, p)).Addr().String()
			if a := allocations(t, "spider-pool")[addr]; a.PodUID != string(p.obj.UID) || a.Interface != podInterface {
				t.Fatalf("spider-pool records %s as %+v", addr, a)
			}
			if err := tt.del.del(p); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			if a, ok := allocations(t, "spider-pool")[addr]; ok {
				t.Errorf("spider-pool still records %s for %+v after DEL", addr, a)
			}
			if p.hasInterface(t) {
				t.Errorf("%s is still in the pod after DEL", podInterface)
			}
		})
	}
	if after := fileState(spiderpoolLog); after != logBefore {
		t.Errorf("the plugin wrote spiderpool's log path on the host: %s before, %s after", logBefore, after)
	}
}

// fileState describes a host file by existence, size and modification time.
func fileState(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "absent"
	}
	return fmt.Sprintf("%d bytes, modified %s", st.Size(), st.ModTime().Format(time.RFC3339Nano))
}
