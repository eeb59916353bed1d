package kubelet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// EgressProxy is the API server's way into the cluster network, as konnectivity is
// in clusters whose control plane sits outside the pod network: the API server's
// egress selector sends every connection to the cluster (webhooks, kubelets) as an
// HTTP CONNECT through it, and it dials from the network's router, where kube-proxy
// maps Service addresses to pods. The webhook is so reached through its Service.
type EgressProxy struct {
	l    net.Listener
	dial func(ctx context.Context, network, address string) (net.Conn, error)

	mu      sync.Mutex
	targets map[string]int
}

// StartEgressProxy listens on the unix socket path and dials with dial. (A TCP
// transport without TLS passes kube-apiserver v1.37's validation but crashes it.)
func StartEgressProxy(path string, dial func(ctx context.Context, network, address string) (net.Conn, error)) (*EgressProxy, error) {
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	p := &EgressProxy{l: l, dial: dial, targets: map[string]int{}}
	go p.serve()
	return p, nil
}

// Targets counts the connections asked for per destination ("10.0.0.17:443").
func (p *EgressProxy) Targets() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.targets))
	for k, v := range p.targets {
		out[k] = v
	}
	return out
}

// WriteConfig writes the API server's EgressSelectorConfiguration (flag
// --egress-selector-config-file) sending the "cluster" egress through the proxy.
func (p *EgressProxy) WriteConfig(path string) error {
	return os.WriteFile(path, fmt.Appendf(nil, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, p.l.Addr()), 0o644)
}

// Close stops accepting connections.
func (p *EgressProxy) Close() error { return p.l.Close() }

func (p *EgressProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *EgressProxy) handle(c net.Conn) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	req, err := http.ReadRequest(r)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		_, _ = fmt.Fprintf(c, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	p.mu.Lock()
	p.targets[req.Host]++
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	out, err := p.dial(ctx, "tcp", req.Host)
	cancel()
	if err != nil {
		_, _ = fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n%v", err)
		return
	}
	defer out.Close()
	_ = c.SetReadDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		// What the client sent after its request is in r's buffer.
		_, _ = io.Copy(out, r)
		if cw, ok := out.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(c, out)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}
