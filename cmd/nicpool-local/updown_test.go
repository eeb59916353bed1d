package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nicpool/nicpool/docs"
	"github.com/nicpool/nicpool/e2e/testenv"
)

// TestUpAndDown runs what README's `make up` and `make down` run (this command's up
// and down verbs, built as `make local` builds it, from a folder of the test's own so
// that its state is that folder's .local) and checks that each prints what README
// shows for it: the per-interface table with every pod Running, where the kubeconfig
// and logs are, the background process, and after down that nothing was left behind.
func TestUpAndDown(t *testing.T) {
	root := testenv.RepoRoot()
	shown := readmeOutputs(t, root)

	bin := filepath.Join(t.TempDir(), "nicpool-local")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/nicpool-local: %v\n%s", err, out)
	}
	work := t.TempDir()
	verb := func(name string) (string, error) {
		cmd := exec.Command(bin, name)
		cmd.Dir = work
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		// A failed test still stops its cluster; down with nothing running only sweeps.
		if out, err := verb("down"); err != nil {
			t.Logf("down after the test: %v\n%s", err, out)
		}
	})

	up, err := verb("up")
	if err != nil {
		t.Fatalf("make up: %v\n%s", err, up)
	}
	pid := backgroundPid(t, up)
	checkShown(t, "make up", shown["make up"], up)
	if strings.Contains(up, "goroutine ") {
		t.Errorf("make up printed a goroutine's stack:\n%s", up)
	}
	if again, err := verb("up"); err == nil || !strings.Contains(again, "already running (pid "+strconv.Itoa(pid)+")") {
		t.Errorf("a second make up while the cluster runs: want it refused naming pid %d, got err %v:\n%s", pid, err, again)
	}

	down, err := verb("down")
	if err != nil {
		t.Fatalf("make down: %v\n%s", err, down)
	}
	checkShown(t, "make down", shown["make down"], down)
	if !strings.Contains(down, "stopped local cluster (pid "+strconv.Itoa(pid)+")") {
		t.Errorf("make down: want it to name the process make up started (pid %d):\n%s", pid, down)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("make down returned while the cluster's process %d still runs", pid)
	}
	if again, err := verb("down"); err != nil || !strings.Contains(again, "no local cluster running") {
		t.Errorf("make down with nothing running: want \"no local cluster running\", got err %v:\n%s", err, again)
	}
}

// readmeOutputs are the outputs README shows for `make up` and `make down`.
func readmeOutputs(t *testing.T, root string) map[string][]string {
	t.Helper()
	cmds, err := docs.Commands(root, docs.Make)
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string][]string{}
	for _, c := range cmds {
		if c.Line == "make up" || c.Line == "make down" {
			shown[c.Line] = c.Output
		}
	}
	for _, line := range []string{"make up", "make down"} {
		if len(shown[line]) == 0 {
			t.Fatalf("README shows no output for `%s` in a block marked <!-- run: make -->", line)
		}
	}
	return shown
}

var backgroundLine = regexp.MustCompile(`running in the background \(pid (\d+), log `)

func backgroundPid(t *testing.T, out string) int {
	t.Helper()
	m := backgroundLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("make up: no \"running in the background (pid N, log …)\" line:\n%s", out)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// checkShown checks that every line README shows for a command is printed by it, in
// order, once what differs from run to run is set aside: process ids, a table's
// spacing, the node each pod landed on and the addresses it got ("..." in README
// stands for lines it leaves out; a line starting "go run" is make echoing its recipe).
func checkShown(t *testing.T, what string, shown []string, out string) {
	t.Helper()
	got := strings.Split(out, "\n")
	for i := range got {
		got[i] = comparable(got[i])
	}
	at := 0
	for _, line := range shown {
		if line == "..." || strings.HasPrefix(line, "go run ") {
			continue
		}
		want := comparable(line)
		j := slices.Index(got[at:], want)
		if j < 0 {
			t.Errorf("%s: README shows %q, which it does not print (after line %d; compared as %q):\n%s", what, line, at, want, out)
			return
		}
		at += j + 1
	}
}

var (
	pidNumber = regexp.MustCompile(`pid \d+`)
	podRow    = regexp.MustCompile(`^(\S+/\S+)\s+\S+\s+(\S+)\s+(\S+)\s+(\S+)\s+\S+\s+(\S+)$`)
)

// comparable is a line with what varies between runs replaced: a pod row keeps its
// pod, status, interface, network and pools; a pid becomes "pid N".
func comparable(line string) string {
	line = strings.TrimSpace(line)
	if m := podRow.FindStringSubmatch(line); m != nil {
		return strings.Join([]string{m[1], "NODE", m[2], m[3], m[4], "ADDRESSES", m[5]}, " ")
	}
	line = pidNumber.ReplaceAllString(line, "pid N")
	return strings.Join(strings.Fields(line), " ")
}
