package api

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// The frame: one CNI call as it is carried to PathCNI, the one request that drives
// ipamd's verbs: the plugin's front (cniplugin/front/nicpool.c) sends the runtime's
// call unparsed, nicpool-cni and Client send theirs with AppendFrame. This file is its
// one definition: the front writes what AppendFrame writes
// (TestFrontWritesTheGoEncodersBytes holds the two byte for byte), and ipamd reads it
// with DecodeFrame.
//
// A frame is a sequence of netstrings ("<decimal length>:<bytes>,"), in this order:
// the name the front was executed as, its pid, the CNI_* variables of FrameEnv (an
// unset one is empty), how CNI_NETNS relates to the front's own network namespace
// (NetNSSame, NetNSOther, NetNSNoSelf; empty when CNI_NETNS is), and stdin.
//
// ipamd answers a call it ran with 200, the plugin's stdout then its stderr as the
// body, and HeaderExit and HeaderStdout; with StatusHandBack for a call nicpool-cni
// must run (whatever else it answers, the front runs nicpool-cni too).

// FrameEnv are the CNI_* variables of a frame, in its order.
var FrameEnv = [...]string{"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS", "CNI_PATH", "CNI_NETNS_OVERRIDE"}

// How CNI_NETNS relates to the front's own network namespace.
const (
	NetNSSame   = "same"   // CNI_NETNS is the front's own namespace
	NetNSOther  = "other"  // another namespace, or a path that cannot be stated
	NetNSNoSelf = "noself" // the front's own namespace cannot be stated
)

// StatusHandBack is ipamd's answer to a call it does not run: the front runs
// nicpool-cni for it, with the same arguments, environment and stdin; nicpool-cni,
// which sends only what ipamd takes, fails the call (DEL lets the pod go).
// (421, Misdirected Request: net/http's name; this package links no net/http, so that
// nicpool-cni does not).
const StatusHandBack = 421

// Answer is ipamd's answer to a call of the front it served: what nicpool-cni would
// have printed on stdout and stderr, and its exit code.
type Answer struct {
	Exit           int
	Stdout, Stderr []byte
}

// MaxName bounds the name the front was run as.
const MaxName = 255

// frameFields is the number of netstrings in a frame.
const frameFields = 2 + len(FrameEnv) + 2

// Frame is one CNI call of the front.
type Frame struct {
	// Name is what the front was executed as (the base of its argv[0]).
	Name string
	// PID is the front's process, for the logs.
	PID int
	// Env holds the CNI_* variables of FrameEnv; unset ones are empty.
	Env map[string]string
	// NetNS is how CNI_NETNS relates to the front's own network namespace.
	NetNS string
	// Stdin is the network configuration.
	Stdin []byte
}

func appendNetstring(b []byte, s []byte) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	b = append(b, s...)
	return append(b, ',')
}

// AppendFrame appends f as the front writes it.
func AppendFrame(b []byte, f *Frame) []byte {
	b = appendNetstring(b, []byte(f.Name))
	b = appendNetstring(b, strconv.AppendInt(nil, int64(f.PID), 10))
	for _, name := range FrameEnv {
		b = appendNetstring(b, []byte(f.Env[name]))
	}
	b = appendNetstring(b, []byte(f.NetNS))
	return appendNetstring(b, f.Stdin)
}

// FrameRequest is the whole request the front sends for f: the HTTP/1.0 head, then
// the frame.
func FrameRequest(f *Frame) []byte {
	body := AppendFrame(nil, f)
	b := []byte("POST " + PathCNI + " HTTP/1.0\r\nHost: ipamd\r\nContent-Type: application/octet-stream\r\nContent-Length: ")
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}

// DecodeFrame reads a frame. Stdin is a slice of b.
func DecodeFrame(b []byte) (*Frame, error) {
	fields := make([][]byte, 0, frameFields)
	for len(b) > 0 {
		colon := bytes.IndexByte(b, ':')
		if colon <= 0 || colon > 10 {
			return nil, errors.New("a field has no length")
		}
		n := 0
		for _, d := range b[:colon] {
			if d < '0' || d > '9' {
				return nil, fmt.Errorf("field %d's length %q is not a number", len(fields), b[:colon])
			}
			n = n*10 + int(d-'0')
		}
		rest := b[colon+1:]
		if n >= len(rest) || rest[n] != ',' {
			return nil, fmt.Errorf("field %d is cut short", len(fields))
		}
		if len(fields) == frameFields {
			return nil, fmt.Errorf("%d fields, want %d", len(fields)+1, frameFields)
		}
		fields = append(fields, rest[:n])
		b = rest[n+1:]
	}
	if len(fields) != frameFields {
		return nil, fmt.Errorf("%d fields, want %d", len(fields), frameFields)
	}
	pid, err := strconv.Atoi(string(fields[1]))
	if err != nil || pid <= 0 {
		return nil, fmt.Errorf("pid %q is not a process", fields[1])
	}
	f := &Frame{Name: string(fields[0]), PID: pid, Env: make(map[string]string, len(FrameEnv))}
	for i, name := range FrameEnv {
		f.Env[name] = string(fields[2+i])
	}
	f.NetNS = string(fields[2+len(FrameEnv)])
	switch f.NetNS {
	case "", NetNSSame, NetNSOther, NetNSNoSelf:
	default:
		return nil, fmt.Errorf("netns relation %q is none of %s, %s, %s", f.NetNS, NetNSSame, NetNSOther, NetNSNoSelf)
	}
	f.Stdin = fields[3+len(FrameEnv)]
	return f, nil
}
