package cniplugin

import (
	"bytes"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nicpool/nicpool/cniplugin/cni"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/api"
)

// hostileHost is a stand-in for a node's filesystem: the plugin's two directories
// (relocated by the environment) with things planted in them, and files elsewhere
// that a network configuration must never reach.
type hostileHost struct {
	runDir, logDir, outside string
	// outsideSocket listens outside the run directory, where no plugin may connect.
	outsideSocket *net.UnixListener
	ipamd         *fakeIPAMD
}

func newHostileHost(t *testing.T) *hostileHost {
	t.Helper()
	f := startFakeIPAMD(t)
	f.answer("DEL", 200, api.ReleaseResponse{})
	root, err := os.MkdirTemp("", "nicpool-host-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	h := &hostileHost{runDir: filepath.Dir(f.socket), logDir: filepath.Join(root, "log"), outside: filepath.Join(root, "outside"), ipamd: f}
	t.Setenv(EnvLogDir, h.logDir)
	for _, d := range []string{h.logDir, h.outside, filepath.Join(h.outside, "dir")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	precious := filepath.Join(h.outside, "precious")
	must(t, os.WriteFile(precious, []byte("precious\n"), 0o600))
	h.outsideSocket, err = net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(h.outside, "x.sock"), Net: "unix"})
	must(t, err)
	t.Cleanup(func() { _ = h.outsideSocket.Close() })

	// What someone with a foothold in the directories could plant.
	must(t, os.Symlink(precious, filepath.Join(h.logDir, "evil.log")))
	must(t, os.Symlink(filepath.Join(h.outside, "dir"), filepath.Join(h.logDir, "sub")))
	must(t, os.Link(precious, filepath.Join(h.logDir, "hard.log")))
	must(t, syscall.Mkfifo(filepath.Join(h.logDir, "fifo.log"), 0o600))
	must(t, os.Mkdir(filepath.Join(h.logDir, "dir.log"), 0o755))
	must(t, os.Symlink(filepath.Join(h.outside, "x.sock"), filepath.Join(h.runDir, "evil.sock")))
	must(t, os.Symlink(h.outside, filepath.Join(h.runDir, "sub")))
	must(t, os.WriteFile(filepath.Join(h.runDir, "file.sock"), nil, 0o600))
	return h
}

func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	s, err := testenv.Snapshot(dir)
	must(t, err)
	return s
}

func connectedTo(t *testing.T, l *net.UnixListener) bool {
	t.Helper()
	connected, err := testenv.ConnectedTo(l)
	must(t, err)
	return connected
}

// TestHostilePathsTouchNothing: a network configuration aiming log_file_path or
// ipam_unix_socket_path outside the plugin's directories, or through what is planted
// inside them, is refused by every verb but DEL with a CNI error naming the key, and
// nothing outside is created, renamed, written or connected to. DEL succeeds without
// the refused key, so that the pod can go.
func TestHostilePathsTouchNothing(t *testing.T) {
	h := newHostileHost(t)
	before := snapshot(t, h.outside)
	tests := []struct {
		name, key, path string
	}{
		{"log file outside", "log_file_path", filepath.Join(h.outside, "new.log")},
		{"log file through a symlink", "log_file_path", LogDir + "/evil.log"},
		{"log file in a symlinked directory", "log_file_path", LogDir + "/sub/new.log"},
		{"log file with another hard link", "log_file_path", LogDir + "/hard.log"},
		{"log file that is a FIFO", "log_file_path", LogDir + "/fifo.log"},
		{"log file that is a directory", "log_file_path", LogDir + "/dir.log"},
		{"socket outside", "ipam_unix_socket_path", filepath.Join(h.outside, "x.sock")},
		{"socket through a symlink", "ipam_unix_socket_path", RunDir + "/evil.sock"},
		{"socket in a symlinked directory", "ipam_unix_socket_path", RunDir + "/sub/x.sock"},
		{"socket that is a regular file", "ipam_unix_socket_path", RunDir + "/file.sock"},
	}
	prevResult := `"prevResult":{"cniVersion":"1.1.0","ips":[{"address":"10.6.0.7/16"}]}`
	p := process(io.Discard, "").RelayFuncs()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdin := []byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"nicpool","request_timeout":1,"` + tt.key + `":"` + tt.path + `"},"cni.dev/valid-attachments":[],` + prevResult + `}`)
			for verb, fn := range map[string]func(*cni.CmdArgs) error{"ADD": p.Add, "CHECK": p.Check, "GC": p.GC, "STATUS": p.Status} {
				err := fn(cmdArgs(stdin))
				if cniCode(err) != types.ErrInvalidNetworkConfig || !strings.Contains(err.Error(), "ipam."+tt.key) {
					t.Errorf("%s: %v: want code %d naming ipam.%s", verb, err, types.ErrInvalidNetworkConfig, tt.key)
				}
			}
			if err := p.Del(cmdArgs(stdin)); err != nil {
				t.Errorf("DEL: %v: want success without the refused key", err)
			}
		})
	}
	if after := snapshot(t, h.outside); !maps.Equal(before, after) {
		t.Errorf("files outside the plugin's directories changed:\nbefore %v\nafter  %v", before, after)
	}
	if connectedTo(t, h.outsideSocket) {
		t.Errorf("the plugin connected to a socket outside %s", RunDir)
	}
}

// A refused log file does not keep DEL from releasing through ipamd.
func TestDelWithARefusedLogFileStillReleases(t *testing.T) {
	h := newHostileHost(t)
	stdin := []byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"nicpool","log_file_path":"` + LogDir + `/evil.log"}}`)
	if err := process(io.Discard, "").RelayFuncs().Del(cmdArgs(stdin)); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	var req api.ReleaseRequest
	if !h.ipamd.request(t, "DEL", &req) || req.Interface != "net1" {
		t.Errorf("DEL did not release through ipamd: %+v", req)
	}
	if data, _ := os.ReadFile(filepath.Join(h.outside, "precious")); string(data) != "precious\n" {
		t.Errorf("the symlink's target was written: %q", data)
	}
}

// A log file past maxLogSize is renamed beside itself, in the log directory, and a new
// one started.
func TestLogRotatesWithinItsDirectory(t *testing.T) {
	h := newHostileHost(t)
	big := bytes.Repeat([]byte("x"), maxLogSize+1)
	must(t, os.WriteFile(filepath.Join(h.logDir, "cni.log"), big, 0o644))
	stdin := []byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"nicpool","log_file_path":"` + LogDir + `/cni.log"}}`)
	if err := process(io.Discard, "").RelayFuncs().Del(cmdArgs(stdin)); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	old, err := os.Stat(filepath.Join(h.logDir, "cni.log.1"))
	if err != nil || old.Size() != int64(len(big)) {
		t.Fatalf("rotated file: %v, %v", old, err)
	}
	cur, err := os.ReadFile(filepath.Join(h.logDir, "cni.log"))
	if err != nil || !bytes.Contains(cur, []byte(`"verb":"DEL"`)) || len(cur) > 4096 {
		t.Errorf("new log file: %v, %d bytes", err, len(cur))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// countDirs counts the directories beneath dir (dir itself excluded).
func countDirs(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	must(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != dir {
			n++
		}
		return nil
	}))
	return n
}

// TestDeepLogFilePathCreatesAtMostOneDirectory: the plugin runs as root, and a
// log_file_path 40 directories deep made it create each of them. ADD refuses such a
// path with an error naming the key and DEL goes on without it; neither creates a
// directory. A path one directory deep creates that one directory.
func TestDeepLogFilePathCreatesAtMostOneDirectory(t *testing.T) {
	h := newHostileHost(t)
	h.ipamd.answer("ADD", 200, api.AllocateResponse{Interface: "net1", IPs: []api.IPConfig{{Address: "10.6.0.7/16", Pool: "v4"}}})
	before := countDirs(t, h.logDir)
	deep := LogDir + strings.Repeat("/d", 40) + "/x.log"
	stdin := []byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"nicpool","log_file_path":"` + deep + `"}}`)
	p := process(io.Discard, "").RelayFuncs()
	if err := p.Add(cmdArgs(stdin)); cniCode(err) != types.ErrInvalidNetworkConfig || !strings.Contains(err.Error(), "ipam.log_file_path") || !strings.Contains(err.Error(), "one subdirectory") {
		t.Errorf("ADD: %v: want code %d naming ipam.log_file_path and saying how deep a path may be", err, types.ErrInvalidNetworkConfig)
	}
	if err := p.Del(cmdArgs(stdin)); err != nil {
		t.Errorf("DEL: %v: want success without the refused key", err)
	}
	if got := countDirs(t, h.logDir) - before; got != 0 {
		t.Errorf("a %d-level log_file_path created %d directories", 40, got)
	}
	long := LogDir + "/" + strings.Repeat("n", cni.MaxLogName+1)
	if err := p.Add(cmdArgs([]byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"nicpool","log_file_path":"` + long + `"}}`))); cniCode(err) != types.ErrInvalidNetworkConfig {
		t.Errorf("ADD with a %d-byte name: %v: want code %d", cni.MaxLogName+1, err, types.ErrInvalidNetworkConfig)
	}

	one := []byte(`{"cniVersion":"1.1.0","name":"n","ipam":{"type":"nicpool","log_file_path":"` + LogDir + `/net1/cni.log"}}`)
	if err := p.Add(cmdArgs(one)); err != nil {
		t.Fatalf("ADD with a log one directory deep: %v", err)
	}
	if got := countDirs(t, h.logDir) - before; got != 1 {
		t.Errorf("a log one directory deep created %d directories, want 1", got)
	}
	if _, err := os.Stat(filepath.Join(h.logDir, "net1", "cni.log")); err != nil {
		t.Errorf("log file: %v", err)
	}
}
