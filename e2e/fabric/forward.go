package fabric

import (
	"context"
	"io"
	"net"
	"sync"

	"github.com/containernetworking/plugins/pkg/ns"
)

// Forward listens on a loopback port inside the node's namespace and relays every
// connection to target, an address reachable from this process's own namespace.
// Programs the node runs inside its namespace (Multus) reach the API server this way.
// It returns the address to use inside the namespace; closing the listener stops it.
func (n *Node) Forward(target string) (string, io.Closer, error) {
	return forward(n.Path, "127.0.0.1:0", target)
}

// Forward listens on listen inside the fabric's namespace (the address of one of its
// gateways, port 0 for any) and relays every connection to target, as Node.Forward.
func (f *Fabric) Forward(listen, target string) (string, io.Closer, error) {
	return forward(f.Path(), listen, target)
}

// DialContext connects from inside the fabric's namespace, where the networks'
// gateways are: what a router of the fabric would reach.
func (f *Fabric) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	netns, err := ns.GetNS(f.Path())
	if err != nil {
		return nil, err
	}
	defer netns.Close()
	var c net.Conn
	err = netns.Do(func(ns.NetNS) error {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// Listen listens on address inside the fabric's namespace (the address of one of
// its gateways): what the nodes reach there, a server of this process serves.
func (f *Fabric) Listen(address string) (net.Listener, error) {
	return listen(f.Path(), address)
}

func listen(path, address string) (net.Listener, error) {
	netns, err := ns.GetNS(path)
	if err != nil {
		return nil, err
	}
	defer netns.Close()
	var l net.Listener
	// The socket belongs to the namespace it was created in, whatever thread later
	// accepts on it.
	err = netns.Do(func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp", address)
		return err
	})
	return l, err
}

func forward(path, address, target string) (string, io.Closer, error) {
	l, err := listen(path, address)
	if err != nil {
		return "", nil, err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go relay(c, target)
		}
	}()
	return l.Addr().String(), l, nil
}

func relay(in net.Conn, target string) {
	defer in.Close()
	out, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer out.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(out, in)
		_ = out.(*net.TCPConn).CloseWrite()
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(in, out)
		_ = in.(*net.TCPConn).CloseWrite()
	}()
	wg.Wait()
}
