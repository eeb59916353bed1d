package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Client calls ipamd over its unix socket, as the front does: each call is one CNI
// call in a frame, posted to PathCNI (Call). nicpool-cni sends the calls it serves
// with it; nicpool's tools and tests use its verbs (Allocate, Release, Status), which
// build the frame a runtime's call would carry.
//
// It speaks just enough HTTP for ipamd's one endpoint, without net/http: nicpool-cni is
// one process per CNI call the front hands it, and net/http (with the TLS,
// compression and MIME packages it links) costs every start: measured with
// BenchmarkExecAddHandedOff (cmd/nicpool-cni, 300 runs, load 1.2), a handed-off ADD
// took 2.7 ms of CPU and 325 page faults with this client, 3.8 ms and 424 with
// net/http's, and the binary doubled (3.2 to 6.6 MB). TestClientSpeaksNetHTTP holds
// it to net/http's server. Each call is one
// HTTP/1.0 request on a connection of its own; the answer's body ends where its
// Content-Length says or where ipamd closes the connection (no chunked encoding is
// sent to an HTTP/1.0 client), so any HTTP server can answer it.
type Client struct {
	dial    func(ctx context.Context) (net.Conn, error)
	timeout time.Duration
}

// NewClient returns a client for the socket at path; timeout bounds each call.
func NewClient(path string, timeout time.Duration) *Client {
	return NewClientDial(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}, timeout)
}

// NewClientDial returns a client that reaches ipamd through dial, once per call: for a
// caller that must decide how the socket is opened (the CNI plugin follows no
// symlink to it). A dial error is reported as ErrUnreachable, wrapping dial's error.
func NewClientDial(dial func(ctx context.Context) (net.Conn, error), timeout time.Duration) *Client {
	return &Client{dial: dial, timeout: timeout}
}

// ErrUnreachable wraps every failure to get ipamd's whole answer (no socket, refused,
// dropped, a timeout, an answer cut short or not an answer to a frame).
var ErrUnreachable = errors.New("ipamd unreachable")

// HandBack is ipamd's answer StatusHandBack: it did not run the call, for Reason.
type HandBack struct{ Reason string }

func (h *HandBack) Error() string { return "ipamd handed the call back: " + h.Reason }

// maxAnswer bounds the answer read from ipamd (headers and body).
const maxAnswer = 4 << 20

// Call sends one CNI call as a frame to PathCNI and returns ipamd's answer: what the
// plugin printed and its exit code. A *HandBack when ipamd declines it; ErrUnreachable
// (wrapping the cause) when its whole answer does not arrive.
func (c *Client) Call(ctx context.Context, f *Frame) (*Answer, error) {
	status, head, data, err := c.post(ctx, FrameRequest(f))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	switch status {
	case 200:
	case StatusHandBack:
		return nil, &HandBack{Reason: strings.TrimSpace(string(data))}
	default:
		return nil, fmt.Errorf("%w: ipamd answered %s with HTTP %d: %.200s", ErrUnreachable, PathCNI, status, data)
	}
	exit, err1 := strconv.Atoi(head[HeaderExit])
	stdout, err2 := strconv.Atoi(head[HeaderStdout])
	if err1 != nil || err2 != nil || stdout < 0 || stdout > len(data) {
		return nil, fmt.Errorf("%w: ipamd's answer lacks %s or %s, or says more stdout than its %d bytes", ErrUnreachable, HeaderExit, HeaderStdout, len(data))
	}
	return &Answer{Exit: exit, Stdout: data[:stdout], Stderr: data[stdout:]}, nil
}

// The verbs below are for nicpool's own tools and tests: each sends the CNI call a
// runtime would make for its request, with a configuration of only what the request
// says (Conf), and reads the answer back. The answer is the CNI plugin's: ADD's
// result has addresses, gateways and routes but not the pools or VLANs the
// addresses came from; DEL's says nothing of what was released; STATUS's only
// whether ADD can succeed and, when not, why.

// ClientPath is the CNI_PATH the Go client's calls carry (the plugin requires one and
// uses none).
const ClientPath = "/opt/cni/bin"

// ClientNetNS stands for CNI_NETNS in a Go client's ADD whose request names none.
const ClientNetNS = "/var/run/netns/nicpool-api-client"

func (c *Client) frame(ctx context.Context, verb string, a Attachment, netns string, pod Pod, conf *Conf) *Frame {
	if conf.CNIVersion == "" {
		conf.CNIVersion = "1.1.0"
	}
	conf.IPAM.Type = "nicpool"
	// The plugin bounds the call by request_timeout: the client's, within its bounds.
	bound := c.timeout
	if deadline, ok := ctx.Deadline(); ok && (bound == 0 || time.Until(deadline) < bound) {
		bound = time.Until(deadline)
	}
	if bound > 0 {
		conf.IPAM.RequestTimeout = min(max(bound, MinRequestTimeout), MaxRequestTimeout).String()
	}
	stdin, _ := json.Marshal(conf) // strings, lists and a raw message: it cannot fail
	var args []string
	for _, kv := range [][2]string{{"K8S_POD_NAMESPACE", pod.Namespace}, {"K8S_POD_NAME", pod.Name}, {"K8S_POD_UID", pod.UID}} {
		if kv[1] != "" {
			args = append(args, kv[0]+"="+kv[1])
		}
	}
	relation := ""
	if netns != "" {
		relation = NetNSOther
	}
	return &Frame{Name: "nicpool", PID: os.Getpid(), NetNS: relation, Stdin: stdin, Env: map[string]string{
		"CNI_COMMAND": verb, "CNI_CONTAINERID": a.ContainerID, "CNI_NETNS": netns, "CNI_IFNAME": a.Interface,
		"CNI_ARGS": strings.Join(args, ";"), "CNI_PATH": ClientPath,
	}}
}

// run sends f and returns the plugin's stdout when it exited 0, else its CNI error.
func (c *Client) run(ctx context.Context, f *Frame) ([]byte, error) {
	a, err := c.Call(ctx, f)
	if err != nil {
		return nil, err
	}
	if a.Exit == 0 {
		return a.Stdout, nil
	}
	e := &Error{}
	if jerr := json.Unmarshal(a.Stdout, e); jerr != nil || e.Message == "" {
		return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("the plugin exited %d without a CNI error", a.Exit), Details: string(a.Stdout) + string(a.Stderr)}
	}
	return nil, e
}

// Allocate is CNI ADD of req's interface: its addresses, gateways and routes.
func (c *Client) Allocate(ctx context.Context, req *AllocateRequest) (*AllocateResponse, error) {
	netns := req.NetNS
	if netns == "" {
		netns = ClientNetNS
	}
	out, err := c.run(ctx, c.frame(ctx, "ADD", req.Attachment, netns, req.Pod, &Conf{Name: req.Network.Name, IPAM: ConfIPAM{
		DefaultIPv4Pools: req.Network.DefaultIPv4Pools, DefaultIPv6Pools: req.Network.DefaultIPv6Pools, CleanGateway: req.Network.CleanGateway,
	}}))
	if err != nil {
		return nil, err
	}
	var result struct {
		IPs []struct {
			Address string `json:"address"`
			Gateway string `json:"gateway"`
		} `json:"ips"`
		Routes []Route `json:"routes"`
	}
	if err := json.Unmarshal(out, &result); err != nil {
		return nil, &Error{Code: CodeDecodingFailure, Message: "undecodable result of ADD", Details: err.Error()}
	}
	resp := &AllocateResponse{Interface: req.Interface, Routes: result.Routes}
	for _, ip := range result.IPs {
		resp.IPs = append(resp.IPs, IPConfig{Address: ip.Address, Gateway: ip.Gateway})
	}
	return resp, nil
}

// Release is CNI DEL of req's interface.
func (c *Client) Release(ctx context.Context, req *ReleaseRequest) (*ReleaseResponse, error) {
	if _, err := c.run(ctx, c.frame(ctx, "DEL", req.Attachment, "", req.Pod, &Conf{Name: req.Network.Name})); err != nil {
		return nil, err
	}
	return &ReleaseResponse{}, nil
}

// Status is CNI STATUS of req's network: Ready, or not with the plugin's message.
func (c *Client) Status(ctx context.Context, req *StatusRequest) (*StatusResponse, error) {
	_, err := c.run(ctx, c.frame(ctx, "STATUS", Attachment{}, "", Pod{}, &Conf{Name: req.Network.Name, IPAM: ConfIPAM{
		DefaultIPv4Pools: req.Network.DefaultIPv4Pools, DefaultIPv6Pools: req.Network.DefaultIPv6Pools,
	}}))
	var e *Error
	if errors.As(err, &e) && e.Code == CodeNotAvailable {
		return &StatusResponse{Message: e.Message}, nil
	}
	if err != nil {
		return nil, err
	}
	return &StatusResponse{Ready: true}, nil
}

// post sends one request (FrameRequest) on a new connection and reads the whole
// answer, all within the client's timeout and ctx.
func (c *Client) post(ctx context.Context, req []byte) (status int, head map[string]string, data []byte, err error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return 0, nil, nil, err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	// A cancelled ctx (not only an expired one) ends the call too.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	defer func() {
		switch {
		case err == nil:
		case ctx.Err() != nil:
			err = fmt.Errorf("%s: %w", PathCNI, ctx.Err())
		case errors.Is(err, os.ErrDeadlineExceeded): // the connection's deadline is ctx's
			err = fmt.Errorf("%s: %w", PathCNI, context.DeadlineExceeded)
		}
	}()
	if _, err := conn.Write(req); err != nil {
		return 0, nil, nil, fmt.Errorf("send the frame: %w", err)
	}
	return readAnswer(bufio.NewReader(io.LimitReader(conn, maxAnswer+1)), PathCNI)
}

// readAnswer reads an HTTP/1.x answer: status line, the headers HeaderExit and
// HeaderStdout, and the body, as long as Content-Length says or up to the end of the
// stream.
func readAnswer(r *bufio.Reader, path string) (int, map[string]string, []byte, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, nil, nil, fmt.Errorf("read %s answer: %w", path, noEOF(err))
	}
	proto, rest, _ := strings.Cut(strings.TrimRight(line, "\r\n"), " ")
	code, _, _ := strings.Cut(rest, " ")
	status, err := strconv.Atoi(code)
	if !strings.HasPrefix(proto, "HTTP/1.") || err != nil || status < 100 || status > 999 {
		return 0, nil, nil, fmt.Errorf("read %s answer: not an HTTP answer: %.100q", path, line)
	}
	length := -1
	head := map[string]string{}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, nil, nil, fmt.Errorf("read %s answer's headers: %w", path, noEOF(err))
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		name, value, _ := strings.Cut(line, ":")
		switch value = strings.TrimSpace(value); {
		case strings.EqualFold(name, HeaderExit), strings.EqualFold(name, HeaderStdout):
			head[http1Name(name)] = value
		case strings.EqualFold(name, "Content-Length"):
			if length, err = strconv.Atoi(value); err != nil || length < 0 {
				return 0, nil, nil, fmt.Errorf("read %s answer: Content-Length %.40q", path, value)
			}
		case strings.EqualFold(name, "Transfer-Encoding") && !strings.EqualFold(value, "identity"):
			return 0, nil, nil, fmt.Errorf("read %s answer: Transfer-Encoding %.40q, which an HTTP/1.0 request does not take", path, value)
		}
	}
	var data []byte
	if length >= 0 {
		if length > maxAnswer {
			return 0, nil, nil, fmt.Errorf("read %s answer: %d bytes, more than %d", path, length, maxAnswer)
		}
		data = make([]byte, length)
		if _, err := io.ReadFull(r, data); err != nil {
			return 0, nil, nil, fmt.Errorf("read %s answer: %w", path, noEOF(err))
		}
	} else if data, err = io.ReadAll(r); err != nil {
		return 0, nil, nil, fmt.Errorf("read %s answer: %w", path, err)
	}
	if len(data) > maxAnswer {
		return 0, nil, nil, fmt.Errorf("read %s answer: more than %d bytes", path, maxAnswer)
	}
	return status, head, data, nil
}

// http1Name is one of the answer's own headers as this package spells it.
func http1Name(name string) string {
	if strings.EqualFold(name, HeaderExit) {
		return HeaderExit
	}
	return HeaderStdout
}

// noEOF says that the answer was cut short rather than that it ended.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
