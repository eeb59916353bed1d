package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Client calls ipamd over its unix socket.
type Client struct {
	http *http.Client
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
	tr := &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableKeepAlives: true,
	}
	return &Client{http: &http.Client{Transport: tr, Timeout: timeout}}
}

// ErrUnreachable wraps every failure to reach ipamd (no socket, refused, timeout).
var ErrUnreachable = errors.New("ipamd unreachable")

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
		return nil, fmt.Errorf("encode %s request: %w", path, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://ipamd"+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hresp, err := c.http.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hresp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: read %s answer: %w", ErrUnreachable, path, err)
	}
	if hresp.StatusCode != http.StatusOK {
		e := &Error{}
		if jerr := json.Unmarshal(data, e); jerr != nil || e.Message == "" {
			return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("ipamd answered %s with HTTP %d", path, hresp.StatusCode), Details: string(data)}
		}
		return nil, e
	}
	out := new(Resp)
	if err := json.Unmarshal(data, out); err != nil {
		return nil, &Error{Code: CodeDecodingFailure, Message: "undecodable answer from ipamd", Details: err.Error()}
	}
	return out, nil
}
