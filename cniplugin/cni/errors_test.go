package cni

import (
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/nicpool/nicpool/ipamd/api"
)

const podArgs = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web-0;K8S_POD_UID=uid-1;K8S_POD_INFRA_CONTAINER_ID=c1"

func TestGuardTurnsPanicsIntoErrors(t *testing.T) {
	err := guard("ADD", func() error { panic("nil map") })
	if cniCode(err) != types.ErrInternal || !strings.Contains(err.Error(), "nil map") {
		t.Errorf("guard: %v", err)
	}
}

func TestIPAMDMessagesAreNotRepeated(t *testing.T) {
	e := fromIPAMD("ADD", "/run/x.sock", &api.Error{Code: api.CodeTryAgainLater, Message: "pod a/b is not yet known: try again later"})
	if strings.Count(e.Msg, "try again") != 1 {
		t.Errorf("message repeats the advice: %q", e.Msg)
	}
	e = fromIPAMD("ADD", "/run/x.sock", &api.Error{Code: api.CodeTryAgainLater, Message: "caches not synced"})
	if !strings.Contains(e.Msg, "caches not synced: try again later") {
		t.Errorf("message lacks the advice: %q", e.Msg)
	}
}
