package api

import (
	"bufio"
	"bytes"
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

// Client calls ipamd over its unix socket.
//
// It speaks just enough HTTP for ipamd's endpoints, without net/http: nicpool-cni is
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

// ErrUnreachable wraps every failure to reach ipamd (no socket, refused, timeout).
var ErrUnreachable = errors.New("ipamd unreachable")

// maxAnswer bounds the answer read from ipamd (headers and body).
const maxAnswer = 4 << 20

func (c *Client) Allocate(ctx context.Context, req *AllocateRequest) (*AllocateResponse, error) {
	return call[AllocateResponse](ctx, c, PathAllocate, req)
}

func (c *Client) Release(ctx context.Context, req *ReleaseRequest) (*ReleaseResponse, error) {
	return call[ReleaseResponse](ctx, c, PathRelease, req)
}

func (c *Client) Check(ctx context.Context, req *CheckRequest) (*CheckResponse, error) {
	return call[CheckResponse](ctx, c, PathCheck, req)
}

func (c *Client) GC(ctx context.Context, req *GCRequest) (*GCResponse, error) {
	return call[GCResponse](ctx, c, PathGC, req)
}

func (c *Client) Status(ctx context.Context, req *StatusRequest) (*StatusResponse, error) {
	return call[StatusResponse](ctx, c, PathStatus, req)
}

// call posts req and decodes the answer: the response type on 200, an *Error otherwise.
func call[Resp any](ctx context.Context, c *Client, path string, req any) (*Resp, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, &Error{Code: CodeInternal, Message: "encode the " + path + " request", Details: err.Error()}
	}
	status, data, err := c.post(ctx, path, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	if status != 200 {
		e := &Error{}
		if jerr := json.Unmarshal(data, e); jerr != nil || e.Message == "" {
			return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("ipamd answered %s with HTTP %d", path, status), Details: string(data)}
		}
		return nil, e
	}
	out := new(Resp)
	if err := json.Unmarshal(data, out); err != nil {
		return nil, &Error{Code: CodeDecodingFailure, Message: "undecodable answer from ipamd", Details: err.Error()}
	}
	return out, nil
}

// post sends one request on a new connection and reads the whole answer, all within
// the client's timeout and ctx.
func (c *Client) post(ctx context.Context, path string, body []byte) (status int, data []byte, err error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return 0, nil, err
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
			err = fmt.Errorf("%s: %w", path, ctx.Err())
		case errors.Is(err, os.ErrDeadlineExceeded): // the connection's deadline is ctx's
			err = fmt.Errorf("%s: %w", path, context.DeadlineExceeded)
		}
	}()

	var req bytes.Buffer
	fmt.Fprintf(&req, "POST %s HTTP/1.0\r\nHost: ipamd\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, len(body))
	if deadline, ok := ctx.Deadline(); ok {
		fmt.Fprintf(&req, "%s: %d\r\n", HeaderTimeout, max(time.Until(deadline).Milliseconds(), 1))
	}
	req.WriteString("\r\n")
	req.Write(body)
	if _, err := conn.Write(req.Bytes()); err != nil {
		return 0, nil, fmt.Errorf("send %s request: %w", path, err)
	}
	return readAnswer(bufio.NewReader(io.LimitReader(conn, maxAnswer+1)), path)
}

// readAnswer reads an HTTP/1.x answer: status line, headers, and the body, as long as
// Content-Length says or up to the end of the stream.
func readAnswer(r *bufio.Reader, path string) (int, []byte, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, nil, fmt.Errorf("read %s answer: %w", path, noEOF(err))
	}
	proto, rest, _ := strings.Cut(strings.TrimRight(line, "\r\n"), " ")
	code, _, _ := strings.Cut(rest, " ")
	status, err := strconv.Atoi(code)
	if !strings.HasPrefix(proto, "HTTP/1.") || err != nil || status < 100 || status > 999 {
		return 0, nil, fmt.Errorf("read %s answer: not an HTTP answer: %.100q", path, line)
	}
	length := -1
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, nil, fmt.Errorf("read %s answer's headers: %w", path, noEOF(err))
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		name, value, _ := strings.Cut(line, ":")
		switch value = strings.TrimSpace(value); {
		case strings.EqualFold(name, "Content-Length"):
			if length, err = strconv.Atoi(value); err != nil || length < 0 {
				return 0, nil, fmt.Errorf("read %s answer: Content-Length %.40q", path, value)
			}
		case strings.EqualFold(name, "Transfer-Encoding") && !strings.EqualFold(value, "identity"):
			return 0, nil, fmt.Errorf("read %s answer: Transfer-Encoding %.40q, which an HTTP/1.0 request does not take", path, value)
		}
	}
	var data []byte
	if length >= 0 {
		if length > maxAnswer {
			return 0, nil, fmt.Errorf("read %s answer: %d bytes, more than %d", path, length, maxAnswer)
		}
		data = make([]byte, length)
		if _, err := io.ReadFull(r, data); err != nil {
			return 0, nil, fmt.Errorf("read %s answer: %w", path, noEOF(err))
		}
	} else if data, err = io.ReadAll(r); err != nil {
		return 0, nil, fmt.Errorf("read %s answer: %w", path, err)
	}
	if len(data) > maxAnswer {
		return 0, nil, fmt.Errorf("read %s answer: more than %d bytes", path, maxAnswer)
	}
	return status, data, nil
}

// noEOF says that the answer was cut short rather than that it ended.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
