package fabric

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
)

func TestNodesOnOneNetworkReachEachOther(t *testing.T) {
	f, err := New("eth0", "eth1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
		if left := Leftovers(); len(left) > 0 {
			t.Errorf("namespaces left after Close: %v", left)
		}
	})
	a, err := f.AddNode("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.AddNode("b")
	if err != nil {
		t.Fatal(err)
	}
	// Addresses inside the test's own node namespaces only.
	for i, n := range []*Node{a, b} {
		if err := ip("-n", n.Namespace, "addr", "add", fmt.Sprintf("192.168.77.%d/24", i+1), "dev", "eth1"); err != nil {
			t.Fatal(err)
		}
	}
	var l net.Listener
	if err := inNamespace(a, func() error {
		var err error
		l, err = net.Listen("tcp", "192.168.77.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	greetOnce(l, func(net.Conn) string { return "hello from a" })
	got, err := lineFrom(b, l.Addr().String())
	if err != nil {
		t.Fatalf("node b cannot reach node a over eth1: %v", err)
	}
	if got != "hello from a\n" {
		t.Fatalf("got %q", got)
	}
}

// A server of this process listening on a network's gateway in the fabric answers
// the nodes of that network, and sees each at its own address.
func TestNodesReachWhatListensOnTheGateway(t *testing.T) {
	f, err := New("eth0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := f.Route("eth0", netip.MustParsePrefix("192.168.78.1/24")); err != nil {
		t.Fatal(err)
	}
	a, err := f.AddNode("a")
	if err != nil {
		t.Fatal(err)
	}
	if err := ip("-n", a.Namespace, "addr", "add", "192.168.78.9/24", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	l, err := f.Listen("192.168.78.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	greetOnce(l, func(c net.Conn) string { return fmt.Sprint("hello ", c.RemoteAddr().(*net.TCPAddr).IP) })
	got, err := lineFrom(a, l.Addr().String())
	if err != nil {
		t.Fatalf("node a cannot reach %s on the fabric: %v", l.Addr(), err)
	}
	if got != "hello 192.168.78.9\n" {
		t.Fatalf("got %q, want the server to greet node a by its address", got)
	}
}

func TestSweepRemovesOnlyNamespacesOfExitedRuns(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf("%s%d-node-x", NamespacePrefix, gone.Process.Pid)
	mine := namespaceName("node-y")
	for _, name := range []string{stale, mine} {
		if err := ip("netns", "add", name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = DeleteNamespace(name) })
	}
	if err := Sweep(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(namespaceDir, stale)); !os.IsNotExist(err) {
		t.Errorf("namespace %s of an exited run survived Sweep", stale)
	}
	if !slices.Contains(Leftovers(), mine) {
		t.Errorf("Sweep removed %s of this live run", mine)
	}
}

func inNamespace(n *Node, fn func() error) error {
	netns, err := ns.GetNS(n.Path)
	if err != nil {
		return err
	}
	defer netns.Close()
	return netns.Do(func(ns.NetNS) error { return fn() })
}

// greetOnce answers the first connection to l with the line greeting gives it.
func greetOnce(l net.Listener, greeting func(net.Conn) string) {
	go func() {
		c, err := l.Accept()
		if err == nil {
			fmt.Fprintln(c, greeting(c))
			c.Close()
		}
	}()
}

// lineFrom connects from inside node n to addr and reads one line.
func lineFrom(n *Node, addr string) (line string, err error) {
	err = inNamespace(n, func() error {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		line, err = bufio.NewReader(c).ReadString('\n')
		return err
	})
	return line, err
}
