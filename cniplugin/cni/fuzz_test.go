package cni

import (
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nicpool/nicpool/ipamd/api"
)

// FuzzParseConfig: whatever a runtime passes on stdin and in CNI_ARGS, parsing answers
// a config that satisfies its invariants or a CNI error with a code, and never panics.
// The seed corpus is in testdata/fuzz/FuzzParseConfig.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"n","type":"macvlan","ipam":{"type":"nicpool"}}`), podArgs)
	f.Fuzz(func(t *testing.T, stdin []byte, cniArgs string) {
		if _, err := ParseArgs(cniArgs); err != nil && err.Error() == "" {
			t.Errorf("CNI_ARGS error without a message")
		}
		c, err := ParseConfig(stdin)
		if err != nil {
			var e *types.Error
			if !errors.As(err, &e) || e.Code == 0 || e.Msg == "" {
				t.Fatalf("error %#v is not a CNI error with a code and a message", err)
			}
			return
		}
		if c.Network == "" || c.Timeout < api.MinRequestTimeout || c.Timeout > api.MaxRequestTimeout {
			t.Fatalf("config breaks its invariants: %+v", *c)
		}
		if _, ok := Beneath(RunDir, c.SocketPath); !ok && (c.SocketPath != "" || c.Refused == nil) {
			t.Fatalf("socket %q accepted outside %s", c.SocketPath, RunDir)
		}
		if _, ok := Beneath(LogDir, c.LogFile); !ok && c.LogFile != "" {
			t.Fatalf("log file %q accepted outside %s", c.LogFile, LogDir)
		}
		for _, a := range c.ValidAttachments {
			if a.ContainerID == "" || a.IfName == "" {
				t.Fatalf("incomplete attachment accepted: %+v", a)
			}
		}
		prev, err := c.PrevResult()
		if err != nil {
			var e *types.Error
			if !errors.As(err, &e) || e.Code == 0 {
				t.Fatalf("prevResult error %#v is not a CNI error", err)
			}
			return
		}
		if prev != nil {
			_, _ = ReservationFromResult(prev, "eth0")
		}
	})
}

// FuzzIPAMDAnswer: whatever ipamd answers to ADD or CHECK, the plugin turns it into a
// result in every supported version or an error, and never panics.
func FuzzIPAMDAnswer(f *testing.F) {
	f.Add([]byte(`{"interface":"net1","ips":[{"address":"10.6.0.7/16","gateway":"10.6.0.1","pool":"v4"},{"address":"fd00::7/64","gateway":"fd00::1","pool":"v6"}],"routes":[{"dst":"172.16.0.0/12","gw":"10.6.0.254"},{"dst":"0.0.0.0/0"}]}`))
	f.Add([]byte(`{"ips":[{"address":"10.6.0.7/16","gateway":"fd00::1"}],"cleanGateway":true}`))
	f.Add([]byte(`{"ips":[{"address":"::ffff:10.6.0.7/112","gateway":"10.6.0.1"}],"routes":[{"dst":"::/0","gw":"::ffff:1.2.3.4"}]}`))
	f.Add([]byte(`{"ips":[{"address":"::ffff:10.6.0.7/112"}]}`))
	f.Fuzz(func(t *testing.T, answer []byte) {
		var resp api.AllocateResponse
		if json.Unmarshal(answer, &resp) != nil {
			return
		}
		if r, err := BuildResult(&resp); err == nil {
			for _, v := range SupportedVersions.SupportedVersions() {
				_ = Print(io.Discard, r, v)
			}
			if _, err := ReservationFromResult(r, "net1"); err != nil {
				t.Errorf("a result the plugin built does not read back: %v", err)
			}
		}
		_, _ = ReservationFromIPAMD(resp.IPs)
	})
}
