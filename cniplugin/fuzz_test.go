package cniplugin

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
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
		if c.Network == "" || !filepath.IsAbs(c.SocketPath) || c.Timeout < time.Second || c.Timeout > MaxTimeout {
			t.Fatalf("config breaks its invariants: %+v", *c)
		}
		if c.LogFile != "" && !filepath.IsAbs(c.LogFile) {
			t.Fatalf("relative log file accepted: %q", c.LogFile)
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
